// gpusel bind: assign a GPU as a worker would, bind it, and show the worker's view; or, with a
// COMMAND, claim it and run the command in gpusel's place on that GPU.
#include <fmt/format.h>
#include <cstdio>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#ifdef _WIN32
#include <windows.h>
#else
#include <unistd.h>
#endif

#include "ancestry.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "gpusel/amd.hpp"
#include "gpusel/cuda.hpp"
#include "gpusel/launch.hpp"
#include "gpusel/nvml.hpp"
#include "gpusel/spec.hpp"
#include "gpusel/worker.hpp"
#include "gpusel_detail.hpp"

namespace gpusel::cli {

namespace {

// The rank to name in bind's report: the one that chose the GPU, else the launcher's (for the
// report only: it did not pick the GPU).
std::optional<LocalRank> rank_for_report(const std::optional<AssignmentInfo>& info) {
  if (info && info->rank) return info->rank;
  try {
    return local_rank();
  } catch (const Error&) {
    return std::nullopt;
  }
}

}  // namespace

BindOptions read_bind(const CommandLine& line) {
  BindOptions o;
  if (const std::optional<std::string> gpu = line.value("--gpu")) o.gpu = parse_single_gpu(*gpu);
  o.share = line.flag("--share");
  o.json = line.flag("--json");
  o.quiet = line.flag("--quiet");
  o.command = line.words();
  return o;
}

namespace {

// The JSON report of a bind (bare `gpusel bind --json`).
void print_json(const std::optional<AssignmentInfo>& info, const std::optional<LocalRank>& rank,
                const CudaDevice& id, const std::string& cpus, const std::string& cc) {
  nlohmann::json j;
  j["rank"] = rank ? nlohmann::json(rank->rank) : nlohmann::json(nullptr);
  j["rank_variable"] = rank ? nlohmann::json(rank->variable) : nlohmann::json(nullptr);
  j["source"] = info ? source_name(info->source) : "default";
  j["ignored"] = rank ? rank->ignored : std::vector<std::string>{};
  j["uuid"] = id.uuid;
  // The two numberings under explicit names; "index" is the nvidia-smi index too (kept for
  // scripts written before the explicit name).
  j["nvidia_smi_index"] =
      id.nvidia_smi_index ? nlohmann::json(*id.nvidia_smi_index) : nlohmann::json(nullptr);
  j["index"] = j["nvidia_smi_index"];
  j["cuda_ordinal"] = id.cuda_ordinal;
  j["shared"] = info && info->shared;
  j["shared_with_pid"] =
      info && info->shared_with_pid ? nlohmann::json(*info->shared_with_pid) : nullptr;
  j["claim_note"] = info && !info->claim_note.text.empty()
                        ? nlohmann::json(said(info->claim_note.text))
                        : nlohmann::json(nullptr);
  // Its code, to decide from: "unclaimed" or "claim-partial"; null after a full claim.
  j["claim_code"] = info && !info->claim_note.code.empty() ? nlohmann::json(info->claim_note.code)
                                                           : nlohmann::json(nullptr);
  j["name"] = id.name;
  j["memory_total_bytes"] = id.memory_total_bytes;  // the field's name in list --json too
  j["total_bytes"] = id.memory_total_bytes;         // the reference module's key
  j["compute_capability"] = cc;
  j["pci_bus_id"] = id.pci_bus_id;
  // The CUDA driver's own version (cuDriverGetVersion), "12.8"; null when it gave none.
  const int version = cuda_driver_version();
  j["cuda_driver_version"] =
      version > 0 ? nlohmann::json(cuda_version_text(version)) : nlohmann::json(nullptr);
  j["cpus"] = cpus;
  j["simulated"] =
      simulated_machine() ? nlohmann::json(*simulated_machine()) : nlohmann::json(nullptr);
  // Driver strings may hold bytes that are not UTF-8: they become U+FFFD.
  to_stdout() << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n"
              << flushed;
}

// "rank 1 (LOCAL_RANK=1)", or "this process".
std::string who_text(const std::optional<LocalRank>& rank) {
  return rank ? fmt::format("rank {} ({}={})", rank->rank, rank->variable, rank->rank)
              : std::string("this process");
}

std::string index_text(const CudaDevice& id) {
  return id.nvidia_smi_index ? std::to_string(*id.nvidia_smi_index)
                             : std::string("unknown (no NVML)");
}

// "shared on purpose ...", or "" when the GPU is not shared.
std::string shared_text(const std::optional<AssignmentInfo>& info) {
  if (!info || !info->shared) return "";
  return fmt::format("shared on purpose (GPUSEL_SHARE=1){}",
                     info->shared_with_pid ? fmt::format(", beside pid {}, which holds it alone",
                                                         *info->shared_with_pid)
                                           : std::string());
}

#ifndef _WIN32
// Whether a shell started with `words` runs a script or a command string rather than a terminal:
// `sh job.sh`, `bash -c '...'`, `bash -e job.sh`, or commands read from a stdin that is no
// terminal (`bash < job.sh`). `bash`, `-bash`, `bash -i`, `zsh -l` at a terminal are not.
bool shell_runs_script(const std::vector<std::string>& words, int pid) {
  for (std::size_t i = 1; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w == "--") return i + 1 < words.size();
    if (w == "--rcfile" || w == "--init-file" || w == "-o" || w == "+o" || w == "-O" || w == "+O") {
      ++i;  // an option's value
      continue;
    }
    if (w.rfind("--", 0) == 0) continue;  // --login, --norc, --posix...
    if (w.size() > 1 && (w[0] == '-' || w[0] == '+')) {
      if (w[0] == '-' && w.find('c') != std::string::npos) return true;   // -c, -ec, -xc
      if (w[0] == '-' && w.find('i') != std::string::npos) return false;  // -i: interactive
      if (w[0] == '-' && w.find('s') != std::string::npos) break;         // -s: stdin
      continue;
    }
    return true;  // the script's file
  }
  std::error_code ec;
  const std::string input =
      std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/fd/0", ec).string();
  if (ec) return false;
  return input.rfind("/dev/pts/", 0) != 0 && input.rfind("/dev/tty", 0) != 0 &&
         input != "/dev/console";
}
#endif

// Whether something after this `gpusel bind` (no COMMAND) could be relying on it to bind more
// than itself: its parent is a shell running a script or a command string (Linux, from /proc);
// on Windows, its output is no console (a batch file's, a launcher's).
bool run_by_a_script() {
#ifdef _WIN32
  DWORD mode = 0;
  return GetConsoleMode(GetStdHandle(STD_OUTPUT_HANDLE), &mode) == 0;
#else
  const int parent = static_cast<int>(getppid());
  const std::vector<std::string> words =
      detail::process_args(parent, std::numeric_limits<std::size_t>::max());
  if (words.empty()) return false;
  std::string name = words.front().substr(words.front().rfind('/') + 1);
  if (!name.empty() && name.front() == '-') name.erase(0, 1);  // a login shell: -bash
  // (A list, not a std::set: building a set of 14 strings cost each bind 7,000 instructions.)
  static constexpr std::string_view kShells[] = {"sh",    "bash", "dash", "zsh",    "ksh",
                                                 "ksh93", "mksh", "ash",  "yash",   "posh",
                                                 "fish",  "csh",  "tcsh", "busybox"};
  return std::find(std::begin(kShells), std::end(kShells), name) != std::end(kShells) &&
         shell_runs_script(words, parent);
#endif
}

// What bare `gpusel bind` says in a script: it bound nothing beyond itself.
std::string script_note(const CudaDevice& id) {
  return "`gpusel bind` bound only its own process, which ends now: a program this script starts "
         "next is not put on GPU " +
         detail::printable(id.uuid) +
         " (CUDA gives it its own device 0 unless told otherwise). Run the program through "
         "bind instead: `exec gpusel bind -- PROGRAM [ARGS...]` claims the GPU, sets "
         "CUDA_VISIBLE_DEVICES to it for PROGRAM and holds the claim while PROGRAM runs";
}

#ifndef _WIN32
// The program's file, looked up before anything is claimed.
std::string program_file(const std::string& name) {
  try {
    return program_path("bind", name);
  } catch (const Error& e) {
    // `gpusel bind 3`: a GPU written without --gpu.
    if (!name.empty() && name.find_first_not_of("0123456789,") == std::string::npos) {
      throw bad_input(std::string(said(e)) + "; to name a GPU, use --gpu: gpusel bind --gpu " +
                      name);
    }
    throw;
  }
}
#endif

// `gpusel bind [--gpu X] [--share] -- COMMAND`: the rank's GPU chosen and claimed as bind does,
// with no context made, then COMMAND in this process's place (Windows: a child waited for) with
// CUDA_VISIBLE_DEVICES set to the GPU's UUID.
int bind_and_run(const BindOptions& options) {
  if (options.json) {
    throw bad_input("--json prints bind's report on stdout, which belongs to " +
                    detail::quote_value(options.command.front()) +
                    " in `gpusel bind -- COMMAND`; drop --json (the report goes to stderr, "
                    "--quiet drops it), or run `gpusel bind --json` alone to see the choice");
  }
#ifdef _WIN32
  try {
    (void)find_program(options.command.front());  // before anything is claimed
  } catch (const Error& e) {
    std::string what = said(e);
    if (what.rfind("run: ", 0) == 0) what = what.substr(5);
    throw bad_input("bind: " + what);
  }
#else
  const std::string program = program_file(options.command.front());
#endif
  if (options.share) set_env("GPUSEL_SHARE", "1");
  if (!options.gpu.empty()) assign_gpu(options.gpu);
  const int ordinal = detail::claim_assigned_gpu();
  const std::optional<AssignmentInfo> info = assignment_info();
  const std::optional<LocalRank> rank = rank_for_report(info);
  const CudaDevice id = gpu_identity(ordinal);
  if (!options.quiet) {
    print_line(
        fmt::format("{}{}: nvidia-smi index {} = {} (CUDA ordinal {} here), chosen by {}; "
                    "running {} on it as its CUDA device 0",
                    simulated_machine() ? "[simulated] " : "", who_text(rank), index_text(id),
                    detail::printable(id.uuid), id.cuda_ordinal,
                    !options.gpu.empty() ? "--gpu"
                    : info               ? source_name(info->source)
                                         : "default",
                    detail::quote_value(options.command.front())));
  }
  if (!options.quiet && !shared_text(info).empty()) print_line("  " + shared_text(info));
  // Without a claim, the library has said so on stderr already (once per process), except when
  // sharing was asked for; that note stays under --quiet.
  if (info && info->shared && !info->claim_note.text.empty()) {
    print_note(detail::printable(said(info->claim_note.text)));
  }
  // The program sees that GPU alone. GPUSEL_GPU and GPUSEL_GPUS named GPUs in this process's
  // numbering, which CUDA_VISIBLE_DEVICES changes: a program that binds through gpusel finds the
  // one GPU left instead (GPUSEL_SHARE stays, for --share).
  set_env("CUDA_VISIBLE_DEVICES", id.uuid);
  unset_env("GPUSEL_GPU");
  unset_env("GPUSEL_GPUS");
  std::fflush(stderr);
#ifdef _WIN32
  return run_program_in_job("bind", options.command);
#else
  exec_program("bind", program, options.command);
}
#endif

}  // namespace

namespace {

// This machine's AMD GPUs, where its GPUs are AMD's (no NVIDIA driver, and ROCm SMI monitors
// GPUs); nullopt elsewhere.
std::optional<AmdSnapshot> amd_machine() {
  if (nvml_usable()) return std::nullopt;
  AmdSnapshot amd = query_rocm_smi();
  if (!amd.available || amd.gpus.empty()) return std::nullopt;
  return amd;
}

#ifndef _WIN32
// The devices a HIP program started here would have, by id, in HIP ordinal order: the KFD order
// (ROCm SMI's node ids) through ROCR_, HIP_ and CUDA_VISIBLE_DEVICES, by ROCm's rules.
HipDevices hip_devices_here(const AmdSnapshot& amd) {
  HipDevices here = hip_devices(cuda_env_from_environment(), amd);
  if (here.unknown.empty()) return here;
  const bool kfd = here.unknown != "amd-kfd-order-unknown";
  const std::string why =
      !kfd ? "HIP numbers the GPUs in the kernel's KFD order, and " + kfd_order_unknown_text(amd)
      : here.unknown == "amd-rocr-empty-entry"
          ? "ROCR_VISIBLE_DEVICES has an empty entry, which makes HIP programs abort"
          : "that depends on the HIP version (an empty value, or ids in HIP_/CUDA_VISIBLE_DEVICES)";
  throw bad_input("bind: cannot tell which AMD GPUs a HIP program has here (" + here.settings +
                      "): " + why +
                      (!kfd ? "; name the GPU by unique id with --gpu GPU-... (`gpusel list` "
                              "shows them), with none of the three variables set"
                            : "; set the variables by indices, with no empty value or entry "
                              "(`gpusel doctor` explains them)"),
                  about(Subject::VisibleDevices, {{"reason", here.unknown}}));
}

// `gpusel bind [--gpu X] -- COMMAND` on AMD GPUs: the GPU chosen by the rule bind follows on
// NVIDIA (--gpu, GPUSEL_GPU, GPUSEL_GPUS by local rank, a launcher's rank, the one device, the
// first), among the devices HIP has here, claimed as a bind claims, then COMMAND in this
// process's place with ROCR_VISIBLE_DEVICES set to the GPU's id: its HIP device 0, and no other.
int amd_bind_and_run(const BindOptions& options, const AmdSnapshot& amd) {
  if (options.json) {
    throw bad_input("--json prints bind's report on stdout, which belongs to " +
                    detail::quote_value(options.command.front()) +
                    " in `gpusel bind -- COMMAND`; drop --json");
  }
  const std::string program = program_file(options.command.front());
  if (options.share) set_env("GPUSEL_SHARE", "1");
  std::string chosen;
  AssignmentSource source = AssignmentSource::Code;
  std::optional<LocalRank> rank;
  if (!options.gpu.empty()) {
    chosen = resolve_gpus(read_single_gpu(options.gpu), cuda_env_from_environment(),
                          probe_helper_when_needed())
                 .gpus.front();
  } else {
    const HipDevices here = hip_devices_here(amd);
    const detail::PlacementVerdict v =
        detail::analyse_placement(detail::hip_placement_model(here.ids));
    if (!v.problems.empty()) throw detail::placement_error(v.problems.front());
    chosen = *v.uuid;
    source = v.source;
    rank = v.rank;
  }
  std::string index = "?";
  for (const AmdGpu& g : amd.gpus) {
    if (g.id == chosen) index = std::to_string(g.index);
  }
  const AssignmentInfo info = detail::claim_for_exec(
      chosen, "AMD GPU " + chosen + " (rocm-smi index " + index + ")", source, rank);
  if (!options.quiet) {
    print_line(
        fmt::format("{}{}: rocm-smi index {} = {}, chosen by {}; running {} on it as its "
                    "HIP device 0 (ROCR_VISIBLE_DEVICES)",
                    simulated_machine() ? "[simulated] " : "", who_text(rank), index, chosen,
                    !options.gpu.empty() ? "--gpu" : source_name(source),
                    detail::quote_value(options.command.front())));
  }
  if (info.shared && !info.claim_note.text.empty())
    print_note(detail::printable(said(info.claim_note.text)));
  // ROCr shows the program that GPU alone; HIP's variables would count within it, and GPUSEL_GPU
  // and GPUSEL_GPUS named GPUs in this process's numbering.
  set_env("ROCR_VISIBLE_DEVICES", chosen);
  for (const char* name :
       {"HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "GPUSEL_GPU", "GPUSEL_GPUS"})
    unset_env(name);
  std::fflush(stderr);
  exec_program("bind", program, options.command);
#endif
}

int bind_command(const BindOptions& options);

#ifndef _WIN32
std::string without_blanks(std::string_view t) {
  while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
  return std::string(t);
}

// A machine with both makers' GPUs: its AMD GPUs, where the GPU bind is to take (--gpu, else
// GPUSEL_GPU, else the entries of GPUSEL_GPUS) is one of them by id; nullopt elsewhere. Refused
// (BadInput): a prefix that starts an NVIDIA UUID and an AMD id, and GPUSEL_GPUS naming both
// makers' GPUs. ROCm SMI (then NVML) is asked only for a text in an AMD id's form (no dash past
// "GPU-"): CUDA binds pay nothing.
std::optional<AmdSnapshot> amd_gpu_asked(const BindOptions& options) {
  std::vector<std::string> asked;
  const char* from = "--gpu";
  if (!options.gpu.empty()) {
    asked.push_back(options.gpu);
  } else if (const std::optional<std::string> one = env_value("GPUSEL_GPU"); one) {
    asked.push_back(*one);
    from = "GPUSEL_GPU";
  } else if (const std::optional<std::string> all = env_value("GPUSEL_GPUS"); all) {
    for (std::string_view e : detail::split_commas(*all)) asked.emplace_back(e);
    from = "GPUSEL_GPUS";
  }
  const auto amd_form = [](const std::string& t) { return detail::amd_id_form(without_blanks(t)); };
  // Whether `t` (blanks around it, any case) starts the GPU id `id`.
  const auto starts = [](const std::string& id, const std::string& t) {
    return detail::starts_with_ci(id, without_blanks(t));
  };
  if (std::none_of(asked.begin(), asked.end(), amd_form)) return std::nullopt;
  AmdSnapshot amd = query_rocm_smi();
  if (!amd.available || amd.gpus.empty()) return std::nullopt;
  const NvmlSnapshot nvidia = query_nvml(NvmlQuery{false, false, NvmlDetail::Uuid});
  std::string amd_entry, nvidia_entry;
  for (const std::string& t : asked) {
    const bool on_amd =
        amd_form(t) && std::any_of(amd.gpus.begin(), amd.gpus.end(),
                                   [&](const AmdGpu& g) { return starts(g.id, t); });
    const bool on_nvidia =
        !amd_form(t) || std::any_of(nvidia.gpus.begin(), nvidia.gpus.end(),
                                    [&](const GpuInfo& g) { return starts(g.uuid, t); });
    if (on_amd && on_nvidia) {
      throw bad_input(
          std::string(from) + " " + detail::quote_value(without_blanks(t)) +
              " starts the UUID of an NVIDIA GPU and the id of an AMD GPU; give enough "
              "characters to name one (`gpusel list` shows both makers' GPUs)",
          about(Subject::Gpu, {{"gpu", without_blanks(t)}, {"reason", "ambiguous-prefix"}}));
    }
    if (on_amd && amd_entry.empty()) amd_entry = without_blanks(t);
    if (!on_amd && nvidia_entry.empty()) nvidia_entry = without_blanks(t);
  }
  if (amd_entry.empty()) return std::nullopt;
  if (!nvidia_entry.empty()) {
    throw bad_input(std::string(from) + " names GPUs of two makers (" +
                        detail::quote_value(amd_entry) + " is an AMD GPU, " +
                        detail::quote_value(nvidia_entry) +
                        " is not); one job's GPUs are one maker's: give its workers AMD GPUs or "
                        "NVIDIA GPUs (`gpusel list` shows both)",
                    about(Subject::Gpu, {{"reason", "two-makers"}}));
  }
  return amd;
}
#endif

}  // namespace

int run_bind(const BindOptions& options) {
#ifndef _WIN32
  // An AMD GPU named on a machine that has NVIDIA's too: bound as on an AMD machine, by ROCr's
  // variable before the program starts (CUDA, which the bind below uses, cannot reach it).
  if (const std::optional<AmdSnapshot> amd = amd_gpu_asked(options); amd && nvml_usable()) {
    if (!options.command.empty()) return amd_bind_and_run(options, *amd);
    throw failure(
        "bind: the GPU asked for is an AMD GPU of this machine, and `gpusel bind` without a "
        "program binds only its own process, in CUDA, which cannot use it: wrap a HIP program as "
        "`gpusel bind -- PROGRAM`, or start it with `gpusel run --gpu GPU-<AMD id>`, either of "
        "which gives it its GPU in ROCR_VISIBLE_DEVICES (docs/amd.md)",
        about(Subject::Gpu, {{"reason", "amd-gpu-in-cuda"}}));
  }
#endif
  try {
    return bind_command(options);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::LibraryNotLoaded) throw;
    const std::optional<AmdSnapshot> amd = amd_machine();
    if (!amd) throw;
      // A HIP program is placed before it starts, by ROCr's variable: the wrapper form.
#ifndef _WIN32
    if (!options.command.empty()) return amd_bind_and_run(options, *amd);
#endif
    throw failure(e.text() +
                      " (this machine's GPUs are AMD's, and `gpusel bind` without a program binds "
                      "only its own process, in CUDA: wrap a HIP program as `gpusel bind -- "
                      "PROGRAM`, or start it with `gpusel run --gpu ...`, either of which gives it "
                      "its GPU in ROCR_VISIBLE_DEVICES, or have the program bind itself after its "
                      "first HIP call (gpusel_bind_assigned_gpu); docs/amd.md)",
                  e.problem());
  }
}

namespace {

int bind_command(const BindOptions& options) {
  if (!options.command.empty()) return bind_and_run(options);
  if (options.quiet) {
    throw bad_input(
        "--quiet goes with a program to run on the GPU (`gpusel bind --quiet -- PROGRAM`); "
        "without one, bind's report is all it does");
  }
  if (options.share) set_env("GPUSEL_SHARE", "1");
  if (!options.gpu.empty()) assign_gpu(options.gpu);
  const int ordinal = bind_assigned_gpu();
  const std::optional<AssignmentInfo> info = assignment_info();
  const std::optional<LocalRank> rank = rank_for_report(info);
  const CudaDevice id = gpu_identity(ordinal);
  const std::string cpus = detail::format_cpu_list(own_cpus());
  const std::string cc = fmt::format("{}.{}", id.cc_major, id.cc_minor);
  if (options.json) {
    print_json(info, rank, id, cpus, cc);
  } else {
    fmt::print("{}{}: CUDA ordinal {} = {}\n", simulated_machine() ? "[simulated] " : "",
               who_text(rank), id.cuda_ordinal, detail::printable(id.uuid));
    fmt::print("  nvidia-smi index {}, {}, {}, compute capability {}, PCI {}\n", index_text(id),
               detail::printable(id.name), detail::format_bytes(id.memory_total_bytes), cc,
               id.pci_bus_id.empty() ? "unknown" : detail::printable(id.pci_bus_id));
    fmt::print("  CPUs {}; chosen by {}\n", cpus, info ? source_name(info->source) : "default");
    if (!shared_text(info).empty()) fmt::print("  {}\n", shared_text(info));
    if (info && !info->claim_note.text.empty())
      fmt::print("  note: {}\n", detail::printable(said(info->claim_note.text)));
    if (rank) {
      for (const std::string& why : rank->ignored) fmt::print("  not counted: {}\n", why);
    }
  }
  if (run_by_a_script()) {
    std::fflush(stdout);
    print_note(script_note(id));
  }
  return 0;
}

}  // namespace

}  // namespace gpusel::cli
