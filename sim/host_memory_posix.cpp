// The CUDA double's one platform-specific piece: host address space for simulated device and
// pinned memory (POSIX mmap; a Windows build gives these two functions with VirtualAlloc).
#include <sys/mman.h>

#include "cuda_sim.hpp"

namespace gpusel::sim::cuda {

// Reserved, not committed: pages cost host memory only once a copy touches them.
void* reserve_host_memory(std::size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

void release_host_memory(void* p, std::size_t bytes) {
  munmap(p, bytes);
}

}  // namespace gpusel::sim::cuda
