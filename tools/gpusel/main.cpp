// gpusel: put every process of a multi-GPU program on the right NVIDIA GPU.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <optional>

#include "args.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "gpusel/cli11.hpp"
#include "gpusel/error.hpp"
#include "gpusel/version.h"
#include "gpusel_detail.hpp"
#include "interface.hpp"
#include "problem_json.hpp"

namespace {

using namespace gpusel::cli;

// Help as CLI11 writes it, without the value a flag takes when given alone, which CLI11 shows in
// the flag's name (`--wait{inf}`): the description says it.
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_name(const CLI::Option* opt, bool positional) const override {
    return without_braces(CLI::Formatter::make_option_name(opt, positional));
  }
  std::string make_option_usage(const CLI::Option* opt) const override {
    return without_braces(CLI::Formatter::make_option_usage(opt));
  }

 private:
  static std::string without_braces(std::string text) {
    for (std::size_t open = text.find('{'); open != std::string::npos;
         open = text.find('{', open)) {
      const std::size_t close = text.find('}', open);
      if (close == std::string::npos) break;
      text.erase(open, close - open + 1);
    }
    return text;
  }
};

// The command line's parser: CLI11, reading it once. Every command is declared here, by name and
// description; the options of a command are added only when CLI11 enters it (CommandLine's
// add_command), so that `gpusel resolve` does not pay for building run's or bench's.
struct Cli {
  CLI::App app{"gpusel: resolve --gpu lists to GPU UUIDs and bind each process to its GPU"};
  ListOptions list_options;
  ResolveOptions resolve_options;
  SimOptions sim_options;
  BindOptions bind_options;
  RunOptions run_options;
  BenchOptions bench_options, bench_worker_options;
  DoctorOptions doctor_options;
  SetupOptions setup_options;
  InterfaceOptions interface_options;
  std::optional<CommandLine> line;  // the command line, parsed by `app`
  CLI::App* list = nullptr;
  CLI::App* resolve = nullptr;
  CLI::App* bind = nullptr;
  CLI::App* run = nullptr;
  CLI::App* sim_cmd = nullptr;
  CLI::App* bench = nullptr;
  CLI::App* bench_worker = nullptr;
  CLI::App* doctor = nullptr;
  CLI::App* setup = nullptr;
  CLI::App* interface = nullptr;

  Cli() {
    app.name("gpusel");
    app.formatter(std::make_shared<HelpFormatter>());  // before the commands, which copy it
    app.require_subcommand(1);
    line.emplace(app, GPUSEL_VERSION_STRING,
                 "run on a simulated machine: a bundled name (`gpusel sim list`) or a machine "
                 "file; accepted before or after the command name; `gpusel --sim MACHINE -- "
                 "COMMAND` runs any program on it",
                 [this](CommandLine& l) { declare(l); });
  }

  void declare(CommandLine& l) {
    list = l.add_command("list", "list the GPUs: nvidia-smi index, CUDA ordinal here, UUID, ...",
                         [this](CLI::App& c) { setup_list(c, list_options); });
    resolve = l.add_command("resolve",
                            "resolve a --gpu list to full GPU UUIDs, one per line in rank order",
                            [this](CLI::App& c) { setup_resolve(c, resolve_options); });
    bind = l.add_command(
        "bind",
        "bind this process's GPU as a worker does (from --gpu, else GPUSEL_GPU, GPUSEL_GPUS and "
        "the local rank) and show it; with -- COMMAND, run COMMAND in its place on that GPU",
        [this](CLI::App& c) { setup_bind(c, bind_options); });
    run = l.add_command(
        "run", "start one process per GPU: gpusel run --gpu SPEC [options] -- COMMAND [ARGS...]",
        [this](CLI::App& c) { setup_run(c, run_options); });
    sim_cmd = l.add_command("sim", "simulated GPU machines, for testing without GPUs",
                            [this](CLI::App& c) { setup_sim(c, sim_options); });
    bench = l.add_command("bench", "benchmarks of the selected GPUs",
                          [this](CLI::App& c) { setup_bench(c, bench_options); });
    bench_worker = l.add_command(
        "internal-bench-worker", "",
        [this](CLI::App& c) { setup_bench_worker(c, bench_worker_options); }, true);
    doctor = l.add_command(
        "doctor", "check this machine and environment for what will go wrong before a job runs",
        [this](CLI::App& c) { setup_doctor(c, doctor_options); });
    setup = l.add_command(
        "setup", "as root: make (or repair) the shared lease store, so that leases bind every user",
        [this](CLI::App& c) { setup_setup(c, setup_options); });
    interface = l.add_command(
        "internal-interface", "", [this](CLI::App& c) { setup_interface(c, interface_options); },
        true);
  }

  static bool parsed(const CLI::App* cmd) { return cmd != nullptr && cmd->parsed(); }

  // Runs the parsed command.
  int dispatch() {
    try {
      if (!line->sim().empty()) apply_sim(sim_setup(line->sim()));
      if (parsed(list)) return run_list(list_options);
      if (parsed(resolve)) return run_resolve(resolve_options);
      if (parsed(sim_cmd)) return run_sim(sim_options);
      if (parsed(bind)) return run_bind(bind_options);
      if (parsed(run)) return run_run(run_options);
      if (parsed(bench)) return run_bench(bench_options);
      if (parsed(bench_worker)) return run_bench_worker(bench_worker_options);
      if (parsed(doctor)) return run_doctor(doctor_options);
      if (parsed(setup)) return run_setup(setup_options);
      if (parsed(interface)) {
        line->complete();  // the interface describes every command's options
        return run_interface(app, interface_options);
      }
    } catch (const std::exception& e) {
      return report_failure(e, json_output());
    }
    return 1;
  }

  // Whether --json was given to the command (or one of its commands) that CLI11 entered, for a
  // command line that failed to parse: what CLI11 read counts, whatever failed after it.
  static bool asked_json(const CLI::App* cmd) {
    if (cmd == nullptr) return false;
    if (const CLI::Option* o = cmd->get_option_no_throw("--json"); o != nullptr && o->count() > 0) {
      try {
        if (o->as<bool>()) return true;  // --json=false asks for none
      } catch (const CLI::Error&) {
        // a value that is not a flag's: not asked
      }
    }
    for (const CLI::App* sub : cmd->get_subcommands()) {
      if (asked_json(sub)) return true;
    }
    return false;
  }

  // Whether the parsed command was asked for --json: a failure is then reported on stdout too.
  bool json_output() const {
    return (parsed(list) && list_options.json) || (parsed(resolve) && resolve_options.json) ||
           (parsed(bind) && bind_options.json) || (parsed(bench) && bench_options.json) ||
           (parsed(doctor) && doctor_options.json);
  }
};

}  // namespace

int main(int argc, char** argv) {
  // The command line lives as long as the process: nothing in it needs tearing down, and freeing
  // CLI11's objects at exit cost every command 45,000 instructions (docs/performance.md).
  static Cli& cli = *new Cli;
  const CommandLine& line = *cli.line;
  // --sim stands before or after the command's name; `gpusel --sim X -- COMMAND` runs COMMAND on
  // the machine, as `gpusel sim exec X -- COMMAND` does.
  try {
    cli.line->parse(argc, argv);
    if (line.exec()) return run_sim_exec(line.sim(), line.command());
  } catch (const gpusel::Error& e) {
    return report_failure(e, Cli::asked_json(&cli.app));
  } catch (const CLI::Success& e) {
    return cli.app.exit(e);
  } catch (const gpusel::GpuOptionError& e) {
    return report_failure(e.error(), Cli::asked_json(&cli.app));  // gpusel's message, as data too
  } catch (const CLI::ValidationError& e) {
    return report_failure(gpusel::bad_input(said(e)), Cli::asked_json(&cli.app));
  } catch (const CLI::ParseError& e) {
    const std::string better = line.explain();
    return report_failure(
        gpusel::bad_input(better.empty() ? std::string(said(e)) + "; run `gpusel --help` for usage"
                                         : better),
        Cli::asked_json(&cli.app));
  }
  return cli.dispatch();
}
