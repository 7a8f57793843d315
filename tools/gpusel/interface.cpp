// gpusel internal-interface: the man page, the completions and the synopsis, from the table.
#include "interface.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "args.hpp"
#include "common.hpp"
#include "file_text.hpp"
#include "gpusel/error.hpp"
#include "gpusel/resolution.hpp"
#include "gpusel/version.h"
#include "gpusel_detail.hpp"

namespace gpusel::cli {
namespace {

// A generated text, built as `out << a << b`: a string, not a C++ string stream (the command
// uses none: they bring the C++ locale tables, relocated at every start; docs/performance.md).
class Text {
 public:
  Text& operator<<(std::string_view part) {
    text_ += part;
    return *this;
  }
  Text& operator<<(char c) {
    text_ += c;
    return *this;
  }
  Text& operator<<(std::size_t n) {
    text_ += std::to_string(n);
    return *this;
  }
  const std::string& str() const { return text_; }

 private:
  std::string text_;
};

std::string join_with(const std::vector<std::string>& words, const std::string& separator) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : separator) + w;
  return out;
}

// ---- the tree, as the generators see it ------------------------------------------------------

struct Opt {
  std::string name;                // --gpu, or a positional's name (MACHINE, COMMAND)
  std::vector<std::string> names;  // every spelling: --gpu, -h, ...
  std::string value;               // what the value is called (SPEC, SECONDS, ...); "" for a flag
  bool optional_value = false;     // a flag that may take a value: --wait [SECONDS]
  bool required = false;
  bool positional = false;
  std::string description;
  std::string kind;  // completion_kind()
  std::vector<std::string> choices;
  std::vector<std::string> excludes;  // the options it cannot go with, by name
};

struct Cmd {
  std::vector<std::string> path;  // empty for gpusel itself
  std::string description;
  std::vector<Opt> options;  // help and hidden options left out
  std::vector<std::string> subcommands;
  std::string key() const { return join_with(path, " "); }
  // The tables' key for the completions: "gpusel", "gpusel run", "gpusel sim exec" (bash has no
  // empty keys).
  std::string table_key() const { return path.empty() ? "gpusel" : "gpusel " + key(); }
};

// What a shell offers for `o`'s value: its own kind, else by the value's name.
std::string completion_kind(const Option& o) {
  if (!o.completion.empty()) return std::string(o.completion);
  if (o.value == "SPEC" || o.value == "ENTRY") return "gpu";
  if (o.value == "MACHINE" || o.name == "MACHINE") return "machine";
  if (o.value.rfind("FILE", 0) == 0 || o.value == "DIR") return "file";
  if (o.takes == Takes::Words) return "command";
  return "";
}

Opt describe(const Command& command, const Option& o) {
  Opt d;
  d.positional = o.takes == Takes::Word || o.takes == Takes::Words;
  d.name = std::string(o.name);
  d.names = {d.name};
  if (d.positional) {
    d.value = d.name;
  } else if (o.takes != Takes::Nothing) {
    d.value = std::string(o.value);
    d.optional_value = o.takes == Takes::MaybeValue;
  }
  d.required = o.required;
  d.description = std::string(o.help);
  d.kind = completion_kind(o);
  d.choices.assign(o.choices.begin(), o.choices.end());
  // Exclusion goes both ways.
  if (!o.excludes.empty()) d.excludes.emplace_back(o.excludes);
  for (const Option& x : command.options) {
    if (x.excludes == o.name) d.excludes.emplace_back(x.name);
  }
  return d;
}

void walk(const Command& command, std::vector<std::string> path, std::vector<Cmd>& out) {
  Cmd c;
  c.path = path;
  c.description = std::string(command.help);
  for (const Option& o : command.options) c.options.push_back(describe(command, o));
  for (const Command* s : command.commands) {
    if (!s->hidden) c.subcommands.emplace_back(s->name);
  }
  out.push_back(c);
  for (const Command* s : command.commands) {
    if (s->hidden) continue;
    std::vector<std::string> p = path;
    p.emplace_back(s->name);
    walk(*s, p, out);
  }
}

std::vector<Cmd> tree(const Command& root) {
  std::vector<Cmd> out;
  walk(root, {}, out);
  return out;
}

// ---- the synopsis ---------------------------------------------------------------------------

std::string value_text(const Opt& o) {
  if (!o.choices.empty() && o.kind == "choice") return join_with(o.choices, "|");
  return o.value;
}

std::vector<std::string> synopsis_tokens(const Opt& o) {
  if (o.positional) {
    if (o.kind == "command") {
      if (o.required) return {"--", "COMMAND", "[ARGS...]"};
      return {"[--", "COMMAND", "[ARGS...]]"};
    }
    return {o.required ? o.name : "[" + o.name + "]"};
  }
  std::string t = o.name;
  if (o.optional_value) {
    t += " [" + o.value + "]";
  } else if (!o.value.empty()) {
    t += " " + value_text(o);
  }
  return {o.required ? t : "[" + t + "]"};
}

// One line per command that does something (leaves), wrapped at `width` columns, continuation
// lines indented under the first option.
std::vector<std::string> synopsis_lines(const std::vector<Cmd>& all, std::size_t width) {
  // The everyday commands first, the simulator's last.
  std::vector<Cmd> cmds;
  for (const Cmd& c : all) {
    if (!c.path.empty() && c.path.front() != "sim") cmds.push_back(c);
  }
  for (const Cmd& c : all) {
    if (!c.path.empty() && c.path.front() == "sim") cmds.push_back(c);
  }
  // A flag that excludes an optional positional is another form of the command, on a line of
  // its own (`sim env MACHINE`, `sim env --undo`); the positional is then required in the first.
  std::vector<std::pair<Cmd, std::string>> forms;  // the command, and its head
  for (const Cmd& c : cmds) {
    if (!c.subcommands.empty()) continue;
    std::string head = "gpusel ";
    if (c.path.front() != "sim") head += "[--sim MACHINE] ";
    head += c.key();
    Cmd main = c;
    std::vector<Cmd> others;
    for (const Opt& f : c.options) {
      if (f.positional || !f.value.empty()) continue;
      for (Opt& p : main.options) {
        if (!p.positional || p.required) continue;
        if (std::find(f.excludes.begin(), f.excludes.end(), p.name) == f.excludes.end()) continue;
        p.required = true;
        Cmd other = c;
        other.options = {f};
        other.options.front().required = true;
        others.push_back(std::move(other));
      }
    }
    for (const Cmd& o : others) {
      std::erase_if(main.options, [&o](const Opt& x) { return x.name == o.options.front().name; });
    }
    forms.emplace_back(std::move(main), head);
    for (Cmd& o : others) forms.emplace_back(std::move(o), head);
  }
  std::vector<std::string> lines;
  for (const auto& [c, head] : forms) {
    std::vector<std::string> tokens;
    for (const Opt& o : c.options) {
      if (o.positional) continue;
      for (std::string& t : synopsis_tokens(o)) tokens.push_back(std::move(t));
    }
    for (const Opt& o : c.options) {
      if (!o.positional) continue;
      for (std::string& t : synopsis_tokens(o)) tokens.push_back(std::move(t));
    }
    std::string line = head;
    const std::string indent(head.size() + 1, ' ');
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      // `-- COMMAND [ARGS...]` stays on one line.
      std::string t = tokens[i];
      while (t == "--" || t == "[--" || t == "COMMAND") t += " " + tokens[++i];
      if (line.size() + 1 + t.size() > width && line.size() > indent.size()) {
        lines.push_back(line);
        line = indent + t;
      } else {
        line += " " + t;
      }
    }
    lines.push_back(line);
  }
  lines.push_back("gpusel --sim MACHINE -- COMMAND [ARGS...]");
  return lines;
}

// ---- man ------------------------------------------------------------------------------------

std::string roff(const std::string& text) {
  std::string out;
  for (char ch : text) {
    if (ch == '\\') {
      out += "\\e";
    } else if (ch == '-') {
      out += "\\-";
    } else {
      out += ch;
    }
  }
  if (!out.empty() && (out.front() == '.' || out.front() == '\'')) out = "\\&" + out;
  return out;
}

std::string man_commands(const std::vector<Cmd>& cmds) {
  Text m;
  for (const Cmd& c : cmds) {
    if (c.path.empty()) {
      m << ".SS \"gpusel\"\nOptions before the command (\\fB\\-\\-sim\\fR also after it).\n";
    } else {
      m << ".SS \"" << roff("gpusel " + c.key()) << "\"\n" << roff(c.description) << "\n";
    }
    if (!c.subcommands.empty()) {
      m << ".PP\nCommands: " << roff(join_with(c.subcommands, ", ")) << ".\n";
    }
    for (const Opt& o : c.options) {
      m << ".TP\n";
      if (o.positional) {
        m << "\\fI" << roff(o.name) << "\\fR";
        if (o.kind == "command") m << " [\\fIARGS\\fR...] (after \\fB\\-\\-\\fR)";
      } else {
        std::string names;
        for (const std::string& n : o.names) names += (names.empty() ? "" : ", ") + roff(n);
        m << "\\fB" << names << "\\fR";
        if (o.optional_value) {
          m << " [\\fI" << roff(o.value) << "\\fR]";
        } else if (!o.value.empty()) {
          m << " \\fI" << roff(value_text(o)) << "\\fR";
        }
      }
      m << "\n" << roff(o.description);
      if (o.required && !o.positional) m << " (required)";
      if (!o.choices.empty()) {
        m << (o.kind == "list" ? "; a comma\\-separated list of: " : "; one of: ")
          << roff(join_with(o.choices, ", "));
      }
      m << "\n";
    }
  }
  return m.str();
}

std::string man_synopsis(const std::vector<Cmd>& cmds) {
  std::string out = ".nf\n";
  for (const std::string& line : synopsis_lines(cmds, 78)) out += roff(line) + "\n";
  return out + ".fi\n";
}

// ---- shells ---------------------------------------------------------------------------------

// fish quotes differently from sh, bash and zsh (detail::shell_quote): a backslash before ' and
// \ inside single quotes.
std::string fish_sq(const std::string& text) {
  std::string out = "'";
  for (char ch : text) {
    if (ch == '\'' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "'";
}

// The first sentence-ish part of a description, for a completion menu.
std::string brief(const std::string& text) {
  std::string out = text.substr(0, text.find("; "));
  if (out.size() > 70) out = out.substr(0, 67) + "...";
  return out;
}

std::string value_kind(const Opt& o) {
  if (o.kind == "choice" || o.kind == "list") return o.kind + ":" + join_with(o.choices, " ");
  return o.kind;
}

// Tables for the bash template (declare -gA: the file may be sourced inside a function).
std::string bash_tables(const std::vector<Cmd>& cmds) {
  Text b;
  b << "declare -gA _gpusel_sub=(";
  for (const Cmd& c : cmds)
    b << " [" << detail::shell_quote(c.table_key())
      << "]=" << detail::shell_quote(join_with(c.subcommands, " "));
  b << " )\ndeclare -gA _gpusel_opt=(";
  for (const Cmd& c : cmds) {
    std::vector<std::string> names;
    for (const Opt& o : c.options) {
      if (!o.positional) names.insert(names.end(), o.names.begin(), o.names.end());
    }
    names.push_back("--help");
    b << " [" << detail::shell_quote(c.table_key())
      << "]=" << detail::shell_quote(join_with(names, " "));
  }
  b << " )\n# Options that take a value, and what completes it (an empty kind: nothing).\n";
  b << "declare -gA _gpusel_val=(";
  for (const Cmd& c : cmds) {
    for (const Opt& o : c.options) {
      if (o.positional || o.value.empty() || o.optional_value) continue;
      for (const std::string& n : o.names)
        b << " [" << detail::shell_quote(c.table_key() + ":" + n)
          << "]=" << detail::shell_quote(value_kind(o));
    }
  }
  b << " )\n# Positionals, in order.\ndeclare -gA _gpusel_pos=(";
  for (const Cmd& c : cmds) {
    std::vector<std::string> kinds;
    for (const Opt& o : c.options) {
      if (o.positional) kinds.push_back(o.kind.empty() ? "-" : o.kind);
    }
    if (!kinds.empty())
      b << " [" << detail::shell_quote(c.table_key())
        << "]=" << detail::shell_quote(join_with(kinds, " "));
  }
  b << " )\n";
  return b.str();
}

std::string zsh_escape(const std::string& text) {
  std::string out;
  for (char ch : text) {
    if (ch == '[' || ch == ']' || ch == ':' || ch == '\\') out += '\\';
    out += ch;
  }
  return out;
}

std::string zsh_function(const Cmd& c) {
  std::string name = "_gpusel_cmd";
  for (const std::string& p : c.path) name += "_" + p;
  Text z;
  z << name << "() {\n  local curcontext=\"$curcontext\" state line\n  typeset -A opt_args\n"
    << "  _arguments -C -s \\\n";
  if (!c.path.empty())
    z << "    '--sim=[run on a simulated machine]:machine:_gpusel_machines' \\\n";
  z << "    '(- *)'{-h,--help}'[show help]' \\\n";
  for (const Opt& o : c.options) {
    if (o.positional) continue;
    const std::string desc = "[" + zsh_escape(brief(o.description)) + "]";
    std::string action;
    if (o.kind == "gpu" || o.kind == "gpu-all") {
      action =
          ":" + zsh_escape(o.value) + ":_gpusel_gpu_values" + (o.kind == "gpu-all" ? " all" : "");
    } else if (o.kind == "machine") {
      action = ":machine:_gpusel_machines";
    } else if (o.kind == "file") {
      action = ":" + zsh_escape(o.value) + ":_files";
    } else if (o.kind == "choice") {
      action = ":" + zsh_escape(o.value) + ":(" + join_with(o.choices, " ") + ")";
    } else if (o.kind == "list") {
      action = ":" + zsh_escape(o.value) + ":_sequence compadd - " + join_with(o.choices, " ");
    } else if (!o.value.empty()) {
      action = ":" + zsh_escape(o.value) + ": ";
    }
    for (const std::string& n : o.names) {
      if (o.optional_value) {
        z << "    " << detail::shell_quote(n + "=-" + desc + "::" + zsh_escape(o.value) + ": ")
          << " \\\n";
      } else if (!o.value.empty()) {
        z << "    " << detail::shell_quote(n + "=" + desc + action) << " \\\n";
      } else {
        z << "    " << detail::shell_quote(n + desc) << " \\\n";
      }
    }
  }
  std::size_t position = 1;
  for (const Opt& o : c.options) {
    if (!o.positional) continue;
    if (o.kind == "command") {
      z << "    '*::command:_normal' \\\n";
    } else if (o.kind == "machine") {
      z << "    '" << position++ << ":machine:_gpusel_machines' \\\n";
    } else {
      z << "    '" << position++ << ":" << zsh_escape(o.name) << ": ' \\\n";
    }
  }
  if (!c.subcommands.empty()) {
    z << "    '1:command:->command' \\\n    '*::arg:->args'\n";
    z << "  case $state in\n    command)\n      local -a commands\n      commands=(\n";
    // The descriptions come from each subcommand's own entry (filled in by the caller's tree).
    z << "@SUBCOMMANDS_" << name << "@";
    z << "      )\n      _describe command commands ;;\n    args)\n      case $words[1] in\n";
    for (const std::string& s : c.subcommands) {
      z << "        " << s << ") " << name << "_" << s << " ;;\n";
    }
    z << "      esac ;;\n  esac\n";
  } else {
    z << "    && return 0\n";
  }
  z << "}\n";
  return z.str();
}

std::string zsh_functions(const std::vector<Cmd>& cmds) {
  std::string out;
  for (const Cmd& c : cmds) out += zsh_function(c) + "\n";
  // Each menu of subcommands, with their descriptions.
  for (const Cmd& c : cmds) {
    if (c.subcommands.empty()) continue;
    std::string name = "_gpusel_cmd";
    for (const std::string& p : c.path) name += "_" + p;
    std::string menu;
    for (const Cmd& s : cmds) {
      if (s.path.size() == c.path.size() + 1 &&
          std::equal(c.path.begin(), c.path.end(), s.path.begin())) {
        menu += "        " +
                detail::shell_quote(s.path.back() + ":" + zsh_escape(brief(s.description))) + "\n";
      }
    }
    const std::string marker = "@SUBCOMMANDS_" + name + "@";
    out.replace(out.find(marker), marker.size(), menu);
  }
  return out;
}

std::string fish_lines(const std::vector<Cmd>& cmds) {
  Text f;
  // The walker's tables: subcommands per path, options that take a value, positionals.
  f << "function __gpusel_subcommands\n    switch \"$argv[1]\"\n";
  for (const Cmd& c : cmds) {
    f << "        case " << fish_sq(c.table_key()) << "\n            echo "
      << join_with(c.subcommands, " ") << "\n";
  }
  f << "    end\nend\n\nfunction __gpusel_takes_value\n    switch \"$argv[1]\"\n";
  for (const Cmd& c : cmds) {
    std::vector<std::string> names;
    for (const Opt& o : c.options) {
      if (o.positional || o.value.empty() || o.optional_value) continue;
      for (const std::string& n : o.names) names.push_back(fish_sq(c.table_key() + ":" + n));
    }
    if (!names.empty()) f << "        case " << join_with(names, " ") << "\n            return 0\n";
  }
  f << "    end\n    return 1\nend\n\nfunction __gpusel_positionals\n    switch \"$argv[1]\"\n";
  for (const Cmd& c : cmds) {
    std::vector<std::string> kinds;
    for (const Opt& o : c.options) {
      if (o.positional) kinds.push_back(o.kind.empty() ? "-" : o.kind);
    }
    if (!kinds.empty()) {
      f << "        case " << fish_sq(c.table_key()) << "\n            echo "
        << join_with(kinds, " ") << "\n";
    }
  }
  f << "    end\nend\n\n";
  for (const Cmd& c : cmds) {
    const std::string at = "__gpusel_at " + fish_sq(c.table_key());
    for (const Cmd& s : cmds) {
      if (s.path.size() == c.path.size() + 1 &&
          std::equal(c.path.begin(), c.path.end(), s.path.begin())) {
        f << "complete -c gpusel -n " << fish_sq(at) << " -a " << fish_sq(s.path.back()) << " -d "
          << fish_sq(brief(s.description)) << "\n";
      }
    }
    for (const Opt& o : c.options) {
      if (o.positional) {
        if (o.kind == "machine") {
          f << "complete -c gpusel -n " << fish_sq(at) << " -F -a '(__gpusel_machines)'\n";
        }
        continue;
      }
      f << "complete -c gpusel -n " << fish_sq(at);
      for (const std::string& n : o.names) {
        f << (n.rfind("--", 0) == 0 ? " -l " : " -s ") << n.substr(n.find_first_not_of('-'));
      }
      if (!o.value.empty() && !o.optional_value) {
        if (o.kind == "file" || o.kind == "machine") {
          f << " -r -F";
        } else {
          f << " -x";
        }
        if (o.kind == "choice") f << " -a " << fish_sq(join_with(o.choices, " "));
        if (o.kind == "list")
          f << " -a " << fish_sq("(__gpusel_list_item " + join_with(o.choices, " ") + ")");
        if (o.kind == "gpu" || o.kind == "gpu-all")
          f << " -a "
            << fish_sq(std::string("(__gpusel_gpu_values") + (o.kind == "gpu-all" ? " all" : "") +
                       ")");
        if (o.kind == "machine") f << " -a " << fish_sq("(__gpusel_machines)");
      }
      f << " -d " << fish_sq(brief(o.description)) << "\n";
    }
    if (!c.path.empty()) {
      f << "complete -c gpusel -n " << fish_sq(at)
        << " -l sim -r -F -a '(__gpusel_machines)' -d 'run on a simulated machine'\n";
    }
  }
  return f.str();
}

std::string read_file(const std::string& path) {
  std::optional<std::string> text = detail::read_file_text(path);
  if (!text) throw failure("cannot read the template " + detail::quote_value(path));
  return std::move(*text);
}

void replace_marker(std::string& text, const std::string& marker, const std::string& value) {
  const std::size_t at = text.find(marker);
  if (at == std::string::npos) {
    throw failure("the template lacks its " + marker + " marker");
  }
  text.replace(at, marker.size(), value);
}

}  // namespace

std::string not_a_choice(const std::string& value, const std::vector<std::string>& choices) {
  for (const std::string& c : choices) {
    if (c == value) return "";
  }
  std::string message = detail::quote_value(value) + " is not one of " + join_with(choices, ", ");
  const std::string guess = closest(value, choices);
  if (!guess.empty()) message += "; did you mean '" + guess + "'?";
  return message;
}

InterfaceOptions read_interface(const CommandLine& line) {
  InterfaceOptions o;
  o.format = line.value("FORMAT").value_or("");
  o.template_file = line.value("--template").value_or("");
  o.output = line.value("--output").value_or("");
  return o;
}

int run_interface(const Command& root, const InterfaceOptions& options) {
  const std::vector<Cmd> cmds = tree(root);
  std::string text;
  if (options.format == "synopsis") {
    for (const std::string& line : synopsis_lines(cmds, 100)) text += line + "\n";
  } else {
    static const std::map<std::string, std::string> kMarkers = {{"man", "@GPUSEL_COMMANDS@"},
                                                                {"bash", "@GPUSEL_TABLES@"},
                                                                {"zsh", "@GPUSEL_FUNCTIONS@"},
                                                                {"fish", "@GPUSEL_COMPLETIONS@"}};
    const auto marker = kMarkers.find(options.format);
    if (marker == kMarkers.end()) {
      throw bad_input("internal-interface: unknown format " + detail::quote_value(options.format) +
                      "; one of man, bash, zsh, fish, synopsis");
    }
    if (options.template_file.empty()) {
      throw bad_input("internal-interface " + options.format + " needs --template FILE");
    }
    text = read_file(options.template_file);
    std::string generated;
    if (options.format == "man") {
      generated = man_commands(cmds);
      replace_marker(text, "@GPUSEL_SYNOPSIS@", man_synopsis(cmds));
      replace_marker(text, "@GPUSEL_VERSION@", GPUSEL_VERSION_STRING);
    } else if (options.format == "bash") {
      generated = bash_tables(cmds);
    } else if (options.format == "zsh") {
      generated = zsh_functions(cmds);
    } else {
      generated = fish_lines(cmds);
    }
    replace_marker(text, marker->second, generated);
  }
  if (options.output.empty() || options.output == "-") {
    to_stdout() << text;
    return 0;
  }
  if (!detail::write_file_text(options.output, text)) {
    throw failure("cannot write " + detail::quote_value(options.output));
  }
  return 0;
}

}  // namespace gpusel::cli
