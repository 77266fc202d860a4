"""A board's files: where boards live, loading and saving them, resuming one under its name, kernels to score.

    from agent.board.files import load_board, save_board
    board = load_board("results", "nightly")     # None when there is no such board
    save_board("results", board)                 # leaderboard.json and leaderboard.md, atomically

A board lives in `<results>/leaderboards/<name>/`: `leaderboard.json` (the
rows, the settings, the summary), `leaderboard.md`, `logs/<task>.log` (each
task's progress and errors), `jobs/` (what each worker was asked, and the
run id it started) and `.lock` (held while the board or any of its tasks
runs, so two sessions never run one board at once).
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any, Iterable

from agent.board.records import LeaderboardError, Leaderboard, Row
from agent.board.render import to_markdown
from agent.config import STORED_BEFORE
from agent.store import scrub_config, utc_now

LEADERBOARDS_DIR = "leaderboards"
BOARD_JSON = "leaderboard.json"
BOARD_MD = "leaderboard.md"
VERIFY_SETTINGS = ("backend", "device", "verify_timeout_s", "timing")   # the settings a verify-only board depends on


def boards_root(results_dir: str | Path) -> Path:
    return Path(results_dir) / LEADERBOARDS_DIR


def board_dir(results_dir: str | Path, name: str) -> Path:
    return boards_root(results_dir) / name


def list_boards(results_dir: str | Path) -> list[str]:
    """Names of the stored boards, newest first."""
    root = boards_root(results_dir)
    found = [p.parent for p in root.glob(f"*/{BOARD_JSON}")]
    return [p.name for p in sorted(found, key=lambda p: (p / BOARD_JSON).stat().st_mtime, reverse=True)]


def load_board(results_dir: str | Path, name: str) -> Leaderboard | None:
    path = board_dir(results_dir, name) / BOARD_JSON
    if not path.exists():
        return None
    return Leaderboard.from_dict(json.loads(path.read_text(encoding="utf-8")))


def save_board(results_dir: str | Path, board: Leaderboard) -> Path:
    """Write leaderboard.json and leaderboard.md (atomically each); returns the board's folder."""
    folder = board_dir(results_dir, board.name)
    folder.mkdir(parents=True, exist_ok=True)
    board.updated_at = utc_now()
    _write_atomic(folder / BOARD_JSON, json.dumps(board.to_dict(), indent=2, default=str) + "\n")
    _write_atomic(folder / BOARD_MD, to_markdown(board))
    return folder


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def open_board(results_dir: str | Path, *, name: str, suite: str | Path, task_paths: Iterable[Path], mode: str,
               config: dict[str, Any], device: str, gpu: str, kernels_dir: str = "") -> Leaderboard:
    """The board under `name`: the stored one when it exists (same suite, mode and settings), else a new one.

    Raises LeaderboardError when the name is taken by a board of another suite,
    mode or settings: its rows would not be comparable.
    """
    task_paths = list(task_paths)
    names = [p.stem for p in task_paths]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise LeaderboardError(f"{suite}: the suite names {', '.join(twice)} more than once (tasks are told apart "
                               "by file name)")
    config = scrub_config(config)
    suite_text = str(Path(suite).resolve())
    board = load_board(results_dir, name)
    if board is None:
        return Leaderboard(name=name, suite=suite_text, mode=mode, config=config, device=device, gpu=gpu,
                           kernels_dir=kernels_dir, created_at=utc_now(),
                           rows=[Row(task=p.stem, task_path=str(p.resolve())) for p in task_paths])
    if board.mode != mode:
        raise LeaderboardError(f"leaderboard {name} is a {board.mode} board; choose another --name")
    if board.suite != suite_text:
        raise LeaderboardError(f"leaderboard {name} is for the suite {board.suite}, not {suite_text}; "
                               "choose another --name")
    # a verify-only board proposes nothing: only the settings of verification make its rows comparable
    changed = config_changes(board.config, config, VERIFY_SETTINGS if mode == "verify-only" else None)
    if changed:
        raise LeaderboardError(f"leaderboard {name} was run with other settings ({'; '.join(changed)}): "
                               "rerun with the same flags, or choose another --name")
    if board.kernels_dir != kernels_dir:
        raise LeaderboardError(f"leaderboard {name} scored {board.kernels_dir}, not {kernels_dir}; "
                               "choose another --name")
    if board.device != device:
        raise LeaderboardError(f"leaderboard {name} ran on {board.device}, this one would run on {device}; "
                               "choose another --name")
    board.config = config   # the same settings; the results folder is where the board is now
    # the suite's task list is the file's as of now; rows of tasks it no longer lists are dropped
    kept = {r.task: r for r in board.rows}
    board.rows = [kept.get(p.stem) or Row(task=p.stem, task_path=str(p.resolve())) for p in task_paths]
    return board


def config_changes(stored: dict[str, Any], given: dict[str, Any], keys: Iterable[str] | None = None) -> list[str]:
    """"field: stored -> given" for each setting (of `keys`, default all) that differs, the results folder aside."""
    keys = sorted((set(keys) if keys is not None else set(stored) | set(given)) - {"results_dir"})
    stored = {**STORED_BEFORE, **stored}
    return [f"{k}: {stored.get(k)!r} -> {given.get(k)!r}" for k in keys if stored.get(k) != given.get(k)]


def match_kernels(task_paths: list[Path], kernels_dir: Path) -> dict[str, Path | str]:
    """Each task's kernel file in a folder: task name -> the file, or the reason there is none.

    A kernel matches a task when its stem is the task's stem (a KernelBench
    solution saved under its task's name), else when it is the only file whose
    stem starts with the task's stem and a separator ("softmax_triton.py",
    "19_ReLU_cuda.py"). A file that is exactly another task's name never
    matches by prefix (sum_dim.py is not a kernel for the task sum).
    """
    files = sorted(p for p in kernels_dir.glob("*.py") if not p.name.startswith("_"))
    by_stem = {p.stem: p for p in files}
    names = {p.stem for p in task_paths}
    found: dict[str, Path | str] = {}
    for path in task_paths:
        name = path.stem
        if name in by_stem:
            found[name] = by_stem[name]
            continue
        prefixed = [p for p in files if p.stem not in names and len(p.stem) > len(name)
                    and p.stem.startswith(name) and p.stem[len(name)] in "_-."]
        if len(prefixed) == 1:
            found[name] = prefixed[0]
        elif prefixed:
            found[name] = f"several kernels match: {', '.join(p.name for p in prefixed)}; keep one or name it {name}.py"
        else:
            found[name] = f"no kernel named {name}.py (or {name}_*.py) in {kernels_dir}"
    return found
