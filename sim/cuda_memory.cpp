// The simulated libcuda.so.1's memory: device memory is real host memory (reserved lazily),
// pinned host memory is tracked by range, and copies move real bytes while cuda_timing.cpp
// charges them simulated time from the machine's bandwidth figures.
#include "cuda_sim.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>

#include "copy_sample.hpp"
#include "usage.hpp"

namespace gpusel::sim::cuda {

namespace {

bool within(const std::map<const void*, std::size_t>& ranges, const void* host, std::size_t size) {
  auto it = ranges.upper_bound(host);
  if (it == ranges.begin()) return false;
  --it;
  auto base = static_cast<const char*>(it->first);
  auto p = static_cast<const char*>(host);
  return p >= base && p + size <= base + it->second;
}

// Free memory on the device, device-wide: its total less this process's context and allocations
// and what other processes hold there. Call with the mutex held.
std::uint64_t free_memory(const Device& d) {
  const State& s = state();
  const std::uint64_t used =
      d.memory_used + gpusel::sim::kContextBytes +
      gpusel::sim::others_memory(s.loaded.machine(), gpu_of(s, d), d.mig, "libcuda.so.1");
  return used >= d.memory_total ? 0 : d.memory_total - used;
}

// The path of a copy between two devices of this process: their link when peer access is
// possible and enabled between their contexts, else staged through host memory.
Link peer_link(const Device& from, const Device& to) {
  if (&from == &to) return Link::Local;
  if (!peer_access(from, to)) return Link::Staged;
  auto enabled = [](const CUctx_st& ctx, const Device& other) {
    return ctx.peers.count(const_cast<CUctx_st*>(&other.primary)) > 0;
  };
  bool on = enabled(from.primary, to) || enabled(to.primary, from);
  for (CUcontext c : state().created) {
    if (c->destroyed) continue;
    const Device& owner = state().devices[static_cast<std::size_t>(c->device)];
    if (&owner == &from) on = on || enabled(*c, to);
    if (&owner == &to) on = on || enabled(*c, from);
  }
  return on ? Link::Peer : Link::Staged;
}

}  // namespace

CUresult copy(CUdeviceptr dst_dev, void* dst_host, CUdeviceptr src_dev, const void* src_host,
              std::size_t bytes, CUstream stream) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Device* d = current_device();
  if (d == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (!valid_stream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult rc = CUDA_SUCCESS; captured(
          stream,
          [=](CUstream on) { return copy(dst_dev, dst_host, src_dev, src_host, bytes, on); }, &rc))
    return rc;
  if (bytes == 0) return CUDA_SUCCESS;
  // Pinned host memory has a device address, its own (unified addressing): a copy from or to it
  // by that address is a copy from or to host memory.
  if (dst_dev != 0 && find_allocation(dst_dev, bytes) == nullptr &&
      is_pinned(reinterpret_cast<const void*>(dst_dev), bytes)) {
    dst_host = reinterpret_cast<void*>(dst_dev);
    dst_dev = 0;
  }
  if (src_dev != 0 && find_allocation(src_dev, bytes) == nullptr &&
      is_pinned(reinterpret_cast<const void*>(src_dev), bytes)) {
    src_host = reinterpret_cast<const void*>(src_dev);
    src_dev = 0;
  }
  if (dst_dev == 0 && src_dev == 0 && dst_host != nullptr && src_host != nullptr) {
    std::memmove(dst_host, src_host, bytes);  // host to host: no link charged
    return CUDA_SUCCESS;
  }
  const Allocation* dst_alloc = dst_dev != 0 ? find_allocation(dst_dev, bytes) : nullptr;
  const Allocation* src_alloc = src_dev != 0 ? find_allocation(src_dev, bytes) : nullptr;
  if ((dst_dev != 0 && dst_alloc == nullptr) || (src_dev != 0 && src_alloc == nullptr))
    return CUDA_ERROR_INVALID_VALUE;
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
  if (link == Link::Local) {
    const Device& src_device = s.devices[static_cast<std::size_t>(src_alloc->device)];
    const Device& dst_device = s.devices[static_cast<std::size_t>(dst_alloc->device)];
    link = peer_link(src_device, dst_device);
    if (link != Link::Local) {
      account_between(*d, stream, link, src_device, dst_device, bytes);
      return CUDA_SUCCESS;
    }
  }
  if (link == Link::D2H && s.loaded.machine().faults.corrupt_copies) {
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

// cuMemsetD8/D16/D32 (element size 1, 2 or 4), on the legacy stream or `stream`.
CUresult memset_device(CUdeviceptr dst, unsigned int value, std::size_t size, std::size_t count,
                       CUstream stream) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Device* d = current_device();
  if (d == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (!valid_stream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult rc = CUDA_SUCCESS; captured(
          stream, [=](CUstream on) { return memset_device(dst, value, size, count, on); }, &rc))
    return rc;
  if (dst % size != 0 || count > SIZE_MAX / size || find_allocation(dst, count * size) == nullptr)
    return CUDA_ERROR_INVALID_VALUE;
  if (size == 4) {
    auto* p = reinterpret_cast<unsigned int*>(dst);
    std::fill(p, p + count, value);
  } else if (size == 2) {
    auto* p = reinterpret_cast<unsigned short*>(dst);
    std::fill(p, p + count, static_cast<unsigned short>(value & 0xffffu));
  } else {
    std::memset(reinterpret_cast<void*>(dst), static_cast<int>(value & 0xffu), count);
  }
  // A memset writes every byte once: half the traffic of a copy of the same size.
  account(*d, stream, Link::Local, count * size / 2);
  return CUDA_SUCCESS;
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

bool is_pinned(const void* host, std::size_t size) {
  return within(state().pinned, host, size) || within(state().registered, host, size);
}

namespace impl {

CUresult cuMemAlloc_v2(CUdeviceptr* ptr, std::size_t bytes) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Device* d = current_device();
  if (d == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (ptr == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  // Past what is free on the device (other processes' use counted) fails, as on hardware.
  if (bytes > free_memory(*d)) return CUDA_ERROR_OUT_OF_MEMORY;
  void* p = reserve_host_memory(bytes);
  if (p == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  *ptr = reinterpret_cast<CUdeviceptr>(p);
  s.allocations[*ptr] = Allocation{bytes, current_context->device};
  d->memory_used += bytes;
  gpusel::sim::note_usage(s.loaded.machine(), d->uuid, d->memory_used, "libcuda.so.1");
  return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr ptr) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.allocations.find(ptr);
  if (it == s.allocations.end()) return CUDA_ERROR_INVALID_VALUE;
  release_host_memory(reinterpret_cast<void*>(ptr), it->second.size);
  Device& owner = s.devices[static_cast<std::size_t>(it->second.device)];
  owner.memory_used -= it->second.size;
  gpusel::sim::note_usage(s.loaded.machine(), owner.uuid, owner.memory_used, "libcuda.so.1");
  s.allocations.erase(it);
  return CUDA_SUCCESS;
}

CUresult cuMemHostAlloc(void** ptr, std::size_t bytes, unsigned int flags) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (ptr == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (current_device() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  void* p = reserve_host_memory(bytes);
  if (p == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  s.pinned[p] = bytes;
  s.pinned_flags[p] = flags;
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
  release_host_memory(ptr, it->second);
  s.pinned.erase(it);
  s.pinned_flags.erase(ptr);
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

// Free is the device's: what neither this process (its context included) nor any other holds.
CUresult cuMemGetInfo_v2(std::size_t* free, std::size_t* total) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  std::lock_guard<std::mutex> lock(state().mutex);
  Device* d = current_device();
  if (d == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (free == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *total = d->memory_total;
  *free = free_memory(*d);
  return CUDA_SUCCESS;
}

CUresult cuMemAllocManaged(CUdeviceptr* ptr, std::size_t bytes, unsigned int flags) {
  if (flags != 1 && flags != 2) {  // CU_MEM_ATTACH_GLOBAL, CU_MEM_ATTACH_HOST
    if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
    return CUDA_ERROR_INVALID_VALUE;
  }
  const CUresult rc = cuMemAlloc_v2(ptr, bytes);
  if (rc == CUDA_SUCCESS) {
    std::lock_guard<std::mutex> lock(state().mutex);
    state().allocations[*ptr].managed = true;
  }
  return rc;
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, std::size_t* size, CUdeviceptr ptr) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.allocations.upper_bound(ptr);
  if (it != s.allocations.begin() && ptr - std::prev(it)->first < std::prev(it)->second.size) {
    --it;
    if (base != nullptr) *base = it->first;
    if (size != nullptr) *size = it->second.size;
    return CUDA_SUCCESS;
  }
  // Pinned host memory of cuMemHostAlloc is mapped at its own address (unified addressing).
  auto p = s.pinned.upper_bound(reinterpret_cast<const void*>(ptr));
  if (p == s.pinned.begin()) return CUDA_ERROR_NOT_FOUND;
  --p;
  const auto start = reinterpret_cast<CUdeviceptr>(p->first);
  if (ptr - start >= p->second) return CUDA_ERROR_NOT_FOUND;
  if (base != nullptr) *base = start;
  if (size != nullptr) *size = p->second;
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

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, std::size_t bytes) {
  return copy(dst, nullptr, 0, src, bytes, nullptr);
}

CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, std::size_t bytes) {
  return copy(0, dst, src, nullptr, bytes, nullptr);
}

CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes) {
  return copy(dst, nullptr, src, nullptr, bytes, nullptr);
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

CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, std::size_t count) {
  return memset_device(dst, value, 1, count, nullptr);
}

CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, std::size_t count, CUstream stream) {
  return memset_device(dst, value, 1, count, stream);
}

CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned int value, std::size_t count) {
  return memset_device(dst, value, 4, count, nullptr);
}

CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int value, std::size_t count, CUstream stream) {
  return memset_device(dst, value, 4, count, stream);
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
    case 4:  // HOST_POINTER: pinned and managed memory have one, the same address
      if (!host && !a->managed) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<void**>(data) = reinterpret_cast<void*>(ptr);
      break;
    case 8:  // IS_MANAGED (cuMemAllocManaged's, __managed__ variables)
      *static_cast<int*>(data) = a != nullptr && a->managed ? 1 : 0;
      break;
    case 9:  // DEVICE_ORDINAL
      *static_cast<int*>(data) = dev;
      break;
    case 10:  // IS_LEGACY_CUDA_IPC_CAPABLE: device memory (cuIpcGetMemHandle)
      *static_cast<int*>(data) = host ? 0 : 1;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

// Interprocess memory: a handle names an allocation (its base, size and device, and this
// process); opening one is not supported, since device memory here is the process's own (and
// CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED is 0).
CUresult cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr ptr) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const Allocation* a = find_allocation(ptr, 1);
  if (handle == nullptr || a == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto it = std::prev(s.allocations.upper_bound(ptr));
  *handle = CUipcMemHandle{};
  struct {
    char magic[16];
    std::uint64_t pid, base, size;
    std::int32_t device;
  } named{{'g', 'p', 'u', 's', 'e', 'l', '-', 's', 'i', 'm', ' ', 'i', 'p', 'c'},
          std::uint64_t{gpusel::sim::own_pid()},
          it->first,
          it->second.size,
          it->second.device};
  static_assert(sizeof named <= sizeof handle->reserved);
  std::memcpy(handle->reserved, &named, sizeof named);
  return CUDA_SUCCESS;
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

}  // namespace impl

}  // namespace gpusel::sim::cuda
