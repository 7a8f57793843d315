// A CUDA runtime program for the simulator's memory model and copy paths (issue 32), built by
// tests/integration/test_sim_memory.py with nvcc -cudart shared:
//   cuda_memory_paths mem       free and total memory of device 0, then cudaMalloc(free + 1) and
//                               cudaMalloc(free): "<free> <total> <rc past free> <rc of free>"
//   cuda_memory_paths peer A B  a 64 MiB cudaMemcpyPeer from device A to B, peer access enabled
//                               where cudaDeviceCanAccessPeer allows it: "<can> <GB/s>"
//   cuda_memory_paths mapped    cudaHostAlloc(Mapped), its device pointer, cudaMemcpy from it:
//                               "<rc> <first byte> <last byte>"
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

int mem() {
  std::size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) return 1;
  void* p = nullptr;
  const int past = cudaMalloc(&p, free + 1);
  cudaGetLastError();
  const int all = cudaMalloc(&p, free);
  std::printf("%zu %zu %d %d\n", free, total, past, all);
  return 0;
}

int peer(int a, int b) {
  const std::size_t n = 64u << 20;
  int can = 0;
  cudaDeviceCanAccessPeer(&can, a, b);
  void *src = nullptr, *dst = nullptr;
  cudaSetDevice(b);
  if (cudaMalloc(&dst, n) != cudaSuccess) return 1;
  cudaSetDevice(a);
  if (cudaMalloc(&src, n) != cudaSuccess) return 1;
  if (can && cudaDeviceEnablePeerAccess(b, 0) != cudaSuccess) return 1;
  cudaEvent_t start, end;
  cudaEventCreate(&start);
  cudaEventCreate(&end);
  cudaEventRecord(start, 0);
  if (cudaMemcpyPeer(dst, b, src, a, n) != cudaSuccess) return 1;
  cudaEventRecord(end, 0);
  cudaEventSynchronize(end);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, end);
  std::printf("%d %.3f\n", can, static_cast<double>(n) / (ms / 1e3) / 1e9);
  return 0;
}

int mapped() {
  const std::size_t n = 4096;
  cudaSetDeviceFlags(cudaDeviceMapHost);
  unsigned char* host = nullptr;
  void* dev = nullptr;
  if (cudaHostAlloc(reinterpret_cast<void**>(&host), n, cudaHostAllocMapped) != cudaSuccess)
    return 1;
  std::memset(host, 0x5a, n);
  if (cudaHostGetDevicePointer(&dev, host, 0) != cudaSuccess) return 1;
  static unsigned char back[4096];
  const int rc = cudaMemcpy(back, dev, n, cudaMemcpyDeviceToHost);
  std::printf("%d %d %d\n", rc, back[0], back[n - 1]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "mem") == 0) return mem();
  if (argc >= 4 && std::strcmp(argv[1], "peer") == 0)
    return peer(std::atoi(argv[2]), std::atoi(argv[3]));
  if (argc >= 2 && std::strcmp(argv[1], "mapped") == 0) return mapped();
  std::fprintf(stderr, "usage: cuda_memory_paths mem | peer A B | mapped\n");
  return 2;
}
