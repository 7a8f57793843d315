// The HIP runtime a program has loaded (hip_api.hpp): found among this process's objects, never
// loaded here.
#include "hip_api.hpp"

#include <mutex>

#include "gpusel/amd.hpp"
#include "gpusel/error.hpp"

#ifndef _WIN32
#include <dlfcn.h>
#include <link.h>

#include <cstring>
#endif

namespace gpusel::detail {

#ifdef _WIN32

const HipRuntime* loaded_hip_runtime() {
  return nullptr;
}

#else

namespace {

// The loaded objects that are a HIP runtime: libamdhip64.so*, or a wheel's renamed copy
// (libamdhip64-<hash>.so); each once (by load address).
std::vector<std::string> loaded_hip_paths() {
  struct Found {
    std::vector<std::string> paths;
    std::vector<ElfW(Addr)> bases;
  } found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        const char* name = info->dlpi_name;
        if (name == nullptr || *name == '\0') return 0;
        const char* slash = std::strrchr(name, '/');
        const char* base = slash != nullptr ? slash + 1 : name;
        if (std::strncmp(base, "libamdhip64", 11) != 0 || (base[11] != '.' && base[11] != '-'))
          return 0;
        auto* f = static_cast<Found*>(data);
        for (ElfW(Addr) b : f->bases)
          if (b == info->dlpi_addr) return 0;
        f->bases.push_back(info->dlpi_addr);
        f->paths.emplace_back(name);
        return 0;
      },
      &found);
  return found.paths;
}

std::mutex hip_mutex;
HipRuntime* found_runtime = nullptr;  // once found, kept: a loaded runtime stays for the process

}  // namespace

const HipRuntime* loaded_hip_runtime() {
  std::lock_guard<std::mutex> lock(hip_mutex);
  if (found_runtime != nullptr) return found_runtime;
  const std::vector<std::string> paths = loaded_hip_paths();
  if (paths.empty()) return nullptr;
  if (paths.size() > 1) {
    // Each copy keeps its own current device: setting it in one the program may not call would
    // leave the program on HIP's device 0 while gpusel says it is bound.
    std::string listed;
    for (const std::string& p : paths) listed += (listed.empty() ? "" : ", ") + p;
    throw failure("this process has loaded " + std::to_string(paths.size()) +
                      " copies of the HIP runtime (" + listed +
                      "), each with its own current device, and gpusel cannot tell which one "
                      "the program computes with: load one copy only (a framework's bundled "
                      "one, or the system's)",
                  Problem{ErrorCode::LibraryIncomplete});
  }
  // Already loaded: RTLD_NOLOAD only hands out a reference to it, never a second copy.
  void* handle = dlopen(paths.front().c_str(), RTLD_NOW | RTLD_NOLOAD | RTLD_LOCAL);
  if (handle == nullptr) return nullptr;
  auto* hip = new HipRuntime;  // never freed, as the library is never closed
  hip->path = paths.front();
#define GPUSEL_HIP(name, params)                                                \
  hip->api.name = reinterpret_cast<hipError_t(*) params>(dlsym(handle, #name)); \
  if (hip->api.name == nullptr)                                                 \
    hip->missing += (hip->missing.empty() ? "" : ", ") + std::string(#name);
#include "hip.def"
#undef GPUSEL_HIP
  hip->api.hipGetErrorName =
      reinterpret_cast<const char* (*)(hipError_t)>(dlsym(handle, "hipGetErrorName"));
  if (hip->api.hipGetDeviceCount == nullptr) {  // not a HIP runtime gpusel can ask anything
    delete hip;
    dlclose(handle);
    return nullptr;
  }
  found_runtime = hip;
  return found_runtime;
}

#endif

namespace {

std::string hip_error_text(const HipRuntime& hip, hipError_t rc) {
  const char* name = hip.api.hipGetErrorName != nullptr ? hip.api.hipGetErrorName(rc) : nullptr;
  return std::string(name != nullptr ? name : "hipError") + " (" + std::to_string(rc) + ")";
}

// `device`: the HIP ordinal the call was about, -1 for none.
[[noreturn]] void hip_call_failed(const HipRuntime& hip, const char* call, hipError_t rc,
                                  int device = -1) {
  throw failure(std::string(call) +
                    (device >= 0 ? " for HIP device " + std::to_string(device) : std::string()) +
                    " failed in " + hip.path + ": " + hip_error_text(hip, rc) +
                    "; `rocminfo` or `rocm-smi` shows whether the GPU and its driver work",
                Problem{ErrorCode::DriverCallFailed, call, rc});
}

constexpr hipError_t kHipSuccess = 0;
constexpr hipError_t kHipErrorNoDevice = 100;  // hipErrorNoDevice: no device left visible

}  // namespace

std::vector<HipHandle> hip_device_handles(const HipRuntime& hip) {
  int count = 0;
  const hipError_t rc = hip.api.hipGetDeviceCount(&count);
  if (rc == kHipErrorNoDevice) return {};
  if (rc != kHipSuccess) hip_call_failed(hip, "hipGetDeviceCount", rc);
  std::vector<HipHandle> out;
  for (int i = 0; i < count; ++i) {
    hipDevice_t device = 0;
    if (const hipError_t e = hip.api.hipDeviceGet(&device, i); e != kHipSuccess)
      hip_call_failed(hip, "hipDeviceGet", e, i);
    hipUUID uuid{};
    if (const hipError_t e = hip.api.hipDeviceGetUuid(&uuid, device); e != kHipSuccess)
      hip_call_failed(hip, "hipDeviceGetUuid", e, i);
    // ROCr's id without its "GPU-": up to 16 characters, NUL-ended when shorter ("XX").
    std::string digits;
    for (char c : uuid.bytes) {
      if (c == '\0') break;
      digits += c;
    }
    out.push_back({i, "GPU-" + digits});
  }
  return out;
}

const HipRuntime* hip_runtime_with_devices() {
  const HipRuntime* hip = loaded_hip_runtime();
  if (hip == nullptr) return nullptr;
  int count = 0;
  const hipError_t rc = hip->api.hipGetDeviceCount(&count);
  if (rc == kHipErrorNoDevice || (rc == kHipSuccess && count <= 0)) return nullptr;
  if (rc != kHipSuccess) {
    // On a machine without AMD's driver, a HIP runtime that cannot start is not the program's.
    if (!amd_driver_present()) return nullptr;
    hip_call_failed(*hip, "hipGetDeviceCount", rc);
  }
  if (!hip->missing.empty()) {
    throw failure("the HIP runtime this process loaded, " + hip->path + ", lacks " + hip->missing +
                      " (HIP 5.1 or later is needed to bind in-process)",
                  Problem{ErrorCode::LibraryIncomplete});
  }
  return hip;
}

void hip_set_device(const HipRuntime& hip, int ordinal) {
  if (const hipError_t rc = hip.api.hipSetDevice(ordinal); rc != kHipSuccess)
    hip_call_failed(hip, "hipSetDevice", rc, ordinal);
}

}  // namespace gpusel::detail
