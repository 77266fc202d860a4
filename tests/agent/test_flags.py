"""agent.flags and the flags that use them: a value that would weaken a verdict is a usage error (exit 2)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from agent.cli import build_parser, version
from agent.flags import nonneg_int, positive_float, positive_int, small_shapes

ROOT = Path(__file__).resolve().parents[2]
TASK = ROOT / "tests" / "verifier" / "kernelbench" / "19_ReLU.py"


@pytest.mark.parametrize("kind, text, minimum", [
    (positive_int, "0", "at least 1"), (nonneg_int, "-1", "at least 0"), (positive_float, "0", "more than 0"),
    (positive_float, "nan", "more than 0"), (positive_int, "2.5", "an integer"),
])
def test_out_of_bounds_names_the_minimum(kind, text, minimum):
    with pytest.raises(argparse.ArgumentTypeError, match=minimum):
        kind(text)


def test_in_bounds_values_pass():
    assert (positive_int("3"), nonneg_int("0"), positive_float("0.5")) == (3, 0, 0.5)


def test_small_shapes_flag_parses():
    assert small_shapes("batch_size=7,dim=129") == {"batch_size": 7, "dim": 129}


def _parse_error(argv, capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(argv)
    return exc.value.code, capsys.readouterr().err


def test_verify_trials_zero_is_a_usage_error(capsys):
    code, err = _parse_error(["verify", str(TASK), "k.py", "--trials", "0"], capsys)
    assert code == 2 and "--trials: must be at least 1, got 0" in err


def test_verify_reps_zero_is_a_usage_error(capsys):
    code, err = _parse_error(["verify", str(TASK), "k.py", "--reps", "0"], capsys)
    assert code == 2 and "--reps: must be at least 1" in err


def test_verify_timeout_old_spelling_still_works():
    args = build_parser().parse_args(["verify", str(TASK), "k.py", "--timeout", "12"])
    assert args.timeout == 12.0


def test_verify_timeout_new_spelling():
    args = build_parser().parse_args(["verify", str(TASK), "k.py", "--verify-timeout", "12"])
    assert args.timeout == 12.0


def test_verify_timeout_default():
    assert build_parser().parse_args(["verify", str(TASK), "k.py"]).timeout == 180.0


def test_verify_old_timeout_spelling_is_hidden(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["verify", "--help"])
    assert "--timeout" not in capsys.readouterr().out


def test_optimize_verify_timeout_zero_is_a_usage_error(capsys):
    code, err = _parse_error(["optimize", str(TASK), "--verify-timeout", "0"], capsys)
    assert code == 2 and "more than 0" in err


def test_optimize_candidates_zero_is_a_usage_error(capsys):
    code, err = _parse_error(["optimize", str(TASK), "--candidates", "0"], capsys)
    assert code == 2 and "--candidates: must be at least 1" in err


def test_leaderboard_workers_zero_is_a_usage_error(capsys):
    code, err = _parse_error(["leaderboard", "tasks", "--workers", "0"], capsys)
    assert code == 2 and "--workers: must be at least 1" in err


def test_verify_malformed_small_shapes_is_a_usage_error(capsys):
    code, err = _parse_error(["verify", str(TASK), "k.py", "--small-shapes", "batch_size"], capsys)
    assert code == 2 and "NAME=VALUE" in err


def test_verify_trials_zero_exits_2_from_the_command_line():
    done = subprocess.run([sys.executable, "-m", "agent", "verify", str(TASK), str(TASK), "--trials", "0"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2 and "must be at least 1" in done.stderr


def test_version_is_the_projects():
    text = (ROOT / "pyproject.toml").read_text()
    assert f'version = "{version()}"' in text


def test_version_flag(capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.strip() == f"kgen {version()}"


def test_version_without_package_metadata_reads_pyproject(monkeypatch):
    from importlib import metadata

    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", missing)
    assert f'version = "{version()}"' in (ROOT / "pyproject.toml").read_text()
