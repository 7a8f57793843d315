// Uses the installed C++ API: parse, resolve, list.
#include <cstddef>
#include <cstdio>

#include "gpusel/error.hpp"
#include "gpusel/nvml.hpp"
#include "gpusel/probe.hpp"
#include "gpusel/resolution.hpp"
#include "gpusel/spec.hpp"

int main(int argc, char** argv) {
  try {
    const auto request = gpusel::read_gpu_request(argc > 1 ? argv[1] : "0");
    const auto r = gpusel::resolve_gpus(request, gpusel::CudaEnv{}, gpusel::default_probe_helper());
    std::printf("resolved=%d gpus=", r.resolved ? 1 : 0);
    for (std::size_t i = 0; i < r.gpus.size(); ++i)
      std::printf("%s%s", i ? "," : "", r.gpus[i].c_str());
    std::printf("\n");
    std::printf("nvml gpus=%zu\n", gpusel::query_nvml().gpus.size());
    return 0;
  } catch (const gpusel::Error& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return e.exit_code();
  }
}
