// sim_common.hpp's platform part on POSIX: dladdr names the library a function is in, dlopen and
// dlsym open libgpusel-sim-machines.so beside it.
#include "sim_common.hpp"

#include <dlfcn.h>
#include <unistd.h>

namespace gpusel::sim {

void report(const char* library_name, const std::string& message) {
  std::string line = "gpusel-sim (" + std::string(library_name) + "): " + message + "\n";
  ssize_t ignored = write(2, line.data(), line.size());
  (void)ignored;
}

namespace platform {

std::string library_file(const void* anchor) {
  Dl_info info{};
  if (dladdr(anchor, &info) == 0 || info.dli_fname == nullptr) return "";
  return info.dli_fname;
}

std::string folder_of(const std::string& file) {
  const std::size_t slash = file.rfind('/');
  const std::string dir = file.substr(0, slash == std::string::npos ? 0 : slash);
  return dir.empty() ? "." : dir;
}

bool exists(const std::string& path) {
  return ::access(path.c_str(), F_OK) == 0;
}

void* open_library(const std::string& path, std::string& why) {
  void* handle = dlopen(path.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    why = error != nullptr ? error : "dlopen failed";
  }
  return handle;
}

void* library_function(void* library, const char* name) {
  return dlsym(library, name);
}

}  // namespace platform

}  // namespace gpusel::sim
