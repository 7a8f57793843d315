// One setup_x (adds the options, and any nested commands, to the command main.cpp declared, when
// the parser enters it) and run_x (does the work, returns the exit status) per subcommand, each
// pair in its own file.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "choice.hpp"

namespace gpusel::cli {

struct ListOptions {
  bool json = false;
  bool probe = false;
  std::string watch_text;  // --watch's value: "" not given, else seconds ("2" without a value)
  bool watch = false;      // set by run_list from watch_text
  // The terminal's width when watched on one (0: unknown, or not a terminal): the table leaves out
  // or shortens columns, in a fixed order, until its rows fit (docs/commands.md).
  std::size_t columns = 0;
};
void setup_list(CLI::App& command, ListOptions& options);
int run_list(const ListOptions& options);

struct ResolveOptions {
  ChoiceOptions choice;
  GpuRequest gpus;  // --gpu, read once (`all` too: the library expands it)
  std::string raw;
  bool json = false;
  std::string format = "lines";  // lines, csv or env
};
void setup_resolve(CLI::App& command, ResolveOptions& options);
int run_resolve(const ResolveOptions& options);

struct SimOptions {
  CLI::App* list = nullptr;
  CLI::App* env = nullptr;
  CLI::App* exec = nullptr;
  CLI::App* shell = nullptr;
  std::string machine;
  bool undo = false;  // sim env --undo
  std::vector<std::string> command;
};
void setup_sim(CLI::App& command, SimOptions& options);
int run_sim(const SimOptions& options);
// Replaces gpusel with `command` on the simulated machine (`gpusel sim exec`, `gpusel --sim X --`).
int run_sim_exec(const std::string& machine, const std::vector<std::string>& command);
// `gpusel sim shell MACHINE [-- COMMAND]`: COMMAND (else $SHELL) on the machine, in a private mount
// namespace that also has the machine's /dev/nvidia* files and /proc/driver/nvidia* entries.
int run_sim_shell(const std::string& machine, const std::vector<std::string>& command);

struct BindOptions {
  std::string gpu;
  bool share = false;
  bool json = false;
  bool quiet = false;
  std::vector<std::string> command;  // `bind -- COMMAND`: run it on the GPU (exec); empty: none
};
void setup_bind(CLI::App& command, BindOptions& options);
int run_bind(const BindOptions& options);

struct RunOptions {
  ChoiceOptions choice;
  bool quiet = false;
  GpuRequest gpus;  // --gpu, read once (`all` too: the library expands it)
  std::vector<std::string> command;
  bool tag_output = false;
  double grace = 10;
  std::string bind_cpu = "none";
  std::string set_visible = "none";
  int ranks_per_gpu = 1;
  bool no_placement_check = false;
};
void setup_run(CLI::App& command, RunOptions& options);
int run_run(const RunOptions& options);

struct BenchOptions {
  ChoiceOptions choice;
  GpuRequest gpus;  // --gpu, read once (`all` too: the library expands it)
  std::string tests = "h2d,d2h,d2d";
  std::string size = "512MiB";
  int copies = 16;
  int samples = 3;
  bool parallel = false;
  bool json = false;
  std::string plot;   // an SVG file to draw the rates in
  std::string csv;    // a CSV file for the rates, "-" for stdout
  std::string out;    // the worker's folder for its figures
  std::string peers;  // the worker's p2p peers: the job's GPUs (UUIDs), comma-separated
};
void setup_bench(CLI::App& command, BenchOptions& options);
int run_bench(const BenchOptions& options);
void setup_bench_worker(CLI::App& command, BenchOptions& options);
int run_bench_worker(const BenchOptions& options);

struct DoctorOptions {
  bool json = false;
};
void setup_doctor(CLI::App& command, DoctorOptions& options);
int run_doctor(const DoctorOptions& options);

struct SetupOptions {
  std::string lease_dir;  // empty: the default shared store
};
void setup_setup(CLI::App& command, SetupOptions& options);
int run_setup(const SetupOptions& options);

}  // namespace gpusel::cli
