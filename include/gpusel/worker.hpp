// gpusel: the worker side. A process publishes the GPU it was assigned before any CUDA call, then
// binds it when CUDA comes up, by matching the UUID against CUDA's own visible devices, so the
// result is right under any CUDA_DEVICE_ORDER and any CUDA_VISIBLE_DEVICES. Every function is
// safe to call from several threads; none changes CUDA_VISIBLE_DEVICES.
//
//   int ordinal = gpusel::bind_assigned_gpu();  // the rule of assignment.hpp; the primary
//                                               // context is now current
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpusel/assignment.hpp"
#include "gpusel/cuda.hpp"
#include "gpusel/error.hpp"
#include "gpusel/export.h"
#include "gpusel/visible.hpp"

GPUSEL_BEGIN_NAMESPACE

// The local rank of the launcher that started this process (choose_local_rank over
// launcher_view()); nullopt when none is set. Throws Error(BadInput) for a malformed value, or
// for two disagreeing variables when the nearer one cannot be told.
std::optional<LocalRank> local_rank();

// How this process's GPU was decided.
struct AssignmentInfo {
  AssignmentSource source = AssignmentSource::Code;
  std::optional<LocalRank> rank;  // the local rank that picked the GPU, where one did
  // After binding: whether this process shares its GPU on purpose (sharing_asked()), and the
  // process whose claim it runs beside when it knows one.
  bool shared = false;
  std::optional<int> shared_with_pid;
  // After binding: why no claim could be taken on the GPU (its file could not be used), with the
  // code "unclaimed" (no claim at all) or "claim-partial"; an empty note after a full claim.
  Note claim_note;
};

// Whether this process shares its GPU with others on purpose: GPUSEL_SHARE=1 (set by gpusel run
// --share and --ranks-per-gpu), or Slurm's --ntasks-per-gpu (SLURM_NTASKS_PER_GPU). Throws
// Error(BadInput) for a GPUSEL_SHARE that is neither 1 nor 0.
bool sharing_asked();

// A way this process's environment would put it on a wrong GPU, or on a GPU another process of
// the same job also takes: `gpusel doctor` reports each as an error, and bind_assigned_gpu
// refuses (exit 2) with the first, unless an assignment was made in code.
struct PlacementProblem {
  std::string id;  // "gpusel-gpu-shared", "gpusel-gpus-count", ... (docs/placement.md)
  std::string message;
  std::string remedy;
  Problem data;  // the refusal as data: its subject and fields (a variable and its value ...)
};

// The problems of this process's environment: GPUSEL_GPU inherited by several ranks, GPUSEL_GPUS
// against the local rank and the launcher's count of ranks, a local rank that cannot be read, and
// (given how many devices CUDA exposes here) more processes on this node than devices. Reads the
// environment, and the ancestors' environments where several launchers' variables are set.
std::vector<PlacementProblem> placement_problems(
    std::optional<std::size_t> visible_devices = std::nullopt);

// Publishes this process's GPU: a full or prefix UUID (a physical GPU), or an index, which is
// then a CUDA ordinal in this process. Publishing the same GPU again is fine, also after binding;
// a different one throws Error(BadInput) naming both.
void set_assigned_gpu(std::string_view target);

// Resolves one --gpu value (exactly one entry) as a parent would, through NVML, and publishes
// the result; without NVML the entry is published as given.
void assign_gpu(std::string_view value);

// Steps 2 and 3 of the rule: publishes GPUSEL_GPU, else this worker's entry of GPUSEL_GPUS chosen
// by local_rank(). An index entry means what it means in --gpu (resolved through NVML within a
// preset CUDA_VISIBLE_DEVICES); a UUID is taken as it is, and only CUDA's own devices decide
// whether it can be bound. Returns what decided, or nullopt when neither variable is set (nothing
// published). Throws Error(BadInput) when the rank is missing, malformed, beyond the list, or the
// launcher's count of local ranks differs from the list's length.
std::optional<AssignmentInfo> assign_from_environment();

// Initialises CUDA, finds this process's GPU among CUDA's visible devices, retains its primary
// context and makes it current on the calling thread (the state cudaSetDevice leaves), and
// returns its CUDA ordinal. When nothing was published, the rule of assignment.hpp decides:
// GPUSEL_GPU, GPUSEL_GPUS, a launcher's local rank over several visible devices, the only visible
// device, and only with no launcher at all `default_ordinal`. Throws Error(BadInput) when the GPU
// is not visible to CUDA here (the message lists what is, and CUDA_VISIBLE_DEVICES) or the
// environment cannot tell the ranks apart, Error(Failure) when CUDA is unavailable.
// In a HIP program (AMD GPUs; a libamdhip64 already loaded in the process, HIP 5.1 or later) the
// same rule runs over HIP's devices instead, compared by their ids, and the GPU becomes the
// calling thread's current HIP device (hipSetDevice); the return is its HIP ordinal.
int bind_assigned_gpu(int default_ordinal = 0);

// How this process's GPU was decided; nullopt before anything is published or bound.
std::optional<AssignmentInfo> assignment_info();

// The CUDA ordinal this process is (or will be) bound to: known after publishing, before binding
// (this initialises CUDA, without creating a context). nullopt when nothing is published or bound.
std::optional<int> assigned_visible_gpu();

// What a visible device is, by every name: CUDA's record of it, with its nvidia-smi index where
// NVML knows it.
CudaDevice gpu_identity(int cuda_ordinal);

GPUSEL_END_NAMESPACE
