#include "int_matmul.h"

namespace sloth::cuda {
namespace {

template <typename T>
__global__ void int_matmul_kernel(const T* a, const T* b, T* c, IntMatmulGeo g) {
  const long long total = g.nb * g.m * g.n;
  for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
       idx += (long long)gridDim.x * blockDim.x) {
    long long bi = idx / (g.m * g.n), rem = idx % (g.m * g.n);
    long long i = rem / g.n, j = rem % g.n;
    long long oa = 0, ob = 0;
    for (int d = g.nd - 1; d >= 0; --d) {
      long long cd = bi % g.shape[d];
      bi /= g.shape[d];
      oa += cd * g.sa[d];
      ob += cd * g.sb[d];
    }
    T acc = 0;
    for (long long p = 0; p < g.k; ++p)
      acc = (T)(acc + a[oa + i * g.sam + p * g.sak] * b[ob + p * g.sbk + j * g.sbn]);
    c[idx] = acc;
  }
}

}  // namespace

cudaError_t launch_int_matmul(bool int64, const void* a, const void* b, void* c,
                              const IntMatmulGeo& g, int max_blocks, cudaStream_t stream) {
  const long long total = g.nb * g.m * g.n;
  if (total == 0) return cudaSuccess;
  long long blocks = (total + 255) / 256;
  if (blocks > max_blocks) blocks = max_blocks;
  if (int64)
    int_matmul_kernel<long long><<<(unsigned)blocks, 256, 0, stream>>>(
        (const long long*)a, (const long long*)b, (long long*)c, g);
  else
    int_matmul_kernel<int><<<(unsigned)blocks, 256, 0, stream>>>((const int*)a, (const int*)b,
                                                                (int*)c, g);
  return cudaGetLastError();
}

}  // namespace sloth::cuda
