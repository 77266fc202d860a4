"""Row softmax built with load_inline as KernelBench's examples write it (known-good candidate for
tasks/softmax.py): the kernel is launched with no stream, `<<<rows, threads>>>`, on the legacy default
stream, and the host function waits with cudaDeviceSynchronize() before it returns.

Both are honest and both defeat a CUDA graph capture: the launch is not on the capturing stream, and a
device-wide synchronisation is not allowed while a graph is captured. kgen must time it with events
(saying so), never call it wrong. Same kernel as softmax_load_inline.py.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

softmax_cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

#define THREADS 256

// Merge two online-softmax partial states (max m, sum s of exp(x - m)).
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
    float m_new = fmaxf(m, m2);
    // exp(-inf - -inf) would be NaN: an empty side contributes nothing.
    float a = (m == -INFINITY) ? 0.0f : s * __expf(m - m_new);
    float b = (m2 == -INFINITY) ? 0.0f : s2 * __expf(m2 - m_new);
    m = m_new;
    s = a + b;
}

// Add one value to a partial state: one exponential per element, not two.
__device__ __forceinline__ void add_value(float& m, float& s, float v) {
    if (v > m) {
        s = s * __expf(m - v) + 1.0f;
        m = v;
    } else if (v != -INFINITY) {
        s += __expf(v - m);
    }
}

__global__ void softmax_rows_kernel(const float* __restrict__ x,
                                    float* __restrict__ out,
                                    int n_cols) {
    const float* row = x + (long long)blockIdx.x * n_cols;
    float* out_row = out + (long long)blockIdx.x * n_cols;
    float m = -INFINITY;
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
    m = -INFINITY;
    s = 0.0f;
    for (int w = 0; w < THREADS / 32; ++w) {
        merge(m, s, warp_m[w], warp_s[w]);
    }
    const float inv_sum = 1.0f / s;
    for (int c = threadIdx.x; c < n_cols; c += THREADS) {
        out_row[c] = __expf(row[c] - m) * inv_sum;
    }
}

torch::Tensor softmax_rows(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    auto x2 = x.reshape({-1, x.size(-1)}).contiguous();
    auto out = torch::empty_like(x2);
    const int n_rows = x2.size(0);
    const int n_cols = x2.size(1);
    softmax_rows_kernel<<<n_rows, THREADS>>>(x2.data_ptr<float>(), out.data_ptr<float>(), n_cols);
    cudaDeviceSynchronize();
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "softmax_rows_kernel launch failed: ", cudaGetErrorString(err));
    return out.view(x.sizes());
}
"""

softmax_cpp_source = "torch::Tensor softmax_rows(torch::Tensor x);"

softmax_ext = load_inline(
    name="softmax_rows_default_stream_ext",
    cpp_sources=softmax_cpp_source,
    cuda_sources=softmax_cuda_source,
    functions=["softmax_rows"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax_ext.softmax_rows(x)
