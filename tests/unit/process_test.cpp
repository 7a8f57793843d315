// The platform layer's child processes (src/platform/process.hpp): starting a child with an
// environment change and a redirected descriptor, its exit status, a signal to its process group,
// and the error of a program that is not there; each both ways the child can be made (posix_spawn,
// and fork when a fork-only setting is asked for). On Windows (under wine): cmd.exe with an
// environment, a folder and its output in a pipe, its exit code, a child held suspended in a Job
// Object and ended with it, and a program that is not there.
#ifndef _WIN32
#include <gtest/gtest.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ancestry.hpp"
#include "process.hpp"

using namespace gpusel;

namespace {

// Everything readable from `fd` until its end (or a line, with `line`); closes it.
std::string read_all(int fd, bool line = false) {
  std::string out;
  char c;
  while (true) {
    const ssize_t n = read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out += c;
    if (line && c == '\n') break;
  }
  if (!line) close(fd);
  return out;
}

struct Pipe {
  int ends[2] = {-1, -1};
  Pipe() { EXPECT_EQ(pipe2(ends, O_CLOEXEC), 0); }
  ~Pipe() {
    for (int fd : ends)
      if (fd >= 0) close(fd);
  }
  int take_read() { return std::exchange(ends[0], -1); }
  void close_write() {
    close(ends[1]);
    ends[1] = -1;
  }
};

detail::ChildSpec shell(const std::string& script, bool by_fork) {
  detail::ChildSpec spec;
  spec.program = "/bin/sh";
  spec.args = {"sh", "-c", script};
  spec.dies_with_parent = by_fork;  // a fork-only setting: the child is then made by fork()
  return spec;
}

class Process : public ::testing::TestWithParam<bool> {};

}  // namespace

TEST_P(Process, ChildGetsEnvironmentChangeFolderAndDescriptor) {
  setenv("GPUSEL_PROCESS_TEST_GONE", "here", 1);
  Pipe out;
  detail::ChildSpec spec = shell(
      "printf '%s|%s|%s' \"$GPUSEL_PROCESS_TEST\" \"${GPUSEL_PROCESS_TEST_GONE-unset}\" \"$PWD\"",
      GetParam());
  spec.environment =
      detail::environment_with({"GPUSEL_PROCESS_TEST_GONE", "PWD"}, {"GPUSEL_PROCESS_TEST=a b"});
  spec.directory = "/";
  spec.descriptors.emplace_back(out.ends[1], 1);
  const detail::Started started = detail::start_child(std::move(spec));
  unsetenv("GPUSEL_PROCESS_TEST_GONE");
  ASSERT_EQ(started.error, 0);
  out.close_write();
  EXPECT_EQ(read_all(out.take_read()), "a b|unset|/");
  int status = -1;
  ASSERT_EQ(detail::wait_child(started.pid, &status), started.pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST_P(Process, ExitStatusIsWaitedFor) {
  const detail::Started started = detail::start_child(shell("exit 7", GetParam()));
  ASSERT_EQ(started.error, 0);
  int status = -1;
  // Not waiting: 0 until it has ended, then its pid.
  pid_t got = 0;
  for (int i = 0; i < 5000 && got == 0; ++i) {
    got = detail::wait_child(started.pid, &status, false);
    if (got == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(got, started.pid);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 7);
  // Reaped: no such child any more.
  EXPECT_EQ(detail::wait_child(started.pid, &status, false), -1);
  EXPECT_EQ(errno, ECHILD);

  const detail::Started other = detail::start_child(shell("exit 3", GetParam()));
  ASSERT_EQ(other.error, 0);
  EXPECT_EQ(detail::wait_any_child(&status), other.pid);
  EXPECT_EQ(WEXITSTATUS(status), 3);
}

TEST_P(Process, SignalReachesTheWholeProcessGroup) {
  Pipe out;
  // The shell starts a child of its own in its group, says its pid, and waits.
  detail::ChildSpec spec = shell("sleep 30 & echo $!; wait", GetParam());
  spec.own_group = true;
  spec.descriptors.emplace_back(out.ends[1], 1);
  const detail::Started started = detail::start_child(std::move(spec));
  ASSERT_EQ(started.error, 0);
  out.close_write();
  const int fd = out.take_read();
  const pid_t sleeper = std::atoi(read_all(fd, true).c_str());
  close(fd);
  ASSERT_GT(sleeper, 0);
  EXPECT_EQ(detail::process_group(started.pid), started.pid);
  EXPECT_EQ(detail::process_group(sleeper), started.pid);
  EXPECT_TRUE(detail::process_exists(sleeper));
  ASSERT_EQ(detail::signal_group(started.pid, SIGTERM), 0);
  int status = -1;
  ASSERT_EQ(detail::wait_child(started.pid, &status), started.pid);
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  // The sleeper got it too: it ends (and is reaped by whoever inherited it, or stays a zombie).
  bool ended = false;
  for (int i = 0; i < 5000 && !ended; ++i) {
    const auto stat = detail::process_stat(sleeper);
    ended = !stat || stat->state == 'Z' || stat->state == 'X';
    if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(ended);
}

TEST_P(Process, MissingProgramIsTheStartsError) {
  detail::ChildSpec spec = shell("", GetParam());
  spec.program = "/nonexistent/gpusel-no-such-program";
  const detail::Started started = detail::start_child(std::move(spec));
  EXPECT_EQ(started.error, ENOENT);
  EXPECT_EQ(started.pid, -1);
}

INSTANTIATE_TEST_SUITE_P(SpawnAndFork, Process, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& param) {
                           return param.param ? "Fork" : "Spawn";
                         });

TEST(ProcessApi, ChildSaysItsOwnFailureWhenAsked) {
  Pipe err;
  detail::ChildSpec spec = shell("", true);
  spec.program = "/nonexistent/gpusel-no-such-program";
  spec.descriptors.emplace_back(err.ends[1], 2);
  spec.setup_failed = "x: cannot set up (errno ";
  spec.exec_failed = "x: cannot run it (errno ";
  const detail::Started started = detail::start_child(std::move(spec));
  ASSERT_EQ(started.error, 0);
  err.close_write();
  EXPECT_EQ(read_all(err.take_read()), "x: cannot run it (errno " + std::to_string(ENOENT) + ")\n");
  int status = -1;
  ASSERT_EQ(detail::wait_child(started.pid, &status), started.pid);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 127);

  Pipe err2;
  detail::ChildSpec bad = shell("", true);
  bad.directory = "/nonexistent/gpusel-no-such-folder";
  bad.descriptors.emplace_back(err2.ends[1], 2);
  bad.setup_failed = "x: cannot set up (errno ";
  bad.exec_failed = "x: cannot run it (errno ";
  const detail::Started second = detail::start_child(std::move(bad));
  ASSERT_EQ(second.error, 0);
  err2.close_write();
  EXPECT_EQ(read_all(err2.take_read()),
            "x: cannot set up (errno " + std::to_string(ENOENT) + ")\n");
  ASSERT_EQ(detail::wait_child(second.pid, &status), second.pid);
  EXPECT_EQ(WEXITSTATUS(status), 126);
}

void note_signal(int) {}

// The signals a child sharing this process's memory resets before its exec: those with a handler,
// as /proc/self/status's SigCgt says, not the ignored ones or those left at their default.
TEST(ProcessApi, CaughtSignalsAreTheOnesWithAHandler) {
  struct sigaction handled {
  }, ignored{}, was_usr2{}, was_winch{}, was_usr1{};
  handled.sa_handler = note_signal;
  ignored.sa_handler = SIG_IGN;
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ASSERT_EQ(sigaction(SIGUSR2, &handled, &was_usr2), 0);
  ASSERT_EQ(sigaction(SIGWINCH, &ignored, &was_winch), 0);
  ASSERT_EQ(sigaction(SIGUSR1, &dfl, &was_usr1), 0);
  std::uint64_t caught = 0;
  const bool known = detail::caught_signals(caught);
  sigaction(SIGUSR2, &was_usr2, nullptr);
  sigaction(SIGWINCH, &was_winch, nullptr);
  sigaction(SIGUSR1, &was_usr1, nullptr);
  ASSERT_TRUE(known);
  EXPECT_TRUE((caught >> (SIGUSR2 - 1)) & 1u);
  EXPECT_FALSE((caught >> (SIGWINCH - 1)) & 1u);
  EXPECT_FALSE((caught >> (SIGUSR1 - 1)) & 1u);
  // And no longer once the handler is gone.
  ASSERT_TRUE(detail::caught_signals(caught));
  EXPECT_EQ((caught >> (SIGUSR2 - 1)) & 1u,
            was_usr2.sa_handler != SIG_DFL && was_usr2.sa_handler != SIG_IGN ? 1u : 0u);
}

// SigCgt comes after the Groups line, which makes /proc/self/status longer than any one read with
// hundreds of supplementary groups (a review found a 4 KB buffer then missed it): read in a child
// with 600 ten-digit group ids, where this process may set them (as root).
TEST(ProcessApi, CaughtSignalsAreReadPastALongGroupsLine) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::vector<gid_t> groups;
    for (gid_t g = 0; g < 600; ++g) groups.push_back(1000000000u + g);
    if (setgroups(groups.size(), groups.data()) != 0) _exit(77);
    struct sigaction handled {};
    handled.sa_handler = note_signal;
    sigaction(SIGUSR2, &handled, nullptr);
    std::uint64_t caught = 0;
    if (!detail::caught_signals(caught)) _exit(1);
    _exit(((caught >> (SIGUSR2 - 1)) & 1u) != 0 ? 0 : 2);
  }
  int status = -1;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "cannot set supplementary groups here";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: not read, 2: SIGUSR2's handler not seen";
}

TEST(ProcessApi, NoSignalToProcessZeroOrBelow) {
  errno = 0;
  EXPECT_EQ(detail::signal_process(0, 0), -1);
  EXPECT_EQ(errno, ESRCH);
  EXPECT_EQ(detail::signal_group(-1, 0), -1);
  EXPECT_EQ(detail::signal_group(0, 0), -1);
}
#else  // Windows
#include <gtest/gtest.h>

#include <cwctype>
#include <string>
#include <vector>

#include "process.hpp"
#include "win.hpp"

using namespace gpusel;
namespace win = detail::win;

namespace {

// The system folder (C:\Windows\System32) and its cmd.exe.
std::string system_folder() {
  wchar_t buf[MAX_PATH];
  const UINT n = GetSystemDirectoryW(buf, MAX_PATH);
  return win::narrow(std::wstring(buf, n));
}

detail::ChildSpec cmd(const std::string& script) {
  detail::ChildSpec spec;
  spec.program = system_folder() + "\\cmd.exe";
  spec.args = {"cmd", "/c", script};
  return spec;
}

// A pipe whose write end the child inherits as its standard output.
struct Pipe {
  win::Handle read, write;
  Pipe() {
    SECURITY_ATTRIBUTES sa{sizeof(SECURITY_ATTRIBUTES), nullptr, TRUE};
    HANDLE rd = nullptr, wr = nullptr;
    if (CreatePipe(&rd, &wr, &sa, 0)) {
      read = win::Handle(rd);
      write = win::Handle(wr);
      SetHandleInformation(rd, HANDLE_FLAG_INHERIT, 0);
    }
  }
  std::string read_all() {
    write.reset();
    std::string out;
    char buf[4096];
    DWORD got = 0;
    while (ReadFile(read.get(), buf, sizeof buf, &got, nullptr) && got > 0) out.append(buf, got);
    return out;
  }
};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::towlower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

TEST(ProcessApi, ExitCodeOfAPlainChild) {
  detail::Started started = detail::start_child(cmd("exit 3"));
  ASSERT_EQ(started.failed, detail::Started::Step::none) << win::error_text(started.error);
  ASSERT_TRUE(started.child);
  EXPECT_NE(started.child.pid(), 0u);
  ASSERT_TRUE(started.child.wait(60000));
  EXPECT_FALSE(started.child.running());
  EXPECT_EQ(started.child.exit_code(99), 3u);
}

TEST(ProcessApi, EnvironmentFolderAndOutput) {
  Pipe out;
  ASSERT_TRUE(out.write);
  detail::ChildSpec spec = cmd("echo %GPUSEL_PROCESS_TEST%& cd");
  win::Environment env = win::Environment::current();
  env.set("GPUSEL_PROCESS_TEST", "from the parent");
  spec.environment = env;
  spec.directory = system_folder();
  spec.std_handles = detail::ChildSpec::StdHandles{nullptr, out.write.get(), out.write.get()};
  spec.std_handles_only = true;
  spec.no_window = true;
  detail::Started started = detail::start_child(spec);
  ASSERT_EQ(started.failed, detail::Started::Step::none) << win::error_text(started.error);
  const std::string text = out.read_all();
  EXPECT_NE(text.find("from the parent"), std::string::npos) << text;
  EXPECT_NE(lower(text).find(lower(system_folder())), std::string::npos) << text;
  ASSERT_TRUE(started.child.wait(60000));
  EXPECT_EQ(started.child.exit_code(99), 0u);
}

namespace {

// A child running `script` in a new kill-on-close Job Object (kept in `job`), left suspended
// unless `resume`; its start is checked.
detail::Started start_in_job(const char* script, bool resume, win::Handle& job,
                             bool own_group = false) {
  job = win::kill_on_close_job();
  EXPECT_TRUE(job);
  detail::ChildSpec spec = cmd(script);
  spec.own_group = own_group;
  spec.job = job.get();
  spec.resume = resume;
  detail::Started started = detail::start_child(spec);
  EXPECT_EQ(started.failed, detail::Started::Step::none) << win::error_text(started.error);
  return started;
}

}  // namespace

TEST(ProcessApi, SuspendedInItsJobUntilTheJobEnds) {
  win::Handle job;
  detail::Started started = start_in_job("exit 0", false, job, true);
  ASSERT_TRUE(started.child);
  BOOL in = FALSE;
  ASSERT_TRUE(IsProcessInJob(started.child.handle(), job.get(), &in));
  EXPECT_TRUE(in);
  EXPECT_TRUE(started.child.running());
  EXPECT_FALSE(started.child.wait(200));  // suspended: it cannot end by itself
  EXPECT_TRUE(detail::terminate_job(job.get(), 7));
  ASSERT_TRUE(started.child.wait(60000));
  EXPECT_EQ(started.child.exit_code(99), 7u);
}

TEST(ProcessApi, ResumedOnceInItsJob) {
  win::Handle job;
  detail::Started started = start_in_job("exit 5", true, job);
  ASSERT_TRUE(started.child);
  ASSERT_TRUE(started.child.wait(60000));
  EXPECT_EQ(started.child.exit_code(99), 5u);
}

TEST(ProcessApi, TerminateEndsAChild) {
  win::Handle job;
  detail::Started started = start_in_job("exit 0", false, job);
  ASSERT_TRUE(started.child);
  EXPECT_TRUE(started.child.terminate(9));
  ASSERT_TRUE(started.child.wait(60000));
  EXPECT_EQ(started.child.exit_code(99), 9u);
}

TEST(ProcessApi, AProgramThatIsNotThere) {
  detail::ChildSpec spec = cmd("exit 0");
  spec.program = system_folder() + "\\gpusel-no-such-program.exe";
  const detail::Started started = detail::start_child(spec);
  EXPECT_EQ(started.failed, detail::Started::Step::create_process);
  EXPECT_TRUE(started.error == ERROR_FILE_NOT_FOUND || started.error == ERROR_PATH_NOT_FOUND)
      << win::error_text(started.error);
  EXPECT_FALSE(started.child);
}
#endif
