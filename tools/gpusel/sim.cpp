// gpusel sim: the bundled simulated machines, and the settings that put a shell on one.
#include <fmt/format.h>
#ifndef _WIN32
#include <unistd.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>

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

}  // namespace

#ifndef _WIN32  // Windows: sim_exec_win.cpp
int run_sim_exec(const std::string& machine, const std::vector<std::string>& command) {
  if (command.empty() || command.front().empty()) {
    throw bad_input("sim exec " + machine +
                    ": no command given; put it after --, as in: gpusel sim exec " + machine +
                    " -- python3 prog.py");
  }
  const SimSetup setup = sim_setup(machine);
  const std::string program = program_path("sim exec", command.front());
  apply_sim(setup);
  exec_program("sim exec", program, command);
}
#endif

CLI::App* setup_sim(CLI::App& app, SimOptions& options) {
  CLI::App* cmd = app.add_subcommand("sim", "simulated GPU machines, for testing without GPUs");
  cmd->require_subcommand(1);
  options.list = cmd->add_subcommand("list", "the bundled machines, one line each");
  options.env = cmd->add_subcommand(
      "env", "print the shell settings that put programs on a simulated machine");
  options.env->add_option("MACHINE", options.machine, "a bundled machine's name or a machine file")
      ->required();
  options.exec = cmd->add_subcommand(
      "exec",
      "run a command on a simulated machine: gpusel sim exec MACHINE -- COMMAND [ARGS...] (the "
      "settings `gpusel sim env` prints, then exec)");
  options.exec->add_option("MACHINE", options.machine, "a bundled machine's name or a machine file")
      ->required();
  options.exec->add_option("COMMAND", options.command, "the program and its arguments (after --)")
      ->required();
  return cmd;
}

int run_sim(const SimOptions& options) {
  if (options.exec->parsed()) return run_sim_exec(options.machine, options.command);
  if (options.env->parsed()) {
    // Everything printed is read by `eval`: each value is one single-quoted word, and the
    // comment line holds no line break (load_machine refuses names with control characters).
    SimSetup setup = sim_setup(options.machine);
    const std::string argument =
        one_printable_line(options.machine) ? detail::shell_quote(options.machine) : "MACHINE";
    std::cout << "# gpusel simulated machine "
              << (one_printable_line(setup.machine_name) ? setup.machine_name : "(unnamed)")
              << ": eval \"$(gpusel sim env " << argument << ")\"\n";
    for (const auto& [key, value] : setup.env)
      std::cout << "export " << key << "=" << detail::shell_quote(value) << "\n";
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
