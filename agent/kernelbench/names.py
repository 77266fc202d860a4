"""KernelBench's names: problem numbers, levels, numeric order, `--problems` selections, sample files.

    from agent.kernelbench.names import parse_problems, suite_tasks
    suite_tasks("KernelBench/level1", "1-20,23")    # the suite's tasks 1..20 and 23, in numeric order
    parse_problems("level2:1-5,7")                   # ranges, inclusive; level-qualified where the level matters

A KernelBench problem file is `{P}_{Name}.py` (`19_ReLU.py`) in a folder
`level{L}`; its generated kernels are `level_{L}_problem_{P}_sample_{S}_kernel.py`
(KernelBench's generate_samples.py and eval_from_generations.py). A folder is
ordered by problem number, as KernelBench orders it (1, 2, ..., 10, ..., 100),
not as text (1, 10, 100, 11, ...); a suite given as a list keeps its order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

_PROBLEM = re.compile(r"^(\d+)_")
_LEVEL_DIR = re.compile(r"^level_?(\d+)$", re.IGNORECASE)
_SAMPLE = re.compile(r"^level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py$")
_ITEM = re.compile(r"^(?:(?:level|l)\s*(\d+)\s*:)?\s*(\d+)\s*(?:-\s*(\d+))?$", re.IGNORECASE)
PROBLEMS_EXAMPLE = "1-20,23 (or level2:1-5)"


def problem_number(path: str | Path) -> int | None:
    """The KernelBench problem number a task file's name starts with (19 for 19_ReLU.py), None when none."""
    m = _PROBLEM.match(Path(path).name)
    return int(m.group(1)) if m else None


def task_level(path: str | Path) -> int | None:
    """The KernelBench level of a task file from its folder's name (level1, level_2), None when not so named."""
    m = _LEVEL_DIR.match(Path(path).parent.name)
    return int(m.group(1)) if m else None


def natural_key(path: str | Path) -> tuple:
    """Sort key: the name's digit runs compare as numbers (2_x < 10_x < 100_x), the rest as text."""
    parts = re.split(r"(\d+)", Path(path).name)
    # re.split with a group alternates text and digits, so the same position holds the same kind in every key
    return tuple(int(p) if i % 2 else p.lower() for i, p in enumerate(parts)), str(path)


def sort_problems(paths: Iterable[Path]) -> list[Path]:
    """Task files in numeric order of their names (KernelBench's order)."""
    return sorted(paths, key=natural_key)


# ---- --problems ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProblemRange:
    """first..last inclusive, of one level or (level None) of any."""

    first: int
    last: int
    level: int | None = None
    text: str = ""              # the item as given, for messages

    def holds(self, level: int | None, number: int) -> bool:
        return self.first <= number <= self.last and (self.level is None or self.level == level)


@dataclass(frozen=True)
class ProblemSelection:
    """A parsed `--problems`: the union of its ranges."""

    spec: str
    ranges: tuple[ProblemRange, ...]

    def holds(self, level: int | None, number: int | None) -> bool:
        return number is not None and any(r.holds(level, number) for r in self.ranges)


def parse_problems(spec: str) -> ProblemSelection:
    """`1-20,23`, `level2:1-5,7`: ranges inclusive, by the leading problem number. ValueError for a bad spec."""
    if not spec or not spec.strip():
        raise ValueError(f"--problems is empty: give problem numbers, e.g. {PROBLEMS_EXAMPLE}")
    ranges = []
    for raw in spec.split(","):
        item = raw.strip()
        if not item:
            raise ValueError(f"--problems {spec!r}: an empty item between commas; e.g. {PROBLEMS_EXAMPLE}")
        m = _ITEM.match(item)
        if not m:
            raise ValueError(f"--problems: {item!r} is not a problem number or a range of them; "
                             f"e.g. {PROBLEMS_EXAMPLE}")
        level = int(m.group(1)) if m.group(1) else None
        first = int(m.group(2))
        last = int(m.group(3)) if m.group(3) else first
        if first < 1 or (level is not None and level < 1):
            raise ValueError(f"--problems: {item!r}: KernelBench numbers problems and levels from 1")
        if first > last:
            raise ValueError(f"--problems: {item!r} runs backwards; write the smaller number first ({last}-{first})")
        ranges.append(ProblemRange(first, last, level, item))
    return ProblemSelection(spec, tuple(ranges))


def select_problems(paths: list[Path], selection: ProblemSelection, suite: str | Path = "the suite") -> list[Path]:
    """The tasks of `paths` the selection holds, in their order. ValueError when a task has no problem
    number, or when an item of the selection holds no task (a typo must not pass as an empty board)."""
    unnumbered = [p.name for p in paths if problem_number(p) is None]
    if unnumbered:
        shown = ", ".join(unnumbered[:3]) + (f" and {len(unnumbered) - 3} more" if len(unnumbered) > 3 else "")
        raise ValueError(f"--problems selects by KernelBench problem number (the number a task file's name starts "
                         f"with, as in 19_ReLU.py); {suite} has tasks without one: {shown}")
    keys = [(task_level(p), problem_number(p)) for p in paths]
    for r in selection.ranges:
        if not any(r.holds(level, number) for level, number in keys):
            where = f"level {r.level} " if r.level is not None else ""
            hint = ("; a level is read from the task's folder name (level1, level2)"
                    if r.level is not None and all(level is None for level, _ in keys) else "")
            raise ValueError(f"--problems: {r.text!r} holds no {where}problem of {suite}{hint}")
    return [p for p, (level, number) in zip(paths, keys) if selection.holds(level, number)]


def suite_tasks(suite: str | Path, problems: str | None = None) -> list[Path]:
    """A suite's task files as a board takes them: a folder in numeric order, a list in its own order, then
    the `--problems` selection. TaskError for a suite that cannot be read, ValueError for a bad selection."""
    from verifier.task import load_suite

    paths = load_suite(suite)
    if Path(suite).is_dir():
        paths = sort_problems(paths)
    if problems is not None:
        paths = select_problems(paths, parse_problems(problems), suite)
    return paths


# ---- sample files --------------------------------------------------------------------------------


@dataclass(frozen=True)
class SampleName:
    """A kernel KernelBench generated: `level_{level}_problem_{problem}_sample_{sample}_kernel.py`."""

    level: int
    problem: int
    sample: int
    path: Path


def parse_sample_name(path: str | Path) -> SampleName | None:
    """The level, problem and sample of a KernelBench sample file, None for any other name."""
    m = _SAMPLE.match(Path(path).name)
    if not m:
        return None
    return SampleName(int(m.group(1)), int(m.group(2)), int(m.group(3)), Path(path))


def sample_file_name(level: int, problem: int, sample: int) -> str:
    return f"level_{level}_problem_{problem}_sample_{sample}_kernel.py"


def outside_selection(stored_tasks: Iterable[str], task_paths: list[Path]) -> list[str]:
    """The tasks of a stored board that a --problems selection leaves out: resuming the board with it would drop
    their rows (a board keeps the rows of the tasks it is run with), so the caller refuses it."""
    chosen = {p.stem for p in task_paths}
    return [t for t in stored_tasks if t not in chosen]
