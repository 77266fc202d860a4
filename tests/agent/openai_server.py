"""A scripted OpenAI-compatible chat-completions server, on loopback, for tests and demos.

It speaks POST /v1/chat/completions over real HTTP and plays a script, one
step per request, in the order requests arrive. A step (a JSON object) is one of:

    {"reply": "text"}                      one choice
    {"reply": ["a", "b", "c"]}             one choice per text (as many as listed, whatever n asked for)
    {"status": 429, "retry_after": "0"}    an HTTP error; optional "body" (the error message), "code"
    {"drop": true}                         read the request, then close the connection without a reply

A bare string is short for {"reply": string}. A reply step may carry "usage":
{"prompt_tokens": .., "completion_tokens": ..} (else counted as characters / 4)
and "delay_s" (sleep before answering, to test timeouts and parallelism).
When the script runs out, every further request gets a 500 saying so.

Requests that the server refuses before the script (n > 1 when `supports_n`
is False, a parameter listed in `rejects`) get a 400 in OpenAI's format,
naming the parameter, and consume no step. Every request is recorded: its
JSON body and its Authorization header.

    python tests/agent/openai_server.py --script script.json --port 8765 [--no-n]
    # then: OPENAI_BASE_URL=http://127.0.0.1:8765/v1 OPENAI_API_KEY=x kgen optimize ...
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


@dataclass
class RecordedRequest:
    path: str
    body: dict            # the JSON the client sent ({} when it was not JSON)
    authorization: str    # the Authorization header, "" when absent


class ScriptedOpenAIServer:
    """A real HTTP server in a background thread, bound to 127.0.0.1 on a free port by default."""

    def __init__(self, script: list, *, supports_n: bool = True, rejects: tuple[str, ...] = (),
                 host: str = "127.0.0.1", port: int = 0, log: bool = False):
        self.script = [{"reply": step} if isinstance(step, str) else dict(step) for step in script]
        self.supports_n = supports_n
        self.rejects = tuple(rejects)    # request parameters answered with a 400
        self.log = log
        self.requests: list[RecordedRequest] = []
        self.max_in_flight = 0           # the most requests handled at once
        self._next_step = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer((host, port), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://{self._httpd.server_address[0]}:{self.port}/v1"

    @property
    def steps_played(self) -> int:
        return self._next_step

    def start(self) -> "ScriptedOpenAIServer":
        # A short poll interval: stop() waits up to one interval for the serving loop to notice.
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="openai-server", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until interrupted (the standalone server)."""
        try:
            self._httpd.serve_forever()
        finally:
            self._httpd.server_close()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "ScriptedOpenAIServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _take_step(self) -> dict | None:
        with self._lock:
            if self._next_step >= len(self.script):
                return None
            step = self.script[self._next_step]
            self._next_step += 1
            return step

    def _refusal(self, body: dict) -> str | None:
        """The parameter this server refuses before playing the script, if the request has one."""
        if not self.supports_n and (body.get("n") or 1) > 1:
            return "n"
        return next((param for param in self.rejects if param in body), None)

    def _handler_class(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, fmt, *args):
                if server.log:
                    sys.stderr.write("openai-server: " + fmt % args + "\n")

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    body = {}
                with server._lock:
                    server.requests.append(RecordedRequest(self.path, body, self.headers.get("Authorization", "")))
                    server._in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server._in_flight)
                try:
                    self._answer(body)
                finally:
                    with server._lock:
                        server._in_flight -= 1

            def _answer(self, body: dict):
                if self.path.rstrip("/") != "/v1/chat/completions":
                    return self._error(404, f"no route {self.path}; this server has /v1/chat/completions only")
                refused = server._refusal(body)
                if refused is not None:
                    return self._error(400, f"Unsupported parameter: '{refused}' is not supported by this server.",
                                       param=refused, kind="invalid_request_error")
                step = server._take_step()
                if step is None:
                    return self._error(500, f"script exhausted: all {len(server.script)} steps were played "
                                            f"and request {len(server.requests)} has none left")
                time.sleep(float(step.get("delay_s", 0)))
                if step.get("drop"):
                    self.close_connection = True   # no status line, no body: the client sees a broken connection
                    return None
                if "status" in step:
                    headers = {"Retry-After": str(step["retry_after"])} if "retry_after" in step else {}
                    return self._error(int(step["status"]), step.get("body", f"scripted HTTP {step['status']}"),
                                       code=step.get("code"), headers=headers)
                return self._reply(body, step)

            def _reply(self, body: dict, step: dict):
                texts = step["reply"] if isinstance(step["reply"], list) else [step["reply"]]
                prompt_chars = sum(len(str(m.get("content", ""))) for m in body.get("messages", []))
                usage = step.get("usage") or {
                    "prompt_tokens": prompt_chars // 4,
                    "completion_tokens": sum(len(t) for t in texts) // 4,
                }
                usage = {**usage, "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"]}
                self._json(200, {
                    "id": f"chatcmpl-scripted-{server.steps_played}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", "scripted"),
                    "choices": [
                        {"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                        for i, text in enumerate(texts)
                    ],
                    "usage": usage,
                })

            def _error(self, status: int, message: str, *, param=None, code=None, kind="server_error", headers=None):
                error = {"message": message, "type": kind, "param": param, "code": code}
                self._json(status, {"error": error}, headers)

            def _json(self, status: int, payload: dict, headers: dict | None = None):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        return Handler


def _main() -> int:
    parser = argparse.ArgumentParser(description="Serve a scripted OpenAI-compatible chat-completions endpoint.")
    parser.add_argument("--script", type=Path, required=True, help="JSON file: a list of steps")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--no-n", action="store_true", help="refuse n > 1, as some servers do")
    args = parser.parse_args()
    script = json.loads(args.script.read_text())
    if not isinstance(script, list):
        parser.error(f"{args.script}: the script must be a JSON list of steps")
    server = ScriptedOpenAIServer(script, supports_n=not args.no_n, host=args.host, port=args.port, log=True)
    print(f"serving {len(script)} steps at {server.base_url} (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
