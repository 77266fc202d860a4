"""The results store: every run and attempt as files, indexed in SQLite.

Layout under the results root (`results/` by default, `$KGEN_RESULTS` or
`OptimizeConfig.results_dir` to move it):

    results/
      kgen.sqlite                      index: tables runs and attempts (what listings need)
      checkpoints.sqlite               the loop's LangGraph checkpoints (thread id = run id)
      <task>/<run-id>/
        run.json                       the Run: config (secrets scrubbed), model, GPU, timings, status, best
        best.py                        the best passing kernel
        attempt-001/
          attempt.json                 the Attempt, without its verdict and profile (those are below)
          kernel.py                    the candidate ("no_code" attempts have none)
          verify.json                  VerifyResult.to_dict()
          profile.json, profile.txt    Diagnosis.to_dict() and .to_text(), when it was profiled
          prompt.md, response.md       what the proposer asked and got back

The files are the record; the SQLite index is rebuilt from them by
`Store.reindex()` when it is lost. Every text written passes through
`redact()`, which replaces the values of secret-looking environment variables
(OPENAI_API_KEY and the like), so an API key cannot reach the results even if
a reply or a candidate's output carried it.

    from agent.store import Store
    store = Store("results")
    for run in store.list_runs(task="softmax"):
        print(run.run_id, run.status, run.best_speedup)

Over 450 lines on purpose: one class, Store, whose files and SQLite index must be written in step
(and reindexed together), with the redaction every write goes through.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import secrets
import sqlite3
import tempfile
import time
import zlib
from contextlib import closing
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from agent.records import Attempt, Run
from profiler.records import Diagnosis

INDEX_NAME = "kgen.sqlite"
CHECKPOINTS_NAME = "checkpoints.sqlite"

# Config keys whose values are dropped before a config is stored.
_SECRET_KEY = re.compile(r"(api[_-]?key|token(?!s)|secret|password|passwd|credential|auth)", re.IGNORECASE)
# Environment variables whose values are redacted from every file the store writes.
_SECRET_ENV = re.compile(r"(API[_-]?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.IGNORECASE)
_MIN_SECRET_LEN = 8   # shorter values ("1", "true") would redact ordinary text
REDACTED = "<redacted>"

# The index's runs table: one column per Run field (config as JSON), so that a field added to Run gets its
# column; the version below changes with it and an older index is rebuilt from the files.
_RUN_EXTRA_COLUMNS = ("dir TEXT NOT NULL", "config_json TEXT")
_ATTEMPTS_TABLE = """
CREATE TABLE IF NOT EXISTS attempts (
    run_id TEXT NOT NULL,
    number INTEGER NOT NULL,
    round INTEGER,
    status TEXT NOT NULL,
    reason TEXT,
    median_ms REAL,
    speedup REAL,
    speedup_eager REAL,
    speedup_compile REAL,
    speedups_json TEXT,
    floor_ms REAL,
    sol_pct REAL,
    bound TEXT,
    top_stall TEXT,
    note TEXT,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    cost_usd REAL,
    kernel_path TEXT,
    started_at TEXT,
    finished_at TEXT,
    PRIMARY KEY (run_id, number)
)"""


def _sql_type(annotation: str) -> str:
    if "float" in annotation:
        return "REAL"
    if "int" in annotation:
        return "INTEGER"
    return "TEXT"


def run_columns() -> tuple[str, ...]:
    """The Run fields the runs table holds, in order (config is stored as config_json; phases in run.json only)."""
    return tuple(f.name for f in dataclasses.fields(Run) if f.name not in ("config", "phases"))


def index_schema() -> list[str]:
    """The index's CREATE statements, as Run's fields make them now."""
    types = {f.name: str(f.type) for f in dataclasses.fields(Run)}
    columns = [f"{name} {_sql_type(types[name])}" + (" PRIMARY KEY" if name == "run_id" else "")
               for name in run_columns()]
    runs = "CREATE TABLE IF NOT EXISTS runs (\n    " + ",\n    ".join(columns + list(_RUN_EXTRA_COLUMNS)) + "\n)"
    return [runs, "CREATE INDEX IF NOT EXISTS runs_task ON runs (task, started_at)", _ATTEMPTS_TABLE]


def schema_version() -> int:
    """`PRAGMA user_version` of an index made by this kgen: it changes whenever the schema does."""
    return zlib.crc32("\n".join(index_schema()).encode()) & 0x7FFFFFFF or 1


def utc_now() -> str:
    """The current time as ISO 8601 in UTC, to the second."""
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


def new_run_id(task_name: str, now: float | None = None) -> str:
    """A run id that sorts by start time and does not collide: 20261129-134501-matmul-a1b2."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(time.time() if now is None else now))
    safe = re.sub(r"[^A-Za-z0-9_.]+", "_", task_name).strip("_") or "task"
    return f"{stamp}-{safe}-{secrets.token_hex(2)}"


def secret_values(env: Mapping[str, str] | None = None) -> list[str]:
    """Values of the environment's secret-looking variables, longest first."""
    env = os.environ if env is None else env
    found = {v for k, v in env.items() if _SECRET_ENV.search(k) and v and len(v) >= _MIN_SECRET_LEN}
    return sorted(found, key=len, reverse=True)


def redact(text: str, secrets_: Iterable[str] | None = None) -> str:
    """Replace every secret value in text by <redacted>."""
    for value in secret_values() if secrets_ is None else secrets_:
        if value in text:
            text = text.replace(value, REDACTED)
    return text


def scrub_url(url: str) -> str:
    """Drop credentials from a URL: user:password@ and key-like query parameters."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return REDACTED
    netloc = parts.netloc.rsplit("@", 1)[-1]
    query = urlencode([(k, REDACTED if _SECRET_KEY.search(k) else v)
                       for k, v in parse_qsl(parts.query, keep_blank_values=True)])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def scrub_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a config safe to store: secret-named keys removed, URLs without credentials."""
    clean: dict[str, Any] = {}
    for key, value in config.items():
        if _SECRET_KEY.search(str(key)):
            continue
        if isinstance(value, Mapping):
            value = scrub_config(value)
        elif isinstance(value, str) and "://" in value:
            value = scrub_url(value)
        clean[key] = value
    return clean


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _current_umask()   # read once, at import: os.umask can only be read by setting it


def _write_text(path: Path, text: str) -> None:
    """Write a file atomically (a crash leaves the old file or the new one, never half of one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(redact(text))
        # NOTE: mkstemp makes the file 0600; a result is an ordinary file, readable as the user's umask allows
        os.chmod(tmp, 0o666 & ~_UMASK)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_json(path: Path, data: Any) -> None:
    _write_text(path, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


class Store:
    """Reads and writes runs and attempts under one results root."""

    def __init__(self, root: str | Path = "results"):
        self.root = Path(root)
        self.index_path = self.root / INDEX_NAME
        self.checkpoints_path = self.root / CHECKPOINTS_NAME
        self._checked = False       # the index's schema version was checked by this Store

    # ---- the index ---------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        self.root.mkdir(parents=True, exist_ok=True)
        # NOTE: several kgen processes may write one index (a leaderboard next to an optimize run):
        # a generous busy timeout instead of failing on a lock.
        if not self._checked or not self.index_path.exists():
            self._checked = True
            if self._prepare_index():
                self.reindex()
        conn = sqlite3.connect(self.index_path, timeout=30.0)
        conn.row_factory = sqlite3.Row
        return conn

    def _prepare_index(self) -> bool:
        """Make the index current; True when it was made anew (missing, or of another schema version) and
        must be filled from the files."""
        conn = sqlite3.connect(self.index_path, timeout=30.0, isolation_level=None)
        try:
            # WAL: readers (kgen show, a board's runner) never block the writers of a running loop
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("BEGIN IMMEDIATE")   # one process at a time decides, and rebuilds
            version = schema_version()
            if conn.execute("PRAGMA user_version").fetchone()[0] == version:
                conn.execute("COMMIT")
                return False
            # NOTE: the files are the record: the index is dropped and rebuilt from them, never migrated
            conn.execute("DROP TABLE IF EXISTS runs")
            conn.execute("DROP TABLE IF EXISTS attempts")
            for statement in index_schema():
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {version}")
            conn.execute("COMMIT")
            return True
        finally:
            conn.close()

    def _index_run(self, run: Run) -> None:
        data = run.to_dict()
        row = {name: data[name] for name in run_columns()}
        config = data["config"]
        row["dir"] = str(self.run_dir(run).relative_to(self.root))
        row["config_json"] = redact(json.dumps(config, default=str))
        row["stop_reason"] = redact(row["stop_reason"])
        cols = ", ".join(row)
        marks = ", ".join(f":{c}" for c in row)
        with closing(self._connect()) as conn, conn:
            conn.execute(f"INSERT OR REPLACE INTO runs ({cols}) VALUES ({marks})", row)

    def _index_attempt(self, attempt: Attempt) -> None:
        speedups = attempt.speedups
        compile_speedups = [v for k, v in speedups.items() if k.startswith("compile")]
        row = {
            "run_id": attempt.run_id, "number": attempt.number, "round": attempt.round,
            "status": attempt.status, "reason": redact(attempt.reason),
            "median_ms": attempt.median_ms, "speedup": attempt.speedup,
            "speedup_eager": speedups.get("eager"),
            # the faster compile mode is the one to beat
            "speedup_compile": min(compile_speedups) if compile_speedups else None,
            "speedups_json": json.dumps(speedups), "floor_ms": attempt.floor_ms, "sol_pct": attempt.sol_pct,
            "bound": attempt.bound, "top_stall": attempt.top_stall, "note": redact(attempt.note),
            "prompt_tokens": attempt.prompt_tokens, "completion_tokens": attempt.completion_tokens,
            "cost_usd": attempt.cost_usd, "kernel_path": attempt.source_path,
            "started_at": attempt.started_at, "finished_at": attempt.finished_at,
        }
        cols = ", ".join(row)
        marks = ", ".join(f":{c}" for c in row)
        with closing(self._connect()) as conn, conn:
            conn.execute(f"INSERT OR REPLACE INTO attempts ({cols}) VALUES ({marks})", row)

    def reindex(self) -> int:
        """Rebuild the SQLite index from the files; returns the number of runs found."""
        count = 0
        for run_json in sorted(self.root.glob("*/*/run.json")):
            run = Run.from_dict(json.loads(run_json.read_text(encoding="utf-8")))
            self._index_run(run)
            for attempt in self.load_attempts(run.run_id):
                self._index_attempt(attempt)
            count += 1
        return count

    # ---- paths -------------------------------------------------------------------------------

    def run_dir(self, run: Run | str) -> Path:
        """Where a run's files live (the run, or the id of a stored run)."""
        if isinstance(run, Run):
            return self.root / run.task / run.run_id
        found = self._find_run_dir(run)
        if found is None:
            raise KeyError(f"no run {run} under {self.root}")
        return found

    def _find_run_dir(self, run_id: str) -> Path | None:
        if self.index_path.exists():
            with closing(self._connect()) as conn:
                row = conn.execute("SELECT dir FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if row is not None and (self.root / row["dir"] / "run.json").exists():
                return self.root / row["dir"]
        # the index may be missing or stale (a copied results folder): the files decide
        for path in self.root.glob(f"*/{run_id}/run.json"):
            return path.parent
        return None

    def attempt_dir(self, run: Run | str, number: int) -> Path:
        return self.run_dir(run) / f"attempt-{number:03d}"

    def relative(self, path: Path) -> str:
        return str(path.relative_to(self.root))

    # ---- writing -----------------------------------------------------------------------------

    def create_run(self, run: Run) -> Path:
        """Write a new run's folder and index row; the run id must be new."""
        if self._find_run_dir(run.run_id) is not None:
            raise FileExistsError(f"run {run.run_id} already exists under {self.root}")
        run.config = scrub_config(run.config)
        self.save_run(run)
        return self.run_dir(run)

    def save_run(self, run: Run) -> None:
        run.config = scrub_config(run.config)
        _write_json(self.run_dir(run) / "run.json", run.to_dict())
        self._index_run(run)

    def save_best(self, run: Run, source: str) -> Path:
        path = self.run_dir(run) / "best.py"
        _write_text(path, source)
        return path

    def drop_best(self, run: Run) -> None:
        """Remove best.py (the run's best kernel was rejected after the fact, and none is left)."""
        (self.run_dir(run) / "best.py").unlink(missing_ok=True)

    def save_attempt(self, run: Run, attempt: Attempt, *, source: str | None,
                     prompt: str = "", response: str = "") -> Path:
        """Write one attempt's files and index row, as soon as its verdict is known."""
        folder = self.attempt_dir(run, attempt.number)
        folder.mkdir(parents=True, exist_ok=True)
        if source is not None:
            _write_text(folder / "kernel.py", source)
            attempt.source_path = self.relative(folder / "kernel.py")
        if prompt:
            _write_text(folder / "prompt.md", prompt)
        if response:
            _write_text(folder / "response.md", response)
        if attempt.verify is not None:
            _write_json(folder / "verify.json", attempt.verify.to_dict())
        if attempt.profile is not None:
            _write_json(folder / "profile.json", attempt.profile.to_dict())
        record = attempt.to_dict()
        record.pop("verify")
        record.pop("profile")
        _write_json(folder / "attempt.json", record)
        self._index_attempt(attempt)
        return folder

    def save_profile(self, run: Run, number: int, profile: Diagnosis, text: str = "") -> None:
        """Attach a profile (and its to_text()) to a stored attempt."""
        folder = self.attempt_dir(run, number)
        _write_json(folder / "profile.json", profile.to_dict())
        if text:
            _write_text(folder / "profile.txt", text)
        attempt = self.load_attempt(run.run_id, number)
        if attempt is not None:
            self._index_attempt(attempt)

    # ---- reading -----------------------------------------------------------------------------

    def load_run(self, run_id: str) -> Run:
        folder = self.run_dir(run_id)
        return Run.from_dict(json.loads((folder / "run.json").read_text(encoding="utf-8")))

    def load_attempt(self, run_id: str, number: int) -> Attempt | None:
        """A stored attempt with its verdict and profile, or None when it was never stored."""
        folder = self.attempt_dir(run_id, number)
        record_path = folder / "attempt.json"
        if not record_path.exists():
            return None
        data = json.loads(record_path.read_text(encoding="utf-8"))
        for key, name in (("verify", "verify.json"), ("profile", "profile.json")):
            path = folder / name
            data[key] = json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
        return Attempt.from_dict(data)

    def load_attempts(self, run_id: str) -> list[Attempt]:
        folder = self.run_dir(run_id)
        attempts = []
        for sub in sorted(folder.glob("attempt-*")):
            try:
                number = int(sub.name.split("-", 1)[1])
            except ValueError:
                continue
            attempt = self.load_attempt(run_id, number)
            if attempt is not None:
                attempts.append(attempt)
        return attempts

    def attempt_text(self, run_id: str, number: int, name: str) -> str | None:
        """One of an attempt's text files ("kernel.py", "prompt.md", "response.md"), None when absent."""
        path = self.attempt_dir(run_id, number) / name
        return path.read_text(encoding="utf-8") if path.exists() else None

    def best_source(self, run_id: str) -> str | None:
        path = self.run_dir(run_id) / "best.py"
        return path.read_text(encoding="utf-8") if path.exists() else None

    def list_runs(self, task: str | None = None, status: str | None = None,
                  limit: int | None = None) -> list[Run]:
        """Runs from the index, newest first, optionally for one task and/or status."""
        if not self.index_path.exists():
            return []
        where, params = [], []
        if task is not None:
            where.append("task = ?")
            params.append(task)
        if status is not None:
            where.append("status = ?")
            params.append(status)
        sql = "SELECT * FROM runs" + (" WHERE " + " AND ".join(where) if where else "")
        sql += " ORDER BY run_id DESC" + (f" LIMIT {int(limit)}" if limit else "")
        with closing(self._connect()) as conn:
            rows = conn.execute(sql, params).fetchall()
        runs = []
        for row in rows:
            data = dict(row)
            data["config"] = json.loads(data.pop("config_json") or "{}")
            data.pop("dir")
            runs.append(Run.from_dict(data))
        return runs

    def attempt_rows(self, run_id: str) -> list[dict[str, Any]]:
        """The index's rows for a run's attempts, in order (cheap: no JSON files read)."""
        if not self.index_path.exists():
            return []
        with closing(self._connect()) as conn:
            rows = conn.execute("SELECT * FROM attempts WHERE run_id = ? ORDER BY number", (run_id,)).fetchall()
        return [dict(r) for r in rows]

    def resolve_run_id(self, text: str) -> str:
        """A stored run id from an id, a unique prefix of one, or "latest"."""
        runs = self.list_runs()
        if text == "latest":
            if not runs:
                raise KeyError(f"no runs under {self.root}")
            return runs[0].run_id
        ids = [r.run_id for r in runs]
        if text in ids or self._find_run_dir(text) is not None:
            return text
        matches = [i for i in ids if i.startswith(text)]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise KeyError(f"no run {text} under {self.root}")
        raise KeyError(f"{text} matches {len(matches)} runs: {', '.join(matches[:5])}")
