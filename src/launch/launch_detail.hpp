// Internal: starting workers with the program already looked up, so that `gpusel run`, which
// looks it up before resolving GPUs (to fail before anything else), walks PATH once.
#pragma once

#include <string>

#include "gpusel/launch.hpp"

namespace gpusel::detail {

// launch_workers, running `program` (find_program's answer for options.command[0]).
int launch_program(const LaunchOptions& options, const std::string& program);

}  // namespace gpusel::detail
