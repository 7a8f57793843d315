// Slurm's GPUs on this node against the device a process binds: part of the one analysis of
// placement (placement.cpp), with the cause of a mismatch told apart.
#include <algorithm>

#include "gpusel/error.hpp"
#include "gpusel_detail.hpp"
#include "text.hpp"

namespace gpusel::detail {
namespace {

using Vars = std::map<std::string, std::string>;

std::optional<std::string> var(const Vars& vars, const char* name) {
  auto it = vars.find(name);
  if (it == vars.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

// The GPUs Slurm gave, as it wrote them: SLURM_STEP_GPUS in a step, SLURM_JOB_GPUS in the batch
// step (the job script).
struct Grant {
  std::string variable;
  std::string value;
  bool batch = false;
};

std::optional<Grant> grant_in(const Vars& vars) {
  const bool batch = !var(vars, "SLURM_STEP_ID") && !var(vars, "SLURM_STEPID");
  const char* variable = batch ? "SLURM_JOB_GPUS" : "SLURM_STEP_GPUS";
  const auto value = var(vars, variable);
  if (!value) return std::nullopt;
  return Grant{variable, *value, batch};
}

// What Slurm's numbers are on this machine: NVML's GPUs of those nvidia-smi indices.
struct GrantedGpus {
  std::vector<const GpuInfo*> gpus;  // readable ones
  std::vector<const GpuInfo*> lost;  // listed by NVML, but failed (fallen off the bus)
  bool complete = true;              // every number found among NVML's GPUs
};

GrantedGpus granted(const std::vector<GpuInfo>& nvml, const std::string& value) {
  GrantedGpus out;
  each_comma_piece(value, [&](std::string_view piece) {
    const auto index = read_decimal(trim_blanks(piece), 1u << 20);
    const GpuInfo* found = nullptr;
    for (const GpuInfo& g : nvml) {
      if (index && g.index == *index) found = &g;
    }
    if (found == nullptr) {
      out.complete = false;
    } else if (found->failed()) {
      out.lost.push_back(found);
    } else {
      out.gpus.push_back(found);
    }
    return true;
  });
  return out;
}

bool holds(const GpuInfo& g, const std::string& uuid) {
  if (!g.uuid.empty() && (same_entry(g.uuid, uuid) || starts_with_ci(uuid, g.uuid))) return true;
  for (const MigDevice& m : g.migs) {
    if (same_entry(m.uuid, uuid)) return true;
  }
  return false;
}

std::string label(const std::vector<GpuInfo>& nvml, const std::string& uuid) {
  for (const GpuInfo& g : nvml) {
    if (holds(g, uuid)) return "nvidia-smi " + std::to_string(g.index) + " (" + uuid + ")";
  }
  return uuid;
}

// The same numbers, in the same order, as Slurm's list.
bool same_numbers(std::string_view a, std::string_view b) {
  std::vector<std::string_view> x = split_commas(a), y = split_commas(b);
  if (x.size() != y.size()) return false;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const auto p = read_decimal(trim_blanks(x[i]), 1u << 20);
    const auto q = read_decimal(trim_blanks(y[i]), 1u << 20);
    if (!p || !q || *p != *q) return false;
  }
  return true;
}

struct Context {
  const PlacementModel& m;
  Grant grant;
  bool from_node_task = false;           // the grant was read from the task Slurm started here
  std::optional<std::string> carried;    // the node this process's Slurm variables came from
  std::optional<std::string> here;       // this node's name, as Slurm told its task
  std::optional<std::string> slurm_cvd;  // CUDA_VISIBLE_DEVICES as Slurm set it on this node
};

std::string given_text(const Context& c) {
  return std::string("Slurm gave this ") + (c.grant.batch ? "job" : "step") +
         (c.here ? " on node " + quote_value(*c.here) : std::string()) + " nvidia-smi GPU(s) " +
         c.grant.value + " (" + c.grant.variable + ")";
}

PlacementProblem why(const Context& c, const GrantedGpus& g, const std::string& chosen) {
  const std::vector<GpuInfo>& nvml = *c.m.nvml;
  const std::string preset = "CUDA_VISIBLE_DEVICES=" + quote_value(*c.m.cuda.visible_devices);
  const std::string bound = label(nvml, chosen);
  if (!g.lost.empty()) {
    std::string lost;
    for (const GpuInfo* l : g.lost)
      lost += (lost.empty() ? "" : ", ") + std::to_string(l->index) + " (" + l->failure + ")";
    return {"slurm-gpu-lost",
            given_text(c) + ", but GPU " + lost +
                " has failed: CUDA no longer enumerates it, so the numbers of " + preset +
                " count over the GPUs still there, and this process would run on " + bound +
                ", which Slurm did not give it",
            "have the node drained and the GPU reset or taken out of gres.conf (scontrol update "
            "nodename=NODE state=drain reason=...); meanwhile run elsewhere (srun -x NODE) or "
            "with fewer GPUs",
            {}};
  }
  if (c.carried) {
    const bool known = !c.grant.value.empty();
    return {"slurm-carried",
            preset + " and SLURMD_NODENAME=" + quote_value(*c.carried) +
                " came with this process from node " + quote_value(*c.carried) +
                ", carried to node " + quote_value(c.here.value_or("?")) +
                " by a launcher that passes its environment on (mpiexec.hydra, mpirun -x): they "
                "are that node's GPUs, not this one's. " +
                (known ? given_text(c) + " (\"" + c.slurm_cvd.value_or(c.grant.value) + "\")"
                       : "Slurm named no GPUs for the task it started on this node") +
                ", and this process would run on " + bound,
            "let each node's processes take that node's own GPUs: start them with srun, or keep "
            "the launcher from passing CUDA_VISIBLE_DEVICES on (mpiexec.hydra: -genvnone, or list "
            "what to pass with -genvlist), or give each node GPUSEL_GPUS resolved there",
            {}};
  }
  const std::string slurm_set = c.slurm_cvd.value_or(c.grant.value);
  if (!same_numbers(*c.m.cuda.visible_devices, slurm_set)) {
    return {"slurm-visible-changed",
            given_text(c) + ", but " + preset + " is not what Slurm set (\"" + slurm_set +
                "\"): something started after Slurm changed it (an MPI wrapper or job script "
                "that sets CUDA_VISIBLE_DEVICES from a rank, a launcher's --gpu_ids, or mpirun -x "
                "CUDA_VISIBLE_DEVICES carrying another node's list here), and this process would "
                "run on " +
                bound + ", which Slurm did not give it",
            "leave CUDA_VISIBLE_DEVICES as Slurm set it (drop the wrapper's export, or mpirun's -x "
            "CUDA_VISIBLE_DEVICES) and let gpusel pick each rank's GPU within it, or set it only "
            "to GPUs of " +
                c.grant.variable,
            {}};
  }
  if (!homogeneous(nvml) && !pci_bus_order(c.m.cuda)) {
    return {"slurm-gpu-order",
            given_text(c) + " and set " + preset +
                ", but CUDA reads those numbers in its own order (CUDA_DEVICE_ORDER " +
                (c.m.cuda.device_order ? "=" + quote_value(*c.m.cuda.device_order)
                                       : std::string("unset")) +
                ", fastest first) and this process would run on " + bound +
                ", which Slurm did not give it: on a machine of mixed GPU models the numbers "
                "differ",
            "export CUDA_DEVICE_ORDER=PCI_BUS_ID in the job script (before srun), so that CUDA "
            "reads Slurm's numbers as nvidia-smi does",
            {}};
  }
  return {"slurm-gpu-not-given",
          given_text(c) + ", and this process would run on " + bound + " (" + preset +
              "), which Slurm did not give it",
          "bind a GPU of " + c.grant.variable + ", or let gpusel pick within them",
          {}};
}

std::optional<Context> context_of(const PlacementModel& m) {
  if (!slurm_grant_checked(m.cuda)) return std::nullopt;
  Context c{m, {}, false, std::nullopt, var(m.vars, "SLURMD_NODENAME"), std::nullopt};
  std::optional<Grant> grant;
  if (m.slurm_task) {
    grant = grant_in(*m.slurm_task);
    c.from_node_task = grant.has_value();
    c.here = var(*m.slurm_task, "SLURMD_NODENAME");
    c.slurm_cvd = var(*m.slurm_task, "CUDA_VISIBLE_DEVICES");
    const auto mine = var(m.vars, "SLURMD_NODENAME");
    if (mine && c.here && *mine != *c.here) c.carried = mine;
  }
  if (!grant && !c.carried) grant = grant_in(m.vars);
  if (!grant) {
    if (!c.carried) return std::nullopt;
    c.grant = Grant{"", "", false};
  } else {
    c.grant = *grant;
  }
  return c;
}

}  // namespace

// Slurm's grant is read against CUDA_VISIBLE_DEVICES, which Slurm sets to it: without the
// variable there is nothing to compare.
bool slurm_grant_checked(const CudaEnv& cuda) {
  return cuda.visible_devices.has_value();
}

std::optional<PlacementProblem> slurm_placement_problem(const PlacementModel& m,
                                                        const std::string& chosen) {
  const std::optional<Context> c = context_of(m);
  if (!c) return std::nullopt;
  if (!m.nvml) {
    if (!c->carried) return std::nullopt;  // NVML cannot say: nothing to check
    static const std::vector<GpuInfo> none;
    PlacementModel copy = m;
    copy.nvml = none;
    return why(Context{copy, c->grant, c->from_node_task, c->carried, c->here, c->slurm_cvd},
               GrantedGpus{}, chosen);
  }
  // Variables carried from another node are judged as a whole: unless they happen to be this
  // node's own, every process here refuses them, not only one that would leave the job.
  if (c->carried &&
      (c->grant.value.empty() ||
       !same_numbers(*m.cuda.visible_devices, c->slurm_cvd.value_or(c->grant.value)))) {
    return why(*c, granted(*m.nvml, c->grant.value), chosen);
  }
  const GrantedGpus g = granted(*m.nvml, c->grant.value);
  if (!g.complete || (g.gpus.empty() && g.lost.empty())) return std::nullopt;
  for (const GpuInfo* gpu : g.gpus) {
    if (holds(*gpu, chosen)) return std::nullopt;
  }
  return why(*c, g, chosen);
}

std::optional<PlacementProblem> slurm_exposure_warning(const PlacementModel& m) {
  const std::optional<Context> c = context_of(m);
  if (!c || !m.nvml || !m.visible || c->carried) return std::nullopt;
  const GrantedGpus g = granted(*m.nvml, c->grant.value);
  if (!g.complete) return std::nullopt;
  std::string which;
  for (const std::string& d : *m.visible) {
    bool given = false;
    for (const GpuInfo* gpu : g.gpus) given = given || holds(*gpu, d);
    if (!given) which += (which.empty() ? "" : ", ") + label(*m.nvml, d);
  }
  if (which.empty()) return std::nullopt;
  return PlacementProblem{
      "slurm-gpu-exposed",
      given_text(*c) + ", but CUDA also shows this process " + which +
          " (CUDA_VISIBLE_DEVICES=" + quote_value(*m.cuda.visible_devices) +
          "); a program that picks its own device may run there",
      "bind through gpusel (it binds only GPUs Slurm gave), or make CUDA_VISIBLE_DEVICES show "
      "only those (CUDA_DEVICE_ORDER=PCI_BUS_ID on a machine of mixed models)",
      {}};
}

}  // namespace gpusel::detail
