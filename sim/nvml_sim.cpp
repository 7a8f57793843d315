// The simulated libnvidia-ml.so.1: NVML's C entry points over a machine file.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "gpu_model.hpp"
#include "nvml_abi.hpp"
#include "nvml_sim_types.hpp"
#include "sim_common.hpp"
#include "trace.hpp"
#include "usage.hpp"

#ifdef _WIN32
#define NVML_SIM_API extern "C" __declspec(dllexport)
#define NVML_SIM_HIDDEN extern "C"
#else
#define NVML_SIM_API extern "C" __attribute__((visibility("default")))
#define NVML_SIM_HIDDEN extern "C" __attribute__((visibility("hidden")))
#endif
// The "no_v2" fault build hides the _v2 entry points, like a very old or fake library.
#ifdef GPUSEL_SIM_NO_V2
#define NVML_SIM_V2_API NVML_SIM_HIDDEN
#else
#define NVML_SIM_V2_API NVML_SIM_API
#endif

namespace {

using gpusel::sim::SimGpu;
using gpusel::sim::SimMachine;

struct gpuselNvmlDeviceBox {
  int gpu = 0;
  int mig = -1;  // MIG device slot, or -1 for the GPU itself
};

constexpr unsigned kMigSlots = 7;

// A MIG GPU instance and a compute instance, as the handles nvmlGpuInstance_t and
// nvmlComputeInstance_t point at.
struct gpuselNvmlGpuInstanceBox {
  int gpu = 0;
  int gi = 0;  // its place in State::instances[gpu]
};
struct gpuselNvmlComputeInstanceBox {
  int gpu = 0;
  int mig = 0;  // the MIG device slot it is: one compute instance per MIG device
};

// NVIDIA's GPU instance profiles of A100 and H100 (7 compute slices, memory in eighths). `index` is
// nvml.h's NVML_GPU_INSTANCE_PROFILE_<n>_SLICE (and NVML_COMPUTE_INSTANCE_PROFILE_<n>_SLICE, the
// compute instance profile's id too); `id` is the GPU instance profile's id on the device (what
// nvmlGpuInstanceProfileInfo_t.id holds and nvidia-smi shows: another number).
struct MigProfile {
  unsigned index;
  unsigned slices;         // compute slices ("2g" -> 2)
  unsigned id;             // GPU instance profile id
  unsigned memory_slices;  // its placement's size
  unsigned max_instances;  // at most this many on one GPU
};
constexpr MigProfile kMigProfiles[] = {{0x0, 1, 19, 1, 7},
                                       {0x1, 2, 14, 2, 3},
                                       {0x2, 3, 9, 4, 2},
                                       {0x3, 4, 5, 4, 1},
                                       {0x4, 7, 0, 8, 1}};
constexpr unsigned kMemorySlices = 8;
constexpr unsigned kComputeSlices = 7;

const MigProfile* profile_where(unsigned MigProfile::*field, unsigned value) {
  for (const MigProfile& p : kMigProfiles)
    if (p.*field == value) return &p;
  return nullptr;
}

// A GPU instance of the machine file: the MIG devices with one gpu_instance id, its profile from
// their name's slice count, placed after the instances before it in file order.
struct GpuInstanceModel {
  unsigned id = 0;
  const MigProfile* profile = nullptr;
  GpuInstancePlacement placement{};
  std::vector<int> migs;                                // its MIG device slots, in file order
  std::vector<ComputeInstancePlacement> ci_placements;  // theirs, in compute slices
  std::vector<const MigProfile*> ci_profiles;           // theirs
};

// The count before `unit` in a MIG profile name ("MIG 1c.2g.10gb": 'c' -> 1, 'g' -> 2), else 0.
unsigned profile_count(const std::string& name, char unit) {
  const std::size_t at = name.rfind("MIG ");
  std::size_t i = at == std::string::npos ? 0 : at + 4;
  while (i < name.size()) {
    std::size_t end = i;
    while (end < name.size() && name[end] >= '0' && name[end] <= '9') ++end;
    if (end > i && end < name.size() && name[end] == unit && end - i < 4)
      return static_cast<unsigned>(std::stoul(name.substr(i, end - i)));
    i = name.find('.', i);
    if (i == std::string::npos) break;
    ++i;
  }
  return 0;
}

// The GPU instances of one GPU (none without MIG). A MIG device whose name gives no profile of
// kMigProfiles is left out of them.
std::vector<GpuInstanceModel> gpu_instances(const SimGpu& gpu) {
  std::vector<GpuInstanceModel> out;
  if (!gpu.mig_enabled) return out;
  unsigned start = 0;
  for (std::size_t m = 0; m < gpu.migs.size() && m < kMigSlots; ++m) {
    const auto& mig = gpu.migs[m];
    auto gi = std::find_if(out.begin(), out.end(),
                           [&](const GpuInstanceModel& g) { return g.id == mig.gpu_instance; });
    if (gi == out.end()) {
      const MigProfile* p = profile_where(&MigProfile::slices, profile_count(mig.name, 'g'));
      if (p == nullptr) continue;
      out.push_back({mig.gpu_instance, p, {start, p->memory_slices}, {}, {}, {}});
      start += p->memory_slices;
      gi = out.end() - 1;
    }
    const unsigned c = profile_count(mig.name, 'c');
    const MigProfile* cp = profile_where(&MigProfile::slices, c == 0 ? gi->profile->slices : c);
    if (cp == nullptr || cp->slices > gi->profile->slices) continue;
    unsigned ci_start = 0;
    for (const auto& placed : gi->ci_placements) ci_start += placed.size;
    gi->migs.push_back(static_cast<int>(m));
    gi->ci_placements.push_back({ci_start, cp->slices});
    gi->ci_profiles.push_back(cp);
  }
  return out;
}

struct State {
  gpusel::sim::LoadedMachine loaded;
  std::vector<gpuselNvmlDeviceBox> gpu_handles;
  std::vector<gpuselNvmlDeviceBox> mig_handles;          // kMigSlots per GPU
  std::vector<std::vector<GpuInstanceModel>> instances;  // per GPU
  std::vector<gpuselNvmlGpuInstanceBox> gi_handles;      // kMigSlots per GPU
  std::vector<gpuselNvmlComputeInstanceBox> ci_handles;  // kMigSlots per GPU, as MIG slots
  // Look-ups in constant time, so that a client asking about every pair of GPUs makes a
  // quadratic number of steps, not a cubic one.
  std::unordered_map<std::string, gpuselNvmlDeviceBox> by_uuid;  // GPU and MIG device UUIDs
  std::unordered_map<std::uint64_t, int> by_bus;                 // bus_key -> GPU
  std::vector<int> nvlink_peers;  // per GPU: the other GPUs in its NVLink domain
  std::vector<int> nvlink_peer;   // per GPU: the other GPU of a domain of two, else -1
  std::mutex mutex;
  int refcount = 0;
};

// A PCI address as one number, or nullopt for one no machine file can hold (bus and device are
// two hex digits there, the function one).
std::optional<std::uint64_t> bus_key(unsigned domain, unsigned bus, unsigned device,
                                     unsigned function) {
  if (bus > 0xff || device > 0xff || function > 0xf) return std::nullopt;
  return (std::uint64_t{domain} << 20) | (bus << 12) | (device << 4) | function;
}

void anchor() {}

void index_machine(State& st) {
  const auto& gpus = st.loaded.machine().gpus;
  const auto n = static_cast<int>(gpus.size());
  std::unordered_map<int, std::vector<int>> domains;
  for (int g = 0; g < n; ++g) {
    const SimGpu& gpu = gpus[static_cast<std::size_t>(g)];
    st.gpu_handles.push_back({g, -1});
    for (unsigned m = 0; m < kMigSlots; ++m) {
      st.mig_handles.push_back({g, static_cast<int>(m)});
      st.gi_handles.push_back({g, static_cast<int>(m)});
      st.ci_handles.push_back({g, static_cast<int>(m)});
    }
    st.instances.push_back(gpu_instances(gpu));
    st.by_uuid.emplace(gpu.uuid, gpuselNvmlDeviceBox{g, -1});
    // MIG UUIDs: the first GPU's wins if a file repeats one, as a search in PCI order finds.
    for (std::size_t m = 0; m < gpu.migs.size() && m < kMigSlots; ++m)
      st.by_uuid.emplace(gpu.migs[m].uuid, gpuselNvmlDeviceBox{g, static_cast<int>(m)});
    if (auto key = bus_key(gpu.pci_domain, gpu.pci_bus, gpu.pci_device, gpu.pci_function))
      st.by_bus.emplace(*key, g);
    if (gpu.nvlink_domain >= 0) domains[gpu.nvlink_domain].push_back(g);
  }
  st.nvlink_peers.assign(gpus.size(), 0);
  st.nvlink_peer.assign(gpus.size(), -1);
  for (const auto& [domain, members] : domains) {
    for (int g : members) {
      st.nvlink_peers[static_cast<std::size_t>(g)] = static_cast<int>(members.size()) - 1;
      if (members.size() == 2)
        st.nvlink_peer[static_cast<std::size_t>(g)] = members[0] + members[1] - g;
    }
  }
}

State& state() {
  static State* s = [] {
    auto* st = new State;  // never destroyed: handles stay valid until the process ends
    st->loaded = gpusel::sim::load_from_environment(reinterpret_cast<const void*>(&anchor),
                                                    "libnvidia-ml.so.1", "nvidia");
    if (st->loaded.ok) index_machine(*st);
    return st;
  }();
  return *s;
}

nvmlDevice_t to_handle(gpuselNvmlDeviceBox* box) {
  return reinterpret_cast<nvmlDevice_t>(box);
}

bool initialised() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.refcount > 0;
}

// A handle this library gave out, else nullptr (never dereference an unknown pointer): the
// handles are the elements of two arrays, so a handle's address says which, if any, it is.
template <typename Box>
const Box* element_at(const std::vector<Box>& v, const void* handle) {
  const auto address = reinterpret_cast<std::uintptr_t>(handle);
  const auto first = reinterpret_cast<std::uintptr_t>(v.data());
  if (v.empty() || address < first) return nullptr;
  const std::uintptr_t offset = address - first;
  if (offset % sizeof(Box) != 0) return nullptr;
  const std::size_t i = offset / sizeof(Box);
  return i < v.size() ? &v[i] : nullptr;
}

const gpuselNvmlDeviceBox* lookup(nvmlDevice_t device) {
  State& s = state();
  const gpuselNvmlDeviceBox* box = element_at(s.gpu_handles, device);
  return box != nullptr ? box : element_at(s.mig_handles, device);
}

// Common checks: initialised, a known handle, a GPU still on the bus.
nvmlReturn_t check(nvmlDevice_t device, const gpuselNvmlDeviceBox** box, const SimGpu** gpu) {
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  *box = lookup(device);
  if (*box == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *gpu = &state().loaded.machine().gpus[static_cast<std::size_t>((*box)->gpu)];
  if ((*gpu)->lost) return NVML_ERROR_GPU_IS_LOST;
  if ((*box)->mig >= static_cast<int>((*gpu)->migs.size())) return NVML_ERROR_INVALID_ARGUMENT;
  return NVML_SUCCESS;
}

nvmlReturn_t copy_string(const std::string& value, char* buf, unsigned len) {
  if (buf == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (len < value.size() + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(buf, value.c_str(), value.size() + 1);
  return NVML_SUCCESS;
}

nvmlReturn_t do_init() {
  State& s = state();
  if (!s.loaded.ok) return NVML_ERROR_DRIVER_NOT_LOADED;
  const std::string& fault = s.loaded.machine().faults.nvml;
  if (fault == "init_fails" || fault == "missing") return NVML_ERROR_DRIVER_NOT_LOADED;
  // An AMD machine has no NVIDIA driver (`gpusel --sim` does not even offer this library there).
  if (s.loaded.machine().vendor == "amd") return NVML_ERROR_DRIVER_NOT_LOADED;
  std::lock_guard<std::mutex> lock(s.mutex);
  ++s.refcount;
  return NVML_SUCCESS;
}

// A process with what NVML tells about it: the instance ids are the MIG device's it runs on, or
// 0xFFFFFFFF on a GPU without MIG.
struct BookedProcess {
  gpusel::sim::SimProcess process;
  unsigned gpu_instance = 0xFFFFFFFFu, compute_instance = 0xFFFFFFFFu;
};

// The processes on a handle: the machine file's and the simulated processes with a context on it.
// A MIG device has those on it; its parent GPU (MIG enabled) lists those of all its MIG devices,
// each with its instance ids, as the driver does.
std::vector<BookedProcess> booked(const gpuselNvmlDeviceBox& box, const SimGpu& gpu) {
  std::vector<BookedProcess> out;
  const auto& machine = state().loaded.machine();
  if (box.mig < 0) {
    for (const auto& p : gpu.processes) out.push_back({p});
    for (const auto& p : gpusel::sim::live_processes(machine, gpu.uuid, "libnvidia-ml.so.1"))
      out.push_back({p});
  }
  for (std::size_t m = 0; m < gpu.migs.size(); ++m) {
    if (box.mig >= 0 && static_cast<std::size_t>(box.mig) != m) continue;
    const auto& mig = gpu.migs[m];
    for (const auto& p : gpusel::sim::live_processes(machine, mig.uuid, "libnvidia-ml.so.1"))
      out.push_back({p, mig.gpu_instance, mig.compute_instance});
  }
  return out;
}

nvmlReturn_t handle_by_index(unsigned index, nvmlDevice_t* device) {
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  State& s = state();
  if (device == nullptr || index >= s.gpu_handles.size()) return NVML_ERROR_INVALID_ARGUMENT;
  if (s.loaded.machine().gpus[index].lost) return NVML_ERROR_GPU_IS_LOST;
  *device = to_handle(&s.gpu_handles[index]);
  return NVML_SUCCESS;
}

nvmlReturn_t device_count(unsigned* count) {
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *count = static_cast<unsigned>(state().gpu_handles.size());
  return NVML_SUCCESS;
}

}  // namespace

namespace impl {

nvmlReturn_t nvmlInit_v2(void) {
  return do_init();
}
nvmlReturn_t nvmlInit(void) {
  return do_init();
}
nvmlReturn_t nvmlInitWithFlags(unsigned int) {
  return do_init();
}

nvmlReturn_t nvmlShutdown(void) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.refcount == 0) return NVML_ERROR_UNINITIALIZED;
  --s.refcount;
  return NVML_SUCCESS;
}

const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_UNINITIALIZED:
      return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_NO_PERMISSION:
      return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED:
      return "Already Initialized";
    case NVML_ERROR_NOT_FOUND:
      return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT:
      return "Timeout";
    case NVML_ERROR_LIBRARY_NOT_FOUND:
      return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND:
      return "Function Not Found";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED:
      return "GPU requires reset";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
      return "RM has detected an NVML/RM version mismatch";
    case NVML_ERROR_IN_USE:
      return "In use by another client";
    case NVML_ERROR_MEMORY:
      return "Insufficient Memory";
    case NVML_ERROR_NO_DATA:
      return "No data";
    default:
      return "Unknown Error";
  }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  return copy_string(state().loaded.machine().driver_version, version, length);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* version) {
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  if (version == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *version = state().loaded.machine().cuda_driver_version;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* version) {
  return nvmlSystemGetCudaDriverVersion_v2(version);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  return device_count(count);
}
nvmlReturn_t nvmlDeviceGetCount(unsigned int* count) {
  return device_count(count);
}
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  return handle_by_index(index, device);
}
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  return handle_by_index(index, device);
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  if (uuid == nullptr || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  State& s = state();
  const auto found = s.by_uuid.find(uuid);
  if (found == s.by_uuid.end()) return NVML_ERROR_NOT_FOUND;
  const gpuselNvmlDeviceBox box = found->second;
  const auto g = static_cast<std::size_t>(box.gpu);
  if (box.mig >= 0) {
    *device = to_handle(&s.mig_handles[g * kMigSlots + static_cast<std::size_t>(box.mig)]);
    return NVML_SUCCESS;
  }
  if (s.loaded.machine().gpus[g].lost) return NVML_ERROR_GPU_IS_LOST;
  *device = to_handle(&s.gpu_handles[g]);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  return copy_string(box->mig < 0 ? gpu->uuid : gpu->migs[static_cast<std::size_t>(box->mig)].uuid,
                     uuid, length);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  return copy_string(box->mig < 0 ? gpu->name : gpu->migs[static_cast<std::size_t>(box->mig)].name,
                     name, length);
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (index == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *index = static_cast<unsigned>(box->gpu);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int* minor) {
  return nvmlDeviceGetIndex(device, minor);  // /dev/nvidiaN numbering follows PCI order here
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned long long used = 0;
  for (const BookedProcess& p : booked(*box, *gpu)) used += p.process.used_memory;
  memory->total =
      box->mig < 0 ? gpu->memory_total : gpu->migs[static_cast<std::size_t>(box->mig)].memory_total;
  memory->used = std::min<unsigned long long>(used, memory->total);
  memory->free = memory->total - memory->used;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (memory->version != gpusel::abi::kNvmlMemoryV2Version) return NVML_ERROR_INVALID_ARGUMENT;
  nvmlMemory_t v1{};
  if (nvmlReturn_t rc = nvmlDeviceGetMemoryInfo(device, &v1); rc != NVML_SUCCESS) return rc;
  memory->total = v1.total;
  memory->reserved = 0;
  memory->free = v1.free;
  memory->used = v1.used;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  std::memset(pci, 0, sizeof *pci);
  std::snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.0", gpu->pci_domain,
                gpu->pci_bus, gpu->pci_device);
  pci->domain = gpu->pci_domain;
  pci->bus = gpu->pci_bus;
  pci->device = gpu->pci_device;
  pci->pciDeviceId = gpu->pci_device_id;
  pci->pciSubSystemId = 0;
  std::snprintf(pci->busId, sizeof pci->busId, "%08X:%02X:%02X.0", gpu->pci_domain, gpu->pci_bus,
                gpu->pci_device);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major, int* minor) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (major == nullptr || minor == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *major = gpu->cc_major;
  *minor = gpu->cc_minor;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t device, unsigned int words,
                                      unsigned long* mask) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (mask == nullptr || words == 0) return NVML_ERROR_INVALID_ARGUMENT;
  constexpr unsigned kBits = sizeof(unsigned long) * 8;
  std::fill(mask, mask + words, 0UL);
  for (int cpu : gpu->cpus) {
    const auto c = static_cast<unsigned>(cpu);
    if (c / kBits < words) mask[c / kBits] |= 1UL << (c % kBits);
  }
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryAffinity(nvmlDevice_t device, unsigned int words,
                                         unsigned long* nodes, unsigned int scope) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (nodes == nullptr || words == 0 || scope > 1) return NVML_ERROR_INVALID_ARGUMENT;
  constexpr unsigned kBits = sizeof(unsigned long) * 8;
  std::fill(nodes, nodes + words, 0UL);
  if (gpu->numa_node < 0) return NVML_ERROR_NOT_SUPPORTED;
  const auto n = static_cast<unsigned>(gpu->numa_node);
  if (n / kBits < words) nodes[n / kBits] |= 1UL << (n % kBits);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int* node) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  (void)node;
  return NVML_ERROR_NOT_SUPPORTED;  // only where GPU memory is a NUMA node of its own
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* current,
                                  unsigned int* pending) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (current == nullptr || pending == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (box->mig >= 0) return NVML_ERROR_NOT_SUPPORTED;
  *current = *pending = gpu->mig_enabled ? 1u : 0u;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, unsigned int* mode) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (mode == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (box->mig >= 0) return NVML_ERROR_NOT_SUPPORTED;
  *mode = gpu->persistence_mode ? 1u : 0u;  // NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int* count) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *count = gpu->mig_enabled ? kMigSlots : 0;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                 nvmlDevice_t* mig) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (mig == nullptr || box->mig >= 0 || index >= kMigSlots) return NVML_ERROR_INVALID_ARGUMENT;
  if (!gpu->mig_enabled) return NVML_ERROR_NOT_SUPPORTED;
  if (index >= gpu->migs.size()) return NVML_ERROR_NOT_FOUND;
  *mig = to_handle(&state().mig_handles[static_cast<std::size_t>(box->gpu) * kMigSlots + index]);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int* is_mig) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (is_mig == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *is_mig = box->mig >= 0 ? 1u : 0u;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t device,
                                                          nvmlDevice_t* parent) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (parent == nullptr || box->mig < 0) return NVML_ERROR_INVALID_ARGUMENT;
  *parent = to_handle(&state().gpu_handles[static_cast<std::size_t>(box->gpu)]);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int* id) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (id == nullptr || box->mig < 0) return NVML_ERROR_INVALID_ARGUMENT;
  *id = gpu->migs[static_cast<std::size_t>(box->mig)].gpu_instance;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int* id) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (id == nullptr || box->mig < 0) return NVML_ERROR_INVALID_ARGUMENT;
  *id = gpu->migs[static_cast<std::size_t>(box->mig)].compute_instance;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* util) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (util == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  // Per-GPU utilisation is not available with MIG enabled, on the GPU or its MIG devices.
  if (box->mig >= 0 || gpu->mig_enabled) return NVML_ERROR_NOT_SUPPORTED;
  const auto live = static_cast<unsigned>(booked(*box, *gpu).size() - gpu->processes.size());
  util->gpu = std::min(100u, gpu->utilization_gpu + live * gpusel::sim::kUtilizationPerProcess);
  util->memory =
      std::min(100u, gpu->utilization_memory + live * gpusel::sim::kUtilizationPerProcess / 2);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const std::vector<BookedProcess> procs = booked(*box, *gpu);
  const auto needed = static_cast<unsigned>(procs.size());
  if (*count < needed) {
    *count = needed;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  if (needed > 0 && infos == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  for (unsigned i = 0; i < needed; ++i) {
    infos[i].pid = procs[i].process.pid;
    infos[i].usedGpuMemory = procs[i].process.used_memory;
    infos[i].gpuInstanceId = procs[i].gpu_instance;
    infos[i].computeInstanceId = procs[i].compute_instance;
  }
  *count = needed;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b, int* level) {
  const gpuselNvmlDeviceBox* ba;
  const gpuselNvmlDeviceBox* bb;
  const SimGpu* ga;
  const SimGpu* gb;
  if (nvmlReturn_t rc = check(a, &ba, &ga); rc != NVML_SUCCESS) return rc;
  if (nvmlReturn_t rc = check(b, &bb, &gb); rc != NVML_SUCCESS) return rc;
  if (level == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *level = gpusel::sim::topology_level(*ga, *gb);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t a, nvmlDevice_t b, int caps, int* status) {
  const gpuselNvmlDeviceBox *ba, *bb;
  const SimGpu* ga;
  const SimGpu* gb;
  if (nvmlReturn_t rc = check(a, &ba, &ga); rc != NVML_SUCCESS) return rc;
  if (nvmlReturn_t rc = check(b, &bb, &gb); rc != NVML_SUCCESS) return rc;
  if (status == nullptr || caps < 0 || caps > 4) return NVML_ERROR_INVALID_ARGUMENT;
  // nvmlGpuP2PStatus_t: OK 0, GPU_NOT_SUPPORTED 2, IOH_TOPOLOGY_NOT_SUPPORTED 3, NOT_SUPPORTED 5.
  // The same answers as the CUDA double's cuDeviceCanAccessPeer and cuDeviceGetP2PAttribute.
  constexpr int kOk = 0, kGpuNotSupported = 2, kTopologyNotSupported = 3, kNotSupported = 5;
  const bool mig = ba->mig >= 0 || bb->mig >= 0;
  const bool nvlink = !mig && gpusel::sim::nvlink_between(*ga, *gb);
  const bool access = !mig && gpusel::sim::peer_access(*ga, *gb);
  if (caps == gpusel::abi::kNvmlP2PCapsIndexNvlink || caps == 3) {  // NVLINK, ATOMICS
    *status = nvlink ? kOk : kNotSupported;
  } else if (access) {
    *status = kOk;
  } else if (ga == gb || mig) {
    *status = kNotSupported;
  } else if (!ga->pcie_p2p || !gb->pcie_p2p) {
    *status = kGpuNotSupported;
  } else {
    *status = kTopologyNotSupported;
  }
  return NVML_SUCCESS;
}

namespace {
nvmlReturn_t link_value(nvmlDevice_t device, unsigned int* out, unsigned SimGpu::*field) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (box->mig >= 0 || gpu->*field == 0) return NVML_ERROR_NOT_SUPPORTED;
  *out = gpu->*field;
  return NVML_SUCCESS;
}
}  // namespace

nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int* v) {
  return link_value(device, v, &SimGpu::pcie_generation);
}
nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int* v) {
  return link_value(device, v, &SimGpu::pcie_width);
}
nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device, unsigned int* v) {
  return link_value(device, v, &SimGpu::pcie_max_generation);
}
nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device, unsigned int* v) {
  return link_value(device, v, &SimGpu::pcie_max_width);
}

namespace {

// Busy: the machine file's utilisation, or a simulated process with a context on it.
bool busy(const SimGpu& gpu) {
  const gpuselNvmlDeviceBox whole{static_cast<int>(&gpu - state().loaded.machine().gpus.data()),
                                  -1};
  return gpu.utilization_gpu > 0 || !booked(whole, gpu).empty();
}

// Sensors and clocks belong to the whole GPU: a MIG handle gets NOT_SUPPORTED, as on real ones.
nvmlReturn_t check_whole(nvmlDevice_t device, const SimGpu** gpu) {
  const gpuselNvmlDeviceBox* box;
  if (nvmlReturn_t rc = check(device, &box, gpu); rc != NVML_SUCCESS) return rc;
  return box->mig >= 0 ? NVML_ERROR_NOT_SUPPORTED : NVML_SUCCESS;
}

// "0000:18:00.0", "00000000:18:00.0" or "18:00.0", any case -> the GPU's position, or -1.
int gpu_by_bus(const char* bus) {
  unsigned dom = 0, b = 0, d = 0, f = 0;
  char tail = 0;
  if (std::sscanf(bus, "%x:%x:%x.%x%c", &dom, &b, &d, &f, &tail) != 4) {
    dom = 0;
    if (std::sscanf(bus, "%x:%x.%x%c", &b, &d, &f, &tail) != 3) return -1;
  }
  const State& s = state();
  const auto key = bus_key(dom, b, d, f);
  const auto found = key ? s.by_bus.find(*key) : s.by_bus.end();
  return found == s.by_bus.end() ? -1 : found->second;
}

void fill_pci(nvmlPciInfo_t* pci, unsigned domain, unsigned bus, unsigned dev, unsigned id) {
  std::memset(pci, 0, sizeof *pci);
  std::snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.0", domain, bus, dev);
  pci->domain = domain;
  pci->bus = bus;
  pci->device = dev;
  pci->pciDeviceId = id;
  std::snprintf(pci->busId, sizeof pci->busId, "%08X:%02X:%02X.0", domain, bus, dev);
}

// The legacy nvmlPciInfo_t (nvmlDeviceGetPciInfo, the v1 symbols): 52 bytes, busId first.
void to_legacy(const nvmlPciInfo_t& v3, nvmlPciInfoLegacy_t* out) {
  std::memset(out, 0, sizeof *out);
  std::memcpy(out->busId, v3.busIdLegacy, sizeof out->busId);
  out->domain = v3.domain;
  out->bus = v3.bus;
  out->device = v3.device;
  out->pciDeviceId = v3.pciDeviceId;
  out->pciSubSystemId = v3.pciSubSystemId;
}

// What NVLink `link` of `gpu` reaches: in a domain of two GPUs, the other one over a bridge;
// in a larger domain, one of four NVSwitches (synthetic PCI addresses 0000000F:F0-F3:00.0,
// device 0x22A3). Returns NOT_SUPPORTED off NVLink, INVALID_ARGUMENT past the GPU's links.
nvmlReturn_t nvlink_remote(nvmlDevice_t device, unsigned link, const SimGpu** peer, int* sw) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  if (gpu->nvlink_domain < 0 || gpu->nvlinks == 0) return NVML_ERROR_NOT_SUPPORTED;
  if (link >= gpu->nvlinks) return NVML_ERROR_INVALID_ARGUMENT;
  const State& s = state();
  const auto g = static_cast<std::size_t>(gpu - s.loaded.machine().gpus.data());
  const int partner = s.nvlink_peers[g] == 1 ? s.nvlink_peer[g] : -1;
  *peer = partner >= 0 ? &s.loaded.machine().gpus[static_cast<std::size_t>(partner)] : nullptr;
  *sw = partner >= 0 ? -1 : static_cast<int>(link % 4);
  return NVML_SUCCESS;
}

}  // namespace

nvmlReturn_t nvmlSystemGetNVMLVersion(char* version, unsigned int length) {
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  const SimMachine& m = state().loaded.machine();
  // "<CUDA major>.<driver version>", as NVML itself reports it (e.g. 12.570.124.06).
  return copy_string(std::to_string(m.cuda_driver_version / 1000) + "." + m.driver_version, version,
                     length);
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* bus, nvmlDevice_t* device) {
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  if (bus == nullptr || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const int g = gpu_by_bus(bus);
  if (g < 0) return NVML_ERROR_NOT_FOUND;
  if (state().loaded.machine().gpus[static_cast<std::size_t>(g)].lost)
    return NVML_ERROR_GPU_IS_LOST;
  *device = to_handle(&state().gpu_handles[static_cast<std::size_t>(g)]);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char* bus, nvmlDevice_t* device) {
  return nvmlDeviceGetHandleByPciBusId_v2(bus, device);
}

nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char* serial, unsigned int length) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (gpu->serial.empty()) return NVML_ERROR_NOT_SUPPORTED;  // GeForce boards report none
  return copy_string(gpu->serial, serial, length);
}

nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, int* brand) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (brand == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *brand = static_cast<int>(gpusel::sim::model::brand_by_name(gpu->brand));
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, unsigned int* arch) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (arch == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *arch = gpusel::sim::model::architecture(gpu->cc_major, gpu->cc_minor);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNumGpuCores(nvmlDevice_t device, unsigned int* cores) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (cores == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (box->mig < 0) {
    *cores = gpu->gpu_cores;
  } else {
    const int sms = gpu->migs[static_cast<std::size_t>(box->mig)].sm_count;
    *cores = static_cast<unsigned>(std::max(0, sms)) *
             static_cast<unsigned>(gpusel::sim::model::cores_per_sm(gpu->cc_major, gpu->cc_minor));
  }
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryBusWidth(nvmlDevice_t device, unsigned int* width) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (width == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *width = gpu->memory_bus_width;
  return NVML_SUCCESS;
}

// nvmlDeviceGetPciInfo_v2 and the unversioned symbol fill the 52-byte struct of their time
// (busId[16] first, then four reserved words), never the 68-byte one of _v3: callers such as
// py3nvml pass 52 bytes.
nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfoLegacy_t* pci) {
  if (pci == nullptr) {
    const gpuselNvmlDeviceBox* box;
    const SimGpu* gpu;
    if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  nvmlPciInfo_t v3{};
  if (nvmlReturn_t rc = nvmlDeviceGetPciInfo_v3(device, &v3); rc != NVML_SUCCESS) return rc;
  to_legacy(v3, pci);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfoLegacy_t* pci) {
  return nvmlDeviceGetPciInfo(device, pci);
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, int* active) {
  const SimGpu* peer;
  int sw;
  if (nvmlReturn_t rc = nvlink_remote(device, link, &peer, &sw); rc != NVML_SUCCESS) return rc;
  if (active == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *active = 1;  // NVML_FEATURE_ENABLED
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkVersion(nvmlDevice_t device, unsigned int link,
                                        unsigned int* version) {
  const SimGpu* peer;
  int sw;
  if (nvmlReturn_t rc = nvlink_remote(device, link, &peer, &sw); rc != NVML_SUCCESS) return rc;
  if (version == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  check(device, &box, &gpu);
  // NVML answers an nvmlNvlinkVersion_t, not the generation: 1 is 1.0, 2 is 2.0, 3 is 2.2, 4 is
  // 3.0, 5 is 3.1, 6 is 4.0, 7 is 5.0 (an A100 says 5, an H100 6). The file gives the generation.
  static constexpr unsigned kEnumOf[] = {0, 1, 2, 4, 6, 7};
  *version = kEnumOf[std::min<std::size_t>(gpu->nvlink_version, std::size(kEnumOf) - 1)];
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                 nvmlPciInfo_t* pci) {
  const SimGpu* peer;
  int sw;
  if (nvmlReturn_t rc = nvlink_remote(device, link, &peer, &sw); rc != NVML_SUCCESS) return rc;
  if (pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (peer != nullptr) {
    fill_pci(pci, peer->pci_domain, peer->pci_bus, peer->pci_device, peer->pci_device_id);
  } else {
    fill_pci(pci, 0xF, 0xF0u + static_cast<unsigned>(sw), 0, 0x22A310DEu);
  }
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo(nvmlDevice_t device, unsigned int link,
                                              nvmlPciInfoLegacy_t* pci) {
  nvmlPciInfo_t v2{};
  if (nvmlReturn_t rc = nvmlDeviceGetNvLinkRemotePciInfo_v2(device, link, pci ? &v2 : nullptr);
      rc != NVML_SUCCESS)
    return rc;
  to_legacy(v2, pci);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link,
                                                 int* type) {
  const SimGpu* peer;
  int sw;
  if (nvmlReturn_t rc = nvlink_remote(device, link, &peer, &sw); rc != NVML_SUCCESS) return rc;
  if (type == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *type = peer != nullptr ? 0 : 2;  // NVML_NVLINK_DEVICE_TYPE_GPU, _SWITCH
  return NVML_SUCCESS;
}

// Temperature rises with load: the file's idle figure plus 0.4 degree per percent of use.
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensor, unsigned int* temp) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  if (temp == nullptr || sensor != 0) return NVML_ERROR_INVALID_ARGUMENT;  // NVML_TEMPERATURE_GPU
  nvmlUtilization_t util{};
  nvmlDeviceGetUtilizationRates(device, &util);
  *temp = gpu->temperature + util.gpu * 2 / 5;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t device, int type, unsigned int* temp) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  if (temp == nullptr || type < 0 || type > 7) return NVML_ERROR_INVALID_ARGUMENT;
  switch (type) {
    case 0:  // SHUTDOWN
      *temp = gpu->temperature_shutdown;
      break;
    case 1:  // SLOWDOWN
      *temp = gpu->temperature_slowdown;
      break;
    case 2:  // MEM_MAX
      *temp = gpu->temperature_memory_max;
      break;
    case 3:  // GPU_MAX
      *temp = gpu->temperature_gpu_max;
      break;
    default:  // acoustic limits and GPS: not on these boards
      return NVML_ERROR_NOT_SUPPORTED;
  }
  return NVML_SUCCESS;
}

// Power draw: the idle figure plus the used share of the way to the limit.
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* milliwatts) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  if (milliwatts == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  nvmlUtilization_t util{};
  nvmlDeviceGetUtilizationRates(device, &util);
  const unsigned headroom =
      gpu->power_limit_mw > gpu->power_draw_mw ? gpu->power_limit_mw - gpu->power_draw_mw : 0;
  *milliwatts = gpu->power_draw_mw +
                static_cast<unsigned>(static_cast<unsigned long long>(headroom) * util.gpu / 100);
  return NVML_SUCCESS;
}

namespace {
nvmlReturn_t power_limit(nvmlDevice_t device, unsigned int* milliwatts) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  if (milliwatts == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *milliwatts = gpu->power_limit_mw;
  return NVML_SUCCESS;
}
}  // namespace

nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int* milliwatts) {
  return power_limit(device, milliwatts);
}
nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t device,
                                                      unsigned int* milliwatts) {
  return power_limit(device, milliwatts);
}
nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int* milliwatts) {
  return power_limit(device, milliwatts);
}
nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t device, unsigned int* min,
                                                          unsigned int* max) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  if (min == nullptr || max == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *min = gpu->power_limit_mw / 7 * 2;  // e.g. 200 W for a 700 W H100
  *max = gpu->power_limit_mw;
  return NVML_SUCCESS;
}

namespace {
// Maximum clocks per nvmlClockType_t: GRAPHICS 0, SM 1, MEM 2, VIDEO 3.
nvmlReturn_t max_clock(const SimGpu& gpu, int type, unsigned* mhz) {
  switch (type) {
    case 0:
    case 1:
      *mhz = gpu.clock_mhz;
      return NVML_SUCCESS;
    case 2:
      *mhz = gpu.memory_clock_mhz;
      return NVML_SUCCESS;
    case 3:
      *mhz = gpu.clock_mhz * 9 / 10;
      return NVML_SUCCESS;
    default:
      return NVML_ERROR_INVALID_ARGUMENT;
  }
}
}  // namespace

// Current clocks: the maximum while busy, a fifth of it (memory: the full clock) when idle.
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, int type, unsigned int* mhz) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  if (mhz == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (nvmlReturn_t rc = max_clock(*gpu, type, mhz); rc != NVML_SUCCESS) return rc;
  if (type != 2 && !busy(*gpu)) *mhz /= 5;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, int type, unsigned int* mhz) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  if (mhz == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  return max_clock(*gpu, type, mhz);
}

// The clocks the GPU supports: its one memory clock, and for it the graphics clocks from the
// maximum down to 210 MHz in 15 MHz steps (an A100's 81, 1410 to 210). A list too short for them
// all is NVML_ERROR_INSUFFICIENT_SIZE, with the count needed.
namespace {
nvmlReturn_t clock_list(unsigned top, unsigned step, unsigned bottom, unsigned* count,
                        unsigned* mhz) {
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const unsigned need = step == 0 || top < bottom ? 1 : (top - bottom) / step + 1;
  if (*count < need || mhz == nullptr) {
    *count = need;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (unsigned i = 0; i < need; ++i) mhz[i] = top - i * step;
  *count = need;
  return NVML_SUCCESS;
}
}  // namespace

nvmlReturn_t nvmlDeviceGetSupportedMemoryClocks(nvmlDevice_t device, unsigned int* count,
                                                unsigned int* mhz) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  unsigned memory = 0;
  if (nvmlReturn_t rc = max_clock(*gpu, 2, &memory); rc != NVML_SUCCESS) return rc;
  return clock_list(memory, 0, memory, count, mhz);
}

nvmlReturn_t nvmlDeviceGetSupportedGraphicsClocks(nvmlDevice_t device, unsigned int memory_mhz,
                                                  unsigned int* count, unsigned int* mhz) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  unsigned memory = 0, graphics = 0;
  if (nvmlReturn_t rc = max_clock(*gpu, 2, &memory); rc != NVML_SUCCESS) return rc;
  if (nvmlReturn_t rc = max_clock(*gpu, 0, &graphics); rc != NVML_SUCCESS) return rc;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (memory_mhz != memory) return NVML_ERROR_NOT_FOUND;
  return clock_list(graphics, 15, std::min(210u, graphics), count, mhz);
}

nvmlReturn_t nvmlDeviceGetApplicationsClock(nvmlDevice_t device, int type, unsigned int* mhz) {
  return nvmlDeviceGetMaxClockInfo(device, type, mhz);
}
nvmlReturn_t nvmlDeviceGetDefaultApplicationsClock(nvmlDevice_t device, int type,
                                                   unsigned int* mhz) {
  return nvmlDeviceGetMaxClockInfo(device, type, mhz);
}

// nvmlClockId_t: CURRENT 0, APP_CLOCK_TARGET 1, APP_CLOCK_DEFAULT 2, CUSTOMER_BOOST_MAX 3.
nvmlReturn_t nvmlDeviceGetClock(nvmlDevice_t device, int type, int id, unsigned int* mhz) {
  if (id == 0) return nvmlDeviceGetClockInfo(device, type, mhz);
  if (id < 0 || id > 3) {
    const SimGpu* gpu;
    if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  return nvmlDeviceGetMaxClockInfo(device, type, mhz);
}

nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, int* pstate) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  if (pstate == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *pstate = static_cast<int>(gpu->performance_state);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetPowerState(nvmlDevice_t device, int* pstate) {
  return nvmlDeviceGetPerformanceState(device, pstate);
}

nvmlReturn_t nvmlDeviceGetNumFans(nvmlDevice_t device, unsigned int* fans) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  if (fans == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (gpu->fan_speed < 0) return NVML_ERROR_NOT_SUPPORTED;  // passively cooled
  *fans = 1;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetFanSpeed_v2(nvmlDevice_t device, unsigned int fan,
                                      unsigned int* percent) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  if (percent == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (gpu->fan_speed < 0) return NVML_ERROR_NOT_SUPPORTED;
  if (fan != 0) return NVML_ERROR_INVALID_ARGUMENT;
  *percent = static_cast<unsigned>(gpu->fan_speed);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int* percent) {
  return nvmlDeviceGetFanSpeed_v2(device, 0, percent);
}

namespace {
constexpr unsigned long long kThrottleGpuIdle = 0x1, kThrottleSupported = 0x1FF;
}

// Clock event ("throttle") reasons: the machine file's mask, else GPU_IDLE while idle.
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                    unsigned long long* reasons) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  if (reasons == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *reasons = gpu->throttle_given ? gpu->throttle_reasons : (busy(*gpu) ? 0 : kThrottleGpuIdle);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                       unsigned long long* reasons) {
  return nvmlDeviceGetCurrentClocksEventReasons(device, reasons);
}
nvmlReturn_t nvmlDeviceGetSupportedClocksEventReasons(nvmlDevice_t device,
                                                      unsigned long long* reasons) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  if (reasons == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *reasons = kThrottleSupported;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetSupportedClocksThrottleReasons(nvmlDevice_t device,
                                                         unsigned long long* reasons) {
  return nvmlDeviceGetSupportedClocksEventReasons(device, reasons);
}

// ---- what monitors and tools read beyond gpusel's needs (nvtop, py3nvml, nvitop, py3smi,
// gpustat): answered from the machine file and the simulated usage; the structs of each call are
// written at exactly their version's size.

namespace {

static_assert(sizeof(nvmlProcessInfo_t) == 24);

template <typename Info>
nvmlReturn_t process_list(nvmlDevice_t device, unsigned int* count, Info* infos, bool compute) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  // Simulated processes are compute ones: graphics and MPS lists are empty.
  const std::vector<BookedProcess> procs =
      compute ? booked(*box, *gpu) : std::vector<BookedProcess>{};
  const auto needed = static_cast<unsigned>(procs.size());
  if (*count < needed) {
    *count = needed;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  if (needed > 0 && infos == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  for (unsigned i = 0; i < needed; ++i) {
    Info out{};
    out.pid = procs[i].process.pid;
    out.usedGpuMemory = procs[i].process.used_memory;
    if constexpr (sizeof(Info) == sizeof(nvmlProcessInfo_t)) {
      out.gpuInstanceId = procs[i].gpu_instance;
      out.computeInstanceId = procs[i].compute_instance;
    }
    std::memcpy(&infos[i], &out, sizeof out);
  }
  *count = needed;
  return NVML_SUCCESS;
}

// Each process with a context adds this much PCIe traffic each way, in KB/s.
constexpr unsigned kPcieKBpsPerProcess = 250000;

unsigned live_count(const gpuselNvmlDeviceBox& box, const SimGpu& gpu) {
  return static_cast<unsigned>(booked(box, gpu).size() - (box.mig < 0 ? gpu.processes.size() : 0));
}

// The MIG profile's slice count from its name ("MIG 3g.40gb" -> 3), 1 when it has none.
unsigned slices(const std::string& name) {
  const auto at = name.find("g.");
  if (at == std::string::npos || at == 0) return 1;
  std::size_t begin = at;
  while (begin > 0 && name[begin - 1] >= '0' && name[begin - 1] <= '9') --begin;
  return begin == at ? 1u : static_cast<unsigned>(std::stoul(name.substr(begin, at - begin)));
}

std::uint64_t microseconds_now() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

}  // namespace

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) {
  return process_list(device, count, infos, true);
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int* count,
                                                  ProcessInfoV1* infos) {
  return process_list(device, count, infos, true);
}
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                      nvmlProcessInfo_t* infos) {
  return process_list(device, count, infos, false);
}
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t device, unsigned int* count,
                                                      nvmlProcessInfo_t* infos) {
  return process_list(device, count, infos, false);
}
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t device, unsigned int* count,
                                                   ProcessInfoV1* infos) {
  return process_list(device, count, infos, false);
}
nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                        nvmlProcessInfo_t* infos) {
  return process_list(device, count, infos, false);
}
nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int* count,
                                                        nvmlProcessInfo_t* infos) {
  return process_list(device, count, infos, false);
}
nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses(nvmlDevice_t device, unsigned int* count,
                                                     ProcessInfoV1* infos) {
  return process_list(device, count, infos, false);
}

// nvmlPcieUtilCounter_t: TX 0, RX 1; KB/s over the last 20 ms.
nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device, int counter, unsigned int* value) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (value == nullptr || counter < 0 || counter > 1) return NVML_ERROR_INVALID_ARGUMENT;
  if (box->mig >= 0) return NVML_ERROR_NOT_SUPPORTED;
  *value = live_count(*box, *gpu) * kPcieKBpsPerProcess;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device, unsigned int* value) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  if (value == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *value = 0;
  return NVML_SUCCESS;
}

// Video engines: idle (the simulator encodes nothing); NOT_SUPPORTED on a GPU without them.
namespace {
nvmlReturn_t engine_utilization(nvmlDevice_t device, unsigned* util, unsigned* period,
                                unsigned SimGpu::*engines) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  if (util == nullptr || period == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (gpu->*engines == 0) return NVML_ERROR_NOT_SUPPORTED;
  *util = 0;
  *period = 167000;
  return NVML_SUCCESS;
}
}  // namespace

nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device, unsigned int* util,
                                             unsigned int* period) {
  return engine_utilization(device, util, period, &SimGpu::encoders);
}
nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device, unsigned int* util,
                                             unsigned int* period) {
  return engine_utilization(device, util, period, &SimGpu::decoders);
}

nvmlReturn_t nvmlDeviceGetDisplayActive(nvmlDevice_t device, int* active) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  if (active == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *active = gpu->display_active ? 1 : 0;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetDisplayMode(nvmlDevice_t device, int* mode) {
  return nvmlDeviceGetDisplayActive(device, mode);
}

nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, int* mode) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  if (mode == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *mode = static_cast<int>(gpu->compute_mode);
  return NVML_SUCCESS;
}

// nvmlBAR1Memory_t: the aperture, 2 MiB of it mapped per GPU plus 32 MiB per process.

nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device, BAR1Memory* bar1) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (bar1 == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const unsigned long long total = static_cast<unsigned long long>(gpu->bar1_mib) << 20;
  const unsigned long long used =
      std::min<unsigned long long>(total, (2ull << 20) + (32ull << 20) * live_count(*box, *gpu));
  bar1->bar1Total = total;
  bar1->bar1Used = used;
  bar1->bar1Free = total - used;
  return NVML_SUCCESS;
}

// ECC: enabled on data-centre boards, present but off on workstation ones, absent on GeForce.
nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, int* current, int* pending) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  if (current == nullptr || pending == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (gpu->ecc == 0) return NVML_ERROR_NOT_SUPPORTED;
  *current = *pending = gpu->ecc == 2 ? 1 : 0;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetDefaultEccMode(nvmlDevice_t device, int* mode) {
  int pending = 0;
  return nvmlDeviceGetEccMode(device, mode, &pending);
}
// Error counters: none (errorType 0 corrected / 1 uncorrected, counterType 0 volatile / 1
// aggregate); NOT_SUPPORTED where ECC is off or absent.
nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, int type, int counter,
                                         unsigned long long* count) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  if (count == nullptr || type < 0 || type > 1 || counter < 0 || counter > 1)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (gpu->ecc != 2) return NVML_ERROR_NOT_SUPPORTED;
  *count = 0;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMemoryErrorCounter(nvmlDevice_t device, int type, int counter,
                                             int location, unsigned long long* count) {
  if (location < 0 || location > 9) {
    const SimGpu* gpu;
    if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  return nvmlDeviceGetTotalEccErrors(device, type, counter, count);
}

// Energy since the driver loaded, in mJ: the idle draw over the time since boot, plus nothing
// for load (the simulator does not integrate power over time).
nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long* mj) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  if (mj == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const auto seconds =
      static_cast<unsigned long long>(std::chrono::duration_cast<std::chrono::seconds>(
                                          std::chrono::steady_clock::now().time_since_epoch())
                                          .count());
  *mj = seconds * gpu->power_draw_mw;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t device, char* version, unsigned int length) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  return copy_string(gpu->vbios_version, version, length);
}

// nvmlInforomObject_t: OEM 0, ECC 1, POWER 2, DEN 3.
nvmlReturn_t nvmlDeviceGetInforomVersion(nvmlDevice_t device, int object, char* version,
                                         unsigned int length) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  switch (object) {
    case 0:
      return copy_string("2.1", version, length);
    case 1:
      if (gpu->ecc == 0) return NVML_ERROR_NOT_SUPPORTED;
      return copy_string("7.16", version, length);
    case 2:
    case 3:
      return NVML_ERROR_NOT_SUPPORTED;
    default:
      return NVML_ERROR_INVALID_ARGUMENT;
  }
}
nvmlReturn_t nvmlDeviceGetInforomImageVersion(nvmlDevice_t device, char* version,
                                              unsigned int length) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  return copy_string("G" + std::to_string(gpu->cc_major * 100 + gpu->cc_minor * 10) + ".0200.00.05",
                     version, length);
}
nvmlReturn_t nvmlDeviceGetInforomConfigurationChecksum(nvmlDevice_t device,
                                                       unsigned int* checksum) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  if (checksum == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *checksum = 0x5A5A0000u | gpu->pci_bus;
  return NVML_SUCCESS;
}

// The board: one GPU per board here, identified by its PCI address.
nvmlReturn_t nvmlDeviceGetBoardId(nvmlDevice_t device, unsigned int* id) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  if (id == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *id = (gpu->pci_domain << 16) | (gpu->pci_bus << 8) | gpu->pci_device;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMultiGpuBoard(nvmlDevice_t device, unsigned int* multi) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  if (multi == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *multi = 0;
  return NVML_SUCCESS;
}

// Accounting is off (its default): nothing is accounted.
nvmlReturn_t nvmlDeviceGetAccountingMode(nvmlDevice_t device, int* mode) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  if (mode == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *mode = 0;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetAccountingPids(nvmlDevice_t device, unsigned int* count,
                                         unsigned int* pids) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  (void)pids;
  *count = 0;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetAccountingBufferSize(nvmlDevice_t device, unsigned int* size) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  if (size == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *size = 4000;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetAccountingStats(nvmlDevice_t device, unsigned int,
                                          AccountingStats* stats) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  if (stats == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device, DeviceAttributes* attributes) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (attributes == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (box->mig < 0) return NVML_ERROR_NOT_SUPPORTED;
  const auto& mig = gpu->migs[static_cast<std::size_t>(box->mig)];
  const unsigned n = slices(mig.name);
  DeviceAttributes out{};
  out.multiprocessorCount = static_cast<unsigned>(std::max(0, mig.sm_count));
  out.sharedCopyEngineCount = n;
  out.sharedDecoderCount = gpu->decoders * n / 7;
  out.sharedEncoderCount = gpu->encoders * n / 7;
  out.sharedJpegCount = n / 7;
  out.sharedOfaCount = n / 7;
  out.gpuInstanceSliceCount = n;
  out.computeInstanceSliceCount = n;
  out.memorySizeMB = mig.memory_total >> 20;
  *attributes = out;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetAttributes(nvmlDevice_t device, DeviceAttributes* attributes) {
  return nvmlDeviceGetAttributes_v2(device, attributes);
}

// The GPUs at most `level` apart from this one (nvmlGpuTopologyLevel_t), itself left out.
nvmlReturn_t nvmlDeviceGetTopologyNearestGpus(nvmlDevice_t device, int level, unsigned int* count,
                                              nvmlDevice_t* devices) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  if (count == nullptr || level < 0 || level > 50) return NVML_ERROR_INVALID_ARGUMENT;
  State& s = state();
  std::vector<nvmlDevice_t> near;
  for (std::size_t g = 0; g < s.loaded.machine().gpus.size(); ++g) {
    const SimGpu& other = s.loaded.machine().gpus[g];
    if (&other == gpu || other.lost) continue;
    if (gpusel::sim::topology_level(*gpu, other) <= level)
      near.push_back(to_handle(&s.gpu_handles[g]));
  }
  if (*count == 0) {
    *count = static_cast<unsigned>(near.size());
    return NVML_SUCCESS;
  }
  if (devices == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const auto n = std::min<std::size_t>(*count, near.size());
  std::copy(near.begin(), near.begin() + static_cast<std::ptrdiff_t>(n), devices);
  *count = static_cast<unsigned>(n);
  return NVML_SUCCESS;
}

// The GPUs whose CPU affinity holds `cpu`.
nvmlReturn_t nvmlSystemGetTopologyGpuSet(unsigned int cpu, unsigned int* count,
                                         nvmlDevice_t* devices) {
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  State& s = state();
  std::vector<nvmlDevice_t> set;
  for (std::size_t g = 0; g < s.loaded.machine().gpus.size(); ++g) {
    const SimGpu& gpu = s.loaded.machine().gpus[g];
    if (std::find(gpu.cpus.begin(), gpu.cpus.end(), static_cast<int>(cpu)) != gpu.cpus.end())
      set.push_back(to_handle(&s.gpu_handles[g]));
  }
  if (*count == 0) {
    *count = static_cast<unsigned>(set.size());
    return NVML_SUCCESS;
  }
  if (devices == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const auto n = std::min<std::size_t>(*count, set.size());
  std::copy(set.begin(), set.begin() + static_cast<std::ptrdiff_t>(n), devices);
  *count = static_cast<unsigned>(n);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int count, FieldValue* values) {
  const gpuselNvmlDeviceBox* box;
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check(device, &box, &gpu); rc != NVML_SUCCESS) return rc;
  if (count < 0 || (count > 0 && values == nullptr)) return NVML_ERROR_INVALID_ARGUMENT;
  constexpr int kUnsignedInt = 1, kUnsignedLongLong = 3;  // nvmlValueType_t
  for (int i = 0; i < count; ++i) {
    FieldValue& f = values[i];
    f.timestamp = static_cast<long long>(microseconds_now());
    f.latencyUsec = 0;
    f.nvmlReturn = NVML_SUCCESS;
    f.valueType = kUnsignedInt;
    unsigned u = 0;
    unsigned long long ull = 0;
    nvmlReturn_t rc = NVML_SUCCESS;
    switch (f.fieldId) {
      case 1:    // ECC_CURRENT
      case 2: {  // ECC_PENDING
        int cur = 0, pend = 0;
        rc = nvmlDeviceGetEccMode(device, &cur, &pend);
        u = static_cast<unsigned>(f.fieldId == 1 ? cur : pend);
        break;
      }
      case 82:  // MEMORY_TEMP
        rc = box->mig >= 0 ? NVML_ERROR_NOT_SUPPORTED : NVML_SUCCESS;
        u = gpu->temperature + 4;
        break;
      case 83:  // TOTAL_ENERGY_CONSUMPTION
        rc = nvmlDeviceGetTotalEnergyConsumption(device, &ull);
        f.valueType = kUnsignedLongLong;
        break;
      case 90:   // NVLINK_SPEED_MBPS_COMMON
      case 164:  // NVLINK_GET_SPEED
        rc = gpu->nvlink_domain >= 0 && gpu->nvlinks > 0 && box->mig < 0 ? NVML_SUCCESS
                                                                         : NVML_ERROR_NOT_SUPPORTED;
        u = gpu->nvlink_version >= 4 ? 26562 : 25781;
        break;
      case 91:  // NVLINK_LINK_COUNT
        u = gpu->nvlink_domain >= 0 ? gpu->nvlinks : 0;
        break;
      case 94:  // PCIE_REPLAY_COUNTER
        rc = nvmlDeviceGetPcieReplayCounter(device, &u);
        break;
      case 185:  // POWER_AVERAGE
      case 186:  // POWER_INSTANT
        rc = nvmlDeviceGetPowerUsage(device, &u);
        break;
      case 190:  // POWER_CURRENT_LIMIT
        rc = nvmlDeviceGetEnforcedPowerLimit(device, &u);
        break;
      default:
        rc = NVML_ERROR_NOT_SUPPORTED;
    }
    f.nvmlReturn = rc;
    f.value = f.valueType == kUnsignedLongLong ? ull : u;
  }
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device, ProcessUtilizationSample* samples,
                                             unsigned int* count, unsigned long long) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const gpuselNvmlDeviceBox whole{static_cast<int>(gpu - state().loaded.machine().gpus.data()), -1};
  const std::vector<BookedProcess> procs = booked(whole, *gpu);
  std::vector<ProcessUtilizationSample> out;
  for (const BookedProcess& p : procs) {
    const bool simulated =
        p.process.pid != 0 && std::none_of(gpu->processes.begin(), gpu->processes.end(),
                                           [&](const auto& q) { return q.pid == p.process.pid; });
    // A process on a MIG device keeps its slice busy, not the whole GPU: its share of the GPU's
    // utilisation is its slice's share of the SMs.
    unsigned sm = simulated ? gpusel::sim::kUtilizationPerProcess : 0u;
    for (const auto& m : gpu->migs) {
      if (m.gpu_instance == p.gpu_instance && m.compute_instance == p.compute_instance &&
          gpu->sm_count > 0)
        sm = sm * static_cast<unsigned>(std::max(0, m.sm_count)) /
             static_cast<unsigned>(gpu->sm_count);
    }
    out.push_back({p.process.pid, microseconds_now(), sm, simulated ? sm / 2 : 0u, 0u, 0u});
  }
  if (samples == nullptr || *count < out.size()) {
    *count = static_cast<unsigned>(out.size());
    return out.empty() ? NVML_ERROR_NOT_FOUND : NVML_ERROR_INSUFFICIENT_SIZE;
  }
  if (out.empty()) return NVML_ERROR_NOT_FOUND;
  std::copy(out.begin(), out.end(), samples);
  *count = static_cast<unsigned>(out.size());
  return NVML_SUCCESS;
}

// NVLink traffic counters: zero on every link (the simulator moves no bytes over NVLink).
nvmlReturn_t nvmlDeviceGetNvLinkUtilizationCounter(nvmlDevice_t device, unsigned int link,
                                                   unsigned int counter, unsigned long long* rx,
                                                   unsigned long long* tx) {
  const SimGpu* peer;
  int sw;
  if (nvmlReturn_t rc = nvlink_remote(device, link, &peer, &sw); rc != NVML_SUCCESS) return rc;
  if (rx == nullptr || tx == nullptr || counter > 1) return NVML_ERROR_INVALID_ARGUMENT;
  *rx = *tx = 0;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetNvLinkCapability(nvmlDevice_t device, unsigned int link, int capability,
                                           unsigned int* result) {
  const SimGpu* peer;
  int sw;
  if (nvmlReturn_t rc = nvlink_remote(device, link, &peer, &sw); rc != NVML_SUCCESS) return rc;
  if (result == nullptr || capability < 0 || capability > 5) return NVML_ERROR_INVALID_ARGUMENT;
  *result = 1;  // P2P, sysmem access, atomics, SLI bridge, valid
  return NVML_SUCCESS;
}

// The name of a process, as the kernel has it (its first argument), else NOT_FOUND.
nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char* name, unsigned int length) {
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  if (name == nullptr || length == 0) return NVML_ERROR_INVALID_ARGUMENT;
#ifdef _WIN32
  (void)pid;
  return NVML_ERROR_NOT_FOUND;
#else
  const std::string path = "/proc/" + std::to_string(pid) + "/cmdline";
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return NVML_ERROR_NOT_FOUND;
  char buf[1024] = {};
  const std::size_t got = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  if (got == 0) return NVML_ERROR_NOT_FOUND;
  std::string first(buf);  // up to the first NUL
  if (first.size() + 1 > length) first.resize(length - 1);
  std::memcpy(name, first.c_str(), first.size() + 1);
  return NVML_SUCCESS;
#endif
}

nvmlReturn_t nvmlDeviceGetPcieLinkMaxSpeed(nvmlDevice_t device, unsigned int* mbps) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  if (mbps == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const unsigned gen =
      gpu->pcie_max_generation != 0 ? gpu->pcie_max_generation : gpu->pcie_generation;
  if (gen == 0) return NVML_ERROR_NOT_SUPPORTED;
  // Per-lane transfer rate in MT/s, as NVML reports it (2500 for gen 1, doubling since gen 3).
  static const unsigned kRate[] = {0, 2500, 5000, 8000, 16000, 32000, 64000};
  *mbps = kRate[std::min(gen, 6u)];
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetPcieSpeed(nvmlDevice_t device, unsigned int* mbps) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  if (mbps == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (gpu->pcie_generation == 0) return NVML_ERROR_NOT_SUPPORTED;
  static const unsigned kRate[] = {0, 2500, 5000, 8000, 16000, 32000, 64000};
  *mbps = kRate[std::min(gpu->pcie_generation, 6u)];
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetEncoderCapacity(nvmlDevice_t device, int type, unsigned int* capacity) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  if (capacity == nullptr || type < 0 || type > 2) return NVML_ERROR_INVALID_ARGUMENT;
  if (gpu->encoders == 0) return NVML_ERROR_NOT_SUPPORTED;
  *capacity = 100;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetEncoderStats(nvmlDevice_t device, unsigned int* sessions,
                                       unsigned int* fps, unsigned int* latency) {
  const SimGpu* gpu;
  if (nvmlReturn_t rc = check_whole(device, &gpu); rc != NVML_SUCCESS) return rc;
  if (sessions == nullptr || fps == nullptr || latency == nullptr)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (gpu->encoders == 0) return NVML_ERROR_NOT_SUPPORTED;
  *sessions = *fps = *latency = 0;
  return NVML_SUCCESS;
}

// ---- MIG GPU and compute instances ----------------------------------------------------------
// What the machine file's MIG devices make: GPU instances (one per gpu_instance id, profiles by
// their slice count, placed in file order) and under each its compute instances (one per MIG
// device). Read only: nothing creates or destroys an instance.

namespace {

// NVML's profile indexes (NVML_GPU_INSTANCE_PROFILE_*, NVML_COMPUTE_INSTANCE_PROFILE_*) are small
// numbers; an index past this is no profile at all (INVALID_ARGUMENT), one below it that the
// simulator does not model (the 6- and 8-slice, media-engine and graphics ones) NOT_SUPPORTED.
constexpr unsigned kProfileIndexLimit = 32;

// A GPU handle that may have GPU instances: initialised, known, not lost and not a MIG device.
nvmlReturn_t check_mig_parent(nvmlDevice_t device, const SimGpu** gpu, int* index) {
  const gpuselNvmlDeviceBox* box;
  if (nvmlReturn_t rc = check(device, &box, gpu); rc != NVML_SUCCESS) return rc;
  if (box->mig >= 0) return NVML_ERROR_INVALID_ARGUMENT;
  *index = box->gpu;
  return NVML_SUCCESS;
}

nvmlGpuInstance_t gi_handle(int gpu, std::size_t gi) {
  return reinterpret_cast<nvmlGpuInstance_t>(
      &state().gi_handles[static_cast<std::size_t>(gpu) * kMigSlots + gi]);
}
nvmlComputeInstance_t ci_handle(int gpu, int mig) {
  return reinterpret_cast<nvmlComputeInstance_t>(
      &state()
           .ci_handles[static_cast<std::size_t>(gpu) * kMigSlots + static_cast<std::size_t>(mig)]);
}

// The GPU instance a handle is, with its GPU's index.
nvmlReturn_t check_gi(nvmlGpuInstance_t handle, const GpuInstanceModel** gi, int* gpu) {
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  State& s = state();
  const gpuselNvmlGpuInstanceBox* box = element_at(s.gi_handles, handle);
  if (box == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const auto& list = s.instances[static_cast<std::size_t>(box->gpu)];
  if (static_cast<std::size_t>(box->gi) >= list.size()) return NVML_ERROR_INVALID_ARGUMENT;
  if (s.loaded.machine().gpus[static_cast<std::size_t>(box->gpu)].lost)
    return NVML_ERROR_GPU_IS_LOST;
  *gi = &list[static_cast<std::size_t>(box->gi)];
  *gpu = box->gpu;
  return NVML_SUCCESS;
}

// The compute instance a handle is: its GPU instance and its place there.
nvmlReturn_t check_ci(nvmlComputeInstance_t handle, const GpuInstanceModel** gi, std::size_t* at,
                      int* gpu) {
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  State& s = state();
  const gpuselNvmlComputeInstanceBox* box = element_at(s.ci_handles, handle);
  if (box == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  for (const GpuInstanceModel& g : s.instances[static_cast<std::size_t>(box->gpu)]) {
    const auto found = std::find(g.migs.begin(), g.migs.end(), box->mig);
    if (found == g.migs.end()) continue;
    if (s.loaded.machine().gpus[static_cast<std::size_t>(box->gpu)].lost)
      return NVML_ERROR_GPU_IS_LOST;
    *gi = &g;
    *at = static_cast<std::size_t>(found - g.migs.begin());
    *gpu = box->gpu;
    return NVML_SUCCESS;
  }
  return NVML_ERROR_INVALID_ARGUMENT;
}

// The machine file's first GPU instance of a profile, else its first of any, else nullptr.
const GpuInstanceModel* example_of(int gpu, const MigProfile& p) {
  const auto& list = state().instances[static_cast<std::size_t>(gpu)];
  for (const GpuInstanceModel& gi : list)
    if (gi.profile == &p) return &gi;
  return list.empty() ? nullptr : &list.front();
}

const gpusel::sim::SimMig& first_mig(const SimGpu& gpu, const GpuInstanceModel& gi) {
  return gpu.migs[static_cast<std::size_t>(gi.migs.front())];
}

// A profile's memory in MiB: its MIG device's where the machine file has one, else the memory per
// slice of the file's first GPU instance (an eighth of the GPU's without one) times its slices.
unsigned long long profile_memory_mib(const SimGpu& gpu, int g, const MigProfile& p) {
  const GpuInstanceModel* gi = example_of(g, p);
  if (gi == nullptr || gi->migs.empty())
    return (gpu.memory_total >> 20) / kMemorySlices * p.memory_slices;
  const unsigned long long mib = first_mig(gpu, *gi).memory_total >> 20;
  return gi->profile == &p ? mib : mib / gi->profile->memory_slices * p.memory_slices;
}

// SMs per compute slice: the machine file's MIG devices' (SMs over compute slices), else a seventh
// of the GPU's, rounded down to an even number as NVIDIA's are.
unsigned sms_per_slice(const SimGpu& gpu, int g, const MigProfile& p) {
  const GpuInstanceModel* gi = example_of(g, p);
  if (gi == nullptr || gi->migs.empty())
    return static_cast<unsigned>(std::max(0, gpu.sm_count)) / kComputeSlices & ~1u;
  return static_cast<unsigned>(std::max(0, first_mig(gpu, *gi).sm_count)) /
         gi->ci_profiles.front()->slices;
}

// "MIG 2g.10gb": the machine file's name for the profile, else one made as NVIDIA's are (the
// GPU's memory in GB, in eighths).
std::string profile_name(const SimGpu& gpu, int g, const MigProfile& p) {
  const GpuInstanceModel* gi = example_of(g, p);
  if (gi != nullptr && gi->profile == &p && !gi->migs.empty()) {
    const std::string& name = first_mig(gpu, *gi).name;
    std::string profile =
        name.substr(name.rfind("MIG ") == std::string::npos ? 0 : name.rfind("MIG ") + 4);
    if (profile_count(name, 'c') != 0) profile = profile.substr(profile.find('.') + 1);
    return "MIG " + profile;
  }
  const unsigned long long gb = (gpu.memory_total + (1ull << 29)) >> 30;
  return "MIG " + std::to_string(p.slices) + "g." +
         std::to_string(gb * p.memory_slices / kMemorySlices) + "gb";
}

// The fields nvmlGpuInstanceProfileInfo_t and its v2 share; the engines as nvmlDeviceGetAttributes
// gives a MIG device of the profile.
template <typename Info>
void describe_gi_profile(const SimGpu& gpu, int g, const MigProfile& p, Info* info) {
  info->id = p.id;
  info->isP2pSupported = 0;
  info->sliceCount = p.slices;
  info->instanceCount = p.max_instances;
  info->multiprocessorCount = sms_per_slice(gpu, g, p) * p.slices;
  info->copyEngineCount = p.slices;
  info->decoderCount = gpu.decoders * p.slices / kComputeSlices;
  info->encoderCount = gpu.encoders * p.slices / kComputeSlices;
  info->jpegCount = p.slices / kComputeSlices;
  info->ofaCount = p.slices / kComputeSlices;
  info->memorySizeMB = profile_memory_mib(gpu, g, p);
}

// A compute instance profile `cp` in GPU instance `gi`: the GPU instance's engines, shared.
template <typename Info>
void describe_ci_profile(const SimGpu& gpu, int g, const GpuInstanceModel& gi, const MigProfile& cp,
                         Info* info) {
  const unsigned n = gi.profile->slices;
  info->id = cp.index;
  info->sliceCount = cp.slices;
  info->instanceCount = n / cp.slices;
  info->multiprocessorCount = sms_per_slice(gpu, g, *gi.profile) * cp.slices;
  info->sharedCopyEngineCount = n;
  info->sharedDecoderCount = gpu.decoders * n / kComputeSlices;
  info->sharedEncoderCount = gpu.encoders * n / kComputeSlices;
  info->sharedJpegCount = n / kComputeSlices;
  info->sharedOfaCount = n / kComputeSlices;
}

// Where a GPU instance of a profile may go: every size-aligned run of its memory slices, at most
// max_instances of them (A100 and H100: 1g at 0-6, 2g at 0, 2, 4, 3g at 0 and 4, 4g and 7g at 0).
std::vector<GpuInstancePlacement> possible_placements(const MigProfile& p) {
  std::vector<GpuInstancePlacement> out;
  for (unsigned start = 0; start + p.memory_slices <= kMemorySlices && out.size() < p.max_instances;
       start += p.memory_slices)
    out.push_back({start, p.memory_slices});
  return out;
}

// A GPU instance profile argument: one of nvml.h's indexes, which this GPU has.
nvmlReturn_t gi_profile_by_index(const SimGpu& gpu, unsigned index, const MigProfile** p) {
  if (index >= kProfileIndexLimit) return NVML_ERROR_INVALID_ARGUMENT;
  if (!gpu.mig_enabled) return NVML_ERROR_NOT_SUPPORTED;
  *p = profile_where(&MigProfile::index, index);
  return *p == nullptr ? NVML_ERROR_NOT_SUPPORTED : NVML_SUCCESS;
}

// A GPU instance profile id argument (nvmlGpuInstanceProfileInfo_t.id).
nvmlReturn_t gi_profile_by_id(const SimGpu& gpu, unsigned id, const MigProfile** p) {
  if (!gpu.mig_enabled) return NVML_ERROR_NOT_SUPPORTED;
  *p = profile_where(&MigProfile::id, id);
  return *p == nullptr ? NVML_ERROR_INVALID_ARGUMENT : NVML_SUCCESS;
}

// A compute instance profile (index and id alike) that fits in GPU instance `gi`.
nvmlReturn_t ci_profile(const GpuInstanceModel& gi, unsigned index, const MigProfile** p) {
  if (index >= kProfileIndexLimit) return NVML_ERROR_INVALID_ARGUMENT;
  *p = profile_where(&MigProfile::index, index);
  if (*p == nullptr || (*p)->slices > gi.profile->slices) return NVML_ERROR_NOT_SUPPORTED;
  return NVML_SUCCESS;
}

void copy_name(const std::string& name, char (&out)[96]) {
  std::memset(out, 0, sizeof out);
  std::memcpy(out, name.c_str(), std::min(name.size(), sizeof out - 1));
}

}  // namespace

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile,
                                                 GpuInstanceProfileInfo* info) {
  const SimGpu* gpu;
  int g;
  if (nvmlReturn_t rc = check_mig_parent(device, &gpu, &g); rc != NVML_SUCCESS) return rc;
  if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const MigProfile* p;
  if (nvmlReturn_t rc = gi_profile_by_index(*gpu, profile, &p); rc != NVML_SUCCESS) return rc;
  describe_gi_profile(*gpu, g, *p, info);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t device, unsigned int profile,
                                                  GpuInstanceProfileInfoV2* info) {
  const SimGpu* gpu;
  int g;
  if (nvmlReturn_t rc = check_mig_parent(device, &gpu, &g); rc != NVML_SUCCESS) return rc;
  if (info == nullptr || info->version != kGpuInstanceProfileInfoV2Version)
    return NVML_ERROR_INVALID_ARGUMENT;
  const MigProfile* p;
  if (nvmlReturn_t rc = gi_profile_by_index(*gpu, profile, &p); rc != NVML_SUCCESS) return rc;
  describe_gi_profile(*gpu, g, *p, info);
  copy_name(profile_name(*gpu, g, *p), info->name);
  return NVML_SUCCESS;
}

// `count` is only written: a non-null array must hold every placement of the profile (nvml.h).
nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(nvmlDevice_t device,
                                                           unsigned int profileId,
                                                           GpuInstancePlacement* placements,
                                                           unsigned int* count) {
  const SimGpu* gpu;
  int g;
  if (nvmlReturn_t rc = check_mig_parent(device, &gpu, &g); rc != NVML_SUCCESS) return rc;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const MigProfile* p;
  if (nvmlReturn_t rc = gi_profile_by_id(*gpu, profileId, &p); rc != NVML_SUCCESS) return rc;
  const std::vector<GpuInstancePlacement> all = possible_placements(*p);
  if (placements != nullptr) std::copy(all.begin(), all.end(), placements);
  *count = static_cast<unsigned>(all.size());
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements(nvmlDevice_t device, unsigned int profileId,
                                                        GpuInstancePlacement* placements,
                                                        unsigned int* count) {
  return nvmlDeviceGetGpuInstancePossiblePlacements_v2(device, profileId, placements, count);
}

// How many more of a profile would fit: its possible placements, taken in order, that overlap no
// instance's memory slices nor one taken before, while compute slices are left.
nvmlReturn_t nvmlDeviceGetGpuInstanceRemainingCapacity(nvmlDevice_t device, unsigned int profileId,
                                                       unsigned int* count) {
  const SimGpu* gpu;
  int g;
  if (nvmlReturn_t rc = check_mig_parent(device, &gpu, &g); rc != NVML_SUCCESS) return rc;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const MigProfile* p;
  if (nvmlReturn_t rc = gi_profile_by_id(*gpu, profileId, &p); rc != NVML_SUCCESS) return rc;
  std::vector<GpuInstancePlacement> taken;
  unsigned compute = kComputeSlices;
  for (const GpuInstanceModel& gi : state().instances[static_cast<std::size_t>(g)]) {
    taken.push_back(gi.placement);
    compute -= std::min(compute, gi.profile->slices);
  }
  unsigned n = 0;
  for (const GpuInstancePlacement& at : possible_placements(*p)) {
    const bool overlaps = std::any_of(taken.begin(), taken.end(), [&](const auto& t) {
      return at.start < t.start + t.size && t.start < at.start + at.size;
    });
    if (overlaps || compute < p->slices) continue;
    taken.push_back(at);
    compute -= p->slices;
    ++n;
  }
  *count = n;
  return NVML_SUCCESS;
}

// `count` is only written: the array must hold the profile's instanceCount handles (nvml.h).
nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device, unsigned int profileId,
                                       nvmlGpuInstance_t* instances, unsigned int* count) {
  const SimGpu* gpu;
  int g;
  if (nvmlReturn_t rc = check_mig_parent(device, &gpu, &g); rc != NVML_SUCCESS) return rc;
  if (instances == nullptr || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const MigProfile* p;
  if (nvmlReturn_t rc = gi_profile_by_id(*gpu, profileId, &p); rc != NVML_SUCCESS) return rc;
  const auto& list = state().instances[static_cast<std::size_t>(g)];
  unsigned n = 0;
  for (std::size_t i = 0; i < list.size(); ++i)
    if (list[i].profile == p) instances[n++] = gi_handle(g, i);
  *count = n;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id,
                                          nvmlGpuInstance_t* instance) {
  const SimGpu* gpu;
  int g;
  if (nvmlReturn_t rc = check_mig_parent(device, &gpu, &g); rc != NVML_SUCCESS) return rc;
  if (instance == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!gpu->mig_enabled) return NVML_ERROR_NOT_SUPPORTED;
  const auto& list = state().instances[static_cast<std::size_t>(g)];
  for (std::size_t i = 0; i < list.size(); ++i)
    if (list[i].id == id) {
      *instance = gi_handle(g, i);
      return NVML_SUCCESS;
    }
  return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t instance, GpuInstanceInfo* info) {
  const GpuInstanceModel* gi;
  int g;
  if (nvmlReturn_t rc = check_gi(instance, &gi, &g); rc != NVML_SUCCESS) return rc;
  if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  info->device = to_handle(&state().gpu_handles[static_cast<std::size_t>(g)]);
  info->id = gi->id;
  info->profileId = gi->profile->id;
  info->placement = gi->placement;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t instance,
                                                          unsigned int profile, unsigned int engine,
                                                          ComputeInstanceProfileInfo* info) {
  const GpuInstanceModel* gi;
  int g;
  if (nvmlReturn_t rc = check_gi(instance, &gi, &g); rc != NVML_SUCCESS) return rc;
  if (info == nullptr || engine != 0) return NVML_ERROR_INVALID_ARGUMENT;  // engine: SHARED only
  const MigProfile* cp;
  if (nvmlReturn_t rc = ci_profile(*gi, profile, &cp); rc != NVML_SUCCESS) return rc;
  describe_ci_profile(state().loaded.machine().gpus[static_cast<std::size_t>(g)], g, *gi, *cp,
                      info);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfoV(nvmlGpuInstance_t instance,
                                                           unsigned int profile,
                                                           unsigned int engine,
                                                           ComputeInstanceProfileInfoV2* info) {
  const GpuInstanceModel* gi;
  int g;
  if (nvmlReturn_t rc = check_gi(instance, &gi, &g); rc != NVML_SUCCESS) return rc;
  if (info == nullptr || engine != 0 || info->version != kComputeInstanceProfileInfoV2Version)
    return NVML_ERROR_INVALID_ARGUMENT;
  const MigProfile* cp;
  if (nvmlReturn_t rc = ci_profile(*gi, profile, &cp); rc != NVML_SUCCESS) return rc;
  const SimGpu& gpu = state().loaded.machine().gpus[static_cast<std::size_t>(g)];
  describe_ci_profile(gpu, g, *gi, *cp, info);
  const std::string gi_name = profile_name(gpu, g, *gi->profile);  // "MIG 2g.10gb"
  copy_name(cp == gi->profile ? gi_name
                              : "MIG " + std::to_string(cp->slices) + "c." +
                                    gi_name.substr(gi_name.find(' ') + 1),
            info->name);
  return NVML_SUCCESS;
}

// `count` is only written: the array must hold the profile's instanceCount handles (nvml.h).
nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t instance, unsigned int profileId,
                                                nvmlComputeInstance_t* instances,
                                                unsigned int* count) {
  const GpuInstanceModel* gi;
  int g;
  if (nvmlReturn_t rc = check_gi(instance, &gi, &g); rc != NVML_SUCCESS) return rc;
  if (instances == nullptr || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const MigProfile* cp;
  if (nvmlReturn_t rc = ci_profile(*gi, profileId, &cp); rc != NVML_SUCCESS) return rc;
  unsigned n = 0;
  for (std::size_t i = 0; i < gi->migs.size(); ++i)
    if (gi->ci_profiles[i] == cp) instances[n++] = ci_handle(g, gi->migs[i]);
  *count = n;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(nvmlGpuInstance_t instance, unsigned int id,
                                                   nvmlComputeInstance_t* compute) {
  const GpuInstanceModel* gi;
  int g;
  if (nvmlReturn_t rc = check_gi(instance, &gi, &g); rc != NVML_SUCCESS) return rc;
  if (compute == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const SimGpu& gpu = state().loaded.machine().gpus[static_cast<std::size_t>(g)];
  for (int m : gi->migs)
    if (gpu.migs[static_cast<std::size_t>(m)].compute_instance == id) {
      *compute = ci_handle(g, m);
      return NVML_SUCCESS;
    }
  return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t compute,
                                           ComputeInstanceInfo* info) {
  const GpuInstanceModel* gi;
  std::size_t at;
  int g;
  if (nvmlReturn_t rc = check_ci(compute, &gi, &at, &g); rc != NVML_SUCCESS) return rc;
  if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const SimGpu& gpu = state().loaded.machine().gpus[static_cast<std::size_t>(g)];
  info->device = to_handle(&state().gpu_handles[static_cast<std::size_t>(g)]);
  info->gpuInstance = gi_handle(
      g, static_cast<std::size_t>(gi - state().instances[static_cast<std::size_t>(g)].data()));
  info->id = gpu.migs[static_cast<std::size_t>(gi->migs[at])].compute_instance;
  info->profileId = gi->ci_profiles[at]->index;
  info->placement = gi->ci_placements[at];
  return NVML_SUCCESS;
}

// The unversioned call's struct ends before `placement`: it writes the first 24 bytes only.
nvmlReturn_t nvmlComputeInstanceGetInfo(nvmlComputeInstance_t compute, ComputeInstanceInfo* info) {
  ComputeInstanceInfo full{};
  if (nvmlReturn_t rc = nvmlComputeInstanceGetInfo_v2(compute, &full); rc != NVML_SUCCESS)
    return rc;
  if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  std::memcpy(static_cast<void*>(info), &full, offsetof(ComputeInstanceInfo, placement));
  return NVML_SUCCESS;
}

}  // namespace impl

// ---- the exported entry points: traced wrappers around impl:: --------------------------------
#define SIM_NVML_WRAP(visibility, name, params, args)                                           \
  visibility nvmlReturn_t name params {                                                         \
    const nvmlReturn_t rc = impl::name args;                                                    \
    if (gpusel::sim::trace::on())                                                               \
      std::apply(                                                                               \
          [&](const auto&... traced_args) {                                                     \
            gpusel::sim::trace::call("libnvidia-ml.so.1", #name, rc, impl::nvmlErrorString(rc), \
                                     rc == NVML_SUCCESS, traced_args...);                       \
          },                                                                                    \
          std::make_tuple args);                                                                \
    return rc;                                                                                  \
  }
#define SIM_NVML(name, params, args) SIM_NVML_WRAP(NVML_SIM_API, name, params, args)
#define SIM_NVML_V2(name, params, args) SIM_NVML_WRAP(NVML_SIM_V2_API, name, params, args)
#include "nvml_exports.inc"
#undef SIM_NVML
#undef SIM_NVML_V2

// The functions the simulator does not model (nvml_unmodelled.inc). They take no parameters here:
// on the platforms' C calling conventions the caller cleans up, so a call with any arguments
// returns safely.
#define SIM_NVML_UNMODELLED(name)                                                                \
  NVML_SIM_API nvmlReturn_t name() {                                                             \
    const nvmlReturn_t rc = initialised() ? NVML_ERROR_NOT_SUPPORTED : NVML_ERROR_UNINITIALIZED; \
    if (gpusel::sim::trace::on())                                                                \
      gpusel::sim::trace::call("libnvidia-ml.so.1", #name, rc, impl::nvmlErrorString(rc), true); \
    return rc;                                                                                   \
  }
#include "nvml_unmodelled.inc"
#undef SIM_NVML_UNMODELLED

NVML_SIM_API const char* nvmlErrorString(nvmlReturn_t result) {
  const char* text = impl::nvmlErrorString(result);
  if (gpusel::sim::trace::on()) {
    std::string line;
    gpusel::sim::trace::quote(line, text);
    gpusel::sim::trace::call("libnvidia-ml.so.1", "nvmlErrorString", 0, line.c_str(), true, result);
  }
  return text;
}

// NVIDIA's own nvidia-smi asks its NVML for the driver's private tables first and stops with a
// version mismatch when they are missing. The simulator has none of them: it says once, on stderr,
// which program answers in its place, then refuses as NVIDIA's library would on a mismatch.
NVML_SIM_API nvmlReturn_t nvmlInternalGetExportTable(const void** table, const void* id) {
  static std::once_flag said;
  std::call_once(said, [] {
    const std::string folder = gpusel::sim::platform::folder_of(gpusel::sim::platform::library_file(
        reinterpret_cast<const void*>(&nvmlInternalGetExportTable)));
    gpusel::sim::report(
        "libnvidia-ml.so.1",
        "this program asked for NVML's private tables (nvmlInternalGetExportTable), "
        "as NVIDIA's own nvidia-smi does; the simulator has none, so it cannot run "
        "here. The simulator's nvidia-smi answers the forms launch scripts use: " +
            folder +
            "/bin/nvidia-smi, first on PATH under `gpusel sim env` and "
            "`gpusel sim exec MACHINE -- nvidia-smi ...` "
            "(docs/simulator.md)");
  });
  if (table != nullptr) *table = nullptr;
  if (gpusel::sim::trace::on())
    gpusel::sim::trace::call("libnvidia-ml.so.1", "nvmlInternalGetExportTable",
                             NVML_ERROR_NOT_SUPPORTED, "Not Supported", false, table, id);
  return NVML_ERROR_NOT_SUPPORTED;
}

// Each exported function of nvml.def has exactly the prototype gpusel's loader expects.
#define GPUSEL_NVML(name, required, ret, params) \
  static_assert(std::is_same_v<decltype(&::name), ret(*) params>, #name " prototype");
#include "nvml.def"
#undef GPUSEL_NVML
