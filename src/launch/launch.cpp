// The supervisor of `gpusel run`: one worker per GPU, signals forwarded, failures contained.
#include <arpa/inet.h>
#include <dirent.h>
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

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "ancestry.hpp"
#include "file_text.hpp"
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

using Clock = detail::LaunchClock;

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

struct Stream {
  int fd = -1;  // the read end of the worker's stdout or stderr pipe (--tag-output)
  detail::LineTagger tagger{std::string()};
};

struct Worker {
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  int status = 0;
  Stream streams[2];  // stdout, stderr
};

void close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

// This process's children, from /proc/self/task/*/children (every thread's), else by scanning
// /proc for processes whose parent is this one; nullopt where neither can be read (no /proc).
std::optional<std::vector<pid_t>> listed_children() {
  std::vector<pid_t> out;
  bool listed = false;
  if (DIR* tasks = opendir("/proc/self/task")) {
    while (dirent* t = readdir(tasks)) {
      if (t->d_name[0] == '.') continue;
      const std::optional<std::string> text =
          detail::read_file_text(std::string("/proc/self/task/") + t->d_name + "/children");
      if (!text) continue;
      listed = true;
      // "123 456 ": the pids, blank-separated.
      std::size_t at = 0;
      for (std::string_view word; !(word = detail::next_word(*text, at)).empty();) {
        long pid = 0;
        const char* end = word.data() + word.size();
        const auto [ptr, ec] = std::from_chars(word.data(), end, pid);
        if (ec != std::errc() || ptr != end) break;
        out.push_back(static_cast<pid_t>(pid));
      }
    }
    closedir(tasks);
  }
  if (listed) return out;
  const pid_t self = getpid();
  // An empty /proc (procfs not mounted there) lists nothing, which is not "no children".
  if (access("/proc/self/stat", R_OK) != 0) return std::nullopt;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return std::nullopt;
  while (dirent* e = readdir(proc)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    const int pid = std::atoi(e->d_name);
    if (detail::parent_of(pid) == self) out.push_back(pid);
  }
  closedir(proc);
  return out;
}

std::vector<pid_t> own_children() {
  return listed_children().value_or(std::vector<pid_t>{});
}

// "pid 4242 `sleep 100`": a process, for a message.
std::string describe_process(pid_t pid) {
  std::vector<std::string> words = detail::process_args(static_cast<int>(pid), 80);
  while (!words.empty() && words.back().empty()) words.pop_back();  // trailing empty arguments
  std::string args;
  for (std::size_t i = 0; i < words.size(); ++i) args += (i == 0 ? "" : " ") + words[i];
  std::string out = "pid " + std::to_string(pid);
  return args.empty() ? out : out + " `" + detail::printable(args) + "`";
}

// Everything launch_workers sets up, undone however it ends (return or exception): workers still
// running are killed and reaped, every descriptor is closed, and the signal mask and SIGCHLD's
// disposition are restored.
struct Supervision {
  explicit Supervision(std::size_t n) : workers(n) {}
  Supervision(const Supervision&) = delete;
  Supervision& operator=(const Supervision&) = delete;
  ~Supervision() {
    for (Worker& w : workers) {
      if (w.running) {
        detail::signal_group(w.pid, SIGKILL);
        detail::signal_process(w.pid, SIGKILL);
        detail::wait_child(w.pid, nullptr);
        w.running = false;
      }
      for (Stream& s : w.streams) close_fd(s.fd);
    }
    if (reaping) {
      // Whatever the workers left behind goes too, and is reaped (where the loop ended early).
      while (true) {
        const std::vector<pid_t> left = orphans();
        if (left.empty()) break;
        for (pid_t pid : left) {
          detail::signal_process(pid, SIGKILL);
          if (detail::process_group(pid) == pid) detail::signal_group(pid, SIGKILL);
        }
        for (pid_t pid : left) detail::wait_child(pid, nullptr);
      }
      prctl(PR_SET_CHILD_SUBREAPER, was_subreaper);
    }
    for (int& fd : child_ends) close_fd(fd);
    close_fd(sfd);
    close_fd(dev_null);
    if (masked) sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    if (chld_reset) sigaction(SIGCHLD, &old_chld, nullptr);
  }

  std::vector<Worker> workers;
  int child_ends[2] = {-1, -1};  // the write ends of the worker being started
  int sfd = -1;
  int dev_null = -1;
  sigset_t old_mask{};
  bool masked = false;
  struct sigaction old_chld {};
  bool chld_reset = false;
  bool reaping = false;  // this process is the workers' subreaper (LaunchOptions::reap_orphans)
  int was_subreaper = 0;
  // Children this process had before the workers (say, from a shell that exec'd it): theirs to
  // reap, never signalled or waited for here.
  std::vector<pid_t> foreign;
  bool foreign_known = false;  // /proc listed them (no /proc: unknown, so not taken as none)

  // This process's children that are neither workers still running nor foreign: the processes
  // the workers left behind, which came to it as their subreaper.
  std::vector<pid_t> orphans() const {
    std::vector<pid_t> out;
    for (pid_t pid : own_children()) {
      if (std::find(foreign.begin(), foreign.end(), pid) != foreign.end()) continue;
      if (std::any_of(workers.begin(), workers.end(),
                      [pid](const Worker& w) { return w.running && w.pid == pid; })) {
        continue;
      }
      out.push_back(pid);
    }
    return out;
  }
};

// The rank a process the workers left behind came from: the worker that leads its process group
// (each worker leads a group of its own, and `cmd &` in a script stays in it), else the LOCAL_RANK
// it started with, when its GPUSEL_GPU is that rank's; -1 when neither tells.
int left_behind_rank(pid_t pid, const std::vector<Worker>& workers, const LaunchOptions& options,
                     const detail::JobPlan& job) {
  const pid_t group = detail::process_group(pid);
  for (const Worker& w : workers) {
    if (group > 0 && w.pid == group) return w.rank;
  }
  const auto env = detail::initial_environment(pid);
  if (!env) return -1;
  const auto rank = env->find("LOCAL_RANK"), gpu = env->find("GPUSEL_GPU");
  if (rank == env->end() || gpu == env->end()) return -1;
  const std::optional<int> r = detail::read_rank_number(rank->second);
  if (!r || static_cast<std::size_t>(*r) >= job.workers ||
      gpu->second != detail::gpu_of(options, job, static_cast<std::size_t>(*r)))
    return -1;
  return *r;
}

// Whose `pid` is: a worker's, or a descendant's of one (its parents lead to the worker), or one
// the workers left behind, which came to `self` as their subreaper, or its descendant's. nullopt:
// not the job's (another job's, `self` itself, or a child `self` had before the workers).
std::optional<detail::JobMember> job_member(pid_t pid, pid_t self, const Supervision& sup,
                                            const LaunchOptions& options,
                                            const detail::JobPlan& job) {
  const pid_t start = pid;
  for (int depth = 0; depth < 64 && pid > 1 && pid != self; ++depth) {
    for (const Worker& w : sup.workers) {
      if (w.pid == pid) return detail::JobMember{w.rank, false};
    }
    const pid_t up = detail::parent_of(pid);
    if (up == self) {
      if (!sup.reaping ||
          std::find(sup.foreign.begin(), sup.foreign.end(), pid) != sup.foreign.end())
        return std::nullopt;
      int rank = left_behind_rank(start, sup.workers, options, job);
      if (rank < 0 && pid != start) rank = left_behind_rank(pid, sup.workers, options, job);
      return detail::JobMember{rank, true};
    }
    pid = up;
  }
  return std::nullopt;
}

std::string status_text(int status) {
  if (WIFSIGNALED(status)) {
    const char* name = sigabbrev_np(WTERMSIG(status));
    return std::string("was killed by signal ") +
           (name ? std::string("SIG") + name : std::to_string(WTERMSIG(status))) + " (status " +
           std::to_string(128 + WTERMSIG(status)) + ")";
  }
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

std::string signal_name(int sig) {
  const char* name = sigabbrev_np(sig);
  return name ? std::string("SIG") + name : "signal " + std::to_string(sig);
}

int exit_code(int status) {
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

void write_all(int fd, const char* data, std::size_t size) {
  std::size_t done = 0;
  while (done < size) {
    ssize_t n = write(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

void write_all(int fd, const std::string& text) {
  write_all(fd, text.data(), text.size());
}

}  // namespace

std::string find_program(const std::string& name) {
  if (name.empty())
    throw bad_input(detail::reader_text("run: no command given; put it after --, as in: gpusel run "
                                        "--gpu 0,1 -- python3 train.py",
                                        "no program to start: LaunchOptions::command is empty; its "
                                        "first word names the program"),
                    about(Subject::Command, {{"command", ""}, {"reason", "empty"}}));
  if (name.find('/') != std::string::npos) {
    if (!executable_file(name)) {
      throw bad_input(
          "run: " + detail::quote_value(name) +
              (access(name.c_str(), F_OK) == 0 ? " is not an executable file" : " does not exist") +
              "; no worker was started",
          about(Subject::Command,
                {{"command", name},
                 {"reason", access(name.c_str(), F_OK) == 0 ? "not-executable" : "not-found"}}));
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
  throw bad_input(
      "run: command " + detail::quote_value(name) +
          " not found in PATH=" + detail::quote_value(dirs) + "; no worker was started",
      about(Subject::Command, {{"command", name}, {"reason", "not-found"}, {"PATH", dirs}}));
}

int launch_workers(const LaunchOptions& options) {
  return detail::launch_program(options, find_program(options.command.at(0)));
}

int launch_workers(const LaunchOptions& options, const std::string& program) {
  return detail::launch_program(options, program);
}

GPUSEL_END_NAMESPACE

namespace gpusel::detail {

namespace {

// What exec needs for each rank, built before the first worker starts: each rank's environment
// (gpusel's own, less the names it sets itself, plus the job's and the rank's).
struct ExecPlan {
  std::vector<std::vector<std::string>> envs;
};

void plan_exec(const LaunchOptions& options, const JobPlan& job, ExecPlan& plan) {
  const std::size_t n = job.workers;
  const WorkerEnvironments vars = worker_environments(
      options, job,
      [](const std::string& name) -> std::optional<std::string> {
        const char* value = std::getenv(name.c_str());
        return value ? std::optional<std::string>(value) : std::nullopt;
      },
      free_port);
  std::vector<std::string> job_vars;
  for (const auto& [name, value] : vars.job) job_vars.push_back(name + "=" + value);
  const std::vector<std::string> base = environment_with(vars.removed, job_vars);
  plan.envs.assign(n, base);
  for (std::size_t r = 0; r < n; ++r) {
    for (const auto& [name, value] : vars.ranks[r]) plan.envs[r].push_back(name + "=" + value);
  }
}

// Signals as the supervision loop takes them: SIGCHLD at its default (an ignored SIGCHLD would
// reap the workers behind gpusel's back), the forwarded signals and job control through a
// signalfd (a signal gpusel was started with ignored, by nohup or a script's background job,
// stays ignored for the workers too and is not forwarded), and, with reap_orphans, this process
// as the workers' subreaper. The Supervision undoes each.
void take_signals(const LaunchOptions& options, Supervision& sup) {
  struct sigaction chld {};
  sigaction(SIGCHLD, nullptr, &chld);
  if (chld.sa_handler == SIG_IGN) {
    sup.old_chld = chld;
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGCHLD, &dfl, nullptr);
    sup.chld_reset = true;
  }
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  // Job control: Ctrl-Z (SIGTSTP) reaches gpusel alone (workers run in process groups of their
  // own), so gpusel stops the workers and then itself; SIGCONT resumes them.
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP}) {
    struct sigaction current {};
    sigaction(s, nullptr, &current);
    if (current.sa_handler != SIG_IGN) sigaddset(&mask, s);
  }
  sigaddset(&mask, SIGCONT);
  sigprocmask(SIG_BLOCK, &mask, &sup.old_mask);
  sup.masked = true;
  sup.sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sup.sfd < 0) throw failure(std::string("signalfd: ") + std::strerror(errno));
  sup.dev_null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (sup.dev_null < 0)
    throw failure(std::string("cannot open /dev/null: ") + std::strerror(errno));
  if (options.reap_orphans) {
    prctl(PR_GET_CHILD_SUBREAPER, &sup.was_subreaper);
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) == 0) {
      sup.reaping = true;
      const std::optional<std::vector<pid_t>> before = listed_children();
      sup.foreign_known = before.has_value();
      sup.foreign = before.value_or(std::vector<pid_t>{});
    }
  }
}

// Starts every worker, each the leader of a process group of its own, its stdin /dev/null, its
// stdout and stderr the pipes of --tag-output, dying with gpusel, with the signal mask and
// SIGCHLD's disposition gpusel was started with; a worker that cannot be set up or run says so
// itself, and exits with 126 or 127.
void start_workers(const LaunchOptions& options, const std::string& program, ExecPlan& exec,
                   Supervision& sup) {
  const std::size_t n = sup.workers.size();
  // Messages the children write after fork (no allocation there).
  std::vector<std::string> setup_failed(n), exec_failed(n);
  for (std::size_t r = 0; r < n; ++r) {
    sup.workers[r].rank = static_cast<int>(r);
    for (Stream& stream : sup.workers[r].streams) stream.tagger = LineTagger(tag_prefix(r));
    setup_failed[r] = "gpusel: rank " + std::to_string(r) +
                      ": cannot set up the worker's descriptors or CPU affinity (errno ";
    exec_failed[r] = "gpusel: rank " + std::to_string(r) + ": cannot run " + program + " (errno ";
  }
  for (std::size_t r = 0; r < n; ++r) {
    Worker& w = sup.workers[r];
    if (options.tag_output) {
      for (int s = 0; s < 2; ++s) {
        int ends[2];
        if (pipe2(ends, O_CLOEXEC) != 0)
          throw failure(std::string("cannot start worker ") + std::to_string(r) +
                        ": pipe: " + std::strerror(errno));
        w.streams[s].fd = ends[0];
        sup.child_ends[s] = ends[1];
      }
    }
    ChildSpec spec;
    spec.program = program;
    spec.args = options.command;
    spec.environment = std::move(exec.envs[r]);
    spec.descriptors.emplace_back(sup.dev_null, 0);
    if (sup.child_ends[0] >= 0) {
      spec.descriptors.emplace_back(sup.child_ends[0], 1);
      spec.descriptors.emplace_back(sup.child_ends[1], 2);
    }
    spec.own_group = true;
    spec.dies_with_parent = true;
    if (r < options.cpus.size()) spec.cpus = options.cpus[r];
    spec.signal_mask = sup.old_mask;
    if (sup.chld_reset) spec.sigchld = sup.old_chld;
    spec.setup_failed = std::move(setup_failed[r]);
    spec.exec_failed = std::move(exec_failed[r]);
    const Started started = PreparedChild(std::move(spec)).start();
    if (started.error != 0)
      throw failure("cannot start worker " + std::to_string(r) + ": " +
                    std::strerror(started.error));
    w.pid = started.pid;
    w.running = true;
    for (int& fd : sup.child_ends) close_fd(fd);
  }
}

int out_fd(int stream) {
  return stream == 0 ? 1 : 2;
}

// The supervision of started workers until the job has ended: the loop waits for an event (a
// signal, output, the next timer), and each step hands it to the part that decides (StopPolicy,
// PlacementCheck in launch_core) or acts (signalling the job, reading output, reaping).
class PosixSupervisor {
 public:
  PosixSupervisor(const LaunchOptions& options, const JobPlan& job, Supervision& sup, pid_t parent)
      : options_(options),
        job_(job),
        sup_(sup),
        parent_(parent),
        policy_(job.workers, job.grace),
        check_(options, job, Clock::now()),
        children_left_(sup.reaping) {}

  // Runs the loop to the job's end; returns the run's exit status, its summary said.
  int run();

 private:
  struct Polled {
    std::vector<pollfd> fds;                          // [0]: the signalfd, then output pipes
    std::vector<std::pair<std::size_t, int>> owners;  // each pipe's rank and stream
  };
  Polled what_to_poll() const;
  bool settle();  // false once the job has ended and its output is drained
  int poll_timeout() const;
  void on_signals();
  void reap();
  void read_output(const Polled& polled);
  void look_at_placement();
  void worker_ended(Worker& w, int status);
  void signal_workers(int sig);
  void signal_orphans(int sig);
  void signal_job(int sig) {
    signal_workers(sig);
    signal_orphans(sig);
  }
  void stop_job();
  void say(const std::string& text) const;
  void tell_ended();
  int finish();

  const LaunchOptions& options_;
  const JobPlan& job_;
  Supervision& sup_;
  const pid_t parent_;
  StopPolicy policy_;  // who failed first, the user's signal, when to SIGKILL what is left
  PlacementCheck check_;
  // After the end: output still held by the workers' children gets 200 ms.
  bool draining_ = false;
  Clock::time_point drain_until_{};
  // The workers' orphans (with reap_orphans): whether any child is left, and what was stopped.
  bool children_left_;
  bool orphans_stopping_ = false;
  Clock::time_point orphan_kill_at_{};
  std::size_t orphans_count_ = 0;
  std::vector<std::string> orphans_seen_;
  bool ended_told_ = false;  // options_.on_ended called
};

void PosixSupervisor::signal_workers(int sig) {
  for (Worker& w : sup_.workers) {
    if (w.running) signal_group(w.pid, sig);  // the worker's process group: it and its children
  }
}

// Processes the workers left behind, now this process's children (as their subreaper), and the
// process groups they lead.
void PosixSupervisor::signal_orphans(int sig) {
  if (!sup_.reaping) return;
  for (pid_t pid : sup_.orphans()) {
    signal_process(pid, sig);
    if (process_group(pid) == pid) signal_group(pid, sig);
  }
}

// Ctrl-Z: the whole job stops, then gpusel itself (as a shell's job); on SIGCONT, all go on.
void PosixSupervisor::stop_job() {
  signal_job(SIGSTOP);
  sigset_t tstp;
  sigemptyset(&tstp);
  sigaddset(&tstp, SIGTSTP);
  sigprocmask(SIG_UNBLOCK, &tstp, nullptr);
  raise(SIGTSTP);  // stops here until continued (not at all in an orphaned process group)
  sigprocmask(SIG_BLOCK, &tstp, nullptr);
  signal_job(SIGCONT);
}

void PosixSupervisor::say(const std::string& text) const {
  if (options_.on_note) {
    options_.on_note(text);
  } else {
    write_all(2, "gpusel: note: " + text + "\n");
  }
}

void PosixSupervisor::look_at_placement() {
  const std::string note = check_.look(
      [&](unsigned p) {
        const auto pid = static_cast<pid_t>(p);
        ProcessFacts facts;
        facts.exists = process_exists(pid);
        if (!facts.exists) return facts;
        facts.member = job_member(pid, parent_, sup_, options_, job_);
        if (facts.member) facts.description = describe_process(pid);
        return facts;
      },
      Clock::now());
  if (!note.empty()) say(note);
  if (!check_.violation().empty() && policy_.placement_violation(check_.violation(), Clock::now()))
    signal_job(SIGTERM);
}

void PosixSupervisor::worker_ended(Worker& w, int status) {
  w.running = false;
  w.status = status;
  if (policy_.worker_ended(static_cast<std::size_t>(w.rank), exit_code(w.status) != 0,
                           Clock::now()))
    signal_job(SIGTERM);
}

PosixSupervisor::Polled PosixSupervisor::what_to_poll() const {
  Polled p;
  p.fds.push_back({sup_.sfd, POLLIN, 0});
  for (std::size_t r = 0; r < sup_.workers.size(); ++r) {
    for (int s = 0; s < 2; ++s) {
      if (sup_.workers[r].streams[s].fd >= 0) {
        p.fds.push_back({sup_.workers[r].streams[s].fd, POLLIN, 0});
        p.owners.emplace_back(r, s);
      }
    }
  }
  return p;
}

// Once every worker has ended: processes they started that live on are stopped as the workers
// were (SIGTERM, SIGKILL after the grace period) and waited for; then output still held by
// their children gets a moment, no more. False when the loop is done.
bool PosixSupervisor::settle() {
  if (policy_.running() > 0) return true;
  if (children_left_) {
    if (!orphans_stopping_) {
      for (pid_t pid : sup_.orphans()) {
        if (orphans_seen_.size() < 4) orphans_seen_.push_back(describe_process(pid));
        ++orphans_count_;
      }
      signal_orphans(SIGTERM);
      orphans_stopping_ = true;
      orphan_kill_at_ = Clock::now() + job_.grace;
    } else if (Clock::now() >= orphan_kill_at_) {
      signal_orphans(SIGKILL);  // again each time: their own orphans come to gpusel in turn
    }
    return true;
  }
  const bool output_open =
      std::any_of(sup_.workers.begin(), sup_.workers.end(),
                  [](const Worker& w) { return w.streams[0].fd >= 0 || w.streams[1].fd >= 0; });
  if (!output_open) return false;
  if (!draining_) {
    drain_until_ = Clock::now() + std::chrono::milliseconds(200);
    draining_ = true;
  }
  return Clock::now() < drain_until_;
}

// Until the next timer: the kill, the next look, the orphans' kill, the drain's end, a partial
// line due; -1 (none) waits for an event alone.
int PosixSupervisor::poll_timeout() const {
  std::optional<Clock::time_point> wake;
  auto wake_by = [&](Clock::time_point t) { wake = wake ? std::min(*wake, t) : t; };
  if (const auto kill_at = policy_.kill_at()) wake_by(*kill_at);
  // Looked at while any process of the job runs: a worker, or one the workers left behind.
  if (check_.looking() && (policy_.running() > 0 || children_left_)) wake_by(check_.next());
  // Past that time, each orphan's end (SIGCHLD) wakes gpusel to kill what came to it next.
  if (orphans_stopping_ && children_left_ && Clock::now() < orphan_kill_at_)
    wake_by(orphan_kill_at_);
  if (draining_) wake_by(drain_until_);
  for (const Worker& w : sup_.workers) {
    for (const Stream& s : w.streams) {
      if (const auto due = s.tagger.due()) wake_by(*due);
    }
  }
  if (!wake) return -1;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(*wake - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(ms, 0, 1 << 30));
}

void PosixSupervisor::on_signals() {
  signalfd_siginfo info{};
  while (read(sup_.sfd, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
    const int sig = static_cast<int>(info.ssi_signo);
    if (sig == SIGTSTP) {
      stop_job();
    } else if (sig == SIGCONT) {
      signal_job(SIGCONT);
    } else if (sig != SIGCHLD) {
      // The user's signal: forwarded, and the run ends with it whatever the workers do.
      policy_.user_signal(sig, Clock::now());
      signal_job(sig);
    } else {
      reap();
    }
  }
}

void PosixSupervisor::reap() {
  if (sup_.reaping && sup_.foreign_known && sup_.foreign.empty()) {
    // As the subreaper, with no child but the job's: whatever ended is reaped by one wait for
    // any child, and the kernel's "no child left" (ECHILD) says the whole job has ended, with no
    // look at /proc/self/task/*/children. (Without /proc, whether children came before the
    // workers is unknown: those would be waited for too, and could not be told apart.)
    for (;;) {
      int status = 0;
      const pid_t got = wait_any_child(&status, false);
      if (got <= 0) {
        children_left_ = got == 0 || errno != ECHILD;
        return;
      }
      for (Worker& w : sup_.workers) {
        if (w.running && w.pid == got) worker_ended(w, status);
      }
    }
  }
  if (sup_.reaping) {
    // As the subreaper: the workers, and the orphans that came to gpusel (by pid, so that
    // children gpusel had before them stay for their owner).
    for (Worker& w : sup_.workers) {
      int status = 0;
      if (w.running && wait_child(w.pid, &status, false) == w.pid) worker_ended(w, status);
    }
    for (pid_t pid : sup_.orphans()) wait_child(pid, nullptr, false);
    children_left_ = policy_.running() > 0 || !sup_.orphans().empty();
    return;
  }
  // Only gpusel's own workers: a host program's other children are its own to reap.
  for (Worker& w : sup_.workers) {
    if (!w.running) continue;
    int status = 0;
    const pid_t got = wait_child(w.pid, &status, false);
    if (got == 0 || (got < 0 && errno != ECHILD)) continue;
    // ECHILD: reaped by someone else, status unknown.
    worker_ended(w, got == w.pid ? status : 0);
  }
}

void PosixSupervisor::read_output(const Polled& polled) {
  const Clock::time_point now = Clock::now();
  for (std::size_t i = 1; i < polled.fds.size(); ++i) {
    if (!(polled.fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    auto [r, s] = polled.owners[i - 1];
    Stream& stream = sup_.workers[r].streams[s];
    char buf[65536];
    ssize_t got = read(stream.fd, buf, sizeof buf);
    if (got > 0) {
      write_all(out_fd(s), stream.tagger.feed({buf, static_cast<std::size_t>(got)}, now));
    } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
      write_all(out_fd(s), stream.tagger.flush());
      close_fd(stream.fd);
    }
  }
  for (Worker& w : sup_.workers) {
    for (int s = 0; s < 2; ++s) write_all(out_fd(s), w.streams[s].tagger.flush_due(now));
  }
}

int PosixSupervisor::run() {
  while (settle()) {
    Polled polled = what_to_poll();
    if (poll(polled.fds.data(), polled.fds.size(), poll_timeout()) < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      // The Supervision's destructor kills and reaps the workers.
      throw failure(std::string("poll: ") + std::strerror(e) + "; the workers were killed");
    }
    if (polled.fds[0].revents & POLLIN) on_signals();
    tell_ended();
    read_output(polled);
    if (check_.looking() && (policy_.running() > 0 || children_left_) &&
        Clock::now() >= check_.next())
      look_at_placement();
    if (policy_.kill_due(Clock::now())) {
      for (const Worker& w : sup_.workers) policy_.count_killed(w.running ? 1 : 0);
      signal_job(SIGKILL);
    }
  }
  tell_ended();
  return finish();
}

// Once no process of the job is left (every worker, and with reap_orphans every process they
// left behind, has exited and been reaped): options_.on_ended, at once, before the last of their
// output is drained and the summary written, so that leases held for the job go without waiting
// for either.
void PosixSupervisor::tell_ended() {
  if (ended_told_ || policy_.running() > 0 || children_left_) return;
  ended_told_ = true;
  if (options_.on_ended) options_.on_ended();
}

// The words at the end: the orphans stopped, the rest of the output, the summary.
int PosixSupervisor::finish() {
  if (orphans_count_ > 0) {
    std::string which;
    for (const std::string& o : orphans_seen_) which += (which.empty() ? "" : ", ") + o;
    if (orphans_count_ > orphans_seen_.size()) which += ", ...";
    const bool one = orphans_count_ == 1;
    write_all(2, "gpusel: " + std::to_string(orphans_count_) + " process" + (one ? "" : "es") +
                     " the workers left running (" + which + (one ? ") was" : ") were") +
                     " stopped with the job; its GPUs stayed leased until " +
                     (one ? "it" : "they") + " exited\n");
  }
  for (Worker& w : sup_.workers) {
    for (int s = 0; s < 2; ++s) write_all(out_fd(s), w.streams[s].tagger.flush());
  }
  EndWords words;
  if (const auto bad = policy_.first_failure()) {
    words.failed_gpu = gpu_of(options_, job_, *bad);
    words.failed_how = status_text(sup_.workers[*bad].status);
    words.failed_code = exit_code(sup_.workers[*bad].status);
  }
  if (policy_.stop_signal() != 0) words.signal = signal_name(policy_.stop_signal());
  words.forwarded = "it";
  words.killed_one = words.killed_several = "got SIGKILL";
  const Summary summary = summarize(policy_, words);
  write_all(2, summary.text);
  return summary.exit_code;
}

}  // namespace

int launch_program(const LaunchOptions& options, const std::string& program) {
  const JobPlan job = plan_job(options);
  ExecPlan exec;
  plan_exec(options, job, exec);
  Supervision sup(job.workers);
  take_signals(options, sup);
  const pid_t parent = getpid();
  start_workers(options, program, exec, sup);
  if (options.on_started) {
    std::vector<int> pids;
    for (const Worker& w : sup.workers) pids.push_back(static_cast<int>(w.pid));
    options.on_started(pids);
  }
  return PosixSupervisor(options, job, sup, parent).run();
}

}  // namespace gpusel::detail
