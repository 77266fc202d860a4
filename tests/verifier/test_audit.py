"""Provenance by bytes in the op audit: every output element must be a kernel's store, not torch's.

Launches are reported as verifier.launches reports them on the CPU (the storage's stored bytes);
no kernel runs here, so each test says exactly which bytes "a kernel" stored.
"""

import numpy as np
import pytest
import torch

from verifier.audit import OpAudit


def launched(audit: OpAudit, t: torch.Tensor, elements=None) -> None:
    """Report a launch that stored these elements of t's storage (all of them by default)."""
    storage = t.untyped_storage()
    bits = np.zeros(storage.nbytes(), dtype=bool)
    size = t.element_size()
    for e in (range(t.numel()) if elements is None else elements):
        bits[e * size:(e + 1) * size] = True
    audit.note_launch([t], {"stored_bytes": {storage.data_ptr(): bits}})


def test_an_output_every_element_of_which_a_kernel_stored_is_written():
    audit = OpAudit()
    out = torch.empty(3, 4)
    launched(audit, out)
    assert audit.unwritten([out]) == [] and audit.provenance([out]) is None


def test_one_stored_element_does_not_cover_the_rest():
    audit = OpAudit()
    out = torch.empty(3, 4)
    launched(audit, out, elements=[0])
    assert audit.unwritten([out]) == [0]
    assert "11 of 12 elements" in audit.provenance([out]), audit.provenance([out])


def test_a_fill_after_the_kernel_unwrites_what_it_fills():
    audit = OpAudit()
    out = torch.empty(3, 4)
    launched(audit, out)
    with audit:
        out[1].fill_(0.0)
    reason = audit.provenance([out])
    assert "4 of 12 elements" in reason and "fill_" in reason, reason


def test_an_order_keeping_cast_of_kernel_data_carries_provenance():
    audit = OpAudit()
    buf = torch.empty(3, 4)
    launched(audit, buf)
    with audit:
        out = buf.to(torch.float64)
    assert audit.unwritten([out]) == []


def test_a_reordering_copy_of_kernel_data_is_torchs_output():
    audit = OpAudit()
    buf = torch.empty(2, 3, 4)
    launched(audit, buf)
    with audit:
        out = buf.permute(0, 2, 1).contiguous()
    assert audit.unwritten([out]) == [0]
    assert "not written by any kernel" in audit.provenance([out])


def test_a_slice_of_a_kernel_written_buffer_needs_only_its_own_elements():
    audit = OpAudit()
    buf = torch.empty(4, 8)
    launched(audit, buf, elements=[r * 8 + c for r in range(4) for c in range(5)])   # the first 5 columns
    assert audit.unwritten([buf[:, :5]]) == []
    assert audit.unwritten([buf[:, :6]]) == [0]


def test_a_copy_into_an_output_from_the_input_is_torchs_output():
    audit = OpAudit()
    x = torch.randn(3, 4)
    out = torch.empty(4, 3)
    launched(audit, out)
    with audit:
        out.copy_(x.t())
    assert "copy_" in audit.provenance([out])


def test_a_launch_without_byte_counts_marks_whole_storages():
    # a GPU: a kernel's stores are not visible from the host, so a launch marks its arguments whole
    audit = OpAudit()
    out = torch.empty(5)
    audit.note_launch([out], {})
    assert audit.unwritten([out]) == []


@pytest.mark.parametrize("call, name", [
    (lambda t: t.apply_(lambda v: v * 2.0), "Tensor.apply_"),
    (lambda t: t.map_(t, lambda a, b: a + b), "Tensor.map_"),
    (lambda t: t.map2_(t, t, lambda a, b, c: a + b + c), "Tensor.map2_"),
    (lambda t: torch._C.TensorBase.apply_(t, lambda v: v), "Tensor.apply_"),   # the C type's own method
    (lambda t: repr(t), "Tensor.__repr__"),
    (lambda t: f"{t[0]:.3f}", "Tensor.__format__"),
])
def test_python_run_on_the_values_is_a_host_read(call, name):
    # NOTE: none of these reaches the dispatcher: the op list alone would call the forward clean
    t = torch.randn(8)
    with OpAudit() as audit:
        call(t)
    assert name in audit.host_reads, audit.host_reads
