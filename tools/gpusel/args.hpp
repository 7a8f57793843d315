// gpusel's command line, parsed by CLI11 alone: --sim before or after the command's name,
// `gpusel --sim MACHINE -- COMMAND`, and messages for the usual mistakes (a misspelt command or
// option, a --gpu value the shell split, a program's options without `--` before it), found in
// what CLI11 read and left over.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpusel::cli {

// Levenshtein distance in which swapping two neighbouring characters costs 1 ("lsit", "list").
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate `word` was most likely meant to be: the nearest within a distance that fits the
// word's length, else the only one it is a prefix of; "" when none is close.
std::string closest(std::string_view word, const std::vector<std::string>& candidates);

// The command line as CLI11 parses it with `app`, and what CLI11 reports while it parses (its
// callbacks: each --sim as it reads it, each subcommand as it enters it, a program's first word as
// it validates it), with where each stood among the words: a message about a slip repeats the
// whole command line as it should have been typed, and CLI11 keeps the values it read, not the
// words around them.
class CommandLine {
 public:
  // Runs `declare`, which declares the commands (add_command); then declares, after app's help,
  // --version (`version`, when not empty) and --sim (`sim_help`) on `app` (and, hidden, --sim on
  // each command, so that it may stand before or after the command's name) and, with
  // `exec_form`, the COMMAND of `gpusel --sim MACHINE -- COMMAND`. `app` must outlive this object.
  CommandLine(CLI::App& app, const std::string& version, const std::string& sim_help,
              const std::function<void(CommandLine&)>& declare, bool exec_form = true);
  CommandLine(const CommandLine&) = delete;
  CommandLine& operator=(const CommandLine&) = delete;

  // Declares the command `name` (`hidden`: left out of help and the generated interface); `fill`
  // adds its options and nested commands when CLI11 enters it, so that a command line pays only
  // for the command it names (the parse is still CLI11's one reading of the whole line).
  CLI::App* add_command(const std::string& name, const std::string& description,
                        std::function<void(CLI::App&)> fill, bool hidden = false);
  // Fills every command not yet entered: for what describes the whole interface (man page,
  // completions).
  void complete();

  // Parses argv with CLI11. Throws Error(BadInput) for --sim given twice or without a machine, a
  // --gpu value the shell split or copied with its variable's name, and `gpusel -- COMMAND`
  // without a machine or a command; rethrows CLI11's own error (a CLI::ParseError; help and
  // --version are CLI::Success) for anything else it refused.
  void parse(int argc, char** argv);

  // After parse threw CLI11's error: a message that names the mistake and the remedy, or "" when
  // nothing better than CLI11's own message can be said.
  std::string explain() const;

  const std::string& sim() const { return sim_; }  // the --sim value; "" when not given
  // `gpusel [--sim MACHINE] -- COMMAND...` (no subcommand), and its COMMAND and arguments.
  bool exec() const { return exec_; }
  const std::vector<std::string>& command() const { return command_; }

 private:
  // A subcommand CLI11 entered: the word of its name, and how many words its parent had left
  // over by then (CLI11's remaining()).
  struct Entered {
    const CLI::App* app = nullptr;
    std::size_t word = 0;
    std::size_t parent_missing = 0;
  };
  // A --sim CLI11 read; `stray`: it came after a program's first word without `--` before it.
  struct Sim {
    std::string value;
    std::size_t first = 0, last = 0;  // the words it took (the same word for --sim=MACHINE)
    const CLI::App* app = nullptr;
    bool stray = false;
    std::size_t missing = 0;  // how many words `app` had left over by then
  };
  // The first word CLI11 gave a subcommand's COMMAND (run, sim exec).
  struct Start {
    const CLI::App* app = nullptr;
    std::size_t word = 0;
    std::size_t missing = 0;      // how many words `app` had left over by then
    bool after_dashdash = false;  // `--` came before it
  };
  // The first word CLI11 accepted nowhere, and what kind of mistake it is.
  struct Problem {
    enum class Kind { Command, Option, Argument, AfterCommand } kind;
    std::string word;
    std::size_t depth;  // where: path_[depth]
  };

  // A command, and what adds its options (null once it has).
  struct Command {
    CLI::App* app = nullptr;
    std::function<void(CLI::App&)> fill;
  };
  // Fills `command` if it is not yet, and readies it and its nested commands for parse().
  void complete(Command& command);
  // Records, as CLI11 enters `sub` (`left`: words still to read), where its name stood.
  void entered(const CLI::App* sub, const CLI::App* parent, std::size_t left);
  // Reads `option`, whose value may be left out, as gpusel's users expect (args.cpp says how).
  void read_optional_value(CLI::Option& option);
  void add_sim(CLI::App& app, const std::string& help, bool hidden);
  void took_sim(const CLI::App& app, const std::string& value);
  void check_gpu_slips() const;
  std::optional<Problem> first_problem() const;
  // words_ without the --sim CLI11 took (a suggested command line puts it first, in prefix());
  // at[i]: where words_[i] is in it, or would be.
  std::vector<std::string> kept(std::vector<std::size_t>& at) const;
  std::string prefix() const;                         // "gpusel", "gpusel --sim MACHINE"
  std::string command_path(std::size_t depth) const;  // "gpusel bench bw" for path_[2]

  CLI::App& app_;
  std::vector<std::string> words_;  // argv[1...], as typed
  std::vector<std::string> read_;   // what CLI11 reads: words_ (less a last `--sim=`)
  std::vector<std::string> args_;   // CLI11's list of what it has still to read: the last first
  std::vector<Entered> path_;       // the app, then each subcommand CLI11 entered
  std::vector<Command> commands_;   // as add_command declared them
  // The app's --help, which each command gets when it is filled (CLI11 would copy it into each
  // command as it declares it, at more cost than the rest of the declaration).
  std::string help_name_, help_description_;
  std::vector<Sim> sims_;
  std::optional<Start> start_;
  std::vector<std::string> exec_words_;  // what CLI11 gave the COMMAND after `gpusel ... --`
  std::string sim_;
  bool exec_ = false;
  std::vector<std::string> command_;
};

// A byte size given on the command line, read as GNU dd and truncate read them, with the unit's
// letter case ignored: plain bytes, or a number (a fraction is fine when the bytes come out whole)
// with K, M, G, T, KiB, MiB, GiB, TiB, Ki, Mi, Gi or Ti (powers of 1024), or kB, MB, GB, TB
// (powers of 1000), or B. Throws Error(BadInput) naming `option` for anything else, for 0, and
// for a size that is not a multiple of `multiple` (0: no multiple required). Sizes are read by
// the library's read_byte_size, the one parser for sizes.
std::uint64_t parse_size_option(const std::string& option, const std::string& text,
                                std::uint64_t multiple);

}  // namespace gpusel::cli
