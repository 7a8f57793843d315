// Starting and supervising workers on Windows: spawning, pipes, console events and waiting. The
// rules (the workers' environments, --tag-output's tagging, the stop policy, the summary) are
// launch_core.cpp's, shared with POSIX (launch.cpp); include/gpusel/launch.hpp says what they are.
// - each worker is started by the platform layer (process.hpp: CreateProcessW, suspended, then
//   resumed once it is in its Job Object) in a process group of its own (CREATE_NEW_PROCESS_GROUP);
// - each worker runs in a Job Object with JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE: when gpusel ends,
//   however it ends, Windows kills every worker and everything it started;
// - Ctrl-C and Ctrl-Break reach gpusel (a console control handler) and are forwarded to every
//   worker's process group as CTRL_BREAK_EVENT (a console cannot address Ctrl-C to one group);
//   where POSIX sends SIGTERM after a worker fails, the others get CTRL_BREAK_EVENT too; after
//   the grace period what still runs is ended with TerminateJobObject (exit code 1);
// - exit status: 0 when all succeed, else the first failing worker's exit code as Windows
//   reports it (a crash is an NTSTATUS such as 0xC0000005, passed on unchanged and named in the
//   summary); after Ctrl-C 130 and after Ctrl-Break 149 (128 + SIGINT 2 / SIGBREAK 21, the
//   numbers of the C runtime's signal.h), whatever the workers did.
// - --tag-output: a reader thread per stream feeds its tagger; the supervision loop writes a
//   partial line once it is due (200 ms), as on POSIX.
#include <winsock2.h>
// winsock2.h before windows.h
#include "win.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <cwctype>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "gpusel/error.hpp"
#include "gpusel/launch.hpp"
#include "gpusel/resolution.hpp"
#include "gpusel/spec.hpp"
#include "gpusel_detail.hpp"
#include "launch_core.hpp"
#include "launch_detail.hpp"
#include "process.hpp"
#include "text.hpp"

GPUSEL_BEGIN_NAMESPACE
namespace {

namespace win = detail::win;
using Clock = detail::LaunchClock;

constexpr int kSigInt = 2;     // the C runtime's SIGINT
constexpr int kSigBreak = 21;  // the C runtime's SIGBREAK

// The console control event gpusel received (kSigInt / kSigBreak), and an event to wake the loop.
std::atomic<int> g_control{0};
HANDLE g_wake = nullptr;
// Set while gpusel sends CTRL_BREAK_EVENT to its workers: an event arriving then may be its own
// (Windows sends an event for a process group that no longer exists to the whole console), not
// the user's, and is ignored.
std::atomic<bool> g_forwarding{false};

BOOL WINAPI on_control(DWORD type) {
  int sig = 0;
  if (type == CTRL_C_EVENT) sig = kSigInt;
  if (type == CTRL_BREAK_EVENT) sig = kSigBreak;
  if (sig == 0) return FALSE;  // close, logoff, shutdown: the default (the job kills the workers)
  if (g_forwarding.load()) return TRUE;
  int expected = 0;
  g_control.compare_exchange_strong(expected, sig);
  if (g_wake != nullptr) SetEvent(g_wake);
  return TRUE;
}

bool regular_file(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec);
}

// `p` itself when it names a file, else `p` with .exe or .com added when it has no extension.
std::optional<std::filesystem::path> with_extension(const std::filesystem::path& p) {
  if (regular_file(p)) return p;
  if (!p.has_extension()) {
    for (const wchar_t* ext : {L".exe", L".com"}) {
      std::filesystem::path q = p;
      q += ext;
      if (regular_file(q)) return q;
    }
  }
  return std::nullopt;
}

int free_port() {
  WSADATA data{};
  if (WSAStartup(MAKEWORD(2, 2), &data) != 0) return 29500;
  int port = 29500;
  SOCKET s = socket(AF_INET, SOCK_STREAM, IPPROTO_TCP);
  if (s != INVALID_SOCKET) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int len = sizeof addr;
    if (bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
        getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port = ntohs(addr.sin_port);
    }
    closesocket(s);
  }
  WSACleanup();
  return port;
}

std::mutex g_output;

void write_handle(HANDLE h, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    DWORD n = 0;
    const DWORD chunk = static_cast<DWORD>(std::min<std::size_t>(text.size() - done, 1u << 20));
    if (!WriteFile(h, text.data() + done, chunk, &n, nullptr) || n == 0) return;
    done += n;
  }
}

void emit(HANDLE out, const std::string& text) {
  if (text.empty()) return;
  std::lock_guard<std::mutex> lock(g_output);
  write_handle(out, text);
}

// --tag-output: one worker stream, tagged. Its reader thread feeds the tagger; the supervision
// loop writes the partial line it holds once due. The lock is taken before g_output.
struct TaggedStream {
  std::mutex lock;
  detail::LineTagger tagger{std::string()};
  HANDLE out = nullptr;  // gpusel's stdout or stderr

  void flush_due(Clock::time_point now) {
    std::lock_guard<std::mutex> hold(lock);
    emit(out, tagger.flush_due(now));
  }
  std::optional<Clock::time_point> due() {
    std::lock_guard<std::mutex> hold(lock);
    return tagger.due();
  }
};

// The reader thread: copies the worker's stream `in` through its tagger until the pipe's end.
void read_stream(HANDLE in, TaggedStream& s) {
  char buf[65536];
  for (;;) {
    DWORD got = 0;
    if (!ReadFile(in, buf, sizeof buf, &got, nullptr) || got == 0) break;
    std::lock_guard<std::mutex> hold(s.lock);
    emit(s.out, s.tagger.feed({buf, got}, Clock::now()));
  }
  std::lock_guard<std::mutex> hold(s.lock);
  emit(s.out, s.tagger.flush());
}

struct Worker {
  int rank = 0;
  DWORD pid = 0;
  win::Handle job;
  detail::Child process;
  bool running = false;
  DWORD code = 0;
  TaggedStream streams[2];  // stdout, stderr (--tag-output)
  std::thread readers[2];
};

// Undone however launch_workers ends: workers still running are killed (their jobs terminated),
// reader threads joined, the control handler removed.
struct Supervision {
  explicit Supervision(std::size_t n) : workers(n) {}
  Supervision(const Supervision&) = delete;
  Supervision& operator=(const Supervision&) = delete;
  ~Supervision() {
    // Every job, not only those of running workers: a finished worker's leftover child may hold
    // its output pipe open, and the reader threads joined below would wait for it forever.
    for (Worker& w : workers) {
      if (w.job) detail::terminate_job(w.job.get(), 1);
      if (w.running && w.process) w.process.wait(5000);
    }
    for (Worker& w : workers) {
      for (std::thread& t : w.readers) {
        if (t.joinable()) t.join();
      }
    }
    if (handler) SetConsoleCtrlHandler(on_control, FALSE);
    g_wake = nullptr;
  }
  std::vector<Worker> workers;
  win::Handle wake;
  bool handler = false;
  std::atomic<int> readers_open{0};  // --tag-output reader threads not yet at their pipe's end
};

std::string inheritable(HANDLE h, win::Handle& owner) {
  HANDLE copy = nullptr;
  if (h == nullptr || h == INVALID_HANDLE_VALUE ||
      !DuplicateHandle(GetCurrentProcess(), h, GetCurrentProcess(), &copy, 0, TRUE,
                       DUPLICATE_SAME_ACCESS)) {
    return "";
  }
  owner = win::Handle(copy);
  return "ok";
}

}  // namespace

namespace {

// Windows starts programs (PE files) only: a batch file would need cmd.exe (and its quoting
// rules differ), a script its interpreter. Refused before any worker starts, with the remedy.
std::string runnable(const std::filesystem::path& p, const std::string& name) {
  std::wstring ext = p.extension().wstring();
  for (wchar_t& c : ext) c = static_cast<wchar_t>(std::towlower(c));
  if (ext == L".bat" || ext == L".cmd") {
    throw bad_input("run: " + detail::quote_value(name) +
                    " is a batch file, which Windows runs only through cmd.exe; run it as: "
                    "-- cmd /c " +
                    name + "; no worker was started");
  }
  char magic[2] = {0, 0};
  win::Handle f(CreateFileW(p.c_str(), GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE, nullptr,
                            OPEN_EXISTING, 0, nullptr));
  DWORD got = 0;
  if (f && ReadFile(f.get(), magic, 2, &got, nullptr) &&
      (got < 2 || magic[0] != 'M' || magic[1] != 'Z')) {
    throw bad_input("run: " + detail::quote_value(name) +
                    " is not a Windows program (.exe); run a script through its interpreter, as "
                    "in: -- python " +
                    name + "; no worker was started");
  }
  return win::narrow(p.wstring());
}

}  // namespace

std::string find_program(const std::string& name) {
  if (name.empty())
    throw bad_input(detail::reader_text(
        "run: no command given; put it after --, as in: gpusel run --gpu 0,1 -- python train.py",
        "no program to start: LaunchOptions::command is empty; its first word names the program"));
  const std::filesystem::path given(win::widen(name));
  if (name.find_first_of("/\\:") != std::string::npos) {
    if (auto p = with_extension(given)) return runnable(*p, name);
    std::error_code ec;
    throw bad_input(
        "run: " + detail::quote_value(name) +
        (std::filesystem::exists(given, ec) ? " is not an executable file" : " does not exist") +
        "; no worker was started");
  }
  // PATH only: unlike cmd.exe, never the current directory first.
  const std::wstring dirs = win::environment(L"PATH").value_or(L"");
  std::size_t start = 0;
  while (start <= dirs.size()) {
    std::size_t semi = dirs.find(L';', start);
    if (semi == std::wstring::npos) semi = dirs.size();
    const std::wstring dir = dirs.substr(start, semi - start);
    if (!dir.empty()) {
      if (auto p = with_extension(std::filesystem::path(dir) / given)) return runnable(*p, name);
    }
    start = semi + 1;
  }
  throw bad_input("run: command " + detail::quote_value(name) + " not found in PATH=" +
                  detail::quote_value(win::narrow(dirs)) + "; no worker was started");
}

namespace {

// "pid N `program`", for the line that stops the job.
std::string describe_process(HANDLE process, DWORD pid) {
  std::string out = "pid " + std::to_string(pid);
  wchar_t path[MAX_PATH];
  DWORD size = MAX_PATH;
  if (QueryFullProcessImageNameW(process, 0, path, &size))
    out += " `" + detail::printable(win::narrow(std::wstring(path, size))) + "`";
  return out;
}

// Who a process NVML lists is: the job's when it is in a worker's Job Object, which holds every
// process the worker started, directly or not, whether its parent still runs or not.
template <typename Workers>
detail::ProcessFacts process_facts(unsigned pid, const Workers& workers) {
  detail::ProcessFacts facts;
  // IsProcessInJob wants PROCESS_QUERY_INFORMATION where PROCESS_QUERY_LIMITED_INFORMATION is
  // not enough (wine); the limited right alone still names the process.
  win::Handle process(
      OpenProcess(PROCESS_QUERY_INFORMATION | PROCESS_QUERY_LIMITED_INFORMATION, FALSE, pid));
  if (!process) process = win::Handle(OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, pid));
  if (!process) {
    // Access denied: another user's process, which is no worker's.
    facts.exists = GetLastError() != ERROR_INVALID_PARAMETER;
    return facts;
  }
  facts.exists = true;
  for (const auto& w : workers) {
    BOOL in = FALSE;
    if (!w.job || !IsProcessInJob(process.get(), w.job.get(), &in) || !in) continue;
    facts.member = detail::JobMember{w.rank, false};
    facts.description = describe_process(process.get(), pid);
    break;
  }
  return facts;
}

// The standard handles every worker gets: NUL for input, gpusel's output and error (inheritable
// copies) unless --tag-output gives each worker pipes of its own.
struct StdHandles {
  win::Handle null_in, out, err;
};

// Starts rank `r` in a Job Object of its own (suspended until it is in it), with its environment
// `env`, inheriting its standard handles and nothing else gpusel holds; with --tag-output, a
// reader thread per stream.
void start_worker(const LaunchOptions& options, Supervision& sup, std::size_t r,
                  win::Environment env, const detail::WorkerEnvironments& vars,
                  const std::vector<std::string>& args, const std::string& program,
                  const StdHandles& std_handles) {
  Worker& w = sup.workers[r];
  w.rank = static_cast<int>(r);
  for (const auto& [name, value] : vars.ranks[r]) env.set(name, value);

  win::Handle pipe_read[2], pipe_write[2];
  if (options.tag_output) {
    for (int s = 0; s < 2; ++s) {
      SECURITY_ATTRIBUTES sa{sizeof(SECURITY_ATTRIBUTES), nullptr, TRUE};
      HANDLE rd = nullptr, wr = nullptr;
      if (!CreatePipe(&rd, &wr, &sa, 0))
        throw failure("cannot start worker " + std::to_string(r) +
                      ": CreatePipe: " + win::error_text(GetLastError()));
      pipe_read[s] = win::Handle(rd);
      pipe_write[s] = win::Handle(wr);
      SetHandleInformation(rd, HANDLE_FLAG_INHERIT, 0);
    }
  }
  detail::ChildSpec spec;
  spec.program = program;
  spec.args = args;
  spec.own_group = true;
  spec.environment = std::move(env);
  spec.std_handles = detail::ChildSpec::StdHandles{
      std_handles.null_in.get(), options.tag_output ? pipe_write[0].get() : std_handles.out.get(),
      options.tag_output ? pipe_write[1].get() : std_handles.err.get()};
  // The worker inherits its own standard handles and nothing else gpusel holds; where the list
  // cannot be made, every inheritable handle.
  spec.std_handles_only = true;
  w.job = win::kill_on_close_job();
  if (!w.job)
    throw failure("cannot start worker " + std::to_string(r) +
                  ": CreateJobObject: " + win::error_text(GetLastError()));
  spec.job = w.job.get();
  detail::Started started = detail::start_child(spec);
  if (started.failed == detail::Started::Step::create_process) {
    throw failure("rank " + std::to_string(r) + ": cannot run " + program + ": " +
                  win::error_text(started.error));
  }
  w.process = std::move(started.child);
  w.pid = w.process.pid();
  w.running = true;
  if (started.failed == detail::Started::Step::join_job) {
    throw failure("cannot start worker " + std::to_string(r) +
                  ": AssignProcessToJobObject: " + win::error_text(started.error));
  }
  if (options.tag_output) {
    HANDLE outs[2] = {GetStdHandle(STD_OUTPUT_HANDLE), GetStdHandle(STD_ERROR_HANDLE)};
    for (int s = 0; s < 2; ++s) {
      pipe_write[s].reset();
      w.streams[s].tagger = detail::LineTagger(detail::tag_prefix(r));
      w.streams[s].out = outs[s];
      HANDLE rd = pipe_read[s].get();
      ++sup.readers_open;
      w.readers[s] = std::thread([rd, stream = &w.streams[s], open = &sup.readers_open,
                                  owner = std::make_shared<win::Handle>(std::move(pipe_read[s]))] {
        read_stream(rd, *stream);
        --*open;
      });
    }
  }
}

// The supervision of started workers to the job's end, then the summary: the loop waits for an
// event (a worker's end, Ctrl-C, the next timer) and hands each to the StopPolicy and the
// PlacementCheck (launch_core), which decide; this file acts.
int supervise(const LaunchOptions& options, const detail::JobPlan& job, Supervision& sup) {
  const std::size_t n = job.workers;
  // Only to workers still running: the group of one that has ended may be gone, and Windows then
  // sends the event to every process on the console, gpusel included.
  auto break_workers = [&] {
    g_forwarding = true;
    for (Worker& w : sup.workers) {
      if (w.running && w.process.running()) detail::break_group(w.pid);
    }
    // Console control events are delivered on a thread of their own, a moment later.
    Sleep(50);
    g_forwarding = false;
  };
  // Who failed first, the user's event, and when to terminate what is left (launch_core.hpp).
  detail::StopPolicy policy(n, job.grace);
  // Partial lines that are due are written; the loop wakes for the next one, or after 20 ms.
  auto flush_due_lines = [&] {
    std::optional<Clock::time_point> next;
    if (!options.tag_output) return next;
    const Clock::time_point now = Clock::now();
    for (Worker& w : sup.workers) {
      for (TaggedStream& stream : w.streams) {
        stream.flush_due(now);
        if (const auto due = stream.due()) next = next ? std::min(*next, *due) : *due;
      }
    }
    return next;
  };
  auto wait_ms = [](std::optional<Clock::time_point> until) -> DWORD {
    if (!until) return 20;
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(*until - Clock::now()).count();
    return static_cast<DWORD>(std::clamp<long long>(ms, 0, 20));
  };
  // The placement check: every process in a worker's Job Object, on its worker's GPU.
  detail::PlacementCheck check(options, job, Clock::now());
  while (policy.running() > 0) {
    std::optional<Clock::time_point> wake = flush_due_lines();
    if (const auto kill_at = policy.kill_at()) wake = wake ? std::min(*wake, *kill_at) : *kill_at;
    if (check.looking()) wake = wake ? std::min(*wake, check.next()) : check.next();
    WaitForSingleObject(sup.wake.get(), wait_ms(wake));
    if (const int sig = g_control.load();
        sig != 0 && policy.stop_signal() == 0 && policy.user_signal(sig, Clock::now())) {
      break_workers();
    }
    for (Worker& w : sup.workers) {
      if (!w.running || !w.process.wait(0)) continue;
      w.code = w.process.exit_code(w.code);
      w.running = false;
      if (policy.worker_ended(static_cast<std::size_t>(w.rank), w.code != 0, Clock::now()))
        break_workers();
    }
    if (check.due(Clock::now())) {
      const std::string note =
          check.look([&](unsigned pid) { return process_facts(pid, sup.workers); }, Clock::now());
      if (!note.empty()) {
        if (options.on_note) {
          options.on_note(note);
        } else {
          emit(GetStdHandle(STD_ERROR_HANDLE), "gpusel: note: " + note + "\n");
        }
      }
      if (!check.violation().empty() && policy.placement_violation(check.violation(), Clock::now()))
        break_workers();
    }
    if (policy.kill_due(Clock::now())) {
      for (Worker& w : sup.workers) {
        if (!w.running) continue;
        policy.count_killed(1);
        detail::terminate_job(w.job.get(), 1);
      }
    }
  }
  // Every worker has ended; output still held by their children gets a moment (200 ms, as on
  // POSIX), no more: then their jobs end what they started, which closes the pipes, and the
  // readers finish.
  const Clock::time_point drain_until = Clock::now() + std::chrono::milliseconds(200);
  while (sup.readers_open.load() > 0 && Clock::now() < drain_until) {
    flush_due_lines();
    Sleep(5);
  }
  for (Worker& w : sup.workers) {
    if (w.job) detail::terminate_job(w.job.get(), 1);
  }
  for (Worker& w : sup.workers) {
    for (std::thread& t : w.readers) {
      if (t.joinable()) t.join();
    }
  }
  for (Worker& w : sup.workers) w.job.reset();

  detail::EndWords words;
  if (const auto bad = policy.first_failure()) {
    const DWORD code = sup.workers[*bad].code;
    words.failed_gpu = detail::gpu_of(options, job, *bad);
    words.failed_how = "ended with " + win::exit_code_text(code);
    words.failed_code = static_cast<int>(code);
  }
  words.signal = policy.stop_signal() == kSigInt ? "Ctrl-C" : "Ctrl-Break";
  words.forwarded = "CTRL_BREAK_EVENT";
  words.killed_one = "was terminated";
  words.killed_several = "were terminated";
  const detail::Summary summary = detail::summarize(policy, words);
  emit(GetStdHandle(STD_ERROR_HANDLE), summary.text);
  return summary.exit_code;
}

int run_workers(const LaunchOptions& options, const std::string& program) {
  const detail::JobPlan job = detail::plan_job(options);
  const std::size_t n = job.workers;
  for (const auto& cpus : options.cpus) {
    if (!cpus.empty())
      throw failure(
          "run: binding workers to CPUs is not supported on Windows yet; no worker was started");
  }

  win::Environment base = win::Environment::current();
  // The user's MASTER_ADDR/MASTER_PORT, as in base (the Win32 environment), are kept.
  const detail::WorkerEnvironments vars = detail::worker_environments(
      options, job,
      [&base](const std::string& name) -> std::optional<std::string> {
        const auto it = base.vars.find(win::widen(name));
        if (it == base.vars.end()) return std::nullopt;
        return win::narrow(it->second.second);
      },
      free_port);
  for (const std::string& name : vars.removed) base.unset(name);
  for (const auto& [name, value] : vars.job) base.set(name, value);

  std::vector<std::string> args = options.command;
  args[0] = program;

  Supervision sup(n);
  sup.wake = win::Handle(CreateEventW(nullptr, FALSE, FALSE, nullptr));
  g_wake = sup.wake.get();
  g_control = 0;
  sup.handler = SetConsoleCtrlHandler(on_control, TRUE) != 0;

  StdHandles std_handles;
  std_handles.null_in =
      win::Handle(CreateFileW(L"NUL", GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE, nullptr,
                              OPEN_EXISTING, 0, nullptr));
  if (std_handles.null_in)
    SetHandleInformation(std_handles.null_in.get(), HANDLE_FLAG_INHERIT, HANDLE_FLAG_INHERIT);
  inheritable(GetStdHandle(STD_OUTPUT_HANDLE), std_handles.out);
  inheritable(GetStdHandle(STD_ERROR_HANDLE), std_handles.err);

  for (std::size_t r = 0; r < n; ++r)
    start_worker(options, sup, r, base, vars, args, program, std_handles);
  if (options.on_started) {
    std::vector<int> pids;
    for (const Worker& w : sup.workers) pids.push_back(static_cast<int>(w.pid));
    options.on_started(pids);
  }
  return supervise(options, job, sup);
}

}  // namespace

int launch_workers(const LaunchOptions& options) {
  return detail::launch_program(options, find_program(options.command.at(0)));
}

int launch_workers(const LaunchOptions& options, const std::string& program) {
  return detail::launch_program(options, program);
}

GPUSEL_END_NAMESPACE

namespace gpusel::detail {

int launch_program(const LaunchOptions& options, const std::string& program) {
  const int status = gpusel::run_workers(options, program);
  if (options.on_ended) options.on_ended();  // every worker's Job Object has emptied
  return status;
}

}  // namespace gpusel::detail
