// gpusel doctor: what will go wrong on this machine and in this environment before a job runs,
// each finding with a severity and a remedy.
#include <fmt/format.h>
#include <unistd.h>
#include <cstdio>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "ancestry.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "gpusel/amd.hpp"
#include "gpusel/bandwidth.hpp"
#include "gpusel/error.hpp"
#include "gpusel/lease.hpp"
#include "gpusel/nvml.hpp"
#include "gpusel/probe.hpp"
#include "gpusel/resolution.hpp"
#include "gpusel/spec.hpp"
#include "gpusel/worker.hpp"
#include "gpusel_detail.hpp"
#include "sim_machine.hpp"

namespace gpusel::cli {

namespace {

// Whether this process runs as root (where a remedy needs no sudo); never on Windows.
bool running_as_root() {
#ifdef _WIN32
  return false;
#else
  return geteuid() == 0;
#endif
}

enum class Severity { Error, Warning, Info };

const char* severity_name(Severity s) {
  switch (s) {
    case Severity::Error:
      return "error";
    case Severity::Warning:
      return "warning";
    case Severity::Info:
      return "info";
  }
  return "info";
}

struct Finding {
  Severity severity;
  std::string id;  // stable, for scripts and tests
  std::string message;
  std::string remedy;
  std::vector<unsigned> gpus;  // nvidia-smi indices concerned, when any
  Problem data;                // what it is about, and its values (the placement check's)
};

std::string join(const std::vector<std::string>& items, const std::string& sep = ", ") {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::string index_list(const std::vector<unsigned>& indices) {
  std::vector<std::string> s;
  for (unsigned i : indices) s.push_back(std::to_string(i));
  return join(s, ",");
}

// "GPU 5 is", "GPUs 1,2,3 are" (`one`, `many`: the verb, "" for none).
std::string gpu_list_text(const std::vector<unsigned>& indices, const std::string& one,
                          const std::string& many) {
  const std::string& verb = indices.size() == 1 ? one : many;
  return (indices.size() == 1 ? "GPU " : "GPUs ") + index_list(indices) +
         (verb.empty() ? "" : " " + verb);
}

class Doctor {
 public:
  std::vector<Finding> findings;

  void add(Severity s, std::string id, std::string message, std::string remedy,
           std::vector<unsigned> gpus = {}, Problem data = {}) {
    // The library's texts in the command line's words (said).
    findings.push_back(
        {s, std::move(id), said(message), said(remedy), std::move(gpus), std::move(data)});
  }

  void run() {
    env = cuda_env_from_environment();
    snap = query_nvml(NvmlQuery{true, false});
    probe = probe_cuda(default_probe_helper(), true);
    check_drivers();
    if (snap.available) {
      check_gpus();
      check_order();
    }
    check_preset();
    if (snap.available && probe.ok) check_agreement();
    if (snap.available) check_usage();
    check_slurm();
    check_amd_visibility();
    check_assignment();
    check_simulated_runtime();
  }

  NvmlSnapshot snap;
  std::size_t amd_gpus = 0;    // AMD GPUs ROCm SMI monitors, asked only where NVML is unavailable
  std::size_t amd_beside = 0;  // AMD GPUs ROCm SMI monitors beside NVIDIA's (NVML available)
  ProbeResult probe;
  CudaEnv env;
  // Where a worker started in this environment binds (null when it would refuse, or CUDA cannot
  // tell).
  nlohmann::json worker;

 private:
  std::vector<const GpuInfo*> readable() const {
    std::vector<const GpuInfo*> out;
    for (const GpuInfo& g : snap.gpus) {
      if (!g.failed()) out.push_back(&g);
    }
    return out;
  }

  // The render nodes ROCm opens before it numbers any GPU (docs/amd.md, "The first filter"): one
  // missing or denied here leaves its GPU out of HIP's numbers (a warning: by design in a
  // container given other GPUs); any other failure makes ROCm start no GPU (an error).
  void check_render_nodes(const AmdSnapshot& amd) {
    for (const AmdGpu& g : amd.gpus) {
      const RenderAccess access = render_access(g);
      if (access == RenderAccess::Usable) continue;
      const int e = *g.render_error;
      if (access == RenderAccess::LeftOut) {
        add(Severity::Warning, "amd-render-node-missing",
            fmt::format("{} ({}) {}: HIP programs started here cannot use that GPU, and it has no "
                        "HIP number",
                        g.render_node, g.id,
                        e == ENOENT ? "does not exist here" : "is denied by the device cgroup"),
            "nothing to do in a container given other GPUs; otherwise give it the device (docker "
            "--device " +
                g.render_node + ")",
            {g.index});
      } else {
        add(Severity::Error, "amd-render-node-unopenable",
            fmt::format("{} ({}) cannot be opened ({}): ROCm opens every GPU's render node, so HIP "
                        "programs start with no GPU at all",
                        g.render_node, g.id, std::strerror(e)),
            render_node_remedy(g), {g.index});
      }
    }
  }

  // "0: GPU-..., 1: no id": each AMD GPU's rocm-smi index and unique id.
  static std::string amd_ids_text(const AmdSnapshot& amd) {
    std::string ids;
    for (const AmdGpu& g : amd.gpus) {
      ids += (ids.empty() ? "" : ", ") + std::to_string(g.index) + ": " +
             (g.id.empty() ? "no id" : g.id);
    }
    return ids;
  }

  void check_drivers() {
    // No NVIDIA driver, and ROCm SMI monitors AMD GPUs: an AMD machine, where the NVIDIA findings
    // below are facts, not faults.
    if (!snap.available) {
      if (const AmdSnapshot amd = query_rocm_smi(false); amd.available && !amd.gpus.empty()) {
        amd_gpus = amd.gpus.size();
        const std::string ids = amd_ids_text(amd);
        add(Severity::Info, "amd-gpus",
            fmt::format("no NVIDIA driver; ROCm SMI monitors {} AMD GPU{} (rocm-smi index: id: "
                        "{}); gpusel lists them, resolves --gpu to them, leases them and gives "
                        "each worker its GPU by id in ROCR_VISIBLE_DEVICES",
                        amd.gpus.size(), amd.gpus.size() == 1 ? "" : "s", ids),
            "`gpusel list` shows them with each GPU's HIP ordinal here; start HIP programs with "
            "`gpusel run --gpu ...`, or wrap each rank's as `gpusel bind -- PROGRAM` "
            "(docs/amd.md)");
        check_render_nodes(amd);
      }
    } else if (const AmdSnapshot amd = query_rocm_smi(false); amd.available && !amd.gpus.empty()) {
      // NVIDIA's GPUs and AMD's in one machine.
      amd_beside = amd.gpus.size();
      const std::string ids = amd_ids_text(amd);
      add(Severity::Info, "amd-gpus-beside-nvidia",
          fmt::format("ROCm SMI also monitors {} AMD GPU{} (rocm-smi index: id: {}); --gpu N, "
                      "free:N and all count NVIDIA's GPUs here, AMD GPUs are named by unique "
                      "id, and one job's GPUs are one maker's",
                      amd.gpus.size(), amd.gpus.size() == 1 ? "" : "s", ids),
          "`gpusel list` shows both makers' GPUs; start HIP programs with `gpusel run --gpu "
          "GPU-<AMD id>,...` (docs/amd.md)");
      check_render_nodes(amd);
    }
    if (amd_gpus > 0) {
      add(Severity::Info, "nvml-unavailable", "NVML is unavailable: " + snap.reason,
          "nothing to do on a machine with AMD GPUs only");
      if (!probe.ok) {
        add(Severity::Info, "cuda-missing", "CUDA cannot be used here: " + probe.reason,
            "nothing to do on a machine with AMD GPUs only");
      }
      return;
    }
    if (!snap.available) {
      const bool cuda_ok = probe.ok;
      add(cuda_ok ? Severity::Warning : Severity::Error, "nvml-unavailable",
          "NVML is unavailable: " + snap.reason +
              (cuda_ok ? "; gpusel places nvidia-smi indices through CUDA's own list instead, "
                         "without CPU placement, usage or leases by free:N"
                       : ""),
          simulated_machine()
              ? "this simulated machine models a missing or broken NVML; choose another with "
                "--sim (gpusel sim list)"
              : "install the NVIDIA driver's NVML (libnvidia-ml.so.1, in the driver package) or "
                "point GPUSEL_NVML_LIBRARY at it; on a machine without a GPU, try --sim dgx-h100");
    }
    if (!probe.ok) {
      const ErrorCode why = probe.problem.code;
      if (why == ErrorCode::CudaLinkStub) {
        add(Severity::Error, "cuda-stub",
            "the libcuda.so.1 that programs load is the CUDA toolkit's link stub "
            "(.../stubs/libcuda.so), not the driver: every CUDA program fails with "
            "CUDA_ERROR_STUB_LIBRARY",
            "remove the toolkit's stubs folder from LD_LIBRARY_PATH (and from ld.so.conf); link "
            "against the stub at build time only");
      } else if (why == ErrorCode::LibraryNotLoaded) {
        add(Severity::Error, "cuda-missing", "CUDA cannot be used here: " + probe.reason,
            "install the NVIDIA driver (it provides libcuda.so.1), or point GPUSEL_CUDA_LIBRARY "
            "at it; in a container, start it with the NVIDIA container toolkit (docker run "
            "--gpus all)");
      } else {
        add(Severity::Error, "cuda-unavailable", "CUDA cannot be used here: " + probe.reason,
            "install or repair the NVIDIA driver (libcuda.so.1), check `dmesg` for NVRM errors, "
            "and that CUDA_VISIBLE_DEVICES does not hide every GPU");
      }
    }
  }

  void check_gpus() {
    if (snap.gpus.empty()) {
      add(Severity::Error, "no-gpus", "NVML reports no GPU on this machine",
          "check that the GPUs are seen on the PCI bus (lspci -d 10de:) and that the driver "
          "loaded (dmesg | grep NVRM)");
    }
    for (const GpuInfo& g : snap.gpus) {
      if (g.failed()) {
        add(Severity::Error, "gpu-lost",
            fmt::format("GPU {} cannot be read by NVML ({}); CUDA does not enumerate it, so "
                        "CUDA ordinals past it shift by one",
                        g.index, detail::printable(g.failure)),
            fmt::format("look for Xid errors in `dmesg`; reset the GPU (nvidia-smi -r -i {}) or "
                        "reboot; until then leave it out of --gpu and name GPUs by UUID, which "
                        "never shift",
                        g.index),
            {g.index});
        continue;
      }
      if (g.mig_enabled) {
        if (g.migs.empty()) {
          add(Severity::Warning, "mig-no-instances",
              fmt::format("GPU {} has MIG mode on but no MIG device: CUDA cannot use it at all",
                          g.index),
              fmt::format("create instances (nvidia-smi mig -i {} -cgi ... -C) or turn MIG off "
                          "(nvidia-smi -i {} -mig 0, then reset the GPU)",
                          g.index, g.index),
              {g.index});
        } else {
          add(Severity::Info, "mig-enabled",
              fmt::format("GPU {} is in MIG mode with {} MIG devices: CUDA sees those, not the "
                          "GPU; gpusel assigns whole GPUs, so --gpu cannot name it",
                          g.index, g.migs.size()),
              "run MIG jobs with CUDA_VISIBLE_DEVICES=MIG-<uuid> (gpusel list shows them), or "
              "turn MIG off for whole-GPU jobs (nvidia-smi -i N -mig 0)",
              {g.index});
        }
      }
      if (g.pcie_generation > 0 && g.pcie_max_generation > 0 &&
          (g.pcie_width < g.pcie_max_width || g.pcie_generation < g.pcie_max_generation)) {
        const double now = pcie_link_gbps(g.pcie_generation, g.pcie_width);
        const double best = pcie_link_gbps(g.pcie_max_generation, g.pcie_max_width);
        const bool narrow = g.pcie_width < g.pcie_max_width;
        add(narrow ? Severity::Warning : Severity::Info, "pcie-trained-down",
            fmt::format("GPU {}'s PCIe link runs at Gen{} x{} ({:.1f} GB/s per direction); it "
                        "can do Gen{} x{} ({:.1f} GB/s)",
                        g.index, g.pcie_generation, g.pcie_width, now, g.pcie_max_generation,
                        g.pcie_max_width, best),
            narrow ? "reseat the card or its riser and check the slot's wiring and the BIOS PCIe "
                     "settings; `gpusel bench bw --gpu N` measures what the link delivers"
                   : "an idle GPU lowers its link speed to save power, so this may be harmless: "
                     "check under load with `gpusel bench bw --gpu N`",
            {g.index});
      }
      if (g.reading(GpuReading::persistence_mode) == std::uint64_t{0}) {
        off_persistence.push_back(g.index);
      }
    }
    if (!off_persistence.empty()) {
      add(Severity::Warning, "persistence-off",
          fmt::format("persistence mode is off on GPU {}: the driver tears the GPU down when "
                      "the last program exits, so every job start (and each probe) pays seconds "
                      "of initialisation",
                      index_list(off_persistence)),
          "start nvidia-persistenced (the driver's daemon), or `sudo nvidia-smi -pm 1`",
          off_persistence);
    }
  }

  void check_order() {
    std::vector<const GpuInfo*> ok = readable();
    std::vector<GpuInfo> gpus;
    for (const GpuInfo* g : ok) gpus.push_back(*g);
    if (detail::homogeneous(gpus)) return;
    if (detail::pci_bus_order(env)) return;
    std::set<std::string> models;
    for (const GpuInfo* g : ok) models.insert(detail::printable(g->name));
    const std::string order = env.device_order
                                  ? "CUDA_DEVICE_ORDER=\"" + detail::printable(*env.device_order) +
                                        "\" (read as FASTEST_FIRST)"
                                  : std::string("CUDA_DEVICE_ORDER is unset");
    add(Severity::Warning, "mixed-models-order",
        fmt::format("this machine has GPUs of different models ({}) and {}: CUDA numbers them "
                    "fastest first, so cuda:N and cudaSetDevice(N) do not mean nvidia-smi's GPU N",
                    join({models.begin(), models.end()}), order),
        "export CUDA_DEVICE_ORDER=PCI_BUS_ID (then CUDA ordinals follow nvidia-smi), or name GPUs "
        "by UUID; gpusel run binds by UUID either way");
  }

  void check_preset() {
    if (!env.visible_devices) return;
    const std::string value = *env.visible_devices;
    const std::string shown = "CUDA_VISIBLE_DEVICES=" + detail::quote_value(value);
    if (!snap.available) {
      return;  // without NVML the devices cannot be placed; the probe's findings stand
    }
    std::vector<GpuInfo> gpus = snap.gpus;
    std::optional<std::vector<int>> order;
    if (probe.ok) order = detail::cuda_order_from(gpus, probe.devices);
    const VisibleSet vs = model_visible(gpus, env, order ? &*order : nullptr);
    if (vs.entries.empty() || (vs.entries.size() == 1 && vs.entries[0].empty())) {
      add(Severity::Error, "visible-empty",
          shown + " is set but empty: CUDA sees no device, and every CUDA program fails",
          "unset CUDA_VISIBLE_DEVICES, or give it the GPUs this job may use");
      return;
    }
    if (vs.duplicate) {
      add(Severity::Error, "visible-duplicate",
          shown + " names a GPU twice: the driver then exposes no device at all",
          "list each GPU once (gpusel resolve --gpu SPEC --format csv prints a clean list)");
      return;
    }
    if (vs.invalid_entry) {
      std::vector<std::string> kept;
      for (std::size_t i = 0; i < vs.used_entries; ++i) kept.push_back(vs.entries[i]);
      add(Severity::Error, "visible-truncated",
          fmt::format("{}: the driver stops reading at the invalid entry {}, so CUDA sees only "
                      "{}{}",
                      shown, detail::quote_value(*vs.invalid_entry),
                      kept.empty() ? std::string("no device") : "\"" + join(kept, ",") + "\"",
                      kept.empty() ? "" : fmt::format(" ({} devices)", vs.devices.size())),
          "remove " + detail::quote_value(*vs.invalid_entry) +
              " (an index past the last GPU, a negative number, a typo or a UUID of another "
              "machine); `gpusel list` shows the GPUs");
      return;
    }
    if (vs.mode == VisibleMode::MigUuids) {
      add(Severity::Info, "visible-mig",
          shown +
              " names MIG devices: CUDA sees only those; gpusel assigns whole GPUs, so "
              "--gpu and GPUSEL_GPUS cannot be used under it",
          "run one process per MIG device with its own CUDA_VISIBLE_DEVICES");
    }
  }

  void check_agreement() {
    std::set<std::string> nvml, cuda;
    for (const GpuInfo* g : readable()) nvml.insert(lower(g->uuid));
    for (const CudaDevice& d : probe.devices) cuda.insert(lower(d.parent_uuid));
    std::vector<std::string> only_nvml, only_cuda;
    for (const std::string& u : nvml) {
      if (!cuda.count(u)) only_nvml.push_back(u);
    }
    for (const std::string& u : cuda) {
      if (!nvml.count(u)) only_cuda.push_back(u);
    }
    if (only_nvml.empty() && only_cuda.empty()) return;
    std::string what;
    if (!only_nvml.empty()) what += "NVML lists " + join(only_nvml) + ", which CUDA does not";
    if (!only_cuda.empty()) {
      what += (what.empty() ? "" : "; ") + std::string("CUDA enumerates ") + join(only_cuda) +
              ", which NVML does not list";
    }
    add(Severity::Error, "nvml-cuda-disagree",
        fmt::format("NVML and CUDA disagree about the GPUs ({} for NVML, {} for CUDA without "
                    "CUDA_VISIBLE_DEVICES): {}; gpusel resolves --gpu through NVML and binds "
                    "through CUDA, so some GPUs cannot be bound",
                    nvml.size(), cuda.size(), what),
        "check that libnvidia-ml.so.1 and libcuda.so.1 come from the same driver installation "
        "(ldconfig -p | grep -E 'libcuda|libnvidia-ml'); in a container, that the runtime passes "
        "the same GPUs to both");
  }

  void check_usage() {
    for (const GpuInfo* g : readable()) {
      if (g->processes && !g->processes->empty()) {
        std::vector<std::string> who;
        for (const GpuProcess& p : *g->processes) {
          if (p.pid == static_cast<unsigned>(detail::current_pid())) continue;
          who.push_back(p.used_memory
                            ? fmt::format("pid {} ({})", p.pid, detail::format_bytes(p.used_memory))
                            : fmt::format("pid {}", p.pid));
        }
        if (!who.empty()) {
          add(Severity::Warning, "gpu-busy",
              fmt::format("GPU {} is in use by {} process{}: {}{}", g->index, who.size(),
                          who.size() == 1 ? "" : "es", join(who),
                          g->utilization ? fmt::format("; {}% utilised", *g->utilization) : ""),
              "let gpusel pick idle GPUs (--gpu free:N), or wait for them (--wait); "
              "`nvidia-smi` names the programs",
              {g->index});
        }
      }
    }
    check_leases();
  }

  // Where leases live, whether they bind every user, and each GPU's lease.
  void check_leases() {
    const auto chosen = env_value("GPUSEL_LEASE_DIR");
    const std::string shared = chosen && !chosen->empty() ? *chosen : kSharedLeaseStore;
    for (const std::string& problem : detail::store_file_system_problems(shared)) {
      add(Severity::Warning, "lease-store-unsafe", problem,
          "keep the store on a local file system (ext4, xfs, tmpfs; not bindfs, FUSE or NFS) "
          "and run `sudo gpusel setup` (with --lease-dir for another place)");
    }
    std::optional<LeaseStore> store;
    try {
      store = LeaseStore::locate();
    } catch (const Error& e) {
      add(Severity::Error, "lease-folder", said(e),
          "fix the folder, or unset GPUSEL_LEASE_DIR to use the shared store (`sudo gpusel setup` "
          "makes it)");
      return;
    }
    if (const std::string note = store->scope_note(); !note.empty()) {
      add(Severity::Info, "leases-per-user", note,
          running_as_root() ? "gpusel setup" : "sudo gpusel setup");
    }
    std::vector<const GpuInfo*> gpus = readable();
    std::vector<std::string> uuids;
    for (const GpuInfo* g : gpus) uuids.push_back(g->uuid);
    const std::vector<LeaseStanding> standing = store->standings(uuids);
    std::vector<unsigned> unshared;
    // GPUs that stand alike (one job's lease on seven GPUs) are one finding that lists them.
    std::vector<std::pair<const LeaseStanding*, std::vector<unsigned>>> held, unusable;
    auto group = [](auto& groups, const LeaseStanding& s, const std::string& text, unsigned index) {
      for (auto& [first, indices] : groups) {
        if (first->shared == s.shared &&
            (first->state == LeaseStanding::State::Held ? describe_standing(*first)
                                                        : first->problem) == text) {
          indices.push_back(index);
          return;
        }
      }
      groups.push_back({&s, {index}});
    };
    for (std::size_t i = 0; i < gpus.size(); ++i) {
      const LeaseStanding& s = standing[i];
      if (s.state == LeaseStanding::State::Held)
        group(held, s, describe_standing(s), gpus[i]->index);
      if (s.state == LeaseStanding::State::Unusable) group(unusable, s, s.problem, gpus[i]->index);
      if (store->shared() && !s.shared) unshared.push_back(gpus[i]->index);
    }
    for (const auto& [s, indices] : held) {
      add(Severity::Warning, "gpu-leased",
          fmt::format("{} {}", gpu_list_text(indices, "is", "are"), describe_standing(*s)),
          "gpusel run and bench bw refuse them until that job ends: choose other GPUs, use "
          "--gpu free:N, or --wait (or --share, if the GPUs can hold both jobs)",
          indices);
    }
    for (const auto& [s, indices] : unusable) {
      add(Severity::Warning, "lease-unusable",
          fmt::format("{} cannot be leased: {}; free:N skips {}", gpu_list_text(indices, "", ""),
                      s->problem, indices.size() == 1 ? "it" : "them"),
          s->shared ? "sudo gpusel setup" : "remove the file; gpusel makes a new one", indices);
    }
    if (!unshared.empty()) {
      std::vector<std::string> numbers;
      for (unsigned i : unshared) numbers.push_back(std::to_string(i));
      add(Severity::Warning, "lease-store-incomplete",
          fmt::format("the shared lease store {} has no lease file for GPU{} {}, so leases on {} "
                      "bind only your own jobs",
                      store->dir(), unshared.size() == 1 ? "" : "s", join(numbers, ","),
                      unshared.size() == 1 ? "it" : "them"),
          "sudo gpusel setup", unshared);
    }
    const std::vector<WaitingJob> waiting = store->waiting();
    if (!waiting.empty()) {
      std::vector<std::string> who;
      for (const WaitingJob& w : waiting) who.push_back(describe_waiting(w));
      add(Severity::Info, "jobs-waiting",
          fmt::format("{} job{} wait{} for GPUs, served in this order: {}", waiting.size(),
                      waiting.size() == 1 ? "" : "s", waiting.size() == 1 ? "s" : "", join(who)),
          "a new request for the same GPUs waits behind them (--wait)");
    }
  }

  // On a simulated machine: a program run on it used NVIDIA's own CUDA runtime (linked
  // statically), which asks the driver for private interfaces the simulator does not have.
  void check_simulated_runtime() {
    const auto file = env_value("GPUSEL_SIM_MACHINE");
    if (!file || file->empty()) return;
    std::optional<SimMachineInfo> info;
    try {
      info = describe_sim_machine(sim_root(), *file, std::nullopt);
    } catch (const std::exception&) {
      return;
    }
    if (!info || !info->ok || info->static_runtime.empty()) return;
    // "<unix time> <pid> <carrier or -> <executable>": the carrier is the library whose own copy
    // of NVIDIA's runtime asked (libcublas.so.13), "-" when it was the program's.
    const std::string& note = info->static_runtime;
    std::vector<std::string> words;
    std::size_t at = 0;
    while (words.size() < 3) {
      const std::size_t space = note.find(' ', at);
      if (space == std::string::npos) break;
      words.push_back(note.substr(at, space - at));
      at = space + 1;
    }
    const std::string exe = words.size() == 3 ? note.substr(at) : note;
    const std::string pid = words.size() == 3 ? words[1] : "?";
    const std::string carrier = words.size() == 3 && words[2] != "-" ? words[2] : "";
    std::string when = "?";
    try {
      const std::time_t t = static_cast<std::time_t>(std::stoll(words.empty() ? "" : words[0]));
      char text[32];
      const std::tm* tm = std::gmtime(&t);  // doctor runs on one thread here
      if (tm != nullptr && std::strftime(text, sizeof text, "%Y-%m-%d %H:%M UTC", tm) > 0)
        when = text;
    } catch (const std::exception&) {
    }
    const std::string program = "a program run on this simulated machine (" +
                                detail::printable(exe) + ", pid " + pid + ", " + when + ")";
    if (!carrier.empty()) {
      const std::string lib = detail::printable(carrier);
      add(Severity::Warning, "sim-static-runtime",
          program + " loads " + lib +
              ", which carries NVIDIA's own CUDA runtime inside it (as cuBLAS, NCCL and cuDNN "
              "do) and needs private driver interfaces the simulator does not provide: its calls "
              "failed, however the program itself is built",
          "test the launch set-up with a program that makes the same CUDA runtime calls "
          "without " +
              lib + ", and run " + lib + "'s work on a real GPU; see docs/simulator.md");
      return;
    }
    add(Severity::Warning, "sim-static-runtime",
        program +
            " links NVIDIA's CUDA runtime statically (nvcc's default; also runtimes bundled with "
            "frameworks), which needs private driver interfaces the simulator does not provide: "
            "it stopped at its first CUDA call",
        "the simulator runs programs that load libcudart dynamically: build with `nvcc -cudart "
        "shared` (the simulator's libcudart.so.11.0, .12 and .13 then answer); see "
        "docs/simulator.md");
  }

  void check_slurm() {
    const auto job = env_value("SLURM_JOB_ID");
    if (!job || env.visible_devices) return;
    add(Severity::Warning, "slurm-unfenced",
        fmt::format("this is Slurm job {} but CUDA_VISIBLE_DEVICES is unset: the job's GPUs are "
                    "not fenced, so it sees every GPU of the node, other jobs' included",
                    detail::printable(*job)),
        "request GPUs with --gres=gpu:N (or --gpus) so that Slurm sets CUDA_VISIBLE_DEVICES; ask "
        "the administrators to set ConstrainDevices=yes in cgroup.conf");
  }

  // AMD's visibility variables: ROCR_VISIBLE_DEVICES, then HIP_VISIBLE_DEVICES or
  // CUDA_VISIBLE_DEVICES counted within ROCr's result (docs/amd.md), a composition that can leave
  // HIP programs no GPU (Slurm sets two of them to the same numbers).
  //
  // Slurm sets ROCR_VISIBLE_DEVICES beside CUDA_VISIBLE_DEVICES on every node, NVIDIA ones too:
  // where NVML shows NVIDIA GPUs and the machine has no AMD driver (/dev/kfd), CUDA programs are
  // unaffected, so the finding is a note; else an error or a warning.
  void check_amd_visibility() {
    std::error_code ec;
    const bool amd_driver =
        amd_gpus > 0 || amd_beside > 0 || std::filesystem::exists("/dev/kfd", ec);
    const bool nvidia_only = snap.available && !snap.gpus.empty() && !amd_driver;
    for (const detail::AmdVisibilityNote& n : detail::explain_amd_visibility(
             env_value("ROCR_VISIBLE_DEVICES"), env_value("HIP_VISIBLE_DEVICES"),
             env_value("CUDA_VISIBLE_DEVICES"))) {
      const bool fatal = n.kind == detail::AmdVisibilityNote::Kind::NoDevice ||
                         n.kind == detail::AmdVisibilityNote::Kind::Aborts;
      if (nvidia_only) {
        add(Severity::Info, n.id,
            "for HIP programs on an AMD node (this machine has NVIDIA GPUs and no AMD driver, so "
            "CUDA programs here are unaffected): " +
                n.message,
            n.remedy);
      } else {
        add(fatal ? Severity::Error : Severity::Warning, n.id, n.message, n.remedy);
      }
    }
  }

  // The placement of a worker started in this environment: the very analysis bind runs
  // (analyse_placement), over the same model (this environment, the devices CUDA shows a process
  // started with it, NVML's GPUs); each problem an error, so that doctor errs exactly where bind
  // refuses, and the GPU bind would take, for --json.
  void check_assignment() {
    std::optional<std::vector<std::string>> visible;
    if (env.visible_devices) {
      const ProbeResult filtered = probe_cuda(default_probe_helper(), false);
      if (filtered.ok) visible = uuids_of(filtered.devices);
    } else if (probe.ok) {
      visible = uuids_of(probe.devices);
    }
    std::optional<std::vector<GpuInfo>> nvml;
    if (snap.available) nvml = snap.gpus;
    const detail::PlacementVerdict v =
        detail::analyse_placement(detail::placement_model(visible, nvml));
    for (const PlacementProblem& p : v.problems) {
      const bool said = std::any_of(findings.begin(), findings.end(),
                                    [&](const Finding& f) { return f.id == p.id; });
      if (said) continue;
      // A worker handed an AMD GPU of this machine (one with both makers' GPUs): CUDA's placement
      // does not apply; a HIP program binds it (a CUDA program there is the run-time check's).
      if (const std::string amd = amd_gpu_beside(p); !amd.empty()) {
        add(Severity::Info, "worker-gpu-amd",
            "this worker's GPU is AMD GPU " + amd +
                ": a HIP program binds it (ROCR_VISIBLE_DEVICES, or in-process after its first "
                "HIP call); CUDA has only this machine's NVIDIA GPUs",
            "nothing to do for a HIP program; give a CUDA program an NVIDIA GPU");
        continue;
      }
      add(Severity::Error, p.id, p.message, p.remedy, {}, p.data);
    }
    for (const PlacementProblem& p : v.warnings) {
      add(Severity::Warning, p.id, p.message, p.remedy, {}, p.data);
    }
    if (!v.problems.empty() || !v.uuid) return;
    worker = nlohmann::json{
        {"uuid", *v.uuid},
        {"cuda_ordinal", *v.ordinal},
        {"nvidia_smi_index", nullptr},  // set below where NVML lists the GPU
        {"source", source_name(v.source)},
        {"rank", v.rank ? nlohmann::json(v.rank->rank) : nlohmann::json()},
        {"rank_variable", v.rank ? nlohmann::json(v.rank->variable) : nlohmann::json()}};
    for (const GpuInfo& g : snap.gpus) {
      if (!g.failed() && (g.uuid == *v.uuid || v.uuid->rfind(g.uuid, 0) == 0))
        worker["nvidia_smi_index"] = g.index;
    }
  }

  // The AMD GPU (its id and rocm-smi index) a placement problem's GPU is, on a machine with
  // both makers' GPUs; "" otherwise.
  std::string amd_gpu_beside(const PlacementProblem& p) const {
    if (amd_beside == 0) return "";
    const std::string* gpu = p.data.field("gpu");
    if (gpu == nullptr || !detail::amd_id_form(*gpu)) return "";
    for (const AmdGpu& g : query_rocm_smi().gpus) {
      if (detail::starts_with_ci(g.id, *gpu))
        return g.id + " (rocm-smi index " + std::to_string(g.index) + ")";
    }
    return "";
  }

  static std::vector<std::string> uuids_of(const std::vector<CudaDevice>& devices) {
    std::vector<std::string> out;
    for (const CudaDevice& d : devices) out.push_back(d.uuid);
    return out;
  }

  static std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
  }

  std::vector<unsigned> off_persistence;
};

}  // namespace

DoctorOptions read_doctor(const CommandLine& line) {
  DoctorOptions o;
  o.json = line.flag("--json");
  return o;
}

int run_doctor(const DoctorOptions& options) {
  Doctor d;
  d.run();
  std::stable_sort(d.findings.begin(), d.findings.end(), [](const Finding& a, const Finding& b) {
    return static_cast<int>(a.severity) < static_cast<int>(b.severity);
  });
  std::size_t counts[3] = {0, 0, 0};
  for (const Finding& f : d.findings) ++counts[static_cast<int>(f.severity)];
  const auto sim = simulated_machine();
  std::set<std::string> models;
  for (const GpuInfo& g : d.snap.gpus) {
    if (!g.failed()) models.insert(detail::printable(g.name));
  }
  if (options.json) {
    nlohmann::json out;
    out["simulated"] = sim ? nlohmann::json(*sim) : nlohmann::json(nullptr);
    out["nvml"] = d.snap.available;
    out["cuda"] = d.probe.ok;
    out["driver_version"] = d.snap.available ? nlohmann::json(d.snap.driver_version) : nullptr;
    out["gpus"] = d.snap.gpus.size();
    out["errors"] = counts[0];
    out["warnings"] = counts[1];
    out["infos"] = counts[2];
    out["worker"] = d.worker;
    out["findings"] = nlohmann::json::array();
    for (const Finding& f : d.findings) {
      out["findings"].push_back({{"id", f.id},
                                 {"severity", severity_name(f.severity)},
                                 {"message", f.message},
                                 {"remedy", f.remedy},
                                 {"gpus", f.gpus}});
      // What it is about and its values, as in an error object (null and {} when none).
      nlohmann::json& added = out["findings"].back();
      added["subject"] = f.data.subject == Subject::None
                             ? nlohmann::json(nullptr)
                             : nlohmann::json(subject_name(f.data.subject));
      added["fields"] = nlohmann::json::object();
      for (const ProblemField& field : f.data.fields) added["fields"][field.name] = field.value;
    }
    to_stdout() << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::string head = "gpusel doctor: ";
    if (d.snap.available) {
      head += fmt::format("{} GPU{}", d.snap.gpus.size(), d.snap.gpus.size() == 1 ? "" : "s");
      if (!models.empty()) head += " (" + join({models.begin(), models.end()}) + ")";
      head += fmt::format(", driver {}, CUDA {}", detail::printable(d.snap.driver_version),
                          cuda_version_text(d.snap.cuda_driver_version));
    } else {
      head += "NVML unavailable";
    }
    head += d.probe.ok ? fmt::format("; CUDA enumerates {} device{}", d.probe.devices.size(),
                                     d.probe.devices.size() == 1 ? "" : "s")
                       : "; CUDA unavailable";
    if (sim) head += "; simulated machine " + *sim;
    to_stdout() << head << "\n";
    for (const Finding& f : d.findings) {
      to_stdout() << severity_name(f.severity) << ": " << f.message << "\n"
                  << "  remedy: " << f.remedy << "\n";
    }
    if (d.findings.empty()) {
      to_stdout() << "no problems found\n";
    } else {
      to_stdout() << fmt::format("{} error{}, {} warning{}, {} note{}\n", counts[0],
                                 counts[0] == 1 ? "" : "s", counts[1], counts[1] == 1 ? "" : "s",
                                 counts[2], counts[2] == 1 ? "" : "s");
    }
  }
  return counts[0] > 0 ? 1 : 0;
}

}  // namespace gpusel::cli
