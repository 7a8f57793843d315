// Picking free GPUs and leasing them, with an arrival-order queue for those who wait.
#include "gpusel/acquire.hpp"

#ifdef _WIN32
#include <filesystem>

#include "win_lock.hpp"
#else
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>

#include "gpusel/error.hpp"
#include "gpusel/nvml.hpp"
#include "gpusel/resolve.hpp"
#include "gpusel/spec.hpp"

GPUSEL_BEGIN_NAMESPACE

// "pid 1234 (user ana, command `python train.py`, since 10:02)": what list, doctor and a refused
// request say of a lease's holder, the same on every platform.
std::string describe_holder(const LeaseHolder& holder) {
  std::string out = "pid " + std::to_string(holder.pid);
  std::string details;
  if (!holder.user.empty()) details += "user " + holder.user;
  if (!holder.command.empty()) {
    details += (details.empty() ? "" : ", ") + std::string("command `") + holder.command + "`";
  }
  if (!holder.started.empty()) {
    details += (details.empty() ? "" : ", ") + std::string("since ") + holder.started;
  }
  return details.empty() ? out : out + " (" + details + ")";
}

namespace {

using Clock = std::chrono::steady_clock;

#ifdef _WIN32
// Windows: the same queue, with LockFileEx locks (win_lock.hpp) for flock.
class Ticket {
 public:
  explicit Ticket(const std::string& lease_dir) {
    dir_ = lease_dir + "\\queue";
    check_lease_directory(dir_);
    const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    char name[64];
    std::snprintf(name, sizeof name, "%020lld-%lu", static_cast<long long>(now),
                  static_cast<unsigned long>(GetCurrentProcessId()));
    name_ = name;
    std::string error;
    file_ = detail::win::open_lock_file(dir_ + "\\" + name_, true, error);
    if (!file_ || !detail::win::try_lock(file_.get(), true)) {
      throw failure("cannot join the queue of waiting jobs in " + dir_ + ": " +
                    (error.empty() ? "cannot lock the ticket" : error));
    }
  }
  Ticket(const Ticket&) = delete;
  Ticket& operator=(const Ticket&) = delete;
  ~Ticket() {
    file_.reset();
    std::error_code ec;
    std::filesystem::remove(detail::win::widen(dir_ + "\\" + name_), ec);
  }

  // True when no live ticket is older than this one.
  bool first() const {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(detail::win::widen(dir_), ec)) {
      const std::string other = detail::win::narrow(e.path().filename().wstring());
      if (other.empty() || other[0] == '.' || other >= name_) continue;
      std::string error;
      detail::win::Handle h =
          detail::win::open_lock_file(detail::win::narrow(e.path().wstring()), false, error);
      if (!h) continue;
      if (!detail::win::try_lock(h.get(), false)) return false;  // its holder lives
      detail::win::unlock(h.get());
      h.reset();
      std::filesystem::remove(e.path(), ec);  // a dead ticket
    }
    return true;
  }

 private:
  std::string dir_, name_;
  detail::win::Handle file_;
};
#else
// A place in the queue of waiters: a locked ticket file named by arrival time. A waiter may try
// only when no live ticket older than its own exists; a ticket whose holder died is unlocked and
// no longer counts.
class Ticket {
 public:
  explicit Ticket(const std::string& lease_dir) {
    dir_ = lease_dir + "/queue";
    check_lease_directory(dir_);
    const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    char name[64];
    std::snprintf(name, sizeof name, "%020lld-%d", static_cast<long long>(now),
                  static_cast<int>(getpid()));
    name_ = name;
    fd_ = open((dir_ + "/" + name_).c_str(), O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
               0444);
    if (fd_ < 0 || flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      throw failure("cannot join the queue of waiting jobs in " + dir_ + ": " +
                    std::string(std::strerror(errno)));
    }
  }
  Ticket(const Ticket&) = delete;
  Ticket& operator=(const Ticket&) = delete;
  ~Ticket() {
    unlink((dir_ + "/" + name_).c_str());
    close(fd_);
  }

  // True when no live ticket is older than this one.
  bool first() const {
    DIR* d = opendir(dir_.c_str());
    if (d == nullptr) return true;
    bool first = true;
    while (dirent* e = readdir(d)) {
      const std::string other = e->d_name;
      if (other.empty() || other[0] == '.' || other >= name_) continue;
      const int fd =
          open((dir_ + "/" + other).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
      if (fd < 0) continue;
      struct stat st {};
      const bool live = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
                        flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
      close(fd);
      if (live) {
        first = false;
        break;
      }
      if (st.st_uid == geteuid()) unlink((dir_ + "/" + other).c_str());  // our own dead ticket
    }
    closedir(d);
    return first;
  }

 private:
  std::string dir_, name_;
  int fd_ = -1;
};
#endif

std::string gpu_label(const GpuInfo& g) {
  return "GPU " + std::to_string(g.index) + (g.uuid.empty() ? std::string() : " (" + g.uuid + ")");
}

// The GPUs free:N may choose from: the whole GPUs CUDA would expose under the preset.
std::vector<bool> eligible_gpus(const std::vector<GpuInfo>& gpus, const CudaEnv& env,
                                const std::string& probe_helper) {
  std::vector<bool> eligible(gpus.size(), false);
  if (!env.visible_devices) {
    for (std::size_t i = 0; i < gpus.size(); ++i) {
      eligible[i] = !gpus[i].failed() && !gpus[i].mig_enabled;
    }
    return eligible;
  }
  VisibleSet vs = model_visible(gpus, env);
  if (!vs.known) {
    const ProbeResult probe = probe_cuda(probe_helper, true);
    const auto order = probe.ok ? cuda_order_from(gpus, probe.devices) : std::nullopt;
    if (!order) {
      throw bad_input("--gpu free:N picks within " + describe_preset(env) + ", but " +
                      vs.unknown_reason + " and asking CUDA failed (" +
                      (probe.ok ? std::string("its devices did not match NVML's") : probe.reason) +
                      "); set CUDA_DEVICE_ORDER=PCI_BUS_ID or give the preset as GPU UUIDs");
    }
    vs = model_visible(gpus, env, &*order);
  }
  for (const VisibleDevice& d : vs.devices) {
    const auto g = static_cast<std::size_t>(d.gpu);
    if (d.mig < 0 && !gpus[g].failed() && !gpus[g].mig_enabled) eligible[g] = true;
  }
  return eligible;
}

struct Attempt {
  std::optional<Acquisition> got;
  std::string not_enough;  // why not, each GPU on a line
};

Attempt try_free(int n, const CudaEnv& env, const std::string& probe_helper,
                 const AcquireOptions& options, const std::string& lease_dir) {
  const NvmlSnapshot snap = query_nvml(NvmlQuery{true, n > 1});
  if (!snap.available) {
    throw failure("--gpu free:" + std::to_string(n) +
                  " needs NVML to see which GPUs are in use, and NVML is unavailable (" +
                  snap.reason + "); name the GPUs instead (--gpu 0,1 or UUIDs)");
  }
  const std::vector<bool> eligible = eligible_gpus(snap.gpus, env, probe_helper);
  const auto usable = static_cast<int>(std::count(eligible.begin(), eligible.end(), true));
  if (usable < n) {
    throw bad_input("--gpu free:" + std::to_string(n) + " asks for " + std::to_string(n) +
                    " GPUs, but only " + std::to_string(usable) + " can be used here (" +
                    std::to_string(snap.gpus.size()) + " on this machine; " + describe_preset(env) +
                    "); ask for at most " + std::to_string(usable));
  }
  std::vector<FreeCandidate> candidates(snap.gpus.size());
  std::vector<std::optional<Lease>> held(snap.gpus.size());
  for (std::size_t i = 0; i < snap.gpus.size(); ++i) {
    const GpuInfo& g = snap.gpus[i];
    FreeCandidate& c = candidates[i];
    c.eligible = eligible[i];
    if (!c.eligible) {
      c.not_free = g.failed()      ? "failed: " + g.failure
                   : g.mig_enabled ? std::string("MIG enabled")
                                   : "hidden by " + describe_preset(env);
      continue;
    }
    c.not_free = busy_reason(g, options.limits);
    if (!c.not_free.empty()) continue;
    std::optional<LeaseHolder> holder;
    if (options.lease && !options.share) {
      held[i] = try_lease(lease_dir, g.uuid, &holder);
      if (!held[i]) c.not_free = "leased by " + (holder ? describe_holder(*holder) : "another job");
    } else if ((holder = lease_holder(lease_dir, g.uuid))) {
      c.not_free = "leased by " + describe_holder(*holder);
    }
  }
  Attempt attempt;
  const std::optional<PickResult> pick = pick_free(snap.gpus, candidates, snap.links, n);
  std::vector<std::string> standing;
  for (const FreeCandidate& c : candidates) standing.push_back(c.not_free);
  if (!pick) {
    int free_count = 0;
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      if (candidates[i].eligible && candidates[i].not_free.empty()) ++free_count;
      attempt.not_enough += "\n  " + gpu_label(snap.gpus[i]) + ": " +
                            (candidates[i].not_free.empty() ? "free" : candidates[i].not_free);
    }
    attempt.not_enough = std::to_string(free_count) + " of the " + std::to_string(usable) +
                         " GPUs here " + (free_count == 1 ? "is" : "are") +
                         " free:" + attempt.not_enough;
    return attempt;
  }
  Acquisition a;
  a.why = pick->why;
  a.standing = std::move(standing);
  a.resolution.resolved = true;
  a.resolution.machine = snap.gpus;
  for (std::size_t i : pick->picked) {
    a.resolution.gpus.push_back(snap.gpus[i].uuid);
    if (held[i]) a.leases.push_back(std::move(*held[i]));
  }
  attempt.got = std::move(a);
  return attempt;  // leases not picked are released here
}

// Leases explicit GPUs; empty `blocked` when all were taken.
std::vector<Lease> lease_all(const Resolution& r, const std::string& lease_dir,
                             std::string& blocked) {
  std::vector<Lease> leases;
  for (const std::string& uuid : r.gpus) {
    std::optional<LeaseHolder> holder;
    std::optional<Lease> l = try_lease(lease_dir, uuid, &holder);
    if (!l) {
      std::string label = uuid;
      for (const GpuInfo& g : r.machine) {
        if (g.uuid == uuid) label = "GPU " + std::to_string(g.index) + " (" + uuid + ")";
      }
      blocked = label + " is leased by " + (holder ? describe_holder(*holder) : "another job");
      return {};
    }
    leases.push_back(std::move(*l));
  }
  return leases;
}

}  // namespace

Acquisition acquire_gpus(const std::vector<std::string>& entries, const CudaEnv& env,
                         const std::string& probe_helper, const AcquireOptions& options) {
  if (options.wait_seconds && (std::isnan(*options.wait_seconds) || *options.wait_seconds < 0)) {
    throw bad_input("--wait needs a number of seconds of 0 or more");
  }
  const bool free_request = entries.size() == 1 && is_free_entry(entries.front());
  const std::string lease_dir = lease_directory();
  const bool uses_leases = free_request || (options.lease && !options.share);
  if (uses_leases) check_lease_directory(lease_dir);
  Resolution explicit_gpus;
  if (!free_request) {
    explicit_gpus = resolve_gpus(entries, env, probe_helper);
    if (!options.lease || options.share || !explicit_gpus.resolved) {
      // Without UUIDs (no NVML) there is nothing to lease by.
      Acquisition a;
      a.resolution = std::move(explicit_gpus);
      return a;
    }
  }
  const int n = free_request ? parse_free_request(entries.front()).value() : 0;
  // When to give up waiting; never for "--wait" without a value.
  Clock::time_point deadline = Clock::time_point::max();
  if (options.wait_seconds && std::isfinite(*options.wait_seconds)) {
    deadline = Clock::now() +
               std::chrono::milliseconds(static_cast<long long>(*options.wait_seconds * 1000));
  }
  std::optional<Ticket> ticket;
  bool told = false;
  while (true) {
    std::string why_not;
    if (!ticket || ticket->first()) {
      if (free_request) {
        Attempt attempt = try_free(n, env, probe_helper, options, lease_dir);
        if (attempt.got) return std::move(*attempt.got);
        why_not = "--gpu free:" + std::to_string(n) + ": " + attempt.not_enough;
      } else {
        std::string blocked;
        std::vector<Lease> leases = lease_all(explicit_gpus, lease_dir, blocked);
        if (blocked.empty()) {
          Acquisition a;
          a.resolution = explicit_gpus;
          a.leases = std::move(leases);
          return a;
        }
        why_not = blocked;
      }
    } else {
      why_not = "earlier jobs are waiting for GPUs";
    }
    if (!options.wait_seconds) {
      throw failure(why_not + (free_request ? "\n" : "; ") + "wait for them with --wait, " +
                    (free_request ? "relax --min-free-memory / --max-utilization, "
                                  : "pass --share to run beside the holder, ") +
                    "or pick other GPUs");
    }
    if (Clock::now() >= deadline) {
      throw failure("still waiting after " + std::to_string(*options.wait_seconds) +
                    " s: " + why_not);
    }
    if (!ticket) ticket.emplace(lease_dir);
    if (!told && options.on_wait) {
      // One line: the reason's first line ("... 0 of the 8 GPUs here are free:", a holder).
      std::string why_first = why_not.substr(0, why_not.find('\n'));
      if (!why_first.empty() && why_first.back() == ':') why_first.pop_back();
      options.on_wait("waiting for " +
                      (free_request ? std::to_string(n) + " free GPU" + (n == 1 ? "" : "s")
                                    : std::string("GPUs ") + join_entries(explicit_gpus.gpus)) +
                      " (" + why_first + ")");
      told = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

GPUSEL_END_NAMESPACE
