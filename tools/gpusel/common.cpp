#include "common.hpp"

#ifdef _WIN32
#include "win.hpp"
#else
#include <unistd.h>
#endif

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "args.hpp"
#include "gpusel/error.hpp"
#include "gpusel/nvml.hpp"
#include "gpusel/resolution.hpp"
#include "gpusel_detail.hpp"
#ifndef _WIN32
#include "process.hpp"
#endif
#include "sim_machine.hpp"

namespace gpusel::cli {

namespace fs = std::filesystem;

std::optional<std::string> env_value(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::nullopt : std::optional<std::string>(v);
}

void set_env(const std::string& name, const std::string& value) {
#ifdef _WIN32
  _wputenv_s(detail::win::widen(name).c_str(), detail::win::widen(value).c_str());
#else
  setenv(name.c_str(), value.c_str(), 1);
#endif
}

#ifndef _WIN32
std::string program_path(const std::string& who, const std::string& name) {
  auto runnable = [](const std::string& path) {
    std::error_code ec;
    return fs::is_regular_file(path, ec) && access(path.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) {
    if (runnable(name)) return name;
    throw bad_input(
        who + ": " + detail::quote_value(name) +
        (access(name.c_str(), F_OK) == 0 ? " is not an executable file" : " does not exist") +
        "; give the path of a program, or a program's name to look up in PATH");
  }
  const char* path = std::getenv("PATH");
  const std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    std::size_t colon = dirs.find(':', start);
    if (colon == std::string::npos) colon = dirs.size();
    const std::string dir = dirs.substr(start, colon - start);
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (runnable(candidate)) return candidate;
    start = colon + 1;
  }
  throw bad_input(who + ": command " + detail::quote_value(name) + " not found in PATH=" +
                  detail::quote_value(dirs) + "; check its spelling, or give its path");
}

void exec_program(const std::string& who, const std::string& program,
                  const std::vector<std::string>& command) {
  std::fflush(stdout);
  const int e = detail::replace_process(program, command);
  // What a shell reports as 127 or 126 (no such program, not runnable) is bad input here.
  const std::string message =
      who + ": cannot start " + detail::quote_value(program) + ": " + std::strerror(e) +
      (e == ENOEXEC ? "; a script needs a #! line, or run it through its interpreter" : "");
  if (e == ENOENT || e == EACCES || e == ENOEXEC || e == ENOTDIR || e == ELOOP)
    throw bad_input(message);
  throw failure(message);
}
#endif

void unset_env(const std::string& name) {
#ifdef _WIN32
  _wputenv_s(detail::win::widen(name).c_str(), L"");
#else
  unsetenv(name.c_str());
#endif
}

#ifndef _WIN32  // Windows: sim_exec_win.cpp
std::string executable_path() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.string();
}
#endif

std::string sim_root() {
  if (auto root = env_value("GPUSEL_SIM_ROOT"); root && !root->empty()) return *root;
  std::error_code ec;
  fs::path exe = executable_path();
  if (exe.empty()) return "lib/gpusel/sim";
  return (exe.parent_path().parent_path() / "lib" / "gpusel" / "sim").lexically_normal().string();
}

// The message for a simulator folder without its libraries.
std::string missing_simulator(const std::string& root) {
  return "the simulator's libraries are not in " + root +
         " (a partial build or installation?); build the gpusel_sim target, or set "
         "GPUSEL_SIM_ROOT to the folder that holds " +
         kSimNvml + " and " + kSimCuda;
}

namespace {

// A bare machine name that is no bundled machine (and no file): the bundled name it was most
// likely meant to be, or "".
std::string machine_guess(const std::string& root, const std::string& machine) {
  std::error_code ec;
  if (machine.find_first_of("/\\") != std::string::npos || fs::exists(machine, ec)) return "";
  const fs::path dir = fs::path(root) / "machines";
  if (fs::exists(dir / (machine + ".toml"), ec)) return "";
  std::vector<std::string> names;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".toml") names.push_back(it->path().stem().string());
  }
  return closest(machine, names);
}

}  // namespace

SimSetup sim_setup(const std::string& machine) {
  const std::string root = sim_root();
  if (const std::string guess = machine_guess(root, machine); !guess.empty()) {
    throw bad_input(
        "--sim " + detail::quote_value(machine) +
        ": no bundled machine has that name; did you mean '" + guess +
        "'? (`gpusel sim list` shows every machine; a machine file is given by its path)");
  }
  SimSetup setup;
  const std::optional<SimMachineInfo> m = describe_sim_machine(root, machine, root + "/machines");
  if (!m) throw failure(missing_simulator(root));
  if (!m->ok) throw bad_input(std::string("--sim ") + machine + ": " + m->error);
  setup.machine_path = m->path;
  std::error_code ec;
  fs::path absolute = fs::canonical(setup.machine_path, ec);
  if (!ec) setup.machine_path = absolute.string();
  if (!fs::exists(root + "/" + kSimNvml) || !fs::exists(root + "/" + kSimCuda)) {
    throw failure(missing_simulator(root));
  }
  std::string dir = root;
  if (m->vendor == "amd") {
    dir = root + "/amd";  // ROCm SMI alone: no NVIDIA library on an AMD machine
  } else if (m->nvml_fault == "missing") {
    dir = root + "/no-nvml";
  } else if (m->nvml_fault == "no_v2") {
    dir = root + "/nvml-no-v2";
  } else if (m->cuda_fault == "missing") {
    dir = root + "/no-cuda";
  }
  setup.machine_name = m->name;
  // On a simulated machine already: this one replaces it, so the loader's path is built on what
  // it was before the first (the first machine's folder would otherwise stay on it, its
  // libraries found where this machine's folder lacks one).
  std::optional<std::vector<SavedVariable>> saved = sim_saved();
  std::optional<std::string> old = env_value(kSimSearchPath);
  if (saved) {
    for (const SavedVariable& v : *saved) {
      if (v.name == kSimSearchPath) old = v.value;
    }
  }
  std::string path = dir;
  if (m->vendor == "nvidia+amd") path += kPathSeparator + root + "/amd";  // ROCm SMI too
  if (old && !old->empty()) path += kPathSeparator + *old;
  setup.env[kSimSearchPath] = path;
#ifndef _WIN32
  // The simulator's nvidia-smi first on PATH (built beside the libraries, in bin/): PATH as it is
  // now (what the shell added since an earlier `sim env` kept), without that folder, after it.
  if (fs::is_directory(root + "/bin")) {
    std::string path_now;
    const std::string bin = root + "/bin";
    const std::string current = env_value("PATH").value_or("");
    for (std::size_t start = 0; !current.empty() && start <= current.size();) {
      std::size_t colon = current.find(':', start);
      if (colon == std::string::npos) colon = current.size();
      const std::string entry = current.substr(start, colon - start);
      if (entry != bin) path_now += ":" + entry;  // an empty entry (the current folder) kept
      start = colon + 1;
    }
    setup.env["PATH"] = bin + path_now;
  }
#endif
  setup.env["GPUSEL_SIM_MACHINE"] = setup.machine_path;
  // gpusel loads the libraries by these paths, so a missing one stays missing even on a machine
  // that has the real driver installed.
  setup.env["GPUSEL_NVML_LIBRARY"] = dir + "/" + kSimNvml;
  setup.env["GPUSEL_CUDA_LIBRARY"] = dir + "/" + kSimCuda;
  // Absent but where the machine has AMD GPUs (an AMD machine, or one with GPUs of both makers).
  setup.env["GPUSEL_ROCM_SMI_LIBRARY"] =
      (m->vendor == "nvidia+amd" ? root + "/amd" : dir) + "/librocm_smi64.so.1";
  // What each variable was: kept from the first `sim env` when there was one, the values now for
  // any it did not save.
  std::vector<SavedVariable> before = saved.value_or(std::vector<SavedVariable>{});
  for (const auto& entry : setup.env) {
    const std::string& key = entry.first;  // (named: clang 14 cannot capture a structured binding)
    const bool known = std::any_of(before.begin(), before.end(),
                                   [&key](const SavedVariable& v) { return v.name == key; });
    if (!known) before.push_back({key, env_value(key.c_str())});
  }
  setup.env[kSimSaved] = encode_sim_saved(before);
  return setup;
}

namespace {

bool is_name(const std::string& text) {
  if (text.empty() || (std::isdigit(static_cast<unsigned char>(text.front())) != 0)) return false;
  return std::all_of(text.begin(), text.end(), [](char c) {
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  });
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

std::string encode_sim_saved(const std::vector<SavedVariable>& saved) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const SavedVariable& v : saved) {
    if (!out.empty()) out += ' ';
    out += v.name;
    if (!v.value) continue;
    out += '=';
    for (char c : *v.value) {
      const auto u = static_cast<unsigned char>(c);
      if (c == '%' || c == ' ' || u < 0x20 || u == 0x7f) {
        out += '%';
        out += kHex[u >> 4];
        out += kHex[u & 0xf];
      } else {
        out += c;
      }
    }
  }
  return out;
}

std::optional<std::vector<SavedVariable>> sim_saved() {
  const std::optional<std::string> text = env_value(kSimSaved);
  if (!text) return std::nullopt;
  auto bad = [&text](const std::string& why) {
    return bad_input(std::string(kSimSaved) + "=" + detail::quote_value(*text) + ": " + why +
                     "; it holds what `gpusel sim env` replaced, for `gpusel sim env --undo`, and "
                     "was changed since: open a new shell, or run `unset " +
                     kSimSaved +
                     " GPUSEL_SIM_MACHINE GPUSEL_NVML_LIBRARY GPUSEL_CUDA_LIBRARY "
                     "GPUSEL_ROCM_SMI_LIBRARY` " +
                     "and take the simulator's folder out of " + kSimSearchPath + " yourself");
  };
  std::vector<SavedVariable> out;
  std::size_t start = 0;
  while (start <= text->size()) {
    std::size_t end = text->find(' ', start);
    if (end == std::string::npos) end = text->size();
    const std::string entry = text->substr(start, end - start);
    start = end + 1;
    const std::size_t equals = entry.find('=');
    SavedVariable v;
    v.name = entry.substr(0, equals);
    if (!is_name(v.name)) {
      throw bad(entry.empty() ? std::string("an empty entry (entries are NAME or NAME=VALUE, one "
                                            "space apart)")
                              : detail::quote_value(v.name) + " is not a variable's name");
    }
    if (std::any_of(out.begin(), out.end(),
                    [&v](const SavedVariable& o) { return o.name == v.name; })) {
      throw bad(v.name + " is saved twice");
    }
    if (equals != std::string::npos) {
      std::string value;
      for (std::size_t i = equals + 1; i < entry.size(); ++i) {
        if (entry[i] != '%') {
          value += entry[i];
          continue;
        }
        const int high = i + 2 < entry.size() ? hex_digit(entry[i + 1]) : -1;
        const int low = i + 2 < entry.size() ? hex_digit(entry[i + 2]) : -1;
        if (high < 0 || low < 0 || (high == 0 && low == 0)) {
          throw bad(v.name +
                    "'s value has a % not followed by two hex digits (of a byte other "
                    "than 0)");
        }
        value += static_cast<char>(high * 16 + low);
        i += 2;
      }
      v.value = std::move(value);
    }
    out.push_back(std::move(v));
  }
  return out;
}

void apply_sim(const SimSetup& setup) {
  for (const auto& [key, value] : setup.env) set_env(key, value);
}

std::vector<std::optional<GpuInfo>> resolved_in_full(const Resolution& r) {
  std::vector<std::optional<GpuInfo>> out(r.gpus.size());
  std::vector<GpuInfo> machine = r.machine;
  std::vector<std::size_t> positions, ranks;
  for (std::size_t rank = 0; rank < r.gpus.size(); ++rank) {
    for (std::size_t g = 0; g < machine.size(); ++g) {
      if (machine[g].uuid == r.gpus[rank]) {
        positions.push_back(g);
        ranks.push_back(rank);
      }
    }
  }
  // What cannot be read stays as the resolution read it (the CPUs then unknown).
  if (r.resolved && !r.through_cuda)
    detail::nvml_complete(machine, positions, detail::NvmlPart::Full);
  for (std::size_t i = 0; i < positions.size(); ++i) out[ranks[i]] = machine[positions[i]];
  return out;
}

std::optional<std::string> simulated_machine() {
  auto path = env_value("GPUSEL_SIM_MACHINE");
  if (!path || path->empty()) return std::nullopt;
  // The file name without its last extension, as std::filesystem's stem() gives it ("dgx-h100"
  // of ".../dgx-h100.toml"; ".hidden" stays whole), without building a path.
  std::string_view name(*path);
#ifdef _WIN32
  const std::size_t slash = name.find_last_of("/\\:");  // and a drive's colon: C:name.toml
#else
  const std::size_t slash = name.rfind('/');
#endif
  if (slash != std::string_view::npos) name.remove_prefix(slash + 1);
  if (name == "." || name == "..") return std::string(name);
  if (const std::size_t dot = name.rfind('.'); dot != std::string_view::npos && dot > 0)
    name = name.substr(0, dot);
  return std::string(name);
}

std::string not_a_duration(const std::string& option, const std::string& value) {
  return option + " " + detail::quote_value(value) +
         " is not a duration: give seconds (30, 1.5, 1e4) or 90s, 15m, 2h, 1d; " + option +
         " alone waits for as long as it takes";
}

std::string sentence(const std::string& text) {
  if (!text.empty() && (text.back() == '.' || text.back() == '?' || text.back() == '!'))
    return text + " ";
  return text + ". ";
}

std::string count_of(std::size_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

std::string said(std::string_view text) {
  return worded(text, Audience::CommandLine);
}
std::string said(const std::exception& e) {
  const auto* error = dynamic_cast<const Error*>(&e);
  return error != nullptr ? error->message(Audience::CommandLine) : std::string(e.what());
}

void print_error(const std::string& message) {
  to_stderr() << "gpusel: " << said(message) << "\n" << flushed;
}
void print_warning(const std::string& message) {
  to_stderr() << "gpusel: warning: " << said(message) << "\n" << flushed;
}
void print_note(const std::string& message) {
  to_stderr() << "gpusel: note: " << said(message) << "\n" << flushed;
}
void print_line(const std::string& message) {
  to_stderr() << "gpusel: " << said(message) << "\n" << flushed;
}

}  // namespace gpusel::cli
