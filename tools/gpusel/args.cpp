#include "args.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <exception>
#include <functional>
#include <limits>

#include "choice.hpp"
#include "common.hpp"
#include "gpusel/error.hpp"
#include "gpusel/launch.hpp"
#include "gpusel/spec.hpp"
#include "gpusel_detail.hpp"

namespace gpusel::cli {
namespace {

constexpr std::size_t kNone = static_cast<std::size_t>(-1);

// Every piece between commas, blanks and empty pieces kept ("a,,b": "a", "", "b"); views into
// `value`. (The command's own: the core's text helpers are not on its include path.)
std::vector<std::string_view> split_commas(std::string_view value) {
  std::vector<std::string_view> pieces;
  for (std::size_t start = 0;;) {
    const std::size_t comma = value.find(',', start);
    pieces.push_back(value.substr(start, comma == std::string_view::npos ? comma : comma - start));
    if (comma == std::string_view::npos) return pieces;
    start = comma + 1;
  }
}

bool looks_like_option(const std::string& token) {
  return token.size() > 1 && token[0] == '-' && token != "--";
}

// The subcommands a user may type (hidden ones have an empty group).
std::vector<const CLI::App*> visible_subcommands(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App* s) { return !s->get_group().empty(); });
}

const CLI::App* subcommand_named(const CLI::App& app, const std::string& name) {
  for (const CLI::App* s : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (s->get_name() == name) return s;
  }
  return nullptr;
}

std::vector<std::string> option_names(const CLI::App& app, bool top) {
  std::vector<std::string> names;
  for (const CLI::Option* o : app.get_options()) {
    for (const std::string& n : o->get_lnames()) names.push_back("--" + n);
  }
  if (!top) names.push_back("--sim");  // hidden in each subcommand
  return names;
}

// The positional that holds a program to start and its arguments.
bool is_command_positional(const CLI::Option* o) {
  return o->get_positional() && o->get_name(true, false) == "COMMAND";
}

// How many single positionals come before COMMAND (sim exec: MACHINE), or kNone when `app` takes
// no command.
std::size_t positionals_before_command(const CLI::App& app) {
  std::size_t before = 0;
  for (const CLI::Option* o : app.get_options()) {
    if (is_command_positional(o)) return before;
    if (o->get_positional()) ++before;
  }
  return kNone;
}

std::string command_path(const std::vector<const CLI::App*>& path) {
  std::string out = "gpusel";
  for (std::size_t i = 1; i < path.size(); ++i) out += " " + path[i]->get_name();
  return out;
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

// One pass over the tokens, as CLI11 will read them, with --sim set aside.
struct Scan {
  std::vector<std::string> kept;  // tokens without --sim and its value
  std::vector<std::string> sims;  // every --sim value found
  bool sim_without_value = false;
  std::vector<const CLI::App*> path;          // the app, then each subcommand entered
  std::size_t dashdash = kNone;               // position of `--` in kept
  std::size_t command_start = kNone;          // position in kept of the first word of COMMAND
  std::size_t first_problem = kNone;          // position in kept of the first token nothing accepts
  std::string problem;                        // what is wrong with it
  std::vector<const CLI::App*> problem_path;  // path as it stood at that token
};

Scan scan(const CLI::App& app, const std::vector<std::string>& tokens) {
  Scan s;
  s.path.push_back(&app);
  std::size_t positionals = 0;  // single positionals of the current subcommand read so far
  auto note = [&s](std::string what) {
    if (s.first_problem == kNone) {
      s.first_problem = s.kept.size() - 1;
      s.problem = std::move(what);
      s.problem_path = s.path;
    }
  };
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    const CLI::App& current = *s.path.back();
    if (s.dashdash != kNone || s.command_start != kNone) {
      // The program's own words: gpusel reads none of them.
      s.kept.push_back(t);
      const std::string name = t.substr(0, t.find('='));
      if (s.dashdash == kNone && s.command_start != kNone && looks_like_option(t) &&
          (name == "--sim" || current.get_option_no_throw(name) == nullptr))
        note("after-command");
      continue;
    }
    if (t == "--") {
      s.kept.push_back(t);
      s.dashdash = s.kept.size() - 1;
      continue;
    }
    if (looks_like_option(t)) {
      const std::string name = t.substr(0, t.find('='));
      const bool inline_value = name.size() != t.size();
      if (name == "--sim") {
        if (inline_value) {
          s.sims.push_back(t.substr(name.size() + 1));
        } else if (i + 1 < tokens.size()) {
          s.sims.push_back(tokens[++i]);
        } else {
          s.sim_without_value = true;
        }
        continue;
      }
      s.kept.push_back(t);
      const CLI::Option* o = current.get_option_no_throw(name);
      if (o == nullptr) {
        note("option");
        continue;
      }
      if (!inline_value && o->get_expected_max() > 0 && i + 1 < tokens.size())
        s.kept.push_back(tokens[++i]);
      continue;
    }
    s.kept.push_back(t);
    if (!visible_subcommands(current).empty()) {
      if (const CLI::App* sub = subcommand_named(current, t)) {
        s.path.push_back(sub);
        positionals = 0;
      } else {
        note("command");
      }
      continue;
    }
    const std::size_t before = positionals_before_command(current);
    if (before != kNone && positionals >= before) {
      s.command_start = s.kept.size() - 1;
      continue;
    }
    ++positionals;
    // get_options() returns a new vector each time: one copy, not begin() of one and end() of
    // another (a use after free that TSan reports).
    const std::vector<const CLI::Option*> options = current.get_options();
    if (before == kNone && std::none_of(options.begin(), options.end(),
                                        [](const CLI::Option* o) { return o->get_positional(); }))
      note("argument");
  }
  return s;
}

// A word the shell split off a --gpu list: GPU entries with commas around or between them ("1",
// ",1", "1,2", "GPU-4ba7"), nothing else.
bool looks_like_gpu_entries(const std::string& word) {
  if (word.empty() || word.front() == '-') return false;
  bool any = false;
  for (std::string_view piece : split_commas(word)) {
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

// The usual ways a --gpu value reaches gpusel broken by the shell, each answered with the whole
// command line as it should have been typed, GPUs all kept: `--gpu 0 1` (blanks for commas; the
// second GPU would be taken for something else: an argument, or run's program), and `--gpu
// CUDA_VISIBLE_DEVICES=2,3` (a variable's assignment copied in). Throws Error(BadInput).
void check_gpu_slips(const Scan& s, const std::string& sim) {
  std::size_t g = kNone;
  for (std::size_t i = 0; i < s.kept.size() && i < s.dashdash; ++i) {
    if (s.command_start != kNone && i >= s.command_start) break;
    if (s.kept[i] == "--gpu" || s.kept[i].rfind("--gpu=", 0) == 0) {
      g = i;
      break;
    }
  }
  if (g == kNone) return;
  const bool inline_value = s.kept[g] != "--gpu";
  const std::size_t v = inline_value ? g : g + 1;
  if (v >= s.kept.size() || v == s.dashdash) return;
  const std::string value = inline_value ? s.kept[g].substr(6) : s.kept[v];
  std::vector<std::string> fixed(s.kept.begin(), s.kept.end());
  const bool runs_program = s.path.back()->get_name() == "run";

  std::string_view name, rest;
  if (is_assignment(value, name, rest)) {
    fixed[v] = inline_value ? "--gpu=" + std::string(rest) : std::string(rest);
    if (runs_program && s.dashdash == kNone && s.command_start != kNone)
      fixed.insert(fixed.begin() + static_cast<std::ptrdiff_t>(s.command_start), "--");
    std::string message = "--gpu " + detail::quote_value(value) +
                          " is a variable's assignment; --gpu takes the GPUs themselves";
    if (name == "CUDA_VISIBLE_DEVICES") {
      message +=
          " as nvidia-smi indices or UUIDs (CUDA_VISIBLE_DEVICES's integers count in CUDA's "
          "order, which is nvidia-smi's on a machine of one GPU model or under "
          "CUDA_DEVICE_ORDER=PCI_BUS_ID; `gpusel list` shows both)";
    }
    throw bad_input(message + "; write: gpusel" + (sim.empty() ? "" : " --sim " + shell_word(sim)) +
                    " " + join_words(fixed, 0, fixed.size()));
  }

  // Words after the value that are more GPUs.
  std::size_t end = v + 1;
  while (end < s.kept.size() && end != s.dashdash && looks_like_gpu_entries(s.kept[end])) {
    if (runs_program && end == s.command_start && is_program(s.kept[end])) break;
    ++end;
  }
  if (end == v + 1) return;
  std::string merged;
  for (std::size_t i = v; i < end; ++i) {
    const std::string piece = i == v ? value : s.kept[i];
    for (std::string_view e : split_commas(piece)) {
      if (!e.empty()) merged += (merged.empty() ? "" : ",") + std::string(e);
    }
  }
  std::string split;  // the value and the words as the shell split them
  for (std::size_t i = v; i < end; ++i)
    split += (split.empty() ? "" : " ") + (i == v ? value : s.kept[i]);
  const std::string where = command_path(s.path);
  const std::string prefix = "gpusel" + (sim.empty() ? "" : " --sim " + shell_word(sim));
  if (s.path.back()->get_name() == "bind") {
    throw bad_input(
        "--gpu " + split + ": bind takes one GPU, and the shell passed " +
        detail::quote_value(s.kept[v + 1]) +
        " as a word of its own; to bind each of several GPUs in a process of its own, write: " +
        prefix + " run --gpu " + merged + " -- gpusel bind");
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
    } else if (s.dashdash == kNone && fixed[program] != "--") {
      fixed.insert(fixed.begin() + static_cast<std::ptrdiff_t>(program), "--");
    }
  }
  throw bad_input("--gpu " + split +
                  ": GPUs are separated by commas, not blanks (the shell passed " +
                  detail::quote_value(s.kept[v + 1]) + " to `" + where +
                  "` as a word of its own, so that GPU would be lost); write: " + prefix + " " +
                  join_words(fixed, 0, fixed.size()));
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

CommandLine::CommandLine(CLI::App& app, const std::string& sim_help) : app_(app) {
  add_sim(app, sim_help, false);
  const std::function<bool(CLI::App*)> named = [](CLI::App* s) { return !s->get_name().empty(); };
  std::vector<CLI::App*> subcommands = app.get_subcommands(named);
  while (!subcommands.empty()) {
    CLI::App* sub = subcommands.back();
    subcommands.pop_back();
    add_sim(*sub, "", true);
    for (CLI::App* s : sub->get_subcommands(named)) subcommands.push_back(s);
  }
  // `gpusel [--sim MACHINE] -- COMMAND`: the words after `--`, and only those (before it, a word
  // is a command's name, or a misspelt one).
  CLI::App* exec = app.add_option_group("");
  exec->set_help_flag();
  exec->validate_positionals();
  exec->add_option("COMMAND", exec_words_)
      ->check(CLI::Validator(
          [this](std::string&) -> std::string {
            const std::vector<std::string> left = app_.remaining();
            if (std::find(left.begin(), left.end(), "--") != left.end()) return "";
            return "a program's words come after --";
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
  const std::size_t last = joined_.size() - args_.size() - 1;
  const std::size_t option = joined_[last] == "--sim=" + value ? last : last - 1;
  s.first = origin_[option];
  s.last = origin_[last];
  if (option != last && joined_[option] == "--sim=") {
    // `--sim=` names no machine (`--sim="$MACHINE"` with the variable unset), but CLI11 took the
    // next word for its value: that word goes back, to be read for itself.
    args_.push_back(joined_[last]);
    s.value.clear();
    s.last = s.first;
  }
  // After a program's first word, --sim is one of the program's words given without `--` before
  // them (with `--`, CLI11 reads no option there).
  const CLI::Option* command = app.get_option_no_throw("COMMAND");
  s.stray = command != nullptr && command->get_positional() && command->count() > 0;
  sims_.push_back(std::move(s));
}

void CommandLine::parse(int argc, char** argv) {
  words_.assign(argv + 1, argv + argc);
  joined_ = words_;
  join_wait_values(joined_);  // --wait SECONDS -> --wait=SECONDS
  origin_.clear();
  for (std::size_t j = 0, i = 0; j < joined_.size(); ++j) {
    origin_.push_back(i);
    i += joined_[j] == words_[i] ? 1 : 2;
  }
  args_.assign(joined_.rbegin(), joined_.rend());
  sims_.clear();
  exec_words_.clear();
  sim_.clear();
  exec_ = false;
  command_.clear();

  std::exception_ptr refused;
  bool help = false, sim_without_value = false;
  try {
    app_.parse(args_);
  } catch (const CLI::Success&) {
    refused = std::current_exception();
    help = true;
  } catch (const CLI::ParseError& e) {
    refused = std::current_exception();
    sim_without_value = std::string_view(e.what()) ==
                        CLI::ArgumentMismatch::TypedAtLeast("--sim", 1, "MACHINE").what();
  }
  if (sim_without_value) {
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
  check_gpu_slips(scan(app_, words_), sim_);

  // `gpusel [--sim MACHINE] -- COMMAND [ARGS...]`: no command's name, and nothing before `--` but
  // --sim.
  const std::vector<std::string> left = app_.remaining();
  if (!help && app_.get_subcommands().empty() && left.size() == 1 && left.front() == "--") {
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
  // program's other options there.
  for (const Sim& s : sims_) {
    if (s.stray && !refused)
      refused = std::make_exception_ptr(CLI::ExtrasError(s.app->get_name(), {words_[s.first]}));
  }
  if (refused) std::rethrow_exception(refused);
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

std::string CommandLine::explain() const {
  const Scan s = scan(app_, words_);
  if (s.first_problem == kNone) return "";
  const std::string& word = s.kept[s.first_problem];
  const std::vector<const CLI::App*>& path = s.problem_path;
  const CLI::App& at = *path.back();
  const std::string where = command_path(path);
  const std::string sim_words = sim_.empty() ? "" : " --sim " + shell_word(sim_);

  if (s.problem == "command") {
    std::vector<std::string> names;
    for (const CLI::App* sub : visible_subcommands(at)) names.push_back(sub->get_name());
    std::string list;
    for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
    const std::string guess = closest(word, names);
    std::string message = "unknown command '" + word + "'";
    if (path.size() > 1) message += " for `" + where + "`";
    if (!guess.empty()) {
      return message + "; did you mean '" + guess + "'? (" + where + "'s commands: " + list + ")";
    }
    message += "; " + where + "'s commands are " + list;
    if (path.size() == 1) {
      const std::string rest = join_words(s.kept, s.first_problem, s.kept.size());
      if (!sim_.empty()) {
        message += ". To run a program on the simulated machine, put -- before it: gpusel" +
                   sim_words + " -- " + rest;
      } else {
        message += ". To start a program once per GPU: gpusel run --gpu SPEC -- " + rest +
                   "; to try it on a simulated machine: gpusel --sim dgx-h100 -- " + rest;
      }
    }
    return message + "; run `" + where + " --help` for usage";
  }
  if (s.problem == "after-command") {
    const std::string command = s.kept[s.command_start];
    std::vector<std::string> fixed(s.kept.begin(), s.kept.begin() + s.command_start);
    fixed.push_back("--");
    fixed.insert(fixed.end(), s.kept.begin() + s.command_start, s.kept.end());
    return detail::quote_value(word) + " comes after the command " + detail::quote_value(command) +
           " but is not an option of `" + where + "`; put -- before the command so that " +
           "every word after it is passed to the command: gpusel" + sim_words + " " +
           join_words(fixed, 0, fixed.size());
  }
  if (s.problem == "option") {
    const std::string name = word.substr(0, word.find('='));
    const std::string guess = closest(name, option_names(at, path.size() == 1));
    std::string message = "unknown option '" + name + "' for `" + where + "`";
    if (!guess.empty()) return message + "; did you mean " + guess + "?";
    return message + "; run `" + where + " --help` to see its options";
  }
  if (s.problem == "argument") {
    std::string message = "`" + where + "` takes no argument " + detail::quote_value(word);
    if (at.get_option_no_throw("--gpu") != nullptr && word.find_first_of("0123456789") == 0)
      return message + "; to name GPUs, use --gpu: " + where + " --gpu " + shell_word(word);
    return message + "; run `" + where + " --help` to see its options";
  }
  return "";
}

}  // namespace gpusel::cli
