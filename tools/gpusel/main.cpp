// gpusel: put every process of a multi-GPU program on the right NVIDIA GPU.
#include <CLI/CLI.hpp>
#include <iostream>

#include "args.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "gpusel/error.hpp"
#include "gpusel/version.h"

int main(int argc, char** argv) {
  using namespace gpusel::cli;
  CLI::App app{"gpusel: resolve --gpu lists to GPU UUIDs and bind each process to its GPU"};
  app.name("gpusel");
  app.require_subcommand(1);
  app.set_version_flag("--version", GPUSEL_VERSION_STRING);
  std::string sim;
  app.add_option("--sim", sim,
                 "run on a simulated machine: a bundled name (`gpusel sim list`) or a machine "
                 "file; accepted before or after the command name; `gpusel --sim MACHINE -- "
                 "COMMAND` runs any program on it")
      ->type_name("MACHINE");

  ListOptions list_options;
  ResolveOptions resolve_options;
  SimOptions sim_options;
  BindOptions bind_options;
  RunOptions run_options;
  CLI::App* list = setup_list(app, list_options);
  CLI::App* resolve = setup_resolve(app, resolve_options);
  CLI::App* bind = setup_bind(app, bind_options);
  CLI::App* run = setup_run(app, run_options);
  CLI::App* sim_cmd = setup_sim(app, sim_options);
  CLI::App* probe = setup_probe(app);
  BenchOptions bench_options, bench_worker_options;
  CLI::App* bench = setup_bench(app, bench_options);
  CLI::App* bench_worker = setup_bench_worker(app, bench_worker_options);
  DoctorOptions doctor_options;
  CLI::App* doctor = setup_doctor(app, doctor_options);

  // --sim is read wherever it stands before the command; `gpusel --sim X -- COMMAND` runs COMMAND
  // on the machine, as `gpusel sim exec X -- COMMAND` does.
  CommandLine line;
  bool sim_applied = false;
  try {
    line = read_command_line(app, argc, argv);
    if (line.exec) return run_sim_exec(line.sim, line.command);
    if (line.gpu_all != 0) {
      // `--gpu all` becomes the GPUs themselves, read on the machine the command will run on.
      if (!line.sim.empty()) apply_sim(sim_setup(line.sim));
      sim_applied = true;
      expand_gpu_all(line);
    }
  } catch (const gpusel::Error& e) {
    print_error(e.what());
    return e.exit_code();
  }
  if (!sim_applied) sim = line.sim;
  try {
    std::vector<std::string> given(line.args.begin() + 1, line.args.end());
    join_wait_values(given);  // --wait SECONDS -> --wait=SECONDS
    // CLI11 takes the arguments in reverse order, without the program's name.
    std::vector<std::string> args(given.rbegin(), given.rend());
    app.parse(args);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ValidationError& e) {
    print_error(e.what());  // gpusel's own message, with its remedy
    return 2;
  } catch (const CLI::ParseError& e) {
    const std::string better = explain_parse_error(app, line);
    print_error(better.empty() ? std::string(e.what()) + "; run `gpusel --help` for usage"
                               : better);
    return 2;
  }

  try {
    if (!sim.empty()) apply_sim(sim_setup(sim));
    if (list->parsed()) return run_list(list_options);
    if (resolve->parsed()) return run_resolve(resolve_options);
    if (sim_cmd->parsed()) return run_sim(sim_options);
    if (bind->parsed()) return run_bind(bind_options);
    if (run->parsed()) return run_run(run_options);
    if (probe->parsed()) return run_probe();
    if (bench->parsed()) return run_bench(bench_options);
    if (bench_worker->parsed()) return run_bench_worker(bench_worker_options);
    if (doctor->parsed()) return run_doctor(doctor_options);
  } catch (const gpusel::Error& e) {
    print_error(e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    print_error(e.what());
    return 1;
  }
  return 1;
}
