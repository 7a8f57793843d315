// The HIP runtime a program has loaded (hip_api.hpp): found among this process's objects, never
// loaded here.
#include "hip_api.hpp"

#include <mutex>

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

// The path of the first loaded object named libamdhip64.so*, or "".
std::string loaded_hip_path() {
  std::string found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        const char* name = info->dlpi_name;
        if (name == nullptr || *name == '\0') return 0;
        const char* slash = std::strrchr(name, '/');
        const char* base = slash != nullptr ? slash + 1 : name;
        if (std::strncmp(base, "libamdhip64.so", 14) != 0) return 0;
        *static_cast<std::string*>(data) = name;
        return 1;
      },
      &found);
  return found;
}

std::mutex hip_mutex;
HipRuntime* found_runtime = nullptr;  // once found, kept: a loaded runtime stays for the process

}  // namespace

const HipRuntime* loaded_hip_runtime() {
  std::lock_guard<std::mutex> lock(hip_mutex);
  if (found_runtime != nullptr) return found_runtime;
  const std::string path = loaded_hip_path();
  if (path.empty()) return nullptr;
  // Already loaded: RTLD_NOLOAD only hands out a reference to it, never a second copy.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD | RTLD_LOCAL);
  if (handle == nullptr) return nullptr;
  auto* hip = new HipRuntime;  // never freed, as the library is never closed
  hip->path = path;
  std::string missing;
#define GPUSEL_HIP(name, params)                                                \
  hip->api.name = reinterpret_cast<hipError_t(*) params>(dlsym(handle, #name)); \
  if (hip->api.name == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(#name);
#include "hip.def"
#undef GPUSEL_HIP
  hip->api.hipGetErrorName =
      reinterpret_cast<const char* (*)(hipError_t)>(dlsym(handle, "hipGetErrorName"));
  if (!missing.empty()) {
    const std::string why = "the HIP runtime this process loaded, " + path + ", lacks " + missing +
                            " (HIP 5.1 or later is needed to bind in-process)";
    delete hip;
    throw failure(why, Problem{ErrorCode::LibraryIncomplete});
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

[[noreturn]] void hip_call_failed(const HipRuntime& hip, const char* call, hipError_t rc) {
  throw failure(std::string(call) + " failed in " + hip.path + ": " + hip_error_text(hip, rc),
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
      hip_call_failed(hip, "hipDeviceGet", e);
    hipUUID uuid{};
    if (const hipError_t e = hip.api.hipDeviceGetUuid(&uuid, device); e != kHipSuccess)
      hip_call_failed(hip, "hipDeviceGetUuid", e);
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

void hip_set_device(const HipRuntime& hip, int ordinal) {
  if (const hipError_t rc = hip.api.hipSetDevice(ordinal); rc != kHipSuccess)
    hip_call_failed(hip, "hipSetDevice", rc);
}

}  // namespace gpusel::detail
