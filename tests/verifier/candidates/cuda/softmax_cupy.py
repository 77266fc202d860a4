"""Row softmax as a CUDA kernel compiled by NVRTC through cupy.RawModule (known-good candidate
for tasks/softmax.py).

One 256-thread block per row. Pass 1 keeps, per thread, a running max and a running sum of
exp(x - max) over a strided slice of the row (online softmax); the block then merges the 256
(max, sum) pairs with warp shuffles and shared memory. Pass 2 writes exp(x - max) / sum. The row is
read twice and written once; a 32 KB row stays in L1/L2 between the passes. The kernel runs on
torch's current stream, and torch owns every buffer: cupy only compiles and launches.
"""

import cupy
import torch
import torch.nn as nn

THREADS = 256

softmax_source = r"""
#define THREADS 256
// NVRTC has no <math.h>, so no INFINITY macro: spell -inf by its bits.
#define NEG_INF __int_as_float(0xff800000)

// Merge two online-softmax partial states (max m, sum s of exp(x - m)).
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
    float m_new = fmaxf(m, m2);
    // exp(-inf - -inf) would be NaN: an empty side contributes nothing.
    float a = (m == NEG_INF) ? 0.0f : s * __expf(m - m_new);
    float b = (m2 == NEG_INF) ? 0.0f : s2 * __expf(m2 - m_new);
    m = m_new;
    s = a + b;
}

// Add one value to a partial state: one exponential per element, not two.
__device__ __forceinline__ void add_value(float& m, float& s, float v) {
    if (v > m) {
        s = s * __expf(m - v) + 1.0f;
        m = v;
    } else if (v != NEG_INF) {
        s += __expf(v - m);
    }
}

extern "C" __global__ void softmax_rows(const float* __restrict__ x,
                                        float* __restrict__ out,
                                        long long row_stride,
                                        int n_cols) {
    const float* row = x + (long long)blockIdx.x * row_stride;
    float* out_row = out + (long long)blockIdx.x * n_cols;
    float m = NEG_INF;
    float s = 0.0f;
    for (int c = threadIdx.x; c < n_cols; c += THREADS) {
        add_value(m, s, row[c]);
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffff, m, offset);
        float s2 = __shfl_xor_sync(0xffffffff, s, offset);
        merge(m, s, m2, s2);
    }
    __shared__ float warp_m[THREADS / 32];
    __shared__ float warp_s[THREADS / 32];
    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (lane == 0) {
        warp_m[warp] = m;
        warp_s[warp] = s;
    }
    __syncthreads();
    m = NEG_INF;
    s = 0.0f;
    for (int w = 0; w < THREADS / 32; ++w) {
        merge(m, s, warp_m[w], warp_s[w]);
    }
    const float inv_sum = 1.0f / s;
    for (int c = threadIdx.x; c < n_cols; c += THREADS) {
        out_row[c] = __expf(row[c] - m) * inv_sum;
    }
}
"""

_module = cupy.RawModule(code=softmax_source, options=("--std=c++17",))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernel = _module.get_function("softmax_rows")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_cols = x.shape[-1]
        x2 = x.reshape(-1, n_cols)
        if x2.stride(-1) != 1:
            x2 = x2.contiguous()
        x2 = x2.float()
        out = torch.empty((x2.shape[0], n_cols), dtype=torch.float32, device=x.device)
        # Launch on torch's stream so the kernel is ordered with the ops around forward.
        with cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            self.kernel(
                (x2.shape[0],), (THREADS,),
                (x2.data_ptr(), out.data_ptr(), cupy.int64(x2.stride(0)), cupy.int32(n_cols)),
            )
        return out.view(x.shape).to(x.dtype)
