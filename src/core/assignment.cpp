// Which launcher's local rank counts for this process.
#include "gpusel/assignment.hpp"

#include "gpusel/error.hpp"
#include "gpusel/spec.hpp"
#include "text.hpp"

GPUSEL_BEGIN_NAMESPACE
namespace {

std::string setting(const RankCandidate& c) {
  return c.variable + "=" + quote_value(c.value);
}

std::string where_set(const RankCandidate& c) {
  if (c.distance < 0) return "not looked up";
  if (c.distance_exact) {
    if (c.distance == 0) return "set by this process";
    if (c.distance == 1) return "set by its parent process";
    return "set " + std::to_string(c.distance) + " processes up";
  }
  return "set at least " + std::to_string(c.distance) +
         " processes up (an ancestor's environment could not be read)";
}

// The candidate set nearest to this process, when the distances tell it apart from every
// candidate that disagrees with it.
const RankCandidate* nearest(const std::vector<const RankCandidate*>& cands) {
  for (const RankCandidate* c : cands) {
    if (c->distance < 0 || !c->distance_exact) continue;
    bool wins = true;
    for (const RankCandidate* o : cands) {
      if (o == c || read_rank_number(o->value) == read_rank_number(c->value)) continue;
      // `o` was set further up when its exact distance, or the least it can be, is greater.
      if (o->distance < 0 || o->distance <= c->distance) wins = false;
    }
    if (wins) return c;
  }
  return nullptr;
}

}  // namespace

const char* source_name(AssignmentSource source) noexcept {
  switch (source) {
    case AssignmentSource::Code:
      return "code";
    case AssignmentSource::GpuselGpu:
      return "GPUSEL_GPU";
    case AssignmentSource::GpuselGpus:
      return "GPUSEL_GPUS";
    case AssignmentSource::Launcher:
      return "launcher";
    case AssignmentSource::Single:
      return "single";
    case AssignmentSource::Default:
      return "default";
  }
  return "?";
}

std::optional<int> read_rank_number(std::string_view value) noexcept {
  // At most six digits after the leading zeros.
  const std::optional<std::uint64_t> n = detail::read_decimal(value, 999999);
  if (!n) return std::nullopt;
  return static_cast<int>(*n);
}

std::optional<int> slurm_tasks_on_node(std::string_view value, int node) noexcept {
  // Groups "N" or "N(xM)", separated by commas.
  long seen = 0;
  std::optional<int> found;
  if (value.empty()) return std::nullopt;
  detail::each_comma_piece(value, [&](std::string_view group) {
    std::string_view count = group, repeat = "1";
    if (const std::size_t paren = group.find("(x"); paren != std::string_view::npos) {
      if (group.back() != ')') return false;
      count = group.substr(0, paren);
      repeat = group.substr(paren + 2, group.size() - paren - 3);
    }
    const std::optional<int> n = read_rank_number(count), times = read_rank_number(repeat);
    if (!n || !times) return false;
    seen += *times;
    if (node < seen) found = n;
    return !found;
  });
  return found;
}

bool ranks_disagree(const LauncherView& view) {
  std::optional<int> first;
  for (const RankCandidate& c : view.candidates) {
    if (view.slurm_batch_step && c.variable == "SLURM_LOCALID") continue;
    const std::optional<int> r = read_rank_number(c.value);
    if (!r) continue;
    if (first && *first != *r) return true;
    first = r;
  }
  return false;
}

std::optional<LocalRank> choose_local_rank(const LauncherView& view) {
  std::vector<const RankCandidate*> counted;
  std::vector<std::string> ignored;
  for (const RankCandidate& c : view.candidates) {
    if (view.slurm_batch_step && c.variable == "SLURM_LOCALID") {
      ignored.push_back(setting(c) + " (sbatch's batch step, not a task launch)");
      continue;
    }
    if (!read_rank_number(c.value)) {
      throw bad_input(setting(c) +
                      " is not a local rank (a non-negative integer); fix the launcher's setting "
                      "or unset it");
    }
    counted.push_back(&c);
  }
  if (counted.empty()) return std::nullopt;
  const RankCandidate* chosen = counted.front();
  bool agree = true;  // as numbers: "01" and "1" agree
  for (const RankCandidate* c : counted) {
    agree = agree && read_rank_number(c->value) == read_rank_number(chosen->value);
  }
  if (!agree) {
    chosen = nearest(counted);
    if (chosen == nullptr) {
      std::string list;
      for (const RankCandidate* c : counted) {
        list += (list.empty() ? "" : " and ") + setting(*c) + " (" + where_set(*c) + ")";
      }
      throw bad_input(
          "the local rank is ambiguous: " + list +
          "; gpusel cannot tell which launcher started this process. Unset the variable an "
          "outer launcher left behind, or give the process its GPU with GPUSEL_GPU or --gpu");
    }
    for (const RankCandidate* c : counted) {
      if (read_rank_number(c->value) != read_rank_number(chosen->value)) {
        ignored.push_back(setting(*c) + " (" + where_set(*c) + ", further out than " +
                          chosen->variable + ")");
      }
    }
  } else {
    // All agree: report the nearest when known, else the first in kRankVariables order.
    if (const RankCandidate* n = nearest(counted); n != nullptr) chosen = n;
  }
  LocalRank out;
  out.variable = chosen->variable;
  out.rank = *read_rank_number(chosen->value);
  out.ignored = std::move(ignored);
  if (chosen->size_value) {
    for (const RankVariable& v : kRankVariables) {
      if (v.size_name == nullptr || chosen->variable != v.name) continue;
      out.size_variable = v.size_name;
      out.local_size = out.size_variable == "SLURM_STEP_TASKS_PER_NODE"
                           ? slurm_tasks_on_node(*chosen->size_value, view.slurm_node_id)
                           : read_rank_number(*chosen->size_value);
      if (!out.local_size) {
        throw bad_input(out.size_variable + "=" + quote_value(*chosen->size_value) +
                        " is not a number of local ranks; fix the launcher's setting or unset it");
      }
      if (*out.local_size <= out.rank) {
        throw bad_input(setting(*chosen) + " is not below " + out.size_variable + "=" +
                        quote_value(*chosen->size_value) +
                        "; the launcher's variables contradict each other");
      }
    }
  }
  return out;
}

GPUSEL_END_NAMESPACE
