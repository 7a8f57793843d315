// gpusel: the worker side. A process publishes the GPU it was assigned before any CUDA call, then
// binds it when CUDA comes up, by matching the UUID against CUDA's own visible devices, so the
// result is right under any CUDA_DEVICE_ORDER and any CUDA_VISIBLE_DEVICES. Every function is
// safe to call from several threads; none changes CUDA_VISIBLE_DEVICES.
//
//   gpusel::assign_from_environment();          // GPUSEL_GPUS + the launcher's local rank
//   int ordinal = gpusel::bind_assigned_gpu();  // the primary context is now current
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpusel {

// The launchers' local-rank variables, in the order they are read (the first one set wins).
inline constexpr const char* kLocalRankVariables[] = {
    "LOCAL_RANK",      "SLURM_LOCALID",  "OMPI_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK",
    "MPI_LOCALRANKID", "PMI_LOCAL_RANK", "PALS_LOCAL_RANKID",          "FLUX_TASK_LOCAL_ID"};

struct LocalRank {
  std::string variable;
  int rank = 0;
};

// The local rank from the first variable that is set; nullopt when none is. Throws
// Error(BadInput) naming the variable and its value when it is not a non-negative integer.
std::optional<LocalRank> local_rank();

// Publishes this process's GPU: a full or prefix UUID (a physical GPU), or an index, which is
// then a CUDA ordinal in this process. Publishing the same GPU again is fine, also after binding;
// a different one throws Error(BadInput) naming both.
void set_assigned_gpu(std::string_view target);

// Resolves one --gpu value (exactly one entry) as a parent would, through NVML, and publishes
// the result; without NVML the entry is published as given.
void assign_gpu(std::string_view value);

// Publishes this worker's entry of GPUSEL_GPUS, chosen by local_rank(). Returns the rank used,
// or nullopt when GPUSEL_GPUS is unset (nothing is published). Throws Error(BadInput) when the
// rank is missing, malformed or beyond the list.
std::optional<LocalRank> assign_from_environment();

// Initialises CUDA, finds the published GPU among CUDA's visible devices, retains its primary
// context and makes it current on the calling thread (the state cudaSetDevice leaves), and
// returns its CUDA ordinal. When nothing was published, binds `default_ordinal` and records it.
// Throws Error(BadInput) when the GPU is not visible to CUDA here (the message lists what is,
// and CUDA_VISIBLE_DEVICES), Error(Failure) when CUDA is unavailable.
int bind_assigned_gpu(int default_ordinal = 0);

// The CUDA ordinal this process is (or will be) bound to: known after publishing, before binding
// (this initialises CUDA, without creating a context). nullopt when nothing is published or bound.
std::optional<int> assigned_visible_gpu();

// What a visible device is, by every name.
struct GpuIdentity {
  std::optional<unsigned> index;  // nvidia-smi index, when NVML is available
  int cuda_ordinal = 0;
  std::string uuid;
  std::string name;
  std::uint64_t total_bytes = 0;
  int cc_major = 0;
  int cc_minor = 0;
  std::string pci_bus_id;
  std::uint64_t l2_cache_bytes = 0;  // 0 when unknown
};
GpuIdentity gpu_identity(int cuda_ordinal);

}  // namespace gpusel
