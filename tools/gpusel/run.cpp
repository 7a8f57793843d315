// gpusel run: one process per GPU, each told its GPU, supervised as one job.
#ifndef _WIN32
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

#include <cmath>
#include <cstdlib>
#include <ctime>
#include <map>

#include "commands.hpp"
#include "common.hpp"
#include "gpusel/amd.hpp"
#include "gpusel/error.hpp"
#include "gpusel/launch.hpp"
#include "gpusel/lease.hpp"
#include "gpusel/nvml.hpp"
#include "gpusel/probe.hpp"
#include "gpusel/resolution.hpp"
#include "gpusel/spec.hpp"
#include "gpusel_detail.hpp"
#include "interface.hpp"

namespace gpusel::cli {

namespace {

// Whether the note kept in the stamp file `name` of `folder` (this user's state folder) is due
// today: true the first time on each day (local time), which the stamp then records. Said when
// the folder is not this user's alone or the stamp cannot be read or written.
#ifdef _WIN32
bool due_today(const std::string&, const char*) {
  return true;  // Windows leases have no per-user scope note (lease_win.cpp), so no stamp either
}
#else
bool due_today(const std::string& folder, const char* name) {
  struct stat st {};
  if (lstat(folder.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
      (st.st_mode & (S_IWGRP | S_IWOTH))) {
    return true;
  }
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  char day[16] = {};
  if (localtime_r(&now, &local) == nullptr ||
      std::strftime(day, sizeof day, "%Y-%m-%d", &local) != 10) {
    return true;
  }
  const std::string path = folder + "/" + name;
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return true;
  char seen[16] = {};
  const bool said = pread(fd, seen, sizeof seen - 1, 0) == 10 && std::string(seen) == day;
  if (!said && ftruncate(fd, 0) == 0 && pwrite(fd, day, 10, 0) != 10) {
    // Not recorded: said again next time, which is all a failed stamp costs.
  }
  close(fd);
  return !said;
}
#endif

// Notes for the job: the lease store's scope (a note that changes nothing: leases bind only this
// user's jobs) is never said under --quiet and at most once a day, stamped in this user's state
// folder beside its own lease store (setting GPUSEL_LEASE_DIR silences it, as does a shared store).
void print_notes(const Resolution& r, bool quiet) {
  for (const Note& note : r.notes) {
    if (note.code == "amd-gpus" && quiet) continue;  // says how, not what: --quiet drops it
    if (note.code == "lease-scope") {
      if (quiet) continue;  // (before the store is looked for again: a waiter's first worker waits)
      const std::string own = LeaseStore::locate().own_dir();
      if (!due_today(own.substr(0, own.rfind('/')), "lease-scope-note-day")) continue;
    }
    print_note(note.text);
  }
}

// The processes on each GPU of `gpus`, as the run-time check takes them.
std::vector<GpuProcesses> processes_on(const std::vector<GpuInfo>& gpus) {
  std::vector<GpuProcesses> out;
  for (const GpuInfo& g : gpus) {
    GpuProcesses p;
    p.uuid = g.uuid;
    p.index = g.index;
    if (g.processes) {
      p.pids.emplace();
      for (const GpuProcess& proc : *g.processes) p.pids->push_back(proc.pid);
    }
    out.push_back(std::move(p));
  }
  return out;
}

// For the run-time check: the processes NVML lists on each GPU (a CUDA context there)...
std::optional<std::vector<GpuProcesses>> nvml_gpu_processes(std::string& why_not) {
  const NvmlSnapshot snap = query_nvml(NvmlQuery{true, false});
  if (!snap.available) {
    why_not = "NVML is unavailable (" + snap.reason + ")";
    return std::nullopt;
  }
  return processes_on(snap.gpus);
}

// ... or, on AMD GPUs, those ROCm SMI lists (KFD queues there).
std::optional<std::vector<GpuProcesses>> rocm_smi_gpu_processes(std::string& why_not) {
  const AmdSnapshot snap = query_rocm_smi(true);
  if (!snap.available) {
    why_not = "ROCm SMI is unavailable (" + snap.reason + ")";
    return std::nullopt;
  }
  std::vector<GpuInfo> gpus = amd_gpu_records(snap);
  std::erase_if(gpus, [](const GpuInfo& g) { return g.uuid.empty(); });  // no worker was given it
  std::vector<GpuProcesses> out = processes_on(gpus);
  for (GpuProcesses& g : out) g.amd = true;
  return out;
}

// The check's source for a job of one maker's GPUs: that maker's list, and where the machine has
// GPUs of the other maker too, theirs: a worker's process sees those whatever gpusel set (a CUDA
// program in a job of AMD GPUs, which ROCR_VISIBLE_DEVICES does not restrict, takes an NVIDIA
// GPU; a HIP program in a job of NVIDIA GPUs, an AMD one). Whether the other maker's GPUs are
// there is asked at the first look, after the workers have started, and kept.
auto both_makers(bool amd_job) {
  return [amd_job, other = std::optional<bool>()](
             std::string& why_not) mutable -> std::optional<std::vector<GpuProcesses>> {
    std::optional<std::vector<GpuProcesses>> own =
        amd_job ? rocm_smi_gpu_processes(why_not) : nvml_gpu_processes(why_not);
    if (!own || other == false) return own;
    std::string unused;
    const std::optional<std::vector<GpuProcesses>> theirs =
        amd_job ? nvml_gpu_processes(unused) : rocm_smi_gpu_processes(unused);
    other = theirs && !theirs->empty();
    if (*other) own->insert(own->end(), theirs->begin(), theirs->end());
    return own;
  };
}

}  // namespace

RunOptions read_run(const CommandLine& line) {
  RunOptions o;
  o.gpus = read_gpu_list(line);
  o.tag_output = line.flag("--tag-output");
  if (const std::optional<std::string> grace = line.value("--grace")) {
    // strtod, then a check that NaN and infinities fail (NaN compares false both ways).
    char* end = nullptr;
    const double seconds = std::strtod(grace->c_str(), &end);
    if (grace->empty() || end == nullptr || *end != '\0' || !std::isfinite(seconds) ||
        seconds < 0 || seconds > 86400) {
      throw bad_input("--grace " + detail::quote_value(*grace) +
                      " is not a number of seconds from 0 to 86400");
    }
    o.grace = seconds;
  }
  o.bind_cpu = line.value("--bind-cpu").value_or("none");
  o.set_visible = line.value("--set-visible").value_or("none");
  o.ranks_per_gpu = static_cast<int>(whole_option(line, "--ranks-per-gpu", 1, 4096, 1));
  o.no_placement_check = line.flag("--no-placement-check");
  o.choice = read_choice_options(line);
  o.quiet = line.flag("--quiet");
  o.command = line.words();
  return o;
}

int run_run(const RunOptions& options) {
  // Looked up once: to fail before any worker starts, and to start them.
  const std::string program = find_program(options.command.front());
  // The leases are held until the last worker, and all they left behind, have exited.
  ChoiceOptions choice = options.choice;
  choice.quiet = options.quiet;
  Acquisition held = acquire(options.gpus, choice, true);
  const Resolution& r = held.resolution;
  if (!r.resolved) {
    print_warning("NVML is unavailable (" + r.reason +
                  "); workers get the UUIDs as given and match them against CUDA's own devices");
  }
  print_notes(r, options.quiet);
  LaunchOptions launch;
  launch.command = options.command;
  launch.gpus = r.gpus;
  launch.tag_output = options.tag_output;
  launch.grace_seconds = options.grace;
  // Processes the workers leave behind are stopped with them, and the leases cover them until
  // they have exited: released then, before gpusel tidies up (a job waiting for them goes on).
  launch.reap_orphans = true;
  launch.on_ended = [&held] {
    held.leases.clear();
#ifndef _WIN32
    // A job waiting for these GPUs was woken by the release, most often onto this CPU (where
    // the wake ran), behind this process: it goes first, before the tidying up and the exit
    // (a quarter of a millisecond on the hand-off, bench/handoff_split.py). Without a waiter,
    // this process goes on at once.
    sched_yield();
#endif
  };
  launch.ranks_per_gpu = options.ranks_per_gpu;
  launch.share = options.choice.share;
  // AMD GPUs: each worker placed by ROCR_VISIBLE_DEVICES before exec (LaunchOptions::amd).
  launch.amd = r.vendor == "amd";
  // What the workers really open is checked against their GPUs.
  if (r.resolved && !options.no_placement_check) {
    launch.gpu_processes = both_makers(launch.amd);
  }
  const auto per_gpu = static_cast<std::size_t>(options.ranks_per_gpu);
  launch.on_started = [&r, &held, per_gpu, quiet = options.quiet](const std::vector<int>& pids) {
    // Another user who finds these GPUs held after this process has ended (SIGKILLed while its
    // workers' children run on) learns whose job holds them from the record of its groups.
    detail::note_job_groups(pids);
    held.waited.reset();  // the wait's watch on the lease store, let go now the job runs
    if (quiet) return;
    for (std::size_t rank = 0; rank < pids.size(); ++rank) {
      const std::string& uuid = r.gpus[rank / per_gpu];
      std::string index = "?";
      for (const GpuInfo& g : r.machine) {
        if (g.uuid == uuid) index = std::to_string(g.index);
      }
      // AMD GPUs by rocm-smi's number (on a machine with both makers, nvidia-smi's differ).
      print_note("rank " + std::to_string(rank) + ": pid " + std::to_string(pids[rank]) + ", " +
                 (r.vendor == "amd" ? "rocm-smi GPU " : "GPU ") + index + " (" + uuid + ")" +
                 (per_gpu > 1 ? ", shared" : ""));
    }
  };
  if (options.set_visible != "none") {
    if (!r.resolved) {
      throw failure("--set-visible " + options.set_visible +
                    " needs the GPUs' UUIDs, and NVML is unavailable (" + r.reason +
                    "); run without --set-visible and bind in the workers, or fix NVML");
    }
    launch.set_visible = options.set_visible == "own" ? SetVisible::Own : SetVisible::Job;
  }
  if (options.bind_cpu != "none") {
    if (!r.resolved)
      throw failure("--bind-cpu " + options.bind_cpu +
                    " needs NVML to find the CPUs near each GPU");
    std::vector<GpuInfo> rank_gpus;  // each rank's GPU, K consecutive ranks per GPU
    for (std::optional<GpuInfo>& g : resolved_in_full(r)) {
      if (!g) continue;
      for (int k = 0; k < options.ranks_per_gpu; ++k) rank_gpus.push_back(*g);
    }
    try {
      launch.cpus = plan_cpus(rank_gpus,
                              options.bind_cpu == "node" ? CpuBinding::Node : CpuBinding::Exclusive,
                              own_cpus());
    } catch (const Error& e) {
#ifdef _WIN32
      throw failure("--bind-cpu " + options.bind_cpu + ": " + said(e) +
                    "; run with --bind-cpu none (to keep the workers on chosen CPUs, start "
                    "gpusel with `start /affinity HEXMASK gpusel ...`: they inherit its affinity)");
#else
      throw failure(
          "--bind-cpu " + options.bind_cpu + ": " + said(e) +
          "; run with --bind-cpu none, or allow those CPUs (taskset, the cgroup's cpuset)");
#endif
    }
  }
  return launch_workers(launch, program);
}

}  // namespace gpusel::cli
