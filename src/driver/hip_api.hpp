// Internal: the HIP runtime a program has loaded (libamdhip64), for the worker side's binding on
// AMD GPUs. gpusel never loads one itself: HIP's current device belongs to the copy the program
// calls (PyTorch bundles its own), and a second copy would be a second runtime.
#pragma once

#include <string>
#include <vector>

namespace gpusel::detail {

// From HIP's ABI (hip_runtime_api.h): results are an int-sized enum, a device is an int, and
// hipDeviceGetUuid fills 16 bytes with the ASCII hex digits of ROCr's "GPU-<16 hex>" id.
using hipError_t = int;
using hipDevice_t = int;
struct hipUUID {
  char bytes[16];
};

struct HipApi {
#define GPUSEL_HIP(name, params) hipError_t(*name) params = nullptr;
#include "hip.def"
#undef GPUSEL_HIP
  const char* (*hipGetErrorName)(hipError_t) = nullptr;  // optional: for messages
};

struct HipRuntime {
  HipApi api;
  std::string path;     // the loaded file, for messages
  std::string missing;  // the functions of hip.def it lacks ("" when none): HIP older than 5.1
};

// The HIP runtime loaded in this process (a libamdhip64.so* or libamdhip64-<hash>.so among its
// objects), or nullptr when there is none (Windows: always). Throws Error(Failure) when several
// copies are loaded. Looks among the loaded objects only: no file is opened.
const HipRuntime* loaded_hip_runtime();

// The loaded HIP runtime when it has devices here: what a bind uses, as the program does. nullptr
// when none is loaded, or it lists no device (a CUDA program on an NVIDIA machine that has HIP
// loaded binds in CUDA). Throws Error(Failure) when it cannot count its devices on a machine with
// AMD's driver (/dev/kfd), or it lacks a function of hip.def (HIP older than 5.1).
const HipRuntime* hip_runtime_with_devices();

// One HIP device of this process: its ordinal and ROCr's id ("GPU-<16 hex>"; "GPU-XX" for a GPU
// without a unique id).
struct HipHandle {
  int ordinal = 0;
  std::string id;
};

// The devices HIP shows this process, in ordinal order. Throws Error(Failure) naming the call
// that failed; none is an empty list.
std::vector<HipHandle> hip_device_handles(const HipRuntime& hip);

// Makes `ordinal` the calling thread's current HIP device. Throws Error(Failure).
void hip_set_device(const HipRuntime& hip, int ordinal);

}  // namespace gpusel::detail
