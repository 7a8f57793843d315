// gpusel internal-probe-cuda: prints what CUDA enumerates in this process, for a parent that
// must not initialise CUDA itself (see gpusel::probe_cuda).
#ifdef _WIN32
#include <fcntl.h>
#include <io.h>
#else
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>
#endif

#include <cstdlib>
#include <iostream>
#include <string>

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
  // Die with the gpusel that started this probe (it waits a bounded time, and may itself be
  // stopped meanwhile), even while cuInit hangs. It passes its process id, so that a parent that
  // died before the prctl is noticed too. (Windows: the parent's Job Object kills the probe with
  // it, see probe_win.inc.)
#ifndef _WIN32
  if (const char* parent = std::getenv("GPUSEL_PROBE_PARENT"); parent != nullptr) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (std::to_string(getppid()) != parent) return 1;
  }
#endif
#ifdef _WIN32
  _setmode(_fileno(stdout), _O_BINARY);  // the parent parses "\n"-ended lines, not "\r\n"
#endif
  try {
    std::cout << serialise_devices(cuda_devices()) << std::flush;
    return 0;
  } catch (const std::exception& e) {
    std::cout << "error\t" << e.what() << "\n" << std::flush;
    return 1;
  }
}

}  // namespace gpusel::cli
