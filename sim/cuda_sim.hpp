// The simulated libcuda.so.1's internals, shared by its sources (one concern each):
//   cuda_state.cpp       the process's driver state, cuInit's enumeration, device and context
//   lookup cuda_device.cpp      device queries (name, UUID, PCI, peer access); cuda_attributes.cpp
//   their values cuda_context.cpp     primary and created contexts, the thread's context stack,
//   context settings cuda_memory.cpp      device and pinned host memory, copies and memsets
//   cuda_timing.cpp      streams, events and the simulated time copies take
//   cuda_modules.cpp     module, linker and launch entry points (no device code runs)
//   cuda_errors.cpp      result names and descriptions (src/driver/cuda_errors.def)
//   cuda_extras.cpp      calls real programs make beyond gpusel's needs (unified and peer copies,
//                        stream getters, pools, libraries, occupancy, cuGetExportTable)
//   cuda_kernel_free.cpp calls that need no kernel: 2D copies and memsets, host functions and
//                        stream callbacks, managed-memory prefetches and advice, host flags, IPC
//                        handles
//   cuda_exports.cpp     the exported, traced entry points and cuGetProcAddress's table
//   host_memory_posix.cpp  the one platform-specific piece: reserving host address space
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cuda_abi.hpp"
#include "machine.hpp"
#include "sim_common.hpp"

// The handle types the driver API names; CUcontext, CUstream and CUevent point to these.
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
// cuMemcpy2D's parameters (cuda.h's CUDA_MEMCPY2D, and the 32-bit CUDA_MEMCPY2D_v1 of the
// unversioned legacy cuMemcpy2D); no CUarray can exist here (arrays are not modelled).
typedef struct CUarray_st* CUarray;
typedef struct CUDA_MEMCPY2D_st {
  std::size_t srcXInBytes;
  std::size_t srcY;
  int srcMemoryType;  // CUmemorytype: 1 host, 2 device, 3 array, 4 unified
  const void* srcHost;
  CUdeviceptr srcDevice;
  CUarray srcArray;
  std::size_t srcPitch;
  std::size_t dstXInBytes;
  std::size_t dstY;
  int dstMemoryType;
  void* dstHost;
  CUdeviceptr dstDevice;
  CUarray dstArray;
  std::size_t dstPitch;
  std::size_t WidthInBytes;
  std::size_t Height;
} CUDA_MEMCPY2D;
typedef struct CUDA_MEMCPY2D_v1_st {
  unsigned int srcXInBytes;
  unsigned int srcY;
  int srcMemoryType;
  const void* srcHost;
  unsigned int srcDevice;
  CUarray srcArray;
  unsigned int srcPitch;
  unsigned int dstXInBytes;
  unsigned int dstY;
  int dstMemoryType;
  void* dstHost;
  unsigned int dstDevice;
  CUarray dstArray;
  unsigned int dstPitch;
  unsigned int WidthInBytes;
  unsigned int Height;
} CUDA_MEMCPY2D_v1;
// cuMemPrefetchAsync_v2's and cuMemAdvise_v2's location: a CUmemLocationType and an id (a device
// ordinal for CU_MEM_LOCATION_TYPE_DEVICE).
typedef struct CUmemLocation_st {
  int type;
  int id;
} CUmemLocation;
// cuLaunchHostFunc's and cuStreamAddCallback's host functions.
typedef void (*CUhostFn)(void* data);
typedef void (*CUstreamCallback)(CUstream stream, CUresult status, void* data);
struct CUgraph_st;
struct CUstream_st {
  int device = 0;
  bool non_blocking = false;
  int priority = 0;  // cuStreamCreateWithPriority's, clamped to the context's range
  double ready = 0;  // simulated seconds at which the stream's queued work is done
  // Stream capture (cuda_graph.cpp): the graph its work goes into instead of running, and whether
  // the capture began on this stream (cuStreamBeginCapture) or reached it through an event.
  CUgraph_st* capture = nullptr;
  bool capture_origin = false;
};
struct CUmemPoolHandle_st {
  std::uint64_t release_threshold = 0;  // CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, kept as set
  int reuse[3] = {1, 1, 1};             // CU_MEMPOOL_ATTR_REUSE_* (attributes 1-3), kept as set
};
typedef struct CUmemPoolHandle_st* CUmemoryPool;
typedef struct CUlib_st* CUlibrary;
typedef struct CUkern_st* CUkernel;
// cuOccupancyMaxPotentialBlockSize's callback: the dynamic shared memory a block size needs.
typedef std::size_t (*CUoccupancyB2DSize)(int block_size);
struct CUevent_st {
  bool recorded = false;
  double time = 0;
  CUgraph_st* captured_in = nullptr;  // last recorded in a capturing stream: that capture's graph
};
// A graph made by stream capture: the captured work in the order it was issued (the simulator runs
// work as it is queued, so that order respects every dependency), and an instantiated graph.
struct CUgraphNode_st {
  std::function<CUresult(CUstream)> work;  // runs the node's work on the stream launched on
};
typedef CUgraphNode_st* CUgraphNode;
struct CUgraph_st {
  std::vector<std::unique_ptr<CUgraphNode_st>> nodes;
  bool invalidated = false;  // a call the capture cannot hold was made: cuStreamEndCapture fails
};
typedef CUgraph_st* CUgraph;
struct CUgraphExec_st {
  std::vector<std::function<CUresult(CUstream)>> work;
};
typedef CUgraphExec_st* CUgraphExec;

namespace gpusel::sim::cuda {

struct Device {
  int gpu = 0;
  int mig = -1;
  std::string name;
  std::string uuid;         // MIG UUID for a MIG device
  std::string parent_uuid;  // the GPU's
  // The two as cuDeviceGetUuid's bytes, read once at cuInit (nullopt: not a UUID's form).
  std::optional<CUuuid> uuid_bytes, parent_bytes;
  std::uint64_t memory_total = 0;
  std::uint64_t memory_used = 0;
  int sm_count = 0;
  CUctx_st primary;
  CUstream_st legacy_stream;                          // stream 0
  CUmemPoolHandle_st pool;                            // the default memory pool
  double h2d_free = 0, d2h_free = 0, local_free = 0;  // when each link is next idle
  double peer_free = 0;                               // its copies to other devices
};

struct Allocation {
  std::size_t size = 0;
  int device = 0;
  bool managed = false;  // cuMemAllocManaged's
};

struct State {
  LoadedMachine loaded;
  bool load_attempted = false;  // loaded is final (ok or not) once this is set
  std::mutex mutex;             // guards everything below that changes after cuInit
  // Set once, under the mutex, after init_result, devices and loaded are final: a thread that
  // reads true (acquire) may read those without the mutex, as they never change again.
  std::atomic<bool> initialised{false};
  CUresult init_result = CUDA_ERROR_NOT_INITIALIZED;
  CUdevice handle_base = 0;     // 0, or kDeviceHandleBase under GPUSEL_SIM_DEVICE_HANDLES=distinct
  std::vector<Device> devices;  // the vector and each device's identity; retains, memory_used
                                // and the streams' times change under the mutex
  std::map<CUdeviceptr, Allocation> allocations;  // device memory, by base address
  std::map<const void*, std::size_t> pinned;      // cuMemHostAlloc'd memory, by base address
  std::map<const void*, unsigned> pinned_flags;   // cuMemHostAlloc's flags, by base address
  std::map<const void*, std::size_t> registered;  // cuMemHostRegister'd memory (the caller's)
  std::set<CUstream> streams;
  std::set<CUevent> events;
  std::set<CUgraph> graphs;  // ended captures and cuGraphCreate's, until cuGraphDestroy
  std::set<CUgraphExec> graph_execs;
  std::set<CUcontext> created;  // contexts of cuCtxCreate, destroyed ones included
};

// The calling thread's context stack: the current context, and below it those pushed over.
extern thread_local CUcontext current_context;
extern thread_local std::vector<CUcontext> context_stack;

// ---- cuda_state.cpp ----
State& state();
const SimGpu& gpu_of(const State& s, const Device& d);
// The machine, loaded on first use (before cuInit too); final once returned.
const LoadedMachine& loaded_machine();
// Guard for every call after cuInit: returns CUDA_SUCCESS when the driver is usable.
CUresult ready();
// CUdevice handles. NVIDIA's drivers hand out the ordinal itself, and real programs rely on it
// (numba checks it), so the double does too by default. With GPUSEL_SIM_DEVICE_HANDLES=distinct
// (gpusel's own tests) it hands out kDeviceHandleBase + ordinal, so that a program passing an
// ordinal where cuDeviceGet's handle belongs gets CUDA_ERROR_INVALID_DEVICE instead of working by
// luck. Contexts, streams and allocations hold the device's index (its ordinal) in State::devices.
inline constexpr CUdevice kDeviceHandleBase = 0x1000;
CUdevice handle_of(int index);
int index_of(CUdevice handle);  // -1 for what no cuDeviceGet gave
// The device a CUdevice handle names, or nullptr; device_at: by index (ordinal).
Device* device(CUdevice handle);
Device* device_at(int index);
// A context that is alive. Call with the mutex held (it reads retains).
bool alive(CUcontext c);
// A context this library gave out and still alive. Call with the mutex held.
bool known_context(CUcontext c);
// The device of the calling thread's current context. Call with the mutex held.
Device* current_device();

// A UUID's 16 bytes ("GPU-" or "MIG-" and 32 hex digits with dashes); nullopt for anything else.
std::optional<CUuuid> uuid_bytes_of(const std::string& text);

// ---- cuda_device.cpp, cuda_attributes.cpp ----
// Peer access between two enumerated devices.
bool peer_access(const Device& a, const Device& b);
// A CUdevice_attribute's value for the device; nullopt for a number CUDA does not define.
std::optional<int> attribute_value(const State& s, const Device& d, int attribute);

// ---- cuda_memory.cpp ----
// A copy between device memory (dst_dev/src_dev, 0 for host) and host memory, charged to the
// current context's device on `stream`; a memset of `count` elements of `size` (1, 2 or 4) bytes.
CUresult copy(CUdeviceptr dst_dev, void* dst_host, CUdeviceptr src_dev, const void* src_host,
              std::size_t bytes, CUstream stream);
CUresult memset_device(CUdeviceptr dst, unsigned int value, std::size_t size, std::size_t count,
                       CUstream stream);
// The allocation holding [ptr, ptr + size), or nullptr. Call with the mutex held.
const Allocation* find_allocation(CUdeviceptr ptr, std::size_t size);
// Pinned (allocated or registered) host memory. Call with the mutex held.
bool is_pinned(const void* host, std::size_t size);

// ---- cuda_timing.cpp ----
// Local: within one device. Peer: between two devices over their NVLink or PCIe link (peer access
// possible and enabled). Staged: between two devices through host memory (no peer access).
enum class Link { H2D, D2H, Local, Peer, Staged };
CUstream_st* stream_of(CUstream stream, Device& d);
bool valid_stream(CUstream stream);
// Queues `bytes` on a link of device d behind whatever the stream and the link already hold.
void account(Device& d, CUstream stream, Link link, std::size_t bytes);
// The same for a copy of `bytes` from device `from` to device `to` over `link` (Peer or Staged),
// queued on `stream` of device d (the current context's).
void account_between(Device& d, CUstream stream, Link link, const Device& from, const Device& to,
                     std::size_t bytes);
// Peer copies: the fraction of a link's theoretical rate a copy reaches (NVLink, PCIe), and the
// link's theoretical per-direction rate in GB/s.
inline constexpr double kNvlinkEfficiency = 0.85;
inline constexpr double kPciePeerEfficiency = 0.80;
double nvlink_gbps(unsigned links, unsigned version);
double pcie_gbps(const SimGpu& g);

// The special stream handles CU_STREAM_LEGACY (0x1) and CU_STREAM_PER_THREAD (0x2): both act as
// the legacy stream here (the simulator has one default stream per device).
CUstream normal_stream(CUstream stream);

// ---- cuda_graph.cpp ----
// Stream capture. When `stream` is being captured, records `work` as the capture's next node (it
// runs when the graph is launched, on the stream launched on) and returns true; *rc is then the
// result the capturing call returns. Call with the mutex held.
bool captured(CUstream stream, std::function<CUresult(CUstream)> work, CUresult* rc);
// A call that waits for the stream (cuStreamSynchronize, cuStreamQuery) cannot be captured: true
// when `stream` is capturing, after invalidating the capture (the driver's rule). Mutex held.
bool capture_refuses_wait(CUstream stream);
// A stream being destroyed: a capture it began ends with no graph (the streams and events it
// reached are released); one it had joined goes on without it. Mutex held.
void forget_capture(State& s, CUstream stream);

// ---- cuda_errors.cpp ----
const char* error_name(CUresult rc);
const char* error_text(CUresult rc);

// ---- host_memory_posix.cpp ----
// Reserves `bytes` of zeroed, readable and writable host memory, committed only as it is
// touched; nullptr when the address space is exhausted.
void* reserve_host_memory(std::size_t bytes);
void release_host_memory(void* p, std::size_t bytes);

}  // namespace gpusel::sim::cuda

// The implementation of each exported function (cuda_exports.inc), wrapped by cuda_exports.cpp.
namespace gpusel::sim::cuda::impl {
#define SIM_CU(name, params, args) CUresult name params;
#define SIM_CU_AS(name, implementation, params, args)
#include "cuda_exports.inc"
#undef SIM_CU
#undef SIM_CU_AS
// cuGetExportTable, told the address its caller returns to.
CUresult cuGetExportTableFrom(const void** table, const CUuuid* id, const void* caller);
}  // namespace gpusel::sim::cuda::impl
