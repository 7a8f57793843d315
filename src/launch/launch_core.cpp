// The platform-neutral part of the supervisor (launch_core.hpp): shared by launch.cpp (POSIX)
// and launch_win.cpp (Windows), tested on both by tests/unit/launch_core_test.cpp.
#include "launch_core.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "gpusel/error.hpp"
#include "gpusel/spec.hpp"
#include "gpusel_detail.hpp"
#include "text.hpp"

namespace gpusel::detail {

JobPlan plan_job(const LaunchOptions& options) {
  if (options.ranks_per_gpu < 1 || options.ranks_per_gpu > 4096) {
    throw bad_input("run: ranks per GPU must be from 1 to 4096, not " +
                    std::to_string(options.ranks_per_gpu));
  }
  if (!std::isfinite(options.grace_seconds) || options.grace_seconds < 0) {
    throw bad_input("run: the grace period must be a finite number of seconds, 0 or more, not " +
                    seconds_text(options.grace_seconds));
  }
  JobPlan plan;
  plan.ranks_per_gpu = static_cast<std::size_t>(options.ranks_per_gpu);
  plan.workers = options.gpus.size() * plan.ranks_per_gpu;
  plan.shared = options.share || plan.ranks_per_gpu > 1;
  plan.grace = std::chrono::duration_cast<LaunchClock::duration>(
      std::chrono::duration<double>(std::min(options.grace_seconds, 1e9)));
  return plan;
}

const std::string& gpu_of(const LaunchOptions& options, const JobPlan& plan, std::size_t rank) {
  return options.gpus[rank / plan.ranks_per_gpu];
}

WorkerEnvironments worker_environments(const LaunchOptions& options, const JobPlan& plan,
                                       const ValueOf& value_of,
                                       const std::function<int()>& free_port) {
  WorkerEnvironments env;
  env.removed = {"RANK",        "LOCAL_RANK", "WORLD_SIZE",   "LOCAL_WORLD_SIZE",
                 "GPUSEL_GPUS", "GPUSEL_GPU", "GPUSEL_SHARE", kRunOuterVariable};
  if (options.set_visible != SetVisible::None || options.amd)
    env.removed.emplace_back("CUDA_VISIBLE_DEVICES");
  if (options.amd) {
    env.removed.emplace_back("ROCR_VISIBLE_DEVICES");
    env.removed.emplace_back("HIP_VISIBLE_DEVICES");
  }

  const std::string world = std::to_string(plan.workers);
  if (!value_of("MASTER_ADDR")) env.job.emplace_back("MASTER_ADDR", "127.0.0.1");
  if (!value_of("MASTER_PORT")) env.job.emplace_back("MASTER_PORT", std::to_string(free_port()));
  // The workers are gpusel's own: the local ranks of launchers around it (srun, mpirun, ...) reach
  // them unchanged, named here so that a worker counts gpusel's LOCAL_RANK alone.
  if (std::string outer = outer_ranks_marker(value_of); !outer.empty())
    env.job.emplace_back(kRunOuterVariable, std::move(outer));
  env.job.emplace_back("WORLD_SIZE", world);
  env.job.emplace_back("LOCAL_WORLD_SIZE", world);
  env.job.emplace_back("GPUSEL_GPUS", detail::join_entries(options.gpus));
  if (plan.shared) env.job.emplace_back("GPUSEL_SHARE", "1");
  if (options.amd && options.set_visible == SetVisible::Job) {
    // ROCr ends its list at a GPU named twice: each GPU once, in rank order.
    std::vector<std::string> distinct;
    for (const std::string& g : options.gpus) {
      if (std::find(distinct.begin(), distinct.end(), g) == distinct.end()) distinct.push_back(g);
    }
    env.job.emplace_back("ROCR_VISIBLE_DEVICES", detail::join_entries(distinct));
  } else if (options.set_visible == SetVisible::Job) {
    env.job.emplace_back("CUDA_VISIBLE_DEVICES", detail::join_entries(options.gpus));
  }

  env.ranks.resize(plan.workers);
  for (std::size_t r = 0; r < plan.workers; ++r) {
    Variables& own = env.ranks[r];
    own.emplace_back("RANK", std::to_string(r));
    own.emplace_back("LOCAL_RANK", std::to_string(r));
    own.emplace_back("GPUSEL_GPU", gpu_of(options, plan, r));
    if (options.amd && options.set_visible != SetVisible::Job) {
      own.emplace_back("ROCR_VISIBLE_DEVICES", gpu_of(options, plan, r));
    } else if (!options.amd && options.set_visible == SetVisible::Own) {
      own.emplace_back("CUDA_VISIBLE_DEVICES", gpu_of(options, plan, r));
    }
  }
  return env;
}

std::string tag_prefix(std::size_t rank) {
  return "[rank " + std::to_string(rank) + "] ";
}

LineTagger::LineTagger(std::string prefix, LaunchClock::duration wait, std::size_t max_partial)
    : prefix_(std::move(prefix)),
      wait_(wait),
      max_partial_(std::max<std::size_t>(max_partial, 1)) {}

std::string LineTagger::feed(std::string_view data, LaunchClock::time_point now) {
  std::string out;
  while (!data.empty()) {
    const std::size_t room = max_partial_ - pending_.size();  // never 0: full lines are written
    const std::size_t look = std::min(data.size(), room + 1);
    const auto* nl = static_cast<const char*>(std::memchr(data.data(), '\n', look));
    std::size_t take = 0;
    if (nl != nullptr) {
      take = static_cast<std::size_t>(nl - data.data()) + 1;
      out += prefix_;
      out += pending_;
      out.append(data.data(), take);
      pending_.clear();
    } else {
      take = std::min(data.size(), room);
      if (pending_.empty()) since_ = now;
      pending_.append(data.data(), take);
      if (pending_.size() == max_partial_) {
        out += prefix_;
        out += pending_;
        out += '\n';
        pending_.clear();
      }
    }
    data.remove_prefix(take);
  }
  return out;
}

std::optional<LaunchClock::time_point> LineTagger::due() const {
  if (pending_.empty()) return std::nullopt;
  return since_ + wait_;
}

std::string LineTagger::flush_due(LaunchClock::time_point now) {
  if (pending_.empty() || now < since_ + wait_) return {};
  return flush();
}

std::string LineTagger::flush() {
  if (pending_.empty()) return {};
  std::string out = prefix_ + pending_ + "\n";
  pending_.clear();
  return out;
}

StopPolicy::StopPolicy(std::size_t workers, LaunchClock::duration grace)
    : workers_(workers), grace_(grace), running_(workers) {}

void StopPolicy::arm_kill(LaunchClock::time_point now) {
  if (kill_armed_) return;
  kill_armed_ = kill_pending_ = true;
  kill_at_ = now + grace_;
}

bool StopPolicy::worker_ended(std::size_t rank, bool failed, LaunchClock::time_point now) {
  if (running_ > 0) --running_;
  if (!failed || first_failure_ || stop_signal_ != 0 || !violation_.empty()) return false;
  first_failure_ = rank;
  arm_kill(now);
  return true;
}

bool StopPolicy::user_signal(int sig, LaunchClock::time_point now) {
  arm_kill(now);
  if (stop_signal_ != 0) return false;
  stop_signal_ = sig;
  signalled_ = running_;
  return true;
}

bool StopPolicy::placement_violation(std::string what, LaunchClock::time_point now) {
  if (violation_.empty()) violation_ = std::move(what);
  if (stop_signal_ != 0) return false;
  arm_kill(now);
  return true;
}

std::optional<LaunchClock::time_point> StopPolicy::kill_at() const {
  if (!kill_pending_) return std::nullopt;
  return kill_at_;
}

bool StopPolicy::kill_due(LaunchClock::time_point now) {
  if (!kill_pending_ || now < kill_at_) return false;
  kill_pending_ = false;
  return true;
}

namespace {

std::string workers_text(std::size_t count) {
  return std::to_string(count) + " worker" + (count == 1 ? "" : "s");
}

}  // namespace

Summary summarize(const StopPolicy& policy, const EndWords& words) {
  Summary s;
  const std::size_t n = policy.workers();
  if (const auto bad = policy.first_failure()) {
    s.text += "gpusel: rank " + std::to_string(*bad) + " (GPU " + words.failed_gpu + ") " +
              words.failed_how + "; " +
              (n == 1 ? std::string("it was the only worker")
                      : "the other " + std::to_string(n - 1) + " worker" +
                            (n == 2 ? " was" : "s were") + " stopped") +
              "\n";
  }
  if (!policy.violation().empty() && policy.stop_signal() == 0) {
    s.text += "gpusel: " + policy.violation() + "\n";
    s.exit_code = 1;
    return s;
  }
  if (policy.stop_signal() != 0) {
    const std::size_t signalled = policy.signalled(), killed = policy.killed();
    s.text +=
        "gpusel: stopped by " + words.signal + "; " + words.forwarded + " was forwarded to " +
        (signalled == 0 ? std::string("no worker (all had ended)")
                        : "the " + workers_text(signalled) + " still running") +
        (killed == 0 ? std::string()
                     : ", and " + workers_text(killed) + " still running after the grace period " +
                           (killed == 1 ? words.killed_one : words.killed_several)) +
        "\n";
    s.exit_code = 128 + policy.stop_signal();
    return s;
  }
  if (policy.first_failure()) s.exit_code = words.failed_code;
  return s;
}

namespace {

// The line that stops the job: who opened a context where, and the fix.
std::string misplaced_text(const JobMember& who, const std::string& process,
                           const GpuProcesses& gpu, const LaunchOptions& options,
                           const JobPlan& job) {
  // What the GPU's list counts a process for: a CUDA context (NVML), a HIP queue (ROCm SMI, whose
  // index the number is).
  const std::string opened =
      gpu.amd ? "made a HIP queue on rocm-smi's GPU " : "opened a CUDA context on GPU ";
  std::string text;
  if (who.rank >= 0) {
    text = "rank " + std::to_string(who.rank) + " (GPU " +
           gpu_of(options, job, static_cast<std::size_t>(who.rank)) + ") " + opened +
           std::to_string(gpu.index) + " (" + gpu.uuid + "), not its own (process " + process;
  } else {
    text = "a process the workers left running " + opened + std::to_string(gpu.index) + " (" +
           gpu.uuid + "), none of the job's (" + join_entries(options.gpus) + ") (process " +
           process;
  }
  if (who.orphan) {
    text += ", orphaned: " + std::string(who.rank >= 0 ? "its worker's" : "a worker's") +
            " tree left it running and it came to gpusel, which checks it with the job";
  }
  if (gpu.amd != options.amd) {
    // A machine with both makers' GPUs: the program used the other maker's runtime, whose GPUs
    // the variables gpusel set for the job's maker do not restrict.
    return text +
           (gpu.amd ? "): the program uses HIP, and the job's GPUs are NVIDIA's; "
                      "CUDA_VISIBLE_DEVICES and gpusel's binding do not restrict HIP, and the job "
                      "was stopped. Give a HIP program AMD GPUs (--gpu GPU-<AMD id>, `gpusel list` "
                      "shows them), or keep it off HIP"
                    : "): the program uses CUDA, and the job's GPUs are AMD's; "
                      "ROCR_VISIBLE_DEVICES does not restrict CUDA, and the job was stopped. Give "
                      "a CUDA program NVIDIA GPUs (--gpu with nvidia-smi indices or NVIDIA "
                      "UUIDs), or keep it off CUDA");
  }
  if (options.amd && options.set_visible == SetVisible::Job) {
    // Each worker saw every GPU of the job, in rank order, in ROCR_VISIBLE_DEVICES.
    return text +
           "): the program chose a GPU other than its own among the job's, which gpusel gave "
           "every worker in ROCR_VISIBLE_DEVICES (--set-visible job, in rank order), and the job "
           "was stopped. Use the HIP device of the worker's own GPU (LOCAL_RANK with one rank a "
           "GPU), run without --set-visible job (each worker then sees its GPU alone), or bind the "
           "GPU with gpusel in the program (gpusel_bind_assigned_gpu(), "
           "gpusel.bind_assigned_gpu())";
  }
  if (options.amd) {
    // gpusel gave each worker its GPU alone in ROCR_VISIBLE_DEVICES: only a program that sets
    // the variables again (itself, or a launcher inside it) reaches another GPU.
    return text +
           "): the program chose its GPU itself, though gpusel had given the worker its GPU alone "
           "in ROCR_VISIBLE_DEVICES, and the job was stopped. Leave ROCR_VISIBLE_DEVICES as "
           "gpusel sets it (a launcher inside the program that sets ROCR_, HIP_ or "
           "CUDA_VISIBLE_DEVICES again moves the worker), or bind the GPU with gpusel in the "
           "program (gpusel_bind_assigned_gpu(), gpusel.bind_assigned_gpu())";
  }
  return text +
         "): the program chose its GPU itself, and the job was stopped. Run it with "
         "--set-visible job (for cuda:LOCAL_RANK) or --set-visible own (for cuda:0), or bind "
         "the GPU with gpusel in the program (gpusel::bind_assigned_gpu(), "
         "gpusel.bind_assigned_gpu())";
}

}  // namespace

bool placed_well(const JobMember& who, const std::string& uuid, const LaunchOptions& options,
                 const JobPlan& job) {
  auto fits = [&uuid](const std::string& own) {
    return starts_with_ci(own, "MIG-") || same_entry(own, uuid);
  };
  if (who.rank >= 0) return fits(gpu_of(options, job, static_cast<std::size_t>(who.rank)));
  return std::any_of(options.gpus.begin(), options.gpus.end(), fits);
}

PlacementCheck::PlacementCheck(const LaunchOptions& options, const JobPlan& job,
                               LaunchClock::time_point start)
    : options_(options),
      job_(job),
      on_(static_cast<bool>(options.gpu_processes)),
      next_(start + std::chrono::milliseconds(500)) {}

std::string PlacementCheck::look(const std::function<ProcessFacts(unsigned pid)>& facts,
                                 LaunchClock::time_point now) {
  ++looks_;
  next_ = now + std::chrono::milliseconds(looks_ < 4 ? 500 << looks_ : 5000);
  std::string why_not;
  const std::optional<std::vector<GpuProcesses>> gpus = options_.gpu_processes(why_not);
  if (!gpus) {
    on_ = false;
    return "the placement check is off: " + why_not;
  }
  bool listed = false, any_known = false, any_unknown = false;
  for (const GpuProcesses& g : *gpus) {
    if (!g.pids) continue;
    listed = true;
    for (const unsigned pid : *g.pids) {
      const ProcessFacts who = facts(pid);
      if (!who.exists) {
        any_unknown = true;
        continue;
      }
      any_known = true;
      // Every process of the job: the workers, their descendants, and those they left behind.
      if (!who.member || placed_well(*who.member, g.uuid, options_, job_)) continue;
      violation_ = misplaced_text(*who.member, who.description, g, options_, job_);
      return "";
    }
  }
  if (!listed && !gpus->empty()) {
    on_ = false;
    return std::string("the placement check is off: ") + (options_.amd ? "ROCm SMI" : "NVML") +
           " cannot list the processes on these GPUs";
  }
  if (any_unknown && !any_known && ++unknown_looks_ >= 2) {
    on_ = false;
    return std::string("the placement check is off: ") + (options_.amd ? "ROCm SMI" : "NVML") +
           " names processes this system does not show (a container's own pid namespace?)";
  }
  return "";
}

}  // namespace gpusel::detail
