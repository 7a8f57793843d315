// Starting and supervising workers on Windows (launch.cpp is the POSIX version; the rules are the
// same, include/gpusel/launch.hpp):
// - each worker is started with CreateProcessW (suspended, then resumed once it is in its Job
//   Object) in a process group of its own (CREATE_NEW_PROCESS_GROUP);
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
// - --tag-output: a reader thread per stream; a line is written once complete (or at 64 KiB, or at
//   the end), so unlike POSIX a partial line is not shown after 200 ms.
#include <winsock2.h>
// winsock2.h before windows.h
#include "win.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <cwctype>
#include <filesystem>
#include <mutex>
#include <thread>

#include "gpusel/error.hpp"
#include "gpusel/launch.hpp"
#include "gpusel/resolve.hpp"
#include "gpusel/spec.hpp"
#include "launch_detail.hpp"
#include "text.hpp"

GPUSEL_BEGIN_NAMESPACE
namespace {

namespace win = detail::win;
using Clock = std::chrono::steady_clock;

constexpr int kSigInt = 2;     // the C runtime's SIGINT
constexpr int kSigBreak = 21;  // the C runtime's SIGBREAK
constexpr std::size_t kMaxPartial = 64 * 1024;

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

// --tag-output: copies a worker's stream to `out`, each line prefixed.
void tag_stream(HANDLE in, HANDLE out, std::string prefix) {
  std::string pending;
  char buf[65536];
  auto emit = [&](std::string text) {
    std::lock_guard<std::mutex> lock(g_output);
    write_handle(out, text);
  };
  for (;;) {
    DWORD got = 0;
    if (!ReadFile(in, buf, sizeof buf, &got, nullptr) || got == 0) break;
    std::string out_text;
    for (DWORD i = 0; i < got; ++i) {
      pending += buf[i];
      if (buf[i] == '\n' || pending.size() >= kMaxPartial) {
        out_text += prefix + pending + (buf[i] == '\n' ? "" : "\n");
        pending.clear();
      }
    }
    if (!out_text.empty()) emit(out_text);
  }
  if (!pending.empty()) emit(prefix + pending + "\n");
}

struct Worker {
  int rank = 0;
  DWORD pid = 0;
  win::Handle job, process;
  bool running = false;
  DWORD code = 0;
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
      if (w.job) TerminateJobObject(w.job.get(), 1);
      if (w.running && w.process) WaitForSingleObject(w.process.get(), 5000);
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

// CreateProcessW runs programs (PE files) only: a batch file would need cmd.exe (and its quoting
// rules differ), a script its interpreter. Refused before any worker starts, with the remedy.
std::string runnable(const std::filesystem::path& p, const std::string& name) {
  std::wstring ext = p.extension().wstring();
  for (wchar_t& c : ext) c = static_cast<wchar_t>(std::towlower(c));
  if (ext == L".bat" || ext == L".cmd") {
    throw bad_input("run: " + quote_value(name) +
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
    throw bad_input("run: " + quote_value(name) +
                    " is not a Windows program (.exe); run a script through its interpreter, as "
                    "in: -- python " +
                    name + "; no worker was started");
  }
  return win::narrow(p.wstring());
}

}  // namespace

std::string find_program(const std::string& name) {
  if (name.empty())
    throw bad_input(
        "run: no command given; put it after --, as in: gpusel run --gpu 0,1 -- python train.py");
  const std::filesystem::path given(win::widen(name));
  if (name.find_first_of("/\\:") != std::string::npos) {
    if (auto p = with_extension(given)) return runnable(*p, name);
    std::error_code ec;
    throw bad_input(
        "run: " + quote_value(name) +
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
  throw bad_input("run: command " + quote_value(name) + " not found in PATH=" +
                  quote_value(win::narrow(dirs)) + "; no worker was started");
}

namespace {

int run_workers(const LaunchOptions& options, const std::string& program) {
  const std::size_t n = options.gpus.size();
  if (!std::isfinite(options.grace_seconds) || options.grace_seconds < 0) {
    throw bad_input("run: the grace period must be a finite number of seconds, 0 or more, not " +
                    detail::seconds_text(options.grace_seconds));
  }
  for (const auto& cpus : options.cpus) {
    if (!cpus.empty())
      throw failure(
          "run: binding workers to CPUs is not supported on Windows yet; no worker was started");
  }

  win::Environment base = win::Environment::current();
  for (const char* own :
       {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GPUSEL_GPUS", "GPUSEL_GPU"})
    base.unset(own);
  if (options.set_visible != SetVisible::None) base.unset("CUDA_VISIBLE_DEVICES");
  // The user's MASTER_ADDR/MASTER_PORT, as in base (the Win32 environment), are kept.
  if (!base.vars.contains(L"MASTER_ADDR")) base.set("MASTER_ADDR", "127.0.0.1");
  if (!base.vars.contains(L"MASTER_PORT")) base.set("MASTER_PORT", std::to_string(free_port()));
  base.set("WORLD_SIZE", std::to_string(n));
  base.set("LOCAL_WORLD_SIZE", std::to_string(n));
  base.set("GPUSEL_GPUS", join_entries(options.gpus));
  if (options.set_visible == SetVisible::Job)
    base.set("CUDA_VISIBLE_DEVICES", join_entries(options.gpus));

  std::vector<std::string> args = options.command;
  args[0] = program;
  std::wstring command_line = win::command_line(args);
  const std::wstring exe = win::widen(program);
  const Clock::duration grace = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(std::min(options.grace_seconds, 1e9)));

  Supervision sup(n);
  sup.wake = win::Handle(CreateEventW(nullptr, FALSE, FALSE, nullptr));
  g_wake = sup.wake.get();
  g_control = 0;
  sup.handler = SetConsoleCtrlHandler(on_control, TRUE) != 0;

  win::Handle null_in(CreateFileW(L"NUL", GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE, nullptr,
                                  OPEN_EXISTING, 0, nullptr));
  if (null_in) SetHandleInformation(null_in.get(), HANDLE_FLAG_INHERIT, HANDLE_FLAG_INHERIT);
  win::Handle std_out, std_err;
  inheritable(GetStdHandle(STD_OUTPUT_HANDLE), std_out);
  inheritable(GetStdHandle(STD_ERROR_HANDLE), std_err);

  for (std::size_t r = 0; r < n; ++r) {
    Worker& w = sup.workers[r];
    w.rank = static_cast<int>(r);
    win::Environment env = base;
    env.set("RANK", std::to_string(r));
    env.set("LOCAL_RANK", std::to_string(r));
    env.set("GPUSEL_GPU", options.gpus[r]);
    if (options.set_visible == SetVisible::Own) env.set("CUDA_VISIBLE_DEVICES", options.gpus[r]);
    std::wstring block = env.block();

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
    STARTUPINFOEXW six{};
    six.StartupInfo.cb = sizeof six;
    STARTUPINFOW& si = six.StartupInfo;
    si.dwFlags = STARTF_USESTDHANDLES;
    si.hStdInput = null_in.get();
    si.hStdOutput = options.tag_output ? pipe_write[0].get() : std_out.get();
    si.hStdError = options.tag_output ? pipe_write[1].get() : std_err.get();
    // The worker inherits its own standard handles and nothing else gpusel holds
    // (PROC_THREAD_ATTRIBUTE_HANDLE_LIST); where the list cannot be made, every inheritable handle.
    std::vector<HANDLE> inherit;
    for (HANDLE h : {si.hStdInput, si.hStdOutput, si.hStdError}) {
      if (h != nullptr && std::find(inherit.begin(), inherit.end(), h) == inherit.end())
        inherit.push_back(h);
    }
    SIZE_T attr_size = 0;
    InitializeProcThreadAttributeList(nullptr, 1, 0, &attr_size);
    std::vector<char> attr_buf(attr_size);
    auto* attrs = reinterpret_cast<LPPROC_THREAD_ATTRIBUTE_LIST>(attr_buf.data());
    const bool attrs_made = !inherit.empty() && attr_size > 0 &&
                            InitializeProcThreadAttributeList(attrs, 1, 0, &attr_size);
    struct AttrsGuard {
      LPPROC_THREAD_ATTRIBUTE_LIST list;
      ~AttrsGuard() {
        if (list != nullptr) DeleteProcThreadAttributeList(list);
      }
    } attrs_guard{attrs_made ? attrs : nullptr};
    const bool use_list =
        attrs_made &&
        UpdateProcThreadAttribute(attrs, 0, PROC_THREAD_ATTRIBUTE_HANDLE_LIST, inherit.data(),
                                  inherit.size() * sizeof(HANDLE), nullptr, nullptr);
    if (use_list) six.lpAttributeList = attrs;
    si.cb = use_list ? sizeof six : sizeof si;
    w.job = win::kill_on_close_job();
    if (!w.job)
      throw failure("cannot start worker " + std::to_string(r) +
                    ": CreateJobObject: " + win::error_text(GetLastError()));
    PROCESS_INFORMATION pi{};
    std::wstring cmd = command_line;
    if (!CreateProcessW(exe.c_str(), cmd.data(), nullptr, nullptr, TRUE,
                        CREATE_UNICODE_ENVIRONMENT | CREATE_SUSPENDED | CREATE_NEW_PROCESS_GROUP |
                            (use_list ? EXTENDED_STARTUPINFO_PRESENT : 0),
                        block.data(), nullptr, &si, &pi)) {
      throw failure("rank " + std::to_string(r) + ": cannot run " + program + ": " +
                    win::error_text(GetLastError()));
    }
    w.process = win::Handle(pi.hProcess);
    win::Handle thread(pi.hThread);
    w.pid = pi.dwProcessId;
    w.running = true;
    if (!AssignProcessToJobObject(w.job.get(), w.process.get())) {
      const DWORD e = GetLastError();
      TerminateProcess(w.process.get(), 1);
      throw failure("cannot start worker " + std::to_string(r) +
                    ": AssignProcessToJobObject: " + win::error_text(e));
    }
    ResumeThread(thread.get());
    if (options.tag_output) {
      const std::string prefix = "[rank " + std::to_string(r) + "] ";
      HANDLE outs[2] = {GetStdHandle(STD_OUTPUT_HANDLE), GetStdHandle(STD_ERROR_HANDLE)};
      for (int s = 0; s < 2; ++s) {
        pipe_write[s].reset();
        HANDLE rd = pipe_read[s].get();
        ++sup.readers_open;
        w.readers[s] =
            std::thread([rd, out = outs[s], prefix, open = &sup.readers_open,
                         owner = std::make_shared<win::Handle>(std::move(pipe_read[s]))] {
              tag_stream(rd, out, prefix);
              --*open;
            });
      }
    }
  }
  if (options.on_started) {
    std::vector<int> pids;
    for (const Worker& w : sup.workers) pids.push_back(static_cast<int>(w.pid));
    options.on_started(pids);
  }

  // Only to workers still running: the group of one that has ended may be gone, and Windows then
  // sends the event to every process on the console, gpusel included.
  auto break_workers = [&] {
    g_forwarding = true;
    for (Worker& w : sup.workers) {
      if (w.running && WaitForSingleObject(w.process.get(), 0) == WAIT_TIMEOUT)
        GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, w.pid);
    }
    // Console control events are delivered on a thread of their own, a moment later.
    Sleep(50);
    g_forwarding = false;
  };
  std::size_t running = n;
  int first_failure = -1;
  int stop_signal = 0;
  std::size_t signalled = 0, killed = 0;
  bool kill_armed = false, kill_pending = false;
  Clock::time_point kill_at{};
  auto arm_kill = [&] {
    if (kill_armed) return;
    kill_armed = kill_pending = true;
    kill_at = Clock::now() + grace;
  };
  while (running > 0) {
    DWORD wait_ms = 20;
    if (kill_pending) {
      const auto ms = std::chrono::ceil<std::chrono::milliseconds>(kill_at - Clock::now()).count();
      wait_ms = static_cast<DWORD>(std::clamp<long long>(ms, 0, 20));
    }
    WaitForSingleObject(sup.wake.get(), wait_ms);
    if (const int sig = g_control.load(); sig != 0 && stop_signal == 0) {
      stop_signal = sig;
      signalled = running;
      break_workers();
      arm_kill();
    }
    for (Worker& w : sup.workers) {
      if (!w.running || WaitForSingleObject(w.process.get(), 0) != WAIT_OBJECT_0) continue;
      GetExitCodeProcess(w.process.get(), &w.code);
      w.running = false;
      --running;
      if (w.code != 0 && first_failure < 0 && stop_signal == 0) {
        first_failure = w.rank;
        break_workers();
        arm_kill();
      }
    }
    if (kill_pending && Clock::now() >= kill_at) {
      for (Worker& w : sup.workers) {
        if (!w.running) continue;
        ++killed;
        TerminateJobObject(w.job.get(), 1);
      }
      kill_pending = false;
    }
  }
  // Every worker has ended; output still held by their children gets a moment (200 ms, as on
  // POSIX), no more: then their jobs end what they started, which closes the pipes, and the
  // readers finish.
  const Clock::time_point drain_until = Clock::now() + std::chrono::milliseconds(200);
  while (sup.readers_open.load() > 0 && Clock::now() < drain_until) Sleep(5);
  for (Worker& w : sup.workers) {
    if (w.job) TerminateJobObject(w.job.get(), 1);
  }
  for (Worker& w : sup.workers) {
    for (std::thread& t : w.readers) {
      if (t.joinable()) t.join();
    }
  }
  for (Worker& w : sup.workers) w.job.reset();

  HANDLE err = GetStdHandle(STD_ERROR_HANDLE);
  auto workers_text = [](std::size_t count) {
    return std::to_string(count) + " worker" + (count == 1 ? "" : "s");
  };
  if (first_failure >= 0) {
    const Worker& bad = sup.workers[static_cast<std::size_t>(first_failure)];
    write_handle(err, "gpusel: rank " + std::to_string(bad.rank) + " (GPU " +
                          options.gpus[static_cast<std::size_t>(bad.rank)] + ") ended with " +
                          win::exit_code_text(bad.code) + "; " +
                          (n == 1 ? std::string("it was the only worker")
                                  : "the other " + std::to_string(n - 1) + " worker" +
                                        (n == 2 ? " was" : "s were") + " stopped") +
                          "\n");
  }
  if (stop_signal != 0) {
    write_handle(err,
                 std::string("gpusel: stopped by ") +
                     (stop_signal == kSigInt ? "Ctrl-C" : "Ctrl-Break") +
                     "; CTRL_BREAK_EVENT was forwarded to " +
                     (signalled == 0 ? std::string("no worker (all had ended)")
                                     : "the " + workers_text(signalled) + " still running") +
                     (killed == 0 ? std::string()
                                  : ", and " + workers_text(killed) +
                                        " still running after the grace period were terminated") +
                     "\n");
    return 128 + stop_signal;
  }
  if (first_failure < 0) return 0;
  return static_cast<int>(sup.workers[static_cast<std::size_t>(first_failure)].code);
}

}  // namespace

int launch_workers(const LaunchOptions& options) {
  return run_workers(options, find_program(options.command.at(0)));
}

int launch_workers(const LaunchOptions& options, const std::string& program) {
  return run_workers(options, program);
}

GPUSEL_END_NAMESPACE

namespace gpusel::detail {

int launch_program(const LaunchOptions& options, const std::string& program) {
  return gpusel::run_workers(options, program);
}

}  // namespace gpusel::detail
