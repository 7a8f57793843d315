#include "args.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <utility>

#include "common.hpp"
#include "gpusel/error.hpp"
#include "gpusel/launch.hpp"
#include "gpusel/spec.hpp"
#include "gpusel_detail.hpp"
#include "interface.hpp"

namespace gpusel::cli {
namespace {

constexpr std::size_t kNone = static_cast<std::size_t>(-1);

// `--`, the end of options (compared by hand: std::string's == with a C string is a call).
bool is_dashdash(std::string_view word) {
  return word.size() == 2 && word[0] == '-' && word[1] == '-';
}

bool looks_like_option(const std::string& word) {
  return word.size() > 1 && word[0] == '-' && !is_dashdash(word);
}

// A word that reads as a number ("-1", "-.5"), which an option may take as its value.
bool looks_like_number(const std::string& word) {
  const std::size_t at = !word.empty() && (word[0] == '-' || word[0] == '+') ? 1 : 0;
  return at < word.size() &&
         (std::isdigit(static_cast<unsigned char>(word[at])) != 0 || word[at] == '.');
}

bool is_positional(const Option& o) {
  return o.takes == Takes::Word || o.takes == Takes::Words;
}

std::vector<std::string> visible_commands(const Command& command) {
  std::vector<std::string> names;
  for (const Command* c : command.commands) {
    if (!c->hidden) names.emplace_back(c->name);
  }
  return names;
}

std::vector<std::string> option_names(const Command& command) {
  std::vector<std::string> names{"--help"};
  for (const Option& o : command.options) {
    if (!is_positional(o)) names.emplace_back(o.name);
  }
  if (std::find(names.begin(), names.end(), "--sim") == names.end()) names.emplace_back("--sim");
  return names;
}

const Option* find_option(const Command& command, std::string_view name) {
  for (const Option& o : command.options) {
    if (!is_positional(o) && o.name == name) return &o;
  }
  return nullptr;
}

// Whether `name` is a program that PATH (or its own path) gives.
bool names_a_program(const std::string& name) {
#ifdef _WIN32
  (void)name;
  return true;  // looked up when run
#else
  try {
    (void)program_path("run", name);
    return true;
  } catch (const Error&) {
    return false;
  }
#endif
}

// Whether words[j + 1] is the value of --wait written as words[j] in `run` (a MaybeValue option
// of a command that runs a program), as check_maybe_values lets it stand: a duration, or what
// can only have been meant as one (a number, an empty word, a word with `--` after it, a word
// that names no program), refused as such; not a program's name (`--wait python train.py`).
bool reads_as_maybe_value(const std::vector<std::string>& words, std::size_t j) {
  const std::string& next = words[j + 1];
  if (next.empty() || detail::parse_duration(next) || looks_like_number(next)) return true;
  if (j + 2 < words.size() && is_dashdash(words[j + 2])) return true;
  return !names_a_program(next);
}

// How many words the option `o` written as words[j] takes there, in a command that runs a
// program (`run`): its name, and its value when that is the next word as read_option reads it
// and check_maybe_values lets it stand.
std::size_t option_words(const Option* o, const std::vector<std::string>& words, std::size_t j) {
  if (o == nullptr || words[j].find('=') != std::string::npos || j + 1 >= words.size()) return 1;
  const std::string& next = words[j + 1];
  if (o->takes == Takes::Value) return 2;
  if (o->takes == Takes::MaybeValue && !is_dashdash(next) &&
      (!looks_like_option(next) || looks_like_number(next)) && reads_as_maybe_value(words, j))
    return 2;
  return 1;
}

// Whether `word` (up to its `=`) is one of `command`'s options, or one every command takes.
bool names_an_option(const Command& command, const std::string& word, bool top) {
  const std::string name = word.substr(0, word.find('='));
  if (name == "-h" || name == "--help" || name == "--sim" || (top && name == "--version"))
    return true;
  return find_option(command, name) != nullptr;
}

std::string shell_word(const std::string& word) {
  if (!word.empty() && word.find_first_of(" \t\n'\"\\$`*?[]{}()<>|&;#~") == std::string::npos)
    return word;
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string join_words(const std::vector<std::string>& words, std::size_t from, std::size_t to) {
  std::string out;
  for (std::size_t i = from; i < to && i < words.size(); ++i) {
    if (!out.empty()) out += ' ';
    out += shell_word(words[i]);
  }
  return out;
}

// A word the shell split off a --gpu list: GPU entries with commas around or between them ("1",
// ",1", "1,2", "GPU-4ba7"), nothing else.
bool looks_like_gpu_entries(const std::string& word) {
  if (word.empty() || word.front() == '-') return false;
  bool any = false;
  for (std::string_view piece : detail::split_commas(word)) {
    if (piece.empty()) continue;
    if (!is_gpu_index(piece) && !(is_gpu_uuid(piece) && piece.size() > 4)) return false;
    any = true;
  }
  return any;
}

// `VARIABLE=VALUE`: a shell assignment (CUDA_VISIBLE_DEVICES=2,3) given as a --gpu value.
bool is_assignment(std::string_view value, std::string_view& name, std::string_view& rest) {
  const std::size_t eq = value.find('=');
  if (eq == 0 || eq == std::string_view::npos) return false;
  for (char c : value.substr(0, eq)) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  name = value.substr(0, eq);
  rest = value.substr(eq + 1);
  return true;
}

bool is_program(const std::string& word) {
  try {
    find_program(word);
    return true;
  } catch (const Error&) {
    return false;
  }
}

// A flag's value after `=`: true or false, in the spellings scripts use.
std::optional<bool> flag_value(const std::string& text) {
  std::string t;
  for (char c : text) t += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (t == "true" || t == "1" || t == "yes" || t == "on") return true;
  if (t == "false" || t == "0" || t == "no" || t == "off") return false;
  return std::nullopt;
}

// ---- help -----------------------------------------------------------------------------------

constexpr std::size_t kHelpWidth = 100;
constexpr std::size_t kHelpColumn = 30;

// `text` broken into lines of at most kHelpWidth columns, each after `indent` blanks but the first
// (which follows what the caller wrote, `used` columns).
std::string wrapped(std::string_view text, std::size_t used, std::size_t indent) {
  std::string out;
  std::size_t column = used;
  bool first_word = true;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find(' ', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view word = text.substr(at, end - at);
    at = end + 1;
    if (word.empty()) continue;
    if (!first_word && column + 1 + word.size() > kHelpWidth) {
      out += "\n" + std::string(indent, ' ');
      column = indent;
    } else if (!first_word) {
      out += ' ';
      ++column;
    }
    out += word;
    column += word.size();
    first_word = false;
  }
  return out;
}

std::string help_row(const std::string& left, std::string_view text) {
  std::string row = "  " + left;
  if (row.size() + 2 > kHelpColumn) {
    row += "\n" + std::string(kHelpColumn, ' ');
  } else {
    row += std::string(kHelpColumn - row.size(), ' ');
  }
  return row + wrapped(text, kHelpColumn, kHelpColumn) + "\n";
}

std::string option_left(const Option& o) {
  std::string left(o.name);
  if (o.takes == Takes::Value) left += " " + std::string(o.value);
  if (o.takes == Takes::MaybeValue) left += " [" + std::string(o.value) + "]";
  if (o.takes == Takes::Words) left += " [ARGS...]";
  return left;
}

std::string option_text(const Option& o) {
  std::string text(o.help);
  if (!o.shown_default.empty()) text += " (default: " + std::string(o.shown_default) + ")";
  if (o.required) text += " (required)";
  return text;
}

}  // namespace
std::size_t edit_distance(std::string_view a, std::string_view b) {
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

std::string closest(std::string_view word, const std::vector<std::string>& candidates) {
  // Leading dashes do not count towards how long the word is.
  const std::size_t letters = word.size() - std::min(word.find_first_not_of('-'), word.size());
  const std::size_t limit = letters <= 3 ? 1 : letters <= 6 ? 2 : 3;
  std::string best;
  std::size_t best_distance = limit + 1;
  bool tie = false;
  for (const std::string& c : candidates) {
    const std::size_t d = edit_distance(word, c);
    if (d < best_distance) {
      best = c;
      best_distance = d;
      tie = false;
    } else if (d == best_distance) {
      tie = true;
    }
  }
  if (!best.empty() && !tie) return best;
  std::string prefixed;
  for (const std::string& c : candidates) {
    if (letters >= 2 && c.size() > word.size() && c.compare(0, word.size(), word) == 0) {
      if (!prefixed.empty()) return "";
      prefixed = c;
    }
  }
  return prefixed;
}

// ---- reading the line -----------------------------------------------------------------------

CommandLine::Outcome CommandLine::parse(int argc, char** argv) {
  words_.assign(argv + 1, argv + argc);
  levels_.assign(1, &root_);
  given_.clear();
  sims_.clear();
  program_.clear();
  program_word_ = kNone;
  dashdash_ = sim_missing_ = help_ = version_ = json_ = false;
  problem_.reset();
  sim_.clear();

  bool options_ended = false;  // after `--`: no word is an option
  for (std::size_t i = 0; i < words_.size(); ++i) {
    const std::string& word = words_[i];
    if (program_word_ != kNone) {
      // A program's words given without `--` before them: an option among them is the program's,
      // or gpusel's given too late; which is not for gpusel to guess.
      if (!dashdash_ && looks_like_option(word))
        note(Problem{Problem::Kind::AfterCommand, i, levels_.size() - 1, {}});
      program_.push_back(word);
      continue;
    }
    if (options_ended && levels_.size() == 1) {  // `gpusel --sim MACHINE -- COMMAND`
      program_word_ = i;
      program_.push_back(word);
      continue;
    }
    if (is_dashdash(word)) {
      // The end of gpusel's options: what follows fills the positionals (`sim exec -- MACHINE
      // COMMAND`), then is the program's.
      options_ended = true;
      if (levels_.size() == 1) dashdash_ = true;
      continue;
    }
    if (!options_ended && looks_like_option(word)) {
      read_option(i);
      continue;
    }
    read_word(i, options_ended);
  }
  json_ = flag("--json");  // the last --json given decides (--json=false asks for none)
  if (sim_missing_) {
    throw bad_input(
        "--sim needs a machine after it: a bundled name (`gpusel sim list` shows them) or the "
        "path of a machine file, as in `gpusel --sim dgx-h100 list`");
  }
  if (help_) return Outcome::Help;
  if (version_) return Outcome::Version;
  check_sims();
  check_gpu_slips();
  // `gpusel [--sim MACHINE] -- COMMAND [ARGS...]`: no command's name, nothing but --sim before
  // `--`.
  if (levels_.size() == 1 && dashdash_ && !problem_) {
    if (sim_.empty()) {
      throw bad_input(
          "`gpusel -- COMMAND` needs a machine or GPUs to run COMMAND on: `gpusel --sim "
          "MACHINE -- COMMAND` runs it on a simulated machine, `gpusel run --gpu SPEC -- "
          "COMMAND` once per GPU");
    }
    if (program_.empty()) {
      throw bad_input("--sim " + detail::quote_value(sim_) +
                      " -- names no command after --; write it as `gpusel --sim " +
                      shell_word(sim_) + " -- python3 prog.py`");
    }
    return Outcome::Exec;
  }
  // A program's name taken as --wait's value is told first: the option after the program that
  // it left (`--wait python3 train.py --json`) is the program's, once the name is back.
  if (!problem_ || problem_->kind == Problem::Kind::AfterCommand) check_maybe_values();
  if (problem_) throw bad_input(explain(*problem_));
  check_whole();
  return Outcome::Run;
}

void CommandLine::note(Problem problem) {
  if (!problem_) problem_ = std::move(problem);
}

void CommandLine::read_option(std::size_t& i) {
  const std::string& word = words_[i];
  const std::size_t eq = word.find('=');
  const std::string name = word.substr(0, eq);
  const bool inline_value = eq != std::string::npos;
  const std::string text = inline_value ? word.substr(eq + 1) : std::string();
  const std::size_t depth = levels_.size() - 1;
  // The next word, when it can be a value: not `--`, nor an option (a negative number can be);
  // an option's value, nor one of this command's options (`--gpu --json` lacks its value, `--grace
  // -inf` has one).
  const std::string* next = i + 1 < words_.size() ? &words_[i + 1] : nullptr;
  const bool next_is_value = next != nullptr && !is_dashdash(*next) &&
                             (!looks_like_option(*next) || looks_like_number(*next));
  const bool next_is_option_value =
      next != nullptr && !is_dashdash(*next) &&
      (!looks_like_option(*next) || !names_an_option(leaf(), *next, depth == 0));
  if (name == "-h" || name == "--help") {
    help_ = true;
    return;
  }
  if (name == "--version" && depth == 0) {
    version_ = true;
    return;
  }
  if (name == "--sim") {
    // `--sim=` names no machine (`--sim="$MACHINE"` with the variable unset): the next word is
    // read for itself.
    if (inline_value) {
      sims_.push_back(Sim{text, i, i});
    } else if (next_is_value) {
      sims_.push_back(Sim{words_[i + 1], i, i + 1});
      ++i;
    } else {
      sim_missing_ = true;  // reported once the line is read (and whether --json was asked)
    }
    return;
  }
  const Option* o = find_option(leaf(), name);
  if (o == nullptr) {
    note(Problem{Problem::Kind::Option, i, depth, {}});
    return;
  }
  Given g{o, {}, i, inline_value};
  switch (o->takes) {
    case Takes::Nothing:
      if (inline_value) {
        const std::optional<bool> on = flag_value(text);
        if (!on) {
          note(Problem{Problem::Kind::Said, i, depth,
                       name + " is a flag: give it alone, or as " + name + "=true or " + name +
                           "=false (not " + detail::quote_value(text) + ")"});
          return;
        }
        g.value = *on ? "true" : "false";
      } else {
        g.value = "true";
      }
      break;
    case Takes::Value:
      if (inline_value) {
        g.value = text;
      } else if (next_is_option_value) {
        g.value = words_[++i];
      } else {
        note(Problem{Problem::Kind::Said, i, depth,
                     name + " needs a value (" + std::string(o->value) +
                         ") after it: " + std::string(o->help) + "; run `" + command_path(depth) +
                         " --help` for usage"});
        return;
      }
      break;
    case Takes::MaybeValue:
      if (inline_value) {
        g.value = text.empty() ? std::string(o->bare) : text;
      } else if (next_is_value) {
        g.value = words_[++i];
        g.value_word = true;
      } else {
        g.value = std::string(o->bare);
      }
      break;
    case Takes::Word:
    case Takes::Words:
      break;
  }
  // (A GPU list, SPEC or ENTRY, is read by the library, whose message for an empty one says more.)
  // `--wait "$T"` (a word of its own) likewise: neither a duration nor "alone" was meant for sure.
  const bool maybe = o->takes == Takes::MaybeValue && g.value_word;
  if ((o->takes == Takes::Value || maybe) && g.value.empty() && !leaf().hidden &&
      o->value != "SPEC" && o->value != "ENTRY") {
    // `--lease-dir="$DIR"` with DIR unset: refused, never read as "not given" (that would pick
    // the default store, the default GPUs' limits...).
    note(Problem{Problem::Kind::Said, i, depth,
                 name + " is given an empty value (as an unset shell variable gives); give it " +
                     (maybe ? "its " : "a ") + std::string(o->value) + ", or " +
                     (maybe ? "give " : "leave ") + name + (maybe ? " alone" : " out")});
    return;
  }
  if (o->completion == "choice" && !o->choices.empty()) {
    const std::vector<std::string> choices(o->choices.begin(), o->choices.end());
    const std::string wrong = not_a_choice(g.value, choices);
    if (!wrong.empty()) {
      note(Problem{Problem::Kind::Said, i, depth, name + ": " + wrong});
      return;
    }
  }
  if (o->takes != Takes::Nothing) {
    if (const Given* before = find(o->name); before != nullptr) {
      note(Problem{Problem::Kind::Said, i, depth,
                   name + " is given twice (" + detail::quote_value(before->value) + " and " +
                       detail::quote_value(g.value) + "); give it once" +
                       (name == "--gpu" ? ", every GPU in one comma-separated list" : "")});
    }
  }
  given_.push_back(std::move(g));
}

void CommandLine::read_word(std::size_t i, bool options_ended) {
  const std::string& word = words_[i];
  const std::size_t depth = levels_.size() - 1;
  const Command& here = leaf();
  if (!here.commands.empty()) {
    for (const Command* c : here.commands) {
      if (c->name == word) {
        levels_.push_back(c);
        return;
      }
    }
    note(Problem{Problem::Kind::Command, i, depth, {}});
    return;
  }
  for (const Option& o : here.options) {
    if (o.takes == Takes::Word && find(o.name) == nullptr) {
      given_.push_back(Given{&o, word, i, false});
      return;
    }
    if (o.takes == Takes::Words) {
      program_word_ = i;
      dashdash_ = options_ended;
      program_.push_back(word);
      return;
    }
  }
  note(Problem{Problem::Kind::Argument, i, depth, {}});
}

void CommandLine::check_sims() {
  if (sims_.size() > 1) {
    throw bad_input("--sim is given twice (" + detail::quote_value(sims_[0].value) + " and " +
                    detail::quote_value(sims_[1].value) + "); give one machine");
  }
  if (!sims_.empty()) sim_ = sims_.front().value;
}

// `run --gpu 0 --wait python train.py`: the word after --wait is its value, and "python" reads
// as no duration, so the program meant lost its name ("train.py" would be looked for, or none
// found). Refused before any program is looked for, with the line that waits as long as it takes
// and runs it. A value that can only have been meant as a duration (reads_as_maybe_value) is
// refused here as no duration, before the program is looked for too. (list's --watch is followed
// by no program: list reads its value.)
void CommandLine::check_maybe_values() const {
  const Command& here = leaf();
  if (std::none_of(here.options.begin(), here.options.end(),
                   [](const Option& o) { return o.takes == Takes::Words; })) {
    return;
  }
  for (const Given& g : given_) {
    if (g.option == nullptr || g.option->takes != Takes::MaybeValue || !g.value_word) continue;
    if (detail::parse_duration(g.value)) continue;
    const std::string name(g.option->name);
    std::vector<std::size_t> at;
    const std::vector<std::string> words = kept(at);
    const std::size_t v = at[g.word + 1];
    if (reads_as_maybe_value(words, at[g.word])) throw bad_input(not_a_duration(name, g.value));
    // The value becomes the program's first word; gpusel's own options between it and the
    // program stay before `--`.
    const std::size_t program = program_word_ != kNone ? at[program_word_] : words.size();
    const std::size_t options_end =
        dashdash_ && program > 0 && is_dashdash(words[program - 1]) ? program - 1 : program;
    std::vector<std::string> fixed(words.begin(), words.begin() + static_cast<std::ptrdiff_t>(v));
    fixed.insert(fixed.end(), words.begin() + static_cast<std::ptrdiff_t>(v + 1),
                 words.begin() + static_cast<std::ptrdiff_t>(options_end));
    fixed.push_back("--");
    fixed.push_back(words[v]);
    fixed.insert(fixed.end(), words.begin() + static_cast<std::ptrdiff_t>(program), words.end());
    throw bad_input(name + " " + detail::quote_value(g.value) +
                    " is not a duration (30, 90s, 15m, 2h), and the word after " + name +
                    " is read as its value; to wait for as long as it takes and run " +
                    detail::quote_value(g.value) + ", put -- before it: " + prefix() + " " +
                    join_words(fixed, 0, fixed.size()));
  }
}

// What only the whole line shows: a command that needs one of its own named, a required option
// or positional missing, two options that exclude each other.
void CommandLine::check_whole() const {
  const Command& here = leaf();
  const std::string where = command_path(levels_.size() - 1);
  if (!here.commands.empty()) {
    std::string names;
    for (const std::string& n : visible_commands(here)) names += (names.empty() ? "" : ", ") + n;
    throw bad_input("`" + where + "` needs a command: " + names + "; run `" + where +
                    " --help` for what each does");
  }
  for (const Option& o : here.options) {
    const bool given = o.takes == Takes::Words ? !program_.empty() : find(o.name) != nullptr;
    if (o.required && !given) {
      std::string example;
      if (o.takes == Takes::Words) {
        // The line as typed, with a program after it.
        std::vector<std::size_t> at;
        const std::vector<std::string> typed = kept(at);
        example = "; put it after --, as in `" + prefix() + " " +
                  join_words(typed, 0, typed.size()) +
                  (!typed.empty() && is_dashdash(typed.back()) ? "" : " --") + " python3 train.py`";
      }
      throw bad_input("`" + where + "`: " + std::string(o.name) + " is required" +
                      (o.help.empty() ? std::string() : ": " + std::string(o.help)) + example +
                      "; run `" + where + " --help` for usage");
    }
  }
  // Given, for exclusion: a flag given =false is not.
  const auto given = [&](std::string_view name) {
    const Option* o = find_option(here, name);
    return o != nullptr && o->takes == Takes::Nothing ? flag(name) : find(name) != nullptr;
  };
  for (const Option& o : here.options) {
    if (!o.excludes.empty() && given(o.name) && given(o.excludes)) {
      throw bad_input("`" + where + "`: " + std::string(o.excludes) + " and " +
                      std::string(o.name) + " cannot be given together; give one of them");
    }
  }
}

const CommandLine::Given* CommandLine::find(std::string_view name) const {
  for (const Given& g : given_) {
    if (g.option->name == name) return &g;
  }
  return nullptr;
}

std::string CommandLine::path() const {
  std::string out;
  for (std::size_t i = 1; i < levels_.size(); ++i)
    out += (out.empty() ? "" : " ") + std::string(levels_[i]->name);
  return out;
}

bool CommandLine::flag(std::string_view name) const {
  const Given* g = nullptr;
  for (const Given& each : given_) {
    if (each.option->name == name) g = &each;  // the last one given
  }
  return g != nullptr && g->value == "true";
}

std::optional<std::string> CommandLine::value(std::string_view name) const {
  const Given* g = find(name);
  if (g == nullptr) return std::nullopt;
  return g->value;
}

std::vector<std::string> CommandLine::kept(std::vector<std::size_t>& at) const {
  std::vector<bool> sim(words_.size(), false);
  for (const Sim& s : sims_)
    std::fill(sim.begin() + static_cast<std::ptrdiff_t>(s.first),
              sim.begin() + static_cast<std::ptrdiff_t>(s.last) + 1, true);
  std::vector<std::string> out;
  at.assign(words_.size() + 1, kNone);
  for (std::size_t i = 0; i < words_.size(); ++i) {
    at[i] = out.size();
    if (!sim[i]) out.push_back(words_[i]);
  }
  at[words_.size()] = out.size();
  return out;
}

std::string CommandLine::command_path(std::size_t depth) const {
  std::string out = "gpusel";
  for (std::size_t i = 1; i <= depth && i < levels_.size(); ++i)
    out += " " + std::string(levels_[i]->name);
  return out;
}

std::string CommandLine::prefix() const {
  return "gpusel" + (sim_.empty() ? "" : " --sim " + shell_word(sim_));
}

// The usual ways a --gpu value reaches gpusel broken by the shell, each answered with the whole
// command line as it should have been typed, GPUs all kept: `--gpu 0 1` (blanks for commas; the
// second GPU went to something else: an argument refused, or run's program), and `--gpu
// CUDA_VISIBLE_DEVICES=2,3` (a variable's assignment copied in). Throws Error(BadInput).
void CommandLine::check_gpu_slips() const {
  if (levels_.size() < 2) return;
  const Given* gpu = find("--gpu");
  if (gpu == nullptr) return;
  const std::string& value = gpu->value;  // the first --gpu, if given twice
  std::vector<std::size_t> at;
  const std::vector<std::string> words = kept(at);
  // Where a program's first word stands when no `--` came before it.
  const std::size_t command_start =
      program_word_ != kNone && !dashdash_ ? at[program_word_] : kNone;
  const std::size_t v = at[gpu->word] + (gpu->inline_value ? 0 : 1);
  const bool inline_value = gpu->inline_value;
  const std::string_view leaf_name(leaf().name);
  const bool runs_program = leaf_name == "run";

  std::string_view name, rest;
  if (is_assignment(value, name, rest)) {
    std::vector<std::string> fixed = words;  // the line as it should have been
    fixed[v] = inline_value ? "--gpu=" + std::string(rest) : std::string(rest);
    if (runs_program && command_start != kNone)
      fixed.insert(fixed.begin() + static_cast<std::ptrdiff_t>(command_start), "--");
    std::string message = "--gpu " + detail::quote_value(value) +
                          " is a variable's assignment; --gpu takes the GPUs themselves";
    if (name == "CUDA_VISIBLE_DEVICES") {
      message +=
          " as nvidia-smi indices or UUIDs (CUDA_VISIBLE_DEVICES's integers count in CUDA's "
          "order, which is nvidia-smi's on a machine of one GPU model or under "
          "CUDA_DEVICE_ORDER=PCI_BUS_ID; `gpusel list` shows both)";
    }
    throw bad_input(message + "; write: " + prefix() + " " + join_words(fixed, 0, fixed.size()),
                    about(Subject::GpuRequest, {{"request", std::string(value)},
                                                {"reason", "assignment"},
                                                {"variable", std::string(name)}}));
  }

  // The words right after the value that are more GPUs: refused as arguments, or (in run) taken
  // for the program's name, unless that is a program.
  std::size_t end = v + 1;
  while (end < words.size() && looks_like_gpu_entries(words[end])) {
    if (runs_program && end == command_start && is_program(words[end])) break;
    ++end;
  }
  if (end == v + 1) return;
  std::string merged;
  for (std::size_t i = v; i < end; ++i) {
    const std::string piece = i == v ? value : words[i];
    for (std::string_view e : detail::split_commas(piece)) {
      if (!e.empty()) merged += (merged.empty() ? "" : ",") + std::string(e);
    }
  }
  std::string split;  // the value and the words as the shell split them
  for (std::size_t i = v; i < end; ++i)
    split += (split.empty() ? "" : " ") + (i == v ? value : words[i]);
  if (leaf_name == "bind") {
    // bind's flags and its program, if the line has one, go with each worker's bind.
    std::string per_worker = "gpusel bind";
    for (const char* f : {"--share", "--quiet"}) {
      if (flag(f)) per_worker += std::string(" ") + f;
    }
    if (end < words.size() && is_dashdash(words[end]) && end + 1 < words.size()) {
      per_worker += " -- " + join_words(words, end + 1, words.size());
    } else if (end < words.size() && !looks_like_option(words[end]) && !is_dashdash(words[end])) {
      per_worker += " -- " + join_words(words, end, words.size());
    }
    throw bad_input(
        "--gpu " + split + ": bind takes one GPU, and the shell passed " +
            detail::quote_value(words[v + 1]) +
            " as a word of its own; to bind each of several GPUs in a process of its own, write: " +
            prefix() + " run --gpu " + merged + " -- " + per_worker,
        about(Subject::GpuRequest, {{"request", split}, {"reason", "split-by-shell"}}));
  }
  std::vector<std::string> fixed = words;
  fixed.erase(fixed.begin() + static_cast<std::ptrdiff_t>(v + 1),
              fixed.begin() + static_cast<std::ptrdiff_t>(end));
  fixed[v] = inline_value ? "--gpu=" + merged : merged;
  if (runs_program) {
    // The program, if any, goes after -- (and after run's own options that follow the GPUs).
    std::size_t program = v + 1;
    while (program < fixed.size() && !is_dashdash(fixed[program]) &&
           names_an_option(leaf(), fixed[program], false)) {
      const Option* o = find_option(leaf(), fixed[program].substr(0, fixed[program].find('=')));
      program += option_words(o, fixed, program);
    }
    if (program >= fixed.size()) {
      fixed.push_back("--");
      fixed.push_back("COMMAND");
    } else if (!dashdash_ && !is_dashdash(fixed[program])) {
      fixed.insert(fixed.begin() + static_cast<std::ptrdiff_t>(program), "--");
    }
  } else if (std::none_of(leaf().options.begin(), leaf().options.end(), is_positional)) {
    // `resolve --gpu 0 1 --`: a `--` ends nothing in a command that takes no positional.
    fixed.erase(std::remove(fixed.begin(), fixed.end(), "--"), fixed.end());
  }
  throw bad_input(
      "--gpu " + split + ": GPUs are separated by commas, not blanks (the shell passed " +
          detail::quote_value(words[v + 1]) + " to `" + command_path(levels_.size() - 1) +
          "` as a word of its own, so that GPU would be lost); write: " + prefix() + " " +
          join_words(fixed, 0, fixed.size()),
      about(Subject::GpuRequest, {{"request", split}, {"reason", "split-by-shell"}}));
}

std::string CommandLine::explain(const Problem& p) const {
  if (p.kind == Problem::Kind::Said) return p.said;
  const std::string& word = words_[p.word];
  const Command& at = *levels_[p.depth];
  const std::string where = command_path(p.depth);
  std::vector<std::size_t> index;
  const std::vector<std::string> words = kept(index);

  if (p.kind == Problem::Kind::Command) {
    const std::vector<std::string> names = visible_commands(at);
    std::string list;
    for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
    const std::string guess = closest(word, names);
    std::string message = "unknown command '" + word + "'";
    if (p.depth > 0) message += " for `" + where + "`";
    if (!guess.empty()) {
      return message + "; did you mean '" + guess + "'? (" + where + "'s commands: " + list + ")";
    }
    message += "; " + where + "'s commands are " + list;
    if (p.depth == 0) {
      const std::string rest = join_words(words, index[p.word], words.size());
      if (!sim_.empty()) {
        message += ". To run a program on the simulated machine, put -- before it: " + prefix() +
                   " -- " + rest;
      } else {
        message += ". To start a program once per GPU: gpusel run --gpu SPEC -- " + rest +
                   "; to try it on a simulated machine: gpusel --sim dgx-h100 -- " + rest;
      }
    }
    return message + "; run `" + where + " --help` for usage";
  }
  if (p.kind == Problem::Kind::AfterCommand) {
    const std::size_t start = index[program_word_];
    std::vector<std::string> fixed(words.begin(),
                                   words.begin() + static_cast<std::ptrdiff_t>(start));
    fixed.push_back("--");
    fixed.insert(fixed.end(), words.begin() + static_cast<std::ptrdiff_t>(start), words.end());
    const std::string name = word.substr(0, word.find('='));
    const Option* own = find_option(at, name);
    const bool sim = name == "--sim" && sim_.empty();
    if (own != nullptr || sim) {
      // One of gpusel's options, given after the program's name: moved before the program (with
      // its value), or passed to the program; which one was meant is the user's to say.
      const std::size_t j = index[p.word];
      static constexpr Option kSimValue{"--sim", Takes::Value, "MACHINE", {}};
      const std::size_t count = option_words(own != nullptr ? own : &kSimValue, words, j);
      std::vector<std::string> moved;
      std::string head = prefix();
      if (sim) {
        const std::size_t eq = word.find('=');
        const std::string machine = eq != std::string::npos ? word.substr(eq + 1)
                                    : count == 2            ? words[j + 1]
                                                            : "MACHINE";
        head = "gpusel --sim " + shell_word(machine);
        moved.assign(words.begin(), words.begin() + static_cast<std::ptrdiff_t>(start));
      } else {
        moved.assign(words.begin(), words.begin() + static_cast<std::ptrdiff_t>(start));
        moved.insert(moved.end(), words.begin() + static_cast<std::ptrdiff_t>(j),
                     words.begin() + static_cast<std::ptrdiff_t>(j + count));
      }
      moved.push_back("--");
      for (std::size_t k = start; k < words.size(); ++k) {
        if (k < j || k >= j + count) moved.push_back(words[k]);
      }
      return detail::quote_value(word) + " comes after the command " +
             detail::quote_value(words[start]) +
             ", where gpusel reads no option of its own; for `" + where +
             "` to take it, write: " + head + " " + join_words(moved, 0, moved.size()) +
             "; to pass it to the command, put -- before the command: " + prefix() + " " +
             join_words(fixed, 0, fixed.size());
    }
    return detail::quote_value(word) + " comes after the command " +
           detail::quote_value(words[start]) +
           ", where gpusel reads no option of its own; put -- before the command so that every "
           "word after it is passed to the command: " +
           prefix() + " " + join_words(fixed, 0, fixed.size());
  }
  if (p.kind == Problem::Kind::Option) {
    const std::string name = word.substr(0, word.find('='));
    const std::string guess = closest(name, option_names(at));
    std::string message = "unknown option '" + name + "' for `" + where + "`";
    if (!guess.empty()) return message + "; did you mean " + guess + "?";
    return message + "; run `" + where + " --help` to see its options";
  }
  std::string message = "`" + where + "` takes no argument " + detail::quote_value(word);
  if (find_option(at, "--gpu") != nullptr && word.find_first_of("0123456789") == 0) {
    // The whole line again, the word made a GPU of --gpu's list.
    std::vector<std::string> fixed = words;
    const std::size_t k = index[p.word];
    if (const Given* gpu = find("--gpu"); gpu != nullptr) {
      const std::size_t v = index[gpu->word] + (gpu->inline_value ? 0 : 1);
      fixed[v] = (gpu->inline_value ? "--gpu=" : "") + gpu->value + "," + word;
      fixed.erase(fixed.begin() + static_cast<std::ptrdiff_t>(k));
    } else {
      fixed[k] = word;
      fixed.insert(fixed.begin() + static_cast<std::ptrdiff_t>(k), "--gpu");
    }
    // `resolve --gpu 0 -- 1`, `resolve -- 1`: a `--` that set the word apart ends nothing now
    // (the command takes no positional).
    fixed.erase(std::remove(fixed.begin(), fixed.end(), "--"), fixed.end());
    return message + "; to name GPUs, use --gpu: " + prefix() + " " +
           join_words(fixed, 0, fixed.size());
  }
  return message + "; run `" + where + " --help` to see its options";
}

std::string CommandLine::help() const {
  const Command& c = leaf();
  const std::string where = command_path(levels_.size() - 1);
  std::string out =
      wrapped(levels_.size() == 1 ? "gpusel: " + std::string(c.help) : std::string(c.help), 0, 0) +
      "\n";
  std::string usage = "Usage: " + where + " [OPTIONS]";
  std::vector<const Option*> positionals, options;
  for (const Option& o : c.options) (is_positional(o) ? positionals : options).push_back(&o);
  for (const Option* o : positionals) {
    const std::string name(o->name);
    if (o->takes == Takes::Words)
      usage += o->required ? " [--] " + name + " [ARGS...]" : " [[--] " + name + " [ARGS...]]";
    else
      usage += o->required ? " " + name : " [" + name + "]";
  }
  if (!c.commands.empty()) usage += " COMMAND";
  out += usage + "\n";
  if (!positionals.empty()) {
    out += "\nPositionals:\n";
    for (const Option* o : positionals) out += help_row(option_left(*o), option_text(*o));
  }
  out += "\nOptions:\n";
  out += help_row("-h,--help", "print this help and exit");
  for (const Option* o : options) out += help_row(option_left(*o), option_text(*o));
  if (levels_.size() > 1) {
    out += help_row("--sim MACHINE", "run on a simulated machine (as `gpusel --sim MACHINE`)");
  }
  if (!c.commands.empty()) {
    out += "\nCommands:\n";
    for (const Command* sub : c.commands) {
      if (!sub->hidden) out += help_row(std::string(sub->name), sub->help);
    }
  }
  return out;
}

// ---- values ---------------------------------------------------------------------------------

long long whole_option(const CommandLine& line, std::string_view name, long long low,
                       long long high, long long fallback) {
  const std::optional<std::string> text = line.value(name);
  if (!text) return fallback;
  errno = 0;
  char* end = nullptr;
  const long long n = std::strtoll(text->c_str(), &end, 10);
  const bool whole = !text->empty() && end != nullptr && *end == '\0' && errno == 0 &&
                     std::isdigit(static_cast<unsigned char>(text->back())) != 0 &&
                     text->find_first_of(" \t") == std::string::npos;
  if (!whole || n < low || n > high) {
    throw bad_input(std::string(name) + " " + detail::quote_value(*text) +
                    " is not a whole number from " + std::to_string(low) + " to " +
                    std::to_string(high) + "; run `gpusel " + line.path() +
                    " --help` for what it sets");
  }
  return n;
}

std::uint64_t parse_size_option(const std::string& option, const std::string& text,
                                std::uint64_t multiple) {
  const std::string head = option + " " + detail::quote_value(text);
  const std::string examples = "write it like 512MiB, 512M, 1GiB, 1.5G or 64000000";
  const detail::ByteSize size = detail::read_byte_size(text);
  switch (size.problem) {
    case detail::ByteSize::Problem::None:
      break;
    case detail::ByteSize::Problem::NoNumber:
    case detail::ByteSize::Problem::Negative:
      throw bad_input(head + " is not a size: it should start with a number of bytes (" +
                      (size.problem == detail::ByteSize::Problem::Negative
                           ? "a size cannot be negative; "
                           : "") +
                      examples + ")");
    case detail::ByteSize::Problem::UnknownUnit:
      throw bad_input(head + ": unknown unit " + detail::quote_value(size.unit) +
                      "; use K, M, G, T or KiB, MiB, GiB, TiB (powers of 1024), kB, MB, GB, TB "
                      "(powers of 1000), or plain bytes; " +
                      examples);
    case detail::ByteSize::Problem::Zero:
      if (multiple == 0) throw bad_input(head + " is zero bytes; " + examples);
      throw bad_input(head + " is zero bytes; a buffer must hold at least " +
                      std::to_string(multiple) + " bytes (the default is 512MiB)");
    case detail::ByteSize::Problem::TooLarge:
      throw bad_input(head + " is too large; " + examples);
    case detail::ByteSize::Problem::NotWhole:
      throw bad_input(head + " is not a whole number of bytes; " + examples);
  }
  const std::uint64_t value = *size.bytes;
  if (multiple > 1 && value % multiple != 0) {
    const std::uint64_t below = value / multiple * multiple;
    throw bad_input(head + " is " + std::to_string(value) + " bytes, not a multiple of " +
                    std::to_string(multiple) + " (copies are checked " + std::to_string(multiple) +
                    " bytes at a time); use " +
                    (below > 0 ? std::to_string(below) + " or " : std::string()) +
                    std::to_string(below + multiple));
  }
  return value;
}

}  // namespace gpusel::cli
