// gpusel: put every process of a multi-GPU program on the right NVIDIA GPU.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>

#include "args.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "gpusel/error.hpp"
#include "gpusel/nvml.hpp"
#include "gpusel/spec.hpp"
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

// The command line's parser: every subcommand, or (`only`) the one the command line names.
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
  std::optional<CommandLine> line;  // the command line, parsed by `app`

  explicit Cli(const std::string& only) {
    app.name("gpusel");
    app.formatter(std::make_shared<HelpFormatter>());  // before the subcommands, which copy it
    app.require_subcommand(1);
    app.set_version_flag("--version", GPUSEL_VERSION_STRING);
    auto want = [&only](const char* name) { return only.empty() || only == name; };
    if (want("list")) list = setup_list(app, list_options);
    if (want("resolve")) resolve = setup_resolve(app, resolve_options);
    if (want("bind")) bind = setup_bind(app, bind_options);
    if (want("run")) run = setup_run(app, run_options);
    if (want("sim")) sim_cmd = setup_sim(app, sim_options);
    if (want("bench")) bench = setup_bench(app, bench_options);
    if (only.empty()) bench_worker = setup_bench_worker(app, bench_worker_options);
    if (want("doctor")) doctor = setup_doctor(app, doctor_options);
    if (want("setup")) setup = setup_setup(app, setup_options);
    if (only.empty()) interface = setup_interface(app, interface_options);
    // A plain command line (`only`) is never `gpusel --sim MACHINE -- COMMAND`.
    line.emplace(app,
                 "run on a simulated machine: a bundled name (`gpusel sim list`) or a machine "
                 "file; accepted before or after the command name; `gpusel --sim MACHINE -- "
                 "COMMAND` runs any program on it",
                 only.empty());
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
      if (parsed(interface)) return run_interface(app, interface_options);
    } catch (const std::exception& e) {
      return report_failure(e, json_output());
    }
    return 1;
  }

  // Whether the parsed command was asked for --json: a failure is then reported on stdout too.
  bool json_output() const {
    return (parsed(list) && list_options.json) || (parsed(resolve) && resolve_options.json) ||
           (parsed(bind) && bind_options.json) || (parsed(bench) && bench_options.json) ||
           (parsed(doctor) && doctor_options.json);
  }
};

// The subcommand a plain command line names: its first word that is not an option, when nothing
// before it but --sim and its value, and that word one of gpusel's everyday commands; else "".
// Building only that subcommand's options halves gpusel's start-up. Help, --version, `--`, any
// other option before the command and the internal commands take the whole parser.
std::string plain_command(int argc, char** argv) {
  static constexpr const char* kCommands[] = {"list", "resolve", "bind",  "run",
                                              "sim",  "bench",   "doctor"};
  for (int i = 1; i < argc; ++i) {
    const std::string_view t = argv[i];
    if (t == "--sim") {
      ++i;
      continue;
    }
    if (t.rfind("--sim=", 0) == 0) continue;
    if (t.empty() || t.front() == '-') return "";
    for (const char* c : kCommands) {
      if (t == c) {
        // Any help anywhere before `--` takes the whole parser, whose help it prints.
        for (int j = i + 1; j < argc; ++j) {
          const std::string_view u = argv[j];
          if (u == "--") break;
          if (u == "-h" || u.rfind("--help", 0) == 0) return "";
        }
        return c;
      }
    }
    return "";
  }
  return "";
}

// The command line read with only its subcommand's parser, and run; nullopt when that parser
// refuses it: the whole parser then reads it again, from the start, so that every message and exit
// status is the whole parser's.
std::optional<int> run_plain(const std::string& only, int argc, char** argv) {
  Cli cli(only);
  try {
    cli.line->parse(argc, argv);
  } catch (...) {
    return std::nullopt;
  }
  if (cli.line->exec()) return std::nullopt;
  return cli.dispatch();
}

// `gpusel [--sim MACHINE] resolve --gpu SPEC [--json | --format lines|csv|env]` (--sim also after
// `resolve`), the form launch scripts run once per job, read by hand: building CLI11's parser
// costs as much as the rest of resolve's own work. nullopt for any other form (an option unknown
// here or given twice, a value that starts with '-', a SPEC read_gpu_request refuses, --json with
// --format): CLI11 then reads the command line, and its messages stand.
struct PlainResolve {
  std::string sim;
  ResolveOptions options;
};

std::optional<PlainResolve> read_plain_resolve(int argc, char** argv) {
  PlainResolve p;
  bool command = false, sim = false, gpu = false, json = false, format = false;
  // A value: inline after '=' or the next word, never one that looks like an option.
  auto value_of = [&](int& i, std::string_view name, std::string& out) {
    const std::string_view t = argv[i];
    if (t.size() > name.size() && t[name.size()] == '=') {
      out = std::string(t.substr(name.size() + 1));
    } else if (t.size() == name.size() && i + 1 < argc) {
      out = argv[++i];
    } else {
      return false;
    }
    return !out.empty() && out.front() != '-';
  };
  auto named = [](std::string_view t, std::string_view name) {
    return t.substr(0, t.find('=')) == name;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string_view t = argv[i];
    std::string value;
    if (named(t, "--sim") && !sim) {
      if (!value_of(i, "--sim", p.sim)) return std::nullopt;
      sim = true;
    } else if (!command) {
      if (t != "resolve") return std::nullopt;
      command = true;
    } else if (named(t, "--gpu") && !gpu) {
      if (!value_of(i, "--gpu", value)) return std::nullopt;
      try {
        p.options.gpus = gpusel::read_gpu_request(value, true);
      } catch (...) {
        return std::nullopt;
      }
      gpu = true;
    } else if (t == "--json" && !json) {
      p.options.json = true;
      json = true;
    } else if (named(t, "--format") && !format) {
      if (!value_of(i, "--format", p.options.format) ||
          (p.options.format != "lines" && p.options.format != "csv" && p.options.format != "env")) {
        return std::nullopt;
      }
      format = true;
    } else {
      return std::nullopt;
    }
  }
  if (!command || !gpu || (json && format)) return std::nullopt;
  return p;
}

// As Cli::dispatch runs resolve.
int run_plain_resolve(const PlainResolve& p) {
  try {
    if (!p.sim.empty()) apply_sim(sim_setup(p.sim));
    return run_resolve(p.options);
  } catch (const std::exception& e) {
    return report_failure(e, p.options.json);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // The library's messages name --gpu and gpusel's commands, as this command's users write them.
  gpusel::detail::speak_to_command_line();
  // `gpusel --version` alone: the version, without building any parser (what CLI11 prints).
  if (argc == 2 && std::string_view(argv[1]) == "--version") {
    std::fputs(GPUSEL_VERSION_STRING "\n", stdout);
    return 0;
  }
  if (const std::string only = plain_command(argc, argv); !only.empty()) {
    if (only == "resolve") {
      if (const std::optional<PlainResolve> p = read_plain_resolve(argc, argv)) {
        return run_plain_resolve(*p);
      }
    }
    if (const std::optional<int> status = run_plain(only, argc, argv)) return *status;
  }
  Cli cli("");
  const CommandLine& line = *cli.line;
  // --sim stands before or after the command's name; `gpusel --sim X -- COMMAND` runs COMMAND on
  // the machine, as `gpusel sim exec X -- COMMAND` does.
  try {
    cli.line->parse(argc, argv);
    if (line.exec()) return run_sim_exec(line.sim(), line.command());
  } catch (const gpusel::Error& e) {
    print_error(e.what());
    return e.exit_code();
  } catch (const CLI::Success& e) {
    return cli.app.exit(e);
  } catch (const CLI::ValidationError& e) {
    print_error(e.what());  // gpusel's own message, with its remedy
    return 2;
  } catch (const CLI::ParseError& e) {
    const std::string better = line.explain();
    print_error(better.empty() ? std::string(e.what()) + "; run `gpusel --help` for usage"
                               : better);
    return 2;
  }
  return cli.dispatch();
}
