"""Known-bad softmax candidate: its CUDA source does not compile (expected status: compile_error).

A cupy.RawModule kernel with a C++ syntax error: a statement is missing its semicolon, which
NVRTC (and nvcc) reject with "expected a ';'".
"""

import cupy
import torch
import torch.nn as nn

softmax_source = r"""
extern "C" __global__ void softmax_rows(const float* x, float* out, int n_cols) {
    const float* row = x + (long long)blockIdx.x * n_cols;
    float* out_row = out + (long long)blockIdx.x * n_cols;
    if (threadIdx.x != 0) return;
    float row_max = __int_as_float(0xff800000);  // -inf
    for (int c = 0; c < n_cols; ++c) row_max = fmaxf(row_max, row[c])
    float sum = 0.0f;
    for (int c = 0; c < n_cols; ++c) sum += expf(row[c] - row_max);
    for (int c = 0; c < n_cols; ++c) out_row[c] = expf(row[c] - row_max) / sum;
}
"""

_module = cupy.RawModule(code=softmax_source)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernel = _module.get_function("softmax_rows")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n_rows, n_cols = x.shape
        with cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            self.kernel((n_rows,), (32,), (x.data_ptr(), out.data_ptr(), cupy.int32(n_cols)))
        return out
