// The CUDA probe: a child process (gpusel-probe-cuda, the library's helper program) enumerates
// CUDA and reports back through a pipe. Both sides are here: the parent's probe_cuda and the
// child's probe_child_main.
#include "gpusel/probe.hpp"

#ifdef _WIN32
#include <fcntl.h>
#include <io.h>

#include "win.hpp"
#else
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

#include "process.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "env.hpp"
#include "file_text.hpp"
#include "gpusel/error.hpp"
#include "gpusel/spec.hpp"
#include "gpusel_detail.hpp"
#include "probe_child.hpp"
#include "text.hpp"

GPUSEL_BEGIN_NAMESPACE
namespace {

constexpr double kDefaultProbeTimeout = 20;
constexpr double kMaxProbeTimeout = 3600;
// More than the child prints for the most devices it accepts (4096 lines of bounded fields).
constexpr std::size_t kMaxProbeOutput = std::size_t{4} << 20;

// The probe's deadline in seconds: GPUSEL_PROBE_TIMEOUT (unset or empty: 20).
double probe_timeout() {
  const auto v = gpusel::detail::env_value("GPUSEL_PROBE_TIMEOUT");
  if (!v || v->empty()) return kDefaultProbeTimeout;
  const std::string_view text(*v);
  const double seconds = detail::read_decimal_number(text, true).value_or(0);
  if (!(seconds > 0) || seconds > kMaxProbeTimeout) {
    throw bad_input(
        "GPUSEL_PROBE_TIMEOUT=" + detail::quote_value(text) +
            " is not a number of seconds above 0 and at most 3600 (how long gpusel waits "
            "for its CUDA probe; default 20)",
        about(Subject::Probe, {{"variable", "GPUSEL_PROBE_TIMEOUT"},
                               {"value", std::string(text)},
                               {"reason", "unreadable"}}));
  }
  return seconds;
}

// Sets the probe's failure: `code` and the text for messages.
void fail(ProbeResult& result, ErrorCode code, std::string reason) {
  result.reason = std::move(reason);
  result.problem = Problem{code, "", 0};
}

// A child that ended with an error: what it reported (see detail::serialise_failure), or that it
// failed without saying why.
void read_child_failure(const std::string& text, ProbeResult& result) {
  if (!detail::parse_failure(text, result.reason, result.problem)) {
    fail(result, ErrorCode::ProbeFailed, "the CUDA probe failed");
  }
}

#ifndef _WIN32
// Waits for `pid` until `deadline`; true when it was reaped (`status` set). A child that
// SIGCHLD's disposition already reaped counts as reaped, with `status` left alone.
bool wait_until(pid_t pid, int& status, std::chrono::steady_clock::time_point deadline) {
  auto pause = std::chrono::microseconds(50);
  for (;;) {
    const pid_t w = detail::wait_child(pid, &status, false);
    if (w == pid) return true;
    if (w < 0 && errno == ECHILD) return true;
    if (w < 0) return false;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::microseconds(10000));
  }
}
#endif

}  // namespace

using detail::parse_devices;

const std::string& probe_helper_when_needed() {
  static const std::string marker("\0when-needed", 12);
  return marker;
}

#ifdef _WIN32
// probe_cuda and default_probe_helper for Windows: the probe in a Job Object (process.hpp).
#include "probe_win.inc"
#else
ProbeResult probe_cuda(const std::string& asked, bool unfiltered) {
  const std::string helper = asked == probe_helper_when_needed() ? default_probe_helper() : asked;
  ProbeResult result;
  const double timeout = probe_timeout();  // a bad value is refused whether or not a probe runs
  if (helper.empty()) {
    fail(result, ErrorCode::ProbeUnavailable,
         "the CUDA probe's helper program (gpusel-probe-cuda) is not installed with libgpusel; set "
         "GPUSEL_PROBE_HELPER to its path");
    return result;
  }
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    fail(result, ErrorCode::ProbeFailed, std::string("pipe: ") + std::strerror(errno));
    return result;
  }
  detail::ChildSpec spec;
  spec.program = helper;
  spec.args = {helper};
  std::vector<std::string> unset = {"GPUSEL_PROBE_PARENT"};
  if (unfiltered) unset.push_back("CUDA_VISIBLE_DEVICES");
  // The child dies with this process (see probe_child_main), which it recognises by this id.
  spec.environment =
      detail::environment_with(unset, {"GPUSEL_PROBE_PARENT=" + std::to_string(getpid())});
  spec.descriptors.emplace_back(out[1], 1);
  // A process group of its own, so that a wedged probe and anything it started can be killed.
  spec.own_group = true;
  const detail::Started started = detail::start_child(std::move(spec));
  const pid_t pid = started.pid;
  close(out[1]);
  if (started.error != 0) {
    close(out[0]);
    fail(result, ErrorCode::ProbeUnavailable,
         "cannot start " + helper + ": " + std::strerror(started.error));
    return result;
  }
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                        std::chrono::duration<double>(timeout));
  bool timed_out = false;
  bool too_much = false;
  std::string text;
  char buf[4096];
  for (;;) {
    const auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) {
      timed_out = true;
      break;
    }
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
    pollfd p{out[0], POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(std::min<long long>(ms, 60000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) break;
    if (ready == 0) continue;
    const ssize_t n = read(out[0], buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > kMaxProbeOutput) {
      too_much = true;
      break;
    }
  }
  close(out[0]);
  int status = 0;
  bool reaped = !timed_out && !too_much && wait_until(pid, status, deadline);
  if (!reaped) {
    timed_out = timed_out || !too_much;
    detail::signal_group(pid, SIGKILL);  // the probe's process group, the probe included
    detail::signal_process(pid, SIGKILL);
    // A process stuck inside the kernel dies only when it leaves it: wait a little, not forever.
    reaped = wait_until(pid, status, Clock::now() + std::chrono::seconds(2));
  }
  if (timed_out || too_much) {
    fail(result, too_much ? ErrorCode::ProbeFailed : ErrorCode::ProbeTimedOut,
         too_much
             ? "the CUDA probe printed more than " + std::to_string(kMaxProbeOutput >> 20) + " MiB"
             : "the CUDA probe did not answer within " + detail::general_number(timeout) +
                   " s (cuInit hung?)");
    if (!reaped) result.reason += "; it could not be stopped (process " + std::to_string(pid) + ")";
    return result;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    read_child_failure(text, result);
    return result;
  }
  auto devices = parse_devices(text);
  if (!devices) {
    fail(result, ErrorCode::ProbeFailed, "the CUDA probe printed something unexpected");
    return result;
  }
  result.ok = true;
  result.devices = std::move(*devices);
  return result;
}
#endif

#ifndef _WIN32
namespace {
// Plain string work: every `run`, `resolve` and `bind` asks where the helper is, and the same
// walk through std::filesystem::path cost five times as many instructions.
std::string folder_of(const std::string& file) {
  const auto slash = file.find_last_of('/');
  if (slash == std::string::npos) return "";
  return slash == 0 ? "/" : file.substr(0, slash);
}

std::string within(const std::string& folder, const std::string& name) {
  return folder.empty() || folder.back() == '/' ? folder + name : folder + "/" + name;
}

bool runnable_file(const std::string& file) {
  struct stat st {};
  return access(file.c_str(), X_OK) == 0 && stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}
}  // namespace

std::string default_probe_helper() {
  if (auto h = gpusel::detail::env_value("GPUSEL_PROBE_HELPER"); h && !h->empty()) return *h;
  // Where this code lives: libgpusel.so, or the program the static library is linked into.
  std::vector<std::string> homes;
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&default_probe_helper), &info) != 0 &&
      info.dli_fname != nullptr && info.dli_fname[0] == '/') {
    homes.push_back(folder_of(info.dli_fname));
  }
  char exe[4096];
  if (const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe);
      n > 0 && n < ssize_t(sizeof exe)) {
    homes.push_back(folder_of(std::string(exe, std::size_t(n))));
  }
  // Beside it (a Python package's folder), else the installation's libexec/gpusel/ from its lib/,
  // lib/<arch>/ or bin/ (the build tree has the same shape), else where this build installs it
  // from its lib folder.
  const std::string name = detail::kProbeHelperName;
  const std::string libexec = std::string("libexec/gpusel/") + name;
  for (const auto& home : homes) {
    for (const auto& candidate : {within(home, name), within(folder_of(home), libexec),
                                  within(folder_of(folder_of(home)), libexec),
                                  within(within(home, GPUSEL_PROBE_HELPER_FROM_LIBDIR), name)}) {
      if (runnable_file(candidate)) return candidate;
    }
  }
  return "";
}
#endif

GPUSEL_END_NAMESPACE

namespace gpusel::detail {
namespace {

std::string field_safe(std::string s) {
  for (char& c : s) {
    if (c == '\t' || c == '\n') c = ' ';
  }
  return s;
}

// A whole field as a number in decimal ASCII, nothing before or after it.
template <typename T>
bool parse_number(const std::string& field, T& value) {
  const char* end = field.data() + field.size();
  auto [ptr, ec] = std::from_chars(field.data(), end, value);
  return ec == std::errc() && ptr == end && !field.empty();
}

}  // namespace

std::string serialise_devices(const std::vector<gpusel::CudaDevice>& devices) {
  std::string out;
  for (const gpusel::CudaDevice& d : devices) {
    out += std::to_string(d.cuda_ordinal) + '\t' + field_safe(d.uuid) + '\t' +
           field_safe(d.parent_uuid) + '\t' + field_safe(d.pci_bus_id) + '\t' +
           std::to_string(d.memory_total_bytes) + '\t' + std::to_string(d.cc_major) + '\t' +
           std::to_string(d.cc_minor) + '\t' + std::to_string(d.sm_count) + '\t' +
           field_safe(d.name) + '\n';
  }
  return out;
}

std::string serialise_failure(const std::string& message, const Problem& problem) {
  return "error\t" + std::to_string(static_cast<int>(problem.code)) + '\t' +
         field_safe(problem.call) + '\t' + std::to_string(problem.result) + '\t' +
         field_safe(message) + '\n';
}

bool parse_failure(const std::string& text, std::string& message, Problem& problem) {
  constexpr std::string_view kTag = "error\t";
  if (text.rfind(kTag, 0) != 0) return false;
  std::vector<std::string> f;
  std::size_t start = kTag.size();
  for (int i = 0; i < 3; ++i) {
    const std::size_t tab = text.find('\t', start);
    if (tab == std::string::npos) return false;
    f.push_back(text.substr(start, tab - start));
    start = tab + 1;
  }
  int code = 0;
  long long result = 0;
  if (!parse_number(f[0], code) || !parse_number(f[2], result) || code <= 0) return false;
  std::string rest = text.substr(start);
  while (!rest.empty() && (rest.back() == '\n' || rest.back() == '\r')) rest.pop_back();
  if (rest.empty() || rest.find('\n') != std::string::npos) return false;
  message = std::move(rest);
  problem = Problem{static_cast<ErrorCode>(code), f[1], result};
  return true;
}

std::optional<std::vector<gpusel::CudaDevice>> parse_devices(const std::string& text) {
  std::vector<gpusel::CudaDevice> out;
  std::size_t at = 0;
  while (const std::optional<std::string_view> next = detail::next_line(text, at)) {
    const std::string line(*next);
    std::vector<std::string> f;
    std::size_t start = 0;
    for (std::size_t tab; (tab = line.find('\t', start)) != std::string::npos; start = tab + 1) {
      f.push_back(line.substr(start, tab - start));
    }
    f.push_back(line.substr(start));
    if (f.size() != 9) return std::nullopt;
    gpusel::CudaDevice d;
    if (!parse_number(f[0], d.cuda_ordinal) || !parse_number(f[4], d.memory_total_bytes) ||
        !parse_number(f[5], d.cc_major) || !parse_number(f[6], d.cc_minor) ||
        !parse_number(f[7], d.sm_count)) {
      return std::nullopt;
    }
    // CUDA's ordinals count from 0, one a line.
    if (d.cuda_ordinal != static_cast<int>(out.size())) return std::nullopt;
    d.uuid = f[1];
    d.parent_uuid = f[2];
    d.pci_bus_id = f[3];
    d.name = f[8];
    out.push_back(std::move(d));
  }
  return out;
}

int probe_child_main() {
  // Die with the process that started this probe (it waits a bounded time, and may itself be
  // stopped meanwhile), even while cuInit hangs. It passes its process id, so that a parent that
  // died before the prctl is noticed too. (Windows: the parent's Job Object kills the probe with
  // it, see probe_win.inc.)
#ifdef _WIN32
  _setmode(_fileno(stdout), _O_BINARY);  // the parent parses "\n"-ended lines, not "\r\n"
#else
  if (const auto parent = env_value("GPUSEL_PROBE_PARENT"); parent) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (std::to_string(getppid()) != *parent) return 1;
  }
#endif
  // Written through stdio: no <iostream> in the library (its static set-up costs every program
  // that links it statically 50,000 instructions).
  const auto answer = [](const std::string& text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  };
  try {
    answer(serialise_devices(cuda_devices()));
    return 0;
  } catch (const Error& e) {
    answer(serialise_failure(e.text(), e.problem()));
    return 1;
  } catch (const std::exception& e) {
    answer(serialise_failure(e.what(), Problem{ErrorCode::Unspecified, "", 0}));
    return 1;
  }
}

std::optional<std::vector<int>> cuda_order_from(const std::vector<GpuInfo>& gpus,
                                                const std::vector<CudaDevice>& devices) {
  std::vector<int> order;
  for (const CudaDevice& d : devices) {
    int found = -1;
    for (std::size_t g = 0; g < gpus.size(); ++g) {
      if (detail::same_entry(gpus[g].uuid, d.parent_uuid)) found = static_cast<int>(g);
    }
    if (found < 0 || gpus[static_cast<std::size_t>(found)].failed()) return std::nullopt;
    // MIG devices of one GPU come together: the GPU takes one place.
    if (!order.empty() && order.back() == found) continue;
    for (int seen : order) {
      if (seen == found) return std::nullopt;
    }
    order.push_back(found);
  }
  const auto working = static_cast<std::size_t>(
      std::count_if(gpus.begin(), gpus.end(), [](const GpuInfo& g) { return !g.failed(); }));
  if (order.size() != working) return std::nullopt;
  return order;
}

std::vector<GpuInfo> gpus_from_cuda(const std::vector<CudaDevice>& devices) {
  std::vector<GpuInfo> gpus;
  for (const CudaDevice& d : devices) {
    const std::string& uuid = d.parent_uuid.empty() ? d.uuid : d.parent_uuid;
    auto it = std::find_if(gpus.begin(), gpus.end(),
                           [&](const GpuInfo& g) { return detail::same_entry(g.uuid, uuid); });
    if (it == gpus.end()) {
      GpuInfo g;
      g.uuid = uuid;
      g.name = d.name;
      g.pci_bus_id = detail::normalise_bus_id(d.pci_bus_id);
      g.cc_major = d.cc_major;
      g.cc_minor = d.cc_minor;
      g.memory_total_bytes = d.memory_total_bytes;
      gpus.push_back(std::move(g));
      it = std::prev(gpus.end());
    }
    if (!detail::same_entry(d.uuid, uuid)) {  // a MIG device of that GPU
      it->mig_enabled = true;
      it->migs.push_back(MigDevice{d.uuid, 0, 0, d.name, d.memory_total_bytes});
    }
  }
  std::stable_sort(gpus.begin(), gpus.end(),
                   [](const GpuInfo& a, const GpuInfo& b) { return a.pci_bus_id < b.pci_bus_id; });
  for (std::size_t i = 0; i < gpus.size(); ++i) gpus[i].index = static_cast<unsigned>(i);
  return gpus;
}

}  // namespace gpusel::detail
