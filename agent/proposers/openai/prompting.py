"""Renders the chat messages an LLM proposer sends: a system prompt and one round's prompt.

The text lives in templates under prompts/ beside it (`string.Template`,
`$placeholders`): system.md states the candidate contract and the reply
format, backend_<backend>.md how to write kernels for the requested backend
with a worked example, round.md what the loop knows this round. This module
only fills them in.

A prompt has a budget in characters. When the round's detail does not fit,
the oldest detail goes first: the feedback and code of the oldest failed
attempts, then the oldest lines of the attempt list, then the best kernel's
source. The reference's source is always kept.

    python -m agent.proposers.openai.prompting TASK.py [--backend cuda]   # print the first round's prompt for a task
"""

from __future__ import annotations

import functools
import re
import string
from dataclasses import dataclass, field
from pathlib import Path

from agent.analysis import Analysis
from agent.proposers.base import AttemptSummary, ProposeContext
from verifier.records import NOT_CHECKED_HERE

PROMPTS_DIR = Path(__file__).parent / "prompts"
BACKENDS = ("triton", "cuda")

MAX_ATTEMPT_LINES = 40        # older attempts are counted, not listed
MIN_REPAIR_WINDOW = 3         # failures among the last max(n, this) attempts get their feedback shown
MAX_FEEDBACK_CHARS = 4000     # per failed attempt; the verifier caps its own feedback too
MAX_LINE_CHARS = 400          # per attempt line and per analysis line

# Unit suffixes of analysis keys: "median_ms" renders as "median: 0.0123 ms".
_UNIT_SUFFIXES = (
    ("_ms", " ms"), ("_us", " µs"), ("_s", " s"), ("_gbps", " GB/s"),
    ("_tflops", " TFLOP/s"), ("_pct", "%"), ("_kib", " KiB"), ("_mib", " MiB"), ("_gib", " GiB"),
)

# Labels for the analysis keys agent/graph.py writes; any other key is shown under its own name.
_LABELS = {
    "gpu": "GPU",
    "sol_ms": "speed-of-light time (the slower of all FLOPs at peak rate and all bytes at full bandwidth)",
    "floor_ms": "roofline floor (a time below it is rejected as impossible)",
    "peaks": "peak rates",
    "bytes": "bytes moved at least",
    "flops_by_op": "FLOPs by op",
    "checked_on": "correctness checked on",
    "baselines": "baseline times",
}


@functools.cache
def template(name: str) -> string.Template:
    """A prompt template from prompts/."""
    return string.Template((PROMPTS_DIR / name).read_text())


def render_system(backend: str) -> str:
    """The system prompt: the contract, the reply format, the backend's rules and example."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    section = template(f"backend_{backend}.md").substitute()
    return template("system.md").substitute(backend_section=section.strip())


def fenced(code: str, lang: str = "python") -> str:
    """A fenced markdown block whose fence is longer than any backtick run inside the code."""
    longest = max((len(run) for run in re.findall(r"`{3,}", code)), default=2)
    fence = "`" * (longest + 1)
    return f"{fence}{lang}\n{code.rstrip()}\n{fence}"


def _cap(text: str, limit: int) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    return text[:limit].rstrip() + f"\n… ({len(text) - limit} more characters cut)"


def _si(value: float, unit: str) -> str:
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def _number_text(key: str, value: float) -> str | None:
    """The number with the unit its key names, or None when the key names none."""
    for suffix, unit in _UNIT_SUFFIXES:
        if key.endswith(suffix):
            return f"{value:.4g}{unit}"
    if "flops" in key:
        return _si(value, "FLOP")
    if "bytes" in key:
        return _si(value, "B")
    return None


def _label(key: str) -> str:
    if key in _LABELS:
        return _LABELS[key]
    for suffix, _ in _UNIT_SUFFIXES:
        if key.endswith(suffix):
            key = key[: -len(suffix)]
            break
    return key.replace("_", " ")


def _format_value(value: object, key: str = "") -> str:
    """A value for the prompt; numbers get the unit their key, or the enclosing key, names."""
    if value is None:
        return "unknown"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _number_text(key, value) or (f"{value:.4g}" if isinstance(value, float) else str(value))
    if isinstance(value, dict):
        if "median_ms" in value:  # a Timing, or its JSON
            return _format_value(value["median_ms"], "median_ms")
        parts = []
        for inner, item in value.items():
            if inner == "name":
                continue
            # "flops_by_op": {"aten.mm": 1.7e10} takes its unit from the enclosing key.
            unit_key = str(inner) if _number_text(str(inner), 0) is not None else key
            parts.append(f"{_label(str(inner))} {_format_value(item, unit_key)}")
        if "name" in value:
            return f"{value['name']} ({', '.join(parts)})" if parts else str(value["name"])
        return ", ".join(parts)
    if isinstance(value, (list, tuple)):
        if all(isinstance(item, (int, float, str)) for item in value):
            return "[" + ", ".join(_format_value(item, key) for item in value) + "]"
        return "; ".join(_format_value(item, key) for item in value)
    return str(value)


def render_analysis(analysis: Analysis) -> str:
    """The analysis as a markdown list; what it lacks (no GPU, no timings) is said plainly."""
    lines = []
    if not analysis.gpu:
        lines.append("- GPU: none here; candidates are checked for correctness only, nothing is timed")
    shapes, dtypes = analysis.shapes, analysis.dtypes
    paired = shapes is not None and dtypes is not None and len(shapes) == len(dtypes)
    if paired:
        inputs = [f"{_format_value(s)} {d}" if s is not None else str(d) for s, d in zip(shapes, dtypes)]
        lines.append(_cap("- inputs: " + "; ".join(inputs), MAX_LINE_CHARS))
    # NOTE: the JSON form holds only what is known, in the order a reader wants it
    for key, value in analysis.to_dict().items():
        if paired and key in ("shapes", "dtypes"):
            continue  # said above
        lines.append(_cap(f"- {_label(key)}: {_format_value(value, key)}", MAX_LINE_CHARS))
    if not analysis.baselines_ms:
        lines.append("- baseline times: not measured")
    return "\n".join(lines)


def _time_text(median_ms: float | None, speedup: float | None) -> str:
    parts = []
    if median_ms is not None:
        parts.append(f"{median_ms:.4g} ms")
    if speedup is not None:
        parts.append(f"{speedup:.3g}× the faster baseline")
    return ", ".join(parts)


def attempt_line(attempt: AttemptSummary) -> str:
    """One attempt as the attempt list shows it: number, status, time, reason."""
    timed = _time_text(attempt.median_ms, attempt.speedup)
    line = f"- #{attempt.number} {attempt.status}" + (f" ({timed})" if timed else "") + f": {attempt.reason}"
    if attempt.status in NOT_CHECKED_HERE:
        line += " (this machine could not check it: not a fault of the kernel)"
    if attempt.note:
        line += f" [{attempt.note}]"
    return _cap(line, MAX_LINE_CHARS).replace("\n", " ")


@dataclass
class RoundView:
    """What round.md will show, and how much of it: trimmed step by step to fit a budget."""

    ctx: ProposeContext
    repairs: list[AttemptSummary]               # the latest failures, oldest first
    show_source: list[bool] = field(default_factory=list)
    show_feedback: list[bool] = field(default_factory=list)
    hidden_lines: int = 0                       # oldest attempts not listed
    show_best_source: bool = True

    @classmethod
    def of(cls, ctx: ProposeContext) -> "RoundView":
        window = ctx.history[-max(ctx.n, MIN_REPAIR_WINDOW):]
        # NOTE: a kernel this machine could not check (NOT_CHECKED_HERE) did nothing wrong: nothing to repair
        repairs = [a for a in window if a.status != "ok" and a.status not in NOT_CHECKED_HERE]
        return cls(
            ctx=ctx,
            repairs=repairs,
            show_source=[bool(a.source) for a in repairs],
            show_feedback=[bool(a.feedback.strip()) for a in repairs],
            hidden_lines=max(0, len(ctx.history) - MAX_ATTEMPT_LINES),
        )

    def trims(self):
        """Yield after each step that drops one piece of detail, oldest detail first."""
        for i in range(len(self.repairs)):
            for shown in (self.show_source, self.show_feedback):
                if shown[i]:
                    shown[i] = False
                    yield
        while self.hidden_lines < len(self.ctx.history):
            self.hidden_lines += 1
            yield
        if self.show_best_source and self.ctx.best_source:
            self.show_best_source = False
            yield

    def render(self) -> str:
        ctx = self.ctx
        return template("round.md").substitute(
            round=ctx.round,
            task_name=ctx.task_name,
            backend=ctx.backend,
            task_source=fenced(ctx.task_source),
            analysis=render_analysis(ctx.analysis),
            best=self._best(),
            attempts=self._attempts(),
            repairs=self._repairs(),
            diagnosis=self._diagnosis(),
        )

    def _best(self) -> str:
        ctx = self.ctx
        if ctx.best_source is None:
            return "None yet: no candidate has passed."
        timed = _time_text(ctx.best_ms, ctx.best_speedup) or "correct, not timed"
        head = f"It passed: {timed}." + (f" {ctx.best_note}" if ctx.best_note else "")
        if not self.show_best_source:
            return head + "\n\n(Its source is left out to fit the prompt.)"
        return head + "\n\n" + fenced(ctx.best_source)

    def _attempts(self) -> str:
        history = self.ctx.history
        if not history:
            return "None yet: this is the first round."
        lines = [attempt_line(a) for a in history[self.hidden_lines:]]
        if self.hidden_lines:
            lines.insert(0, f"- ({self.hidden_lines} earlier attempts not listed)")
        return "\n".join(lines)

    def _repairs(self) -> str:
        parts = []
        for attempt, source, feedback in zip(self.repairs, self.show_source, self.show_feedback):
            if not (source or feedback):
                continue
            part = f"### Attempt #{attempt.number}: {attempt.status}\n\n{attempt.reason}"
            if feedback:
                part += "\n\nThe verifier said:\n\n" + fenced(_cap(attempt.feedback, MAX_FEEDBACK_CHARS), "text")
            if source:
                part += "\n\nIts code:\n\n" + fenced(attempt.source)
            parts.append(part)
        if parts:
            return "\n\n".join(parts)
        if any(a.source or a.feedback.strip() for a in self.repairs):
            return "Listed above; their feedback and code are left out to fit the prompt."
        if self.repairs:
            return "Listed above; the verifier gave no more detail."
        return "None: the latest attempts did not fail." if self.ctx.history else "None yet."

    def _diagnosis(self) -> str:
        if self.ctx.diagnosis_text:
            return self.ctx.diagnosis_text.strip()
        if self.ctx.best_source is None:
            return "None yet: no kernel has passed, so none was profiled."
        return "Not available for the best kernel."


def render_messages(ctx: ProposeContext, budget_chars: int = 24000) -> list[dict]:
    """The chat messages for one round, within budget_chars where dropping detail allows."""
    system = render_system(ctx.backend)
    view = RoundView.of(ctx)
    user = view.render()
    user += _inductor_seed_section(ctx, budget_chars - len(system) - len(user))
    if len(system) + len(user) > budget_chars:
        # NOTE: the reference's source is never trimmed, so a huge task can still exceed the budget.
        for _ in view.trims():
            user = view.render()
            if len(system) + len(user) <= budget_chars:
                break
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _inductor_seed_section(ctx: ProposeContext, room_chars: int) -> str:
    """Round one, when KGEN_INDUCTOR_SEED_PROMPT=1: Inductor's kernels for the task (where they fit), to beat."""
    import os

    from agent.proposers.heuristic.inductor_emit import PROMPT_SEED_ENV, prompt_section

    if ctx.round != 1 or os.environ.get(PROMPT_SEED_ENV) != "1" or room_chars <= 0:
        return ""
    section = prompt_section(ctx.task_source, max_chars=room_chars - 2)
    return "\n\n" + section if section else ""


def messages_markdown(messages: list[dict]) -> str:
    """The messages as one markdown document, as a run stores it (prompt.md)."""
    return "\n\n".join(f"# {m['role']}\n\n{m['content'].strip()}" for m in messages) + "\n"


def _main() -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Print the first round's prompt for a task.")
    parser.add_argument("task", type=Path)
    parser.add_argument("--backend", choices=BACKENDS, default="triton")
    parser.add_argument("--budget", type=int, default=24000, help="prompt budget, characters")
    args = parser.parse_args()
    ctx = ProposeContext(
        task_name=args.task.stem, task_source=args.task.read_text(), backend=args.backend,
        analysis=Analysis(), round=1, n=1,
    )
    print(messages_markdown(render_messages(ctx, args.budget)))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
