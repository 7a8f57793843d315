// One source for gpusel's interface: the man page, the bash, zsh and fish completions and the
// README's synopsis are generated at build time from the CLI11 tree the command parses with
// (`gpusel internal-interface FORMAT`), so none of them can lag behind an option.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace gpusel::cli {

// What a shell offers for an option's value (or a positional's), recorded beside the option:
//   "gpu"       a --gpu list: indices and UUIDs of the machine, free:, and with `all` allowed, all
//   "gpu-all"   the same, `all` included
//   "machine"   a bundled simulated machine, or a file
//   "file"      a file name
//   "command"   a program, then its arguments
//   "choice"    one of the option's choices (add_choice_option)
//   "list"      a comma-separated list of the option's choices
//   ""          free text (a number, a size): nothing is offered
void set_completion(const CLI::Option* option, std::string kind,
                    std::vector<std::string> choices = {});
std::string completion_kind(const CLI::Option* option);
const std::vector<std::string>& completion_choices(const CLI::Option* option);

// An option whose value is one of `choices`; any other value is refused with the choices and,
// when one is close, `did you mean 'X'?`.
CLI::Option* add_choice_option(CLI::App& cmd, const std::string& name, std::string& value,
                               std::vector<std::string> choices, const std::string& help);

// The message for `value` when it is none of `choices` ("" when it is one of them).
std::string not_a_choice(const std::string& value, const std::vector<std::string>& choices);

// --gpu's help in the commands that take a list.
inline constexpr const char* kGpuHelp =
    "GPUs: nvidia-smi indices or UUIDs (any unique prefix), comma-separated; free:N for N free "
    "GPUs that sit well together; all for every GPU this process may use";

struct InterfaceOptions {
  std::string format;  // man, bash, zsh, fish, synopsis
  std::string template_file;
  std::string output;  // "" or "-": stdout
};

// Hidden: `gpusel internal-interface FORMAT [--template FILE] [--output FILE]`.
void setup_interface(CLI::App& command, InterfaceOptions& options);
int run_interface(const CLI::App& app, const InterfaceOptions& options);

}  // namespace gpusel::cli
