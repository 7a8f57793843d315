// gpusel bench bw's output: the rows of its report (the JSON rows --json prints, and bench_csv
// and bench_svg draw from), the text table, and the --json document.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bench_schema.hpp"
#include "gpusel/bandwidth.hpp"
#include "gpusel/probe.hpp"

namespace gpusel::cli::bench {

// One row of the report, from the GPU a worker measured, one of its results and what NVML says of
// the GPU (null without NVML). A p2p row also says what NVML says of its peer (`peer`, null when
// unknown): the path the copy took, and that path's theoretical rate.
nlohmann::json make_row(const WorkerGpu& gpu, const BandwidthResult& result, const GpuInfo* info,
                        const GpuInfo* peer = nullptr);
// The GPU of `gpus` (null entries skipped) whose UUID is `uuid`; nullptr when none is.
const GpuInfo* find_gpu(const std::vector<const GpuInfo*>& gpus, const std::string& uuid);
// The row of a --parallel run's sum over the GPUs of one test's medians.
nlohmann::json sum_row(const std::string& test, std::uint64_t bytes, double gbps);

// The text table: its heading (what was run, the units, the column names), then a line per row.
void print_table_heading(const BandwidthOptions& b, bool parallel,
                         const std::optional<std::string>& simulated);
std::string text_row(const nlohmann::json& row);

// The --json document.
std::string json_document(const nlohmann::json& rows, const std::vector<std::string>& warnings,
                          const std::optional<std::string>& simulated, const BandwidthOptions& b);

}  // namespace gpusel::cli::bench
