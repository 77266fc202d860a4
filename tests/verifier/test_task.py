"""Task loading: good tasks load, malformed ones give a one-line error naming the file."""

import subprocess
import sys
from pathlib import Path

import pytest

from verifier.task import TaskError, load_suite, load_task

ROOT = Path(__file__).resolve().parents[2]

GOOD = '''
import torch, torch.nn as nn
ATOL = 1e-3
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)
def get_inputs():
    return [torch.randn(4096, 4096)]
def get_init_inputs():
    return []
def get_small_inputs():
    return [torch.randn(127, 33)]
'''


def write(tmp_path, text, name="t.py"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_good_task_loads_with_extras(tmp_path):
    task = load_task(write(tmp_path, GOOD))
    assert task.name == "t"
    assert task.atol == 1e-3 and task.rtol is None
    assert task.has_small_inputs


@pytest.mark.parametrize("text, expected", [
    ("def f(:\n", "not valid Python"),
    (GOOD.replace("class Model", "class Other"), "no class Model defined"),
    (GOOD.replace("def get_inputs", "def get_other"), "no function get_inputs defined"),
    (GOOD.replace("return [torch.randn(4096, 4096)]", "raise ValueError('bad shape')"), "get_inputs() raised ValueError: bad shape"),
    (GOOD.replace("import torch, torch.nn as nn", "import torch, torch.nn as nn\nimport no_such_module_kgen"), "importing it raised ModuleNotFoundError"),
    (GOOD.replace("ATOL = 1e-3", "ATOL = 'loose'"), "ATOL must be a number"),
    # fails on the meta device (.item()), then for real: still a one-line error about the real failure
    (GOOD.replace("return [torch.randn(4096, 4096)]", "v = torch.randn(1).item()\n    return [1 / (v - v)]"),
     "get_inputs() raised ZeroDivisionError"),
])
def test_malformed_task_names_file_and_problem(tmp_path, text, expected):
    path = write(tmp_path, text)
    with pytest.raises(TaskError) as info:
        load_task(path)
    message = str(info.value)
    assert str(path) in message and expected in message
    assert "\n" not in message


def test_missing_file(tmp_path):
    with pytest.raises(TaskError, match="no such file"):
        load_task(tmp_path / "absent.py")


def test_not_utf8(tmp_path):
    p = tmp_path / "bin.py"
    p.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(TaskError, match="not UTF-8"):
        load_task(p)


def test_generator_needing_real_data_still_loads(tmp_path):
    # .item() cannot run on the meta device: the generator is called for real instead
    text = GOOD.replace("return [torch.randn(4096, 4096)]", "n = int(torch.randint(3, 5, (1,)).item())\n    return [torch.randn(n, 8)]")
    assert load_task(write(tmp_path, text)).name == "t"


def test_big_inputs_are_checked_on_meta_device(tmp_path):
    # 100k x 100k fp32 would be 40 GB: loading must not allocate it.
    text = GOOD.replace("torch.randn(4096, 4096)", "torch.randn(100_000, 100_000)")
    assert load_task(write(tmp_path, text)).name == "t"


def test_suite_from_directory_and_list(tmp_path):
    write(tmp_path, GOOD, "a.py")
    write(tmp_path, GOOD, "b.py")
    assert [p.name for p in load_suite(tmp_path)] == ["a.py", "b.py"]
    lst = tmp_path / "suite.txt"
    lst.write_text("# two tasks\nb.py\n\na.py  # trailing comment\n")
    assert [p.name for p in load_suite(lst)] == ["b.py", "a.py"]
    lst.write_text("missing.py\n")
    with pytest.raises(TaskError, match="missing.py does not exist"):
        load_suite(lst)


def test_cli_malformed_task_exit_2_one_line_no_traceback(tmp_path):
    task = write(tmp_path, GOOD.replace("class Model", "class Other"))
    kernel = write(tmp_path, "x = 1\n", "k.py")
    done = subprocess.run([sys.executable, "-m", "agent", "verify", str(task), str(kernel)],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    lines = [l for l in done.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and "no class Model defined" in lines[0] and str(task) in lines[0]


def test_cli_debug_shows_traceback(tmp_path):
    task = write(tmp_path, GOOD.replace("class Model", "class Other"))
    kernel = write(tmp_path, "x = 1\n", "k.py")
    done = subprocess.run([sys.executable, "-m", "agent", "--debug", "verify", str(task), str(kernel)],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode != 0 and "Traceback" in done.stderr


# ----------------------------------------------------------------------------------------------
# constants overridden at import (what a CPU check of a KernelBench-size task runs on)

SIZED = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x * 2

batch_size = 4096
dim: int = 393216
rows, cols = 61, 3001
shape = (batch_size, dim)
fixed = (4, 8)

def get_inputs():
    return [torch.rand(shape)]

def get_init_inputs():
    return []
"""


def _sized(tmp_path):
    path = tmp_path / "sized.py"
    path.write_text(SIZED)
    return path


def test_size_constants_found(tmp_path):
    import ast

    from verifier.task import size_constants

    found = size_constants(ast.parse(_sized(tmp_path).read_text()))
    assert found == {"batch_size": 4096, "dim": 393216, "rows": 61, "cols": 3001, "fixed": (4, 8)}


def test_override_reaches_values_computed_at_import(tmp_path):
    from verifier.task import import_task_module

    module = import_task_module(_sized(tmp_path), "kgen_test_sized", overrides={"batch_size": 3, "dim": 5})
    assert module.shape == (3, 5)


def test_override_of_an_unpacked_constant(tmp_path):
    from verifier.task import import_task_module

    module = import_task_module(_sized(tmp_path), "kgen_test_sized2", overrides={"cols": 7})
    assert (module.rows, module.cols) == (61, 7)


def test_override_of_a_tuple_constant_from_json_list(tmp_path):
    from verifier.task import import_task_module

    module = import_task_module(_sized(tmp_path), "kgen_test_sized3", overrides={"fixed": [3, 5]})
    assert module.fixed == (3, 5)


def test_override_of_an_unknown_name_is_a_task_error(tmp_path):
    from verifier.task import import_task_module

    with pytest.raises(TaskError, match="shape is not a module-level integer constant"):
        import_task_module(_sized(tmp_path), "kgen_test_sized4", overrides={"shape": (3, 5)})


def test_override_of_the_wrong_kind_is_a_task_error(tmp_path):
    from verifier.task import import_task_module

    with pytest.raises(TaskError, match="cannot replace it"):
        import_task_module(_sized(tmp_path), "kgen_test_sized5", overrides={"fixed": 3})


def test_cpu_view_uses_small_init_inputs(tmp_path):
    from verifier.task import import_task_module

    path = tmp_path / "init.py"
    path.write_text(SIZED + "\ndef get_small_init_inputs():\n    return [7]\n")
    module = import_task_module(path, "kgen_test_sized6", device="cpu")
    assert module.get_init_inputs() == [7]


def test_without_a_device_the_task_is_as_written(tmp_path):
    from verifier.task import import_task_module

    path = tmp_path / "init.py"
    path.write_text(SIZED + "\ndef get_small_init_inputs():\n    return [7]\n")
    module = import_task_module(path, "kgen_test_sized7")
    assert module.get_init_inputs() == []


def test_sizes_written_as_literal_arithmetic_are_constants(tmp_path):
    import ast

    from verifier.task import size_constants

    found = size_constants(ast.parse("M = 1024 * 2\nK = 2 ** 12\nshape = (8192 * 2,)\nx = M * 2\n"))
    assert found == {"M": 2048, "K": 4096, "shape": (16384,)}
