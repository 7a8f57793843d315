// gpusel's command line before and after CLI11 reads it: --sim anywhere before the command,
// `gpusel --sim MACHINE -- COMMAND`, and messages for the usual mistakes (a misspelt command or
// option, a program's options without `--` before it).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace gpusel::cli {

// Levenshtein distance in which swapping two neighbouring characters costs 1 ("lsit", "list").
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate `word` was most likely meant to be: the nearest within a distance that fits the
// word's length, else the only one it is a prefix of; "" when none is close.
std::string closest(std::string_view word, const std::vector<std::string>& candidates);

struct CommandLine {
  std::vector<std::string> args;     // what CLI11 gets: argv without --sim and its value
  std::string sim;                   // the --sim value; "" when not given
  bool exec = false;                 // `gpusel [--sim MACHINE] -- COMMAND...` (no subcommand)
  std::vector<std::string> command;  // exec's COMMAND and its arguments
};

// Takes --sim MACHINE (or --sim=MACHINE) from anywhere before `--` and before the command of
// `run` or `sim exec`. Throws Error(BadInput) for --sim given twice or without a value.
CommandLine read_command_line(const CLI::App& app, int argc, char** argv);

// After CLI11 refused `line.args`: a message that names the mistake and the remedy, or "" when
// nothing better than CLI11's own message can be said.
std::string explain_parse_error(const CLI::App& app, const CommandLine& line);

}  // namespace gpusel::cli
