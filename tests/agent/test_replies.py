"""parse_reply: which block of an LLM's reply becomes the candidate, and what the model hears when none does."""

from agent.proposers.openai.replies import parse_reply

CANDIDATE = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass\n"


def test_python_block_becomes_the_source():
    source, repair = parse_reply(f"Here it is:\n\n```python\n{CANDIDATE}```\nDone.")
    assert source == CANDIDATE
    assert repair == ""


def test_last_block_defining_modelnew_wins():
    first = CANDIDATE.replace("pass", "x = 1")
    second = CANDIDATE.replace("pass", "x = 2")
    source, _ = parse_reply(f"Draft:\n```python\n{first}```\nBetter:\n```python\n{second}```\n")
    assert source == second


def test_trailing_snippet_without_modelnew_does_not_replace_the_candidate():
    reply = f"```python\n{CANDIDATE}```\nUse it like this:\n```python\nmodel = ModelNew()\n```\n"
    source, _ = parse_reply(reply)
    assert source == CANDIDATE


def test_fence_without_language_counts_as_python():
    source, repair = parse_reply(f"```\n{CANDIDATE}```")
    assert source == CANDIDATE
    assert repair == ""


def test_no_code_block_asks_for_one():
    source, repair = parse_reply("I would use shared memory tiling here.")
    assert source is None
    assert "no ```python block" in repair


def test_block_in_another_language_is_not_a_candidate():
    source, repair = parse_reply('```cuda\n__global__ void k() {}\n```')
    assert source is None
    assert "```cuda" in repair


def test_truncated_block_says_it_was_cut_off():
    source, repair = parse_reply(f"```python\n{CANDIDATE}```\nFinal version:\n```python\nimport torch\nclass ModelNew(")
    assert source is None
    assert "cut off" in repair
    assert "max_tokens" in repair


def test_wrong_class_name_names_the_classes_defined():
    source, repair = parse_reply("```python\nclass Model:\n    pass\n\nclass FastSoftmax:\n    pass\n```")
    assert source is None
    assert "no class ModelNew" in repair
    assert "Model, FastSoftmax" in repair


def test_syntax_error_is_left_to_the_verifier():
    broken = "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x)\n        return x\n"
    source, repair = parse_reply(f"```python\n{broken}```")
    assert source == broken
    assert repair == ""


def test_unparsable_block_without_modelnew_names_classes_by_regex():
    source, repair = parse_reply("```python\nclass Fast(:\n    pass\n```")
    assert source is None
    assert "it defines Fast" in repair


def test_longer_fence_keeps_inner_triple_backticks():
    code = 'DOC = """\n```\nexample\n```\n"""\n\n\nclass ModelNew:\n    pass\n'
    source, _ = parse_reply(f"````python\n{code}````")
    assert source == code


def test_non_text_reply_gives_repair_not_exception():
    source, repair = parse_reply(None)
    assert source is None
    assert repair
