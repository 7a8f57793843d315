// Internal: child processes. Every process the library and the gpusel command start is started
// here, on POSIX systems (process_posix.cpp) and on Windows (process_win.cpp): what the child runs
// (ChildCommand, shared), then each system's own ChildSpec, start_child and ways to wait for,
// signal or end it.
// POSIX: every fork, exec, posix_spawn and wait is here: starting a child (its arguments,
// environment, folder, descriptors and process group), waiting for it, signalling it or its
// process group, and replacing this process with a program. abi.layering refuses those calls
// anywhere else.
// Windows: every CreateProcessW is here: a child started in a Job Object (suspended until it is in
// it) or plain, its standard handles, waiting for it, its exit code, ending it or its job.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpusel::detail {

// What a child runs, on either system.
struct ChildCommand {
  std::string program;            // run as it is: no PATH search
  std::vector<std::string> args;  // its argv, argv[0] included (on Windows made one command line
                                  // by win::command_line, which the C runtime splits back)
  std::string directory;          // its working folder; empty: this one's
  // POSIX: the leader of a process group of its own, else in this one's. Windows: a console
  // process group of its own (CREATE_NEW_PROCESS_GROUP), which GenerateConsoleCtrlEvent addresses.
  bool own_group = false;
};

}  // namespace gpusel::detail

#ifndef _WIN32
#include <sched.h>
#include <signal.h>
#include <sys/types.h>

#include <optional>
#include <utility>

namespace gpusel::detail {

// The signals this process catches (has a handler for), bit sig - 1; false where /proc cannot
// tell. A child that shares its parent's memory until its exec reads its own and resets exactly
// these. Async-signal-safe.
bool caught_signals(std::uint64_t& caught);

// This process's environment ("NAME=value" each, in its order) less every variable named in
// `unset`, then `set` ("NAME=value" each) added in order after it. A name of `set` that is neither
// unset nor new is then there twice, as execve passes it.
std::vector<std::string> environment_with(const std::vector<std::string>& unset,
                                          const std::vector<std::string>& set);

// A child to start: what it runs (ChildCommand) and what it gets.
struct ChildSpec : ChildCommand {
  std::optional<std::vector<std::string>> environment;  // "NAME=value" each; nullopt: this one's
  // Descriptors it gets, {from, to}, made in order: `from` becomes `to`, inheritable (a `from`
  // equal to its `to` loses FD_CLOEXEC). Every other descriptor opened with O_CLOEXEC stays here.
  std::vector<std::pair<int, int>> descriptors;

  // The rest makes the child by fork_exec (a clone sharing this process's memory until its
  // execve, or fork; else posix_spawn):
  bool dies_with_parent = false;        // SIGKILL when this process ends (and no start once it has)
  std::vector<int> cpus;                // the CPUs it may run on; empty: this one's
  std::optional<sigset_t> signal_mask;  // its signal mask; nullopt: this thread's
  std::optional<struct sigaction> sigchld;  // SIGCHLD's disposition; nullopt: this one's
  // Non-empty: the child says its own failure, and the start never fails after fork: it writes
  // `setup_failed` (the descriptors, folder or CPUs could not be set up) or `exec_failed`, the
  // errno's digits and ")\n" on its descriptor 2, and exits with 126 or 127 respectively.
  std::string setup_failed;
  std::string exec_failed;
};

// A started child, or why none was: `error` is the errno of the failed fork, posix_spawn or exec
// (0 when started, and `pid` is the child).
struct Started {
  pid_t pid = -1;
  int error = 0;
};

// Everything the child needs, allocated before it is made: between fork and exec the child
// allocates nothing (async-signal-safe calls only), so a multi-threaded parent can start it.
class PreparedChild {
 public:
  explicit PreparedChild(ChildSpec spec);
  PreparedChild(const PreparedChild&) = delete;
  PreparedChild& operator=(const PreparedChild&) = delete;

  // Starts the child. With own_group, the parent sets the child's group too (no race with a
  // signal sent to it right after).
  Started start() const;

 private:
  bool by_fork() const;
  Started spawn() const;
  Started fork_exec() const;
  // What a child that shares this process's memory starts with (clone's argument).
  struct SharedStart {
    const PreparedChild* child;
    int error_pipe;
    const sigset_t* mask;  // the parent's mask before it blocked every signal
  };
  [[noreturn]] static int start_shared(void* start);
  [[noreturn]] void in_child(int error_pipe, const sigset_t* mask) const;

  ChildSpec spec_;
  pid_t parent_;
  cpu_set_t cpus_{};
  std::vector<char*> argv_;
  std::vector<std::string> env_text_;
  std::vector<char*> envp_;
};

// Starts `spec` (PreparedChild(spec).start()).
Started start_child(ChildSpec spec);

// Waits for child `pid` (-1: any child), retrying when a signal interrupts; with `block` false,
// returns 0 at once when none has ended. The child's pid, 0, or -1 with errno (ECHILD: no such
// child, or one already reaped). `status`: waitpid's, when not null.
pid_t wait_child(pid_t pid, int* status, bool block = true);
// Any child of this process (wait_child(-1, ...)).
pid_t wait_any_child(int* status, bool block = true);

// Sends `sig` to process `pid`; 0, or -1 with errno (ESRCH for a `pid` of 0 or less, which
// kill() would take for a group or for every process).
int signal_process(pid_t pid, int sig);
// Sends `sig` to every process of process group `group`; 0, or -1 with errno (ESRCH as above).
int signal_group(pid_t group, int sig);
// Whether process `pid` exists (this user's or not): true unless the kernel says no such process.
bool process_exists(pid_t pid);
// The process group of process `pid`; -1 when it cannot be told (ended, or in another session).
pid_t process_group(pid_t pid);

// Replaces this process with `program` (no PATH search), this environment kept; returns only when
// it cannot, with the errno.
int replace_process(const std::string& program, const std::vector<std::string>& args);

}  // namespace gpusel::detail
#else  // Windows
#include <optional>
#include <utility>

#include "win.hpp"

namespace gpusel::detail {

// A child to start: what it runs (ChildCommand) and what it gets. It is made by CreateProcessW
// with a Unicode environment, inheriting this process's inheritable handles (or, with
// std_handles_only, its standard handles alone).
struct ChildSpec : ChildCommand {
  std::optional<win::Environment> environment;  // nullopt: this one's
  // Its standard handles (STARTF_USESTDHANDLES), each inheritable or null; nullopt: none given.
  struct StdHandles {
    HANDLE in = nullptr, out = nullptr, err = nullptr;
  };
  std::optional<StdHandles> std_handles;
  // With std_handles: it inherits those and no other handle (PROC_THREAD_ATTRIBUTE_HANDLE_LIST);
  // where the list cannot be made, every inheritable handle, as without.
  bool std_handles_only = false;
  bool no_window = false;  // CREATE_NO_WINDOW: no console of its own
  // Not null: it is created suspended, put in this Job Object, and only then resumed (`resume`),
  // so that nothing it starts escapes the job. Null: it starts running.
  HANDLE job = nullptr;
  // When it cannot join `job`: true: it is terminated (exit code 1) before it ran, and the start
  // fails (join_job); false: it runs outside the job.
  bool job_required = true;
  bool resume = true;  // false: it stays suspended in its job until Child::resume()
};

// A started child: its process handle and id, and its main thread while it is suspended.
class Child {
 public:
  Child() = default;
  Child(win::Handle process, win::Handle suspended_thread, DWORD pid)
      : process_(std::move(process)), thread_(std::move(suspended_thread)), pid_(pid) {}

  explicit operator bool() const noexcept { return static_cast<bool>(process_); }
  HANDLE handle() const noexcept { return process_.get(); }
  DWORD pid() const noexcept { return pid_; }

  // Lets a child left suspended (ChildSpec::resume false) run; nothing otherwise.
  void resume();
  // Waits at most `ms` milliseconds for it to end; true once it has.
  bool wait(DWORD ms = INFINITE) const;
  // True while it runs (a wait of 0 ms times out).
  bool running() const;
  // Its exit code (NTSTATUS for a crash) once ended; `unknown` when it cannot be read.
  DWORD exit_code(DWORD unknown) const;
  // Ends it with exit code `code` (TerminateProcess); false when Windows refuses.
  bool terminate(UINT code) const;

 private:
  win::Handle process_, thread_;
  DWORD pid_ = 0;
};

// A started child, or why none was: `failed` is the call that failed and `error` its
// GetLastError(). A child that could not join its required job is in `child`, terminated.
struct Started {
  enum class Step { none, create_process, join_job };
  Child child;
  Step failed = Step::none;
  DWORD error = 0;
};

Started start_child(const ChildSpec& spec);

// Ends every process of Job Object `job` with exit code `code` (TerminateJobObject); false when
// Windows refuses.
bool terminate_job(HANDLE job, UINT code);

// Sends Ctrl-Break to the console process group `group` (a child started with own_group: its
// process id); false when Windows refuses. Delivered on a thread of the receiver's, a moment later.
bool break_group(DWORD group);

}  // namespace gpusel::detail
#endif
