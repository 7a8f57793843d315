#include "choice.hpp"

#include <cmath>
#include <limits>

#include "args.hpp"
#include "common.hpp"
#include "gpusel/error.hpp"
#include "gpusel/resolution.hpp"
#include "gpusel_detail.hpp"

namespace gpusel::cli {

void add_choice_options(CLI::App& cmd, ChoiceOptions& options, bool leasing) {
  cmd.add_option("--min-free-memory", options.min_free_memory,
                 "free:N: a GPU is free with at least this much memory free (default: 90% of "
                 "its memory)")
      ->type_name("SIZE");
  cmd.add_option("--max-utilization", options.max_utilization,
                 "free:N: a GPU is free at or under this utilisation, in percent (default 10)")
      ->check(CLI::Range(0u, 100u))
      ->type_name("PCT");
  // A flag that may take a value: `--wait` alone waits for ever, `--wait SECONDS` (or
  // `--wait=SECONDS`) at most that long; the next word is its value unless it is an option or `--`
  // (CommandLine sees to it where CLI11 reads it otherwise).
  cmd.add_flag("--wait{inf}", options.wait_text,
               leasing ? "wait for leased or busy GPUs instead of failing, at most DURATION (30, "
                         "90s, 15m, 2h; for ever without a value); waiting jobs are served in "
                         "arrival order"
                       : "wait until enough GPUs are free, at most DURATION (30, 90s, 15m, 2h; "
                         "for ever without a value)")
      ->expected(0, 1)
      ->type_name("[DURATION]");
  if (leasing) {
    cmd.add_flag("--share", options.share,
                 "run on GPUs another job has leased, without leasing them (by default such a "
                 "GPU is refused)");
  }
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
      throw bad_input("--wait " + detail::quote_value(options.wait_text) +
                      " is not a duration: give seconds (30, 1.5, 1e4) or 90s, 15m, 2h, 1d; "
                      "--wait alone waits for as long as it takes");
    }
    a.wait_seconds = *seconds;
  }
  a.on_wait = [](const std::string& what) { print_note(what); };
  Acquisition got = acquire_gpus(gpus, cuda_env_from_environment(), default_probe_helper(), a);
  if (!got.why.empty() && !options.quiet)
    print_note("--gpu " + gpus.texts().front() + ": " + got.why);
  return got;
}

}  // namespace gpusel::cli
