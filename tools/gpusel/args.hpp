// gpusel's command line before and after CLI11 reads it: --sim anywhere before the command,
// `gpusel --sim MACHINE -- COMMAND`, and messages for the usual mistakes (a misspelt command or
// option, a program's options without `--` before it).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
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

// A byte size given on the command line, read as GNU dd and truncate read them, with the unit's
// letter case ignored: plain bytes, or a number (a fraction is fine when the bytes come out whole)
// with K, M, G, T, KiB, MiB, GiB, TiB, Ki, Mi, Gi or Ti (powers of 1024), or kB, MB, GB, TB
// (powers of 1000), or B. Throws Error(BadInput) naming `option` for anything else, for 0, and
// for a size that is not a multiple of `multiple` (0: no multiple required). Sizes are read by
// the library's read_byte_size, the one parser for sizes.
std::uint64_t parse_size_option(const std::string& option, const std::string& text,
                                std::uint64_t multiple);

// After CLI11 refused `line.args`: a message that names the mistake and the remedy, or "" when
// nothing better than CLI11's own message can be said.
std::string explain_parse_error(const CLI::App& app, const CommandLine& line);

}  // namespace gpusel::cli
