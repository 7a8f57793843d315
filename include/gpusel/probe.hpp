// gpusel: asking CUDA how it numbers the GPUs, from a short-lived child process, so that the
// caller never initialises CUDA itself.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gpusel/cuda.hpp"
#include "gpusel/error.hpp"
#include "gpusel/export.h"
#include "gpusel/visible.hpp"

GPUSEL_BEGIN_NAMESPACE

struct ProbeResult {
  bool ok = false;
  // Why the probe failed, for messages: both wordings where a program's and the command line's
  // differ (show it with gpusel::worded, gpusel/error.hpp).
  std::string reason;
  // The same as data: the probe's own failure (ProbeUnavailable, ProbeTimedOut, ProbeFailed), or
  // what CUDA answered in the child (LibraryNotLoaded, CudaLinkStub, NoDevice, DriverCallFailed
  // with the call and its CUresult ...).
  Problem problem;
  std::vector<CudaDevice> devices;
};

// Runs `helper` (the library's probe helper program, gpusel-probe-cuda; see default_probe_helper)
// and reads what CUDA enumerates in it. With `unfiltered`, the child runs without
// CUDA_VISIBLE_DEVICES, so it sees every device in CUDA's own order; otherwise it inherits this
// process's environment.
ProbeResult probe_cuda(const std::string& helper, bool unfiltered);

// The probe's helper program: GPUSEL_PROBE_HELPER when set, else the gpusel-probe-cuda installed
// with the library (gpusel-probe-cuda.exe on Windows), looked for beside the library (or the
// program the static library is linked into), then in ../libexec/gpusel/ and ../../libexec/gpusel/
// from there; empty when there is none (no probe: resolution refuses what only CUDA could tell).
std::string default_probe_helper();

// A `helper` for probe_cuda (and the probe_helper of resolve_gpus and acquire_gpus) that stands
// for default_probe_helper(), looked for only if a probe runs: finding the helper costs a few
// system calls, which a resolution that needs no probe (most) is spared. It names no file: it
// holds a NUL byte, which no path can.
const std::string& probe_helper_when_needed();

GPUSEL_END_NAMESPACE
