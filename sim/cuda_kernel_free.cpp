// The simulated libcuda.so.1's calls that need no kernel on a real GPU either: 2D copies and
// memsets (rows moved one by one, each timed as cuda_timing.cpp times a copy or memset), host
// functions and stream callbacks, prefetches and advice on managed memory, and the flags of
// pinned host memory.
//
// Host functions and callbacks run inline, on the thread that queues them, before the call
// returns: work completes as it is queued here, so the stream's earlier work is done by then, and
// work queued after the call starts after the function has returned. That is the stream order
// NVIDIA documents, and synchronising the stream trivially waits for the function. (A real driver
// runs them on a thread of its own: a host function that blocks until its caller does something
// after queueing it would wait forever here.)
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "cuda_sim.hpp"

namespace gpusel::sim::cuda {

namespace {

constexpr int kMemoryHost = 1, kMemoryDevice = 2, kMemoryArray = 3, kMemoryUnified = 4;

// One side of a 2D copy: its first byte, its pitch, and whether it is device memory.
struct Side {
  CUdeviceptr device = 0;  // the first byte in device memory, or 0
  const void* host = nullptr;
  std::size_t pitch = 0;
};

// Resolves one side of a CUDA_MEMCPY2D and checks its extent (Height rows of WidthInBytes at
// `pitch` from (x, y)). Call with the mutex held.
CUresult side(int type, const void* host, CUdeviceptr device, CUarray array, std::size_t x,
              std::size_t y, std::size_t pitch, std::size_t width, std::size_t height, Side* out) {
  if (type == kMemoryArray)
    return array == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_SUPPORTED;
  if (height > 1 && pitch < x + width) return CUDA_ERROR_INVALID_VALUE;
  if (height > 0 && y > (SIZE_MAX - x) / std::max<std::size_t>(pitch, 1))
    return CUDA_ERROR_INVALID_VALUE;
  const std::size_t offset = y * pitch + x;
  const std::size_t extent = height == 0 ? 0 : (height - 1) * pitch + width;
  out->pitch = pitch;
  if (type == kMemoryHost) {
    if (host == nullptr) return CUDA_ERROR_INVALID_VALUE;
    out->host = static_cast<const char*>(host) + offset;
    return CUDA_SUCCESS;
  }
  if (type != kMemoryDevice && type != kMemoryUnified) return CUDA_ERROR_INVALID_VALUE;
  const CUdeviceptr first = device + offset;
  const bool in_device = find_allocation(first, std::max<std::size_t>(extent, 1)) != nullptr;
  const bool in_pinned =
      is_pinned(reinterpret_cast<const void*>(first), std::max<std::size_t>(extent, 1));
  if (type == kMemoryUnified && !in_device) {
    if (device == 0) return CUDA_ERROR_INVALID_VALUE;
    out->host = reinterpret_cast<const void*>(first);  // host memory by unified addressing
    return CUDA_SUCCESS;
  }
  if (!in_device && !in_pinned) return CUDA_ERROR_INVALID_VALUE;
  out->device = first;
  return CUDA_SUCCESS;
}

CUresult copy_2d(const CUDA_MEMCPY2D* p, CUstream stream) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Side from, to;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (current_device() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
    if (!valid_stream(stream)) return CUDA_ERROR_INVALID_HANDLE;
    if (CUresult rc = CUDA_SUCCESS; captured(
            stream, [params = *p](CUstream on) { return copy_2d(&params, on); }, &rc))
      return rc;
    if (CUresult rc = side(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcArray, p->srcXInBytes,
                           p->srcY, p->srcPitch, p->WidthInBytes, p->Height, &from);
        rc != CUDA_SUCCESS)
      return rc;
    if (CUresult rc = side(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstArray, p->dstXInBytes,
                           p->dstY, p->dstPitch, p->WidthInBytes, p->Height, &to);
        rc != CUDA_SUCCESS)
      return rc;
  }
  if (p->WidthInBytes == 0 || p->Height == 0) return CUDA_SUCCESS;
  // Rows that follow one another on both sides are one copy; else one copy per row.
  const bool packed =
      p->Height == 1 || (from.pitch == p->WidthInBytes && to.pitch == p->WidthInBytes);
  const std::size_t rows = packed ? 1 : p->Height;
  const std::size_t bytes = packed ? p->WidthInBytes * p->Height : p->WidthInBytes;
  for (std::size_t row = 0; row < rows; ++row) {
    const std::size_t src_at = row * from.pitch, dst_at = row * to.pitch;
    const CUdeviceptr src_dev = from.device != 0 ? from.device + src_at : 0;
    const CUdeviceptr dst_dev = to.device != 0 ? to.device + dst_at : 0;
    const void* src_host =
        from.device == 0 ? static_cast<const char*>(from.host) + src_at : nullptr;
    void* dst_host =
        to.device == 0 ? const_cast<char*>(static_cast<const char*>(to.host)) + dst_at : nullptr;
    if (CUresult rc = copy(dst_dev, dst_host, src_dev, src_host, bytes, stream); rc != CUDA_SUCCESS)
      return rc;
  }
  return CUDA_SUCCESS;
}

CUDA_MEMCPY2D widen(const CUDA_MEMCPY2D_v1& v) {
  CUDA_MEMCPY2D p{};
  p.srcXInBytes = v.srcXInBytes;
  p.srcY = v.srcY;
  p.srcMemoryType = v.srcMemoryType;
  p.srcHost = v.srcHost;
  p.srcDevice = v.srcDevice;
  p.srcArray = v.srcArray;
  p.srcPitch = v.srcPitch;
  p.dstXInBytes = v.dstXInBytes;
  p.dstY = v.dstY;
  p.dstMemoryType = v.dstMemoryType;
  p.dstHost = v.dstHost;
  p.dstDevice = v.dstDevice;
  p.dstArray = v.dstArray;
  p.dstPitch = v.dstPitch;
  p.WidthInBytes = v.WidthInBytes;
  p.Height = v.Height;
  return p;
}

// cuMemsetD2D8/16/32: `height` rows of `width` elements of `size` bytes, `pitch` bytes apart.
CUresult memset_2d(CUdeviceptr dst, std::size_t pitch, unsigned value, std::size_t size,
                   std::size_t width, std::size_t height, CUstream stream) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (current_device() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
    if (!valid_stream(stream)) return CUDA_ERROR_INVALID_HANDLE;
    if (CUresult rc = CUDA_SUCCESS; captured(
            stream,
            [=](CUstream on) { return memset_2d(dst, pitch, value, size, width, height, on); },
            &rc))
      return rc;
    if (width > SIZE_MAX / size) return CUDA_ERROR_INVALID_VALUE;
    if (height > 1 && pitch < width * size) return CUDA_ERROR_INVALID_VALUE;
    if (width == 0 || height == 0) return CUDA_SUCCESS;
    if (height - 1 > (SIZE_MAX - width * size) / std::max<std::size_t>(pitch, 1) ||
        find_allocation(dst, (height - 1) * pitch + width * size) == nullptr)
      return CUDA_ERROR_INVALID_VALUE;
  }
  if (pitch == width * size) return memset_device(dst, value, size, width * height, stream);
  for (std::size_t row = 0; row < height; ++row) {
    if (CUresult rc = memset_device(dst + row * pitch, value, size, width, stream);
        rc != CUDA_SUCCESS)
      return rc;
  }
  return CUDA_SUCCESS;
}

// Checks that a host function may be queued on `stream` (the lock is released before it runs).
CUresult host_work(CUstream stream, const void* fn) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  std::lock_guard<std::mutex> lock(state().mutex);
  if (fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_stream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  if (current_device() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  return CUDA_SUCCESS;
}

// A managed range [ptr, ptr + count). Call with the mutex held.
bool managed(CUdeviceptr ptr, std::size_t count) {
  const Allocation* a = find_allocation(ptr, count);
  return count > 0 && a != nullptr && a->managed;
}

// A destination of a prefetch or a location of advice: the host, or a device (by ordinal for a
// CUmemLocation) that can access managed memory concurrently with the host.
CUresult location_ok(const CUmemLocation& where) {
  switch (where.type) {
    case 1: {  // CU_MEM_LOCATION_TYPE_DEVICE
      const Device* d = device_at(where.id);
      if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
      const std::optional<int> concurrent = attribute_value(state(), *d, 89);
      return concurrent.value_or(0) != 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
    }
    case 2:  // HOST
    case 4:  // HOST_NUMA_CURRENT
      return CUDA_SUCCESS;
    case 3:  // HOST_NUMA: a NUMA node id
      return where.id >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

// The legacy calls' CUdevice: a device handle, or CU_DEVICE_CPU (-1).
CUmemLocation location_of(CUdevice dev) {
  if (dev == -1) return CUmemLocation{2, 0};
  const int index = index_of(dev);
  return CUmemLocation{1, index < 0 ? -1 : index};
}

CUresult prefetch(CUdeviceptr ptr, std::size_t count, CUmemLocation where, unsigned flags,
                  CUstream stream) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  std::lock_guard<std::mutex> lock(state().mutex);
  if (current_device() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (!valid_stream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  if (flags != 0 || !managed(ptr, count)) return CUDA_ERROR_INVALID_VALUE;
  return location_ok(where);  // managed memory is where it is needed already: nothing moves
}

CUresult advise(CUdeviceptr ptr, std::size_t count, int advice, CUmemLocation where) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  std::lock_guard<std::mutex> lock(state().mutex);
  if (current_device() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (advice < 1 || advice > 6 || !managed(ptr, count)) return CUDA_ERROR_INVALID_VALUE;
  if (advice <= 2 || advice == 4) return CUDA_SUCCESS;  // read-mostly, unset preferred: no location
  return location_ok(where);
}

}  // namespace

namespace impl {

CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D* p) {
  return copy_2d(p, nullptr);
}
CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D* p, CUstream stream) {
  return copy_2d(p, stream);
}
CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D* p) {
  return copy_2d(p, nullptr);
}
CUresult cuMemcpy2D(const CUDA_MEMCPY2D_v1* p) {
  if (p == nullptr) return copy_2d(nullptr, nullptr);
  const CUDA_MEMCPY2D wide = widen(*p);
  return copy_2d(&wide, nullptr);
}
CUresult cuMemcpy2DAsync(const CUDA_MEMCPY2D_v1* p, CUstream stream) {
  if (p == nullptr) return copy_2d(nullptr, stream);
  const CUDA_MEMCPY2D wide = widen(*p);
  return copy_2d(&wide, stream);
}
CUresult cuMemcpy2DUnaligned(const CUDA_MEMCPY2D_v1* p) {
  return cuMemcpy2D(p);
}

CUresult cuMemsetD2D8_v2(CUdeviceptr dst, std::size_t pitch, unsigned char value, std::size_t width,
                         std::size_t height) {
  return memset_2d(dst, pitch, value, 1, width, height, nullptr);
}
CUresult cuMemsetD2D16_v2(CUdeviceptr dst, std::size_t pitch, unsigned short value,
                          std::size_t width, std::size_t height) {
  return memset_2d(dst, pitch, value, 2, width, height, nullptr);
}
CUresult cuMemsetD2D32_v2(CUdeviceptr dst, std::size_t pitch, unsigned int value, std::size_t width,
                          std::size_t height) {
  return memset_2d(dst, pitch, value, 4, width, height, nullptr);
}
CUresult cuMemsetD2D8Async(CUdeviceptr dst, std::size_t pitch, unsigned char value,
                           std::size_t width, std::size_t height, CUstream stream) {
  return memset_2d(dst, pitch, value, 1, width, height, stream);
}
CUresult cuMemsetD2D16Async(CUdeviceptr dst, std::size_t pitch, unsigned short value,
                            std::size_t width, std::size_t height, CUstream stream) {
  return memset_2d(dst, pitch, value, 2, width, height, stream);
}
CUresult cuMemsetD2D32Async(CUdeviceptr dst, std::size_t pitch, unsigned int value,
                            std::size_t width, std::size_t height, CUstream stream) {
  return memset_2d(dst, pitch, value, 4, width, height, stream);
}

CUresult cuLaunchHostFunc(CUstream stream, CUhostFn fn, void* data) {
  if (CUresult rc = host_work(stream, reinterpret_cast<const void*>(fn)); rc != CUDA_SUCCESS)
    return rc;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (CUresult rc = CUDA_SUCCESS; captured(
            stream,
            [fn, data](CUstream) -> CUresult {
              fn(data);
              return CUDA_SUCCESS;
            },
            &rc))
      return rc;
  }
  fn(data);
  return CUDA_SUCCESS;
}

CUresult cuStreamAddCallback(CUstream stream, CUstreamCallback callback, void* data,
                             unsigned int flags) {
  if (CUresult rc = host_work(stream, reinterpret_cast<const void*>(callback)); rc != CUDA_SUCCESS)
    return rc;
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  {
    // The driver refuses stream callbacks in a capture (cuLaunchHostFunc is the capturable form).
    std::lock_guard<std::mutex> lock(state().mutex);
    if (capture_refuses_wait(stream)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  callback(stream, CUDA_SUCCESS, data);
  return CUDA_SUCCESS;
}

CUresult cuMemPrefetchAsync(CUdeviceptr ptr, std::size_t count, CUdevice dev, CUstream stream) {
  return prefetch(ptr, count, location_of(dev), 0, stream);
}
CUresult cuMemPrefetchAsync_v2(CUdeviceptr ptr, std::size_t count, CUmemLocation where,
                               unsigned int flags, CUstream stream) {
  return prefetch(ptr, count, where, flags, stream);
}
CUresult cuMemAdvise(CUdeviceptr ptr, std::size_t count, int advice, CUdevice dev) {
  return advise(ptr, count, advice, location_of(dev));
}
CUresult cuMemAdvise_v2(CUdeviceptr ptr, std::size_t count, int advice, CUmemLocation where) {
  return advise(ptr, count, advice, where);
}

// The flags cuMemHostAlloc was given for the allocation holding `p` (0 for cuMemAllocHost's).
CUresult cuMemHostGetFlags(unsigned int* flags, void* p) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (current_device() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (flags == nullptr || p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto it = s.pinned.upper_bound(p);
  if (it == s.pinned.begin()) return CUDA_ERROR_INVALID_VALUE;
  --it;
  if (static_cast<const char*>(p) - static_cast<const char*>(it->first) >=
      static_cast<std::ptrdiff_t>(it->second))
    return CUDA_ERROR_INVALID_VALUE;
  *flags = s.pinned_flags[it->first];
  return CUDA_SUCCESS;
}

}  // namespace impl

}  // namespace gpusel::sim::cuda
