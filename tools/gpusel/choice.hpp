// The options that say how GPUs are chosen and held: free:N limits, --wait, --share, and the
// lease a job holds on its GPUs (run, bench bw), shared by the subcommands that take --gpu.
#pragma once

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

class CommandLine;

// --min-free-memory, --max-utilization, --wait and --share, as given to the command named.
ChoiceOptions read_choice_options(const CommandLine& line);

// --gpu's list (`all` allowed), read by the library's read_gpu_request: Error(BadInput) in the
// command line's words for a bad one; empty when not given.
GpuRequest read_gpu_list(const CommandLine& line);

// Resolves (or picks) `gpus` and, with `lease`, leases them; reports picks and waits on stderr.
Acquisition acquire(const GpuRequest& gpus, const ChoiceOptions& options, bool lease);

}  // namespace gpusel::cli
