// The CUDA double's host address space on Windows: VirtualAlloc. Committed (Windows charges the
// commit limit up front) but backed by physical pages only once a copy touches them.
#include "cuda_sim.hpp"
#include "win.hpp"

namespace gpusel::sim::cuda {

void* reserve_host_memory(std::size_t bytes) {
  return VirtualAlloc(nullptr, bytes, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
}

void release_host_memory(void* p, std::size_t) {
  VirtualFree(p, 0, MEM_RELEASE);
}

}  // namespace gpusel::sim::cuda
