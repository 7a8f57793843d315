// The options that say how GPUs are chosen and held: free:N limits, --wait, --share, and the
// lease a job holds on its GPUs (run, bench bw), shared by the subcommands that take --gpu.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "gpusel/acquire.hpp"

namespace gpusel::cli {

struct ChoiceOptions {
  std::string min_free_memory;  // a size, empty: the default (90% of the GPU's memory free)
  unsigned max_utilization = 10;
  std::string wait_text;  // --wait's value: "" not given, "inf" without a value, else seconds
  bool share = false;
  bool quiet = false;  // no note of what free:N picked
};

// Adds --min-free-memory, --max-utilization and --wait; with `leasing`, --share too.
void add_choice_options(CLI::App& cmd, ChoiceOptions& options, bool leasing);

// Resolves (or picks) `gpus` and, with `lease`, leases them; reports picks and waits on stderr.
Acquisition acquire(const GpuRequest& gpus, const ChoiceOptions& options, bool lease);

}  // namespace gpusel::cli
