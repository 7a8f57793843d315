// gpusel bench bw's diagnosis: what its figures suggest is wrong with a GPU, its link or the run.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "bench_schema.hpp"
#include "gpusel/bandwidth.hpp"
#include "gpusel/probe.hpp"

namespace gpusel::cli::bench {

// Buffers small enough that device-local figures may measure the GPU's L2 cache.
std::optional<std::string> cache_warning(const WorkerReport& report, std::uint64_t bytes);

// An h2d or d2h figure far below what the GPU's PCIe link carries, and the likely reason.
std::optional<std::string> link_warning(const BandwidthResult& result, const GpuInfo* info);

// Warnings about the choice of tests.
std::vector<std::string> test_warnings(const BandwidthOptions& b);

}  // namespace gpusel::cli::bench
