// The platform layer's helpers: shell words (src/platform/shell.cpp) and a process's arguments
// and its /proc/PID/stat (src/platform/ancestry.hpp).
#include <gtest/gtest.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "ancestry.hpp"
#include "env.hpp"
#include "file_text.hpp"
#include "gpusel_detail.hpp"

#ifndef _WIN32
#include <errno.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

using namespace gpusel;

TEST(Shell, QuoteMakesOneSingleQuotedWord) {
  EXPECT_EQ(detail::shell_quote(""), "''");
  EXPECT_EQ(detail::shell_quote("plain"), "'plain'");
  EXPECT_EQ(detail::shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(detail::shell_quote("$(id)`x`"), "'$(id)`x`'");
  EXPECT_EQ(detail::shell_quote("a\\b\n"), "'a\\b\n'");  // nothing is special inside '...'
}

TEST(Shell, WordIsLeftAsItIsOnlyWhenEveryByteIsPlain) {
  // resolve --format env's plain characters
  EXPECT_EQ(detail::shell_word("GPU-8c0a,GPU-1f2e", "-,_.:/"), "GPU-8c0a,GPU-1f2e");
  EXPECT_EQ(detail::shell_word("MIG-1/2:3_4.5", "-,_.:/"), "MIG-1/2:3_4.5");
  EXPECT_EQ(detail::shell_word("", "-,_.:/"), "''");  // an empty word must be seen
  EXPECT_EQ(detail::shell_word("a b", "-,_.:/"), "'a b'");
  EXPECT_EQ(detail::shell_word("a=b", "-,_.:/"), "'a=b'");  // '=' is not among these
  EXPECT_EQ(detail::shell_word("it's", "-,_.:/"), "'it'\\''s'");
  EXPECT_EQ(detail::shell_word("$(id)", "-,_.:/"), "'$(id)'");
  EXPECT_EQ(detail::shell_word("\xc3\xa9", "-,_.:/"), "'\xc3\xa9'");  // letters are ASCII's only
  // a lease holder's command words
  EXPECT_EQ(detail::shell_word("--lr=0.1", "_@%+=:,./-"), "--lr=0.1");
  EXPECT_EQ(detail::shell_word("user@host:50%", "_@%+=:,./-"), "user@host:50%");
  EXPECT_EQ(detail::shell_word("sleep 5", "_@%+=:,./-"), "'sleep 5'");
  EXPECT_EQ(detail::shell_word("*.py", "_@%+=:,./-"), "'*.py'");
  EXPECT_EQ(detail::shell_word(std::string("a\0b", 3), "_@%+=:,./-"), std::string("'a\0b'", 5));
}

#ifndef _WIN32
namespace {

// A shell that waits on a pipe (`read` is built in: no exec) until the pipe is closed, started with
// `args` (after "/bin/sh -c 'echo; read x'"). It is running its script when the constructor
// returns: posix_spawn returns while the kernel is still setting up the new program, before its
// arguments are in place (/proc/PID/cmdline is then empty), so it waits for the shell's line.
struct WaitingShell {
  explicit WaitingShell(const std::vector<std::string>& args) {
    argv_text = {"/bin/sh", "-c", "echo; read x"};
    argv_text.insert(argv_text.end(), args.begin(), args.end());
    int in[2], out[2];
    if (pipe(in) != 0) return;
    if (pipe(out) != 0) {
      close(in[0]);
      close(in[1]);
      return;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_addclose(&actions, in[1]);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    std::vector<char*> argv;
    for (std::string& a : argv_text) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid, "/bin/sh", &actions, nullptr, argv.data(), environ) != 0) pid = 0;
    posix_spawn_file_actions_destroy(&actions);
    close(in[0]);
    close(out[1]);
    input = in[1];
    char line = 0;
    while (pid > 0 && read(out[0], &line, 1) < 0 && errno == EINTR) {
    }
    close(out[0]);
  }
  // `read` sees the end of its input, and the shell exits; true when it was reaped.
  bool end() {
    close(input);
    input = -1;
    int status = 0;
    return pid > 0 && waitpid(pid, &status, 0) == pid;
  }
  ~WaitingShell() {
    if (input >= 0) end();
  }
  std::vector<std::string> argv_text;
  pid_t pid = 0;
  int input = -1;
};

}  // namespace

TEST(ProcessArgs, AreTheWordsTheProcessWasStartedWith) {
  // An argument holding blanks, and an empty last argument.
  WaitingShell shell({"name with blanks", ""});
  ASSERT_GT(shell.pid, 0);
  EXPECT_EQ(detail::process_args(shell.pid), shell.argv_text);
  // Cut at a limit: the last word is what was read of it.
  EXPECT_EQ(detail::process_args(shell.pid, 10), (std::vector<std::string>{"/bin/sh", "-c"}));
  EXPECT_EQ(detail::process_args(shell.pid, 9), (std::vector<std::string>{"/bin/sh", "-"}));
  EXPECT_EQ(detail::process_args(shell.pid, 8), (std::vector<std::string>{"/bin/sh"}));
  ASSERT_TRUE(shell.end());
  EXPECT_TRUE(detail::process_args(shell.pid).empty());  // ended and reaped: nothing to read
}

TEST(ProcessStat, TellsParentGroupStartStateAndOwner) {
  WaitingShell shell({"x"});
  ASSERT_GT(shell.pid, 0);
  const std::optional<detail::ProcessStat> own = detail::process_stat(static_cast<int>(getpid()));
  ASSERT_TRUE(own.has_value());
  EXPECT_EQ(own->state, 'R');  // this thread reads it
  EXPECT_EQ(own->group, static_cast<int>(getpgrp()));
  EXPECT_EQ(own->owner, static_cast<unsigned>(geteuid()));
  EXPECT_EQ(detail::parent_of(static_cast<int>(getpid())), static_cast<int>(getppid()));
  const std::optional<detail::ProcessStat> s = detail::process_stat(shell.pid);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->parent, static_cast<int>(getpid()));
  EXPECT_EQ(s->group, static_cast<int>(getpgrp()));  // posix_spawn keeps the group
  EXPECT_EQ(s->owner, static_cast<unsigned>(geteuid()));
  EXPECT_GE(s->start, own->start);  // started after this process
  EXPECT_GT(s->start, 0u);
  ASSERT_TRUE(shell.end());
  EXPECT_FALSE(detail::process_stat(shell.pid).has_value());  // ended and reaped
  EXPECT_EQ(detail::parent_of(shell.pid), 0);
}
// Several variables read in one pass are what env_value (getenv) reads one by one: set, unset,
// empty, a name that begins another's, names not in upper case, a name asked for twice, and an
// environment holding one name twice (the first counts, as for getenv).
TEST(Environment, ValuesInOnePassAreGetenvs) {
  setenv("GPUSEL_TEST_ONE_PASS", "a=b", 1);
  setenv("GPUSEL_TEST_ONE_PASS_LONGER", "2", 1);
  setenv("GPUSEL_TEST_EMPTY", "", 1);
  setenv("gpusel_test_lower", "lower", 1);
  setenv("_GPUSEL_TEST", "underscore", 1);
  unsetenv("GPUSEL_TEST_UNSET");
  static constexpr detail::EnvNames<9> kNames(std::array<const char*, 9>{
      "GPUSEL_TEST_ONE_PASS", "GPUSEL_TEST_ONE_PASS_LONGER", "GPUSEL_TEST_ONE", "GPUSEL_TEST_EMPTY",
      "GPUSEL_TEST_UNSET", "gpusel_test_lower", "_GPUSEL_TEST", "GPUSEL_TEST_ONE_PASS", "PATH"});
  const auto values = detail::env_values(kNames);
  for (std::size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(values[i], detail::env_value(kNames.names[i])) << kNames.names[i];
  }
  EXPECT_EQ(values[0], "a=b");
  EXPECT_EQ(values[3], "");
  EXPECT_EQ(values[4], std::nullopt);
  EXPECT_EQ(values[7], "a=b");
  char first[] = "GPUSEL_TEST_TWICE=first";
  char second[] = "GPUSEL_TEST_TWICE=second";
  char odd[] = "GPUSEL_TEST_NO_EQUALS";
  char* twice[] = {odd, first, second, nullptr};
  char** saved = environ;
  environ = twice;
  static constexpr detail::EnvNames<2> kAsked(
      std::array<const char*, 2>{"GPUSEL_TEST_TWICE", "GPUSEL_TEST_NO_EQUALS"});
  const auto read = detail::env_values(kAsked);
  const std::optional<std::string> one = detail::env_value("GPUSEL_TEST_TWICE");
  environ = saved;
  EXPECT_EQ(read[0], "first");
  EXPECT_EQ(one, "first");
  EXPECT_EQ(read[1], std::nullopt);
  for (const char* name : {"GPUSEL_TEST_ONE_PASS", "GPUSEL_TEST_ONE_PASS_LONGER",
                           "GPUSEL_TEST_EMPTY", "gpusel_test_lower", "_GPUSEL_TEST"})
    unsetenv(name);
}

// A list indexed at compile time reads as getenv does: names of one and two bytes (one looked
// up alone, the other hashed on its terminating NUL), an empty name, a name asked twice, names
// sharing their first three bytes, and past the 64th name (looked up alone).
TEST(Environment, FixedListsAreGetenvs) {
  setenv("G", "one", 1);
  setenv("GP", "two", 1);
  setenv("GPUSEL_TEST_FIXED_A", "a", 1);
  setenv("GPUSEL_TEST_FIXED_B", "", 1);
  unsetenv("GPUSEL_TEST_FIXED_C");
  static constexpr detail::EnvNames<7> kNames(std::array<const char*, 7>{
      "G", "GP", "", "GPUSEL_TEST_FIXED_A", "GPUSEL_TEST_FIXED_B", "GPUSEL_TEST_FIXED_C", "GP"});
  static_assert((kNames.indexed & 1u) == 0 && (kNames.indexed >> 1 & 1u) == 1);
  const auto values = detail::env_values(kNames);
  for (std::size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(values[i], detail::env_value(kNames.names[i])) << '"' << kNames.names[i] << '"';
  }
  EXPECT_EQ(values[0], "one");
  EXPECT_EQ(values[1], "two");
  EXPECT_EQ(values[4], "");
  EXPECT_EQ(values[5], std::nullopt);
  EXPECT_EQ(values[6], "two");
  std::array<const char*, 70> many{};
  std::vector<std::string> storage;
  for (std::size_t i = 0; i < many.size(); ++i)
    storage.push_back("GPUSEL_TEST_MANY_" + std::to_string(i));
  for (std::size_t i = 0; i < many.size(); ++i) many[i] = storage[i].c_str();
  setenv("GPUSEL_TEST_MANY_3", "3", 1);
  setenv("GPUSEL_TEST_MANY_68", "68", 1);
  const detail::EnvNames<70> list(many);
  const auto got = detail::env_values(list);
  for (std::size_t i = 0; i < many.size(); ++i) EXPECT_EQ(got[i], detail::env_value(many[i])) << i;
  EXPECT_EQ(got[3], "3");
  EXPECT_EQ(got[68], "68");
  for (const char* name : {"G", "GP", "GPUSEL_TEST_FIXED_A", "GPUSEL_TEST_FIXED_B",
                           "GPUSEL_TEST_MANY_3", "GPUSEL_TEST_MANY_68"})
    unsetenv(name);
}
#else
TEST(ProcessArgs, AreNotReadOnWindows) {
  EXPECT_TRUE(detail::process_args(detail::current_pid()).empty());
  EXPECT_FALSE(detail::process_stat(detail::current_pid()).has_value());
}
#endif

// Whole files through stdio (file_text.hpp): what the library and the command read and write
// instead of C++ streams.
TEST(FileText, ReadsWritesAndSplits) {
  const std::string path =
      testing::TempDir() + "gpusel-file-text-" + std::to_string(detail::current_pid()) + ".txt";
  ASSERT_TRUE(detail::write_file_text(path, "first line\nsecond\tword  \nno break"));
  EXPECT_EQ(detail::read_file_text(path), "first line\nsecond\tword  \nno break");
  EXPECT_EQ(detail::read_file_text(path, 5), "first");
  EXPECT_EQ(detail::read_file_text(path, 6, 11), "second");
  EXPECT_EQ(detail::read_file_text(path, 100, 1000), "");  // past the end: nothing, no error
  EXPECT_EQ(detail::read_first_line(path), "first line");
  ASSERT_TRUE(detail::write_file_text(path, "\nmore", true));
  const std::optional<std::string> text = detail::read_file_text(path);
  ASSERT_TRUE(text.has_value());
  std::vector<std::string> lines;
  std::size_t at = 0;
  while (const std::optional<std::string_view> line = detail::next_line(*text, at))
    lines.emplace_back(*line);
  EXPECT_EQ(lines, (std::vector<std::string>{"first line", "second\tword  ", "no break", "more"}));
  std::vector<std::string> words;
  at = 0;
  for (std::string_view w; !(w = detail::next_word(*text, at)).empty();) words.emplace_back(w);
  EXPECT_EQ(words,
            (std::vector<std::string>{"first", "line", "second", "word", "no", "break", "more"}));
  // A NUL byte is part of its line, as for std::getline.
  ASSERT_TRUE(detail::write_file_text(path, std::string("a\0b\nc\n", 6)));
  EXPECT_EQ(detail::read_first_line(path), std::string("a\0b", 3));
  ASSERT_TRUE(detail::write_file_text(path, std::string("\0\nzz\n", 5)));
  EXPECT_EQ(detail::read_first_line(path), std::string(1, '\0'));
  ASSERT_TRUE(detail::write_file_text(path, "\nsecond\n"));
  EXPECT_EQ(detail::read_first_line(path), "");  // an empty first line is a line
  std::string long_line(10000, 'x');
  ASSERT_TRUE(detail::write_file_text(path, long_line + "\nnext"));
  EXPECT_EQ(detail::read_first_line(path), long_line);  // past one block
  ASSERT_TRUE(detail::write_file_text(path, ""));
  EXPECT_EQ(detail::read_file_text(path), "");
  EXPECT_EQ(detail::read_first_line(path), std::nullopt);  // an empty file has no line
  std::remove(path.c_str());
  errno = 0;
  EXPECT_EQ(detail::read_file_text(path), std::nullopt);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(detail::read_first_line(path), std::nullopt);
  EXPECT_FALSE(detail::write_file_text(testing::TempDir() + "no-such-folder-gpusel/x", "x"));
  EXPECT_EQ(errno, ENOENT);
}
