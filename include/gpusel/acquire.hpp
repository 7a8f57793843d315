// gpusel: the GPUs a job runs on, resolved (or picked by free:N) and leased for its lifetime.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpusel/export.h"
#include "gpusel/lease.hpp"
#include "gpusel/pick.hpp"
#include "gpusel/probe.hpp"
#include "gpusel/resolution.hpp"
#include "gpusel/spec.hpp"

GPUSEL_BEGIN_NAMESPACE

struct AcquireOptions {
  FreeLimits limits;
  bool lease = false;  // hold a lease on every GPU until the Acquisition is destroyed
  bool share = false;  // with `lease`: run on GPUs someone else leased, leasing none of them
  // Wait for leased or busy GPUs instead of failing: nullopt no waiting, else at most this many
  // seconds (infinity: for ever). Waiters are served in arrival order.
  std::optional<double> wait_seconds;
  // Told once, when waiting starts, what is awaited (both wordings: show it with gpusel::worded).
  std::function<void(const std::string&)> on_wait;
};

struct Acquisition {
  Resolution resolution;
  std::vector<Lease> leases;  // one per GPU, in rank order, when leasing
  // free:N: what was picked and why (show it with gpusel::worded); empty otherwise.
  std::string why;
  // free:N: each GPU's standing at the moment of picking, in nvidia-smi order ("" free).
  std::vector<std::string> standing;
  // After a wait: what watched the lease store, let go with it (a launcher drops it once its
  // workers have started: letting it go costs the kernel's time, not the job's).
  std::shared_ptr<void> waited;
};

// Resolves `request` (read by read_gpu_request: GPUs, free:N or all) as resolve_gpus does,
// picking free GPUs for free:N, and leases them when asked. Throws Error(BadInput) for a request
// that can never be met (free:9 on 8 GPUs), Error(Failure) when GPUs are leased or busy (the
// message lists each GPU and why) or NVML cannot tell which are free.
Acquisition acquire_gpus(const GpuRequest& request, const CudaEnv& env,
                         const std::string& probe_helper, const AcquireOptions& options);

GPUSEL_END_NAMESPACE
