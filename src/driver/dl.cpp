#include "dl.hpp"

#include <dlfcn.h>

#include <cstdlib>

namespace gpusel::detail {

void* open_driver_library(const char* override_var, const char* default_name, std::string& path,
                          std::string& reason) {
  const char* override_path = secure_getenv(override_var);
  path = (override_path != nullptr && *override_path != '\0') ? override_path : default_name;
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    reason = "cannot load " + path + " (" + (why ? why : "unknown reason") +
             "); is the NVIDIA driver installed?";
  }
  return handle;
}

void* find_symbol(void* handle, const char* symbol) {
  return dlsym(handle, symbol);
}

void note_missing(std::string& missing, const char* symbol) {
  missing += (missing.empty() ? "" : ", ") + std::string(symbol);
}

}  // namespace gpusel::detail
