"""The run-time first layer in integrity.py: module aliases in a candidate's namespace.

(The guard and the audit hook are exercised end to end by the exploit suites, in a sandboxed worker.)
"""

import collections
import os
import sys
import typing

import torch

from verifier.integrity import module_aliases


def test_a_forbidden_module_under_another_name_is_found():
    namespace = {"__name__": "candidate", "c": torch.ctypes, "s": typing.sys, "sys_": collections._sys}
    found = module_aliases(namespace)
    assert any("c = <module ctypes>" in f for f in found), found
    assert any("s = <module sys>" in f for f in found), found
    assert len(found) == 3, found


def test_a_module_imported_under_its_own_name_is_not_an_alias():
    assert module_aliases({"__name__": "candidate", "sys": sys, "os": os, "torch": torch}) == []


def test_an_alias_kept_on_a_class_of_the_candidates_is_found():
    klass = type("ModelNew", (), {"__module__": "candidate", "o": torch.os})
    found = module_aliases({"__name__": "candidate", "ModelNew": klass})
    assert found == ["ModelNew.o = <module os>"], found
