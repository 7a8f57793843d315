// Child processes on POSIX systems (process.hpp): posix_spawn where it can make the child asked
// for, else a child that shares this process's memory until its execve (clone with CLONE_VM and
// CLONE_VFORK, as posix_spawn itself starts one; fork in a sanitizer's build), with nothing but
// async-signal-safe calls before the execve.
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "process.hpp"

extern char** environ;

namespace gpusel::detail {

namespace {

// A sanitizer's runtime intercepts the calls the child makes, and would see them in the parent's
// memory: such builds copy the parent (fork), which the tests then cover too.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kShareMemory = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kShareMemory = false;
#else
constexpr bool kShareMemory = true;
#endif
#else
constexpr bool kShareMemory = true;
#endif

void write_all(int fd, const char* data, std::size_t size) {
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = write(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

// The decimal digits of a non-negative number, for the child after fork (no allocation).
std::size_t format_number(int value, char* buf) {
  char digits[16];
  std::size_t n = 0;
  unsigned v = value < 0 ? 0u : static_cast<unsigned>(value);
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0 && n < sizeof digits);
  for (std::size_t i = 0; i < n; ++i) buf[i] = digits[n - 1 - i];
  return n;
}

// Makes `from` the descriptor `to`, inheritable across exec. Async-signal-safe.
bool move_fd(int from, int to) {
  if (from == to) return fcntl(to, F_SETFD, 0) == 0;
  return dup2(from, to) == to;
}

}  // namespace

// From the SigCgt line of /proc/self/status, read in pieces (the Groups line before it can be
// long) and only where /proc is procfs: four system calls where asking each signal's disposition
// takes 64 (about 1 us each on the virtual machine gpusel is built on: 70 us a worker). Reads,
// compares and copies by hand: async-signal-safe, for a child that shares its parent's memory.
bool caught_signals(std::uint64_t& caught) {
  const int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct statfs fs {};
  if (fstatfs(fd, &fs) != 0 || fs.f_type != PROC_SUPER_MAGIC) {
    close(fd);
    return false;
  }
  static constexpr char kKey[] = "\nSigCgt:";
  constexpr int kKeyLength = sizeof kKey - 1;
  int matched = 1;  // the file's start counts as a line's
  int digits = -1;  // -1: looking for the key; 0..16: hex digits read after it
  std::uint64_t mask = 0;
  bool done = false, good = false;
  char buf[512];
  while (!done) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t i = 0; i < n && !done; ++i) {
      const char c = buf[i];
      if (digits < 0) {
        matched = c == kKey[matched] ? matched + 1 : (c == '\n' ? 1 : 0);
        if (matched == kKeyLength) digits = 0;
        continue;
      }
      if (digits == 0 && mask == 0 && (c == ' ' || c == '\t')) continue;
      const int v = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
      if (v >= 0 && digits < 16) {
        mask = (mask << 4) | static_cast<std::uint64_t>(v);
        ++digits;
        continue;
      }
      good = digits == 16 && c == '\n';  // the 64 signals' mask, the whole line
      done = true;
    }
  }
  close(fd);
  if (!good) return false;
  caught = mask;
  return true;
}

std::vector<std::string> environment_with(const std::vector<std::string>& unset,
                                          const std::vector<std::string>& set) {
  std::vector<std::string> prefixes;  // "NAME="
  for (const std::string& name : unset) prefixes.push_back(name + "=");
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    const bool gone = std::any_of(prefixes.begin(), prefixes.end(), [e](const std::string& p) {
      return std::strncmp(*e, p.c_str(), p.size()) == 0;
    });
    if (!gone) out.emplace_back(*e);
  }
  out.insert(out.end(), set.begin(), set.end());
  return out;
}

PreparedChild::PreparedChild(ChildSpec spec) : spec_(std::move(spec)), parent_(getpid()) {
  CPU_ZERO(&cpus_);
  for (int c : spec_.cpus) CPU_SET(c, &cpus_);
  for (std::string& a : spec_.args) argv_.push_back(a.data());
  argv_.push_back(nullptr);
  if (spec_.environment) {
    for (std::string& s : *spec_.environment) envp_.push_back(s.data());
    envp_.push_back(nullptr);
  }
}

bool PreparedChild::by_fork() const {
  return spec_.dies_with_parent || !spec_.cpus.empty() || spec_.signal_mask || spec_.sigchld ||
         !spec_.setup_failed.empty() || !spec_.exec_failed.empty() ||
         std::any_of(spec_.descriptors.begin(), spec_.descriptors.end(),
                     [](const std::pair<int, int>& d) { return d.first == d.second; });
}

Started PreparedChild::start() const {
  return by_fork() ? fork_exec() : spawn();
}

Started PreparedChild::spawn() const {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  for (const auto& [from, to] : spec_.descriptors)
    posix_spawn_file_actions_adddup2(&actions, from, to);
  if (!spec_.directory.empty())
    posix_spawn_file_actions_addchdir_np(&actions, spec_.directory.c_str());
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  if (spec_.own_group) {
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
  }
  pid_t pid = 0;
  char* const* envp = spec_.environment ? envp_.data() : environ;
  const int rc = posix_spawn(&pid, spec_.program.c_str(), &actions, &attr, argv_.data(), envp);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return {-1, rc};
  return {pid, 0};
}

Started PreparedChild::fork_exec() const {
  // A child that does not say its own failure says it here, through a pipe its exec closes; the
  // pipe stays above every descriptor the child is given.
  int report[2] = {-1, -1};
  if (spec_.setup_failed.empty() && spec_.exec_failed.empty()) {
    if (pipe2(report, O_CLOEXEC) != 0) return {-1, errno};
    int highest = 2;
    for (const auto& d : spec_.descriptors) highest = std::max(highest, d.second);
    if (report[1] <= highest) {
      const int moved = fcntl(report[1], F_DUPFD_CLOEXEC, highest + 1);
      const int e = errno;
      close(report[1]);
      report[1] = moved;
      if (moved < 0) {
        close(report[0]);
        return {-1, e};
      }
    }
  }
  pid_t pid = -1;
  int fork_error = 0;
  if (kShareMemory) {
    // Copying the parent's page tables costs more than the rest of a worker's start (0.1 ms a
    // child here): the child runs on a stack of its own in this process's memory, and this
    // thread waits until its execve (or _exit). Every signal stays blocked meanwhile, so that no
    // handler of this process runs in the child; the child resets them and sets its mask.
    constexpr std::size_t kStack = 128 * 1024;
    void* stack = mmap(nullptr, kStack, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED) {
      fork_error = errno;
    } else {
      sigset_t all, old;
      sigfillset(&all);
      pthread_sigmask(SIG_SETMASK, &all, &old);
      SharedStart start{this, report[1], &old};
      pid = clone(&PreparedChild::start_shared, static_cast<char*>(stack) + kStack,
                  CLONE_VM | CLONE_VFORK | SIGCHLD, &start);
      fork_error = errno;
      pthread_sigmask(SIG_SETMASK, &old, nullptr);
      munmap(stack, kStack);
    }
  } else {
    pid = fork();
    if (pid == 0) in_child(report[1], nullptr);
    fork_error = errno;
  }
  if (report[1] >= 0) close(report[1]);
  if (pid < 0) {
    if (report[0] >= 0) close(report[0]);
    return {-1, fork_error};
  }
  if (spec_.own_group) setpgid(pid, pid);
  if (report[0] < 0) return {pid, 0};
  int error = 0;
  ssize_t n = 0;
  while ((n = read(report[0], &error, sizeof error)) < 0 && errno == EINTR) {
  }
  close(report[0]);
  if (n != static_cast<ssize_t>(sizeof error)) return {pid, 0};
  wait_child(pid, nullptr);
  return {-1, error};
}

int PreparedChild::start_shared(void* arg) {
  const auto* start = static_cast<const SharedStart*>(arg);
  // This process's handlers would run here, in the parent's memory: the defaults instead. Which
  // are set is read here, in the child: its own copy of the handlers, as they were at the clone
  // (another thread of the parent may change the parent's since).
  if (std::uint64_t caught = 0; caught_signals(caught)) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG && sig <= 64; ++sig) {
      if ((caught >> (sig - 1)) & 1u) sigaction(sig, &dfl, nullptr);
    }
    start->child->in_child(start->error_pipe, start->mask);
  }
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction current {};
    if (sigaction(sig, nullptr, &current) != 0) continue;
    const bool handled = (current.sa_flags & SA_SIGINFO) != 0
                             ? current.sa_sigaction != nullptr
                             : current.sa_handler != SIG_DFL && current.sa_handler != SIG_IGN;
    if (handled) {
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      sigaction(sig, &dfl, nullptr);
    }
  }
  start->child->in_child(start->error_pipe, start->mask);
}

// The child before its exec: async-signal-safe calls only (it may share the parent's memory).
// `mask`: the signal mask to give it unless spec_.signal_mask says one (nullptr: keep its own).
void PreparedChild::in_child(int error_pipe, const sigset_t* mask) const {
  if (spec_.dies_with_parent) {
    // It dies with its parent, however that ends (the signal survives execve).
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent_) _exit(127);
  }
  if (spec_.own_group) setpgid(0, 0);
  bool ready = true;
  for (const auto& [from, to] : spec_.descriptors) {
    if (!move_fd(from, to)) {
      ready = false;
      break;
    }
  }
  ready = ready && (spec_.directory.empty() || chdir(spec_.directory.c_str()) == 0);
  ready = ready && (spec_.cpus.empty() || sched_setaffinity(0, sizeof cpus_, &cpus_) == 0);
  if (ready) {
    if (spec_.sigchld) sigaction(SIGCHLD, &*spec_.sigchld, nullptr);
    if (spec_.signal_mask) {
      sigprocmask(SIG_SETMASK, &*spec_.signal_mask, nullptr);
    } else if (mask != nullptr) {
      sigprocmask(SIG_SETMASK, mask, nullptr);
    }
    execve(spec_.program.c_str(), argv_.data(), spec_.environment ? envp_.data() : environ);
  }
  const int e = errno;
  if (error_pipe >= 0) {
    write_all(error_pipe, reinterpret_cast<const char*>(&e), sizeof e);
    _exit(127);
  }
  const std::string& failed = ready ? spec_.exec_failed : spec_.setup_failed;
  char number[16];
  write_all(2, failed.data(), failed.size());
  write_all(2, number, format_number(e, number));
  write_all(2, ")\n", 2);
  _exit(ready ? 127 : 126);
}

Started start_child(ChildSpec spec) {
  return PreparedChild(std::move(spec)).start();
}

pid_t wait_child(pid_t pid, int* status, bool block) {
  for (;;) {
    const pid_t got = waitpid(pid, status, block ? 0 : WNOHANG);
    if (got >= 0 || errno != EINTR) return got;
  }
}

pid_t wait_any_child(int* status, bool block) {
  return wait_child(-1, status, block);
}

int signal_process(pid_t pid, int sig) {
  if (pid <= 0) {  // kill() would take it for a group, or every process
    errno = ESRCH;
    return -1;
  }
  return kill(pid, sig);
}

int signal_group(pid_t group, int sig) {
  if (group <= 0) {
    errno = ESRCH;
    return -1;
  }
  return kill(-group, sig);
}

bool process_exists(pid_t pid) {
  return !(kill(pid, 0) != 0 && errno == ESRCH);
}

pid_t process_group(pid_t pid) {
  return getpgid(pid);
}

int replace_process(const std::string& program, const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& word : args) argv.push_back(const_cast<char*>(word.c_str()));
  argv.push_back(nullptr);
  execv(program.c_str(), argv.data());
  return errno;
}

}  // namespace gpusel::detail
