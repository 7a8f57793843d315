// What both driver doubles share: finding and loading the machine named by GPUSEL_SIM_MACHINE.
#pragma once

#include <string>

#include "machine.hpp"

namespace gpusel::sim {

struct LoadedMachine {
  bool ok = false;
  std::string error;  // printed once to stderr by the double that hit it
  SimMachine machine;
};

// Loads the machine once per library (`anchor` is any function of the calling library, used to
// find the bundled machines beside it). The first failure is reported on stderr, once.
LoadedMachine load_from_environment(const void* anchor, const char* library_name);

// Writes "gpusel-sim (<library>): <message>" to stderr.
void report(const char* library_name, const std::string& message);

}  // namespace gpusel::sim
