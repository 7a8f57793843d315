// The platform-neutral part of the supervisor behind launch_workers (`gpusel run`): the job's
// shape, each worker's environment, --tag-output's line tagging, the stop policy and the summary.
// No I/O and no clock of its own: the platform files (launch.cpp for POSIX, launch_win.cpp for
// Windows) spawn, signal, wait and read pipes, and hand what happens to these, with the time.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpusel/launch.hpp"

namespace gpusel::detail {

using LaunchClock = std::chrono::steady_clock;

// The job LaunchOptions describe, checked.
struct JobPlan {
  std::size_t workers = 0;        // ranks: gpus.size() * ranks_per_gpu
  std::size_t ranks_per_gpu = 1;  // K consecutive ranks share each GPU
  bool shared = false;            // every worker is told it shares its GPU (GPUSEL_SHARE=1)
  LaunchClock::duration grace{};  // from the first stop request to the kill
};

// Throws Error(BadInput) for ranks per GPU outside 1..4096, or a grace period that is negative or
// not finite.
JobPlan plan_job(const LaunchOptions& options);

// Rank `rank`'s GPU entry: gpus[rank / ranks_per_gpu].
const std::string& gpu_of(const LaunchOptions& options, const JobPlan& plan, std::size_t rank);

using Variables = std::vector<std::pair<std::string, std::string>>;

// What each worker's environment is: gpusel's own, less `removed`, plus `job` (every worker) and
// then `ranks[r]` (rank r), in this order.
struct WorkerEnvironments {
  std::vector<std::string> removed;  // names gpusel sets itself (and CUDA_VISIBLE_DEVICES with
                                     // set_visible), never inherited
  Variables job;
  std::vector<Variables> ranks;
};

// A variable's value in gpusel's own environment; nullopt when unset.
using ValueOf = std::function<std::optional<std::string>(const std::string&)>;

// `value_of(name)`: gpusel's environment (a MASTER_ADDR or MASTER_PORT of the user's is kept; the
// local ranks of launchers around gpusel are named to the workers in GPUSEL_RUN_OUTER, see
// outer_ranks_marker). `free_port()`: a free TCP port, asked for only when MASTER_PORT is not set.
WorkerEnvironments worker_environments(const LaunchOptions& options, const JobPlan& plan,
                                       const ValueOf& value_of,
                                       const std::function<int()>& free_port);

// --tag-output: "[rank N] ".
std::string tag_prefix(std::size_t rank);

// --tag-output: a partial line (no newline yet) is written, tagged and ended with a newline, once
// it holds this many bytes or has waited this long since its first byte came, so that a progress
// bar shows while the worker runs and memory stays bounded.
inline constexpr std::size_t kMaxPartialLine = 64 * 1024;
inline constexpr std::chrono::milliseconds kPartialLineWait{200};

// One worker stream's tagger: splits what the worker writes into lines ('\n' ends a line; a '\r'
// before it stays with it) and prefixes each with the worker's tag. Lines of different workers
// never share an output line as long as each tagger's output is written whole.
class LineTagger {
 public:
  explicit LineTagger(std::string prefix, LaunchClock::duration wait = kPartialLineWait,
                      std::size_t max_partial = kMaxPartialLine);

  // Takes what the worker wrote, read at `now`; returns the text to write: every complete line,
  // and pieces of max_partial bytes of a longer one, tagged. The rest is held. Each byte is looked
  // at once.
  std::string feed(std::string_view data, LaunchClock::time_point now);

  // When the partial line held is due (`wait` after its first byte came); nullopt when none is.
  std::optional<LaunchClock::time_point> due() const;

  // The partial line held, tagged and ended with a newline, when it is due at `now`; else "".
  std::string flush_due(LaunchClock::time_point now);

  // The partial line held, tagged and ended with a newline (at the stream's end); "" when none.
  std::string flush();

  bool holding() const { return !pending_.empty(); }

 private:
  std::string prefix_;
  LaunchClock::duration wait_;
  std::size_t max_partial_;
  std::string pending_;
  LaunchClock::time_point since_{};  // when pending_ became non-empty
};

// When the job stops: the first worker to fail on its own (before any signal from the user and
// before a placement violation) has the others asked to stop; the user's first signal ends the run
// with it, whatever the workers do; either way, what still runs after the grace period is killed.
// The platform file does the asking, signalling and killing; this decides when.
class StopPolicy {
 public:
  StopPolicy(std::size_t workers, LaunchClock::duration grace);

  // Rank `rank` ended, failed (a status other than 0) or not. True when the others are to be asked
  // to stop now (it is the first failure, and nothing stopped the job before).
  bool worker_ended(std::size_t rank, bool failed, LaunchClock::time_point now);

  // The user's signal `sig` (the platform's number). True when it is the first: the run ends with
  // it. The platform forwards it to the workers.
  bool user_signal(int sig, LaunchClock::time_point now);

  // The placement check found a worker on a GPU not its own (`what`, for the summary). True when
  // the workers are to be asked to stop (no signal from the user came first). The first one only
  // is kept.
  bool placement_violation(std::string what, LaunchClock::time_point now);

  // When the workers still running are to be killed; nullopt when no kill is pending.
  std::optional<LaunchClock::time_point> kill_at() const;

  // True, once, when the grace period has ended at `now`: the platform kills the workers still
  // running, counts them with count_killed, and kills nothing more for this policy.
  bool kill_due(LaunchClock::time_point now);
  void count_killed(std::size_t count) { killed_ += count; }

  std::size_t workers() const { return workers_; }
  std::size_t running() const { return running_; }
  std::optional<std::size_t> first_failure() const { return first_failure_; }
  int stop_signal() const { return stop_signal_; }      // 0: none
  std::size_t signalled() const { return signalled_; }  // workers running when it came
  std::size_t killed() const { return killed_; }
  const std::string& violation() const { return violation_; }

 private:
  void arm_kill(LaunchClock::time_point now);

  std::size_t workers_;
  LaunchClock::duration grace_;
  std::size_t running_;
  std::optional<std::size_t> first_failure_;
  int stop_signal_ = 0;
  std::size_t signalled_ = 0;
  std::size_t killed_ = 0;
  std::string violation_;
  bool kill_armed_ = false;
  bool kill_pending_ = false;
  LaunchClock::time_point kill_at_{};
};

// Whose a process with a CUDA context is, for the placement check.
struct JobMember {
  int rank = -1;        // the rank whose GPU it must use; -1: the job's, but no rank says whose
  bool orphan = false;  // a worker left it behind, and it came to gpusel (POSIX: or descends from
                        // one that did)
};

// What the platform knows of a process NVML lists on a GPU.
struct ProcessFacts {
  bool exists = false;              // this system shows it (else: another pid namespace's id)
  std::optional<JobMember> member;  // the job's, and whose; nullopt: not the job's
  std::string description;          // "pid N `command`", for the line that stops the job
};

// Whether a CUDA context on `uuid` is where `who` belongs: its rank's GPU, or, for a process no
// rank is known of, any GPU of the job. A MIG entry is not checked (NVML lists the parent GPU).
bool placed_well(const JobMember& who, const std::string& uuid, const LaunchOptions& options,
                 const JobPlan& job);

// The run-time placement check (LaunchOptions::gpu_processes), the same on every platform: when to
// look (soon after the start, then at a low rate: 0.5, 1, 2, 4 s, then every 5 s), what a look
// found, and when the check turns itself off. The platform says who each listed process is.
class PlacementCheck {
 public:
  PlacementCheck(const LaunchOptions& options, const JobPlan& job, LaunchClock::time_point start);

  // On, no violation found yet, and the next look is due at `now`.
  bool due(LaunchClock::time_point now) const { return looking() && now >= next_; }
  bool looking() const { return on_ && violation_.empty(); }
  LaunchClock::time_point next() const { return next_; }

  // One look: asks LaunchOptions::gpu_processes, then `facts(pid)` for each process listed. Returns
  // a note to say when the check has just turned itself off (and why), else "". A process of the
  // job on a GPU not its own leaves the line that stops the job in violation().
  std::string look(const std::function<ProcessFacts(unsigned pid)>& facts,
                   LaunchClock::time_point now);

  const std::string& violation() const { return violation_; }

 private:
  const LaunchOptions& options_;
  const JobPlan& job_;
  bool on_;
  int looks_ = 0;
  int unknown_looks_ = 0;  // looks at which NVML named only processes this system does not show
  LaunchClock::time_point next_;
  std::string violation_;
};

// How the platform words the end of a run.
struct EndWords {
  std::string failed_gpu;      // the first failing rank's GPU entry
  std::string failed_how;      // how it ended: "exited with status 3", "ended with exit code 3"
  int failed_code = 0;         // its exit status, which becomes the run's
  std::string signal;          // the user's signal: "SIGINT", "Ctrl-C"
  std::string forwarded;       // what was forwarded: "it" (the signal), "CTRL_BREAK_EVENT"
  std::string killed_one;      // what one worker killed after the grace period did: "got SIGKILL"
  std::string killed_several;  // and several
};

// What the run says at its end (lines for stderr, each ending in a newline) and its exit status:
// 1 after a placement violation, 128 + N after the user's signal N, else the first failing
// worker's status, else 0.
struct Summary {
  std::string text;
  int exit_code = 0;
};
Summary summarize(const StopPolicy& policy, const EndWords& words);

}  // namespace gpusel::detail
