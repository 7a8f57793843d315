// gpusel: AMD GPUs as ROCm SMI (librocm_smi64.so.1, loaded at run time) reports them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpusel/error.hpp"
#include "gpusel/export.h"
#include "gpusel/visible.hpp"

GPUSEL_BEGIN_NAMESPACE

// One AMD GPU, by rocm-smi's index. Its id is the 64-bit unique id as ROCr and HIP write it:
// GPU- and 16 lower-case hex digits ("" when ROCm SMI gives none).
struct AmdGpu {
  unsigned index = 0;  // rocm-smi's index (DRM card order in ROCm 5.x, PCI order from 6.0)
  std::string id;
  std::string name;
  std::string pci_bus_id;  // 00000000:83:00.0, as NVML writes bus ids ("" when unknown)
  std::uint64_t memory_total = 0, memory_used = 0;
  std::optional<unsigned> busy_percent;
  // The GPU's node in the kernel's KFD topology (ROCr and HIP number GPUs in node order), where
  // ROCm SMI says (rsmi_dev_node_id_get, ROCm 6.x; not in 5.x).
  std::optional<unsigned> kfd_node;
  // The NUMA node the GPU's PCI device is attached to (rsmi_topo_numa_affinity_get), where known:
  // `run --bind-cpu` takes the CPUs near the GPU from it.
  std::optional<int> numa_node;
  // The GPU's DRM render node (/dev/dri/renderD<n>, named by its KFD node in the kernel's
  // topology) and whether this process can open it as ROCm does, read and write: 0 when it can,
  // else the errno. ROCm leaves a GPU whose render node is missing here (ENOENT: a container
  // given other GPUs) or denied by the device cgroup (EPERM) out of what HIP numbers, and starts
  // no GPU at all on any other error (EACCES: the user is not in the render group). ""/nullopt
  // when the topology does not say.
  std::string render_node;
  std::optional<int> render_error;
  // The processes using the GPU (with usage; nullopt: not read, or ROCm SMI cannot say), each with
  // the VRAM it holds on all its GPUs (ROCm SMI does not split it by GPU).
  std::optional<std::vector<GpuProcess>> processes;
  std::string failure;  // why the GPU could not be read, "" when it could
};

struct AmdSnapshot {
  bool available = false;
  std::string reason;  // why ROCm SMI is unavailable, for messages
  Problem problem;     // the same as data
  std::string driver_version;
  std::vector<AmdGpu> gpus;  // rocm-smi order
  // Where ROCm SMI gives no GPU's KFD node and the kernel's topology could not give them either:
  // why not, naming the file or the GPU ("" otherwise).
  std::string kfd_order_problem;
  // Which GPUs are linked by XGMI (xgmi[i][j], rocm-smi indices), where asked for and ROCm SMI
  // says (rsmi_topo_get_link_type); empty otherwise.
  std::vector<std::vector<bool>> xgmi;
};

// Opens librocm_smi64.so.1 (or the file GPUSEL_ROCM_SMI_LIBRARY names) and reads every GPU it
// monitors; `usage` adds memory in use and the busy percentage. Never throws for a missing or
// broken library: the snapshot says ROCm SMI is unavailable and why. `links` adds which GPUs are
// linked by XGMI. Thread-safe.
AmdSnapshot query_rocm_smi(bool usage = false, bool links = false);

// The GPUs' ids in KFD order (the order ROCr and HIP number them in), or nullopt when neither ROCm
// SMI nor the kernel's topology gives every GPU's node, or a GPU has no id. A GPU whose render node
// this process cannot open (render_error ENOENT or EPERM) is left out, as ROCm leaves it out; any
// other error there (ROCm then starts no GPU) is nullopt too.
std::optional<std::vector<std::string>> kfd_order(const AmdSnapshot& amd);

// Why the GPUs' KFD order is unknown, for messages: a render node that cannot be opened (ROCm then
// starts no GPU), or neither ROCm SMI (rsmi_dev_node_id_get, ROCm 6 and later) nor the kernel's
// KFD topology (read where ROCm SMI cannot say) gave it.
std::string kfd_order_unknown_text(const AmdSnapshot& amd);

// How ROCm treats a GPU by its render node (AmdGpu::render_error): HIP programs here may use it
// (or nothing is known), ROCm leaves it out (the node is missing, or the device cgroup denies it),
// or ROCm starts no GPU at all (any other error). And what to do about the last: join the node's
// group (EACCES), else look at the driver.
enum class RenderAccess { Usable, LeftOut, StopsRocm };
RenderAccess render_access(const AmdGpu& gpu);
std::string render_node_remedy(const AmdGpu& gpu);

// Whether AMD's GPU compute driver is loaded here (/dev/kfd exists): AMD GPUs may be in use even
// where ROCm SMI cannot be read.
bool amd_driver_present();

// Where NVIDIA's NVML is unavailable: an error to refuse a request with when this is an AMD
// machine whose GPUs ROCm SMI cannot read (`amd`'s reason; GPUSEL_ROCM_SMI_LIBRARY's value),
// since nothing could then check the GPU a HIP worker gets; nullopt elsewhere. `asked` starts it.
std::optional<Error> amd_unreadable(const std::string& asked, const AmdSnapshot& amd);

// The GPUs as the records the rest of gpusel reads (GpuInfo: id as uuid, rocm-smi index, usage,
// processes); a GPU without an id is a failed record.
std::vector<GpuInfo> amd_gpu_records(const AmdSnapshot& amd);

// "GPU-<16 lower-case hex>", the form ROCr, HIP and rocminfo print.
std::string amd_gpu_id(std::uint64_t unique_id);

GPUSEL_END_NAMESPACE
