// gpusel bench bw's command line (setup_bench and setup_bench_worker, commands.hpp), and its
// options checked into what measure_bandwidth takes.
#pragma once

#include "commands.hpp"
#include "gpusel/bandwidth.hpp"

namespace gpusel::cli::bench {

// Throws Error(BadInput) for an unknown test or a bad size.
BandwidthOptions checked_options(const BenchOptions& options);

}  // namespace gpusel::cli::bench
