// What leases and waiting jobs look like in messages, and the queue's ticket format: the same on
// every platform.
#include <algorithm>

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
