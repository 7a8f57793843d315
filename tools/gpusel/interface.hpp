// One source for gpusel's interface: the man page, the bash, zsh and fish completions and the
// README's synopsis are generated at build time from the table the command line is read with
// (table.cpp; `gpusel internal-interface FORMAT`), so none of them can lag behind an option.
#pragma once

#include <string>
#include <vector>

namespace gpusel::cli {

class CommandLine;
struct Command;

// What a shell offers for an option's value (or a positional's), Option::completion:
//   "gpu"       a --gpu list: indices and UUIDs of the machine, free:, and with `all` allowed, all
//   "gpu-all"   the same, `all` included
//   "machine"   a bundled simulated machine, or a file
//   "file"      a file name
//   "command"   a program, then its arguments
//   "choice"    one of the option's choices (checked as the option is read)
//   "list"      a comma-separated list of the option's choices
//   ""          inferred from the value's name (SPEC, ENTRY: gpu; MACHINE; FILE..., DIR: file;
//               COMMAND: command), else free text (a number, a size): nothing is offered

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
InterfaceOptions read_interface(const CommandLine& line);
int run_interface(const Command& root, const InterfaceOptions& options);

}  // namespace gpusel::cli
