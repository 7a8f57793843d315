// load_from_environment (sim_common.hpp): GPUSEL_SIM_MACHINE's file, found beside the double and
// taken from libgpusel-sim-machines.so, which parses it once per process (machine_share.hpp).
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "machine_share.hpp"
#include "sim_common.hpp"

namespace gpusel::sim {
namespace {

#ifdef _WIN32
constexpr char kSeparator[] = "\\";
#else
constexpr char kSeparator[] = "/";
#endif

// libgpusel-sim-machines.so in `folder` (the double's), or in the folder above (the doubles of
// the fault folders no-nvml, no-cuda and nvml-no-v2); nullptr with the reason in `why`.
SharedMachineFunction machines_reader(const std::string& folder, const char* library_name,
                                      std::string& why) {
  const std::vector<std::string> candidates = {
      folder + kSeparator + kMachinesLibrary,
      folder + kSeparator + ".." + kSeparator + kMachinesLibrary};
  for (const std::string& path : candidates) {
    if (!platform::exists(path)) continue;
    std::string error;
    void* library = platform::open_library(path, error);
    if (library == nullptr) {
      why = std::string(library_name) + " reads machine files through " + path +
            ", which cannot be loaded: " + error +
            "; reinstall the simulator's libraries (gpusel's lib/gpusel/sim)";
      return nullptr;
    }
    const auto layout = reinterpret_cast<MachineLayoutFunction>(
        platform::library_function(library, kMachineLayoutSymbol));
    const auto machine = reinterpret_cast<SharedMachineFunction>(
        platform::library_function(library, kSharedMachineSymbol));
    if (layout == nullptr || machine == nullptr || layout() != kMachineLayout) {
      why = std::string(library_name) + " reads machine files through " + path +
            ", which comes from another build of gpusel; use the simulator's libraries of one "
            "build together (reinstall gpusel, or rebuild it)";
      return nullptr;
    }
    return machine;
  }
  why = std::string(library_name) + " reads machine files through " + kMachinesLibrary +
        ", which is not beside it (looked for " + candidates[0] + " and " + candidates[1] +
        "); use the simulator's libraries together, from the folder gpusel builds or installs "
        "them in (lib/gpusel/sim)";
  return nullptr;
}

void collect(void* context, const char* message) {
  *static_cast<std::string*>(context) = message;
}

}  // namespace

const SimMachine& LoadedMachine::machine() const {
  static const SimMachine* const none = new SimMachine;  // never destroyed, as the shared ones
  if (view != nullptr) return *view;
  return shared != nullptr ? *shared : *none;
}

LoadedMachine load_from_environment(const void* anchor, const char* library_name,
                                    const char* vendor) {
  LoadedMachine out;
  const char* spec = std::getenv("GPUSEL_SIM_MACHINE");
  if (spec == nullptr || *spec == '\0') {
    out.error =
        "GPUSEL_SIM_MACHINE is not set; set it to a bundled machine's name or a machine "
        "file (`gpusel sim env MACHINE` prints the settings)";
    report(library_name, out.error);
    return out;
  }
  const std::string file = platform::library_file(anchor);
  const std::string folder = file.empty() ? "" : platform::folder_of(file);
  std::vector<std::string> dirs;
  if (!folder.empty()) {
    dirs.push_back(folder + kSeparator + "machines");
    dirs.push_back(folder + kSeparator + ".." + kSeparator + "machines");
  }
  const std::string setting = std::string("GPUSEL_SIM_MACHINE=\"") + spec + "\": ";
  try {
    const std::string path = find_machine(spec, dirs);
    std::string why;
    const SharedMachineFunction machine =
        folder.empty() ? nullptr : machines_reader(folder, library_name, why);
    if (machine == nullptr) {
      if (why.empty()) {
        why = std::string("cannot tell which file ") + library_name +
              " was loaded from, so cannot find " + kMachinesLibrary + " beside it";
      }
      out.error = setting + why;
    } else {
      std::string message;
      out.shared = machine(path.c_str(), &collect, &message);
      out.ok = out.shared != nullptr;
      if (!out.ok) out.error = setting + message;
      if (out.ok && vendor != nullptr && mixed_vendors(*out.shared))
        out.view = new SimMachine(vendor_view(*out.shared, vendor));
    }
  } catch (const std::exception& e) {
    out.error = setting + e.what();
  }
  if (!out.ok) report(library_name, out.error);
  return out;
}

}  // namespace gpusel::sim
