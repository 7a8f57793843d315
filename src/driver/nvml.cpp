// NVML loader: dlopen once, look up every symbol of nvml.def, never dlclose.
#include "gpusel/nvml.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "ancestry.hpp"
#include "dl.hpp"
#include "nvml_abi.hpp"
#include "nvml_index.hpp"

GPUSEL_BEGIN_NAMESPACE

using detail::note_missing;
using detail::open_driver_library;

namespace {

struct NvmlApi {
#define GPUSEL_NVML(name, required, ret, params) ret(*name) params = nullptr;
#include "nvml.def"
#undef GPUSEL_NVML
};

struct NvmlLibrary {
  NvmlApi api;
  bool usable = false;
  std::string reason;
};

NvmlLibrary open_library() {
  NvmlLibrary lib;
  std::string path;
  void* handle =
      open_driver_library("GPUSEL_NVML_LIBRARY", detail::kNvmlLibraryName, path, lib.reason);
  if (handle == nullptr) return lib;
  std::string missing;
#define GPUSEL_NVML(name, required, ret, params)                                      \
  lib.api.name = reinterpret_cast<ret(*) params>(detail::find_symbol(handle, #name)); \
  if (required && lib.api.name == nullptr) note_missing(missing, #name);
#include "nvml.def"
#undef GPUSEL_NVML
  if (!missing.empty()) {
    lib.reason =
        path + " lacks " + missing + " (a driver too old for gpusel, or not a real NVML library)";
    return lib;  // the handle stays open: never dlclose a driver library
  }
  lib.usable = true;
  return lib;
}

const NvmlLibrary& library() {
  static const NvmlLibrary lib = open_library();  // thread-safe initialisation
  return lib;
}

std::mutex nvml_mutex;  // NVML calls are serialised, init through shutdown

// One NVML session per process: NVML is initialised by the first query and stays so for every
// later one (initialising costs as much as a whole enumeration), and is shut down when the process
// exits. A child forked after the first query opens a session of its own. Guarded by nvml_mutex.
struct Session {
  bool open = false;
  int pid = 0;
  bool shutdown_registered = false;
};
Session session;

void close_session() {
  std::lock_guard<std::mutex> lock(nvml_mutex);
  if (session.open && session.pid == detail::current_pid()) library().api.nvmlShutdown();
  session.open = false;
}

// Opens the session unless it is open in this process; NVML_SUCCESS or nvmlInit_v2's error.
// Called with nvml_mutex held.
nvmlReturn_t open_session(const NvmlApi& api) {
  if (session.open && session.pid == detail::current_pid()) return NVML_SUCCESS;
  const nvmlReturn_t rc = api.nvmlInit_v2();
  if (rc != NVML_SUCCESS) return rc;
  session.open = true;
  session.pid = detail::current_pid();
  if (!session.shutdown_registered) {
    session.shutdown_registered = std::atexit(close_session) == 0;
  }
  return NVML_SUCCESS;
}

std::string error_text(const NvmlApi& api, nvmlReturn_t rc) {
  std::string text = "NVML error " + std::to_string(rc);
  if (api.nvmlErrorString != nullptr) {
    const char* s = api.nvmlErrorString(rc);
    if (s != nullptr) text += " (" + std::string(s, strnlen(s, 512)) + ")";
  }
  return text;
}

// A string the driver wrote into `buf`, read within the buffer's own bound (a driver may leave
// it unterminated).
template <std::size_t N>
std::string read_string(nvmlReturn_t rc, const char (&buf)[N]) {
  return rc == NVML_SUCCESS ? std::string(buf, strnlen(buf, N)) : std::string();
}

// More GPUs than any machine holds: a count past this is a broken driver, not a machine.
constexpr unsigned kMaxGpus = 4096;
constexpr unsigned kMaxMigDevices = 64;

// Reads what NVML may or may not report for one GPU. Returns why the library cannot be trusted
// (an absurd MIG slot count), or an empty string.
std::string read_optional(const NvmlApi& api, nvmlDevice_t dev, GpuInfo& gpu) {
  char buf[abi::kNvmlNameBuffer] = {};
  if (api.nvmlDeviceGetName)
    gpu.name = read_string(api.nvmlDeviceGetName(dev, buf, sizeof buf), buf);
  if (api.nvmlDeviceGetPciInfo_v3) {
    nvmlPciInfo_t pci{};
    if (api.nvmlDeviceGetPciInfo_v3(dev, &pci) == NVML_SUCCESS) {
      gpu.pci_bus_id.assign(pci.busId, strnlen(pci.busId, sizeof pci.busId));
    }
  }
  nvmlMemory_v2_t mem2{};
  mem2.version = abi::kNvmlMemoryV2Version;
  nvmlMemory_t mem1{};
  if (api.nvmlDeviceGetMemoryInfo_v2 &&
      api.nvmlDeviceGetMemoryInfo_v2(dev, &mem2) == NVML_SUCCESS) {
    gpu.memory_total = mem2.total;
  } else if (api.nvmlDeviceGetMemoryInfo &&
             api.nvmlDeviceGetMemoryInfo(dev, &mem1) == NVML_SUCCESS) {
    gpu.memory_total = mem1.total;
  }
  int major = -1, minor = -1;
  if (api.nvmlDeviceGetCudaComputeCapability &&
      api.nvmlDeviceGetCudaComputeCapability(dev, &major, &minor) == NVML_SUCCESS) {
    gpu.cc_major = major;
    gpu.cc_minor = minor;
  }
  constexpr unsigned kWords = 16;  // 1024 CPUs or NUMA nodes
  unsigned long mask[kWords] = {};
  constexpr unsigned kBits = sizeof(unsigned long) * 8;
  if (api.nvmlDeviceGetCpuAffinity &&
      api.nvmlDeviceGetCpuAffinity(dev, kWords, mask) == NVML_SUCCESS) {
    for (unsigned i = 0; i < kWords * kBits; ++i) {
      if (mask[i / kBits] >> (i % kBits) & 1UL) gpu.cpus.push_back(static_cast<int>(i));
    }
  }
  std::memset(mask, 0, sizeof mask);
  if (api.nvmlDeviceGetMemoryAffinity &&
      api.nvmlDeviceGetMemoryAffinity(dev, kWords, mask, 0) == NVML_SUCCESS) {
    for (unsigned i = 0; i < kWords * kBits; ++i) {
      if (mask[i / kBits] >> (i % kBits) & 1UL) {
        gpu.numa_node = static_cast<int>(i);
        break;
      }
    }
  }
  auto link = [&](auto fn, unsigned& field) {
    unsigned v = 0;
    if (fn != nullptr && fn(dev, &v) == NVML_SUCCESS) field = v;
  };
  link(api.nvmlDeviceGetCurrPcieLinkGeneration, gpu.pcie_generation);
  link(api.nvmlDeviceGetCurrPcieLinkWidth, gpu.pcie_width);
  link(api.nvmlDeviceGetMaxPcieLinkGeneration, gpu.pcie_max_generation);
  link(api.nvmlDeviceGetMaxPcieLinkWidth, gpu.pcie_max_width);
  unsigned current = 0, pending = 0, slots = 0;
  if (api.nvmlDeviceGetMigMode &&
      api.nvmlDeviceGetMigMode(dev, &current, &pending) == NVML_SUCCESS &&
      current == abi::kNvmlDeviceMigEnable) {
    gpu.mig_enabled = true;
    if (api.nvmlDeviceGetMaxMigDeviceCount && api.nvmlDeviceGetMigDeviceHandleByIndex &&
        api.nvmlDeviceGetMaxMigDeviceCount(dev, &slots) == NVML_SUCCESS) {
      if (slots > kMaxMigDevices) {
        return "nvmlDeviceGetMaxMigDeviceCount reported " + std::to_string(slots) +
               " MIG devices for GPU " + std::to_string(gpu.index) +
               ", more than any GPU holds (at most " + std::to_string(kMaxMigDevices) +
               "); the NVML library is broken";
      }
      for (unsigned s = 0; s < slots; ++s) {
        nvmlDevice_t mdev = nullptr;
        if (api.nvmlDeviceGetMigDeviceHandleByIndex(dev, s, &mdev) != NVML_SUCCESS) continue;
        MigDevice mig;
        char ubuf[abi::kNvmlUuidBuffer] = {};
        mig.uuid = read_string(api.nvmlDeviceGetUUID(mdev, ubuf, sizeof ubuf), ubuf);
        char nbuf[abi::kNvmlNameBuffer] = {};
        if (api.nvmlDeviceGetName)
          mig.name = read_string(api.nvmlDeviceGetName(mdev, nbuf, sizeof nbuf), nbuf);
        if (api.nvmlDeviceGetGpuInstanceId) api.nvmlDeviceGetGpuInstanceId(mdev, &mig.gpu_instance);
        if (api.nvmlDeviceGetComputeInstanceId)
          api.nvmlDeviceGetComputeInstanceId(mdev, &mig.compute_instance);
        nvmlMemory_t mm{};
        if (api.nvmlDeviceGetMemoryInfo && api.nvmlDeviceGetMemoryInfo(mdev, &mm) == NVML_SUCCESS) {
          mig.memory_total = mm.total;
        }
        if (!mig.uuid.empty()) gpu.migs.push_back(std::move(mig));
      }
    }
  }
  return {};
}

constexpr unsigned kMaxProcesses = 4096;

void read_usage(const NvmlApi& api, nvmlDevice_t dev, GpuInfo& gpu) {
  nvmlMemory_v2_t mem2{};
  mem2.version = abi::kNvmlMemoryV2Version;
  nvmlMemory_t mem1{};
  if (api.nvmlDeviceGetMemoryInfo_v2 &&
      api.nvmlDeviceGetMemoryInfo_v2(dev, &mem2) == NVML_SUCCESS) {
    gpu.memory_used = mem2.used;
  } else if (api.nvmlDeviceGetMemoryInfo &&
             api.nvmlDeviceGetMemoryInfo(dev, &mem1) == NVML_SUCCESS) {
    gpu.memory_used = mem1.used;
  }
  unsigned persistence = 0;  // nvmlEnableState_t: 0 disabled, 1 enabled
  if (api.nvmlDeviceGetPersistenceMode &&
      api.nvmlDeviceGetPersistenceMode(dev, &persistence) == NVML_SUCCESS) {
    gpu.persistence_mode = persistence != 0;
  }
  nvmlUtilization_t util{};
  if (api.nvmlDeviceGetUtilizationRates &&
      api.nvmlDeviceGetUtilizationRates(dev, &util) == NVML_SUCCESS) {
    gpu.utilization = std::min(util.gpu, 100u);
  }
  if (api.nvmlDeviceGetComputeRunningProcesses_v3) {
    // Ask for the count first; processes may come and go between the calls, so retry a little.
    for (int attempt = 0; attempt < 4; ++attempt) {
      unsigned count = 0;
      nvmlReturn_t rc = api.nvmlDeviceGetComputeRunningProcesses_v3(dev, &count, nullptr);
      if (rc == NVML_SUCCESS) {
        gpu.processes = std::vector<GpuProcess>{};
        break;
      }
      if (rc != NVML_ERROR_INSUFFICIENT_SIZE || count > kMaxProcesses) break;
      std::vector<nvmlProcessInfo_t> infos(count + 4);
      unsigned got = static_cast<unsigned>(infos.size());
      rc = api.nvmlDeviceGetComputeRunningProcesses_v3(dev, &got, infos.data());
      if (rc == NVML_ERROR_INSUFFICIENT_SIZE) continue;
      if (rc != NVML_SUCCESS) break;
      std::vector<GpuProcess> procs;
      for (unsigned i = 0; i < std::min<unsigned>(got, static_cast<unsigned>(infos.size())); ++i) {
        procs.push_back({infos[i].pid, infos[i].usedGpuMemory});
      }
      gpu.processes = std::move(procs);
      break;
    }
  }
}

void read_topology(const NvmlApi& api, const std::vector<nvmlDevice_t>& handles,
                   NvmlSnapshot& snap) {
  const std::size_t n = handles.size();
  snap.links.assign(n, std::vector<GpuLink>(n));
  for (std::size_t a = 0; a < n; ++a) {
    for (std::size_t b = a + 1; b < n; ++b) {
      if (handles[a] == nullptr || handles[b] == nullptr) continue;
      GpuLink link;
      int level = -1;
      if (api.nvmlDeviceGetTopologyCommonAncestor &&
          api.nvmlDeviceGetTopologyCommonAncestor(handles[a], handles[b], &level) == NVML_SUCCESS) {
        link.ancestor = level;
      }
      int status = -1;
      if (api.nvmlDeviceGetP2PStatus &&
          api.nvmlDeviceGetP2PStatus(handles[a], handles[b], abi::kNvmlP2PCapsIndexNvlink,
                                     &status) == NVML_SUCCESS) {
        link.nvlink = status == abi::kNvmlP2PStatusOk;
      }
      snap.links[a][b] = snap.links[b][a] = link;
    }
  }
}

// Everything between a successful init and its shutdown.
void enumerate(const NvmlApi& api, const NvmlQuery& what, NvmlSnapshot& snap) {
  unsigned count = 0;
  nvmlReturn_t rc = api.nvmlDeviceGetCount_v2(&count);
  if (rc != NVML_SUCCESS) {
    snap.reason = "nvmlDeviceGetCount_v2 failed: " + error_text(api, rc);
    return;
  }
  if (count > kMaxGpus) {
    snap.reason = "nvmlDeviceGetCount_v2 reported " + std::to_string(count) +
                  " GPUs, more than any machine holds (at most " + std::to_string(kMaxGpus) +
                  "); the NVML library is broken";
    return;
  }
  std::vector<nvmlDevice_t> handles(count, nullptr);  // of the GPUs NVML reads
  // A GPU NVML cannot read (lost, or any per-device error) keeps its index and says why; the
  // others are still enumerated, so an index never drifts onto a neighbouring card.
  for (unsigned i = 0; i < count; ++i) {
    GpuInfo gpu;
    gpu.index = i;
    nvmlDevice_t dev = nullptr;
    rc = api.nvmlDeviceGetHandleByIndex_v2(i, &dev);
    const char* call = "nvmlDeviceGetHandleByIndex_v2";
    char buf[abi::kNvmlUuidBuffer] = {};
    if (rc == NVML_SUCCESS) {
      call = "nvmlDeviceGetUUID";
      rc = api.nvmlDeviceGetUUID(dev, buf, sizeof buf);
      gpu.uuid = read_string(rc, buf);
      if (rc == NVML_SUCCESS && gpu.uuid.empty()) {
        gpu.failure = "nvmlDeviceGetUUID returned an empty UUID";
        snap.gpus.push_back(std::move(gpu));
        continue;
      }
    }
    if (rc != NVML_SUCCESS) {
      gpu.failure = (rc == NVML_ERROR_GPU_IS_LOST ? std::string("lost: ") : std::string()) + call +
                    " failed: " + error_text(api, rc);
      snap.gpus.push_back(std::move(gpu));
      continue;
    }
    if (std::string broken = read_optional(api, dev, gpu); !broken.empty()) {
      snap.reason = std::move(broken);
      snap.gpus.clear();
      return;
    }
    if (what.usage) read_usage(api, dev, gpu);
    snap.gpus.push_back(std::move(gpu));
    handles[i] = dev;
  }
  if (what.topology) read_topology(api, handles, snap);
  char ver[abi::kNvmlDriverVersionBuffer] = {};
  if (api.nvmlSystemGetDriverVersion) {
    snap.driver_version = read_string(api.nvmlSystemGetDriverVersion(ver, sizeof ver), ver);
  }
  if (api.nvmlSystemGetCudaDriverVersion_v2) {
    int v = 0;
    if (api.nvmlSystemGetCudaDriverVersion_v2(&v) == NVML_SUCCESS) snap.cuda_driver_version = v;
  }
  snap.available = true;
}

}  // namespace

NvmlSnapshot query_nvml(const NvmlQuery& what) {
  NvmlSnapshot snap;
  const NvmlLibrary& lib = library();
  if (!lib.usable) {
    snap.reason = lib.reason;
    return snap;
  }
  std::lock_guard<std::mutex> lock(nvml_mutex);
  const nvmlReturn_t rc = open_session(lib.api);
  if (rc != NVML_SUCCESS) {
    snap.reason = "nvmlInit_v2 failed: " + error_text(lib.api, rc);
    return snap;
  }
  enumerate(lib.api, what, snap);
  return snap;
}

GPUSEL_END_NAMESPACE

namespace gpusel::detail {

bool nvml_gpu_index(const std::string& uuid, std::optional<unsigned>& index) {
  index.reset();
  const NvmlLibrary& lib = library();
  if (!lib.usable || lib.api.nvmlDeviceGetHandleByUUID == nullptr ||
      lib.api.nvmlDeviceGetIndex == nullptr) {
    return false;
  }
  std::lock_guard<std::mutex> lock(nvml_mutex);
  if (open_session(lib.api) != NVML_SUCCESS) return true;  // NVML unavailable: no index
  nvmlDevice_t dev = nullptr;
  unsigned value = 0;
  if (lib.api.nvmlDeviceGetHandleByUUID(uuid.c_str(), &dev) != NVML_SUCCESS ||
      lib.api.nvmlDeviceGetIndex(dev, &value) != NVML_SUCCESS) {
    return false;  // another spelling of the UUID, a GPU NVML cannot read: enumerate
  }
  index = value;
  return true;
}

}  // namespace gpusel::detail
