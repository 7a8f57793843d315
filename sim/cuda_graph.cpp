// Stream capture and the graphs it makes (CUDA 10's cuStreamBeginCapture ... cuGraphLaunch). Work
// issued to a capturing stream is recorded, not run; launching the instantiated graph runs it on
// the stream given, in the order it was captured. A capture spreads to another stream that waits
// for an event recorded in the capturing one (the fork-join pattern), and ends on the stream it
// began on. Modelled: copies, memsets, host functions and nested graph launches. Not modelled:
// kernels (the simulator runs none), graphs built node by node (cuGraphAdd*Node), capture modes
// beyond their check, and cuStreamGetCaptureInfo.
#include <algorithm>
#include <utility>

#include "cuda_sim.hpp"

namespace gpusel::sim::cuda {

namespace {

constexpr int kCaptureStatusNone = 0;    // CU_STREAM_CAPTURE_STATUS_NONE
constexpr int kCaptureStatusActive = 1;  // CU_STREAM_CAPTURE_STATUS_ACTIVE
constexpr int kCaptureStatusInvalidated = 2;
constexpr int kCaptureModeRelaxed = 2;                 // the last CUstreamCaptureMode
constexpr unsigned long long kInstantiateFlags = 0xf;  // auto-free, upload, device launch, priority

// The stream object a handle names for capture purposes; nullptr for the legacy stream (which is
// never captured).
CUstream_st* capturable(CUstream stream) {
  return normal_stream(stream);
}

// Ends the capture into `g` on every stream it reached.
void end_capture(State& s, CUgraph g) {
  for (CUstream st : s.streams) {
    if (st->capture == g) {
      st->capture = nullptr;
      st->capture_origin = false;
    }
  }
  for (CUevent e : s.events) {
    if (e->captured_in == g) e->captured_in = nullptr;
  }
}

}  // namespace

bool captured(CUstream stream, std::function<CUresult(CUstream)> work, CUresult* rc) {
  CUstream_st* st = capturable(stream);
  if (st == nullptr || st->capture == nullptr) return false;
  if (st->capture->invalidated) {
    *rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  } else {
    st->capture->nodes.push_back(std::make_unique<CUgraphNode_st>(CUgraphNode_st{std::move(work)}));
    *rc = CUDA_SUCCESS;
  }
  return true;
}

bool capture_refuses_wait(CUstream stream) {
  CUstream_st* st = capturable(stream);
  if (st == nullptr || st->capture == nullptr) return false;
  st->capture->invalidated = true;
  return true;
}

void forget_capture(State& s, CUstream stream) {
  if (stream->capture == nullptr || !stream->capture_origin) return;
  CUgraph g = stream->capture;
  end_capture(s, g);
  delete g;
}

namespace impl {

CUresult cuStreamBeginCapture_v2(CUstream stream, int mode) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!valid_stream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  if (mode < 0 || mode > kCaptureModeRelaxed) return CUDA_ERROR_INVALID_VALUE;
  CUstream_st* st = capturable(stream);
  if (st == nullptr) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // the legacy stream
  if (st->capture != nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  st->capture = new CUgraph_st;
  st->capture_origin = true;
  return CUDA_SUCCESS;
}

CUresult cuStreamEndCapture(CUstream stream, CUgraph* graph) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!valid_stream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  if (graph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUstream_st* st = capturable(stream);
  if (st == nullptr || st->capture == nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  if (!st->capture_origin) return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
  CUgraph g = st->capture;
  end_capture(s, g);
  if (g->invalidated) {
    delete g;
    *graph = nullptr;
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  s.graphs.insert(g);
  *graph = g;
  return CUDA_SUCCESS;
}

CUresult cuStreamIsCapturing(CUstream stream, int* status) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_stream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  if (normal_stream(stream) == nullptr && current_device() == nullptr)
    return CUDA_ERROR_INVALID_CONTEXT;
  const CUstream_st* st = capturable(stream);
  *status = st == nullptr || st->capture == nullptr ? kCaptureStatusNone
            : st->capture->invalidated              ? kCaptureStatusInvalidated
                                                    : kCaptureStatusActive;
  return CUDA_SUCCESS;
}

CUresult cuGraphCreate(CUgraph* graph, unsigned int flags) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (graph == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  *graph = new CUgraph_st;
  s.graphs.insert(*graph);
  return CUDA_SUCCESS;
}

CUresult cuGraphGetNodes(CUgraph graph, CUgraphNode* nodes, std::size_t* count) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.graphs.count(graph) == 0 || count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (nodes != nullptr) {
    // As the driver: up to *count handles, the rest of the array NULL, *count the number written.
    const std::size_t n = std::min(*count, graph->nodes.size());
    for (std::size_t i = 0; i < *count; ++i) nodes[i] = i < n ? graph->nodes[i].get() : nullptr;
    *count = n;
  } else {
    *count = graph->nodes.size();
  }
  return CUDA_SUCCESS;
}

CUresult cuGraphDestroy(CUgraph graph) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.graphs.erase(graph) == 0) return CUDA_ERROR_INVALID_VALUE;
  delete graph;
  return CUDA_SUCCESS;
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long flags) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (exec == nullptr || s.graphs.count(graph) == 0 || (flags & ~kInstantiateFlags) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (current_device() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  auto* e = new CUgraphExec_st;
  for (const auto& node : graph->nodes) e->work.push_back(node->work);
  s.graph_execs.insert(e);
  *exec = e;
  return CUDA_SUCCESS;
}

CUresult cuGraphExecDestroy(CUgraphExec exec) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.graph_execs.erase(exec) == 0) return CUDA_ERROR_INVALID_VALUE;
  delete exec;
  return CUDA_SUCCESS;
}

// Runs the graph's work on `stream` in capture order, stopping at the first failure (which the
// launch returns; on hardware it would surface at the next synchronisation).
CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  std::vector<std::function<CUresult(CUstream)>> work;
  {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.graph_execs.count(exec) == 0) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_stream(stream)) return CUDA_ERROR_INVALID_HANDLE;
    if (current_device() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
    work = exec->work;
    CUresult rc = CUDA_SUCCESS;
    const auto replay = [work](CUstream on) -> CUresult {
      for (const auto& w : work) {
        if (CUresult r = w(on); r != CUDA_SUCCESS) return r;
      }
      return CUDA_SUCCESS;
    };
    if (captured(stream, replay, &rc)) return rc;  // a launch captured into another graph
  }
  for (const auto& w : work) {
    if (CUresult rc = w(stream); rc != CUDA_SUCCESS) return rc;
  }
  return CUDA_SUCCESS;
}

}  // namespace impl

}  // namespace gpusel::sim::cuda
