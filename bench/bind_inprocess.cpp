// The worker API in-process, for bench/floors.py, the way a worker under `gpusel run` uses it:
// the GPU comes in GPUSEL_GPU (a full UUID, as run publishes it) and bind_assigned_gpu() binds
// it; prints the ordinal.
#include <cstdio>
#include <cstdlib>

#include "gpusel/error.hpp"
#include "gpusel/worker.hpp"

int main() {
  if (std::getenv("GPUSEL_GPU") == nullptr) {
    std::fprintf(stderr, "bind_inprocess: set GPUSEL_GPU to the GPU's UUID\n");
    return 2;
  }
  try {
    std::printf("%d\n", gpusel::bind_assigned_gpu());
    return 0;
  } catch (const gpusel::Error& e) {
    std::fprintf(stderr, "bind_inprocess: %s\n", e.what());
    return e.exit_code();
  }
}
