// The simulated libcuda.so.1's process state: cuInit loads the machine and enumerates its devices
// by the driver's rules (CUDA_DEVICE_ORDER, CUDA_VISIBLE_DEVICES), once; later calls find devices
// and contexts through it.
#include "cuda_sim.hpp"

#include <cstdlib>

#include "cuda_rules.hpp"

namespace gpusel::sim::cuda {

thread_local CUcontext current_context = nullptr;
thread_local std::vector<CUcontext> context_stack;

namespace {

void anchor() {}

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::nullopt : std::optional<std::string>(v);
}

// Loads the machine file once, for cuDriverGetVersion (which may come first) and cuInit. Call with
// the mutex held.
void load_once(State& s) {
  if (s.load_attempted) return;
  s.load_attempted = true;
  s.loaded = gpusel::sim::load_from_environment(reinterpret_cast<const void*>(&anchor),
                                                "libcuda.so.1", "nvidia");
}

CUresult initialise(State& s) {
  if (env("GPUSEL_SIM_DEVICE_HANDLES") == "distinct") s.handle_base = kDeviceHandleBase;
  load_once(s);
  if (!s.loaded.ok) return CUDA_ERROR_NO_DEVICE;
  const SimMachine& m = s.loaded.machine();
  if (m.faults.cuda == "missing" || m.vendor == "amd") return CUDA_ERROR_STUB_LIBRARY;
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
    d.uuid_bytes = uuid_bytes_of(d.uuid);
    d.parent_bytes = uuid_bytes_of(d.parent_uuid);
    s.devices.push_back(d);
  }
  for (std::size_t i = 0; i < s.devices.size(); ++i) {
    s.devices[i].primary.device = static_cast<int>(i);
    s.devices[i].legacy_stream.device = static_cast<int>(i);
  }
  return s.devices.empty() ? CUDA_ERROR_NO_DEVICE : CUDA_SUCCESS;
}

}  // namespace

State& state() {
  static State* s = new State;  // never destroyed: other libraries' destructors may still call in
  return *s;
}

const SimGpu& gpu_of(const State& s, const Device& d) {
  return s.loaded.machine().gpus[static_cast<std::size_t>(d.gpu)];
}

// Guard for every call after cuInit: returns CUDA_SUCCESS when the driver is usable.
CUresult ready() {
  State& s = state();
  if (!s.initialised.load(std::memory_order_acquire)) return CUDA_ERROR_NOT_INITIALIZED;
  return s.init_result;
}

CUdevice handle_of(int index) {
  return state().handle_base + index;
}

int index_of(CUdevice handle) {
  const State& s = state();
  const int index = handle - s.handle_base;
  return handle < s.handle_base || static_cast<std::size_t>(index) >= s.devices.size() ? -1 : index;
}

Device* device_at(int index) {
  State& s = state();
  if (index < 0 || static_cast<std::size_t>(index) >= s.devices.size()) return nullptr;
  return &s.devices[static_cast<std::size_t>(index)];
}

Device* device(CUdevice handle) {
  return device_at(index_of(handle));
}

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

const LoadedMachine& loaded_machine() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  load_once(s);
  return s.loaded;
}

Device* current_device() {
  if (current_context == nullptr || !alive(current_context)) return nullptr;
  return device_at(current_context->device);
}

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
  load_once(s);
  *version = s.loaded.ok ? s.loaded.machine().cuda_driver_version : 0;
  return CUDA_SUCCESS;
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
  if (device_at(ordinal) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  *dev = handle_of(ordinal);
  return CUDA_SUCCESS;
}

}  // namespace impl

}  // namespace gpusel::sim::cuda
