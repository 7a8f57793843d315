// The simulated libcuda.so.1's calls beyond what gpusel itself needs, made by real programs
// (CUDA runtimes, pycuda, frameworks): unified copies, peer copies, stream getters, pointer
// attributes, stream-ordered allocation and pools, libraries and kernels (no device code exists,
// so none can be loaded), launches and occupancy (a documented error), the deprecated calls
// pycuda still binds, and cuGetExportTable (the private tables NVIDIA's own runtime asks for:
// refused with one clear line on stderr).
#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#if !defined(_WIN32)
#include <link.h>
#endif

#include "cuda_sim.hpp"
#include "usage.hpp"

namespace gpusel::sim::cuda {

namespace {

// An address inside device memory this library allocated (0 for host memory).
CUdeviceptr device_side(CUdeviceptr p, std::size_t bytes) {
  return find_allocation(p, bytes == 0 ? 1 : bytes) != nullptr ? p : 0;
}

// cuMemcpy and cuMemcpyAsync: unified addressing tells device memory from host memory.
CUresult unified_copy(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes, CUstream stream) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  CUdeviceptr dst_dev = 0, src_dev = 0;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (!valid_stream(stream)) return CUDA_ERROR_INVALID_HANDLE;
    if (CUresult rc = CUDA_SUCCESS; captured(
            stream, [=](CUstream on) { return unified_copy(dst, src, bytes, on); }, &rc))
      return rc;
    dst_dev = device_side(dst, bytes);
    src_dev = device_side(src, bytes);
  }
  if (dst_dev == 0 && src_dev == 0) {  // host to host: a plain copy, no link charged
    if (bytes == 0) return CUDA_SUCCESS;
    if (dst == 0 || src == 0) return CUDA_ERROR_INVALID_VALUE;
    std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
    return CUDA_SUCCESS;
  }
  return copy(dst_dev, dst_dev != 0 ? nullptr : reinterpret_cast<void*>(dst), src_dev,
              src_dev != 0 ? nullptr : reinterpret_cast<const void*>(src), bytes, stream);
}

// The two contexts of a peer copy must be alive; the copy itself is a device-to-device one.
CUresult peer_copy(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx,
                   std::size_t bytes, CUstream stream) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (!known_context(dst_ctx) || !known_context(src_ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  }
  return copy(dst, nullptr, src, nullptr, bytes, stream);
}

// A stream handle this library gave out, or a special one; its device. Call with the mutex held.
CUresult stream_device(CUstream stream, int* device) {
  if (!valid_stream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  stream = normal_stream(stream);
  if (stream != nullptr) {
    *device = stream->device;
    return CUDA_SUCCESS;
  }
  Device* d = current_device();
  if (d == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *device = current_context->device;
  return CUDA_SUCCESS;
}

std::atomic<bool> export_table_reported{false};

#if !defined(_WIN32)
struct Where {
  std::uintptr_t at = 0;
  bool found = false;
  std::string name;  // "" for the program itself
};

int find_object(dl_phdr_info* info, std::size_t, void* data) {
  Where& w = *static_cast<Where*>(data);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const std::uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && w.at >= start && w.at - start < ph.p_memsz) {
      w.found = true;
      w.name = info->dlpi_name != nullptr ? info->dlpi_name : "";
      return 1;
    }
  }
  return 0;
}
#endif

// The file name of the library whose code lies at `caller` when that is a library carrying
// NVIDIA's runtime inside it (libcublas.so.13, libnccl.so.2): "" for the program itself, a
// libcudart, or an address not found.
std::string runtime_carrier(const void* caller) {
#if defined(_WIN32)
  (void)caller;
  return "";
#else
  Where w;
  w.at = reinterpret_cast<std::uintptr_t>(caller);
  dl_iterate_phdr(find_object, &w);
  if (!w.found || w.name.empty()) return "";
  std::string base = w.name.substr(w.name.rfind('/') + 1);
  if (base.rfind("libcudart", 0) == 0) return "";
  for (char& c : base) {
    if (static_cast<unsigned char>(c) <= ' ') c = '?';  // one word in the note doctor reads
  }
  return base;
#endif
}

}  // namespace

namespace impl {

CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes) {
  return unified_copy(dst, src, bytes, nullptr);
}
CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes, CUstream stream) {
  return unified_copy(dst, src, bytes, stream);
}
CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx,
                      std::size_t bytes) {
  return peer_copy(dst, dst_ctx, src, src_ctx, bytes, nullptr);
}
CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx,
                           std::size_t bytes, CUstream stream) {
  return peer_copy(dst, dst_ctx, src, src_ctx, bytes, stream);
}

CUresult cuMemsetD16_v2(CUdeviceptr dst, unsigned short value, std::size_t count) {
  return memset_device(dst, value, 2, count, nullptr);
}
CUresult cuMemsetD16Async(CUdeviceptr dst, unsigned short value, std::size_t count,
                          CUstream stream) {
  return memset_device(dst, value, 2, count, stream);
}

CUresult cuStreamGetPriority(CUstream stream, int* priority) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  std::lock_guard<std::mutex> lock(state().mutex);
  if (priority == nullptr) return CUDA_ERROR_INVALID_VALUE;
  int device = 0;
  if (CUresult rc = stream_device(stream, &device); rc != CUDA_SUCCESS) return rc;
  stream = normal_stream(stream);
  *priority = stream == nullptr ? 0 : stream->priority;
  return CUDA_SUCCESS;
}

CUresult cuStreamGetFlags(CUstream stream, unsigned int* flags) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  std::lock_guard<std::mutex> lock(state().mutex);
  if (flags == nullptr) return CUDA_ERROR_INVALID_VALUE;
  int device = 0;
  if (CUresult rc = stream_device(stream, &device); rc != CUDA_SUCCESS) return rc;
  stream = normal_stream(stream);
  *flags = stream != nullptr && stream->non_blocking ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT;
  return CUDA_SUCCESS;
}

// A stream belongs to the primary context of its device (created contexts share the device's
// streams in this model).
CUresult cuStreamGetCtx(CUstream stream, CUcontext* ctx) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  std::lock_guard<std::mutex> lock(state().mutex);
  if (ctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  int device = 0;
  if (CUresult rc = stream_device(stream, &device); rc != CUDA_SUCCESS) return rc;
  *ctx = normal_stream(stream) == nullptr ? current_context : &device_at(device)->primary;
  return CUDA_SUCCESS;
}

CUresult cuStreamGetCtx_v2(CUstream stream, CUcontext* ctx, void** green) {
  if (ctx == nullptr || green == nullptr) {
    if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
    return CUDA_ERROR_INVALID_VALUE;
  }
  *green = nullptr;  // no green contexts here
  return cuStreamGetCtx(stream, ctx);
}

CUresult cuStreamGetDevice(CUstream stream, CUdevice* dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  std::lock_guard<std::mutex> lock(state().mutex);
  if (dev == nullptr) return CUDA_ERROR_INVALID_VALUE;
  int device = 0;
  if (CUresult rc = stream_device(stream, &device); rc != CUDA_SUCCESS) return rc;
  *dev = handle_of(device);
  return CUDA_SUCCESS;
}

CUresult cuStreamGetId(CUstream stream, unsigned long long* id) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  std::lock_guard<std::mutex> lock(state().mutex);
  if (id == nullptr) return CUDA_ERROR_INVALID_VALUE;
  int device = 0;
  if (CUresult rc = stream_device(stream, &device); rc != CUDA_SUCCESS) return rc;
  stream = normal_stream(stream);
  *id = stream == nullptr
            ? 1u + static_cast<unsigned>(device)
            : static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(stream));
  return CUDA_SUCCESS;
}

CUresult cuEventRecordWithFlags(CUevent event, CUstream stream, unsigned int flags) {
  if (flags > 1) {  // CU_EVENT_RECORD_DEFAULT, CU_EVENT_RECORD_EXTERNAL
    if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
    return CUDA_ERROR_INVALID_VALUE;
  }
  return cuEventRecord(event, stream);
}

// cuPointerGetAttributes: each attribute as cuPointerGetAttribute gives it; for memory this
// library did not allocate or pin, the values the driver gives unknown host memory (type 0, no
// context, device ordinal -2) and success.
CUresult cuPointerGetAttributes(unsigned int count, int* attributes, void** data, CUdeviceptr ptr) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (count == 0 || attributes == nullptr || data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  bool known = false;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    known = find_allocation(ptr, 1) != nullptr || is_pinned(reinterpret_cast<const void*>(ptr), 1);
  }
  for (unsigned i = 0; i < count; ++i) {
    void* out = data[i];
    if (out == nullptr) continue;
    const int a = attributes[i];
    if (a == 10 && known) {  // IS_LEGACY_CUDA_IPC_CAPABLE: device memory (cuIpcGetMemHandle)
      std::lock_guard<std::mutex> lock(state().mutex);
      *static_cast<int*>(out) = find_allocation(ptr, 1) != nullptr ? 1 : 0;
      continue;
    }
    if (known && (a == 1 || a == 2 || a == 3 || a == 4 || a == 8 || a == 9)) {
      if (a == 4 && cuPointerGetAttribute(out, 4, ptr) != CUDA_SUCCESS) {
        *static_cast<void**>(out) = nullptr;  // device memory has no host pointer
        continue;
      }
      if (CUresult rc = cuPointerGetAttribute(out, a, ptr); rc != CUDA_SUCCESS) return rc;
      continue;
    }
    switch (a) {
      case 1:  // CONTEXT
      case 3:  // DEVICE_POINTER
      case 4:  // HOST_POINTER
        *static_cast<void**>(out) = nullptr;
        break;
      case 2:  // MEMORY_TYPE
        *static_cast<unsigned*>(out) = 0;
        break;
      case 6:   // SYNC_MEMOPS
      case 8:   // IS_MANAGED
      case 10:  // IS_LEGACY_CUDA_IPC_CAPABLE
      case 15:  // MAPPED
        *static_cast<int*>(out) = 0;
        break;
      case 7:  // BUFFER_ID
        *static_cast<unsigned long long*>(out) = known ? static_cast<unsigned long long>(ptr) : 0;
        break;
      case 9:  // DEVICE_ORDINAL
        *static_cast<int*>(out) = -2;
        break;
      default:
        return CUDA_ERROR_INVALID_VALUE;
    }
  }
  return CUDA_SUCCESS;
}

// Stream-ordered allocation: each device has its default pool, and an allocation from it is
// device memory like cuMemAlloc's (work completes as it is queued).
CUresult cuMemAllocAsync(CUdeviceptr* ptr, std::size_t bytes, CUstream stream) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    int device = 0;
    if (CUresult rc = stream_device(stream, &device); rc != CUDA_SUCCESS) return rc;
  }
  return cuMemAlloc_v2(ptr, bytes);
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr* ptr, std::size_t bytes, CUmemoryPool pool,
                                 CUstream stream) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    bool known = false;
    for (Device& d : state().devices) known = known || &d.pool == pool;
    if (!known) return CUDA_ERROR_INVALID_VALUE;
  }
  return cuMemAllocAsync(ptr, bytes, stream);
}

CUresult cuMemFreeAsync(CUdeviceptr ptr, CUstream stream) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (!valid_stream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  }
  return cuMemFree_v2(ptr);
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Device* d = device(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  *pool = &d->pool;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev) {
  return cuDeviceGetDefaultMemPool(pool, dev);
}

// Pool attributes: the reuse flags and the release threshold are kept as set; the memory figures
// read as an empty pool.
CUresult cuMemPoolGetAttribute(CUmemoryPool pool, int attribute, void* value) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (value == nullptr || pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(state().mutex);
  bool known = false;
  for (Device& d : state().devices) known = known || &d.pool == pool;
  if (!known) return CUDA_ERROR_INVALID_VALUE;
  switch (attribute) {
    case 1:  // REUSE_FOLLOW_EVENT_DEPENDENCIES
    case 2:  // REUSE_ALLOW_OPPORTUNISTIC
    case 3:  // REUSE_ALLOW_INTERNAL_DEPENDENCIES
      *static_cast<int*>(value) = pool->reuse[attribute - 1];
      return CUDA_SUCCESS;
    case 4:  // RELEASE_THRESHOLD
      *static_cast<std::uint64_t*>(value) = pool->release_threshold;
      return CUDA_SUCCESS;
    case 5:  // RESERVED_MEM_CURRENT
    case 6:  // RESERVED_MEM_HIGH
    case 7:  // USED_MEM_CURRENT
    case 8:  // USED_MEM_HIGH
      *static_cast<std::uint64_t*>(value) = 0;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult cuMemPoolSetAttribute(CUmemoryPool pool, int attribute, void* value) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (value == nullptr || pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(state().mutex);
  bool known = false;
  for (Device& d : state().devices) known = known || &d.pool == pool;
  if (!known) return CUDA_ERROR_INVALID_VALUE;
  switch (attribute) {
    case 1:  // the REUSE_* flags, kept as set
    case 2:
    case 3:
      pool->reuse[attribute - 1] = *static_cast<int*>(value) != 0 ? 1 : 0;
      return CUDA_SUCCESS;
    case 4:  // RELEASE_THRESHOLD
      pool->release_threshold = *static_cast<std::uint64_t*>(value);
      return CUDA_SUCCESS;
    case 6:  // RESERVED_MEM_HIGH and USED_MEM_HIGH: only a reset (0) may be set
    case 8:
      return *static_cast<std::uint64_t*>(value) == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    default:  // RESERVED_MEM_CURRENT and USED_MEM_CURRENT are read-only
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult cuMemPoolTrimTo(CUmemoryPool pool, std::size_t) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  std::lock_guard<std::mutex> lock(state().mutex);
  for (Device& d : state().devices) {
    if (&d.pool == pool) return CUDA_SUCCESS;
  }
  return CUDA_ERROR_INVALID_VALUE;
}

// Libraries and kernels hold device code, which the simulator cannot run: loading one is
// unsupported (as cuModuleLoad is), so no library or kernel handle exists.
CUresult cuLibraryLoadData(CUlibrary* library, const void* code, int*, void**, unsigned int, int*,
                           void**, unsigned int) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (library == nullptr || code == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult cuLibraryLoadFromFile(CUlibrary* library, const char* path, int*, void**, unsigned int,
                               int*, void**, unsigned int) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (library == nullptr || path == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult cuLibraryUnload(CUlibrary) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  return CUDA_ERROR_INVALID_HANDLE;
}
CUresult cuLibraryGetKernel(CUkernel* kernel, CUlibrary, const char* name) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (kernel == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_INVALID_HANDLE;
}
CUresult cuLibraryGetModule(CUmodule* module, CUlibrary) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (module == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_INVALID_HANDLE;
}
CUresult cuKernelGetFunction(CUfunction* fn, CUkernel) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_INVALID_HANDLE;
}
CUresult cuKernelGetAttribute(int* value, int, CUkernel, CUdevice) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_INVALID_HANDLE;
}
CUresult cuKernelSetAttribute(int, int, CUkernel, CUdevice) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  return CUDA_ERROR_INVALID_HANDLE;
}
CUresult cuKernelGetName(const char** name, CUkernel) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_INVALID_HANDLE;
}

// Launches: no function handle can exist (nothing loads), so a launch names an invalid one; with
// no configuration it is an invalid value. Never a crash, never a launch that seems to work.
CUresult cuLaunchKernelEx(const void* config, CUfunction, void**, void**) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (config == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_INVALID_HANDLE;
}
CUresult cuLaunchGrid(CUfunction, int, int) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  return CUDA_ERROR_INVALID_HANDLE;
}
CUresult cuFuncSetAttribute(CUfunction, int, int) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  return CUDA_ERROR_INVALID_HANDLE;
}

// Occupancy is a property of a function, and none exists: INVALID_HANDLE, after the checks.
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* blocks, CUfunction, int size,
                                                              std::size_t, unsigned int) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (blocks == nullptr || size <= 0) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_INVALID_HANDLE;
}
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, CUfunction fn, int size,
                                                     std::size_t shared) {
  return cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(blocks, fn, size, shared, 0);
}
CUresult cuOccupancyMaxPotentialBlockSizeWithFlags(int* grid, int* block, CUfunction,
                                                   CUoccupancyB2DSize, std::size_t, int,
                                                   unsigned int) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (grid == nullptr || block == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_INVALID_HANDLE;
}
CUresult cuOccupancyMaxPotentialBlockSize(int* grid, int* block, CUfunction fn,
                                          CUoccupancyB2DSize to_shared, std::size_t shared,
                                          int limit) {
  return cuOccupancyMaxPotentialBlockSizeWithFlags(grid, block, fn, to_shared, shared, limit, 0);
}
CUresult cuOccupancyAvailableDynamicSMemPerBlock(std::size_t* bytes, CUfunction, int blocks,
                                                 int size) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (bytes == nullptr || blocks <= 0 || size <= 0) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_INVALID_HANDLE;
}
CUresult cuOccupancyMaxPotentialClusterSize(int* size, CUfunction, const void* config) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (size == nullptr || config == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_INVALID_HANDLE;
}
CUresult cuOccupancyMaxActiveClusters(int* clusters, CUfunction, const void* config) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (clusters == nullptr || config == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_INVALID_HANDLE;
}

// The deprecated context calls pycuda binds: attaching takes the current context (and a
// reference on it, as the driver did), detaching gives it back.
CUresult cuCtxAttach(CUcontext* ctx, unsigned int flags) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  std::lock_guard<std::mutex> lock(state().mutex);
  if (ctx == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (current_device() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *ctx = current_context;
  return CUDA_SUCCESS;
}
CUresult cuCtxDetach(CUcontext ctx) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  std::lock_guard<std::mutex> lock(state().mutex);
  return known_context(ctx) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}
CUresult cuCtxGetId(CUcontext ctx, unsigned long long* id) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  std::lock_guard<std::mutex> lock(state().mutex);
  if (id == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (ctx == nullptr) ctx = current_context;
  if (!known_context(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  *id = static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(ctx));
  return CUDA_SUCCESS;
}

// CUDA 13.0's context-taking variants. A driver older than 13.0 has no such symbols, and programs
// that probe for `name_v2` before `name` (numba) then call them with the old signature: on a
// machine whose cuda_driver_version is below 13000 they act as the old calls and ignore the
// context argument; from 13000 on a null context is the current one and another must be alive.
namespace {
CUresult context_argument(CUcontext ctx, Device** device) {
  *device = nullptr;
  if (state().loaded.machine().cuda_driver_version < 13000 || ctx == nullptr) {
    *device = current_device();
    return *device != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
  }
  if (!known_context(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  *device = device_at(ctx->device);
  return CUDA_SUCCESS;
}
}  // namespace

CUresult cuCtxGetDevice_v2(CUdevice* dev, CUcontext ctx) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (dev == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(state().mutex);
  Device* d = nullptr;
  if (CUresult rc = context_argument(ctx, &d); rc != CUDA_SUCCESS) return rc;
  *dev = handle_of(static_cast<int>(d - state().devices.data()));
  return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize_v2(CUcontext ctx) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  std::lock_guard<std::mutex> lock(state().mutex);
  Device* d = nullptr;
  return context_argument(ctx, &d);  // work completes as it is queued
}

// Profiling has nothing to collect here; starting and stopping it succeed.
CUresult cuProfilerStart(void) {
  return ready();
}
CUresult cuProfilerStop(void) {
  return ready();
}

// NVIDIA's own CUDA runtime (linked statically, nvcc's default, or a libcudart loaded by path, or
// carried inside a library such as cuBLAS or NCCL) asks for the driver's private tables; the
// simulator has none and says so, once, naming the library that asked when it is not the program.
CUresult cuGetExportTableFrom(const void** table, const CUuuid*, const void* caller) {
  if (table != nullptr) *table = nullptr;
  if (!export_table_reported.exchange(true)) {
    const std::string carrier = runtime_carrier(caller);
    if (carrier.empty()) {
      gpusel::sim::report(
          "libcuda.so.1",
          "this program uses NVIDIA's own CUDA runtime (linked statically, nvcc's default, or a "
          "libcudart it loads by path), which needs the driver's private interfaces "
          "(cuGetExportTable); the simulator does not provide them. The simulator runs programs "
          "that load libcudart dynamically by name, e.g. built with `nvcc -cudart shared`: its "
          "own libcudart.so.11.0, .12 and .13 then answer (see docs/simulator.md)");
    } else {
      gpusel::sim::report(
          "libcuda.so.1",
          carrier +
              ", which this program loads, carries NVIDIA's own CUDA runtime inside it (as "
              "cuBLAS, NCCL and cuDNN do) and asks the driver for private interfaces "
              "(cuGetExportTable) that the simulator does not provide: its calls fail here "
              "however the program itself is built. Test the launch set-up with a program "
              "that makes the same CUDA runtime calls without " +
              carrier + ", and run " + carrier + "'s work on a real GPU (see docs/simulator.md)");
    }
    // For `gpusel doctor`, which says the same afterwards.
    const LoadedMachine& loaded = loaded_machine();
    if (loaded.ok) gpusel::sim::note_static_runtime(loaded.machine(), "libcuda.so.1", carrier);
  }
  return CUDA_ERROR_NOT_SUPPORTED;
}

}  // namespace impl

}  // namespace gpusel::sim::cuda
