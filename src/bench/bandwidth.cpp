// Copy bandwidth on the current CUDA context.
#include "gpusel/bandwidth.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#ifdef _WIN32
#include <malloc.h>
#endif
#include <functional>

#include "copy_sample.hpp"
#include "cuda_api.hpp"
#include "gpusel/error.hpp"
#include "gpusel_detail.hpp"

GPUSEL_BEGIN_NAMESPACE

using detail::cuda_error_text;
using detail::cuda_initialised;
using detail::CudaApi;

namespace {

// Page-aligned host memory (std::aligned_alloc is not available on Windows).
void* alloc_pages(std::size_t bytes) {
#ifdef _WIN32
  return _aligned_malloc(bytes, 4096);
#else
  return std::aligned_alloc(4096, bytes);
#endif
}

void free_pages(void* p) {
#ifdef _WIN32
  _aligned_free(p);
#else
  std::free(p);
#endif
}

// The word at `index` of sample `sample`'s pattern: distinct per sample, never all zero.
inline std::uint32_t pattern_word(std::size_t index, int sample) {
  return static_cast<std::uint32_t>(index * 2654435761u) ^
         (0x9E3779B9u * static_cast<std::uint32_t>(sample + 1));
}

// The byte ranges a test writes, clears and checks: the whole buffer, or with `sampled` only the
// bytes the simulator's sampled mode moves (copy_sample.hpp).
template <typename F>
void for_each_range(std::uint64_t bytes, bool sampled, F&& f) {
  if (sampled) {
    for_each_sampled_range(bytes, f);
  } else if (bytes > 0) {
    f(std::uint64_t{0}, bytes);
  }
}

void fill(void* buffer, std::uint64_t bytes, int sample, bool sampled) {
  auto* w = static_cast<std::uint32_t*>(buffer);
  for_each_range(bytes, sampled, [&](std::uint64_t at, std::uint64_t n) {
    for (std::size_t i = at / 4; i < (at + n) / 4; ++i) w[i] = pattern_word(i, sample);
  });
}

void clear(void* buffer, std::uint64_t bytes, bool sampled) {
  for_each_range(bytes, sampled, [&](std::uint64_t at, std::uint64_t n) {
    std::memset(static_cast<char*>(buffer) + at, 0, n);
  });
}

// Empty when the buffer holds the pattern, else where it first differs.
std::string check(const void* buffer, std::uint64_t bytes, int sample, bool sampled) {
  const auto* w = static_cast<const std::uint32_t*>(buffer);
  std::string bad;
  for_each_range(bytes, sampled, [&](std::uint64_t at, std::uint64_t n) {
    if (!bad.empty()) return;
    for (std::size_t i = at / 4; i < (at + n) / 4; ++i) {
      if (w[i] != pattern_word(i, sample)) {
        bad = "data mismatch at byte " + std::to_string(i * 4) + " of sample " +
              std::to_string(sample + 1);
        return;
      }
    }
  });
  return bad;
}

struct Cuda {
  const CudaApi& api;
  void operator()(CUresult rc, const char* what) const {
    if (rc != CUDA_SUCCESS) {
      throw failure(std::string(what) + " failed: " + cuda_error_text(api, rc),
                    Problem{ErrorCode::DriverCallFailed, what, rc});
    }
  }
};

// Device and host memory for the whole run, released however the run ends.
struct Memory {
  const CudaApi& api;
  CUdeviceptr a = 0, b = 0;
  void* pinned[2] = {nullptr, nullptr};
  void* pageable = nullptr;
  ~Memory() {
    if (a) api.cuMemFree(a);
    if (b) api.cuMemFree(b);
    for (void* p : pinned) {
      if (p) api.cuMemFreeHost(p);
    }
    free_pages(pageable);
  }
};

// The optional driver functions measuring bandwidth calls (cuda.def marks memory, streams and
// events optional: binding needs none of them).
using BandwidthNeeds = detail::CudaNeeds<
    &CudaApi::cuMemAlloc, &CudaApi::cuMemFree, &CudaApi::cuMemHostAlloc, &CudaApi::cuMemFreeHost,
    &CudaApi::cuMemcpyHtoDAsync, &CudaApi::cuMemcpyDtoHAsync, &CudaApi::cuMemcpyDtoDAsync,
    &CudaApi::cuStreamCreate, &CudaApi::cuStreamDestroy, &CudaApi::cuStreamSynchronize,
    &CudaApi::cuStreamWaitEvent, &CudaApi::cuEventCreate, &CudaApi::cuEventRecord,
    &CudaApi::cuEventSynchronize, &CudaApi::cuEventElapsedTime, &CudaApi::cuEventDestroy>;

// What p2p calls besides BandwidthNeeds.
using PeerNeeds = detail::CudaNeeds<&CudaApi::cuCtxGetDevice, &CudaApi::cuDeviceCanAccessPeer,
                                    &CudaApi::cuCtxEnablePeerAccess, &CudaApi::cuMemcpyPeerAsync>;

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

double pcie_link_gbps(unsigned generation, unsigned width) {
  // Per lane and direction, after line coding (8b/10b up to Gen2, 128b/130b from Gen3).
  static constexpr double kLane[] = {0, 0.25, 0.5, 0.985, 1.969, 3.938, 7.563};
  if (generation == 0 || generation >= std::size(kLane) || width == 0) return 0;
  return kLane[generation] * width;
}

namespace {

// The device, pinned and pageable buffers the tests asked for need; throws when one cannot be had.
void allocate(const CudaApi& api, const BandwidthOptions& options, Memory& mem) {
  const Cuda ok{api};
  const std::uint64_t size = options.bytes;
  auto wants = [&](const char* t) {
    return std::find(options.tests.begin(), options.tests.end(), t) != options.tests.end();
  };
  const bool second_device = wants("d2d") || wants("bidir");
  auto alloc_device = [&](CUdeviceptr* p) {
    CUresult rc = api.cuMemAlloc(p, size);
    if (rc == CUDA_ERROR_OUT_OF_MEMORY) {
      throw failure("cannot allocate " + std::string(second_device ? "2 x " : "") +
                        detail::format_bytes(size) +
                        " of device memory (CUDA_ERROR_OUT_OF_MEMORY); choose a smaller --size",
                    Problem{ErrorCode::DriverCallFailed, "cuMemAlloc_v2", rc});
    }
    ok(rc, "cuMemAlloc_v2");
  };
  alloc_device(&mem.a);
  if (second_device) alloc_device(&mem.b);
  // Host buffers come after the caller bound this process near its GPU, so they land there.
  for (int i = 0; i < (wants("bidir") ? 2 : 1); ++i) {
    CUresult rc = api.cuMemHostAlloc(&mem.pinned[i], size, 0);
    if (rc != CUDA_SUCCESS) {
      throw failure("cannot allocate " + detail::format_bytes(size) + " of pinned host memory (" +
                        cuda_error_text(api, rc) + "); choose a smaller --size",
                    Problem{ErrorCode::DriverCallFailed, "cuMemHostAlloc", rc});
    }
  }
  if (wants("h2d-pageable") || wants("d2h-pageable")) {
    mem.pageable = alloc_pages((size + 4095) / 4096 * 4096);
    if (mem.pageable == nullptr)
      throw failure("cannot allocate " + detail::format_bytes(size) + " of host memory");
  }
}

// Two streams and three events for the whole run, and the timing of copies queued on them.
class CopyTimer {
 public:
  explicit CopyTimer(const CudaApi& api) : api_(api), ok_{api} {
    ok_(api.cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    ok_(api.cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    ok_(api.cuEventCreate(&start_, 0), "cuEventCreate");
    ok_(api.cuEventCreate(&end_, 0), "cuEventCreate");
    ok_(api.cuEventCreate(&mid_, 0), "cuEventCreate");
  }
  ~CopyTimer() {
    for (CUevent x : {start_, end_, mid_}) {
      if (x != nullptr) api_.cuEventDestroy(x);
    }
    for (CUstream x : {s1, s2}) {
      if (x != nullptr) api_.cuStreamDestroy(x);
    }
  }
  CopyTimer(const CopyTimer&) = delete;
  CopyTimer& operator=(const CopyTimer&) = delete;

  void sync(CUstream s) const { ok_(api_.cuStreamSynchronize(s), "cuStreamSynchronize"); }

  // Milliseconds for `copies` copies queued by `enqueue` on s1 (and s2, for bidir). At the
  // default sizes each copy takes milliseconds, so the few microseconds of host-side queuing
  // between the start event and the first copy stay far below 0.1% of the timed span.
  double timed(const std::function<void()>& enqueue, bool both_streams, int copies) const {
    ok_(api_.cuEventRecord(start_, s1), "cuEventRecord");
    if (both_streams) ok_(api_.cuStreamWaitEvent(s2, start_, 0), "cuStreamWaitEvent");
    for (int c = 0; c < copies; ++c) enqueue();
    if (both_streams) {
      ok_(api_.cuEventRecord(mid_, s2), "cuEventRecord");
      ok_(api_.cuStreamWaitEvent(s1, mid_, 0), "cuStreamWaitEvent");
    }
    ok_(api_.cuEventRecord(end_, s1), "cuEventRecord");
    ok_(api_.cuEventSynchronize(end_), "cuEventSynchronize");
    float ms = 0;
    ok_(api_.cuEventElapsedTime(&ms, start_, end_), "cuEventElapsedTime");
    return static_cast<double>(ms);
  }

  CUstream s1 = nullptr, s2 = nullptr;

 private:
  const CudaApi& api_;
  const Cuda ok_;
  CUevent start_ = nullptr, end_ = nullptr, mid_ = nullptr;
};

// The far side of a p2p copy: the peer device's primary context, retained, and a buffer there;
// released however the test ends. `own` is the calling thread's context, current again after
// each call.
class Peer {
 public:
  Peer(const CudaApi& api, int ordinal, std::uint64_t bytes, BandwidthResult& r) : api_(api) {
    try {
      set_up(ordinal, bytes, r);
    } catch (...) {
      release();  // a constructor that throws runs no destructor
      throw;
    }
  }
  ~Peer() { release(); }
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;

  CUcontext own = nullptr;
  CUcontext context = nullptr;
  CUdeviceptr buffer = 0;

 private:
  void set_up(int ordinal, std::uint64_t bytes, BandwidthResult& r) {
    const CudaApi& api = api_;
    const Cuda ok{api};
    ok(api.cuCtxGetCurrent(&own), "cuCtxGetCurrent");
    CUdevice own_device = 0;
    ok(api.cuCtxGetDevice(&own_device), "cuCtxGetDevice");
    ok(api.cuDeviceGet(&device_, ordinal), "cuDeviceGet");
    CUuuid uuid{};
    ok(api.cuDeviceGetUuid(&uuid, device_), "cuDeviceGetUuid_v2");
    r.peer_uuid = detail::format_uuid(reinterpret_cast<const unsigned char*>(uuid.bytes));
    ok(api.cuDevicePrimaryCtxRetain(&context, device_), "cuDevicePrimaryCtxRetain");
    retained_ = true;
    // Peer access where the devices allow it; otherwise the driver stages each copy through host
    // memory, which is what such a pair gets, and what is measured.
    int can = 0;
    ok(api.cuDeviceCanAccessPeer(&can, own_device, device_), "cuDeviceCanAccessPeer");
    if (can != 0) {
      const CUresult rc = api.cuCtxEnablePeerAccess(context, 0);
      if (rc != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) ok(rc, "cuCtxEnablePeerAccess");
      r.peer_access = true;
    }
    ok(api.cuCtxSetCurrent(context), "cuCtxSetCurrent");
    const CUresult rc = api.cuMemAlloc(&buffer, bytes);
    api.cuCtxSetCurrent(own);
    if (rc == CUDA_ERROR_OUT_OF_MEMORY) {
      throw failure("cannot allocate " + detail::format_bytes(bytes) +
                        " of device memory on the peer (CUDA_ERROR_OUT_OF_MEMORY); choose a "
                        "smaller --size",
                    Problem{ErrorCode::DriverCallFailed, "cuMemAlloc_v2", rc});
    }
    ok(rc, "cuMemAlloc_v2");
  }
  void release() {
    if (buffer != 0 && api_.cuCtxSetCurrent(context) == CUDA_SUCCESS) {
      api_.cuMemFree(buffer);
      api_.cuCtxSetCurrent(own);
    }
    buffer = 0;
    if (retained_) api_.cuDevicePrimaryCtxRelease(device_);
    retained_ = false;
  }

  const CudaApi& api_;
  CUdevice device_ = 0;
  bool retained_ = false;
};

// One test's samples (after its warm-up copies) into `r`: each GB/s, and the first data mismatch.
// A failed call throws, leaving in `r` the samples taken before it.
void run_test(BandwidthResult& r, const BandwidthOptions& options, const BandwidthObserver& observe,
              const CudaApi& api, const Memory& mem, const CopyTimer& timer,
              const Peer* peer = nullptr) {
  const Cuda ok{api};
  const std::string& test = r.test;
  const std::uint64_t size = options.bytes;
  const bool sampled = options.sampled;
  void* host = test.find("pageable") != std::string::npos ? mem.pageable : mem.pinned[0];
  const CUstream s1 = timer.s1, s2 = timer.s2;
  for (int sample = -1; sample < options.samples; ++sample) {
    const std::chrono::steady_clock::time_point began = std::chrono::steady_clock::now();
    const bool warmup = sample < 0;  // sample -1 runs the warm-up copies, untimed and unchecked
    const int pat = std::max(sample, 0);
    // Each test sets up its buffers, then says what one copy is and how to check the result.
    std::function<void()> copy;
    std::function<std::string()> verify;
    // Reads device memory back into `into` and checks it holds this sample's pattern.
    auto read_back = [&](void* into, CUdeviceptr from) {
      clear(into, size, sampled);
      ok(api.cuMemcpyDtoHAsync(into, from, size, s1), "cuMemcpyDtoHAsync_v2");
      timer.sync(s1);
      return check(into, size, pat, sampled);
    };
    auto upload = [&](CUdeviceptr to, void* from) {
      fill(from, size, pat, sampled);
      ok(api.cuMemcpyHtoDAsync(to, from, size, s1), "cuMemcpyHtoDAsync_v2");
      timer.sync(s1);
    };
    if (test == "h2d" || test == "h2d-pageable") {
      fill(host, size, pat, sampled);
      copy = [&] { ok(api.cuMemcpyHtoDAsync(mem.a, host, size, s1), "cuMemcpyHtoDAsync_v2"); };
      verify = [&] { return read_back(host, mem.a); };
    } else if (test == "d2h" || test == "d2h-pageable") {
      upload(mem.a, host);
      clear(host, size, sampled);
      copy = [&] { ok(api.cuMemcpyDtoHAsync(host, mem.a, size, s1), "cuMemcpyDtoHAsync_v2"); };
      verify = [&] { return check(host, size, pat, sampled); };
    } else if (test == "d2d") {
      upload(mem.a, host);
      copy = [&] { ok(api.cuMemcpyDtoDAsync(mem.b, mem.a, size, s1), "cuMemcpyDtoDAsync_v2"); };
      verify = [&] { return read_back(host, mem.b); };
    } else if (test == "p2p") {  // a -> the peer's buffer, read back from there
      upload(mem.a, host);
      copy = [&] {
        ok(api.cuMemcpyPeerAsync(peer->buffer, peer->context, mem.a, peer->own, size, s1),
           "cuMemcpyPeerAsync");
      };
      verify = [&] { return read_back(host, peer->buffer); };
    } else {  // bidir: host -> a on s1 while b -> host on s2
      void* up = mem.pinned[0];
      void* down = mem.pinned[1];
      upload(mem.b, up);
      clear(down, size, sampled);
      copy = [&, up, down] {
        ok(api.cuMemcpyHtoDAsync(mem.a, up, size, s1), "cuMemcpyHtoDAsync_v2");
        ok(api.cuMemcpyDtoHAsync(down, mem.b, size, s2), "cuMemcpyDtoHAsync_v2");
      };
      verify = [&, up, down] {
        std::string bad = check(down, size, pat, sampled);
        return bad.empty() ? read_back(up, mem.a) : bad;
      };
    }
    if (warmup) {
      for (int c = 0; c < options.warmup; ++c) copy();
      timer.sync(s1);
      timer.sync(s2);
      if (observe) observe({test, 0, options.samples, seconds_since(began), nullptr});
      continue;
    }
    const double ms = timer.timed(copy, test == "bidir", options.copies);
    const std::string bad = verify();
    const double moved = static_cast<double>(size) * options.copies * (test == "bidir" ? 2 : 1);
    r.gbps.push_back(ms > 0 ? moved / (ms / 1e3) / 1e9 : 0);
    if (!bad.empty() && r.failure.empty()) {
      r.failure = bad;
      r.problem = Problem{ErrorCode::Unspecified};
      r.problem.fields = {{"reason", "data-mismatch"}};
      r.verified = false;
    }
    if (observe) observe({test, sample + 1, options.samples, seconds_since(began), nullptr});
  }
}

}  // namespace

std::vector<BandwidthResult> measure_bandwidth(const BandwidthOptions& options,
                                               const BandwidthObserver& observe) {
  const CudaApi& api = cuda_initialised();
  BandwidthNeeds::check(api, "measuring copy bandwidth");
  Memory mem{api};
  allocate(api, options, mem);
  const bool p2p =
      std::find(options.tests.begin(), options.tests.end(), "p2p") != options.tests.end();
  if (p2p) PeerNeeds::check(api, "measuring peer-to-peer copy bandwidth");
  const CopyTimer timer(api);
  std::vector<BandwidthResult> results;
  // One test's result (with `peer`, a p2p copy to that CUDA ordinal), however it ends.
  auto measure = [&](const std::string& test, int peer) {
    BandwidthResult r;
    r.test = test;
    r.bytes = options.bytes;
    r.verified = true;
    r.peer = peer;
    try {
      if (peer >= 0) {
        const Peer far(api, peer, options.bytes, r);
        run_test(r, options, observe, api, mem, timer, &far);
      } else {
        run_test(r, options, observe, api, mem, timer);
      }
    } catch (const Error& e) {
      r.failure = e.what();
      r.problem = e.problem();
      r.verified = false;
    }
    if (!r.gbps.empty()) {
      r.median = median(r.gbps);
      r.min = *std::min_element(r.gbps.begin(), r.gbps.end());
      r.max = *std::max_element(r.gbps.begin(), r.gbps.end());
    }
    results.push_back(std::move(r));
    if (observe) observe({test, options.samples, options.samples, 0, &results.back()});
  };
  CUdevice own = -1;
  if (p2p) Cuda{api}(api.cuCtxGetDevice(&own), "cuCtxGetDevice");
  for (const std::string& test : options.tests) {
    if (test != "p2p") {
      measure(test, -1);
      continue;
    }
    for (const int peer : options.peers) {
      CUdevice d = -1;
      if (api.cuDeviceGet(&d, peer) == CUDA_SUCCESS && d == own) continue;
      measure(test, peer);
    }
  }
  return results;
}

GPUSEL_END_NAMESPACE
