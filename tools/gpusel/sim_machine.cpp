#include "sim_machine.hpp"

#ifdef _WIN32
#include "win.hpp"
#else
#include <dlfcn.h>
#endif

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string_view>
#include <vector>

namespace gpusel::cli {
namespace {

using Describe = std::size_t (*)(const char*, const char*, char*, std::size_t);

// The reader's entry point, opened once (never closed); nullptr when it is not in `root`.
Describe reader(const std::string& root) {
  static std::string opened_root;
  static Describe fn = nullptr;
  if (fn != nullptr && opened_root == root) return fn;
#ifdef _WIN32
  // By its absolute path only (never the search path): gpusel-sim-machines.dll.
  namespace win = detail::win;
  wchar_t full[4096];
  const std::wstring path = win::widen(root + "\\gpusel-sim-machines.dll");
  const DWORD n = GetFullPathNameW(path.c_str(), 4096, full, nullptr);
  if (n == 0 || n >= 4096) return nullptr;
  HMODULE handle = LoadLibraryExW(full, nullptr,
                                  LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR | LOAD_LIBRARY_SEARCH_SYSTEM32);
  if (handle == nullptr) return nullptr;
  FARPROC address = GetProcAddress(handle, "gpuselSimDescribeMachine");
  static_assert(sizeof fn == sizeof address);
  std::memcpy(&fn, &address, sizeof fn);
#else
  void* handle = dlopen((root + "/libgpusel-sim-machines.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return nullptr;
  fn = reinterpret_cast<Describe>(dlsym(handle, "gpuselSimDescribeMachine"));
#endif
  opened_root = root;
  return fn;
}

}  // namespace

std::optional<SimMachineInfo> describe_sim_machine(const std::string& root, const std::string& spec,
                                                   const std::optional<std::string>& machines_dir) {
  const Describe describe = reader(root);
  if (describe == nullptr) return std::nullopt;
  const char* dir = machines_dir ? machines_dir->c_str() : nullptr;
  // One reading when the answer fits (it nearly always does), a second when it did not.
  std::string answer(std::size_t{1} << 16, '\0');
  std::size_t size = describe(spec.c_str(), dir, answer.data(), answer.size());
  if (size > answer.size()) {
    answer.resize(size);
    size = describe(spec.c_str(), dir, answer.data(), answer.size());
  }
  answer.resize(std::min(size, answer.size()));
  std::vector<std::string> fields;
  std::string_view rest = answer;
  while (!rest.empty()) {
    const std::size_t end = rest.find('\0');
    fields.emplace_back(rest.substr(0, end));
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
  }
  SimMachineInfo info;
  if (fields.size() >= 6 && fields.size() <= 8 && fields[0] == "ok") {
    info.ok = true;
    info.path = fields[1];
    info.name = fields[2];
    info.description = fields[3];
    info.nvml_fault = fields[4];
    info.cuda_fault = fields[5];
    if (fields.size() >= 7) info.static_runtime = fields[6];
    if (fields.size() == 8) info.vendor = fields[7];
  } else if (fields.size() == 2 && fields[0] == "error") {
    info.error = fields[1];
  } else {
    throw std::runtime_error(fields.size() == 2 ? fields[1]
                                                : "the simulator's machine reader answered "
                                                  "something unexpected");
  }
  return info;
}

}  // namespace gpusel::cli
