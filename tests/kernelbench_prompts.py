"""Where KernelBench's prompts (its few-shot example problems and solutions) are, for the tests that use them.

They live in the `shared/` folder beside the checkout (as on a developer's machine and in CI): the first
folder above the checkout that holds `shared/kernelbench/`, wherever the checkout is cloned (a worktree
one level deeper finds the same one). Tests skip where there is none.
"""

from __future__ import annotations

from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
_RELATIVE = Path("shared") / "kernelbench" / "src" / "kernelbench" / "prompts"


def kernelbench_prompts() -> Path:
    """The prompts folder; a path that does not exist (beside the checkout) when no shared/ holds one."""
    for folder in CHECKOUT.parents:
        if (folder / _RELATIVE).is_dir():
            return folder / _RELATIVE
    return CHECKOUT.parent / _RELATIVE
