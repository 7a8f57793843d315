// sim_common.hpp's platform part on Windows: messages go to the process's standard error handle;
// the DLL a function is in is named by GetModuleHandleExW, and gpusel-sim-machines.dll is opened
// beside it by its full path.
#include <cstring>
#include <string>

#include "sim_common.hpp"
#include "win.hpp"

namespace gpusel::sim {

void report(const char* library_name, const std::string& message) {
  const std::string line = "gpusel-sim (" + std::string(library_name) + "): " + message + "\n";
  DWORD written = 0;
  WriteFile(GetStdHandle(STD_ERROR_HANDLE), line.data(), static_cast<DWORD>(line.size()), &written,
            nullptr);
}

namespace platform {

std::string library_file(const void* anchor) {
  HMODULE self = nullptr;
  if (!GetModuleHandleExW(
          GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
          static_cast<LPCWSTR>(anchor), &self)) {
    return "";
  }
  return detail::win::narrow(detail::win::module_path(self));
}

std::string folder_of(const std::string& file) {
  const std::size_t slash = file.find_last_of("\\/");
  return slash == std::string::npos ? "." : file.substr(0, slash);
}

bool exists(const std::string& path) {
  return GetFileAttributesW(detail::win::widen(path).c_str()) != INVALID_FILE_ATTRIBUTES;
}

void* open_library(const std::string& path, std::string& why) {
  // By its full path (".." resolved), so that every double opens the one DLL.
  wchar_t full[4096];
  const std::wstring wide = detail::win::widen(path);
  const DWORD n = GetFullPathNameW(wide.c_str(), 4096, full, nullptr);
  if (n == 0 || n >= 4096) {
    why = "the path is too long";
    return nullptr;
  }
  HMODULE handle = LoadLibraryExW(full, nullptr,
                                  LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR | LOAD_LIBRARY_SEARCH_SYSTEM32);
  if (handle == nullptr) why = "LoadLibraryExW failed, error " + std::to_string(GetLastError());
  return reinterpret_cast<void*>(handle);
}

void* library_function(void* library, const char* name) {
  FARPROC address = GetProcAddress(reinterpret_cast<HMODULE>(library), name);
  void* out = nullptr;
  static_assert(sizeof out == sizeof address);
  std::memcpy(&out, &address, sizeof out);
  return out;
}

}  // namespace platform

}  // namespace gpusel::sim
