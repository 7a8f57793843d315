// gpusel: put every process of a multi-GPU program on the right NVIDIA GPU.
#include <cstdio>
#include <string>

#include "args.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "gpusel/error.hpp"
#include "gpusel/version.h"
#include "interface.hpp"
#include "problem_json.hpp"

namespace {

using namespace gpusel::cli;

void write_stdout(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
}

// The command named, its values read and checked first (bad input is reported before a
// simulated machine is set up), then run.
template <typename Options>
int start(const CommandLine& line, Options (*read)(const CommandLine&),
          int (*run)(const Options&)) {
  const Options options = read(line);
  if (!line.sim().empty()) apply_sim(sim_setup(line.sim()));
  return run(options);
}

int dispatch(const CommandLine& line) {
  const std::string command = line.path();
  if (command == "list") return start(line, read_list, run_list);
  if (command == "resolve") return start(line, read_resolve, run_resolve);
  if (command == "bind") return start(line, read_bind, run_bind);
  if (command == "run") return start(line, read_run, run_run);
  if (command.rfind("sim ", 0) == 0) return start(line, read_sim, run_sim);
  if (command == "bench bw") return start(line, read_bench, run_bench);
  if (command == "internal-bench-worker") return start(line, read_bench_worker, run_bench_worker);
  if (command == "doctor") return start(line, read_doctor, run_doctor);
  if (command == "setup") return start(line, read_setup, run_setup);
  if (command == "internal-interface") {
    const InterfaceOptions options = read_interface(line);
    return run_interface(kGpusel, options);
  }
  throw gpusel::failure("no command runs `gpusel " + command + "`");
}

}  // namespace

int main(int argc, char** argv) {
  CommandLine line(kGpusel);
  try {
    switch (line.parse(argc, argv)) {
      case CommandLine::Outcome::Help:
        write_stdout(line.help());
        return 0;
      case CommandLine::Outcome::Version:
        write_stdout(std::string(GPUSEL_VERSION_STRING) + "\n");
        return 0;
      case CommandLine::Outcome::Exec:
        return run_sim_exec(line.sim(), line.words());
      case CommandLine::Outcome::Run:
        break;
    }
    return dispatch(line);
  } catch (const std::exception& e) {
    return report_failure(e, line.asked_json());
  }
}
