// A worker that takes its GPU from the launcher and binds it, as docs/c-api.md shows.
// Run: gpusel --sim dgx-h100 run --gpu 3,5 -- build/bin/worker_example
#include <cstdio>

#include "gpusel/error.hpp"
#include "gpusel/worker.hpp"

int main() {
  try {
    // Under gpusel run, torchrun, srun or mpirun: GPUSEL_GPU, or this rank's entry of GPUSEL_GPUS.
    const auto info = gpusel::assign_from_environment();
    const int rank = info && info->rank ? info->rank->rank : -1;
    // Known before binding, for checks such as "does this card run FP8 e4m3 natively?"
    const int ordinal = gpusel::assigned_visible_gpu().value_or(0);
    const gpusel::CudaDevice id = gpusel::gpu_identity(ordinal);
    const bool fp8 = id.cc_major * 10 + id.cc_minor >= 89;
    // Retains the primary context and makes it current: cudaSetDevice(device) is now a no-op.
    const int device = gpusel::bind_assigned_gpu();
    std::printf("rank %d: CUDA device %d, %s (%s), fp8 e4m3 %s\n", rank, device, id.uuid.c_str(),
                id.name.c_str(), fp8 ? "yes" : "no");
    return 0;
  } catch (const gpusel::Error& e) {
    std::fprintf(stderr, "worker: %s\n", e.what());
    return e.exit_code();
  }
}
