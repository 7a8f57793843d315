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
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "copy_sample.hpp"
#include "cuda_abi.hpp"
#include "cuda_rules.hpp"
#include "gpu_model.hpp"
#include "sim_common.hpp"
#include "trace.hpp"
#include "usage.hpp"

#define CUDA_SIM_API extern "C" __attribute__((visibility("default")))

struct CUctx_st {
  int device = 0;
  int retains = 0;         // a primary context: references; alive while above 0
  bool primary = true;     // false: made by cuCtxCreate
  bool destroyed = false;  // a created context after cuCtxDestroy (kept: other threads may hold it)
  unsigned flags = 0;
  std::set<CUcontext> peers;  // cuCtxEnablePeerAccess
};
struct CUlinkState_st {};
typedef struct CUlinkState_st* CUlinkState;
typedef struct {
  char reserved[64];
} CUipcMemHandle;
typedef struct {
  char reserved[64];
} CUipcEventHandle;
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

constexpr CUresult kPeerAccessUnsupported = 217;     // CUDA_ERROR_PEER_ACCESS_UNSUPPORTED
constexpr CUresult kPeerAccessAlreadyEnabled = 704;  // CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
constexpr CUresult kPeerAccessNotEnabled = 705;      // CUDA_ERROR_PEER_ACCESS_NOT_ENABLED

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
  std::set<CUcontext> created;  // contexts of cuCtxCreate, destroyed ones included
};

// The calling thread's context stack: the current context, and below it those pushed over.
thread_local CUcontext current_context = nullptr;
thread_local std::vector<CUcontext> context_stack;

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
  // Enumeration by the simulator's own transcription of the driver's rules (cuda_rules.hpp),
  // never by gpusel's model: tests compare the two.
  std::vector<gpusel::sim::rules::Gpu> gpus;
  for (const SimGpu& g : m.gpus) {
    gpusel::sim::rules::Gpu r;
    r.uuid = g.uuid;
    r.speed = g.speed;
    r.lost = g.lost;
    r.mig_enabled = g.mig_enabled;
    for (const auto& mig : g.migs)
      r.migs.push_back({mig.uuid, mig.gpu_instance, mig.compute_instance});
    gpus.push_back(std::move(r));
  }
  const auto visible = gpusel::sim::rules::enumerate(
      gpus, env("CUDA_VISIBLE_DEVICES"), env("CUDA_DEVICE_ORDER"), m.mig_rule == "legacy");
  for (const gpusel::sim::rules::Device& v : visible) {
    Device d;
    d.gpu = v.gpu;
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
bool alive(CUcontext c) {
  return c->primary ? c->retains > 0 : !c->destroyed;
}

// A context this library gave out and still alive. Call with the mutex held.
bool known_context(CUcontext c) {
  State& s = state();
  if (c == nullptr) return false;
  bool known = s.created.count(c) > 0;
  for (Device& d : s.devices) known = known || &d.primary == c;
  return known && alive(c);
}

Device* current_device() {
  if (current_context == nullptr || !alive(current_context)) return nullptr;
  return device(current_context->device);
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

// cuMemsetD8/D32 (element size 1 or 4), on the legacy stream or `stream`.
CUresult memset_device(CUdeviceptr dst, unsigned int value, std::size_t size, std::size_t count,
                       CUstream stream) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Device* d = current_device();
  if (d == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (!valid_stream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  if (dst % size != 0 || count > SIZE_MAX / size || find_allocation(dst, count * size) == nullptr)
    return CUDA_ERROR_INVALID_VALUE;
  if (size == 4) {
    auto* p = reinterpret_cast<unsigned int*>(dst);
    std::fill(p, p + count, value);
  } else {
    std::memset(reinterpret_cast<void*>(dst), static_cast<int>(value & 0xffu), count);
  }
  // A memset writes every byte once: half the traffic of a copy of the same size.
  account(*d, stream, Link::Local, count * size / 2);
  return CUDA_SUCCESS;
}

// Peer access between two enumerated devices: not to itself, not for MIG devices, else as the
// machine's topology says (NVLink, or PCIe where both boards allow it within one NUMA node).
bool peer_access(const Device& a, const Device& b) {
  if (&a == &b || a.mig >= 0 || b.mig >= 0 || a.gpu == b.gpu) return false;
  const State& s = state();
  return gpusel::sim::peer_access(gpu_of(s, a), gpu_of(s, b));
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
    case kPeerAccessUnsupported:
      return "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED";
    case kPeerAccessAlreadyEnabled:
      return "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED";
    case kPeerAccessNotEnabled:
      return "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED";
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
    case kPeerAccessUnsupported:
      return "peer access is not supported between these two devices";
    case kPeerAccessAlreadyEnabled:
      return "peer access is already enabled";
    case kPeerAccessNotEnabled:
      return "peer access has not been enabled";
    case CUDA_ERROR_UNKNOWN:
      return "unknown error";
    default:
      return nullptr;
  }
}

// Every CUdevice_attribute CUDA 13 defines: the machine file's value, else the default for the
// GPU's model and architecture. nullopt for a number CUDA does not define.
std::optional<int> attribute_value(const State& s, const Device& d, int a) {
  if (a < 1 || a > gpusel::sim::model::kMaxAttribute) return std::nullopt;
  const SimGpu& g = gpu_of(s, d);
  if (auto it = g.cuda_attributes.find(a); it != g.cuda_attributes.end()) return it->second;
  const int cc = 10 * g.cc_major + g.cc_minor;
  const bool datacenter = g.brand == "NVIDIA" || g.brand == "Tesla";
  const bool geforce = g.brand == "GeForce" || g.brand == "Titan";
  const int l2 = static_cast<int>(std::min<std::uint64_t>(g.l2_cache_bytes, INT32_MAX));
  switch (a) {
    case 1:
    case 2:
    case 3:
      return 1024;  // threads per block, block x, y
    case 4:
      return 64;  // block z
    case 5:
      return 2147483647;  // grid x
    case 6:
    case 7:
      return 65535;  // grid y, z
    case 8:
      return 49152;  // shared memory per block
    case 9:
      return 65536;  // constant memory
    case 10:
      return 32;  // warp size
    case 11:
      return 2147483647;  // max pitch
    case 12:
      return 65536;  // registers per block
    case 13:
      return static_cast<int>(g.clock_mhz) * 1000;  // kHz
    case 14:
      return 512;
    case 15:
      return 1;
    case 16:
      return d.sm_count;
    case 17:
      return 0;  // KERNEL_EXEC_TIMEOUT: no display watchdog on these machines
    case 18:
      return 0;  // INTEGRATED
    case 19:
      return 1;  // CAN_MAP_HOST_MEMORY
    case 20:
      return 0;  // COMPUTE_MODE default
    case 21:
    case 22:
      return 131072;
    case 23:
      return 65536;
    case 24:
    case 25:
    case 26:
      return 16384;
    case 27:
    case 28:
      return 32768;
    case 29:
      return 2048;
    case 30:
      return 512;
    case 31:
      return 1;  // CONCURRENT_KERNELS
    case 32:
      return datacenter ? 1 : 0;  // ECC_ENABLED
    case 33:
      return static_cast<int>(g.pci_bus);
    case 34:
      return static_cast<int>(g.pci_device);
    case 35:
      return 0;  // TCC_DRIVER (Windows)
    case 36:
      return static_cast<int>(g.memory_clock_mhz) * 1000;  // kHz
    case 37:
      return static_cast<int>(g.memory_bus_width);
    case 38:
      return l2;
    case 39:
      return (cc == 86 || cc == 87 || cc == 89) ? 1536 : cc == 75 ? 1024 : 2048;
    case 40:
      return datacenter ? 3 : 2;  // ASYNC_ENGINE_COUNT
    case 41:
      return 1;  // UNIFIED_ADDRESSING
    case 42:
      return 32768;
    case 43:
      return 2048;
    case 44:
      return 1;
    case 45:
    case 46:
      return 32768;
    case 47:
    case 48:
      return 8192;
    case 49:
      return 32768;
    case 50:
      return static_cast<int>(g.pci_domain);
    case 51:
      return 32;
    case 52:
    case 53:
      return 32768;
    case 54:
      return 2046;
    case 55:
      return 32768;
    case 56:
      return 131072;
    case 57:
      return 65536;
    case 58:
    case 59:
    case 60:
      return 16384;
    case 61:
      return 32768;
    case 62:
      return 2048;
    case 63:
    case 64:
      return 32768;
    case 65:
      return 2048;
    case 66:
    case 67:
      return 32768;
    case 68:
      return 2046;
    case 69:
      return 268435456;
    case 70:
      return 131072;
    case 71:
      return 65000;
    case 72:
      return 2097120;
    case 73:
    case 74:
      return 32768;
    case 75:
      return g.cc_major;
    case 76:
      return g.cc_minor;
    case 77:
      return 32768;
    case 78:
    case 79:
    case 80:
      return 1;
    case 81:
      return cc >= 90 ? 233472 : cc == 80 ? 167936 : cc >= 86 ? 102400 : cc == 75 ? 65536 : 98304;
    case 82:
      return 65536;
    case 83:
      return 1;  // MANAGED_MEMORY
    case 84:
      return 0;  // MULTI_GPU_BOARD
    case 85:
      return d.gpu;  // MULTI_GPU_BOARD_GROUP_ID
    case 86:
      return 0;  // HOST_NATIVE_ATOMIC_SUPPORTED
    case 87:
      return (cc == 60 || cc == 70 || cc == 80 || cc == 90) ? 2 : cc == 75 ? 32 : 64;
    case 88:
      return 0;  // PAGEABLE_MEMORY_ACCESS (needs HMM)
    case 89:
      return 1;  // CONCURRENT_MANAGED_ACCESS
    case 90:
      return 1;  // COMPUTE_PREEMPTION_SUPPORTED
    case 91:
      return 0;
    case 92:
    case 93:
    case 94:
      return 0;  // the _V1 stream memory operations
    case 95:
    case 96:
      return 1;  // cooperative launches
    case 97:
      return cc >= 90 ? 232448 : cc == 80 ? 166912 : cc >= 86 ? 101376 : cc == 75 ? 65536 : 98304;
    case 98:
      return 0;
    case 99:
      return 1;  // HOST_REGISTER_SUPPORTED
    case 100:
    case 101:
      return 0;
    case 102:
    case 103:
      return 1;  // VMM, POSIX fd handles
    case 104:
    case 105:
      return 0;  // Windows handles
    case 106:
      return (cc == 86 || cc == 87) ? 16 : cc == 89 ? 24 : cc == 75 ? 16 : 32;
    case 107:
      return cc >= 80 ? 1 : 0;  // GENERIC_COMPRESSION_SUPPORTED
    case 108:
      return cc >= 80 ? l2 / 4 * 3 : 0;  // MAX_PERSISTING_L2_CACHE_SIZE
    case 109:
      return cc >= 80 ? 134213632 : 0;  // MAX_ACCESS_POLICY_WINDOW_SIZE
    case 110:
      return geforce ? 0 : 1;  // GPU_DIRECT_RDMA_WITH_CUDA_VMM
    case 111:
      return cc >= 80 ? 1024 : 0;  // RESERVED_SHARED_MEMORY_PER_BLOCK
    case 112:
    case 113:
    case 114:
    case 115:
      return 1;
    case 116:
      return geforce ? 0 : 1;  // GPU_DIRECT_RDMA_SUPPORTED
    case 117:
      return geforce ? 0 : 1;
    case 118:
      return geforce ? 0 : 100;  // writes ordered for the owner
    case 119:
      return 1;  // MEMPOOL handle types: POSIX fd
    case 120:
      return cc >= 90 ? 1 : 0;  // CLUSTER_LAUNCH
    case 121:
    case 122:
    case 123:
    case 124:
      return 1;
    case 125:
      return 0;  // IPC_EVENT_SUPPORTED: the simulator has no IPC
    case 126:
      return cc >= 90 ? 4 : 1;  // MEM_SYNC_DOMAIN_COUNT
    case 127:
      return cc >= 90 ? 1 : 0;  // TENSOR_MAP_ACCESS_SUPPORTED
    case 128:
    case 129:
    case 130:
      return 0;
    case 131:
      return -1;  // NUMA_ID: device memory is not a NUMA node here
    case 132:
    case 133:
      return 0;
    case 134:
      return g.numa_node;
    case 139:
      return static_cast<int>(g.pci_device_id);
    default:
      return 0;  // 135-147 (CIG, decompression, host NUMA memory features): not here
  }
}

}  // namespace

namespace impl {

CUresult cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.initialised.load(std::memory_order_relaxed)) {
    s.init_result = initialise(s);
    s.initialised.store(true, std::memory_order_release);
  }
  return s.init_result;
}

CUresult cuDriverGetVersion(int* version) {
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

CUresult cuGetErrorString(CUresult rc, const char** text) {
  if (text == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *text = error_text(rc);
  return *text == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult rc, const char** text) {
  if (text == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *text = error_name(rc);
  return *text == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int* count) {
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  *count = static_cast<int>(state().devices.size());
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* dev, int ordinal) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (dev == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (device(ordinal) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  *dev = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
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
CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  Device* d = device(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return parse_uuid(d->parent_uuid, uuid) ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN;
}

CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  Device* d = device(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return parse_uuid(d->uuid, uuid) ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN;
}

CUresult cuDeviceTotalMem_v2(std::size_t* bytes, CUdevice dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  Device* d = device(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *bytes = d->memory_total;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int* value, int attribute, CUdevice dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  Device* d = device(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const auto v = attribute_value(state(), *d, attribute);
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  *value = *v;
  return CUDA_SUCCESS;
}

CUresult cuDeviceComputeCapability(int* major, int* minor, CUdevice dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  Device* d = device(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (major == nullptr || minor == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const SimGpu& g = gpu_of(state(), *d);
  *major = g.cc_major;
  *minor = g.cc_minor;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetPCIBusId(char* bus, int len, CUdevice dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  Device* d = device(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (bus == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  const SimGpu& g = gpu_of(state(), *d);
  std::snprintf(bus, static_cast<std::size_t>(len), "%04X:%02X:%02X.%X", g.pci_domain, g.pci_bus,
                g.pci_device, g.pci_function);
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice dev) {
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

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Device* d = device(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (d->primary.retains == 0) return CUDA_ERROR_INVALID_CONTEXT;
  --d->primary.retains;
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (ctx != nullptr) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);  // retains changes under it
    if (!known_context(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  }
  // Replaces the top of the thread's stack; NULL unbinds it (the context below becomes current).
  if (ctx == nullptr && !context_stack.empty()) {
    current_context = context_stack.back();
    context_stack.pop_back();
  } else {
    current_context = ctx;
  }
  return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext* ctx) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (ctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *ctx = current_context;
  return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  std::lock_guard<std::mutex> lock(state().mutex);
  return current_device() == nullptr ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr* ptr, std::size_t bytes) {
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

CUresult cuMemFree_v2(CUdeviceptr ptr) {
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

CUresult cuMemHostAlloc(void** ptr, std::size_t bytes, unsigned int) {
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

CUresult cuMemAllocHost_v2(void** ptr, std::size_t bytes) {
  return cuMemHostAlloc(ptr, bytes, 0);
}

CUresult cuMemFreeHost(void* ptr) {
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
CUresult cuMemHostRegister_v2(void* ptr, std::size_t bytes, unsigned int) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (ptr == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (current_device() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (s.registered.count(ptr) != 0 || within(s.pinned, ptr, bytes)) return CUDA_ERROR_INVALID_VALUE;
  s.registered[ptr] = bytes;
  return CUDA_SUCCESS;
}

CUresult cuMemHostUnregister(void* ptr) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.registered.erase(ptr) == 0) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, std::size_t bytes) {
  return copy(dst, nullptr, 0, src, bytes, nullptr);
}
CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, std::size_t bytes) {
  return copy(0, dst, src, nullptr, bytes, nullptr);
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, std::size_t bytes,
                              CUstream stream) {
  return copy(dst, nullptr, 0, src, bytes, stream);
}
CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, std::size_t bytes, CUstream stream) {
  return copy(0, dst, src, nullptr, bytes, stream);
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes,
                              CUstream stream) {
  return copy(dst, nullptr, src, nullptr, bytes, stream);
}

CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int value, std::size_t count, CUstream stream) {
  return memset_device(dst, value, 4, count, stream);
}

CUresult cuStreamCreate(CUstream* stream, unsigned int flags) {
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

CUresult cuStreamDestroy_v2(CUstream stream) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.streams.erase(stream) == 0) return CUDA_ERROR_INVALID_HANDLE;
  delete stream;
  return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream stream) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!valid_stream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  if (stream == nullptr && current_device() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  return CUDA_SUCCESS;  // work completes as it is queued; only simulated time advances
}

CUresult cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int) {
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

CUresult cuEventCreate(CUevent* event, unsigned int) {
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

CUresult cuEventRecord(CUevent event, CUstream stream) {
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

CUresult cuEventSynchronize(CUevent event) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.events.count(event) == 0 ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS;
}

CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (ms == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (s.events.count(start) == 0 || s.events.count(end) == 0) return CUDA_ERROR_INVALID_HANDLE;
  if (!start->recorded || !end->recorded) return CUDA_ERROR_INVALID_HANDLE;
  *ms = static_cast<float>((end->time - start->time) * 1e3);
  return CUDA_SUCCESS;
}
CUresult cuEventElapsedTime_v2(float* ms, CUevent start, CUevent end) {
  return cuEventElapsedTime(ms, start, end);
}

CUresult cuEventDestroy_v2(CUevent event) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.events.erase(event) == 0) return CUDA_ERROR_INVALID_HANDLE;
  delete event;
  return CUDA_SUCCESS;
}

// The simulator runs no device code: module loading is reported as unsupported.
CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (module == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult cuModuleGetFunction(CUfunction* fn, CUmodule, const char*) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  return fn == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_INVALID_HANDLE;
}
CUresult cuLaunchKernel(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int,
                        unsigned int, unsigned int, unsigned int, CUstream, void**, void**) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  return CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  return cuDevicePrimaryCtxRelease_v2(dev);  // the same but for the CUDA version it came with
}

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Device* d = device(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (flags == nullptr || active == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *flags = d->primary.flags;
  *active = d->primary.retains > 0 ? 1 : 0;
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Device* d = device(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if ((flags & ~0xFFu) != 0 || (flags & 0x7u) > 4) return CUDA_ERROR_INVALID_VALUE;
  d->primary.flags = flags;
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags) {
  return cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}

// Frees every allocation of the device's primary context; the context is inactive until the next
// retain.
CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Device* d = device(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  for (auto it = s.allocations.begin(); it != s.allocations.end();) {
    if (it->second.device == dev) {
      munmap(reinterpret_cast<void*>(it->first), it->second.size);
      d->memory_used -= it->second.size;
      it = s.allocations.erase(it);
    } else {
      ++it;
    }
  }
  d->primary.retains = 0;
  gpusel::sim::note_usage(s.loaded.machine, d->parent_uuid, d->memory_used);
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxReset(CUdevice dev) {
  return cuDevicePrimaryCtxReset_v2(dev);
}

CUresult cuDeviceGetByPCIBusId(CUdevice* dev, const char* bus) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (dev == nullptr || bus == nullptr) return CUDA_ERROR_INVALID_VALUE;
  // [domain:]bus:device.function, hex, any case.
  unsigned dom = 0, b = 0, d = 0, f = 0;
  if (std::sscanf(bus, "%x:%x:%x.%x", &dom, &b, &d, &f) != 4) {
    dom = 0;
    if (std::sscanf(bus, "%x:%x.%x", &b, &d, &f) != 3) return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  for (std::size_t i = 0; i < s.devices.size(); ++i) {
    const SimGpu& g = gpu_of(s, s.devices[i]);
    if (g.pci_domain == dom && g.pci_bus == b && g.pci_device == d && g.pci_function == f) {
      *dev = static_cast<CUdevice>(i);
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_DEVICE;
}

CUresult cuDeviceCanAccessPeer(int* can, CUdevice dev, CUdevice peer) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (can == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Device* a = device(dev);
  Device* b = device(peer);
  if (a == nullptr || b == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  *can = peer_access(*a, *b) ? 1 : 0;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetP2PAttribute(int* value, int attribute, CUdevice src, CUdevice dst) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Device* a = device(src);
  Device* b = device(dst);
  if (a == nullptr || b == nullptr || src == dst) return CUDA_ERROR_INVALID_DEVICE;
  const bool access = peer_access(*a, *b);
  const bool nvlink =
      access && gpusel::sim::nvlink_between(gpu_of(state(), *a), gpu_of(state(), *b));
  switch (attribute) {
    case 1:  // PERFORMANCE_RANK: 0 is the best link (NVLink), 1 PCIe; 0 without access
      *value = access && !nvlink ? 1 : 0;
      break;
    case 2:  // ACCESS_SUPPORTED
    case 4:  // CUDA_ARRAY_ACCESS_SUPPORTED
      *value = access ? 1 : 0;
      break;
    case 3:  // NATIVE_ATOMIC_SUPPORTED: over NVLink only
      *value = nvlink ? 1 : 0;
      break;
    case 5:  // ONLY_PARTIAL_NATIVE_ATOMIC_SUPPORTED
      *value = 0;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult cuCtxCreate_v2(CUcontext* ctx, unsigned int flags, CUdevice dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Device* d = device(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (ctx == nullptr || (flags & ~0xFFu) != 0) return CUDA_ERROR_INVALID_VALUE;
  auto* c = new CUctx_st;  // kept after destruction: a stale handle stays readable
  c->device = dev;
  c->primary = false;
  c->flags = flags;
  s.created.insert(c);
  if (current_context != nullptr) context_stack.push_back(current_context);
  current_context = c;
  *ctx = c;
  gpusel::sim::note_usage(s.loaded.machine, d->parent_uuid, d->memory_used);
  return CUDA_SUCCESS;
}

CUresult cuCtxDestroy_v2(CUcontext ctx) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (ctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (s.created.count(ctx) == 0 || ctx->destroyed) return CUDA_ERROR_INVALID_CONTEXT;
  ctx->destroyed = true;
  std::erase(context_stack, ctx);
  if (current_context == ctx) {
    current_context = context_stack.empty() ? nullptr : context_stack.back();
    if (!context_stack.empty()) context_stack.pop_back();
  }
  return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!known_context(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  if (current_context != nullptr) context_stack.push_back(current_context);
  current_context = ctx;
  return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent_v2(CUcontext* ctx) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (current_context == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (ctx != nullptr) *ctx = current_context;
  current_context = context_stack.empty() ? nullptr : context_stack.back();
  if (!context_stack.empty()) context_stack.pop_back();
  return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice* dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (dev == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(state().mutex);
  if (current_device() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *dev = current_context->device;
  return CUDA_SUCCESS;
}

CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int* version) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(state().mutex);
  if (ctx == nullptr ? current_device() == nullptr : !known_context(ctx))
    return CUDA_ERROR_INVALID_CONTEXT;
  *version = 3020;  // contexts of the _v2 API
  return CUDA_SUCCESS;
}

CUresult cuCtxGetFlags(unsigned int* flags) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (flags == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(state().mutex);
  if (current_device() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *flags = current_context->flags;
  return CUDA_SUCCESS;
}

// Context limits (CUlimit 0-6), one set per process here.
std::size_t limits[7] = {1024, 1048576, 8388608, 2, 2048, 64, 0};

CUresult cuCtxGetLimit(std::size_t* value, int limit) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  std::lock_guard<std::mutex> lock(state().mutex);
  if (current_device() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (value == nullptr || limit < 0 || limit > 6) return CUDA_ERROR_INVALID_VALUE;
  *value = limits[limit];
  return CUDA_SUCCESS;
}

CUresult cuCtxSetLimit(int limit, std::size_t value) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  std::lock_guard<std::mutex> lock(state().mutex);
  if (current_device() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (limit < 0 || limit > 6) return CUDA_ERROR_INVALID_VALUE;
  limits[limit] = value;
  return CUDA_SUCCESS;
}

int cache_config = 0;  // CU_FUNC_CACHE_PREFER_NONE

CUresult cuCtxGetCacheConfig(int* config) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  std::lock_guard<std::mutex> lock(state().mutex);
  if (current_device() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (config == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *config = cache_config;
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCacheConfig(int config) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  std::lock_guard<std::mutex> lock(state().mutex);
  if (current_device() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (config < 0 || config > 3) return CUDA_ERROR_INVALID_VALUE;
  cache_config = config;
  return CUDA_SUCCESS;
}

CUresult cuCtxGetStreamPriorityRange(int* least, int* greatest) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (least != nullptr) *least = 0;
  if (greatest != nullptr) *greatest = -5;
  return CUDA_SUCCESS;
}

CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Device* d = current_device();
  if (d == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (!known_context(peer)) return CUDA_ERROR_INVALID_CONTEXT;
  Device* p = device(peer->device);
  if (p == nullptr || p == d || !peer_access(*d, *p)) return kPeerAccessUnsupported;
  if (!current_context->peers.insert(peer).second) return kPeerAccessAlreadyEnabled;
  return CUDA_SUCCESS;
}

CUresult cuCtxDisablePeerAccess(CUcontext peer) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (current_device() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (!known_context(peer)) return CUDA_ERROR_INVALID_CONTEXT;
  if (current_context->peers.erase(peer) == 0) return kPeerAccessNotEnabled;
  return CUDA_SUCCESS;
}

// Free is what this process has not allocated, less its context's own share.
CUresult cuMemGetInfo_v2(std::size_t* free, std::size_t* total) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  std::lock_guard<std::mutex> lock(state().mutex);
  Device* d = current_device();
  if (d == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (free == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const std::uint64_t used = d->memory_used + gpusel::sim::kContextBytes;
  *total = d->memory_total;
  *free = used >= d->memory_total ? 0 : d->memory_total - used;
  return CUDA_SUCCESS;
}

CUresult cuMemAllocManaged(CUdeviceptr* ptr, std::size_t bytes, unsigned int flags) {
  if (flags != 1 && flags != 2) {  // CU_MEM_ATTACH_GLOBAL, CU_MEM_ATTACH_HOST
    if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
    return CUDA_ERROR_INVALID_VALUE;
  }
  return cuMemAlloc_v2(ptr, bytes);
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, std::size_t* size, CUdeviceptr ptr) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.allocations.upper_bound(ptr);
  if (it == s.allocations.begin()) return CUDA_ERROR_NOT_FOUND;
  --it;
  if (ptr - it->first >= it->second.size) return CUDA_ERROR_NOT_FOUND;
  if (base != nullptr) *base = it->first;
  if (size != nullptr) *size = it->second.size;
  return CUDA_SUCCESS;
}

// Pinned host memory is mapped into the device's address space at the same address (UVA).
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* dev, void* host, unsigned int flags) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (current_device() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (dev == nullptr || host == nullptr || flags != 0 || !is_pinned(host, 1))
    return CUDA_ERROR_INVALID_VALUE;
  *dev = reinterpret_cast<CUdeviceptr>(host);
  return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes) {
  return copy(dst, nullptr, src, nullptr, bytes, nullptr);
}

CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, std::size_t count) {
  return memset_device(dst, value, 1, count, nullptr);
}
CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, std::size_t count, CUstream stream) {
  return memset_device(dst, value, 1, count, stream);
}
CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned int value, std::size_t count) {
  return memset_device(dst, value, 4, count, nullptr);
}

CUresult cuPointerGetAttribute(void* data, int attribute, CUdeviceptr ptr) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const Allocation* a = find_allocation(ptr, 1);
  const bool host = a == nullptr && is_pinned(reinterpret_cast<const void*>(ptr), 1);
  if (a == nullptr && !host) return CUDA_ERROR_INVALID_VALUE;
  const int dev =
      a != nullptr ? a->device : (current_context != nullptr ? current_context->device : 0);
  switch (attribute) {
    case 1:  // CONTEXT
      *static_cast<CUcontext*>(data) = &s.devices[static_cast<std::size_t>(dev)].primary;
      break;
    case 2:  // MEMORY_TYPE
      *static_cast<unsigned*>(data) = host ? 1u : 2u;
      break;
    case 3:  // DEVICE_POINTER
      *static_cast<CUdeviceptr*>(data) = ptr;
      break;
    case 4:  // HOST_POINTER
      if (!host) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<void**>(data) = reinterpret_cast<void*>(ptr);
      break;
    case 9:  // DEVICE_ORDINAL
      *static_cast<int*>(data) = dev;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

// Interprocess memory and events: device memory here is the process's own, so the simulator
// says "not supported" (and CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED is 0).
CUresult cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr ptr) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  std::lock_guard<std::mutex> lock(state().mutex);
  if (handle == nullptr || find_allocation(ptr, 1) == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* ptr, CUipcMemHandle, unsigned int flags) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (ptr == nullptr || flags > 1) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(state().mutex);
  if (current_device() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult cuIpcOpenMemHandle(CUdeviceptr* ptr, CUipcMemHandle handle, unsigned int flags) {
  return cuIpcOpenMemHandle_v2(ptr, handle, flags);
}
CUresult cuIpcCloseMemHandle(CUdeviceptr) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  return CUDA_ERROR_INVALID_VALUE;  // nothing can have been opened
}
CUresult cuIpcGetEventHandle(CUipcEventHandle* handle, CUevent event) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  std::lock_guard<std::mutex> lock(state().mutex);
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (state().events.count(event) == 0) return CUDA_ERROR_INVALID_HANDLE;
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult cuIpcOpenEventHandle(CUevent* event, CUipcEventHandle) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (event == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cuStreamCreateWithPriority(CUstream* stream, unsigned int flags, int) {
  return cuStreamCreate(stream, flags);  // priorities do not change simulated time
}

// Work completes as it is queued (only simulated time advances): nothing is ever pending.
CUresult cuStreamQuery(CUstream stream) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!valid_stream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  if (stream == nullptr && current_device() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  return CUDA_SUCCESS;
}
CUresult cuEventQuery(CUevent event) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.events.count(event) == 0 ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS;
}

// No device code runs: loading is not supported, so no module or function handle exists.
CUresult cuModuleLoad(CUmodule* module, const char* path) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (module == nullptr || path == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int, int*, void**) {
  return cuModuleLoadData(module, image);
}
CUresult cuModuleLoadFatBinary(CUmodule* module, const void* image) {
  return cuModuleLoadData(module, image);
}
CUresult cuModuleUnload(CUmodule) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  return CUDA_ERROR_INVALID_HANDLE;
}
CUresult cuModuleGetGlobal_v2(CUdeviceptr*, std::size_t*, CUmodule, const char*) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  return CUDA_ERROR_INVALID_HANDLE;
}
CUresult cuFuncGetAttribute(int* value, int, CUfunction) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  return value == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_INVALID_HANDLE;
}
CUresult cuLinkCreate_v2(unsigned int, int*, void**, CUlinkState* state_out) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (state_out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_NOT_SUPPORTED;  // the JIT linker needs device code
}
CUresult cuLinkDestroy(CUlinkState) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  return CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuGetProcAddress_v2(const char* symbol, void** fn, int version, unsigned long long flags,
                             int* status);
CUresult cuGetProcAddress(const char* symbol, void** fn, int version, unsigned long long flags) {
  return cuGetProcAddress_v2(symbol, fn, version, flags, nullptr);
}

}  // namespace impl

// ---- the exported entry points: traced wrappers around impl:: --------------------------------
#define SIM_CU(name, params, args)                                              \
  CUDA_SIM_API CUresult name params {                                           \
    const CUresult rc = impl::name args;                                        \
    if (gpusel::sim::trace::on())                                               \
      std::apply(                                                               \
          [&](const auto&... traced_args) {                                     \
            gpusel::sim::trace::call("libcuda.so.1", #name, rc, error_name(rc), \
                                     rc == CUDA_SUCCESS, traced_args...);       \
          },                                                                    \
          std::make_tuple args);                                                \
    return rc;                                                                  \
  }
#include "cuda_exports.inc"
#undef SIM_CU

namespace {

template <typename F>
void* proc(F* f) {
  return reinterpret_cast<void*>(f);
}

struct Export {
  const char* symbol;
  void* fn;
};
const Export kExports[] = {
#define SIM_CU(name, params, args) {#name, proc(&::name)},
#include "cuda_exports.inc"
#undef SIM_CU
};

// The CUDA version that brought each exported symbol's ABI (cudaTypedefs.h's PFN_<name>_v<N>):
// cuGetProcAddress hands out, for a base name, the newest of its symbols at or below the version
// asked for. Symbols not listed came with CUDA 2.0.
struct Since {
  const char* symbol;
  int version;
};
const Since kSince[] = {
    {"cuDeviceTotalMem_v2", 3020},
    {"cuCtxCreate_v2", 3020},
    {"cuMemGetInfo_v2", 3020},
    {"cuMemAlloc_v2", 3020},
    {"cuMemFree_v2", 3020},
    {"cuMemGetAddressRange_v2", 3020},
    {"cuMemAllocHost_v2", 3020},
    {"cuMemHostGetDevicePointer_v2", 3020},
    {"cuMemcpyHtoD_v2", 3020},
    {"cuMemcpyDtoH_v2", 3020},
    {"cuMemcpyDtoD_v2", 3020},
    {"cuMemcpyHtoDAsync_v2", 3020},
    {"cuMemcpyDtoHAsync_v2", 3020},
    {"cuMemcpyDtoDAsync_v2", 3020},
    {"cuMemsetD8_v2", 3020},
    {"cuMemsetD32_v2", 3020},
    {"cuModuleGetGlobal_v2", 3020},
    {"cuCtxDestroy_v2", 4000},
    {"cuCtxPushCurrent_v2", 4000},
    {"cuCtxPopCurrent_v2", 4000},
    {"cuStreamDestroy_v2", 4000},
    {"cuEventDestroy_v2", 4000},
    {"cuMemHostRegister_v2", 6050},
    {"cuLinkCreate_v2", 6050},
    {"cuDevicePrimaryCtxRelease_v2", 11000},
    {"cuDevicePrimaryCtxSetFlags_v2", 11000},
    {"cuDevicePrimaryCtxReset_v2", 11000},
    {"cuIpcOpenMemHandle_v2", 11000},
    {"cuDeviceGetUuid_v2", 11040},
    {"cuGetProcAddress_v2", 12000},
    {"cuEventElapsedTime_v2", 12080},
    {"cuMemHostAlloc", 2020},
    {"cuDriverGetVersion", 2020},
    {"cuFuncGetAttribute", 2020},
    {"cuCtxGetApiVersion", 3020},
    {"cuCtxGetCacheConfig", 3020},
    {"cuCtxSetCacheConfig", 3020},
    {"cuStreamWaitEvent", 3020},
    {"cuMemsetD8Async", 3020},
    {"cuMemsetD32Async", 3020},
    {"cuCtxGetLimit", 3010},
    {"cuCtxSetLimit", 3010},
    {"cuCtxSetCurrent", 4000},
    {"cuCtxGetCurrent", 4000},
    {"cuDeviceCanAccessPeer", 4000},
    {"cuCtxEnablePeerAccess", 4000},
    {"cuCtxDisablePeerAccess", 4000},
    {"cuMemHostUnregister", 4000},
    {"cuPointerGetAttribute", 4000},
    {"cuLaunchKernel", 4000},
    {"cuDeviceGetByPCIBusId", 4010},
    {"cuDeviceGetPCIBusId", 4010},
    {"cuIpcGetMemHandle", 4010},
    {"cuIpcOpenMemHandle", 4010},
    {"cuIpcCloseMemHandle", 4010},
    {"cuIpcGetEventHandle", 4010},
    {"cuIpcOpenEventHandle", 4010},
    {"cuCtxGetStreamPriorityRange", 5050},
    {"cuStreamCreateWithPriority", 5050},
    {"cuLinkDestroy", 5050},
    {"cuMemAllocManaged", 6000},
    {"cuGetErrorString", 6000},
    {"cuGetErrorName", 6000},
    {"cuDevicePrimaryCtxRetain", 7000},
    {"cuDevicePrimaryCtxRelease", 7000},
    {"cuDevicePrimaryCtxSetFlags", 7000},
    {"cuDevicePrimaryCtxGetState", 7000},
    {"cuDevicePrimaryCtxReset", 7000},
    {"cuCtxGetFlags", 7000},
    {"cuDeviceGetP2PAttribute", 8000},
    {"cuDeviceGetUuid", 9020},
    {"cuGetProcAddress", 11030},
};

int since(const char* symbol) {
  for (const Since& s : kSince) {
    if (std::strcmp(s.symbol, symbol) == 0) return s.version;
  }
  return 2000;
}

// "cuMemAlloc" for "cuMemAlloc_v2".
std::string base_name(const char* symbol) {
  std::string s = symbol;
  const auto at = s.rfind("_v");
  if (at != std::string::npos && at + 2 < s.size() &&
      s.find_first_not_of("0123456789", at + 2) == std::string::npos)
    s.resize(at);
  return s;
}

}  // namespace

// cuGetProcAddress: `symbol` is a base name ("cuMemAlloc"), as the real driver expects; the
// per-thread-default-stream flag gives the same functions (the simulator has one kind of stream).
CUresult impl::cuGetProcAddress_v2(const char* symbol, void** fn, int version,
                                   unsigned long long flags, int* status) {
  if (symbol == nullptr || fn == nullptr || flags > 2) return CUDA_ERROR_INVALID_VALUE;
  *fn = nullptr;
  int best = -1;
  bool too_new = false;
  for (const Export& e : kExports) {
    if (base_name(e.symbol) != symbol) continue;
    const int v = since(e.symbol);
    if (v > version) {
      too_new = true;
    } else if (v > best) {
      best = v;
      *fn = e.fn;
    }
  }
  const int found = *fn != nullptr ? CU_GET_PROC_ADDRESS_SUCCESS
                    : too_new      ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                                   : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (status != nullptr) *status = found;
  if (found == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND && gpusel::sim::trace::on()) {
    gpusel::sim::trace::missing("libcuda.so.1", "cuGetProcAddress", symbol,
                                "(version " + std::to_string(version) + ")");
  }
  return *fn != nullptr ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

// Each exported function of cuda.def has exactly the prototype gpusel's loader expects.
#define GPUSEL_CUDA(api, symbol, required, params) \
  static_assert(std::is_same_v<decltype(&::symbol), CUresult(*) params>, #symbol " prototype");
#include "cuda.def"
#undef GPUSEL_CUDA
