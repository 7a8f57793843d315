// One read_x (the command's values from the command line, read against the table in table.cpp
// and checked) and run_x (does the work, returns the exit status) per subcommand, each pair in
// its own file.
#pragma once

#include <string>
#include <vector>

#include "args.hpp"
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
ListOptions read_list(const CommandLine& line);
int run_list(const ListOptions& options);

struct ResolveOptions {
  ChoiceOptions choice;
  GpuRequest gpus;  // --gpu, read once (`all` too: the library expands it)
  std::string raw;
  bool json = false;
  std::string format = "lines";  // lines, csv or env
};
ResolveOptions read_resolve(const CommandLine& line);
int run_resolve(const ResolveOptions& options);

struct SimOptions {
  std::string command;  // list, env, exec or shell
  std::string machine;
  bool undo = false;  // sim env --undo
  std::vector<std::string> program;
};
SimOptions read_sim(const CommandLine& line);
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
BindOptions read_bind(const CommandLine& line);
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
RunOptions read_run(const CommandLine& line);
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
BenchOptions read_bench(const CommandLine& line);
int run_bench(const BenchOptions& options);
BenchOptions read_bench_worker(const CommandLine& line);
int run_bench_worker(const BenchOptions& options);

struct DoctorOptions {
  bool json = false;
};
DoctorOptions read_doctor(const CommandLine& line);
int run_doctor(const DoctorOptions& options);

struct SetupOptions {
  std::string lease_dir;  // empty: the default shared store
};
SetupOptions read_setup(const CommandLine& line);
int run_setup(const SetupOptions& options);

}  // namespace gpusel::cli
