// Which launcher's local rank counts for this process.
#include "gpusel/assignment.hpp"

#include <algorithm>

#include "gpusel/error.hpp"
#include "gpusel/spec.hpp"
#include "gpusel_detail.hpp"
#include "text.hpp"

GPUSEL_BEGIN_NAMESPACE
namespace {

std::string setting(const detail::RankCandidate& c) {
  return c.variable + "=" + detail::quote_value(c.value);
}

std::string where_set(const detail::RankCandidate& c) {
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
const detail::RankCandidate* nearest(const std::vector<const detail::RankCandidate*>& cands) {
  for (const detail::RankCandidate* c : cands) {
    if (c->distance < 0 || !c->distance_exact) continue;
    bool wins = true;
    for (const detail::RankCandidate* o : cands) {
      if (o == c || detail::read_rank_number(o->value) == detail::read_rank_number(c->value))
        continue;
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

std::string LocalRank::describe_size() const {
  if (levels.size() > 1) {
    std::string chain;
    for (const LauncherLevel& l : levels) {
      chain += (chain.empty() ? "" : " x ") + l.variable + "=" + std::to_string(l.rank) + " of " +
               (l.size ? std::to_string(*l.size) : std::string("?"));
    }
    return (local_size ? std::to_string(*local_size) : std::string("several")) +
           " processes on this node (" + chain + ")";
  }
  if (!local_size) return "";
  return size_variable + "=" + std::to_string(*local_size);
}

namespace {

// The data of a refused launcher variable.
Problem variable_problem(const std::string& variable, const std::string& value,
                         const char* reason) {
  return about(Subject::LaunchVariable,
               {{"variable", variable}, {"value", value}, {"reason", reason}});
}

// The size a candidate's launcher reports; nullopt when it sets none. Throws for a malformed one.
std::optional<int> size_of(const detail::RankCandidate& c, const detail::LauncherView& view,
                           std::string* size_variable) {
  for (const detail::RankVariable& v : detail::kRankVariables) {
    if (v.size_name == nullptr || c.variable != v.name) continue;
    if (size_variable != nullptr) *size_variable = v.size_name;
    if (!c.size_value) return std::nullopt;
    const std::optional<int> n =
        std::string_view(v.size_name) == "SLURM_STEP_TASKS_PER_NODE"
            ? detail::slurm_tasks_on_node(*c.size_value, view.slurm_node_id)
            : detail::read_rank_number(*c.size_value);
    if (!n) {
      throw bad_input(std::string(v.size_name) + "=" + detail::quote_value(*c.size_value) +
                          " is not a number of local ranks; fix the launcher's setting or unset it",
                      variable_problem(v.size_name, *c.size_value, "size-unreadable"));
    }
    if (*n <= *detail::read_rank_number(c.value)) {
      throw bad_input(setting(c) + " is not below " + v.size_name + "=" +
                          detail::quote_value(*c.size_value) +
                          "; the launcher's variables contradict each other",
                      variable_problem(c.variable, c.value, "rank-not-below-size"));
    }
    return n;
  }
  return std::nullopt;
}

// Nested launchers, told apart by their distances: each distance is one launcher (its variables
// must agree), outermost first. A distance that is only a lower bound (the walk up stopped at an
// environment it could not read, such as root's slurmstepd above a user's task) can only be the
// outermost launcher, beyond every exact one. nullopt when the distances do not tell them apart.
std::optional<std::vector<std::vector<const detail::RankCandidate*>>> group_by_launcher(
    const std::vector<const detail::RankCandidate*>& counted) {
  std::vector<const detail::RankCandidate*> sorted = counted;
  int max_exact = -1, min_bound = -1;
  for (const detail::RankCandidate* c : sorted) {
    if (c->distance < 0) return std::nullopt;
    if (c->distance_exact) {
      max_exact = std::max(max_exact, c->distance);
    } else if (min_bound < 0 || c->distance < min_bound) {
      min_bound = c->distance;
    }
  }
  if (min_bound >= 0) {
    if (min_bound <= max_exact) return std::nullopt;
    for (const detail::RankCandidate* c : sorted) {
      if (!c->distance_exact && c->distance != min_bound) return std::nullopt;
    }
  }
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const detail::RankCandidate* a, const detail::RankCandidate* b) {
                     return a->distance > b->distance;
                   });
  std::vector<std::vector<const detail::RankCandidate*>> levels;
  for (const detail::RankCandidate* c : sorted) {
    if (!levels.empty() && levels.back().front()->distance == c->distance) {
      if (detail::read_rank_number(levels.back().front()->value) !=
          detail::read_rank_number(c->value)) {
        return std::nullopt;  // one launcher cannot set two ranks
      }
      levels.back().push_back(c);
    } else {
      levels.push_back({c});
    }
  }
  return levels;
}

}  // namespace

GPUSEL_END_NAMESPACE

namespace gpusel::detail {

const char* launcher_of(std::string_view variable) noexcept {
  for (const detail::RankVariable& v : detail::kRankVariables) {
    if (variable == v.name) return v.launcher;
  }
  return "";
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
    const std::optional<int> n = detail::read_rank_number(count),
                             times = detail::read_rank_number(repeat);
    if (!n || !times) return false;
    seen += *times;
    if (node < seen) found = n;
    return !found;
  });
  return found;
}

std::string outer_ranks_marker(
    const std::function<std::optional<std::string>(const std::string&)>& value_of) {
  std::string out;
  for (const detail::RankVariable& v : detail::kRankVariables) {
    if (std::string_view(v.name) == "LOCAL_RANK") continue;  // gpusel run's own
    const std::optional<std::string> value = value_of(v.name);
    if (!value || value->find_first_of(",=") != std::string::npos) continue;
    out += (out.empty() ? "" : ",") + std::string(v.name) + "=" + *value;
  }
  return out;
}

void set_aside_outer_ranks(detail::LauncherView& view, std::string_view marker) {
  std::vector<std::string> outer;
  detail::each_comma_piece(marker, [&](std::string_view piece) {
    outer.emplace_back(piece);
    return true;
  });
  auto named = [&](const detail::RankCandidate& c) {
    return std::find(outer.begin(), outer.end(), c.variable + "=" + c.value) != outer.end();
  };
  for (const detail::RankCandidate& c : view.candidates) {
    if (named(c)) {
      view.ignored.push_back(setting(c) +
                             " (set by a launcher around gpusel run, whose workers are its own; " +
                             std::string(detail::kRunOuterVariable) + " names it)");
    }
  }
  view.candidates.erase(std::remove_if(view.candidates.begin(), view.candidates.end(), named),
                        view.candidates.end());
}

std::optional<LocalRank> choose_local_rank(const detail::LauncherView& view) {
  std::vector<const detail::RankCandidate*> counted;
  std::vector<std::string> ignored = view.ignored;
  for (const detail::RankCandidate& c : view.candidates) {
    if (view.slurm_batch_step && c.variable == "SLURM_LOCALID") {
      ignored.push_back(setting(c) + " (sbatch's batch step, not a task launch)");
      continue;
    }
    if (view.slurm_gpus_per_task && c.variable == "SLURM_LOCALID") {
      ignored.push_back(setting(c) + " (srun --gpus-per-task: each task has GPUs of its own)");
      continue;
    }
    if (!detail::read_rank_number(c.value)) {
      throw bad_input(
          setting(c) +
              " is not a local rank (a non-negative integer); fix the launcher's setting "
              "or unset it",
          variable_problem(c.variable, c.value, "rank-unreadable"));
    }
    counted.push_back(&c);
  }
  if (counted.empty()) return std::nullopt;
  bool agree = true;  // as numbers: "01" and "1" agree
  for (const detail::RankCandidate* c : counted) {
    agree = agree &&
            detail::read_rank_number(c->value) == detail::read_rank_number(counted.front()->value);
  }
  LocalRank out;
  const auto levels = counted.size() > 1 ? group_by_launcher(counted) : std::nullopt;
  if (levels && levels->size() > 1) {
    // Nested launchers: every one counts, outermost first.
    std::optional<int> total = 1;
    int rank = 0;
    for (std::size_t i = 0; i < levels->size(); ++i) {
      const detail::RankCandidate& c = *(*levels)[i].front();
      const int value = *detail::read_rank_number(c.value);
      std::string size_variable;
      std::optional<int> size = size_of(c, view, &size_variable);
      const bool innermost = i + 1 == levels->size();
      if (!innermost && !size) {
        if (value != 0) {
          throw bad_input(setting(c) + " (" + where_set(c) + ") is set by a launcher of " +
                              std::string(detail::launcher_of(c.variable)) +
                              " that does not say how many processes it started on this node, "
                              "and a launcher inside it sets " +
                              (*levels)[i + 1].front()->variable +
                              "; gpusel cannot tell the processes apart. Give each process its GPU "
                              "(GPUSEL_GPU, GPUSEL_GPUS) or do not nest the launchers",
                          variable_problem(c.variable, c.value, "nested-without-size"));
        }
        ignored.push_back(setting(c) + " (" + where_set(c) +
                          "; its launcher says no size, and rank 0 counts as one task)");
        continue;
      }
      if (rank != 0 && !size) {
        throw bad_input((*levels)[i].front()->variable + " runs inside " +
                            out.levels.back().variable +
                            ", but its launcher does not say how many processes it started; "
                            "give each process its GPU (GPUSEL_GPU, GPUSEL_GPUS)",
                        variable_problem((*levels)[i].front()->variable,
                                         (*levels)[i].front()->value, "nested-without-size"));
      }
      rank = rank * size.value_or(1) + value;
      total = total && size ? std::optional<int>(*total * *size) : std::nullopt;
      out.levels.push_back(LauncherLevel{c.variable, value, size});
      out.variable = c.variable;
      out.size_variable = size_variable;
      for (std::size_t k = 1; k < (*levels)[i].size(); ++k) {
        ignored.push_back(setting(*(*levels)[i][k]) + " (set with " + c.variable + ")");
      }
    }
    out.rank = rank;
    out.local_size = total;
    if (out.levels.size() == 1) {
      out.levels.clear();
      out.local_size = total;
    }
    out.ignored = std::move(ignored);
    return out;
  }
  const detail::RankCandidate* chosen = counted.front();
  if (!agree) {
    chosen = nearest(counted);
    if (chosen == nullptr) {
      std::string list;
      for (const detail::RankCandidate* c : counted) {
        list += (list.empty() ? "" : " and ") + setting(*c) + " (" + where_set(*c) + ")";
      }
      throw bad_input(
          "the local rank is ambiguous: " + list +
              "; gpusel cannot tell which launcher started this process. Unset the variable an "
              "outer launcher left behind, or give the process its GPU with GPUSEL_GPU or --gpu",
          variable_problem(counted.front()->variable, counted.front()->value, "ambiguous"));
    }
    for (const detail::RankCandidate* c : counted) {
      if (detail::read_rank_number(c->value) != detail::read_rank_number(chosen->value)) {
        ignored.push_back(setting(*c) + " (" + where_set(*c) + ", further out than " +
                          chosen->variable + ")");
      }
    }
  } else {
    // All agree: report the nearest when known, else the first in kRankVariables order.
    if (const detail::RankCandidate* n = nearest(counted); n != nullptr) chosen = n;
  }
  out.variable = chosen->variable;
  out.rank = *detail::read_rank_number(chosen->value);
  out.ignored = std::move(ignored);
  out.local_size = size_of(*chosen, view, &out.size_variable);
  if (!chosen->size_value) out.size_variable.clear();
  return out;
}

}  // namespace gpusel::detail
