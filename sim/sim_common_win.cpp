// sim_common.cpp for Windows: messages go to the process's standard error handle, and the bundled
// machines are looked for beside the DLL (its folder's machines, then ..\machines).
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

LoadedMachine load_from_environment(const void* anchor, const char* library_name) {
  LoadedMachine out;
  const char* spec = std::getenv("GPUSEL_SIM_MACHINE");
  if (spec == nullptr || *spec == '\0') {
    out.error =
        "GPUSEL_SIM_MACHINE is not set; set it to a bundled machine's name or a machine "
        "file (`gpusel sim env MACHINE` prints the settings)";
    report(library_name, out.error);
    return out;
  }
  std::vector<std::string> dirs;
  HMODULE self = nullptr;
  if (GetModuleHandleExW(
          GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
          static_cast<LPCWSTR>(anchor), &self)) {
    const std::string file = detail::win::narrow(detail::win::module_path(self));
    const std::size_t slash = file.find_last_of("\\/");
    const std::string dir = slash == std::string::npos ? "." : file.substr(0, slash);
    dirs.push_back(dir + "\\machines");
    dirs.push_back(dir + "\\..\\machines");
  }
  try {
    out.machine = load_machine(find_machine(spec, dirs));
    out.ok = true;
  } catch (const std::exception& e) {
    out.error = std::string("GPUSEL_SIM_MACHINE=\"") + spec + "\": " + e.what();
    report(library_name, out.error);
  }
  return out;
}

}  // namespace gpusel::sim
