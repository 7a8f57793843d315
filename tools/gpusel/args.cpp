#include "args.hpp"

#include <algorithm>
#include <cctype>
#include <exception>
#include <functional>
#include <utility>

#include "choice.hpp"
#include "common.hpp"
#include "gpusel/error.hpp"
#include "gpusel/launch.hpp"
#include "gpusel/spec.hpp"
#include "gpusel_detail.hpp"

namespace gpusel::cli {
namespace {

constexpr std::size_t kNone = static_cast<std::size_t>(-1);

bool looks_like_option(const std::string& word) {
  return word.size() > 1 && word[0] == '-' && word != "--";
}

bool contains(const std::vector<std::string>& words, const std::string& word) {
  return std::find(words.begin(), words.end(), word) != words.end();
}

// The subcommands a user may type (hidden ones and option groups have an empty group).
std::vector<const CLI::App*> visible_subcommands(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App* s) { return !s->get_group().empty(); });
}

std::vector<std::string> option_names(const CLI::App& app, bool top) {
  std::vector<std::string> names;
  for (const CLI::Option* o : app.get_options()) {
    for (const std::string& n : o->get_lnames()) names.push_back("--" + n);
  }
  if (!top) names.push_back("--sim");  // hidden in each subcommand
  return names;
}

bool takes_positionals(const CLI::App& app) {
  // get_options() returns a new vector each time: one copy, not begin() of one and end() of
  // another (a use after free that TSan reports).
  const std::vector<const CLI::Option*> options = app.get_options();
  return std::any_of(options.begin(), options.end(),
                     [](const CLI::Option* o) { return o->get_positional(); });
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

CommandLine::CommandLine(CLI::App& app, const std::string& version, const std::string& sim_help,
                         const std::function<void(CommandLine&)>& declare, bool exec_form)
    : app_(app) {
  if (const CLI::Option* help = app.get_help_ptr()) {
    help_name_ = help->get_name(false, true);
    help_description_ = help->get_description();
  }
  app.set_help_flag();
  declare(*this);
  app.set_help_flag(help_name_, help_description_);
  if (!version.empty()) app.set_version_flag("--version", version);
  add_sim(app, sim_help, false);
  // `gpusel [--sim MACHINE] -- COMMAND`: the words after `--`, and only those (before it, a word
  // is a command's name, or a misspelt one).
  if (!exec_form) return;
  CLI::App* exec = app.add_option_group("");
  exec->set_help_flag();
  exec->validate_positionals();
  exec->add_option("COMMAND", exec_words_)
      ->check(CLI::Validator(
          [this](std::string&) -> std::string {
            return contains(app_.remaining(), "--") ? "" : "a program's words come after --";
          },
          ""));
}

CLI::App* CommandLine::add_command(const std::string& name, const std::string& description,
                                   std::function<void(CLI::App&)> fill, bool hidden) {
  CLI::App* sub = app_.add_subcommand(name, description);
  if (hidden) sub->group("");
  commands_.push_back(Command{sub, std::move(fill)});
  const std::size_t index = commands_.size() - 1;
  // CLI11 calls this as it enters the command, before it reads any of the command's words.
  sub->preparse_callback([this, index](std::size_t left) {
    complete(commands_[index]);
    entered(commands_[index].app, &app_, left);
  });
  return sub;
}

void CommandLine::complete() {
  for (Command& c : commands_) complete(c);
}

void CommandLine::entered(const CLI::App* sub, const CLI::App* parent, std::size_t left) {
  path_.push_back(Entered{sub, read_.size() - left - 1, parent->remaining().size()});
}

void CommandLine::complete(Command& command) {
  if (!command.fill) return;
  command.app->set_help_flag(help_name_, help_description_);
  command.fill(*command.app);
  command.fill = nullptr;
  const std::function<bool(CLI::App*)> named = [](CLI::App* s) { return !s->get_name().empty(); };
  std::vector<std::pair<CLI::App*, CLI::App*>> subcommands{{command.app, &app_}};  // and parents
  while (!subcommands.empty()) {
    // (Named pointers, not a structured binding: clang 14, the fuzz preset's compiler, cannot
    // capture a binding in a lambda.)
    CLI::App* const sub = subcommands.back().first;
    CLI::App* const parent = subcommands.back().second;
    subcommands.pop_back();
    add_sim(*sub, "", true);
    // Where CLI11 enters a nested command (the command itself records it in add_command's).
    if (sub != command.app) {
      sub->preparse_callback([this, sub, parent](std::size_t left) { entered(sub, parent, left); });
    }
    for (CLI::Option* o : sub->get_options()) {
      if (!o->get_positional() && o->get_expected_min() == 0 && o->get_expected_max() == 1)
        read_optional_value(*o);
    }
    // A program's first word (run, sim exec): CLI11 validates each word before it takes it.
    if (CLI::Option* program = sub->get_option_no_throw("COMMAND");
        program != nullptr && program->get_positional()) {
      sub->validate_positionals();
      program->check(CLI::Validator(
          [this, sub](std::string&) -> std::string {
            if (!start_ || start_->app != sub) {
              const std::vector<std::string> left = sub->remaining();
              start_ = Start{sub, read_.size() - args_.size(), left.size(), contains(left, "--")};
            }
            return "";
          },
          ""));
    }
    for (CLI::App* s : sub->get_subcommands(named)) subcommands.emplace_back(s, sub);
  }
}

// An option whose value may be left out (--wait, --watch). Its value is the next word unless that
// word is an option or `--`, which CLI11 2.1 reads in its own way in three places, each set right
// here as CLI11 reads the option (the words and CLI11's list of what is left to read are this
// object's):
// - it drops a `--` that follows, as the end of the option's values: put back, so that what comes
//   after it is still a program's words;
// - it leaves the next word to a required positional (run's COMMAND) when that word is the last:
//   taken as the value, so `run --gpu 1 --wait 30` asks for its COMMAND;
// - `--wait=` (empty, as `--wait="$T"` with T unset) takes the next word: given back, and the
//   option has its value-less meaning.
void CommandLine::read_optional_value(CLI::Option& option) {
  const std::string name = option.get_lnames().front();
  // (A transform, not a check: CLI11 gives a check a copy of the value.)
  option.trigger_on_parse()->transform(CLI::Validator(
      [this, &option, name](std::string& value) -> std::string {
        const std::size_t next = read_.size() - args_.size();  // the next word to read
        if (next == 0) return "";
        const std::string& last = read_[next - 1];  // the last word CLI11 took
        if (last == "--") {
          args_.push_back("--");
        } else if (next >= 2 && read_[next - 2] == "--" + name + "=") {
          args_.push_back(last);
          value = option.get_flag_value(name, "");
        } else if (last == "--" + name && !args_.empty() && !looks_like_option(args_.back()) &&
                   args_.back() != "--") {
          value = args_.back();
          args_.pop_back();
        }
        return "";
      },
      ""));
}

void CommandLine::add_sim(CLI::App& app, const std::string& help, bool hidden) {
  // A subcommand's --sim sits in a hidden option group: CLI11 reads it as the subcommand's own,
  // and neither help nor the generated interface lists it.
  CLI::App* owner = &app;
  if (hidden) {
    owner = app.add_option_group("");
    owner->set_help_flag();
  }
  owner
      ->add_option_function<std::string>(
          "--sim", [this, &app](const std::string& value) { took_sim(app, value); }, help)
      ->type_name("MACHINE")
      ->trigger_on_parse();  // each --sim as CLI11 reads it, where it stands
}

void CommandLine::took_sim(const CLI::App& app, const std::string& value) {
  Sim s;
  s.value = value;
  s.app = &app;
  // CLI11 has just read the option and its value: the last words it took.
  const std::size_t last = read_.size() - args_.size() - 1;
  const std::size_t option = read_[last] == "--sim=" + value ? last : last - 1;
  s.first = option;
  s.last = last;
  if (option != last && read_[option] == "--sim=") {
    // `--sim=` names no machine (`--sim="$MACHINE"` with the variable unset), but CLI11 took the
    // next word for its value: that word goes back, to be read for itself.
    args_.push_back(read_[last]);
    s.value.clear();
    s.last = s.first;
  }
  // After a program's first word, --sim is one of the program's words given without `--` before
  // them (with `--`, CLI11 reads no option there).
  s.stray = start_ && start_->app == &app;
  s.missing = app.remaining().size();
  sims_.push_back(std::move(s));
}

std::vector<std::string> CommandLine::kept(std::vector<std::size_t>& at) const {
  std::vector<bool> sim(words_.size(), false);
  for (const Sim& s : sims_) {
    if (!s.stray)
      std::fill(sim.begin() + static_cast<std::ptrdiff_t>(s.first),
                sim.begin() + static_cast<std::ptrdiff_t>(s.last) + 1, true);
  }
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
  for (std::size_t i = 1; i <= depth && i < path_.size(); ++i)
    out += " " + path_[i].app->get_name();
  return out;
}

std::string CommandLine::prefix() const {
  return "gpusel" + (sim_.empty() ? "" : " --sim " + shell_word(sim_));
}

void CommandLine::parse(int argc, char** argv) {
  words_.assign(argv + 1, argv + argc);
  read_ = words_;
  sim_.clear();
  exec_ = false;
  command_.clear();

  std::exception_ptr refused;
  bool help = false, sim_without_value = false, among_program = false;
  std::optional<Sim> empty_sim;  // a last word `--sim=`
  for (;;) {
    args_.assign(read_.rbegin(), read_.rend());
    path_.assign(1, Entered{&app_, kNone, 0});
    sims_.clear();
    start_.reset();
    exec_words_.clear();
    try {
      app_.parse(args_);
    } catch (const CLI::Success&) {
      refused = std::current_exception();
      help = true;
    } catch (const CLI::ArgumentMismatch&) {
      refused = std::current_exception();
      // A value missing: --sim's when the last word is a --sim (CLI11 looked for its value past
      // the end); any other option's missing value is CLI11's to report.
      sim_without_value = read_.back() == "--sim" || read_.back() == "--sim=";
    } catch (const CLI::ParseError&) {
      refused = std::current_exception();
    }
    among_program = start_ && start_->app == path_.back().app && !start_->after_dashdash;
    if (!sim_without_value || among_program || empty_sim || read_.back() != "--sim=") break;
    // `--sim=` names no machine wherever it stands (see took_sim); last, CLI11 looked for its
    // value past the end: the command line is read again without it.
    empty_sim.emplace();
    empty_sim->first = empty_sim->last = read_.size() - 1;
    empty_sim->app = path_.back().app;
    read_.pop_back();
    refused = nullptr;
    sim_without_value = false;
  }
  if (empty_sim) sims_.push_back(*empty_sim);
  if (sim_without_value && among_program) {
    // That --sim is one of a program's words, given without `--` before them.
    Sim s;
    s.first = s.last = read_.size() - 1;
    s.app = start_->app;
    s.stray = true;
    s.missing = s.app->remaining().size();
    sims_.push_back(std::move(s));
  } else if (sim_without_value) {
    throw bad_input(
        "--sim needs a machine after it: a bundled name (`gpusel sim list` shows them) or the "
        "path of a machine file, as in `gpusel --sim dgx-h100 list`");
  }
  std::vector<const Sim*> taken;
  for (const Sim& s : sims_) {
    if (!s.stray) taken.push_back(&s);
  }
  if (taken.size() > 1) {
    throw bad_input("--sim is given twice (" + detail::quote_value(taken[0]->value) + " and " +
                    detail::quote_value(taken[1]->value) + "); give one machine");
  }
  if (!taken.empty()) sim_ = taken.front()->value;
  check_gpu_slips();

  // `gpusel [--sim MACHINE] -- COMMAND [ARGS...]`: no command's name, and nothing before `--` but
  // --sim.
  const std::vector<std::string> left = app_.remaining();
  if (!help && path_.size() == 1 && left.size() == 1 && left.front() == "--") {
    if (sim_.empty()) {
      throw bad_input(
          "`gpusel -- COMMAND` needs a machine or GPUs to run COMMAND on: `gpusel --sim "
          "MACHINE -- COMMAND` runs it on a simulated machine, `gpusel run --gpu SPEC -- "
          "COMMAND` once per GPU");
    }
    if (exec_words_.empty()) {
      throw bad_input("--sim " + detail::quote_value(sim_) +
                      " -- names no command after --; write it as `gpusel --sim " +
                      shell_word(sim_) + " -- python3 prog.py`");
    }
    exec_ = true;
    command_ = exec_words_;
    return;
  }
  // A --sim among a program's words is no option of gpusel's: refused as CLI11 refuses the
  // program's other options there (explain() says what to write).
  for (const Sim& s : sims_) {
    if (s.stray && !refused)
      refused = std::make_exception_ptr(CLI::ExtrasError(s.app->get_name(), {words_[s.first]}));
  }
  if (refused) std::rethrow_exception(refused);
}

// The usual ways a --gpu value reaches gpusel broken by the shell, each answered with the whole
// command line as it should have been typed, GPUs all kept: `--gpu 0 1` (blanks for commas; the
// second GPU went to something else: an argument CLI11 refuses, or run's program), and `--gpu
// CUDA_VISIBLE_DEVICES=2,3` (a variable's assignment copied in). Throws Error(BadInput).
void CommandLine::check_gpu_slips() const {
  if (path_.size() < 2) return;
  const Entered& leaf = path_.back();
  const CLI::Option* gpu = leaf.app->get_option_no_throw("--gpu");
  if (gpu == nullptr || gpu->count() == 0) return;
  const std::string& value = gpu->results().front();  // the first --gpu, if given twice
  std::vector<std::size_t> at;
  const std::vector<std::string> words = kept(at);
  // Where a program's first word stands when no `--` came before it; and whether a `--` came
  // before the program (CLI11 keeps it among run's leftovers).
  const bool started = start_ && start_->app == leaf.app && !start_->after_dashdash;
  const std::size_t command_start = started ? at[start_->word] : kNone;
  const bool dashdash = contains(leaf.app->remaining(), "--");
  // The word CLI11 read the value from (or that holds it, --gpu=VALUE): the first --gpu after the
  // command's name and before the program that gave this value. CLI11 keeps values, not where
  // they stood; the corrected command line needs the words around it.
  std::size_t v = kNone;
  bool inline_value = false;
  for (std::size_t i = at[leaf.word] + 1; i < words.size() && i < command_start; ++i) {
    if (words[i] == "--gpu=" + value) {
      v = i;
      inline_value = true;
      break;
    }
    if (words[i] == "--gpu" && i + 1 < words.size() && words[i + 1] == value) {
      v = i + 1;
      break;
    }
  }
  if (v == kNone) return;
  std::vector<std::string> fixed = words;
  const bool runs_program = leaf.app->get_name() == "run";

  std::string_view name, rest;
  if (is_assignment(value, name, rest)) {
    fixed[v] = inline_value ? "--gpu=" + std::string(rest) : std::string(rest);
    if (runs_program && !dashdash && command_start != kNone)
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

  // The words right after the value that are more GPUs. CLI11 read --gpu's one value and left
  // them over (or, in run, took the first for the program's name, unless it is a program).
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
  if (leaf.app->get_name() == "bind") {
    throw bad_input(
        "--gpu " + split + ": bind takes one GPU, and the shell passed " +
            detail::quote_value(words[v + 1]) +
            " as a word of its own; to bind each of several GPUs in a process of its own, write: " +
            prefix() + " run --gpu " + merged + " -- gpusel bind",
        about(Subject::GpuRequest, {{"request", split}, {"reason", "split-by-shell"}}));
  }
  fixed.erase(fixed.begin() + static_cast<std::ptrdiff_t>(v + 1),
              fixed.begin() + static_cast<std::ptrdiff_t>(end));
  fixed[v] = inline_value ? "--gpu=" + merged : merged;
  if (runs_program) {
    // The program, if any, goes after --.
    const std::size_t program = v + 1;
    if (program >= fixed.size()) {
      fixed.push_back("--");
      fixed.push_back("COMMAND");
    } else if (!dashdash && fixed[program] != "--") {
      fixed.insert(fixed.begin() + static_cast<std::ptrdiff_t>(program), "--");
    }
  }
  throw bad_input("--gpu " + split +
                      ": GPUs are separated by commas, not blanks (the shell passed " +
                      detail::quote_value(words[v + 1]) + " to `" + command_path(path_.size() - 1) +
                      "` as a word of its own, so that GPU would be lost); write: " + prefix() +
                      " " + join_words(fixed, 0, fixed.size()),
                  about(Subject::GpuRequest, {{"request", split}, {"reason", "split-by-shell"}}));
}

std::optional<CommandLine::Problem> CommandLine::first_problem() const {
  for (std::size_t depth = 0; depth < path_.size(); ++depth) {
    const CLI::App& at = *path_[depth].app;
    const bool leaf = depth + 1 == path_.size();
    // What CLI11 left over here, in the order it came; in a parent only what came before the
    // subcommand's name (after it, only what follows the subcommand's `--`).
    const std::vector<std::string> left = at.remaining();
    const std::size_t until = leaf ? left.size() : path_[depth + 1].parent_missing;
    const bool started = leaf && start_ && start_->app == &at && !start_->after_dashdash;
    for (std::size_t i = 0; i <= until; ++i) {
      // A --sim among the program's words stood before the i-th word left over.
      for (const Sim& s : sims_) {
        if (s.stray && s.app == &at && s.missing <= i)
          return Problem{Problem::Kind::AfterCommand, words_[s.first], depth};
      }
      if (i == until) break;
      const std::string& word = left[i];
      if (word == "--") return std::nullopt;  // the words after it are a program's
      if (looks_like_option(word)) {
        const bool after = started && i >= start_->missing;
        return Problem{after ? Problem::Kind::AfterCommand : Problem::Kind::Option, word, depth};
      }
      if (!visible_subcommands(at).empty()) return Problem{Problem::Kind::Command, word, depth};
      if (!takes_positionals(at)) return Problem{Problem::Kind::Argument, word, depth};
    }
  }
  // A program's words without `--` before them, and then a `--`: CLI11 ended the subcommand
  // there and left what followed to the parents; an option among it is still the program's.
  const std::size_t leaf = path_.size() - 1;
  if (!start_ || start_->app != path_[leaf].app || start_->after_dashdash) return std::nullopt;
  for (std::size_t depth = leaf; depth-- > 0;) {
    const std::vector<std::string> left = path_[depth].app->remaining();
    for (std::size_t i = path_[depth + 1].parent_missing; i < left.size(); ++i) {
      const std::string& word = left[i];
      if (looks_like_option(word) &&
          path_[leaf].app->get_option_no_throw(word.substr(0, word.find('='))) == nullptr)
        return Problem{Problem::Kind::AfterCommand, word, leaf};
    }
  }
  return std::nullopt;
}

std::string CommandLine::explain() const {
  const std::optional<Problem> p = first_problem();
  if (!p) return "";
  const std::string& word = p->word;
  const CLI::App& at = *path_[p->depth].app;
  const std::string where = command_path(p->depth);
  std::vector<std::size_t> index;
  const std::vector<std::string> words = kept(index);

  if (p->kind == Problem::Kind::Command) {
    std::vector<std::string> names;
    for (const CLI::App* sub : visible_subcommands(at)) names.push_back(sub->get_name());
    std::string list;
    for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
    const std::string guess = closest(word, names);
    std::string message = "unknown command '" + word + "'";
    if (p->depth > 0) message += " for `" + where + "`";
    if (!guess.empty()) {
      return message + "; did you mean '" + guess + "'? (" + where + "'s commands: " + list + ")";
    }
    message += "; " + where + "'s commands are " + list;
    if (p->depth == 0) {
      const auto first = std::find(words.begin(), words.end(), word);
      const std::string rest =
          join_words(words, static_cast<std::size_t>(first - words.begin()), words.size());
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
  if (p->kind == Problem::Kind::AfterCommand) {
    const std::size_t start = index[start_->word];
    std::vector<std::string> fixed(words.begin(),
                                   words.begin() + static_cast<std::ptrdiff_t>(start));
    fixed.push_back("--");
    fixed.insert(fixed.end(), words.begin() + static_cast<std::ptrdiff_t>(start), words.end());
    return detail::quote_value(word) + " comes after the command " +
           detail::quote_value(words[start]) + " but is not an option of `" + where +
           "`; put -- before the command so that every word after it is passed to the command: " +
           prefix() + " " + join_words(fixed, 0, fixed.size());
  }
  if (p->kind == Problem::Kind::Option) {
    const std::string name = word.substr(0, word.find('='));
    const std::string guess = closest(name, option_names(at, p->depth == 0));
    std::string message = "unknown option '" + name + "' for `" + where + "`";
    if (!guess.empty()) return message + "; did you mean " + guess + "?";
    return message + "; run `" + where + " --help` to see its options";
  }
  std::string message = "`" + where + "` takes no argument " + detail::quote_value(word);
  if (at.get_option_no_throw("--gpu") != nullptr && word.find_first_of("0123456789") == 0)
    return message + "; to name GPUs, use --gpu: " + where + " --gpu " + shell_word(word);
  return message + "; run `" + where + " --help` to see its options";
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
