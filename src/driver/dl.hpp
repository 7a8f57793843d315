// Internal: opening an NVIDIA driver library, shared by the NVML and CUDA loaders.
#pragma once

#include <string>

namespace gpusel::detail {

// dlopen()s the file named by the environment variable `override_var` (read with secure_getenv)
// or else `default_name`, never to be closed. On failure returns nullptr and sets `reason`.
// `path` is set to what was opened, for messages.
void* open_driver_library(const char* override_var, const char* default_name, std::string& path,
                          std::string& reason);

// Appends `symbol` to a comma-separated list of missing symbols.
void note_missing(std::string& missing, const char* symbol);

}  // namespace gpusel::detail
