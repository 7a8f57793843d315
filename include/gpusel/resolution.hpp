// gpusel: resolving a --gpu request to GPU UUIDs: against a list of GPUs (pure), and a parent's
// resolution on this machine (NVML once, the CUDA probe only where NVML cannot tell CUDA's order,
// free:N picks); and the CUDA environment it reads.
#pragma once

#include <string>
#include <vector>

#include "gpusel/export.h"
#include "gpusel/spec.hpp"
#include "gpusel/visible.hpp"

GPUSEL_BEGIN_NAMESPACE

// Resolves entries (a request read by read_gpu_request) against the physical GPUs NVML reported,
// without I/O (resolve_gpus below reads the machine and calls it). Without a preset
// CUDA_VISIBLE_DEVICES an index is an nvidia-smi index and a UUID prefix must name exactly one
// GPU. With a preset, an index counts within the devices the driver exposes and a UUID must name
// one of the preset's UUID entries. `cuda_order` is CUDA's enumeration order of the GPUs, as for
// model_visible. Throws Error(BadInput) with a message naming the entry, the preset and the
// remedy.
std::vector<std::string> resolve_entries(const std::vector<GpuEntry>& entries,
                                         const std::vector<GpuInfo>& gpus, const CudaEnv& env,
                                         const std::vector<int>* cuda_order = nullptr);

// CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER as this process sees them.
CudaEnv cuda_env_from_environment();

struct Resolution {
  bool resolved = false;      // false: entries passed on as given (UUIDs without NVML)
  std::string reason;         // why NVML is unavailable
  Problem nvml_problem;       // the same as data (the code, the call and what it returned)
  bool probed = false;        // CUDA's order came from a probe
  bool through_cuda = false;  // NVML unavailable: indices mapped through CUDA's PCI order
  // Whose GPUs: "nvidia", or "amd" where NVML is unavailable and ROCm SMI monitors GPUs (their
  // unique ids in `gpus`, rocm-smi's indices in `machine`; docs/amd.md).
  std::string vendor = "nvidia";
  std::vector<std::string> gpus;
  // The GPUs resolution used (NVML's, else CUDA's), read as far as resolving needed: every
  // GPU's UUID and index; under a preset, every GPU's name, compute capability and MIG devices;
  // without one, the MIG devices of the GPUs resolved to. (free:N reads every field of GpuInfo.)
  // query_nvml() reads the rest.
  std::vector<GpuInfo> machine;
  // What a user should be told once (renumbering, fallbacks), with both wordings where a
  // program's and the command line's differ: show each with gpusel::worded (gpusel/error.hpp).
  std::vector<Note> notes;
};

// The whole of a parent's resolution: NVML once, and a CUDA probe only where NVML cannot place
// an integer preset (GPUs of mixed models under FASTEST_FIRST). Without NVML, index entries are
// mapped through CUDA's own enumeration in PCI bus order (a probe); UUID entries are passed on.
// A free:N request picks N free GPUs as acquire_gpus does, leasing none. "all" stands for every
// GPU this process may use, from the same enumeration: without CUDA_VISIBLE_DEVICES each GPU NVML
// lists but failed and MIG-enabled ones (named in `notes`), under a preset every GPU it exposes,
// without NVML every GPU CUDA enumerates. The request is read once, by read_gpu_request.
// Throws Error(BadInput) for an entry that cannot be resolved, Error(Failure) when indices
// cannot be placed at all.
Resolution resolve_gpus(const GpuRequest& request, const CudaEnv& env,
                        const std::string& probe_helper);

struct AmdSnapshot;
// The same request on a machine whose GPUs are AMD's (`amd` as ROCm SMI read them): indices are
// rocm-smi's, ids and their prefixes name one GPU each, `all` is every GPU. Under
// ROCR_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES (CudaEnv's), the GPUs HIP
// would see here are the quota: an index is a position in it, an id must be in it; refused
// (BadInput) where that cannot be told (no KFD order from ROCm SMI, an answer that depends on
// HIP's version) or leaves no GPU. free:N is acquire_gpus's (Failure here). resolve_gpus calls it
// where NVML is unavailable and ROCm SMI lists GPUs.
Resolution resolve_on_amd(const GpuRequest& request, const CudaEnv& env, const AmdSnapshot& amd);

// A machine with NVIDIA GPUs (`nvidia`, NVML's) and AMD GPUs too (docs/amd.md): a --gpu list
// whose entries all name AMD GPUs by unique id (or a unique prefix) is resolved on them as
// resolve_on_amd does; one that mixes the makers is refused (BadInput); nullopt where no entry
// names an AMD GPU, or ROCm SMI lists none. resolve_gpus asks it only when NVML's resolution
// found no GPU for an entry, so NVIDIA machines pay nothing for it.
std::optional<Resolution> resolve_amd_beside_nvidia(const GpuRequest& request, const CudaEnv& env,
                                                    const std::vector<GpuInfo>& nvidia);

// After NVML resolved `request`: refuses (BadInput) a UUID prefix that also starts the id of an AMD
// GPU ROCm SMI lists (a machine with both makers' GPUs). Asks ROCm SMI only where an entry is a
// prefix short enough to (no dash yet), so whole UUIDs and indices cost nothing.
void refuse_prefix_of_both_makers(const GpuRequest& request);

// The devices a HIP program started in this environment would have on the AMD GPUs `amd`:
// ROCm SMI's KFD order through ROCR_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES and `env`'s
// CUDA_VISIBLE_DEVICES, by ROCm's rules (src/core/amd_visible.cpp). One reading for resolve's
// quota, list's HIP column and bind's choice.
struct HipDevices {
  bool preset = false;   // any of the three variables is set
  std::string settings;  // the three as set ("ROCR_VISIBLE_DEVICES=unset, ..."), for messages
  std::vector<std::string> ids;  // the devices' ids in HIP ordinal order
  // Why they cannot be told ("" when they can): "amd-kfd-order-unknown" (ROCm SMI gives no KFD
  // node ids), "amd-rocr-empty-entry" (HIP programs abort), "amd-hip-version-dependent".
  std::string unknown;
};
HipDevices hip_devices(const CudaEnv& env, const AmdSnapshot& amd);

// Each GPU's HIP ordinal in `here`, by position in `amd.gpus`: nullopt for a GPU the variables
// hide, and for every GPU when `here` cannot be told (here.unknown set).
std::vector<std::optional<int>> hip_ordinals(const HipDevices& here, const AmdSnapshot& amd);

// ROCR_, HIP_ and CUDA_VISIBLE_DEVICES as set here ("ROCR_VISIBLE_DEVICES=unset, ..."), for
// messages: HipDevices::settings.
std::string hip_settings(const CudaEnv& env);

// The AMD GPUs a request may be given here: every GPU with an id (rocm-smi's order), or under
// ROCm's variables the quota (HIP's order), read and refused as resolve_on_amd does (`asked`
// starts its messages); and the note (code amd-gpus) that says whose GPUs they are.
struct AmdChoice {
  std::vector<std::string> ids;
  bool preset = false;
  Note note;
};
AmdChoice amd_choices(const std::string& asked, const CudaEnv& env, const AmdSnapshot& amd);

GPUSEL_END_NAMESPACE
