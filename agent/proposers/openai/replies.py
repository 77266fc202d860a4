"""Turns an LLM's reply into a candidate source, or into a message saying what to fix.

The reply format the system prompt asks for: the complete candidate file in a
fenced ```python block (a bare ``` fence counts too). When several blocks
define `ModelNew`, the last one wins: models often sketch, then correct
themselves. A reply that ends inside an open block was cut off (usually by
max_tokens) and yields no source, even when an earlier block was complete,
because the cut-off block is what the model meant to send.

Whether the code compiles is not decided here: a syntax error is the
verifier's to report, with the compiler's own message. `parse_reply` never
raises.

    python -m agent.proposers.openai.replies reply.md    # print the source it finds, or the repair message
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass

# Info strings that mark a block as Python; "" is a bare ``` fence.
PYTHON_LANGS = frozenset({"", "python", "py", "python3"})

_OPEN_FENCE = re.compile(r"^\s*(?P<fence>`{3,}|~{3,})\s*(?P<lang>[^\s`]*)[^`]*$")
_CLASS_LINE = re.compile(r"^\s*class\s+(\w+)", re.MULTILINE)


@dataclass
class CodeBlock:
    lang: str       # the fence's info string, lower case; "" for a bare fence
    code: str
    closed: bool    # False when the text ended before the closing fence


def fenced_blocks(text: str) -> list[CodeBlock]:
    """Every fenced block of a markdown text, in order."""
    blocks: list[CodeBlock] = []
    fence = None            # the opening fence of the block being read, None outside blocks
    lang, lines = "", []
    for line in text.splitlines():
        if fence is None:
            match = _OPEN_FENCE.match(line)
            if match:
                fence, lang, lines = match["fence"], match["lang"].lower(), []
            continue
        stripped = line.strip()
        # NOTE: only a run of the same fence character, at least as long, closes a block
        # (CommonMark); a ``` inside a ```` block is content.
        if stripped and set(stripped) == {fence[0]} and len(stripped) >= len(fence):
            blocks.append(CodeBlock(lang, "\n".join(lines), closed=True))
            fence = None
        else:
            lines.append(line)
    if fence is not None:
        blocks.append(CodeBlock(lang, "\n".join(lines), closed=False))
    return blocks


def class_names(code: str) -> list[str]:
    """The classes the code defines; a regex stands in when the code does not parse."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return _CLASS_LINE.findall(code)
    return [node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]


def parse_reply(text: str | None) -> tuple[str | None, str]:
    """(candidate source, "") when the reply holds one, else (None, what the model should fix)."""
    text = text if isinstance(text, str) else ""
    blocks = fenced_blocks(text)
    python = [b for b in blocks if b.lang in PYTHON_LANGS]
    if not python:
        others = sorted({f"```{b.lang}" for b in blocks})
        had = f" (it had {', '.join(others)} only)" if others else ""
        return None, (
            f"Your reply had no ```python block{had}. Reply with the complete candidate file, "
            "defining class ModelNew, in one ```python block."
        )
    if not python[-1].closed:
        return None, (
            "Your last ```python block was cut off before its closing ``` (the reply probably hit "
            "max_tokens). Reply with a shorter complete file: less explanation, no repeated drafts."
        )
    # Only the text's last block can be open, so every block here is complete.
    for block in reversed(python):
        if "ModelNew" in class_names(block.code):
            return block.code.strip("\n") + "\n", ""
    defined = class_names(python[-1].code)
    found = f"it defines {', '.join(defined)}" if defined else "it defines no class"
    return None, (
        f"Your ```python block has no class ModelNew ({found}). The candidate must define "
        "class ModelNew(nn.Module) with the same constructor arguments as Model."
    )


if __name__ == "__main__":
    with open(sys.argv[1]) as reply_file:
        source, repair = parse_reply(reply_file.read())
    print(source if source is not None else f"no candidate: {repair}")
    sys.exit(0 if source is not None else 1)
