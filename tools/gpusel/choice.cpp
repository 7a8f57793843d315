#include "choice.hpp"

#include <cmath>
#include <limits>

#include "args.hpp"
#include "common.hpp"
#include "gpusel/error.hpp"
#include "gpusel/resolution.hpp"
#include "gpusel_detail.hpp"

namespace gpusel::cli {

ChoiceOptions read_choice_options(const CommandLine& line) {
  ChoiceOptions o;
  o.min_free_memory = line.value("--min-free-memory").value_or("");
  o.max_utilization =
      static_cast<unsigned>(whole_option(line, "--max-utilization", 0, 100, o.max_utilization));
  o.wait_text = line.value("--wait").value_or("");
  o.share = line.flag("--share");
  return o;
}

GpuRequest read_gpu_list(const CommandLine& line) {
  const std::optional<std::string> text = line.value("--gpu");
  return text ? read_gpu_request(*text, true) : GpuRequest{};
}

Acquisition acquire(const GpuRequest& gpus, const ChoiceOptions& options, bool lease) {
  AcquireOptions a;
  if (!options.min_free_memory.empty()) {
    // The same sizes as --size (one parser), with the same messages.
    a.limits.min_free_memory = parse_size_option("--min-free-memory", options.min_free_memory, 0);
  }
  a.limits.max_utilization = options.max_utilization;
  a.lease = lease;
  a.share = options.share;
  if (!options.wait_text.empty()) {
    const std::optional<double> seconds = detail::parse_duration(options.wait_text);
    if (!seconds) {
      throw bad_input(not_a_duration("--wait", options.wait_text));
    }
    a.wait_seconds = *seconds;
  }
  a.on_wait = [](const std::string& what) { print_note(what); };
  Acquisition got = acquire_gpus(gpus, cuda_env_from_environment(), probe_helper_when_needed(), a);
  if (!got.why.empty() && !options.quiet)
    print_note("--gpu " + gpus.texts().front() + ": " + got.why);
  return got;
}

}  // namespace gpusel::cli
