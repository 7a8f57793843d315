// gpusel sim: the bundled simulated machines, and the settings that put a shell on one.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "commands.hpp"
#include "common.hpp"
#include "machine.hpp"

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

CLI::App* setup_sim(CLI::App& app, SimOptions& options) {
  CLI::App* cmd = app.add_subcommand("sim", "simulated GPU machines, for testing without GPUs");
  cmd->require_subcommand(1);
  options.list = cmd->add_subcommand("list", "the bundled machines, one line each");
  options.env = cmd->add_subcommand(
      "env", "print the shell settings that put programs on a simulated machine");
  options.env->add_option("MACHINE", options.machine, "a bundled machine's name or a machine file")
      ->required();
  return cmd;
}

int run_sim(const SimOptions& options) {
  if (options.env->parsed()) {
    // Everything printed is read by `eval`: each value is one single-quoted word, and the
    // comment line holds no line break (load_machine refuses names with control characters).
    SimSetup setup = sim_setup(options.machine);
    const std::string argument =
        one_printable_line(options.machine) ? sim::shell_quote(options.machine) : "MACHINE";
    std::cout << "# gpusel simulated machine "
              << (one_printable_line(setup.machine_name) ? setup.machine_name : "(unnamed)")
              << ": eval \"$(gpusel sim env " << argument << ")\"\n";
    for (const auto& [key, value] : setup.env)
      std::cout << "export " << key << "=" << sim::shell_quote(value) << "\n";
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
    try {
      sim::SimMachine m = sim::load_machine(f.string());
      fmt::print("{:<{}}  {}\n", f.stem().string(), width, m.description);
    } catch (const sim::MachineError& e) {
      print_error(e.what());
      status = 1;
    }
  }
  return status;
}

}  // namespace gpusel::cli
