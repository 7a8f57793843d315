// gpusel's command line: one declarative table (table.cpp) of every command and option, and the
// parser that reads argv against it, once. Help, the man page, the completions and the README's
// synopsis are written from the same table (interface.cpp), so none of them can lag behind an
// option. The parser knows the whole line as typed, so its messages for the usual mistakes (a
// misspelt command or option, a --gpu value the shell split, a program's options without `--`
// before it) repeat the command line as it should have been typed.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gpusel::cli {

// Levenshtein distance in which swapping two neighbouring characters costs 1 ("lsit", "list").
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate `word` was most likely meant to be: the nearest within a distance that fits the
// word's length, else the only one it is a prefix of; "" when none is close.
std::string closest(std::string_view word, const std::vector<std::string>& candidates);

// What an option takes after its name.
enum class Takes : unsigned char {
  Nothing,     // a flag: --json (--json=true and --json=false are read too)
  Value,       // a value: --size 4MiB or --size=4MiB
  MaybeValue,  // --wait, --wait 30, --wait=30: the next word unless it is an option or `--`;
               // `--wait=` (empty) takes none
  Word,        // a positional word (MACHINE, FORMAT)
  Words,       // a program and its arguments (COMMAND): every word from its first on
};

// One row of the table: an option or a positional.
struct Option {
  std::string_view name;  // --gpu; a positional's name (MACHINE, COMMAND)
  Takes takes = Takes::Nothing;
  std::string_view value;  // the value's name in help (SPEC, SECONDS); "" for flags, positionals
  std::string_view help;
  bool required = false;
  // What a shell offers for the value (interface.hpp lists the kinds); "" to infer it from the
  // value's name. "choice": the value must be one of `choices`, checked as it is read.
  std::string_view completion = {};
  std::span<const std::string_view> choices = {};
  std::string_view excludes = {};       // an option it cannot be given with (both ways)
  std::string_view bare = {};           // MaybeValue: its value when given without one
  std::string_view shown_default = {};  // help's "(default: X)"
};

// A command: its options and positionals in the order help lists them, and its own commands (one
// of which must then be named).
struct Command {
  std::string_view name;  // "gpusel" for gpusel itself
  std::string_view help;
  std::span<const Option> options;
  std::span<const Command* const> commands = {};
  bool hidden = false;  // left out of help, completions and the man page
};

// gpusel itself: every command (table.cpp).
extern const Command kGpusel;

// argv read against a table. Every command accepts -h/--help and --sim MACHINE (before or after
// its name); gpusel itself --version and `gpusel --sim MACHINE -- COMMAND`.
class CommandLine {
 public:
  enum class Outcome { Run, Help, Version, Exec };

  explicit CommandLine(const Command& root) : root_(root) {}

  // Reads argv. Throws Error(BadInput) naming the first mistake and its remedy. Help (of the
  // command named) and --version win over any mistake but a --sim without a machine.
  Outcome parse(int argc, char** argv);

  // The commands named, below gpusel: "resolve", "sim env"; "" for none.
  std::string path() const;
  const std::string& sim() const { return sim_; }  // --sim's machine; "" when not given
  // A flag given (and not =false) to the command named.
  bool flag(std::string_view name) const;
  // The value given to an option or positional of the command named (its `bare` value for a
  // MaybeValue given alone); nullopt when not given.
  std::optional<std::string> value(std::string_view name) const;
  // COMMAND's words (run, bind, sim exec, sim shell, and gpusel's own exec form).
  const std::vector<std::string>& words() const { return program_; }
  // Whether --json was given to the command named: a failure is then reported on stdout too.
  bool asked_json() const { return json_; }
  // Help for the command named (every command's after a parse that failed before naming one).
  std::string help() const;

 private:
  struct Given {
    const Option* option = nullptr;
    std::string value;
    std::size_t word = 0;       // its name's word (a positional's own)
    bool inline_value = false;  // --gpu=VALUE
    bool value_word = false;    // its value is the next word (--wait 30)
  };
  struct Sim {
    std::string value;
    std::size_t first = 0, last = 0;  // the words it took (the same word for --sim=MACHINE)
  };
  struct Problem {
    enum class Kind { Command, Option, Argument, AfterCommand, Said } kind;
    std::size_t word = 0;
    std::size_t depth = 0;  // where: levels_[depth]
    std::string said;       // Kind::Said: the whole message
  };

  const Command& leaf() const { return *levels_.back(); }
  const Given* find(std::string_view name) const;
  void note(Problem problem);
  void read_option(std::size_t& i);
  void read_word(std::size_t i, bool options_ended);
  void check_sims();
  void check_gpu_slips() const;
  void check_whole() const;
  void check_maybe_values() const;
  std::string explain(const Problem& p) const;
  // words_ without the --sim gpusel took (a suggested command line puts it first, in prefix());
  // at[i]: where words_[i] is in it, or would be.
  std::vector<std::string> kept(std::vector<std::size_t>& at) const;
  std::string prefix() const;                         // "gpusel", "gpusel --sim MACHINE"
  std::string command_path(std::size_t depth) const;  // "gpusel bench bw" for levels_[2]

  const Command& root_;
  std::vector<std::string> words_;      // argv[1...], as typed
  std::vector<const Command*> levels_;  // gpusel, then each command named
  std::vector<Given> given_;
  std::vector<Sim> sims_;
  std::vector<std::string> program_;
  std::size_t program_word_ = static_cast<std::size_t>(-1);  // COMMAND's first word
  bool dashdash_ = false;                                    // a `--` came before COMMAND
  bool sim_missing_ = false;                                 // a --sim with no machine after it
  std::optional<Problem> problem_;
  std::string sim_;
  bool help_ = false, version_ = false, json_ = false;
};

// A byte size given on the command line, read as GNU dd and truncate read them, with the unit's
// letter case ignored: plain bytes, or a number (a fraction is fine when the bytes come out whole)
// with K, M, G, T, KiB, MiB, GiB, TiB, Ki, Mi, Gi or Ti (powers of 1024), or kB, MB, GB, TB
// (powers of 1000), or B. Throws Error(BadInput) naming `option` for anything else, for 0, and
// for a size that is not a multiple of `multiple` (0: no multiple required). Sizes are read by
// the library's read_byte_size, the one parser for sizes.
std::uint64_t parse_size_option(const std::string& option, const std::string& text,
                                std::uint64_t multiple);

// A whole number from `low` to `high` given to `name`, else `fallback`; Error(BadInput) naming the
// option, its value and the range otherwise.
long long whole_option(const CommandLine& line, std::string_view name, long long low,
                       long long high, long long fallback);

}  // namespace gpusel::cli
