// What both driver doubles share: finding and loading the machine named by GPUSEL_SIM_MACHINE.
#pragma once

#include <string>

#include "machine.hpp"

namespace gpusel::sim {

struct LoadedMachine {
  bool ok = false;
  std::string error;  // printed once to stderr by the double that hit it
  // The machine, held by libgpusel-sim-machines.so for every library of the process (valid until
  // the process ends); nullptr unless ok.
  const SimMachine* shared = nullptr;
  // On a machine with GPUs of both makers, what the loading library's vendor sees of it
  // (vendor_view: its GPUs alone); nullptr otherwise. Never destroyed, as the shared machine.
  const SimMachine* view = nullptr;

  // The machine (its vendor's view, where that was asked for); an empty one (no GPUs) unless ok.
  const SimMachine& machine() const;
};

// Loads the machine once per library (`anchor` is any function of the calling library, used to
// find the bundled machines and libgpusel-sim-machines.so beside it; the machine file itself is
// parsed once per process, by that library). The first failure is reported on stderr, once.
// `vendor` ("nvidia" or "amd"; nullptr for all): whose driver the library plays, so that on a
// machine with GPUs of both makers it sees its own alone.
LoadedMachine load_from_environment(const void* anchor, const char* library_name,
                                    const char* vendor = nullptr);

// Writes "gpusel-sim (<library>): <message>" to stderr.
void report(const char* library_name, const std::string& message);

// The platform's part (sim_common.cpp, sim_common_win.cpp).
namespace platform {

// The file of the library that holds `anchor`, or "" when the system does not say.
std::string library_file(const void* anchor);
// The folder part of a file's path ("." for a bare name).
std::string folder_of(const std::string& file);
// Whether something exists at `path`.
bool exists(const std::string& path);
// A library opened by its path (never looked for elsewhere) and never closed, or nullptr with
// the system's reason in `why`.
void* open_library(const std::string& path, std::string& why);
// A function of it, or nullptr.
void* library_function(void* library, const char* name);

}  // namespace platform

}  // namespace gpusel::sim
