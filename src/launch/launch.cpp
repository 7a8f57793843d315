// The supervisor of `gpusel run`: one worker per GPU, signals forwarded, failures contained.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

#include "gpusel/error.hpp"
#include "gpusel/launch.hpp"
#include "gpusel/resolve.hpp"
#include "gpusel/spec.hpp"

extern char** environ;

namespace gpusel {
namespace {

using Clock = std::chrono::steady_clock;

bool executable_file(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

// A free TCP port on the loopback interface, for MASTER_PORT.
int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 29500;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  int port = 29500;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

struct Worker {
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  int status = 0;
  int fds[2] = {-1, -1};  // stdout, stderr pipes with --tag-output
  std::string pending[2];
};

std::string status_text(int status) {
  if (WIFSIGNALED(status)) {
    const char* name = sigabbrev_np(WTERMSIG(status));
    return std::string("was killed by signal ") +
           (name ? std::string("SIG") + name : std::to_string(WTERMSIG(status))) + " (status " +
           std::to_string(128 + WTERMSIG(status)) + ")";
  }
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

int exit_code(int status) {
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

void write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

// Writes every complete line of `pending` with the rank's prefix; everything when `flush`.
void emit_lines(Worker& w, int stream, bool flush) {
  std::string& buf = w.pending[stream];
  const std::string prefix = "[rank " + std::to_string(w.rank) + "] ";
  std::string out;
  std::size_t start = 0;
  for (std::size_t nl; (nl = buf.find('\n', start)) != std::string::npos; start = nl + 1) {
    out += prefix + buf.substr(start, nl - start + 1);
  }
  buf.erase(0, start);
  if (flush && !buf.empty()) {
    out += prefix + buf + "\n";
    buf.clear();
  }
  if (!out.empty()) write_all(stream == 0 ? 1 : 2, out);
}

}  // namespace

std::string find_program(const std::string& name) {
  if (name.empty())
    throw bad_input(
        "run: no command given; put it after --, as in: gpusel run --gpu 0,1 -- python3 train.py");
  if (name.find('/') != std::string::npos) {
    if (!executable_file(name)) {
      throw bad_input(
          "run: " + quote_value(name) +
          (access(name.c_str(), F_OK) == 0 ? " is not an executable file" : " does not exist") +
          "; no worker was started");
    }
    return name;
  }
  const char* path = std::getenv("PATH");
  const std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    std::size_t colon = dirs.find(':', start);
    if (colon == std::string::npos) colon = dirs.size();
    std::string dir = dirs.substr(start, colon - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (executable_file(candidate)) return candidate;
    start = colon + 1;
  }
  throw bad_input("run: command " + quote_value(name) + " not found in PATH=" + quote_value(dirs) +
                  "; no worker was started");
}

int launch_workers(const LaunchOptions& options) {
  const std::size_t n = options.gpus.size();
  const std::string program = find_program(options.command.at(0));

  // Everything the children need is built before the first fork.
  std::vector<std::string> base;
  const char* kOwn[] = {
      "RANK=", "LOCAL_RANK=", "WORLD_SIZE=", "LOCAL_WORLD_SIZE=", "GPUSEL_GPUS=", "GPUSEL_GPU="};
  const bool set_visible = options.set_visible != SetVisible::None;
  for (char** e = environ; *e != nullptr; ++e) {
    bool own = false;
    for (const char* k : kOwn) own = own || std::strncmp(*e, k, std::strlen(k)) == 0;
    if (set_visible && std::strncmp(*e, "CUDA_VISIBLE_DEVICES=", 21) == 0) own = true;
    if (!own) base.emplace_back(*e);
  }
  if (std::getenv("MASTER_ADDR") == nullptr) base.emplace_back("MASTER_ADDR=127.0.0.1");
  if (std::getenv("MASTER_PORT") == nullptr)
    base.push_back("MASTER_PORT=" + std::to_string(free_port()));
  base.push_back("WORLD_SIZE=" + std::to_string(n));
  base.push_back("LOCAL_WORLD_SIZE=" + std::to_string(n));
  base.push_back("GPUSEL_GPUS=" + join_entries(options.gpus));
  if (options.set_visible == SetVisible::Job)
    base.push_back("CUDA_VISIBLE_DEVICES=" + join_entries(options.gpus));

  std::vector<std::vector<std::string>> envs(n, base);
  std::vector<std::vector<char*>> envps(n);
  for (std::size_t r = 0; r < n; ++r) {
    envs[r].push_back("RANK=" + std::to_string(r));
    envs[r].push_back("LOCAL_RANK=" + std::to_string(r));
    envs[r].push_back("GPUSEL_GPU=" + options.gpus[r]);
    if (options.set_visible == SetVisible::Own)
      envs[r].push_back("CUDA_VISIBLE_DEVICES=" + options.gpus[r]);
    for (auto& s : envs[r]) envps[r].push_back(s.data());
    envps[r].push_back(nullptr);
  }
  std::vector<std::string> args = options.command;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  // A signal this process was started with ignored (nohup, a background job of a script) stays
  // ignored for the workers too, and is not forwarded.
  sigset_t mask, old_mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) {
    struct sigaction current {};
    sigaction(s, nullptr, &current);
    if (current.sa_handler != SIG_IGN) sigaddset(&mask, s);
  }
  sigprocmask(SIG_BLOCK, &mask, &old_mask);
  const int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) throw failure(std::string("signalfd: ") + std::strerror(errno));

  const pid_t parent = getpid();
  std::vector<Worker> workers(n);
  auto signal_workers = [&](int sig) {
    for (Worker& w : workers) {
      if (w.running) kill(-w.pid, sig);  // the worker's process group: the worker and its children
    }
  };
  for (std::size_t r = 0; r < n; ++r) {
    Worker& w = workers[r];
    w.rank = static_cast<int>(r);
    int out[2] = {-1, -1}, err[2] = {-1, -1};
    if (options.tag_output && (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0)) {
      signal_workers(SIGKILL);
      throw failure(std::string("pipe: ") + std::strerror(errno));
    }
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    for (int c : r < options.cpus.size() ? options.cpus[r] : std::vector<int>{}) CPU_SET(c, &cpus);
    const bool bind = r < options.cpus.size() && !options.cpus[r].empty();
    const pid_t pid = fork();
    if (pid == 0) {
      // The worker dies with gpusel, however gpusel ends (the signal survives execve).
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      setpgid(0, 0);
      int null = open("/dev/null", O_RDONLY);
      if (null >= 0) dup2(null, 0);
      if (options.tag_output) {
        dup2(out[1], 1);
        dup2(err[1], 2);
      }
      if (bind && sched_setaffinity(0, sizeof cpus, &cpus) != 0) {
        const char msg[] = "gpusel: cannot set the worker's CPU affinity\n";
        write_all(2, msg);
        _exit(126);
      }
      sigprocmask(SIG_SETMASK, &old_mask, nullptr);
      execve(program.c_str(), argv.data(), envps[r].data());
      write_all(2,
                std::string("gpusel: cannot run ") + program + ": " + std::strerror(errno) + "\n");
      _exit(127);
    }
    if (pid < 0) {
      const int e = errno;
      signal_workers(SIGKILL);
      throw failure(std::string("cannot start worker ") + std::to_string(r) + ": " +
                    std::strerror(e));
    }
    setpgid(pid, pid);
    w.pid = pid;
    w.running = true;
    if (options.tag_output) {
      close(out[1]);
      close(err[1]);
      w.fds[0] = out[0];
      w.fds[1] = err[0];
    }
  }

  std::size_t running = n;
  int first_failure = -1;
  // When to SIGKILL what is left after a failure, and how long to wait for output after the end.
  Clock::time_point kill_at{}, drain_until{};
  bool kill_pending = false, draining = false;
  while (true) {
    std::vector<pollfd> fds{{sfd, POLLIN, 0}};
    std::vector<std::pair<std::size_t, int>> owners;
    for (std::size_t r = 0; r < n; ++r) {
      for (int s = 0; s < 2; ++s) {
        if (workers[r].fds[s] >= 0) {
          fds.push_back({workers[r].fds[s], POLLIN, 0});
          owners.emplace_back(r, s);
        }
      }
    }
    if (running == 0) {
      // Every worker has ended; output still held by their children gets a moment, no more.
      if (owners.empty()) break;
      if (!draining) {
        drain_until = Clock::now() + std::chrono::milliseconds(200);
        draining = true;
      }
      if (Clock::now() >= drain_until) break;
    }
    int timeout = -1;
    auto until = [&](Clock::time_point t) {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count();
      return static_cast<int>(std::max<long long>(0, ms) + 1);
    };
    if (kill_pending) timeout = until(kill_at);
    if (draining)
      timeout = timeout < 0 ? until(drain_until) : std::min(timeout, until(drain_until));
    if (poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) break;

    if (fds[0].revents & POLLIN) {
      signalfd_siginfo info{};
      while (read(sfd, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
        if (info.ssi_signo != SIGCHLD) {
          signal_workers(static_cast<int>(info.ssi_signo));
          continue;
        }
        int status = 0;
        for (pid_t pid; (pid = waitpid(-1, &status, WNOHANG)) > 0;) {
          for (Worker& w : workers) {
            if (w.pid != pid || !w.running) continue;
            w.running = false;
            w.status = status;
            --running;
            if (exit_code(status) != 0 && first_failure < 0) {
              first_failure = w.rank;
              signal_workers(SIGTERM);
              kill_at = Clock::now() + std::chrono::milliseconds(
                                           static_cast<long long>(options.grace_seconds * 1000));
              kill_pending = true;
            }
          }
        }
      }
    }
    for (std::size_t i = 1; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      auto [r, s] = owners[i - 1];
      char buf[65536];
      ssize_t got = read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        workers[r].pending[s].append(buf, static_cast<std::size_t>(got));
        emit_lines(workers[r], s, false);
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        emit_lines(workers[r], s, true);
        close(workers[r].fds[s]);
        workers[r].fds[s] = -1;
      }
    }
    if (kill_pending && Clock::now() >= kill_at) {
      signal_workers(SIGKILL);
      kill_pending = false;
    }
  }
  for (Worker& w : workers) {
    for (int s = 0; s < 2; ++s) {
      if (w.fds[s] >= 0) {
        emit_lines(w, s, true);
        close(w.fds[s]);
      }
    }
  }
  close(sfd);
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);

  if (first_failure < 0) return 0;
  const Worker& bad = workers[static_cast<std::size_t>(first_failure)];
  write_all(2, "gpusel: rank " + std::to_string(bad.rank) + " (GPU " +
                   options.gpus[static_cast<std::size_t>(bad.rank)] + ") " +
                   status_text(bad.status) + "; " +
                   (n == 1 ? std::string("it was the only worker")
                           : "the other " + std::to_string(n - 1) + " worker" +
                                 (n == 2 ? " was" : "s were") + " stopped") +
                   "\n");
  return exit_code(bad.status);
}

}  // namespace gpusel
