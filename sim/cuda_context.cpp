// The simulated libcuda.so.1's contexts: each device's primary context, contexts of cuCtxCreate,
// the calling thread's context stack, and per-context settings (limits, cache config, peers).
#include "cuda_sim.hpp"

#include <algorithm>
#include <cstddef>

#include "usage.hpp"

namespace gpusel::sim::cuda {

namespace {

// Context limits (CUlimit 0-6), one set per process here.
std::size_t limits[7] = {1024, 1048576, 8388608, 2, 2048, 64, 0};

int cache_config = 0;  // CU_FUNC_CACHE_PREFER_NONE

}  // namespace

namespace impl {

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
  gpusel::sim::note_usage(s.loaded.machine(), d->uuid, d->memory_used, "libcuda.so.1");
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
    if (it->second.device == index_of(dev)) {
      release_host_memory(reinterpret_cast<void*>(it->first), it->second.size);
      d->memory_used -= it->second.size;
      it = s.allocations.erase(it);
    } else {
      ++it;
    }
  }
  d->primary.retains = 0;
  gpusel::sim::note_usage(s.loaded.machine(), d->uuid, d->memory_used, "libcuda.so.1");
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxReset(CUdevice dev) {
  return cuDevicePrimaryCtxReset_v2(dev);
}

CUresult cuCtxCreate_v2(CUcontext* ctx, unsigned int flags, CUdevice dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Device* d = device(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (ctx == nullptr || (flags & ~0xFFu) != 0) return CUDA_ERROR_INVALID_VALUE;
  auto* c = new CUctx_st;  // kept after destruction: a stale handle stays readable
  c->device = index_of(dev);
  c->primary = false;
  c->flags = flags;
  s.created.insert(c);
  if (current_context != nullptr) context_stack.push_back(current_context);
  current_context = c;
  *ctx = c;
  gpusel::sim::note_usage(s.loaded.machine(), d->uuid, d->memory_used, "libcuda.so.1");
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

CUresult cuCtxGetDevice(CUdevice* dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (dev == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(state().mutex);
  if (current_device() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *dev = handle_of(current_context->device);
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

CUresult cuCtxSynchronize(void) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  std::lock_guard<std::mutex> lock(state().mutex);
  return current_device() == nullptr ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
}

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
  Device* p = device_at(peer->device);
  if (p == nullptr || p == d || !peer_access(*d, *p)) return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
  if (!current_context->peers.insert(peer).second) return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
  return CUDA_SUCCESS;
}

CUresult cuCtxDisablePeerAccess(CUcontext peer) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (current_device() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (!known_context(peer)) return CUDA_ERROR_INVALID_CONTEXT;
  if (current_context->peers.erase(peer) == 0) return CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
  return CUDA_SUCCESS;
}

}  // namespace impl

}  // namespace gpusel::sim::cuda
