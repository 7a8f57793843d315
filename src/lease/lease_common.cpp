// What leases and waiting jobs look like in messages, and the queue's ticket format: the same on
// every platform.
#include <algorithm>
#include <set>

#include "gpusel/lease.hpp"
#include "gpusel_detail.hpp"
#include "lease_queue.hpp"
#include "text.hpp"

GPUSEL_BEGIN_NAMESPACE

std::string describe_holder(const LeaseHolder& holder) {
  std::string details;
  if (!holder.user.empty()) details += "user " + detail::printable(holder.user);
  if (!holder.command.empty()) {
    details += (details.empty() ? "" : ", ") + std::string("command `") +
               detail::printable(holder.command) + "`";
  }
  if (!holder.started.empty()) {
    details += (details.empty() ? "" : ", ") + std::string("since ") + holder.started;
  }
  if (holder.pid <= 0) return details.empty() ? std::string("a process not visible here") : details;
  const std::string pid = "pid " + std::to_string(holder.pid);
  return details.empty() ? pid : pid + " (" + details + ")";
}

std::string describe_standing(const LeaseStanding& standing) {
  switch (standing.state) {
    case LeaseStanding::State::Free:
      return "";
    case LeaseStanding::State::Held:
      return "leased by " + (standing.holder
                                 ? describe_holder(*standing.holder)
                                 : std::string("another job (its holder is not visible here)"));
    case LeaseStanding::State::Unusable:
      return "its lease cannot be taken: " + detail::printable(standing.problem);
  }
  return "";
}

GPUSEL_END_NAMESPACE

namespace gpusel::detail {
namespace {

constexpr std::string_view kTicketMagic = "gpusel-ticket 1";
constexpr std::size_t kMaxTicketGpus = 4096;

bool take_prefix(std::string_view& line, std::string_view prefix) {
  if (line.substr(0, prefix.size()) != prefix) return false;
  line.remove_prefix(prefix.size());
  return true;
}

}  // namespace

std::string format_ticket(const TicketRequest& request) {
  std::string out = std::string(kTicketMagic) + "\nneed " + std::to_string(request.need) +
                    "\nwhat " + request.what + "\n";
  for (const std::string& gpu : request.gpus) out += "gpu " + gpu + "\n";
  return out;
}

std::optional<TicketRequest> parse_ticket(const std::string& text) {
  TicketRequest r;
  std::size_t start = 0;
  int line_no = 0;
  bool have_need = false;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) return std::nullopt;  // a ticket ends with a newline
    std::string_view line(text.data() + start, end - start);
    start = end + 1;
    if (line_no++ == 0) {
      if (line != kTicketMagic) return std::nullopt;
      continue;
    }
    if (take_prefix(line, "need ")) {
      const auto n = read_decimal(line, kMaxTicketGpus);
      if (!n || *n == 0 || have_need) return std::nullopt;
      r.need = static_cast<int>(*n);
      have_need = true;
    } else if (take_prefix(line, "what ")) {
      r.what = detail::printable(line);
    } else if (take_prefix(line, "gpu ")) {
      if (!is_plain_file_name(line) || r.gpus.size() >= kMaxTicketGpus) return std::nullopt;
      r.gpus.emplace_back(line);
    } else {
      return std::nullopt;
    }
  }
  if (!have_need || r.gpus.size() < static_cast<std::size_t>(r.need)) return std::nullopt;
  return r;
}

QueuePlan plan_queue(const std::vector<Waiter>& queue, const std::vector<std::string>& machine,
                     const std::vector<LeaseStanding>& standing, const std::set<std::string>& busy,
                     const std::vector<std::string>& wanted, QueueMemory& memory,
                     std::chrono::steady_clock::time_point now) {
  using Clock = std::chrono::steady_clock;
  QueuePlan plan;
  std::vector<const Waiter*> earlier;
  for (const Waiter& w : queue) {
    if (w.own) break;  // everyone after this process's own ticket came later
    if (!w.stopped && (w.owner.empty() || memory.passed_owners.count(w.owner) == 0)) {
      earlier.push_back(&w);
    }
  }
  if (earlier.empty()) {
    memory.ready_since.clear();
    return plan;
  }
  std::set<std::string> leasable, free_now;
  std::map<std::string, std::string> held_by;  // GPU: the user holding its lease, where known
  for (std::size_t i = 0; i < machine.size() && i < standing.size(); ++i) {
    const LeaseStanding& s = standing[i];
    if (s.state != LeaseStanding::State::Unusable) leasable.insert(machine[i]);
    if (s.state == LeaseStanding::State::Free && busy.count(machine[i]) == 0) {
      free_now.insert(machine[i]);
    }
    if (s.state == LeaseStanding::State::Held && s.holder) held_by[machine[i]] = s.holder->user;
  }
  std::set<std::string> pool = free_now;
  const std::set<std::string> mine(wanted.begin(), wanted.end());
  std::map<std::string, Clock::time_point> still_ready;
  bool all_pending = true;
  for (const Waiter* w : earlier) {
    if (!w->owner.empty() && memory.passed_owners.count(w->owner) != 0) continue;
    // Only GPUs that exist here and can be leased, each once: a ticket that names fewer than it
    // needs can never go, and keeps nothing.
    std::vector<std::string> gpus;
    std::set<std::string> seen;
    for (const std::string& g : w->request.gpus) {
      if (leasable.count(g) != 0 && seen.insert(g).second) gpus.push_back(g);
    }
    if (static_cast<int>(gpus.size()) < w->request.need) continue;
    std::vector<std::string> avail;
    int free_count = 0, own_held = 0;
    for (const std::string& g : gpus) {
      if (free_now.count(g) != 0) ++free_count;
      if (pool.count(g) != 0) avail.push_back(g);
      const auto h = held_by.find(g);
      if (h != held_by.end() && !w->owner.empty() && h->second == w->owner) ++own_held;
    }
    bool pending = false;
    if (static_cast<int>(avail.size()) >= w->request.need) {
      const auto seen_ready = memory.ready_since.find(w->key);
      const Clock::time_point since =
          seen_ready == memory.ready_since.end() ? now : seen_ready->second;
      still_ready[w->key] = since;
      if (now - since >= kTakeGrace) {
        if (!w->owner.empty()) memory.passed_owners.insert(w->owner);
        continue;
      }
      plan.recheck = std::min(plan.recheck.value_or(since + kTakeGrace), since + kTakeGrace);
      pending = true;
    } else if (free_count + own_held >= w->request.need) {
      continue;  // it waits for its own user's GPUs alone: nobody else can help it
    }
    bool keeps_mine = false;
    const std::size_t keep = std::min<std::size_t>(avail.size(), w->request.need);
    for (std::size_t k = 0; k < keep; ++k) {
      pool.erase(avail[k]);
      plan.reserved.insert(avail[k]);
      keeps_mine = keeps_mine || mine.count(avail[k]) != 0;
    }
    if (keeps_mine) {
      plan.blockers.push_back(*w);
      all_pending = all_pending && pending;
    }
  }
  memory.ready_since = std::move(still_ready);
  plan.only_pending = !plan.blockers.empty() && all_pending;
  return plan;
}

}  // namespace gpusel::detail

GPUSEL_BEGIN_NAMESPACE

std::string describe_waiting(const WaitingJob& job) {
  return (job.who ? describe_holder(*job.who) : std::string("a job")) + " waits for " +
         (job.what.empty() ? std::string("GPUs") : job.what);
}

std::vector<WaitingJob> LeaseStore::waiting() const {
  std::vector<WaitingJob> out;
  std::vector<detail::Waiter> ws = detail::waiters(*this, nullptr);
  detail::name_waiters(ws);
  for (detail::Waiter& w : ws) {
    out.push_back(
        WaitingJob{std::move(w.who), std::move(w.request.what), std::move(w.request.gpus)});
  }
  return out;
}

GPUSEL_END_NAMESPACE
