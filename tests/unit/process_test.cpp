// The platform layer's child processes (src/platform/process.hpp): starting a child with an
// environment change and a redirected descriptor, its exit status, a signal to its process group,
// and the error of a program that is not there; each both ways the child can be made (posix_spawn,
// and fork when a fork-only setting is asked for).
#ifndef _WIN32
#include <gtest/gtest.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
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

TEST(ProcessApi, NoSignalToProcessZeroOrBelow) {
  errno = 0;
  EXPECT_EQ(detail::signal_process(0, 0), -1);
  EXPECT_EQ(errno, ESRCH);
  EXPECT_EQ(detail::signal_group(-1, 0), -1);
  EXPECT_EQ(detail::signal_group(0, 0), -1);
}
#endif
