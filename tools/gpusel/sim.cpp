// gpusel sim: the bundled simulated machines, and the settings that put a shell on one.
#include <fmt/format.h>
#include <cstdio>
#ifndef _WIN32
#include <unistd.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "common.hpp"
#include "gpusel/error.hpp"
#include "gpusel/resolution.hpp"
#include "gpusel_detail.hpp"
#include "sim_machine.hpp"

namespace gpusel::cli {
namespace {

// True when `text` can sit on one line of a shell comment: no control characters at all.
bool one_printable_line(const std::string& text) {
  return std::none_of(text.begin(), text.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
  });
}

// `sim env --undo`: the settings that put every variable `sim env` set back as GPUSEL_SIM_SAVED
// says it was. Nothing on stdout when there is nothing to undo, so that `eval` does nothing.
int run_sim_undo() {
  const std::optional<std::vector<SavedVariable>> saved = sim_saved();
  if (!saved) {
    std::string message =
        "sim env --undo: no simulated machine to leave: " + std::string(kSimSaved) +
        " is not set (`eval \"$(gpusel sim env MACHINE)\"` sets it, to undo)";
    if (const auto machine = env_value("GPUSEL_SIM_MACHINE"); machine && !machine->empty()) {
      message += "; GPUSEL_SIM_MACHINE=" + detail::quote_value(*machine) +
                 " was set some other way (by hand, or by an older gpusel): open a new shell, or "
                 "run `unset GPUSEL_SIM_MACHINE GPUSEL_NVML_LIBRARY GPUSEL_CUDA_LIBRARY "
                 "GPUSEL_ROCM_SMI_LIBRARY` and take "
                 "the simulator's folder out of " +
                 std::string(kSimSearchPath) + " yourself";
    } else {
      message += "; this shell is not on a simulated machine, so there is nothing to undo";
    }
    throw bad_input(message);
  }
  std::string out = "# gpusel: leave the simulated machine";
  if (const auto machine = simulated_machine(); machine && one_printable_line(*machine))
    out += " " + *machine;
  out += ": eval \"$(gpusel sim env --undo)\"\n";
  for (const SavedVariable& v : *saved) {
    out += v.value ? "export " + v.name + "=" + detail::shell_quote(*v.value) + "\n"
                   : "unset " + v.name + "\n";
  }
  out += "unset " + std::string(kSimSaved) + "\n";
  to_stdout() << out;
  return 0;
}

}  // namespace

#ifndef _WIN32  // Windows: sim_exec_win.cpp
int run_sim_exec(const std::string& machine, const std::vector<std::string>& command) {
  if (command.empty() || command.front().empty()) {
    throw bad_input("sim exec " + machine +
                    ": no command given; put it after --, as in: gpusel sim exec " + machine +
                    " -- python3 prog.py");
  }
  const SimSetup setup = sim_setup(machine);
  apply_sim(setup);  // first: its PATH finds the simulator's nvidia-smi
  const std::string program = program_path("sim exec", command.front());
  exec_program("sim exec", program, command);
}
#endif

SimOptions read_sim(const CommandLine& line) {
  SimOptions o;
  const std::string path = line.path();  // "sim env"
  o.command = path.substr(path.find(' ') + 1);
  o.machine = line.value("MACHINE").value_or("");
  o.undo = line.flag("--undo");
  o.program = line.words();
  return o;
}

int run_sim(const SimOptions& options) {
  if (options.command == "exec") return run_sim_exec(options.machine, options.program);
  if (options.command == "shell") return run_sim_shell(options.machine, options.program);
  if (options.command == "env" && options.undo) return run_sim_undo();
  if (options.command == "env") {
    if (options.machine.empty()) {
      throw bad_input(
          "sim env: no machine given; give a bundled machine's name or a machine file, as in: "
          "eval \"$(gpusel sim env dgx-h100)\" (`gpusel sim list` shows every machine), or "
          "--undo to leave the simulated machine");
    }
    // Everything printed is read by `eval`: each value is one single-quoted word, and the
    // comment line holds no line break (load_machine refuses names with control characters).
    SimSetup setup = sim_setup(options.machine);
    const std::string argument =
        one_printable_line(options.machine) ? detail::shell_quote(options.machine) : "MACHINE";
    to_stdout() << "# gpusel simulated machine "
                << (one_printable_line(setup.machine_name) ? setup.machine_name : "(unnamed)")
                << ": eval \"$(gpusel sim env " << argument
                << ")\"; leave it: eval \"$(gpusel sim env --undo)\"\n";
    for (const auto& [key, value] : setup.env)
      to_stdout() << "export " << key << "=" << detail::shell_quote(value) << "\n";
    return 0;
  }
  const std::string dir = sim_root() + "/machines";
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".toml") files.push_back(entry.path());
  }
  if (ec) {
    print_error("cannot read the bundled machines in " + dir + ": " + ec.message() +
                "; set GPUSEL_SIM_ROOT to the simulator's folder");
    return 1;
  }
  std::sort(files.begin(), files.end());
  std::size_t width = 0;
  for (const auto& f : files) width = std::max(width, f.stem().string().size());
  int status = 0;
  for (const auto& f : files) {
    const std::optional<SimMachineInfo> m =
        describe_sim_machine(sim_root(), f.string(), std::nullopt);
    if (!m) {
      print_error(missing_simulator(sim_root()));
      return 1;
    }
    if (m->ok) {
      fmt::print("{:<{}}  {}\n", f.stem().string(), width, m->description);
    } else {
      print_error(m->error);
      status = 1;
    }
  }
  return status;
}

}  // namespace gpusel::cli
