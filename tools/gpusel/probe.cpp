// gpusel internal-probe-cuda: prints what CUDA enumerates in this process, for a parent that
// must not initialise CUDA itself (see gpusel::probe_cuda).
#include <iostream>

#include "commands.hpp"
#include "gpusel/cuda.hpp"
#include "gpusel/probe.hpp"

namespace gpusel::cli {

CLI::App* setup_probe(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("internal-probe-cuda", "");
  cmd->group("");  // hidden from --help
  return cmd;
}

int run_probe() {
  try {
    std::cout << serialise_devices(cuda_devices()) << std::flush;
    return 0;
  } catch (const std::exception& e) {
    std::cout << "error\t" << e.what() << "\n" << std::flush;
    return 1;
  }
}

}  // namespace gpusel::cli
