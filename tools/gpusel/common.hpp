// Helpers shared by gpusel's subcommands.
#pragma once

#include <cstdio>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpusel/resolution.hpp"
#include "gpusel/visible.hpp"

namespace gpusel::cli {

std::optional<std::string> env_value(const char* name);

// Sets an environment variable of this process (and the children it starts).
void set_env(const std::string& name, const std::string& value);
// Removes an environment variable from this process (and the children it starts).
void unset_env(const std::string& name);

// This executable's full path (/proc/self/exe; Windows: GetModuleFileNameW); empty when unknown.
std::string executable_path();

#ifdef _WIN32
// Windows has no exec: runs `command` (its program looked up as find_program does) as a child in a
// Job Object that ends it when gpusel ends, waits for it and returns its exit status. `who` ("sim
// exec", "bind") begins each message. Error(BadInput) when the program cannot be found or started.
int run_program_in_job(const std::string& who, const std::vector<std::string>& command);
#else
// The file execv will run for `name`, looked up in PATH as execvp would; Error(BadInput) naming
// `who` ("sim exec", "bind"), the program and PATH when there is none, so that a typo is gpusel's
// exit 2 rather than the shell's 127 or 126.
std::string program_path(const std::string& who, const std::string& name);

// Replaces this process with `program` (program_path's answer), run with `command` as its argv.
// Returns only by throwing: Error(BadInput) when the program cannot be run (not found, not
// runnable, not a program), Error(Failure) otherwise.
[[noreturn]] void exec_program(const std::string& who, const std::string& program,
                               const std::vector<std::string>& command);
#endif

// The simulator's doubles, and the variable other programs find them through (the loader's
// search path: on Windows PATH, which LoadLibrary without flags searches; gpusel itself loads
// them by the absolute paths in GPUSEL_NVML_LIBRARY and GPUSEL_CUDA_LIBRARY).
#ifdef _WIN32
inline constexpr const char* kSimNvml = "nvml.dll";
inline constexpr const char* kSimCuda = "nvcuda.dll";
inline constexpr const char* kSimSearchPath = "PATH";
inline constexpr const char* kPathSeparator = ";";
#else
inline constexpr const char* kSimNvml = "libnvidia-ml.so.1";
inline constexpr const char* kSimCuda = "libcuda.so.1";
inline constexpr const char* kSimSearchPath = "LD_LIBRARY_PATH";
inline constexpr const char* kPathSeparator = ":";
#endif

// The folder holding the simulator's libraries and machines/: GPUSEL_SIM_ROOT, else
// <folder of this executable>/../lib/gpusel/sim.
std::string sim_root();

// What puts a process on a simulated machine: the environment variables, in order.
struct SimSetup {
  std::string machine_path;
  std::string machine_name;
  std::map<std::string, std::string> env;
};

// Finds and checks a machine (bundled name or path). Throws Error(BadInput) naming the file,
// line and key of a bad machine file. Besides the simulator's variables, env holds
// GPUSEL_SIM_SAVED: what those variables were before, for `gpusel sim env --undo`. When it is set
// already (a shell on a simulated machine), the new machine replaces that one: the loader's path
// is built on the saved value, not on one that holds the first machine's folder, and the saved
// values stay those from before the first.
SimSetup sim_setup(const std::string& machine);

// The variable that holds what `gpusel sim env` replaced.
inline constexpr const char* kSimSaved = "GPUSEL_SIM_SAVED";

// One variable as it was before `gpusel sim env`: its value, or nullopt when it was unset.
struct SavedVariable {
  std::string name;
  std::optional<std::string> value;
};

// GPUSEL_SIM_SAVED's text for `saved`: entries separated by spaces, NAME for a variable that was
// unset, NAME=VALUE for one that was set (VALUE may be empty), with %, space and control
// characters in VALUE written %XX (hex). One line, no quotes: `env` shows it as it is.
std::string encode_sim_saved(const std::vector<SavedVariable>& saved);

// What GPUSEL_SIM_SAVED holds; nullopt when it is unset (no shell put on a simulated machine by
// `gpusel sim env`). Throws Error(BadInput) naming the variable and its value when it is not
// what encode_sim_saved writes.
std::optional<std::vector<SavedVariable>> sim_saved();

// Why --sim cannot work: the simulator's libraries are not in `root`.
std::string missing_simulator(const std::string& root);

// Sets the variables in this process, so that gpusel and every child it starts use the machine.
void apply_sim(const SimSetup& setup);

// The GPUs `r` resolved to, in rank order, with every field NVML gives (a resolution reads only
// what resolving needs); nullopt for an entry NVML does not list (NVML unavailable).
std::vector<std::optional<GpuInfo>> resolved_in_full(const Resolution& r);

// The simulated machine's name when GPUSEL_SIM_MACHINE is set, else nullopt.
std::optional<std::string> simulated_machine();

// A CUDA driver version as CUDA writes it (12080 -> "12.8"), "unknown" for 0 or less.
inline std::string cuda_version_text(int v) {
  if (v <= 0) return "unknown";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

// `text` ended as a sentence, ready for the next one: ". " added, or just " " when it already ends
// in '.', '?' or '!' (so that "is the driver installed?" is not followed by ". ").
std::string sentence(const std::string& text);

// "--wait "soon" is not a duration: give seconds ...": what --wait says of a value it cannot read
// (choice.cpp), the same whether the reader (args.cpp) or the command finds it.
std::string not_a_duration(const std::string& option, const std::string& value);

// "1 GPU", "2 GPUs": a count and a noun, in the plural unless the count is 1.
std::string count_of(std::size_t n, const std::string& noun);

// The library's messages hold a program's wording beside the command line's where they differ
// (gpusel::worded): what this command shows of them is said in its users' words, --gpu and
// `gpusel list`. said(e) is the same for an exception (its what() unless it is a gpusel::Error).
std::string said(std::string_view text);
std::string said(const std::exception& e);

// stdout and stderr through C stdio, as `to_stdout() << text << "\n" << flushed`: the command
// includes no <iostream>, whose static set-up cost every command 80,000 instructions
// (docs/performance.md).
struct StdioText {
  std::FILE* file;
};
struct Flushed {};
inline constexpr Flushed flushed{};
inline const StdioText& operator<<(const StdioText& s, std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), s.file);
  return s;
}
inline const StdioText& operator<<(const StdioText& s, Flushed) {
  std::fflush(s.file);
  return s;
}
inline StdioText to_stdout() {
  return StdioText{stdout};
}
inline StdioText to_stderr() {
  return StdioText{stderr};
}

// "gpusel: <message>" on stderr, in the command line's words (said).
void print_error(const std::string& message);
void print_warning(const std::string& message);
void print_note(const std::string& message);  // "gpusel: note: ..."
void print_line(const std::string& message);  // "gpusel: ...": a report on stderr

}  // namespace gpusel::cli
