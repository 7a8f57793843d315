// gpusel: one process per GPU on this machine, supervised.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gpusel/export.h"
#include "gpusel/visible.hpp"

GPUSEL_BEGIN_NAMESPACE

enum class CpuBinding { None, Node, Exclusive };

// What a worker's CUDA_VISIBLE_DEVICES is set to before exec. None leaves it as gpusel found it
// (the default: workers bind by UUID). Own: the worker's own GPU only (it sees cuda:0). Job: every
// worker's GPU in rank order (cuda:LOCAL_RANK is its own; peers stay visible for peer-to-peer).
// The entries must be full GPU UUIDs.
enum class SetVisible { None, Own, Job };

// The processes NVML sees on one GPU, for the placement check.
struct GpuProcesses {
  std::string uuid;
  unsigned index = 0;                         // nvidia-smi index (rocm-smi index on AMD GPUs)
  std::optional<std::vector<unsigned>> pids;  // nullopt: NVML cannot list them on this GPU
  bool amd = false;  // an AMD GPU (ROCm SMI's list: processes with HIP queues there)
};

struct LaunchOptions {
  std::vector<std::string> command;    // program and arguments
  std::vector<std::string> gpus;       // one entry per rank (resolved UUIDs, or raw entries)
  std::vector<std::vector<int>> cpus;  // per rank; empty: leave the affinity alone
  bool tag_output = false;             // prefix each line with "[rank N] "
  double grace_seconds = 10;           // SIGTERM, then SIGKILL after this long
  SetVisible set_visible = SetVisible::None;
  // AMD GPUs (gpus hold their unique ids, GPU-<16 hex>): a HIP program cannot be bound from
  // inside, so each worker is placed before exec by ROCr's own variable: ROCR_VISIBLE_DEVICES is
  // its GPU's id (SetVisible::Job: every worker's GPU, each once, in rank order), and
  // HIP_VISIBLE_DEVICES and CUDA_VISIBLE_DEVICES, which HIP would read within it, are removed.
  bool amd = false;
  // Called in gpusel once every worker has started, with each rank's pid (rank order).
  std::function<void(const std::vector<int>& pids)> on_started;
  // Called once every worker (and, with reap_orphans, every process they left behind) has
  // exited and been reaped, before the last of their output is drained and the summary written
  // (Linux): the moment leases held for the job can go. Windows:
  // once the supervision has ended and the workers' Job Objects were told to terminate (their
  // processes end with them; the leases went at the same point before, when the call returned).
  std::function<void()> on_ended;
  // Linux: this process becomes the reaper of the workers' orphans for the job's lifetime
  // (PR_SET_CHILD_SUBREAPER), so a process a worker leaves behind (a daemon, a grandchild that
  // ignores SIGINT) is stopped with the workers, and launch_workers returns only once every one
  // has exited: leases held around the call cover all of them. It then reaps every child of the
  // calling process, so set it only where the workers are its only children (gpusel run does).
  // Windows: the workers' job objects already hold their descendants.
  bool reap_orphans = false;
  // Ranks per GPU (1: one each). With K > 1, K consecutive ranks share each GPU: rank r runs on
  // gpus[r / K], and every worker is told it shares (GPUSEL_SHARE=1).
  int ranks_per_gpu = 1;
  // Every worker shares its GPU on purpose (GPUSEL_SHARE=1): gpusel run --share.
  bool share = false;
  // Check what the workers really opened (Linux and Windows). `gpu_processes` (set by the caller,
  // who reads NVML) is asked soon after the start and then at a low rate which processes run on
  // each GPU; a process of a worker's tree (with reap_orphans, also one the workers left behind;
  // on Windows, any process in a worker's Job Object) with a context on a GPU other than that
  // worker's (gpus must hold UUIDs) stops the job, with exit status 1 and a line saying which
  // worker, which process, which GPU, and the fix. Where the processes cannot be listed, or are
  // ids of another pid namespace, one line says the check is off. Unset: no check.
  std::function<std::optional<std::vector<GpuProcesses>>(std::string& why_not)> gpu_processes;
  // Called with each line the check has to say (that it is off, and why); default: stderr.
  std::function<void(const std::string&)> on_note;
};

// The path execvp would run for `name`. Throws Error(BadInput) when it is not found or not an
// executable file.
std::string find_program(const std::string& name);

// Starts one worker per entry and supervises them: signals INT, TERM, HUP and QUIT are forwarded
// to every worker; when one fails the others get SIGTERM; either way those still running get
// SIGKILL after the grace period; no worker outlives this process, even when it is killed.
// Job control (Linux): SIGTSTP (Ctrl-Z) stops every worker, then this process; SIGCONT (fg, bg)
// resumes them all.
// Returns 128 + N when signal N was forwarded (whatever the workers did), else 0 when all
// succeed, else the first failing worker's status (128 + N for signal N), after a one-line
// summary on stderr. Workers are reaped by pid (the caller's other children are left alone); on
// every way out, the signal mask and all descriptors are restored, and workers still running are
// killed and reaped. Throws Error(BadInput) for a grace period that is negative or not finite,
// Error(Failure) when the workers cannot be started or supervised.
int launch_workers(const LaunchOptions& options);

// The same, running `program` (find_program's answer for options.command[0], looked up by the
// caller beforehand, e.g. to refuse a missing program before anything else), so that PATH is
// walked once.
int launch_workers(const LaunchOptions& options, const std::string& program);

// The CPUs each rank should run on: those near its GPU (NVML's CPU affinity, else the PCI device's
// NUMA node from sysfs), within `allowed` (this process's own affinity). With Exclusive, ranks
// whose GPUs share CPUs split them evenly. Throws Error(Failure) when a GPU's CPUs are unknown or
// all outside `allowed`.
std::vector<std::vector<int>> plan_cpus(const std::vector<GpuInfo>& rank_gpus, CpuBinding mode,
                                        const std::vector<int>& allowed);

// This process's CPU affinity.
std::vector<int> own_cpus();

GPUSEL_END_NAMESPACE
