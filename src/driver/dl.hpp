// Internal: opening an NVIDIA driver library, shared by the NVML and CUDA loaders.
#pragma once

#include <string>

namespace gpusel::detail {

// The driver libraries' file names: NVML and CUDA's driver API.
#ifdef _WIN32
inline constexpr const char* kNvmlLibraryName = "nvml.dll";
inline constexpr const char* kCudaLibraryName = "nvcuda.dll";
#else
inline constexpr const char* kNvmlLibraryName = "libnvidia-ml.so.1";
inline constexpr const char* kCudaLibraryName = "libcuda.so.1";
#endif

// Opens the file named by the environment variable `override_var` (read with secure_getenv) or
// else `default_name` (dlopen; on Windows LoadLibraryExW over a fixed list of places, dl_win.cpp),
// never to be closed. On failure returns nullptr and sets `reason`. `path` is set to what was
// opened, for messages.
void* open_driver_library(const char* override_var, const char* default_name, std::string& path,
                          std::string& reason);

// The address of `symbol` in a library open_driver_library opened; nullptr when it lacks it.
void* find_symbol(void* handle, const char* symbol);

// Appends `symbol` to a comma-separated list of missing symbols.
void note_missing(std::string& missing, const char* symbol);

}  // namespace gpusel::detail
