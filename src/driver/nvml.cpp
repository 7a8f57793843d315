// NVML loader: dlopen once, look up every symbol of nvml.def, never dlclose.
#include "gpusel/nvml.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <type_traits>
#include <unordered_map>

#include "ancestry.hpp"
#include "dl.hpp"
#include "gpusel_detail.hpp"
#include "nvml_abi.hpp"
#include "nvml_index.hpp"

GPUSEL_BEGIN_NAMESPACE

using detail::open_driver_library;

namespace {

struct NvmlApi {
#define GPUSEL_NVML(name, required, ret, params) \
  detail::DriverFunction<required, ret(*) params> name{};
#include "nvml.def"
#undef GPUSEL_NVML
};

struct NvmlLibrary {
  NvmlApi api;
  bool usable = false;
  std::string reason;
  ErrorCode code = ErrorCode::None;  // LibraryNotLoaded or LibraryIncomplete when not usable
};

NvmlLibrary open_library() {
  NvmlLibrary lib;
  std::string path;
  void* handle =
      open_driver_library("GPUSEL_NVML_LIBRARY", detail::kNvmlLibraryName, path, lib.reason);
  if (handle == nullptr) {
    lib.code = ErrorCode::LibraryNotLoaded;
    return lib;
  }
  std::string missing;
#define GPUSEL_NVML(name, required, ret, params) \
  detail::bind_driver_function(lib.api.name, handle, #name, required, missing);
#include "nvml.def"
#undef GPUSEL_NVML
  if (!missing.empty()) {
    lib.reason =
        path + " lacks " + missing + " (a driver too old for gpusel, or not a real NVML library)";
    lib.code = ErrorCode::LibraryIncomplete;
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

// The handles and UUIDs of this process's latest enumeration, by nvidia-smi index, so that a few
// GPUs can be read further (nvml_complete) without finding them again. Valid while the session
// that made them stays open. Guarded by nvml_mutex.
struct Enumerated {
  int pid = 0;
  std::vector<nvmlDevice_t> handles;
  // NUL-terminated, in NVML's own buffer size (a vector of strings cost every enumeration an
  // allocation a GPU); empty where the GPU had none, or one too long to keep.
  std::vector<std::array<char, abi::kNvmlUuidBuffer>> uuids;
  bool same_uuid(std::size_t index, const std::string& uuid) const {
    return index < uuids.size() && uuids[index][0] != '\0' && uuid == uuids[index].data();
  }
};
Enumerated enumerated;

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

// MIG mode and, when it is on, the MIG devices; the same return as read_model.
std::string read_mig(const NvmlApi& api, nvmlDevice_t dev, GpuInfo& gpu) {
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
          mig.memory_total_bytes = mm.total;
        }
        if (!mig.uuid.empty()) gpu.migs.push_back(std::move(mig));
      }
    }
  }
  return {};
}

// Reads a GPU's name, compute capability, MIG mode and MIG devices: what the CUDA_VISIBLE_DEVICES
// model needs beyond the UUID. Returns why the library cannot be trusted (an absurd MIG slot
// count), or an empty string.
std::string read_model(const NvmlApi& api, nvmlDevice_t dev, GpuInfo& gpu) {
  char buf[abi::kNvmlNameBuffer] = {};
  if (api.nvmlDeviceGetName)
    gpu.name = read_string(api.nvmlDeviceGetName(dev, buf, sizeof buf), buf);
  int major = -1, minor = -1;
  if (api.nvmlDeviceGetCudaComputeCapability &&
      api.nvmlDeviceGetCudaComputeCapability(dev, &major, &minor) == NVML_SUCCESS) {
    gpu.cc_major = major;
    gpu.cc_minor = minor;
  }
  return read_mig(api, dev, gpu);
}

void read_pci(const NvmlApi& api, nvmlDevice_t dev, GpuInfo& gpu) {
  if (api.nvmlDeviceGetPciInfo_v3) {
    nvmlPciInfo_t pci{};
    if (api.nvmlDeviceGetPciInfo_v3(dev, &pci) == NVML_SUCCESS) {
      gpu.pci_bus_id.assign(pci.busId, strnlen(pci.busId, sizeof pci.busId));
    }
  }
}

// The rest of GpuInfo's description: PCI bus id, memory, CPU and NUMA affinity, the PCIe link.
void read_rest(const NvmlApi& api, nvmlDevice_t dev, GpuInfo& gpu) {
  read_pci(api, dev, gpu);
  nvmlMemory_v2_t mem2{};
  mem2.version = abi::kNvmlMemoryV2Version;
  nvmlMemory_t mem1{};
  if (api.nvmlDeviceGetMemoryInfo_v2 &&
      api.nvmlDeviceGetMemoryInfo_v2(dev, &mem2) == NVML_SUCCESS) {
    gpu.memory_total_bytes = mem2.total;
  } else if (api.nvmlDeviceGetMemoryInfo &&
             api.nvmlDeviceGetMemoryInfo(dev, &mem1) == NVML_SUCCESS) {
    gpu.memory_total_bytes = mem1.total;
  }
  constexpr unsigned kWords = 16;  // 1024 CPUs or NUMA nodes
  unsigned long mask[kWords] = {};
  constexpr unsigned kBits = sizeof(unsigned long) * 8;
  // The set bits of `mask`, lowest first, word by word (an empty word costs one test).
  auto each_bit = [&](auto fn) {
    for (unsigned w = 0; w < kWords; ++w) {
      for (unsigned long bits = mask[w]; bits != 0; bits &= bits - 1) {
        if (!fn(static_cast<int>(w * kBits + static_cast<unsigned>(std::countr_zero(bits))))) {
          return;
        }
      }
    }
  };
  if (api.nvmlDeviceGetCpuAffinity &&
      api.nvmlDeviceGetCpuAffinity(dev, kWords, mask) == NVML_SUCCESS) {
    each_bit([&](int cpu) {
      gpu.cpus.push_back(cpu);
      return true;
    });
  }
  std::memset(mask, 0, sizeof mask);
  if (api.nvmlDeviceGetMemoryAffinity &&
      api.nvmlDeviceGetMemoryAffinity(dev, kWords, mask, 0) == NVML_SUCCESS) {
    each_bit([&](int node) {
      gpu.numa_node = node;
      return false;  // the first node
    });
  }
  auto link = [&](auto fn, unsigned& field) {
    unsigned v = 0;
    if (fn != nullptr && fn(dev, &v) == NVML_SUCCESS) field = v;
  };
  link(api.nvmlDeviceGetCurrPcieLinkGeneration, gpu.pcie_generation);
  link(api.nvmlDeviceGetCurrPcieLinkWidth, gpu.pcie_width);
  link(api.nvmlDeviceGetMaxPcieLinkGeneration, gpu.pcie_max_generation);
  link(api.nvmlDeviceGetMaxPcieLinkWidth, gpu.pcie_max_width);
}

// The fields of gpu_fields.def's GPUSEL_GPU_READING rows read `when`, each by its one NVML call.
void read_readings(const NvmlApi& api, nvmlDevice_t dev, FieldRead when, GpuInfo& gpu) {
#define GPUSEL_GPU_FIELD(name, kind, read, header, width, give_way, cut)
#define GPUSEL_GPU_READING(name, kind, read, header, width, give_way, cut, symbol) \
  if (FieldRead::read == when && api.symbol) {                                     \
    unsigned value = 0;                                                            \
    if (api.symbol(dev, &value) == NVML_SUCCESS)                                   \
      gpu.readings[static_cast<std::size_t>(GpuReading::name)] = value;            \
  }
#include "gpusel/gpu_fields.def"
#undef GPUSEL_GPU_FIELD
#undef GPUSEL_GPU_READING
}

// What `detail` asks for beyond the UUID; the same return as read_model.
std::string read_detail(const NvmlApi& api, nvmlDevice_t dev, NvmlDetail detail, GpuInfo& gpu) {
  if (detail == NvmlDetail::Uuid) return {};
  std::string broken = read_model(api, dev, gpu);
  if (broken.empty() && detail == NvmlDetail::Full) {
    read_rest(api, dev, gpu);
    read_readings(api, dev, FieldRead::Always, gpu);
  }
  return broken;
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
  read_readings(api, dev, FieldRead::Usage, gpu);
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

// The topology, read as a pick asks for it (TopologySource): what each GPU's NVLinks reach, and
// pair by pair only where a pick needs it. Holds the handles of the enumeration; each call takes
// the NVML lock and answers "unknown" once this process's session is closed (at exit, or in a
// forked child).
class NvmlTopology final : public TopologySource {
 public:
  NvmlTopology(const NvmlApi& api, std::vector<nvmlDevice_t> handles,
               const std::vector<GpuInfo>& gpus)
      : api_(api), handles_(std::move(handles)), pid_(detail::current_pid()) {
    for (std::size_t i = 0; i < gpus.size(); ++i) {
      if (!gpus[i].pci_bus_id.empty()) by_bus_.emplace(upper(gpus[i].pci_bus_id), i);
    }
  }

  NvlinkEnd nvlink_end(std::size_t gpu, unsigned link) override {
    std::lock_guard<std::mutex> lock(nvml_mutex);
    const std::uint64_t key = static_cast<std::uint64_t>(gpu) << 32 | link;
    if (auto it = ends_.find(key); it != ends_.end()) return it->second;
    NvlinkEnd end = read_end(gpu, link);
    if (device(gpu) != nullptr) ends_.emplace(key, end);  // a closed session's answer is not kept
    return end;
  }

  std::optional<bool> nvlink(std::size_t a, std::size_t b) override {
    std::lock_guard<std::mutex> lock(nvml_mutex);
    const std::uint64_t key = pair(a, b);
    if (auto it = nvlinks_.find(key); it != nvlinks_.end()) return it->second;
    const nvmlDevice_t da = device(a), db = device(b);
    int status = -1;
    if (da == nullptr || db == nullptr || api_.nvmlDeviceGetP2PStatus == nullptr ||
        api_.nvmlDeviceGetP2PStatus(da, db, abi::kNvmlP2PCapsIndexNvlink, &status) !=
            NVML_SUCCESS) {
      return std::nullopt;
    }
    return nvlinks_[key] = status == abi::kNvmlP2PStatusOk;
  }

  int ancestor(std::size_t a, std::size_t b) override {
    std::lock_guard<std::mutex> lock(nvml_mutex);
    const std::uint64_t key = pair(a, b);
    if (auto it = ancestors_.find(key); it != ancestors_.end()) return it->second;
    const nvmlDevice_t da = device(a), db = device(b);
    int level = -1;
    if (da == nullptr || db == nullptr || api_.nvmlDeviceGetTopologyCommonAncestor == nullptr ||
        api_.nvmlDeviceGetTopologyCommonAncestor(da, db, &level) != NVML_SUCCESS) {
      return -1;
    }
    return ancestors_[key] = level;
  }

 private:
  // Called with nvml_mutex held.
  NvlinkEnd read_end(std::size_t gpu, unsigned link) {
    NvlinkEnd end;
    const nvmlDevice_t dev = device(gpu);
    if (dev == nullptr || api_.nvmlDeviceGetNvLinkRemotePciInfo_v2 == nullptr) return end;
    if (api_.nvmlDeviceGetNvLinkState != nullptr) {
      int active = 0;
      const nvmlReturn_t rc = api_.nvmlDeviceGetNvLinkState(dev, link, &active);
      if (rc != NVML_SUCCESS) return no_link(rc, link);
      if (active == 0) {
        end.kind = NvlinkEnd::Kind::Down;
        return end;
      }
    }
    nvmlPciInfo_t pci{};
    const nvmlReturn_t rc = api_.nvmlDeviceGetNvLinkRemotePciInfo_v2(dev, link, &pci);
    if (rc != NVML_SUCCESS) return no_link(rc, link);
    const std::string bus = upper(std::string(pci.busId, strnlen(pci.busId, sizeof pci.busId)));
    if (auto it = by_bus_.find(bus); it != by_bus_.end()) {
      end.kind = NvlinkEnd::Kind::Gpu;
      end.gpu = it->second;
    } else {
      end.kind = NvlinkEnd::Kind::Device;
      end.device = bus;
    }
    return end;
  }

  static std::uint64_t pair(std::size_t a, std::size_t b) {
    return static_cast<std::uint64_t>(std::min(a, b)) << 32 | std::max(a, b);
  }
  static std::string upper(std::string s) {
    for (char& c : s) c = (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
    return s;
  }
  // The handle of GPU `i` while this process's session stays open; nullptr otherwise.
  nvmlDevice_t device(std::size_t i) const {
    if (!session.open || session.pid != pid_ || pid_ != detail::current_pid()) return nullptr;
    return i < handles_.size() ? handles_[i] : nullptr;
  }
  static NvlinkEnd no_link(nvmlReturn_t rc, unsigned link) {
    NvlinkEnd end;
    if (rc == NVML_ERROR_NOT_SUPPORTED) {
      end.kind = link == 0 ? NvlinkEnd::Kind::None : NvlinkEnd::Kind::Past;
    } else if (rc == NVML_ERROR_INVALID_ARGUMENT) {
      end.kind = NvlinkEnd::Kind::Past;  // past the GPU's last link
    } else {
      end.kind = NvlinkEnd::Kind::Down;
    }
    return end;
  }

  const NvmlApi& api_;
  std::vector<nvmlDevice_t> handles_;
  std::map<std::string, std::size_t> by_bus_;
  int pid_;
  // Every answer, kept: the topology does not change within a session, and a waiting free:N asks
  // again at each look.
  std::unordered_map<std::uint64_t, NvlinkEnd> ends_;
  std::unordered_map<std::uint64_t, bool> nvlinks_;
  std::unordered_map<std::uint64_t, int> ancestors_;
};

// Everything between a successful init and its shutdown.
void enumerate(const NvmlApi& api, const NvmlQuery& what, NvmlSnapshot& snap) {
  snap.detail = what.detail;
  unsigned count = 0;
  nvmlReturn_t rc = api.nvmlDeviceGetCount_v2(&count);
  if (rc != NVML_SUCCESS) {
    snap.reason = "nvmlDeviceGetCount_v2 failed: " + error_text(api, rc);
    snap.problem = Problem{ErrorCode::DriverCallFailed, "nvmlDeviceGetCount_v2", rc};
    return;
  }
  if (count > kMaxGpus) {
    snap.reason = "nvmlDeviceGetCount_v2 reported " + std::to_string(count) +
                  " GPUs, more than any machine holds (at most " + std::to_string(kMaxGpus) +
                  "); the NVML library is broken";
    snap.problem = Problem{ErrorCode::DriverBroken, "nvmlDeviceGetCount_v2", count};
    return;
  }
  std::vector<nvmlDevice_t> handles(count, nullptr);  // of the GPUs NVML reads
  snap.gpus.reserve(count);  // GpuInfo is large: no moves while the list grows
  // A GPU NVML cannot read (lost, or any per-device error) keeps its index and says why; the
  // others are still enumerated, so an index never drifts onto a neighbouring card.
  for (unsigned i = 0; i < count; ++i) {
    // Filled in place (reserved above): GpuInfo is large, and a move a GPU cost 200 instructions.
    GpuInfo& gpu = snap.gpus.emplace_back();
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
        gpu.problem = Problem{ErrorCode::DriverBroken, call, rc};
        gpu.problem.subject = Subject::Gpu;
        gpu.problem.fields = {{"index", std::to_string(i)}};
        continue;
      }
    }
    if (rc != NVML_SUCCESS) {
      gpu.failure = (rc == NVML_ERROR_GPU_IS_LOST ? std::string("lost: ") : std::string()) + call +
                    " failed: " + error_text(api, rc);
      gpu.problem =
          Problem{rc == NVML_ERROR_GPU_IS_LOST ? ErrorCode::GpuLost : ErrorCode::DriverCallFailed,
                  call, rc};
      gpu.problem.subject = Subject::Gpu;
      gpu.problem.fields = {{"index", std::to_string(i)}};
      continue;
    }
    if (what.topology && what.detail != NvmlDetail::Full) read_pci(api, dev, gpu);
    if (std::string broken = read_detail(api, dev, what.detail, gpu); !broken.empty()) {
      snap.reason = std::move(broken);
      snap.problem = Problem{ErrorCode::DriverBroken, "", 0};
      snap.gpus.clear();
      return;
    }
    if (what.usage) read_usage(api, dev, gpu);
    handles[i] = dev;
  }
  enumerated.pid = detail::current_pid();
  enumerated.uuids.assign(snap.gpus.size(), {});
  for (std::size_t i = 0; i < snap.gpus.size(); ++i) {
    const std::string& uuid = snap.gpus[i].uuid;
    if (uuid.size() < abi::kNvmlUuidBuffer) {
      std::memcpy(enumerated.uuids[i].data(), uuid.c_str(), uuid.size() + 1);
    }
  }
  if (what.topology) snap.links = Topology(std::make_shared<NvmlTopology>(api, handles, snap.gpus));
  enumerated.handles = std::move(handles);
  if (what.detail != NvmlDetail::Full) {
    snap.available = true;
    return;
  }
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
    snap.problem = Problem{lib.code, "", 0};
    return snap;
  }
  std::lock_guard<std::mutex> lock(nvml_mutex);
  const nvmlReturn_t rc = open_session(lib.api);
  if (rc != NVML_SUCCESS) {
    snap.reason = "nvmlInit_v2 failed: " + error_text(lib.api, rc);
    snap.problem = Problem{ErrorCode::DriverCallFailed, "nvmlInit_v2", rc};
    return snap;
  }
  enumerate(lib.api, what, snap);
  return snap;
}

bool nvml_usable() {
  const NvmlLibrary& lib = library();
  if (!lib.usable) return false;
  std::lock_guard<std::mutex> lock(nvml_mutex);
  return open_session(lib.api) == NVML_SUCCESS;
}

GPUSEL_END_NAMESPACE

namespace gpusel::detail {

bool nvml_gpu_index(const std::string& uuid, std::optional<unsigned>& index) {
  index.reset();
  const NvmlLibrary& lib = library();
  if (!lib.usable) return false;
  std::lock_guard<std::mutex> lock(nvml_mutex);  // held while optional functions are looked up
  if (lib.api.nvmlDeviceGetHandleByUUID == nullptr || lib.api.nvmlDeviceGetIndex == nullptr) {
    return false;
  }
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

double nvlink_gbps(unsigned links, unsigned version) {
  if (version == 0) return 0;
  const double per_link = version == 1 ? 20.0 : (version >= 5 ? 50.0 : 25.0);
  return per_link * links;
}

namespace {

// The NVLink generation of nvmlDeviceGetNvLinkVersion's answer, an nvmlNvlinkVersion_t (1: 1.0,
// 2: 2.0, 3: 2.2, 4: 3.0, 5: 3.1, 6: 4.0, 7: 5.0; an A100 says 5, an H100 6); 0 when unknown.
unsigned nvlink_generation(unsigned nvml_version) {
  static constexpr unsigned kGeneration[] = {0, 1, 2, 2, 3, 3, 4, 5};
  return nvml_version < std::size(kGeneration) ? kGeneration[nvml_version] : 0;
}

std::string upper_bus(const char* bus, std::size_t size) {
  std::string s(bus, strnlen(bus, size));
  for (char& c : s) c = (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
  return s;
}

// What the NVLinks of `dev` reach, for a copy to the GPU at bus `peer`: active links to it, and
// active links to something that is no GPU of `gpu_buses` (an NVSwitch); the lowest version of
// either kind (0: unknown).
struct LinkCount {
  unsigned direct = 0, fabric = 0, direct_version = 0, fabric_version = 0;
};
LinkCount count_links(const NvmlApi& api, nvmlDevice_t dev, const std::string& peer,
                      const std::set<std::string>& gpu_buses) {
  LinkCount c;
  auto lowest = [](unsigned& into, unsigned v) { into = into == 0 ? v : std::min(into, v); };
  bool version_known = true;
  for (unsigned link = 0; link < 64; ++link) {
    int active = 0;
    const nvmlReturn_t rc = api.nvmlDeviceGetNvLinkState(dev, link, &active);
    if (rc == NVML_ERROR_INVALID_ARGUMENT || rc == NVML_ERROR_NOT_SUPPORTED) break;  // no more
    if (rc != NVML_SUCCESS || active == 0) continue;
    nvmlPciInfo_t pci{};
    if (api.nvmlDeviceGetNvLinkRemotePciInfo_v2(dev, link, &pci) != NVML_SUCCESS) continue;
    const std::string bus = upper_bus(pci.busId, sizeof pci.busId);
    unsigned version = 0;
    if (api.nvmlDeviceGetNvLinkVersion == nullptr ||
        api.nvmlDeviceGetNvLinkVersion(dev, link, &version) != NVML_SUCCESS ||
        nvlink_generation(version) == 0) {
      version_known = false;
    }
    version = nvlink_generation(version);
    if (bus == peer) {
      ++c.direct;
      lowest(c.direct_version, version);
    } else if (gpu_buses.count(bus) == 0) {
      ++c.fabric;
      lowest(c.fabric_version, version);
    }
  }
  if (!version_known) c.direct_version = c.fabric_version = 0;
  return c;
}

}  // namespace

std::optional<NvlinkPath> nvml_nvlink_path(const std::string& a, const std::string& b) {
  const NvmlLibrary& lib = library();
  if (!lib.usable) return std::nullopt;
  const NvmlApi& api = lib.api;
  std::lock_guard<std::mutex> lock(nvml_mutex);
  if (api.nvmlDeviceGetHandleByUUID == nullptr || api.nvmlDeviceGetNvLinkState == nullptr ||
      api.nvmlDeviceGetNvLinkRemotePciInfo_v2 == nullptr || api.nvmlDeviceGetPciInfo_v3 == nullptr)
    return std::nullopt;
  if (open_session(api) != NVML_SUCCESS) return std::nullopt;
  nvmlDevice_t da = nullptr, db = nullptr;
  if (api.nvmlDeviceGetHandleByUUID(a.c_str(), &da) != NVML_SUCCESS ||
      api.nvmlDeviceGetHandleByUUID(b.c_str(), &db) != NVML_SUCCESS)
    return std::nullopt;
  if (api.nvmlDeviceGetP2PStatus != nullptr) {
    int status = -1;
    if (api.nvmlDeviceGetP2PStatus(da, db, abi::kNvmlP2PCapsIndexNvlink, &status) != NVML_SUCCESS ||
        status != abi::kNvmlP2PStatusOk)
      return std::nullopt;
  }
  // Every GPU's bus, to tell a link to a third GPU from one to an NVSwitch.
  std::set<std::string> gpu_buses;
  unsigned count = 0;
  if (api.nvmlDeviceGetCount_v2(&count) != NVML_SUCCESS) return std::nullopt;
  for (unsigned i = 0; i < std::min(count, kMaxGpus); ++i) {
    nvmlDevice_t dev = nullptr;
    nvmlPciInfo_t pci{};
    if (api.nvmlDeviceGetHandleByIndex_v2(i, &dev) == NVML_SUCCESS &&
        api.nvmlDeviceGetPciInfo_v3(dev, &pci) == NVML_SUCCESS)
      gpu_buses.insert(upper_bus(pci.busId, sizeof pci.busId));
  }
  nvmlPciInfo_t pa{}, pb{};
  if (api.nvmlDeviceGetPciInfo_v3(da, &pa) != NVML_SUCCESS ||
      api.nvmlDeviceGetPciInfo_v3(db, &pb) != NVML_SUCCESS)
    return std::nullopt;
  const LinkCount ca = count_links(api, da, upper_bus(pb.busId, sizeof pb.busId), gpu_buses);
  const LinkCount cb = count_links(api, db, upper_bus(pa.busId, sizeof pa.busId), gpu_buses);
  NvlinkPath path;
  if (ca.direct > 0 && cb.direct > 0) {
    path.links = std::min(ca.direct, cb.direct);
    path.version = std::min(ca.direct_version, cb.direct_version);
  } else if (ca.fabric > 0 && cb.fabric > 0) {
    path.links = std::min(ca.fabric, cb.fabric);
    path.version = std::min(ca.fabric_version, cb.fabric_version);
  } else {
    return std::nullopt;
  }
  return path;
}

}  // namespace gpusel::detail

namespace gpusel::detail {

std::optional<Error> nvml_complete(std::vector<GpuInfo>& gpus,
                                   const std::vector<std::size_t>& positions,
                                   detail::NvmlPart part) {
  const NvmlLibrary& lib = library();
  if (!lib.usable) return failure(lib.reason, Problem{lib.code});
  const NvmlApi& api = lib.api;
  std::lock_guard<std::mutex> lock(nvml_mutex);
  const bool was_open = session.open && session.pid == detail::current_pid();
  if (const nvmlReturn_t rc = open_session(api); rc != NVML_SUCCESS) {
    return failure("nvmlInit_v2 failed: " + error_text(api, rc),
                   Problem{ErrorCode::DriverCallFailed, "nvmlInit_v2", rc});
  }
  for (std::size_t p : positions) {
    GpuInfo& gpu = gpus.at(p);
    if (gpu.failed()) continue;
    nvmlDevice_t dev = nullptr;
    nvmlReturn_t rc = NVML_ERROR_NOT_FOUND;
    if (was_open && enumerated.pid == session.pid && gpu.index < enumerated.handles.size() &&
        enumerated.same_uuid(gpu.index, gpu.uuid) && enumerated.handles[gpu.index] != nullptr) {
      dev = enumerated.handles[gpu.index];  // this session's enumeration found it there
      rc = NVML_SUCCESS;
    }
    if (rc != NVML_SUCCESS && api.nvmlDeviceGetHandleByUUID != nullptr) {
      rc = api.nvmlDeviceGetHandleByUUID(gpu.uuid.c_str(), &dev);
    }
    if (rc != NVML_SUCCESS) {
      // An older library: by index, and only if that index still holds the same UUID.
      char buf[abi::kNvmlUuidBuffer] = {};
      const char* call = "nvmlDeviceGetHandleByIndex_v2";
      rc = api.nvmlDeviceGetHandleByIndex_v2(gpu.index, &dev);
      if (rc == NVML_SUCCESS) {
        call = "nvmlDeviceGetUUID";
        rc = api.nvmlDeviceGetUUID(dev, buf, sizeof buf);
      }
      if (rc != NVML_SUCCESS || read_string(rc, buf) != gpu.uuid) {
        Problem moved = rc == NVML_SUCCESS
                            ? Problem{ErrorCode::Unspecified}
                            : Problem{rc == NVML_ERROR_GPU_IS_LOST ? ErrorCode::GpuLost
                                                                   : ErrorCode::DriverCallFailed,
                                      call, rc};
        moved.subject = Subject::Gpu;
        moved.fields = {
            {"gpu", gpu.uuid}, {"index", std::to_string(gpu.index)}, {"reason", "moved"}};
        return failure("GPU " + std::to_string(gpu.index) + " (" + gpu.uuid +
                           ") is no longer where NVML listed it" +
                           (rc != NVML_SUCCESS ? " (" + error_text(api, rc) + ")" : std::string()),
                       std::move(moved));
      }
    }
    if (part == detail::NvmlPart::Mig) {
      // Read aside (the GPU stays as it was if the library is broken), without copying the rest.
      GpuInfo mig_part;
      mig_part.index = gpu.index;
      if (std::string broken = read_mig(api, dev, mig_part); !broken.empty()) {
        return failure(broken, Problem{ErrorCode::DriverBroken});
      }
      gpu.mig_enabled = mig_part.mig_enabled;
      gpu.migs = std::move(mig_part.migs);
      continue;
    }
    GpuInfo fresh;
    fresh.index = gpu.index;
    fresh.uuid = gpu.uuid;
    if (std::string broken = read_detail(api, dev, NvmlDetail::Full, fresh); !broken.empty()) {
      return failure(broken, Problem{ErrorCode::DriverBroken});
    }
    fresh.memory_used = gpu.memory_used;
    fresh.utilization = gpu.utilization;
    fresh.processes = std::move(gpu.processes);
    for (std::size_t r = 0; r < kGpuReadingCount; ++r) {  // the usage readings, as read
      if (gpu_reading_spec(static_cast<GpuReading>(r)).when == FieldRead::Usage)
        fresh.readings[r] = gpu.readings[r];
    }
    gpu = std::move(fresh);
  }
  return {};
}

}  // namespace gpusel::detail
