// Micro-benchmarks of the pure core: parsing, the CUDA_VISIBLE_DEVICES model, resolution.
// Run: build/bin/gpusel_micro_bench
#include <benchmark/benchmark.h>

#include "fixtures.hpp"
#include "gpusel/resolution.hpp"
#include "gpusel/spec.hpp"
#include "gpusel_detail.hpp"

namespace {

std::vector<gpusel::GpuInfo> eight() {
  std::vector<gpusel::GpuInfo> gpus;
  for (unsigned i = 0; i < 8; ++i) {
    char uuid[64];
    std::snprintf(uuid, sizeof uuid, "GPU-%08x-1111-2222-3333-44445555666%u", 0x1000u * (i + 1), i);
    gpus.push_back(gpusel::test::make_gpu(i, uuid));
  }
  return gpus;
}

void BM_ParseIndices(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(gpusel::parse_gpu_spec("0,1,2,3,4,5,6,7"));
}
BENCHMARK(BM_ParseIndices);

void BM_ParseUuids(benchmark::State& state) {
  std::string spec;
  for (const auto& g : eight()) spec += (spec.empty() ? "" : ",") + g.uuid;
  for (auto _ : state) benchmark::DoNotOptimize(gpusel::parse_gpu_spec(spec));
}
BENCHMARK(BM_ParseUuids);

void BM_ModelVisibleUuidPreset(benchmark::State& state) {
  const auto gpus = eight();
  gpusel::CudaEnv env;
  env.visible_devices =
      gpus[5].uuid.substr(0, 10) + "," + gpus[2].uuid + "," + gpus[7].uuid.substr(0, 12);
  for (auto _ : state) benchmark::DoNotOptimize(gpusel::model_visible(gpus, env));
}
BENCHMARK(BM_ModelVisibleUuidPreset);

void BM_ResolveEightIndices(benchmark::State& state) {
  const auto gpus = eight();
  const auto entries = gpusel::read_gpu_request("7,6,5,4,3,2,1,0").gpus;
  for (auto _ : state)
    benchmark::DoNotOptimize(gpusel::resolve_entries(entries, gpus, gpusel::CudaEnv{}));
}
BENCHMARK(BM_ResolveEightIndices);

void BM_ResolveWithPreset(benchmark::State& state) {
  const auto gpus = eight();
  const auto entries = gpusel::read_gpu_request("0,1,2").gpus;
  gpusel::CudaEnv env;
  env.visible_devices = "6,4,2,0";
  for (auto _ : state) benchmark::DoNotOptimize(gpusel::resolve_entries(entries, gpus, env));
}
BENCHMARK(BM_ResolveWithPreset);

}  // namespace
