#include "sim_common.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>

namespace gpusel::sim {

void report(const char* library_name, const std::string& message) {
  std::string line = "gpusel-sim (" + std::string(library_name) + "): " + message + "\n";
  ssize_t ignored = write(2, line.data(), line.size());
  (void)ignored;
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
  Dl_info info{};
  if (dladdr(anchor, &info) != 0 && info.dli_fname != nullptr) {
    std::string file = info.dli_fname;
    std::string dir = file.substr(0, file.rfind('/') == std::string::npos ? 0 : file.rfind('/'));
    if (dir.empty()) dir = ".";
    dirs.push_back(dir + "/machines");
    dirs.push_back(dir + "/../machines");
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
