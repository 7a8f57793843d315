// Picking free GPUs and leasing them, and waiting for them in a fair queue.
#include "gpusel/acquire.hpp"

#include "gpusel/amd.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include "gpusel/error.hpp"
#include "gpusel/nvml.hpp"
#include "gpusel/resolution.hpp"
#include "gpusel/spec.hpp"
#include "gpusel_detail.hpp"
#include "lease_queue.hpp"

GPUSEL_BEGIN_NAMESPACE
namespace {

using Clock = std::chrono::steady_clock;

// Waits longer than this (about 31 years) are waits for ever: no deadline to overflow.
constexpr double kForeverSeconds = 1e9;

// "GPU 3 (GPU-...)", by nvidia-smi's index; an AMD GPU (its id "GPU-" and 16 hex digits) by
// rocm-smi's, said so: on a machine with both makers' GPUs the two numberings overlap.
std::string gpu_label(const GpuInfo& g) {
  const bool amd = g.uuid.size() == 20 && g.uuid.find('-', 4) == std::string::npos;
  return (amd ? "rocm-smi GPU " : "GPU ") + std::to_string(g.index) +
         (g.uuid.empty() ? std::string() : " (" + g.uuid + ")");
}

std::string gpu_label(const std::vector<GpuInfo>& machine, const std::string& uuid) {
  for (const GpuInfo& g : machine) {
    if (g.uuid == uuid) return gpu_label(g);
  }
  return uuid;
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
    const auto order = probe.ok ? detail::cuda_order_from(gpus, probe.devices) : std::nullopt;
    if (!order) {
      throw bad_input(
          detail::gpu_request_words() + " free:N picks within " + detail::describe_preset(env) +
              ", but " + vs.unknown_reason + " and asking CUDA failed (" +
              (probe.ok ? std::string("its devices did not match NVML's") : probe.reason) +
              "); set CUDA_DEVICE_ORDER=PCI_BUS_ID or give the preset as GPU UUIDs",
          about(Subject::VisibleDevices, {{"variable", "CUDA_VISIBLE_DEVICES"},
                                          {"value", env.visible_devices.value_or("")},
                                          {"reason", "order-unknown"}}));
    }
    vs = model_visible(gpus, env, &*order);
  }
  for (const VisibleDevice& d : vs.devices) {
    const auto g = static_cast<std::size_t>(d.gpu);
    if (d.mig < 0 && !gpus[g].failed() && !gpus[g].mig_enabled) eligible[g] = true;
  }
  return eligible;
}

// What one look at the machine found.
struct Attempt {
  std::optional<Acquisition> got;
  std::string why_not;        // each GPU on a line (free:N), or the GPU that is taken
  bool busy = false;          // something other than a lease stands in the way (NVML usage)
  bool unusable = false;      // a named GPU's lease file cannot be used: waiting won't help
  std::vector<Note> skipped;  // notes: GPUs skipped for lease files that cannot be used
};

// free:N: the machine as NVML (or, without NVIDIA's driver, ROCm SMI) sees it, read once per
// look; the topology (NVIDIA's only) and the GPUs eligible at all only the first time.
class FreeLook {
 public:
  FreeLook(int n, const CudaEnv& env, const std::string& probe_helper, const FreeLimits& limits)
      : n_(n), env_(env), probe_helper_(probe_helper), limits_(limits) {}

  // Reads the machine; throws for requests that can never be met.
  void read() {
    if (amd_) {
      read_amd(query_rocm_smi(true, n_ > 1 && !have_links_));
      return;
    }
    snap_ = query_nvml(NvmlQuery{true, n_ > 1 && !have_links_});
    if (!snap_.available && !have_links_) {
      AmdSnapshot amd = query_rocm_smi(true, n_ > 1);
      if (amd.available && !amd.gpus.empty()) {
        amd_ = true;
        read_amd(std::move(amd));
        return;
      }
      if (std::optional<Error> e =
              amd_unreadable(detail::gpu_request_words() + " free:" + std::to_string(n_), amd))
        throw *e;
    }
    if (!snap_.available) {
      throw failure(detail::gpu_request_words() + " free:" + std::to_string(n_) +
                        " needs NVML to see which GPUs are in use, and NVML is unavailable (" +
                        snap_.reason + "); name the GPUs instead (" + detail::gpu_example("0,1") +
                        " or UUIDs)",
                    snap_.problem);
    }
    if (!have_links_) {
      links_ = std::move(snap_.links);
      have_links_ = true;
      eligible_ = eligible_gpus(snap_.gpus, env_, probe_helper_);
      usable_ = static_cast<int>(std::count(eligible_.begin(), eligible_.end(), true));
      refuse_too_few();
      refuse_impossible_memory();
      for (std::size_t i = 0; i < snap_.gpus.size(); ++i) {
        if (eligible_[i]) candidates_.push_back(snap_.gpus[i].uuid);
      }
    }
  }

  // An AMD machine (docs/amd.md): the GPUs with an id, or under ROCm's variables their quota, as
  // resolve_on_amd reads it; usage from ROCm SMI; which are linked by XGMI (picked as NVLink is),
  // and each GPU's NUMA node.
  void read_amd(AmdSnapshot amd) {
    const std::string asked = detail::gpu_request_words() + " free:" + std::to_string(n_);
    if (!amd.available || (have_links_ && amd.gpus.size() != snap_.gpus.size())) {
      throw failure(
          asked + ": ROCm SMI " +
              (amd.available ? "now lists " + std::to_string(amd.gpus.size()) +
                                   " GPUs, where it listed " + std::to_string(snap_.gpus.size())
                             : "became unavailable (" + amd.reason + ")") +
              "; run again once the machine is settled",
          about(Subject::GpuRequest,
                {{"request", "free:" + std::to_string(n_)}, {"reason", "amd-changed"}}));
    }
    snap_.gpus = amd_gpu_records(amd);
    if (have_links_) return;
    have_links_ = true;
    if (!amd.xgmi.empty()) {
      std::vector<std::vector<GpuLink>> table(amd.xgmi.size(),
                                              std::vector<GpuLink>(amd.xgmi.size()));
      // Within XGMI, and without it, GPUs on one NUMA node sit closer (NVML's level 40) than
      // GPUs on two (50), as a pick ranks NVIDIA's by common ancestor.
      for (std::size_t i = 0; i < amd.xgmi.size(); ++i) {
        for (std::size_t j = 0; j < amd.xgmi.size(); ++j) {
          table[i][j].nvlink = amd.xgmi[i][j];
          const std::optional<int>& a = amd.gpus[i].numa_node;
          const std::optional<int>& b = amd.gpus[j].numa_node;
          if (a && b) table[i][j].ancestor = *a == *b ? 40 : 50;
        }
      }
      links_ = Topology(std::move(table));
    }
    const AmdChoice choice = amd_choices(asked, env_, amd);
    amd_note_ = choice.note;
    eligible_.assign(snap_.gpus.size(), false);
    for (std::size_t i = 0; i < snap_.gpus.size(); ++i) {
      eligible_[i] = !snap_.gpus[i].failed() && std::find(choice.ids.begin(), choice.ids.end(),
                                                          snap_.gpus[i].uuid) != choice.ids.end();
    }
    usable_ = static_cast<int>(std::count(eligible_.begin(), eligible_.end(), true));
    refuse_too_few(choice.preset ? "within ROCm's visibility variables"
                                 : "ROCR_, HIP_ and CUDA_VISIBLE_DEVICES unset");
    refuse_impossible_memory();
    for (std::size_t i = 0; i < snap_.gpus.size(); ++i) {
      if (eligible_[i]) candidates_.push_back(snap_.gpus[i].uuid);
    }
  }

  const std::vector<GpuInfo>& machine() const { return snap_.gpus; }

  // More GPUs asked for than can be used here at all: refused, not waited for. `where`: what
  // limits them (the preset's description when empty).
  void refuse_too_few(const std::string& where = "") const {
    if (usable_ >= n_) return;
    throw bad_input(detail::gpu_request_words() + " free:" + std::to_string(n_) + " asks for " +
                        std::to_string(n_) + (n_ == 1 ? " GPU" : " GPUs") + ", but only " +
                        std::to_string(usable_) + " can be used here (" +
                        std::to_string(snap_.gpus.size()) + " on this machine; " +
                        (where.empty() ? detail::describe_preset(env_) : where) +
                        "); ask for at most " + std::to_string(usable_),
                    about(Subject::GpuRequest, {{"request", "free:" + std::to_string(n_)},
                                                {"reason", "too-few-gpus"},
                                                {"usable", std::to_string(usable_)}}));
  }

  // The GPUs in use outside gpusel by this look (processes, memory or utilisation over the
  // limits): free to nobody, whatever their leases say.
  std::set<std::string> busy(const AcquireOptions& options) const {
    std::set<std::string> out;
    for (const GpuInfo& g : snap_.gpus) {
      if (!detail::busy_reason(g, options.limits).empty()) out.insert(g.uuid);
    }
    return out;
  }

  const std::vector<std::string>& candidates() const { return candidates_; }

  // --min-free-memory above what a GPU has at all can never be met: refused, not waited for (a
  // waiter that can never go would only stand in the queue). Such GPUs are no candidates.
  void refuse_impossible_memory() {
    if (!limits_.min_free_memory) return;
    int big_enough = 0;
    std::uint64_t largest = 0;
    for (std::size_t i = 0; i < snap_.gpus.size(); ++i) {
      if (!eligible_[i]) continue;
      const std::uint64_t total = snap_.gpus[i].memory_total_bytes;
      largest = std::max(largest, total);
      if (total == 0 || total >= *limits_.min_free_memory) {
        ++big_enough;  // a size NVML did not give is not held against it
      } else {
        eligible_[i] = false;
      }
    }
    if (big_enough >= n_) return;
    throw bad_input(
        detail::gpu_request_words() + " free:" + std::to_string(n_) + " with --min-free-memory " +
            detail::format_bytes(*limits_.min_free_memory) +
            " can never be met: " + std::to_string(big_enough) + " of the GPUs here " +
            (big_enough == 1 ? "has" : "have") + " that much memory at all (the largest has " +
            detail::format_bytes(largest) + "); ask for at most " + detail::format_bytes(largest),
        about(Subject::GpuRequest,
              {{"request", "free:" + std::to_string(n_)}, {"reason", "memory-never-free"}}));
  }

  // Picks the best N free GPUs and, when `store` is given, leases them. A GPU whose lease is
  // held, or whose lease file cannot be used, is not free; a GPU lost to another job between
  // the look and the lease is marked and the pick made again, so the answer is "not enough"
  // only when there are not enough.
  // GPUs in `reserved` are kept for earlier waiters: not free for this request.
  // `known`: the standing of every GPU here, read just before for the queue (else read here).
  Attempt attempt(const LeaseStore& store, const AcquireOptions& options, bool take,
                  const std::set<std::string>& reserved, std::vector<LeaseStanding> known) {
    Attempt out;
    const std::vector<GpuInfo>& gpus = snap_.gpus;
    std::vector<std::string> uuids;
    for (const GpuInfo& g : gpus) uuids.push_back(g.uuid);
    // By the marks and the locks behind them, without the kernel's lock table (whose read waits
    // a grace period): it is read only to name the holders when too few GPUs are free.
    std::vector<LeaseStanding> standing = known.size() == uuids.size()
                                              ? std::move(known)
                                              : store.standings(uuids, LeaseStore::Look::Marks);
    std::vector<FreeCandidate> c = candidates(standing, reserved, options, out);
    while (true) {
      const std::optional<PickResult> pick = pick_free(
          gpus, c, links_, n_, amd_ ? "rocm-smi" : "nvidia-smi", amd_ ? "XGMI" : "NVLink");
      if (!pick && std::any_of(standing.begin(), standing.end(),
                               [](const LeaseStanding& l) { return l.by_mark; })) {
        standing = store.standings(uuids, LeaseStore::Look::Quick);
        Attempt named;  // the same look, with each holder named; notes of lost takes kept
        c = candidates(standing, reserved, options, named);
        for (Note& note : out.skipped) {
          if (std::none_of(named.skipped.begin(), named.skipped.end(),
                           [&](const Note& n) { return n.text == note.text; })) {
            named.skipped.push_back(std::move(note));
          }
        }
        out = std::move(named);
        continue;
      }
      if (!pick) break;
      if (std::optional<Attempt> done = lease_pick(store, take, *pick, c, out))
        return std::move(*done);
    }
    int free_count = 0;
    for (std::size_t i = 0; i < c.size(); ++i) {
      if (c[i].eligible && c[i].not_free.empty()) ++free_count;
      out.why_not +=
          "\n  " + gpu_label(gpus[i]) + ": " + (c[i].not_free.empty() ? "free" : c[i].not_free);
    }
    out.why_not = detail::gpu_request_words() + " free:" + std::to_string(n_) + ": " +
                  std::to_string(free_count) + " of the " + std::to_string(usable_) +
                  (usable_ == 1 ? " GPU here " : " GPUs here ") + (free_count == 1 ? "is" : "are") +
                  " free:" + out.why_not;
    return out;
  }

 private:
  // Each GPU as a candidate for the pick: eligible at all, and why it is not free now.
  std::vector<FreeCandidate> candidates(const std::vector<LeaseStanding>& standing,
                                        const std::set<std::string>& reserved,
                                        const AcquireOptions& options, Attempt& out) const {
    const std::vector<GpuInfo>& gpus = snap_.gpus;
    std::vector<FreeCandidate> c(gpus.size());
    for (std::size_t i = 0; i < gpus.size(); ++i) {
      const GpuInfo& g = gpus[i];
      c[i].eligible = eligible_[i];
      if (!c[i].eligible) {
        const bool small = limits_.min_free_memory && g.memory_total_bytes != 0 &&
                           g.memory_total_bytes < *limits_.min_free_memory;
        c[i].not_free = g.failed()      ? "failed: " + g.failure
                        : g.mig_enabled ? std::string("MIG enabled")
                        : small ? detail::format_bytes(g.memory_total_bytes) + " of memory in all"
                                : "hidden by " + detail::describe_preset(env_);
        continue;
      }
      // A lease says more than the usage it causes: named first.
      if (reserved.count(g.uuid) != 0 && standing[i].state == LeaseStanding::State::Free) {
        c[i].not_free = "kept for an earlier waiting job";
      } else if (standing[i].state == LeaseStanding::State::Held) {
        c[i].not_free = describe_standing(standing[i]);
      } else if (standing[i].state == LeaseStanding::State::Unusable) {
        c[i].not_free = describe_standing(standing[i]);
        out.skipped.push_back(
            {"gpu-skipped", gpu_label(g) + " was skipped: " + describe_standing(standing[i])});
      } else if (std::string busy = detail::busy_reason(g, options.limits); !busy.empty()) {
        c[i].not_free = std::move(busy);
        if (standing[i].state == LeaseStanding::State::Free) out.busy = true;
      }
    }
    return c;
  }

  // Leases the GPUs picked (when `take`): the finished attempt, or nullopt when one was lost to
  // another job between the look and the lease (marked in `c`, for a new pick).
  std::optional<Attempt> lease_pick(const LeaseStore& store, bool take, const PickResult& pick,
                                    std::vector<FreeCandidate>& c, Attempt& out) const {
    const std::vector<GpuInfo>& gpus = snap_.gpus;
    std::vector<Lease> leases;
    if (take) {
      for (std::size_t i : pick.picked) {
        LeaseStanding s;
        std::optional<Lease> l = store.take(gpus[i].uuid, &s);
        if (!l) {
          c[i].not_free = describe_standing(s);
          if (s.state == LeaseStanding::State::Unusable) {
            out.skipped.push_back(
                {"gpu-skipped", gpu_label(gpus[i]) + " was skipped: " + describe_standing(s)});
          }
          return std::nullopt;  // the leases taken so far are released: a new pick may not want
                                // them
        }
        leases.push_back(std::move(*l));
      }
    }
    Acquisition a;
    a.why = pick.why;
    for (const FreeCandidate& cand : c) a.standing.push_back(cand.not_free);
    a.resolution.resolved = true;
    a.resolution.machine = gpus;
    for (std::size_t i : pick.picked) a.resolution.gpus.push_back(gpus[i].uuid);
    a.leases = std::move(leases);
    a.resolution.notes = out.skipped;
    if (amd_) {
      a.resolution.vendor = "amd";
      a.resolution.notes.insert(a.resolution.notes.begin(), amd_note_);
    }
    out.got = std::move(a);
    return std::move(out);
  }

  int n_;
  const CudaEnv& env_;
  const std::string& probe_helper_;
  const FreeLimits& limits_;
  NvmlSnapshot snap_;
  Topology links_;  // read from NVML as picks ask (pick.hpp), kept across looks
  bool have_links_ = false;
  std::vector<bool> eligible_;
  int usable_ = 0;
  std::vector<std::string> candidates_;
  bool amd_ = false;  // the GPUs are AMD's (ROCm SMI)
  Note amd_note_;
};

// Leases every named GPU, or none. Unless `direct`, each GPU is looked at first (its lease mark,
// or the lock table where the mark cannot tell) and nothing is taken while one is held: a failed
// try closes a lease file, which wakes the waiters for that GPU (a look closes one too, but the
// waiters ask its mark before they look again). `direct` (just after a release, with nobody
// ahead): tried at once.
// `seen` (the machine's GPUs, `seen_standing`): the look the queue was judged by, when there was
// one. A GPU held in it is not tried even if released since: that release is for the waiters
// ahead, who had not yet been judged able to go, and the next look gives it to them.
Attempt lease_named(const Resolution& r, const LeaseStore& store, bool direct,
                    const std::vector<std::string>& seen,
                    const std::vector<LeaseStanding>& seen_standing) {
  Attempt out;
  if (!direct) {
    std::vector<LeaseStanding> standing;
    if (!seen_standing.empty() && seen_standing.size() == seen.size()) {
      for (const std::string& uuid : r.gpus) {
        const auto at = std::find(seen.begin(), seen.end(), uuid);
        standing.push_back(at == seen.end()
                               ? LeaseStanding{}
                               : seen_standing[static_cast<std::size_t>(at - seen.begin())]);
      }
    } else {
      standing = store.standings(r.gpus, LeaseStore::Look::Quick);
    }
    for (std::size_t i = 0; i < r.gpus.size(); ++i) {
      if (standing[i].state != LeaseStanding::State::Free) {
        out.why_not = gpu_label(r.machine, r.gpus[i]) + " is " + describe_standing(standing[i]);
        out.unusable = standing[i].state == LeaseStanding::State::Unusable;
        return out;
      }
    }
  }
  std::vector<Lease> leases;
  for (const std::string& uuid : r.gpus) {
    LeaseStanding s;
    std::optional<Lease> l = store.take(uuid, &s);
    if (!l) {
      out.why_not = gpu_label(r.machine, uuid) + " is " + describe_standing(s);
      out.unusable = s.state == LeaseStanding::State::Unusable;
      return out;
    }
    leases.push_back(std::move(*l));
  }
  Acquisition a;
  a.resolution = r;
  a.leases = std::move(leases);
  out.got = std::move(a);
  return out;
}

// `full`: the earlier jobs named, a line each (the first ten, then how many more and of how many
// users); else the first line alone, which asks nothing of /proc.
std::string describe_ahead(std::vector<detail::Waiter> ahead, bool full) {
  std::string out = std::to_string(ahead.size()) + " earlier job" +
                    (ahead.size() == 1 ? " waits" : "s wait") +
                    " for these GPUs and will be served first:";
  if (!full) return out;
  constexpr std::size_t kShown = 10;
  std::set<std::string> owners;
  for (const detail::Waiter& w : ahead) owners.insert(w.owner);
  const std::size_t more = ahead.size() > kShown ? ahead.size() - kShown : 0;
  ahead.resize(ahead.size() - more);
  detail::name_waiters(ahead);
  for (const detail::Waiter& w : ahead) {
    out += "\n  " + describe_waiting(WaitingJob{w.who, w.request.what, w.request.gpus});
  }
  if (more > 0) {
    out += "\n  and " + std::to_string(more) + " more (" + std::to_string(owners.size()) +
           (owners.size() == 1 ? " user" : " users") + " in all)";
  }
  return out;
}

// One request's looks, from the first until it has its GPUs, is refused or gives up
// (acquire_gpus): what each look found decides the next, so the state lives here.
class Acquirer {
 public:
  Acquirer(const GpuRequest& request, const CudaEnv& env, const std::string& probe_helper,
           const AcquireOptions& options, Resolution named);
  Acquisition run();

 private:
  // What the queue says before a look: who goes first, and each GPU's lease as it stands.
  struct QueueLook {
    detail::QueuePlan plan;
    std::vector<LeaseStanding> standing;
    bool alone = true;         // nobody else waits: a failed try at a lease wakes no one
    bool nobody_ahead = true;  // no waiter came before this request
  };

  const std::vector<std::string>& wanted() const {
    return free_request_ ? look_->candidates() : named_.gpus;
  }
  // The request as data: "free:N", or the named GPUs' UUIDs.
  std::string request_text() const {
    if (free_request_) return "free:" + std::to_string(n_);
    std::string out;
    for (const std::string& g : named_.gpus) out += (out.empty() ? "" : ",") + g;
    return out;
  }
  void pace();
  QueueLook look_at_queue();
  [[noreturn]] void refuse(const Attempt& attempt, bool held_back) const;
  void join_queue();
  void say_waiting(const Attempt& attempt);
  std::chrono::milliseconds next_timeout(const Attempt& attempt, bool held_back, bool moment,
                                         Clock::time_point now,
                                         const detail::QueuePlan& plan) const;

  const AcquireOptions& options_;
  const bool free_request_;
  const bool take_;
  const int n_;
  Resolution named_;
  const LeaseStore store_ = LeaseStore::locate();
  // The store's per-user note for a job that leases, written before any wait: it looks the user
  // up, which has no place between a waiter's wake and its first worker's start.
  const std::string scope_note_ = take_ ? store_.scope_note() : std::string();
  std::optional<FreeLook> look_;
  std::vector<std::string> machine_;  // the GPUs that exist here, for the queue's plan
  // When to give up: never for "--wait" without a value, or a wait too long to count.
  std::optional<Clock::time_point> deadline_;
  std::optional<detail::Ticket> ticket_;
  std::string no_ticket_;  // why this waiter has no place in the queue (said once)
  std::unique_ptr<detail::ReleaseWatch> watch_;  // handed to the Acquisition (its `waited`)
  detail::QueueMemory memory_;
  // When this request began, as the kernel stamps files (ctime): without a ticket of its own, it
  // waits only behind tickets made before it, not behind ones made (or moved) since.
  long long began_ns_ = 0;
  // Without --wait, earlier waiters that can go get one moment in all, not one per look.
  std::optional<Clock::time_point> moment_ends_;
  bool told_ = false;
  bool settle_ = false;  // look once more shortly after a release: the lock goes just after
  // A direct try that failed woke this process itself (its lease file closed): the next look
  // reads the lock table, so that a held GPU is never tried twice in a row.
  bool tried_direct_ = false;
  // Looks in a row, each woken by a notice, that found nothing: another user opening and closing
  // lease files in a loop would otherwise buy a look with each close. After a few, looks are
  // spaced by kSpacing (a release is then seen at most that late).
  int fruitless_ = 0;
  Clock::time_point last_look_{};
  static constexpr auto kSpacing = std::chrono::milliseconds(50);
};

Acquirer::Acquirer(const GpuRequest& request, const CudaEnv& env, const std::string& probe_helper,
                   const AcquireOptions& options, Resolution named)
    : options_(options),
      free_request_(request.kind == GpuRequest::Kind::Free),
      take_(options.lease && !options.share),
      n_(free_request_ ? request.free_count : 0),
      named_(std::move(named)) {
  if (free_request_) {
    look_.emplace(n_, env, probe_helper, options.limits);
  } else {
    for (const GpuInfo& g : named_.machine) machine_.push_back(g.uuid);
  }
  if (options.wait_seconds && *options.wait_seconds < kForeverSeconds) {
    deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(*options.wait_seconds));
  }
  timespec began{};
  clock_gettime(CLOCK_REALTIME_COARSE, &began);
  began_ns_ = began.tv_sec * 1000000000LL + began.tv_nsec;
}

// Spaces fruitless looks, then reads the GPUs' usage afresh for free:N.
void Acquirer::pace() {
  if (fruitless_ >= 3 && Clock::now() < last_look_ + kSpacing) {
    std::this_thread::sleep_until(last_look_ + kSpacing);
  }
  last_look_ = Clock::now();
  if (look_) {
    look_->read();
    if (machine_.empty()) {
      for (const GpuInfo& g : look_->machine()) machine_.push_back(g.uuid);
    }
  }
}

// Earlier waiters keep the free GPUs they could use (plan_queue). A look that leases nothing
// (resolve) is advice, not a claim: it neither queues nor waits its turn.
Acquirer::QueueLook Acquirer::look_at_queue() {
  QueueLook q;
  if (!take_) return q;
  std::vector<detail::Waiter> queue = detail::waiters(store_, ticket_ ? &*ticket_ : nullptr);
  if (ticket_ &&
      std::none_of(queue.begin(), queue.end(), [](const detail::Waiter& w) { return w.own; })) {
    ticket_.reset();  // removed by someone (root): a new one is made later, at the back
  }
  if (!ticket_) {
    queue.erase(std::remove_if(queue.begin(), queue.end(),
                               [&](const detail::Waiter& w) { return w.arrived_ns > began_ns_; }),
                queue.end());
  }
  q.alone = std::all_of(queue.begin(), queue.end(), [](const detail::Waiter& w) { return w.own; });
  q.nobody_ahead = queue.empty() || queue.front().own;
  // The table, not the marks: a GPU held without a mark (another program's flock, a gpusel
  // from before the marks) must not look free here, or the waiter ahead that wants it would be
  // judged able to go, and passed over when it does not.
  if (!q.alone) q.standing = store_.standings(machine_);
  q.plan = detail::plan_queue(queue, machine_, q.standing,
                              look_ ? look_->busy(options_) : std::set<std::string>(), wanted(),
                              memory_, Clock::now());
  return q;
}

// The request cannot be met now and does not wait: why, and what to do.
void Acquirer::refuse(const Attempt& attempt, bool held_back) const {
  std::string remedy;
  if (held_back) {
    remedy = "wait your turn with --wait, or pick other GPUs";
  } else if (free_request_) {
    remedy =
        "wait for them with --wait, relax --min-free-memory / --max-utilization, or pick "
        "other GPUs";
  } else if (!attempt.unusable) {
    remedy = "wait for them with --wait, pass --share to run beside the holder, or pick other GPUs";
  }
  // As data: the request, and whether others hold its GPUs, earlier waiters go first, or a
  // lease file cannot be used.
  const char* reason = held_back ? "waiters-first" : attempt.unusable ? "lease-unusable" : "taken";
  throw failure(attempt.why_not + (remedy.empty()                 ? ""
                                   : (free_request_ || held_back) ? "\n" + remedy
                                                                  : "; " + remedy),
                about(Subject::GpuRequest, {{"request", request_text()}, {"reason", reason}}));
}

// A store that cannot hold a ticket (full, read-only) does not end the wait: this process waits
// without a place, behind every ticket, and tries again at each look.
void Acquirer::join_queue() {
  const std::vector<std::string>& w = wanted();
  try {
    ticket_.emplace(store_,
                    detail::TicketRequest{free_request_ ? n_ : static_cast<int>(w.size()), w,
                                          free_request_ ? "free:" + std::to_string(n_)
                                                        : "GPUs " + detail::join_entries(w)});
  } catch (const Error& e) {
    if (no_ticket_.empty()) no_ticket_ = e.text();
  }
}

// One line: the reason's first line ("... 0 of the 8 GPUs here are free:", a holder).
void Acquirer::say_waiting(const Attempt& attempt) {
  std::string why_first = attempt.why_not.substr(0, attempt.why_not.find('\n'));
  if (!why_first.empty() && why_first.back() == ':') why_first.pop_back();
  options_.on_wait("waiting for " +
                   (free_request_ ? std::to_string(n_) + " free GPU" + (n_ == 1 ? "" : "s")
                                  : std::string("GPUs ") + detail::join_entries(named_.gpus)) +
                   " (" + why_first + ")" +
                   (no_ticket_.empty() ? std::string()
                                       : "; without a place in the queue, behind every waiting "
                                         "job, until one can be made (" +
                                             no_ticket_ + ")"));
  told_ = true;
}

// A release wakes this process at once. Usage that NVML reports (processes gpusel did not start)
// changes without notice: looked at again every half second while it matters; otherwise every
// 5 s, in case a notification was missed; and when an earlier waiter's moment to take its GPUs
// ends. Held back, or without a place in the queue, at least every second: a waiter that can go
// finds out well within the moment others give it.
std::chrono::milliseconds Acquirer::next_timeout(const Attempt& attempt, bool held_back,
                                                 bool moment, Clock::time_point now,
                                                 const detail::QueuePlan& plan) const {
  using std::chrono::milliseconds;
  const auto until = [now](Clock::time_point t) {
    return std::chrono::ceil<milliseconds>(std::max(t - now, Clock::duration::zero()));
  };
  auto timeout = milliseconds(settle_ ? 2 : attempt.busy ? 500 : 5000);
  if (held_back || (!ticket_ && options_.wait_seconds)) {
    timeout = std::min(timeout, milliseconds(1000));
  }
  if (moment) timeout = std::min(timeout, until(*moment_ends_));
  if (deadline_) timeout = std::min(timeout, until(*deadline_));
  if (plan.recheck) timeout = std::min(timeout, until(*plan.recheck) + milliseconds(1));
  return timeout;
}

Acquisition Acquirer::run() {
  while (true) {
    pace();
    QueueLook q = look_at_queue();
    const bool named_kept =
        !free_request_ && std::any_of(wanted().begin(), wanted().end(), [&](const std::string& g) {
          return q.plan.reserved.count(g) != 0;
        });
    Attempt attempt;
    if (!named_kept) {
      // Tried at once, without reading the kernel's lock table first (which costs a grace period,
      // and more with many locks held on the machine), just after a release or when nobody else
      // waits; never twice in a row (a failed try wakes this process too). Not with a waiter
      // ahead: a release is theirs first.
      const bool direct = !free_request_ && ((settle_ && q.nobody_ahead) || q.alone) &&
                          !tried_direct_ && q.plan.reserved.empty();
      attempt = free_request_ ? look_->attempt(store_, options_, take_, q.plan.reserved,
                                               std::move(q.standing))
                              : lease_named(named_, store_, direct, machine_, q.standing);
      tried_direct_ = direct && !attempt.got;
      if (attempt.got) {
        if (!scope_note_.empty())
          attempt.got->resolution.notes.push_back({"lease-scope", scope_note_});
        // Its watches are removed by the caller once the job has started (removing them asks
        // the kernel for tens of microseconds, between the take and the first worker's start).
        attempt.got->waited = std::move(watch_);
        return std::move(*attempt.got);
      }
    }
    fruitless_ = settle_ ? fruitless_ + 1 : 0;
    const bool held_back = !q.plan.blockers.empty();
    if (held_back) attempt.why_not = describe_ahead(q.plan.blockers, false);  // in full when said
    const Clock::time_point now = Clock::now();
    const bool timed_out = deadline_ && now >= *deadline_;
    // Without --wait, a request held back only by earlier waiters that can go now gives them
    // their moment (kTakeGrace), then looks again: a forged ticket denies nobody.
    if (!options_.wait_seconds && held_back && q.plan.only_pending && !moment_ends_) {
      moment_ends_ = now + detail::kTakeGrace + std::chrono::milliseconds(100);
    }
    const bool moment = !options_.wait_seconds && held_back && q.plan.only_pending &&
                        moment_ends_ && now < *moment_ends_;
    if (held_back && ((!options_.wait_seconds && !moment) || timed_out)) {
      attempt.why_not = describe_ahead(q.plan.blockers, true);
    }
    if ((!options_.wait_seconds && !moment) || attempt.unusable) refuse(attempt, held_back);
    if (timed_out) {
      throw failure(
          "still waiting after " + detail::format_seconds(*options_.wait_seconds) + ": " +
              attempt.why_not,
          about(Subject::GpuRequest, {{"request", request_text()}, {"reason", "wait-timed-out"}}));
    }
    if (take_ && !ticket_ && options_.wait_seconds) join_queue();
    if (!watch_) {
      watch_ = std::make_unique<detail::ReleaseWatch>(store_);
      continue;  // look again at once, now that changes wake this process
    }
    if (!told_ && options_.on_wait && options_.wait_seconds) say_waiting(attempt);
    // A named request wakes only for its own GPUs' lease files (another waiter's try at another
    // GPU would otherwise wake it to try its own at once: two waiters could keep each other
    // busy). free:N wakes for any: a GPU it is waiting for may be one not among its candidates
    // of this look. Held back by earlier waiters, it wakes only when the nearest of them leaves
    // or ends (or at a moment's end, or each second), so a release or a departure wakes the
    // next waiter in line, not all of them.
    watch_->follow(held_back ? q.plan.blockers.back().path : std::string());
    settle_ = watch_->wait(next_timeout(attempt, held_back, moment, now, q.plan),
                           free_request_ ? std::vector<std::string>{} : named_.gpus);
  }
}

}  // namespace

Acquisition acquire_gpus(const GpuRequest& request, const CudaEnv& env,
                         const std::string& probe_helper, const AcquireOptions& options) {
  if (options.wait_seconds && (std::isnan(*options.wait_seconds) || *options.wait_seconds < 0)) {
    throw bad_input("--wait needs a number of seconds of 0 or more");
  }
  Resolution named;
  if (request.kind != GpuRequest::Kind::Free) {
    named = resolve_gpus(request, env, probe_helper);
    if (!options.lease || options.share || !named.resolved) {
      // Without UUIDs (no NVML) there is nothing to lease by.
      Acquisition a;
      a.resolution = std::move(named);
      return a;
    }
  }
  return Acquirer(request, env, probe_helper, options, std::move(named)).run();
}

GPUSEL_END_NAMESPACE
