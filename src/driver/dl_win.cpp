// Windows: opening NVML (nvml.dll) and CUDA's driver (nvcuda.dll) with LoadLibraryExW and an
// explicit search order. The current directory and PATH are never searched, so a DLL planted
// beside the user's files cannot be loaded in the driver's place.
#include "dl.hpp"
#include "win.hpp"

#include <cstring>
#include <vector>

namespace gpusel::detail {

namespace {

struct Candidate {
  std::wstring name;  // a bare file name or an absolute path
  DWORD flags;
};

// Where the driver's libraries are looked for, in order:
//   1. the bare name through LOAD_LIBRARY_SEARCH_DEFAULT_DIRS: the directory of the executable,
//      %SystemRoot%\System32 and directories added with AddDllDirectory (not the current
//      directory, not PATH), as a modern ctypes.CDLL("nvml.dll") searches;
//   2. %SystemRoot%\System32\<name>, where the NVIDIA driver installs both libraries;
//   3. for NVML, %ProgramFiles%\NVIDIA Corporation\NVSMI\nvml.dll, where older drivers put it.
std::vector<Candidate> candidates(const std::wstring& name) {
  constexpr DWORD kAbsolute = LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR | LOAD_LIBRARY_SEARCH_SYSTEM32;
  std::vector<Candidate> out;
  out.push_back({name, LOAD_LIBRARY_SEARCH_DEFAULT_DIRS});
  const std::wstring system_root = win::environment(L"SystemRoot").value_or(L"C:\\Windows");
  out.push_back({system_root + L"\\System32\\" + name, kAbsolute});
  if (name == L"nvml.dll") {
    const std::wstring program_files =
        win::environment(L"ProgramFiles").value_or(L"C:\\Program Files");
    out.push_back({program_files + L"\\NVIDIA Corporation\\NVSMI\\" + name, kAbsolute});
  }
  return out;
}

std::wstring full_path(const std::wstring& path) {
  const DWORD n = GetFullPathNameW(path.c_str(), 0, nullptr, nullptr);
  if (n == 0) return path;
  std::wstring out(n, L'\0');
  const DWORD m = GetFullPathNameW(path.c_str(), n, out.data(), nullptr);
  out.resize(m < n ? m : 0);
  return out.empty() ? path : out;
}

}  // namespace

void* open_driver_library(const char* override_var, const char* default_name, std::string& path,
                          std::string& reason) {
  // The override replaces the list, as on Linux: a path (absolute, or relative to the current
  // directory, which the user chose by writing one) is that file; a bare name (no \\, / or :)
  // is looked for in the safe default folders only, never in the current directory.
  const auto override_path = win::environment(win::widen(override_var).c_str());
  std::vector<Candidate> tries;
  if (override_path && !override_path->empty()) {
    if (override_path->find_first_of(L"\\/:") == std::wstring::npos) {
      tries.push_back({*override_path, LOAD_LIBRARY_SEARCH_DEFAULT_DIRS});
    } else {
      tries.push_back({full_path(*override_path),
                       LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR | LOAD_LIBRARY_SEARCH_DEFAULT_DIRS});
    }
  } else {
    tries = candidates(win::widen(default_name));
  }
  std::string failures;
  for (const Candidate& c : tries) {
    HMODULE module = LoadLibraryExW(c.name.c_str(), nullptr, c.flags);
    if (module != nullptr) {
      const std::wstring loaded = win::module_path(module);
      path = win::narrow(loaded.empty() ? c.name : loaded);
      return reinterpret_cast<void*>(module);
    }
    const DWORD code = GetLastError();
    failures += (failures.empty() ? "" : "; ") + win::narrow(c.name) + ": " + win::error_text(code);
  }
  path = win::narrow(tries.front().name);
  reason = "cannot load " +
           std::string(override_path && !override_path->empty() ? path : default_name) + " (" +
           failures + "); is the NVIDIA driver installed?";
  return nullptr;
}

void* find_symbol(void* handle, const char* symbol) {
  FARPROC address = GetProcAddress(reinterpret_cast<HMODULE>(handle), symbol);
  void* out = nullptr;
  static_assert(sizeof out == sizeof address);
  std::memcpy(&out, &address, sizeof out);
  return out;
}

void note_missing(std::string& missing, const char* symbol) {
  missing += (missing.empty() ? "" : ", ") + std::string(symbol);
}

}  // namespace gpusel::detail
