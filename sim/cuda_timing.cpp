// The simulated libcuda.so.1's time: streams and events, and the simulated seconds each copy or
// memset takes on its device's links. Work completes as it is queued; only simulated time advances.
#include "cuda_sim.hpp"

#include <algorithm>
#include <cstdint>
#include <iterator>

namespace gpusel::sim::cuda {

CUstream normal_stream(CUstream stream) {
  const auto value = reinterpret_cast<std::uintptr_t>(stream);
  return value == 1 || value == 2 ? nullptr : stream;
}

CUstream_st* stream_of(CUstream stream, Device& d) {
  stream = normal_stream(stream);
  return stream == nullptr ? &d.legacy_stream : stream;
}

bool valid_stream(CUstream stream) {
  stream = normal_stream(stream);
  return stream == nullptr || state().streams.count(stream) > 0;
}

namespace {

// Queues `seconds` of work on the stream behind whatever it and the link (`link_free`) hold.
// The legacy stream also waits for, and holds back, every blocking stream of its device.
void queue(Device& d, CUstream stream, double* link_free, double seconds) {
  State& s = state();
  stream = normal_stream(stream);
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

}  // namespace

// Per link and direction: NVLink 1 20 GB/s, NVLink 2 to 4 25 GB/s, NVLink 5 50 GB/s.
double nvlink_gbps(unsigned links, unsigned version) {
  const double per_link = version <= 1 ? 20.0 : (version >= 5 ? 50.0 : 25.0);
  return per_link * links;
}

// The PCIe link as trained now (generation x width, per direction after line coding), else the
// machine file's pcie_link_gbps, else its measured host copy rates.
double pcie_gbps(const SimGpu& g) {
  static constexpr double kLane[] = {0, 0.25, 0.5, 0.985, 1.969, 3.938, 7.563};
  if (g.pcie_generation > 0 && g.pcie_generation < std::size(kLane) && g.pcie_width > 0)
    return kLane[g.pcie_generation] * g.pcie_width;
  if (g.pcie_link_gbps > 0) return g.pcie_link_gbps;
  return std::min(g.pcie_h2d_gbps, g.pcie_d2h_gbps) / kPciePeerEfficiency;
}

void account(Device& d, CUstream stream, Link link, std::size_t bytes) {
  const SimGpu& g = gpu_of(state(), d);
  const auto b = static_cast<double>(bytes);
  switch (link) {
    case Link::H2D:
      queue(d, stream, &d.h2d_free, b / (g.pcie_h2d_gbps * 1e9));
      break;
    case Link::D2H:
      queue(d, stream, &d.d2h_free, b / (g.pcie_d2h_gbps * 1e9));
      break;
    case Link::Local:  // a device-local copy reads and writes every byte
      queue(d, stream, &d.local_free, 2.0 * b / (g.memory_bandwidth_gbps * 1e9));
      break;
    case Link::Peer:
    case Link::Staged:
      break;  // account_between
  }
}

// Peer: NVLink (the fewer links of the two GPUs) where they share an NVLink domain, else the
// slower PCIe link of the two, each at its efficiency. Staged: the source's device-to-host copy
// then the destination's host-to-device copy, one after the other, at their measured rates.
void account_between(Device& d, CUstream stream, Link link, const Device& from, const Device& to,
                     std::size_t bytes) {
  const State& s = state();
  const SimGpu& a = gpu_of(s, from);
  const SimGpu& b = gpu_of(s, to);
  const auto n = static_cast<double>(bytes);
  double seconds = 0;
  if (link == Link::Staged) {
    seconds = n / (a.pcie_d2h_gbps * 1e9) + n / (b.pcie_h2d_gbps * 1e9);
  } else if (gpusel::sim::nvlink_between(a, b) && std::min(a.nvlinks, b.nvlinks) > 0) {
    const double gbps =
        nvlink_gbps(std::min(a.nvlinks, b.nvlinks), std::min(a.nvlink_version, b.nvlink_version));
    seconds = n / (gbps * kNvlinkEfficiency * 1e9);
  } else {
    seconds = n / (std::min(pcie_gbps(a), pcie_gbps(b)) * kPciePeerEfficiency * 1e9);
  }
  queue(d, stream, &d.peer_free, seconds);
}

namespace impl {

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

// Priorities do not change simulated time; the value is kept for cuStreamGetPriority, clamped to
// cuCtxGetStreamPriorityRange's [-5, 0] as the driver does.
CUresult cuStreamCreateWithPriority(CUstream* stream, unsigned int flags, int priority) {
  const CUresult rc = cuStreamCreate(stream, flags);
  if (rc == CUDA_SUCCESS) (*stream)->priority = std::clamp(priority, -5, 0);
  return rc;
}

CUresult cuStreamDestroy_v2(CUstream stream) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.streams.count(stream) == 0) return CUDA_ERROR_INVALID_HANDLE;
  forget_capture(s, stream);
  s.streams.erase(stream);
  delete stream;
  return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream stream) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!valid_stream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  if (normal_stream(stream) == nullptr && current_device() == nullptr)
    return CUDA_ERROR_INVALID_CONTEXT;
  if (capture_refuses_wait(stream)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  return CUDA_SUCCESS;  // work completes as it is queued; only simulated time advances
}

// Work completes as it is queued (only simulated time advances): nothing is ever pending.
CUresult cuStreamQuery(CUstream stream) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!valid_stream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  if (normal_stream(stream) == nullptr && current_device() == nullptr)
    return CUDA_ERROR_INVALID_CONTEXT;
  if (capture_refuses_wait(stream)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  return CUDA_SUCCESS;
}

CUresult cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!valid_stream(stream) || s.events.count(event) == 0) return CUDA_ERROR_INVALID_HANDLE;
  Device* d = current_device();
  if (d == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (CUgraph g = event->captured_in; g != nullptr) {
    // Waiting for an event of a capture draws this stream into it (the fork of fork-join).
    CUstream_st* joining = normal_stream(stream);
    if (joining == nullptr) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // the legacy stream
    if (joining->capture != nullptr && joining->capture != g)
      return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // two captures would merge
    joining->capture = g;
    return CUDA_SUCCESS;
  }
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
  stream = normal_stream(stream);
  event->captured_in = stream != nullptr ? stream->capture : nullptr;
  if (event->captured_in != nullptr) return CUDA_SUCCESS;  // a point in the capture, not a time
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

CUresult cuEventQuery(CUevent event) {
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

}  // namespace impl

}  // namespace gpusel::sim::cuda
