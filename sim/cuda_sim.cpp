// The simulated libcuda.so.1: the CUDA driver API over a machine file. Enumeration applies
// CUDA_DEVICE_ORDER and CUDA_VISIBLE_DEVICES at cuInit by the driver's rules; memory is real host
// memory (reserved lazily); copies take simulated time from the machine's bandwidth figures.
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <type_traits>

#include "../src/bench/copy_sample.hpp"
#include "../src/driver/cuda_abi.hpp"
#include "gpusel/visible.hpp"
#include "sim_common.hpp"
#include "usage.hpp"

#define CUDA_SIM_API extern "C" __attribute__((visibility("default")))

struct CUctx_st {
  int device = 0;
  int retains = 0;
};
struct CUstream_st {
  int device = 0;
  bool non_blocking = false;
  double ready = 0;  // simulated seconds at which the stream's queued work is done
};
struct CUevent_st {
  bool recorded = false;
  double time = 0;
};

namespace {

using gpusel::sim::SimGpu;
using gpusel::sim::SimMachine;

struct Device {
  int gpu = 0;
  int mig = -1;
  std::string name;
  std::string uuid;         // MIG UUID for a MIG device
  std::string parent_uuid;  // the GPU's
  std::uint64_t memory_total = 0;
  std::uint64_t memory_used = 0;
  int sm_count = 0;
  CUctx_st primary;
  CUstream_st legacy_stream;                          // stream 0
  double h2d_free = 0, d2h_free = 0, local_free = 0;  // when each link is next idle
};

struct Allocation {
  std::size_t size = 0;
  int device = 0;
};

enum class Link { H2D, D2H, Local };

struct State {
  gpusel::sim::LoadedMachine loaded;
  std::mutex mutex;  // guards everything below that changes after cuInit
  // Set once, under the mutex, after init_result, devices and loaded are final: a thread that
  // reads true (acquire) may read those without the mutex, as they never change again.
  std::atomic<bool> initialised{false};
  CUresult init_result = CUDA_ERROR_NOT_INITIALIZED;
  std::vector<Device> devices;  // the vector and each device's identity; retains, memory_used
                                // and the streams' times change under the mutex
  std::map<CUdeviceptr, Allocation> allocations;  // device memory, by base address
  std::map<const void*, std::size_t> pinned;      // cuMemHostAlloc'd memory, by base address
  std::map<const void*, std::size_t> registered;  // cuMemHostRegister'd memory (the caller's)
  std::set<CUstream> streams;
  std::set<CUevent> events;
};

thread_local CUcontext current_context = nullptr;

void anchor() {}

State& state() {
  static State* s = new State;  // never destroyed: other libraries' destructors may still call in
  return *s;
}

const SimGpu& gpu_of(const State& s, const Device& d) {
  return s.loaded.machine.gpus[static_cast<std::size_t>(d.gpu)];
}

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::nullopt : std::optional<std::string>(v);
}

CUresult initialise(State& s) {
  s.loaded =
      gpusel::sim::load_from_environment(reinterpret_cast<const void*>(&anchor), "libcuda.so.1");
  if (!s.loaded.ok) return CUDA_ERROR_NO_DEVICE;
  const SimMachine& m = s.loaded.machine;
  if (m.faults.cuda == "missing") return CUDA_ERROR_STUB_LIBRARY;
  if (m.faults.cuda == "init_fails") return CUDA_ERROR_UNKNOWN;
  // The physical GPUs the driver can reach (a lost GPU is gone from its view).
  std::vector<gpusel::GpuInfo> gpus;
  std::vector<int> machine_index;
  for (std::size_t i = 0; i < m.gpus.size(); ++i) {
    const SimGpu& g = m.gpus[i];
    if (g.lost) continue;
    gpusel::GpuInfo info;
    info.index = static_cast<unsigned>(gpus.size());
    info.uuid = g.uuid;
    info.name = g.name;
    info.pci_bus_id = g.pci_bus_id;
    info.cc_major = g.cc_major;
    info.cc_minor = g.cc_minor;
    info.mig_enabled = g.mig_enabled;
    for (const auto& mig : g.migs)
      info.migs.push_back(
          {mig.uuid, mig.gpu_instance, mig.compute_instance, mig.name, mig.memory_total});
    gpus.push_back(std::move(info));
    machine_index.push_back(static_cast<int>(i));
  }
  gpusel::CudaEnv cuda_env{env("CUDA_VISIBLE_DEVICES"), env("CUDA_DEVICE_ORDER")};
  std::vector<int> order(gpus.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  if (!gpusel::pci_bus_order(cuda_env)) {
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return m.gpus[static_cast<std::size_t>(machine_index[static_cast<std::size_t>(a)])].speed >
             m.gpus[static_cast<std::size_t>(machine_index[static_cast<std::size_t>(b)])].speed;
    });
  }
  const auto rule = m.mig_rule == "legacy" ? gpusel::MigRule::Legacy : gpusel::MigRule::R570;
  gpusel::VisibleSet vs = gpusel::model_visible(gpus, cuda_env, &order, rule);
  for (const gpusel::VisibleDevice& v : vs.devices) {
    Device d;
    d.gpu = machine_index[static_cast<std::size_t>(v.gpu)];
    d.mig = v.mig;
    const SimGpu& g = m.gpus[static_cast<std::size_t>(d.gpu)];
    d.parent_uuid = g.uuid;
    if (v.mig < 0) {
      d.name = g.name;
      d.uuid = g.uuid;
      d.memory_total = g.memory_total;
      d.sm_count = g.sm_count;
    } else {
      const auto& mig = g.migs[static_cast<std::size_t>(v.mig)];
      d.name = mig.name;
      d.uuid = mig.uuid;
      d.memory_total = mig.memory_total;
      d.sm_count = mig.sm_count;
    }
    s.devices.push_back(d);
  }
  for (std::size_t i = 0; i < s.devices.size(); ++i) {
    s.devices[i].primary.device = static_cast<int>(i);
    s.devices[i].legacy_stream.device = static_cast<int>(i);
  }
  return s.devices.empty() ? CUDA_ERROR_NO_DEVICE : CUDA_SUCCESS;
}

// Guard for every call after cuInit: returns CUDA_SUCCESS when the driver is usable.
CUresult ready() {
  State& s = state();
  if (!s.initialised.load(std::memory_order_acquire)) return CUDA_ERROR_NOT_INITIALIZED;
  return s.init_result;
}

Device* device(CUdevice d) {
  State& s = state();
  if (d < 0 || static_cast<std::size_t>(d) >= s.devices.size()) return nullptr;
  return &s.devices[static_cast<std::size_t>(d)];
}

// The device of the calling thread's current context. Call with the mutex held (it reads retains).
Device* current_device() {
  if (current_context == nullptr) return nullptr;
  Device* d = device(current_context->device);
  return (d != nullptr && d->primary.retains > 0) ? d : nullptr;
}

bool parse_uuid(const std::string& text, CUuuid* out) {
  // skip "GPU-" / "MIG-", then 32 hex digits with dashes
  int n = 0;
  unsigned char byte = 0;
  for (std::size_t i = 4; i < text.size(); ++i) {
    char c = text[i];
    if (c == '-') continue;
    int v = (c >= '0' && c <= '9')   ? c - '0'
            : (c >= 'a' && c <= 'f') ? c - 'a' + 10
            : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                     : -1;
    if (v < 0 || n >= 32) return false;
    byte = static_cast<unsigned char>((byte << 4) | v);
    if (n % 2 == 1) out->bytes[n / 2] = static_cast<char>(byte);
    ++n;
  }
  return n == 32;
}

// The allocation holding [ptr, ptr + size), or nullptr.
const Allocation* find_allocation(CUdeviceptr ptr, std::size_t size) {
  State& s = state();
  auto it = s.allocations.upper_bound(ptr);
  if (it == s.allocations.begin()) return nullptr;
  --it;
  if (ptr - it->first > it->second.size || size > it->second.size - (ptr - it->first))
    return nullptr;
  return &it->second;
}

CUstream_st* stream_of(CUstream stream, Device& d) {
  return stream == nullptr ? &d.legacy_stream : stream;
}

bool valid_stream(CUstream stream) {
  return stream == nullptr || state().streams.count(stream) > 0;
}

// Queues B bytes on a link of device d behind whatever the stream and the link already hold.
// The legacy stream also waits for, and holds back, every blocking stream of its device.
void account(Device& d, CUstream stream, Link link, std::size_t bytes) {
  State& s = state();
  const SimGpu& g = gpu_of(s, d);
  double seconds = 0;
  double* link_free = nullptr;
  switch (link) {
    case Link::H2D:
      seconds = static_cast<double>(bytes) / (g.pcie_h2d_gbps * 1e9);
      link_free = &d.h2d_free;
      break;
    case Link::D2H:
      seconds = static_cast<double>(bytes) / (g.pcie_d2h_gbps * 1e9);
      link_free = &d.d2h_free;
      break;
    case Link::Local:  // a device-local copy reads and writes every byte
      seconds = 2.0 * static_cast<double>(bytes) / (g.memory_bandwidth_gbps * 1e9);
      link_free = &d.local_free;
      break;
  }
  const int dev_index = static_cast<int>(&d - s.devices.data());
  CUstream_st* st = stream_of(stream, d);
  double start = std::max(st->ready, *link_free);
  if (stream == nullptr) {
    for (CUstream other : s.streams) {
      if (other->device == dev_index && !other->non_blocking) start = std::max(start, other->ready);
    }
  } else if (!st->non_blocking) {
    start = std::max(start, d.legacy_stream.ready);
  }
  const double end = start + seconds;
  st->ready = end;
  *link_free = end;
  if (stream == nullptr) {
    for (CUstream other : s.streams) {
      if (other->device == dev_index && !other->non_blocking)
        other->ready = std::max(other->ready, end);
    }
  }
}

bool within(const std::map<const void*, std::size_t>& ranges, const void* host, std::size_t size) {
  auto it = ranges.upper_bound(host);
  if (it == ranges.begin()) return false;
  --it;
  auto base = static_cast<const char*>(it->first);
  auto p = static_cast<const char*>(host);
  return p >= base && p + size <= base + it->second;
}

bool is_pinned(const void* host, std::size_t size) {
  return within(state().pinned, host, size) || within(state().registered, host, size);
}

CUresult copy(CUdeviceptr dst_dev, void* dst_host, CUdeviceptr src_dev, const void* src_host,
              std::size_t bytes, CUstream stream) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Device* d = current_device();
  if (d == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (!valid_stream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  if (bytes == 0) return CUDA_SUCCESS;
  if (dst_dev != 0 && find_allocation(dst_dev, bytes) == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (src_dev != 0 && find_allocation(src_dev, bytes) == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if ((dst_dev == 0 && dst_host == nullptr) || (src_dev == 0 && src_host == nullptr))
    return CUDA_ERROR_INVALID_VALUE;
  void* to = dst_dev != 0 ? reinterpret_cast<void*>(dst_dev) : dst_host;
  const void* from = src_dev != 0 ? reinterpret_cast<const void*>(src_dev) : src_host;
  // GPUSEL_SIM_SAMPLED_COPIES=1 (gpusel bench bw's workers): large copies move only the bytes of
  // src/bench/copy_sample.hpp, so that their real cost does not grow with their simulated size.
  static const bool sampled_mode = [] {
    const char* v = std::getenv("GPUSEL_SIM_SAMPLED_COPIES");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  const auto* from_bytes = static_cast<const unsigned char*>(from);
  const auto to_at = reinterpret_cast<std::uintptr_t>(to);
  const auto from_at = reinterpret_cast<std::uintptr_t>(from);
  const bool apart = to_at + bytes <= from_at || from_at + bytes <= to_at;
  const bool sampled = sampled_mode && apart && gpusel::copy_is_sampled(bytes);
  if (sampled) {
    gpusel::for_each_sampled_range(bytes, [&](std::uint64_t at, std::uint64_t n) {
      std::memcpy(static_cast<unsigned char*>(to) + at, from_bytes + at, n);
    });
  } else {
    std::memmove(to, from, bytes);
  }
  Link link = dst_dev != 0 && src_dev != 0 ? Link::Local : (dst_dev != 0 ? Link::H2D : Link::D2H);
  if (link == Link::D2H && s.loaded.machine.faults.corrupt_copies) {
    // A broken copy path; in sampled mode the flipped byte is one that was moved.
    static_cast<unsigned char*>(to)[sampled ? gpusel::sampled_middle(bytes) : bytes / 2] ^= 0x5a;
  }
  // Pageable host memory goes through a staging buffer: half the pinned rate in this model.
  const void* host = link == Link::H2D ? src_host : dst_host;
  std::size_t charged = bytes;
  if (link != Link::Local && !is_pinned(host, bytes)) charged = bytes * 2;
  account(*d, stream, link, charged);
  return CUDA_SUCCESS;
}

const char* error_name(CUresult rc) {
  switch (rc) {
    case CUDA_SUCCESS:
      return "CUDA_SUCCESS";
    case CUDA_ERROR_INVALID_VALUE:
      return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_OUT_OF_MEMORY:
      return "CUDA_ERROR_OUT_OF_MEMORY";
    case CUDA_ERROR_NOT_INITIALIZED:
      return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_DEINITIALIZED:
      return "CUDA_ERROR_DEINITIALIZED";
    case CUDA_ERROR_STUB_LIBRARY:
      return "CUDA_ERROR_STUB_LIBRARY";
    case CUDA_ERROR_NO_DEVICE:
      return "CUDA_ERROR_NO_DEVICE";
    case CUDA_ERROR_INVALID_DEVICE:
      return "CUDA_ERROR_INVALID_DEVICE";
    case CUDA_ERROR_INVALID_IMAGE:
      return "CUDA_ERROR_INVALID_IMAGE";
    case CUDA_ERROR_INVALID_CONTEXT:
      return "CUDA_ERROR_INVALID_CONTEXT";
    case CUDA_ERROR_INVALID_HANDLE:
      return "CUDA_ERROR_INVALID_HANDLE";
    case CUDA_ERROR_NOT_FOUND:
      return "CUDA_ERROR_NOT_FOUND";
    case CUDA_ERROR_NOT_READY:
      return "CUDA_ERROR_NOT_READY";
    case CUDA_ERROR_NOT_SUPPORTED:
      return "CUDA_ERROR_NOT_SUPPORTED";
    case CUDA_ERROR_UNKNOWN:
      return "CUDA_ERROR_UNKNOWN";
    default:
      return nullptr;
  }
}

const char* error_text(CUresult rc) {
  switch (rc) {
    case CUDA_SUCCESS:
      return "no error";
    case CUDA_ERROR_INVALID_VALUE:
      return "invalid argument";
    case CUDA_ERROR_OUT_OF_MEMORY:
      return "out of memory";
    case CUDA_ERROR_NOT_INITIALIZED:
      return "initialization error";
    case CUDA_ERROR_DEINITIALIZED:
      return "driver shutting down";
    case CUDA_ERROR_STUB_LIBRARY:
      return "CUDA driver is a stub library";
    case CUDA_ERROR_NO_DEVICE:
      return "no CUDA-capable device is detected";
    case CUDA_ERROR_INVALID_DEVICE:
      return "invalid device ordinal";
    case CUDA_ERROR_INVALID_IMAGE:
      return "device kernel image is invalid";
    case CUDA_ERROR_INVALID_CONTEXT:
      return "invalid device context";
    case CUDA_ERROR_INVALID_HANDLE:
      return "invalid resource handle";
    case CUDA_ERROR_NOT_FOUND:
      return "named symbol not found";
    case CUDA_ERROR_NOT_READY:
      return "device not ready";
    case CUDA_ERROR_NOT_SUPPORTED:
      return "operation not supported";
    case CUDA_ERROR_UNKNOWN:
      return "unknown error";
    default:
      return nullptr;
  }
}

}  // namespace

CUDA_SIM_API CUresult cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.initialised.load(std::memory_order_relaxed)) {
    s.init_result = initialise(s);
    s.initialised.store(true, std::memory_order_release);
  }
  return s.init_result;
}

CUDA_SIM_API CUresult cuDriverGetVersion(int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.initialised.load(std::memory_order_relaxed) && !s.loaded.ok) {
    s.loaded =
        gpusel::sim::load_from_environment(reinterpret_cast<const void*>(&anchor), "libcuda.so.1");
  }
  *version = s.loaded.ok ? s.loaded.machine.cuda_driver_version : 0;
  return CUDA_SUCCESS;
}

CUDA_SIM_API CUresult cuGetErrorString(CUresult rc, const char** text) {
  if (text == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *text = error_text(rc);
  return *text == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUDA_SIM_API CUresult cuGetErrorName(CUresult rc, const char** text) {
  if (text == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *text = error_name(rc);
  return *text == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUDA_SIM_API CUresult cuDeviceGetCount(int* count) {
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  *count = static_cast<int>(state().devices.size());
  return CUDA_SUCCESS;
}

CUDA_SIM_API CUresult cuDeviceGet(CUdevice* dev, int ordinal) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (dev == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (device(ordinal) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  *dev = ordinal;
  return CUDA_SUCCESS;
}

CUDA_SIM_API CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  Device* d = device(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  const std::size_t n = std::min(d->name.size(), static_cast<std::size_t>(len - 1));
  std::memcpy(name, d->name.data(), n);
  name[n] = '\0';
  return CUDA_SUCCESS;
}

// Before CUDA 13, v1 gave the parent GPU's UUID for a MIG device; v2 gives the MIG device's own.
CUDA_SIM_API CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  Device* d = device(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return parse_uuid(d->parent_uuid, uuid) ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN;
}

CUDA_SIM_API CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  Device* d = device(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return parse_uuid(d->uuid, uuid) ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN;
}

CUDA_SIM_API CUresult cuDeviceTotalMem_v2(std::size_t* bytes, CUdevice dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  Device* d = device(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *bytes = d->memory_total;
  return CUDA_SUCCESS;
}

CUDA_SIM_API CUresult cuDeviceGetAttribute(int* value, int attribute, CUdevice dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  Device* d = device(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const SimGpu& g = gpu_of(state(), *d);
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:
      *value = 1980000;
      break;  // kHz
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      *value = d->sm_count;
      break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
      *value = static_cast<int>(g.pci_bus);
      break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
      *value = static_cast<int>(g.pci_device);
      break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
      *value = static_cast<int>(g.pci_domain);
      break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE:
      *value = 2619000;
      break;  // kHz
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH:
      *value = 5120;
      break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
      *value = static_cast<int>(g.l2_cache_bytes);
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      *value = g.cc_major;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      *value = g.cc_minor;
      break;
    case CU_DEVICE_ATTRIBUTE_NUMA_ID:
      *value = -1;
      break;  // device memory is not a NUMA node here
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID:
      *value = g.numa_node;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUDA_SIM_API CUresult cuDeviceGetPCIBusId(char* bus, int len, CUdevice dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  Device* d = device(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (bus == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  const SimGpu& g = gpu_of(state(), *d);
  std::snprintf(bus, static_cast<std::size_t>(len), "%04X:%02X:%02X.%X", g.pci_domain, g.pci_bus,
                g.pci_device, g.pci_function);
  return CUDA_SUCCESS;
}

CUDA_SIM_API CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Device* d = device(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (ctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  ++d->primary.retains;
  *ctx = &d->primary;
  // NVML's process list shows this process on the GPU from now until it exits.
  gpusel::sim::note_usage(s.loaded.machine, d->parent_uuid, d->memory_used);
  return CUDA_SUCCESS;
}

CUDA_SIM_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Device* d = device(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (d->primary.retains == 0) return CUDA_ERROR_INVALID_CONTEXT;
  --d->primary.retains;
  return CUDA_SUCCESS;
}

CUDA_SIM_API CUresult cuCtxSetCurrent(CUcontext ctx) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (ctx != nullptr) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);  // retains changes under it
    bool known = false;
    for (Device& d : s.devices) known = known || &d.primary == ctx;
    if (!known || ctx->retains == 0) return CUDA_ERROR_INVALID_CONTEXT;
  }
  current_context = ctx;
  return CUDA_SUCCESS;
}

CUDA_SIM_API CUresult cuCtxGetCurrent(CUcontext* ctx) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (ctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *ctx = current_context;
  return CUDA_SUCCESS;
}

CUDA_SIM_API CUresult cuCtxSynchronize(void) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  std::lock_guard<std::mutex> lock(state().mutex);
  return current_device() == nullptr ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
}

CUDA_SIM_API CUresult cuMemAlloc_v2(CUdeviceptr* ptr, std::size_t bytes) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Device* d = current_device();
  if (d == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (ptr == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (bytes > d->memory_total - d->memory_used) return CUDA_ERROR_OUT_OF_MEMORY;
  // Reserved, not committed: pages cost host memory only once a copy touches them.
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  *ptr = reinterpret_cast<CUdeviceptr>(p);
  s.allocations[*ptr] = Allocation{bytes, current_context->device};
  d->memory_used += bytes;
  gpusel::sim::note_usage(s.loaded.machine, d->parent_uuid, d->memory_used);
  return CUDA_SUCCESS;
}

CUDA_SIM_API CUresult cuMemFree_v2(CUdeviceptr ptr) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.allocations.find(ptr);
  if (it == s.allocations.end()) return CUDA_ERROR_INVALID_VALUE;
  munmap(reinterpret_cast<void*>(ptr), it->second.size);
  Device& owner = s.devices[static_cast<std::size_t>(it->second.device)];
  owner.memory_used -= it->second.size;
  gpusel::sim::note_usage(s.loaded.machine, owner.parent_uuid, owner.memory_used);
  s.allocations.erase(it);
  return CUDA_SUCCESS;
}

CUDA_SIM_API CUresult cuMemHostAlloc(void** ptr, std::size_t bytes, unsigned int) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (ptr == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (current_device() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  s.pinned[p] = bytes;
  *ptr = p;
  return CUDA_SUCCESS;
}

CUDA_SIM_API CUresult cuMemAllocHost_v2(void** ptr, std::size_t bytes) {
  return cuMemHostAlloc(ptr, bytes, 0);
}

CUDA_SIM_API CUresult cuMemFreeHost(void* ptr) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.pinned.find(ptr);
  if (it == s.pinned.end()) return CUDA_ERROR_INVALID_VALUE;
  munmap(ptr, it->second);
  s.pinned.erase(it);
  return CUDA_SUCCESS;
}

// Registered memory counts as pinned but stays the caller's to free.
CUDA_SIM_API CUresult cuMemHostRegister_v2(void* ptr, std::size_t bytes, unsigned int) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (ptr == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (current_device() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (s.registered.count(ptr) != 0 || within(s.pinned, ptr, bytes)) return CUDA_ERROR_INVALID_VALUE;
  s.registered[ptr] = bytes;
  return CUDA_SUCCESS;
}

CUDA_SIM_API CUresult cuMemHostUnregister(void* ptr) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.registered.erase(ptr) == 0) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUDA_SIM_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, std::size_t bytes) {
  return copy(dst, nullptr, 0, src, bytes, nullptr);
}
CUDA_SIM_API CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, std::size_t bytes) {
  return copy(0, dst, src, nullptr, bytes, nullptr);
}
CUDA_SIM_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, std::size_t bytes,
                                           CUstream stream) {
  return copy(dst, nullptr, 0, src, bytes, stream);
}
CUDA_SIM_API CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, std::size_t bytes,
                                           CUstream stream) {
  return copy(0, dst, src, nullptr, bytes, stream);
}
CUDA_SIM_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes,
                                           CUstream stream) {
  return copy(dst, nullptr, src, nullptr, bytes, stream);
}

CUDA_SIM_API CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int value, std::size_t count,
                                       CUstream stream) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Device* d = current_device();
  if (d == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (!valid_stream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  if (dst % 4 != 0 || count > SIZE_MAX / 4 || find_allocation(dst, count * 4) == nullptr)
    return CUDA_ERROR_INVALID_VALUE;
  auto* p = reinterpret_cast<unsigned int*>(dst);
  std::fill(p, p + count, value);
  // A memset writes every byte once: half the traffic of a copy of the same size.
  account(*d, stream, Link::Local, count * 2);
  return CUDA_SUCCESS;
}

CUDA_SIM_API CUresult cuStreamCreate(CUstream* stream, unsigned int flags) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (current_device() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (stream == nullptr || flags > CU_STREAM_NON_BLOCKING) return CUDA_ERROR_INVALID_VALUE;
  auto* st = new CUstream_st;
  st->device = current_context->device;
  st->non_blocking = flags == CU_STREAM_NON_BLOCKING;
  st->ready = s.devices[static_cast<std::size_t>(st->device)].legacy_stream.ready;
  s.streams.insert(st);
  *stream = st;
  return CUDA_SUCCESS;
}

CUDA_SIM_API CUresult cuStreamDestroy_v2(CUstream stream) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.streams.erase(stream) == 0) return CUDA_ERROR_INVALID_HANDLE;
  delete stream;
  return CUDA_SUCCESS;
}

CUDA_SIM_API CUresult cuStreamSynchronize(CUstream stream) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!valid_stream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  if (stream == nullptr && current_device() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  return CUDA_SUCCESS;  // work completes as it is queued; only simulated time advances
}

CUDA_SIM_API CUresult cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!valid_stream(stream) || s.events.count(event) == 0) return CUDA_ERROR_INVALID_HANDLE;
  Device* d = current_device();
  if (d == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  CUstream_st* st = stream_of(stream, *d);
  if (event->recorded) st->ready = std::max(st->ready, event->time);
  return CUDA_SUCCESS;
}

CUDA_SIM_API CUresult cuEventCreate(CUevent* event, unsigned int) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (current_device() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (event == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto* e = new CUevent_st;
  s.events.insert(e);
  *event = e;
  return CUDA_SUCCESS;
}

CUDA_SIM_API CUresult cuEventRecord(CUevent event, CUstream stream) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.events.count(event) == 0 || !valid_stream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  Device* d = current_device();
  if (d == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  CUstream_st* st = stream_of(stream, *d);
  double t = st->ready;
  if (stream == nullptr) {
    const int dev_index = static_cast<int>(d - s.devices.data());
    for (CUstream other : s.streams) {
      if (other->device == dev_index && !other->non_blocking) t = std::max(t, other->ready);
    }
  }
  event->time = t;
  event->recorded = true;
  return CUDA_SUCCESS;
}

CUDA_SIM_API CUresult cuEventSynchronize(CUevent event) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.events.count(event) == 0 ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS;
}

CUDA_SIM_API CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (ms == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (s.events.count(start) == 0 || s.events.count(end) == 0) return CUDA_ERROR_INVALID_HANDLE;
  if (!start->recorded || !end->recorded) return CUDA_ERROR_INVALID_HANDLE;
  *ms = static_cast<float>((end->time - start->time) * 1e3);
  return CUDA_SUCCESS;
}
CUDA_SIM_API CUresult cuEventElapsedTime_v2(float* ms, CUevent start, CUevent end) {
  return cuEventElapsedTime(ms, start, end);
}

CUDA_SIM_API CUresult cuEventDestroy_v2(CUevent event) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.events.erase(event) == 0) return CUDA_ERROR_INVALID_HANDLE;
  delete event;
  return CUDA_SUCCESS;
}

// The simulator runs no device code: module loading is reported as unsupported.
CUDA_SIM_API CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (module == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUDA_SIM_API CUresult cuModuleGetFunction(CUfunction* fn, CUmodule, const char*) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  return fn == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_INVALID_HANDLE;
}
CUDA_SIM_API CUresult cuLaunchKernel(CUfunction, unsigned int, unsigned int, unsigned int,
                                     unsigned int, unsigned int, unsigned int, unsigned int,
                                     CUstream, void**, void**) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  return CUDA_ERROR_INVALID_HANDLE;
}

namespace {
struct ProcEntry {
  const char* name;
  void* fn;
};

template <typename F>
void* proc(F* f) {
  return reinterpret_cast<void*>(f);
}

}  // namespace
CUDA_SIM_API CUresult cuGetProcAddress_v2(const char* symbol, void** fn, int version,
                                          unsigned long long flags, int* status);
namespace {

const ProcEntry kProcs[] = {
#define GPUSEL_CUDA(api, symbol, required, params) {#api, proc(&::symbol)},
#include "../src/driver/cuda.def"
#undef GPUSEL_CUDA
};
constexpr int kUuidV2Since = 11040;
}  // namespace

CUDA_SIM_API CUresult cuGetProcAddress_v2(const char* symbol, void** fn, int version,
                                          unsigned long long, int* status) {
  if (symbol == nullptr || fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *fn = nullptr;
  for (const ProcEntry& e : kProcs) {
    if (std::strcmp(e.name, symbol) == 0) *fn = e.fn;
  }
  // Names whose meaning changed with the version asked for: before 11.4 cuDeviceGetUuid was v1.
  if (std::strcmp(symbol, "cuDeviceGetUuid") == 0 && version < kUuidV2Since)
    *fn = proc(&::cuDeviceGetUuid);
  if (std::strcmp(symbol, "cuEventElapsedTime") == 0 && version >= 12080)
    *fn = proc(&::cuEventElapsedTime_v2);
  if (status != nullptr) {
    *status = *fn != nullptr ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  }
  return *fn != nullptr ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

CUDA_SIM_API CUresult cuGetProcAddress(const char* symbol, void** fn, int version,
                                       unsigned long long flags) {
  return cuGetProcAddress_v2(symbol, fn, version, flags, nullptr);
}

// Each exported function of cuda.def has exactly the prototype gpusel's loader expects.
#define GPUSEL_CUDA(api, symbol, required, params) \
  static_assert(std::is_same_v<decltype(&::symbol), CUresult(*) params>, #symbol " prototype");
#include "../src/driver/cuda.def"
#undef GPUSEL_CUDA
