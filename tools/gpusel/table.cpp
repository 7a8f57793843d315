// gpusel's whole command line in one table: every command, option and positional, with its help.
// The parser (args.cpp) reads argv against it; help, the man page, the shell completions and the
// README's synopsis (interface.cpp) are written from it. Each command's run_x reads its values
// through read_x (the command's own file), which checks what the table cannot say.
//
// Everything here is constant: the table costs a command nothing to build.
#include <string_view>

#include "args.hpp"
#include "gpusel/lease.hpp"
#include "interface.hpp"

namespace gpusel::cli {
namespace {

using namespace std::string_view_literals;

constexpr std::string_view kSimHelp =
    "run on a simulated machine: a bundled name (`gpusel sim list`) or a machine file; accepted "
    "before or after the command name; `gpusel --sim MACHINE -- COMMAND` runs any program on it";

// ---- options more than one command takes ------------------------------------------------------

constexpr Option kGpuList{"--gpu", Takes::Value, "SPEC", kGpuHelp, true, "gpu-all"};
constexpr Option kMinFreeMemory{
    "--min-free-memory", Takes::Value, "SIZE",
    "free:N: a GPU is free with at least this much memory free (default: 90% of its memory)"};
constexpr Option kMaxUtilization{
    "--max-utilization", Takes::Value, "PCT",
    "free:N: a GPU is free at or under this utilisation, in percent (default 10)"};
// --wait alone waits for ever; --wait DURATION (or --wait=DURATION) at most that long.
constexpr Option kWaitFree{"--wait",
                           Takes::MaybeValue,
                           "DURATION",
                           "wait until enough GPUs are free, at most DURATION (30, 90s, 15m, 2h; "
                           "for ever without a value)",
                           false,
                           {},
                           {},
                           {},
                           "inf"};
constexpr Option kWaitLeased{"--wait",
                             Takes::MaybeValue,
                             "DURATION",
                             "wait for leased or busy GPUs instead of failing, at most DURATION "
                             "(30, 90s, 15m, 2h; for ever without a value); waiting jobs are "
                             "served in arrival order",
                             false,
                             {},
                             {},
                             {},
                             "inf"};
constexpr Option kShareLeased{
    "--share",
    Takes::Nothing,
    {},
    "run on GPUs another job has leased, without leasing them (by default such a GPU is refused)"};
constexpr Option kMachine{
    "MACHINE", Takes::Word, {}, "a bundled machine's name or a machine file", true};

// ---- list ------------------------------------------------------------------------------------

constexpr Option kListOptions[] = {
    {"--json", Takes::Nothing, {}, "print one JSON object"},
    {"--probe",
     Takes::Nothing,
     {},
     "also ask CUDA, in a child process, how it numbers the GPUs, and flag any difference from "
     "NVML's reading"},
    {"--watch",
     Takes::MaybeValue,
     "SECONDS",
     "refresh every SECONDS (default 2) until Ctrl-C: in place on a terminal, else one listing "
     "after another (with --json, one object a line)",
     false,
     {},
     {},
     {},
     "2"},
};
constexpr Command kList{"list", "list the GPUs: nvidia-smi index, CUDA ordinal here, UUID, ...",
                        kListOptions};

// ---- resolve ---------------------------------------------------------------------------------

constexpr std::string_view kFormats[] = {"lines"sv, "csv"sv, "env"sv};
constexpr Option kResolveOptions[] = {
    kGpuList,
    kMinFreeMemory,
    kMaxUtilization,
    kWaitFree,
    {"--json", Takes::Nothing, {}, "print {\"resolved\": ..., \"gpus\": [...]}"},
    {"--format", Takes::Value, "MODE",
     "lines: one UUID a line (default); csv: one line, comma-separated, for GPUSEL_GPUS or "
     "CUDA_VISIBLE_DEVICES; env: GPUSEL_GPUS=..., for export or eval",
     false, "choice", kFormats, "--json"},
};
constexpr Command kResolve{"resolve",
                           "resolve a --gpu list to full GPU UUIDs, one per line in rank order",
                           kResolveOptions};

// ---- bind ------------------------------------------------------------------------------------

constexpr Option kBindOptions[] = {
    {"--gpu", Takes::Value, "ENTRY",
     "one GPU: an nvidia-smi index or a UUID (any unique prefix), or free:1; without it, "
     "GPUSEL_GPU, GPUSEL_GPUS and the local rank decide"},
    {"--share",
     Takes::Nothing,
     {},
     "share the GPU with other processes on purpose (as GPUSEL_SHARE=1): another process's claim "
     "on it is no error"},
    {"--json", Takes::Nothing, {}, "print one JSON object (not with a COMMAND)"},
    {"--quiet",
     Takes::Nothing,
     {},
     "with a COMMAND: no line on stderr about the GPU chosen (warnings still come)"},
    {"COMMAND",
     Takes::Words,
     {},
     "the program to run on the GPU, and its arguments (after --): gpusel claims the GPU and "
     "replaces itself with the program, which finds the GPU as its CUDA device 0 "
     "(CUDA_VISIBLE_DEVICES=<its UUID>) and keeps the claim while it runs"},
};
constexpr Command kBind{
    "bind",
    "bind this process's GPU as a worker does (from --gpu, else GPUSEL_GPU, GPUSEL_GPUS and the "
    "local rank) and show it; with -- COMMAND, run COMMAND in its place on that GPU",
    kBindOptions};

// ---- run -------------------------------------------------------------------------------------

constexpr std::string_view kBindCpu[] = {"none"sv, "node"sv, "exclusive"sv};
constexpr std::string_view kSetVisible[] = {"none"sv, "own"sv, "job"sv};
constexpr Option kRunOptions[] = {
    kGpuList,
    {"--tag-output", Takes::Nothing, {}, "prefix each line of a worker's output with [rank N]"},
    {"--grace", Takes::Value, "SECONDS",
     "seconds between SIGTERM and SIGKILL when stopping workers (default 10)"},
    {"--bind-cpu", Takes::Value, "MODE",
     "none (default), node: the CPUs near each GPU, exclusive: split them", false, "choice",
     kBindCpu},
    {"--set-visible", Takes::Value, "MODE",
     "for programs that do not use gpusel: set each worker's CUDA_VISIBLE_DEVICES to every "
     "worker's GPU in rank order (job: for a program that uses cuda:LOCAL_RANK) or to its own GPU "
     "alone (own: for one that uses cuda:0); none (default) leaves it alone",
     false, "choice", kSetVisible},
    {"--ranks-per-gpu", Takes::Value, "K",
     "start K ranks on each GPU (consecutive ranks share one), each told it shares "
     "(GPUSEL_SHARE=1); default 1"},
    {"--no-placement-check",
     Takes::Nothing,
     {},
     "do not stop the job when a worker opens a GPU other than its own (for programs that use "
     "several GPUs per worker on purpose)"},
    kMinFreeMemory,
    kMaxUtilization,
    kWaitLeased,
    kShareLeased,
    {"--quiet",
     Takes::Nothing,
     {},
     "no line per rank on stderr when the workers start, nor what free:N picked"},
    {"COMMAND", Takes::Words, {}, "the program to run, and its arguments (after --)", true},
};
constexpr Command kRun{
    "run", "start one process per GPU: gpusel run --gpu SPEC [options] -- COMMAND [ARGS...]",
    kRunOptions};

// ---- sim -------------------------------------------------------------------------------------

constexpr Command kSimList{"list", "the bundled machines, one line each", {}};
constexpr Option kSimEnvOptions[] = {
    {"MACHINE",
     Takes::Word,
     {},
     "a bundled machine's name or a machine file (a shell on a simulated machine already moves "
     "to this one)"},
    {"--undo",
     Takes::Nothing,
     {},
     "print the shell settings that leave the simulated machine, each variable sim env set back "
     "to what it was before (unset if it was unset)",
     false,
     {},
     {},
     "MACHINE"},
};
constexpr Command kSimEnv{
    "env", "print the shell settings that put programs on a simulated machine", kSimEnvOptions};
constexpr Option kSimExecOptions[] = {
    kMachine,
    {"COMMAND", Takes::Words, {}, "the program and its arguments (after --)", true},
};
constexpr Command kSimExec{
    "exec",
    "run a command on a simulated machine: gpusel sim exec MACHINE -- COMMAND [ARGS...] (the "
    "settings `gpusel sim env` prints, then exec)",
    kSimExecOptions};
constexpr Option kSimShellOptions[] = {
    kMachine,
    {"COMMAND", Takes::Words, {}, "the program and its arguments (after --); default: $SHELL"},
};
constexpr Command kSimShell{
    "shell",
    "a shell on a simulated machine that also has its device files (/dev/nvidia*) and the "
    "driver's /proc/driver/nvidia* entries, in a private mount namespace: gpusel sim shell "
    "MACHINE [-- COMMAND [ARGS...]] (Linux)",
    kSimShellOptions};
constexpr const Command* kSimCommands[] = {&kSimList, &kSimEnv, &kSimExec, &kSimShell};
constexpr Command kSim{"sim", "simulated GPU machines, for testing without GPUs", {}, kSimCommands};

// ---- bench -----------------------------------------------------------------------------------

constexpr std::string_view kTests[] = {"h2d"sv,          "d2h"sv,   "d2d"sv, "h2d-pageable"sv,
                                       "d2h-pageable"sv, "bidir"sv, "p2p"sv};
constexpr Option kBenchBwOptions[] = {
    kGpuList,
    kMinFreeMemory,
    kMaxUtilization,
    kWaitLeased,
    kShareLeased,
    {"--tests",
     Takes::Value,
     "LIST",
     "comma-separated: h2d, d2h, d2d, h2d-pageable, d2h-pageable, bidir, p2p (each GPU to each "
     "other selected GPU)",
     false,
     "list",
     kTests,
     {},
     {},
     "h2d,d2h,d2d"},
    {"--size",
     Takes::Value,
     "BYTES",
     "bytes per buffer, e.g. 512MiB",
     false,
     {},
     {},
     {},
     {},
     "512MiB"},
    {"--copies", Takes::Value, "N", "timed copies per sample", false, {}, {}, {}, {}, "16"},
    {"--samples",
     Takes::Value,
     "N",
     "samples per test; the median is reported",
     false,
     {},
     {},
     {},
     {},
     "3"},
    {"--parallel",
     Takes::Nothing,
     {},
     "measure all GPUs at once (they then share the host's links) and report the sum"},
    {"--json", Takes::Nothing, {}, "print {\"results\": [...]}"},
    {"--plot", Takes::Value, "FILE.svg",
     "also draw the rates beside each link's theoretical limit in an SVG file"},
    {"--csv", Takes::Value, "FILE", "also write the rows as CSV to FILE (- for stdout)"},
};
constexpr Command kBenchBw{"bw", "host<->device, device-local and GPU-to-GPU copy bandwidth",
                           kBenchBwOptions};
constexpr const Command* kBenchCommands[] = {&kBenchBw};
constexpr Command kBench{"bench", "benchmarks of the selected GPUs", {}, kBenchCommands};

// The process `bench bw` starts per GPU (hidden).
constexpr Option kBenchWorkerOptions[] = {
    {"--tests", Takes::Value, "LIST", {}},    {"--size", Takes::Value, "BYTES", {}},
    {"--copies", Takes::Value, "N", {}},      {"--samples", Takes::Value, "N", {}},
    {"--out", Takes::Value, "DIR", {}, true}, {"--peers", Takes::Value, "LIST", {}},
};
constexpr Command kBenchWorker{"internal-bench-worker", {}, kBenchWorkerOptions, {}, true};

// ---- doctor, setup ---------------------------------------------------------------------------

constexpr Option kDoctorOptions[] = {
    {"--json", Takes::Nothing, {}, "print {\"findings\": [...], ...}"},
};
constexpr Command kDoctor{
    "doctor", "check this machine and environment for what will go wrong before a job runs",
    kDoctorOptions};

static_assert(std::string_view(kSharedLeaseStore) == "/var/lib/gpusel/leases",
              "setup's help names the shared store");
constexpr Option kSetupOptions[] = {
    {"--lease-dir", Takes::Value, "DIR", "the store to make (default /var/lib/gpusel/leases)"},
};
constexpr Command kSetup{
    "setup", "as root: make (or repair) the shared lease store, so that leases bind every user",
    kSetupOptions};

// gpusel internal-interface FORMAT [--template FILE] [--output FILE] (hidden; the build's).
constexpr Option kInterfaceOptions[] = {
    {"FORMAT", Takes::Word, {}, "man, bash, zsh, fish or synopsis", true},
    {"--template", Takes::Value, "FILE", {}},
    {"--output", Takes::Value, "FILE", {}},
};
constexpr Command kInterface{"internal-interface", {}, kInterfaceOptions, {}, true};

// ---- gpusel ----------------------------------------------------------------------------------

constexpr Option kGpuselOptions[] = {
    {"--version", Takes::Nothing, {}, "print gpusel's version and exit"},
    {"--sim", Takes::Value, "MACHINE", kSimHelp},
};
constexpr const Command* kGpuselCommands[] = {&kList,  &kResolve,  &kBind,        &kRun,
                                              &kSim,   &kBench,    &kBenchWorker, &kDoctor,
                                              &kSetup, &kInterface};

}  // namespace

constinit const Command kGpusel{"gpusel",
                                "resolve --gpu lists to GPU UUIDs and bind each process to its GPU",
                                kGpuselOptions, kGpuselCommands};

}  // namespace gpusel::cli
