// gpusel list: every physical GPU with its nvidia-smi index and its CUDA ordinal here.
#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "common.hpp"
#include "gpusel/bandwidth.hpp"
#include "gpusel/error.hpp"
#include "gpusel/lease.hpp"
#include "gpusel/nvml.hpp"
#include "gpusel/probe.hpp"
#include "gpusel/resolve.hpp"
#include "gpusel/units.hpp"
#include "sim_machine.hpp"

namespace gpusel::cli {

// `text` for a terminal (gpusel::printable): driver strings go through it, so they never move the
// cursor or change colours. (bind.cpp and doctor.cpp use it too.)
std::string printable(std::string_view text) {
  return gpusel::printable(text);
}

namespace {

enum class Visibility { Visible, Hidden, Unknown };

struct Row {
  Visibility visibility = Visibility::Hidden;
  int ordinal = -1;
  std::vector<int> mig_ordinals;  // per MIG device, -1 when hidden
};

// Where each GPU lands in CUDA's numbering, and the notes that explain it.
std::vector<Row> place(const NvmlSnapshot& snap, const CudaEnv& env, const VisibleSet& vs,
                       std::vector<std::string>& notes) {
  std::vector<Row> rows(snap.gpus.size());
  for (std::size_t g = 0; g < rows.size(); ++g) {
    rows[g].mig_ordinals.assign(snap.gpus[g].migs.size(), -1);
    if (!vs.known) rows[g].visibility = Visibility::Unknown;
  }
  for (std::size_t k = 0; k < vs.devices.size(); ++k) {
    const VisibleDevice& d = vs.devices[k];
    Row& row = rows[static_cast<std::size_t>(d.gpu)];
    if (d.mig < 0) {
      row.visibility = Visibility::Visible;
      row.ordinal = static_cast<int>(k);
    } else {
      row.mig_ordinals[static_cast<std::size_t>(d.mig)] = static_cast<int>(k);
    }
  }
  notes = vs.notes;
  if (!vs.known) {
    notes.push_back(
        "'?': " + vs.unknown_reason +
        ". `gpusel list --probe` asks CUDA itself; to make CUDA ordinals follow this table, set "
        "CUDA_DEVICE_ORDER=PCI_BUS_ID. gpusel's --gpu "
        "takes nvidia-smi indices or UUIDs, which never depend on CUDA's order.");
  }
  bool hidden = false;
  bool reordered = false;
  bool failed = false;
  for (std::size_t g = 0; g < rows.size(); ++g) {
    if (snap.gpus[g].failed()) {
      failed = true;
      continue;
    }
    if (rows[g].visibility == Visibility::Hidden && !snap.gpus[g].mig_enabled) hidden = true;
    if (rows[g].visibility == Visibility::Visible && rows[g].ordinal != static_cast<int>(g))
      reordered = true;
    if (snap.gpus[g].mig_enabled) {
      notes.push_back(fmt::format(
          "GPU {} has MIG enabled: CUDA sees its MIG devices (listed under it), not the "
          "GPU itself; gpusel assigns whole GPUs, so --gpu cannot name it.",
          g));
    }
  }
  if (hidden) {
    std::string why = vs.invalid_entry
                          ? fmt::format(" (the driver stops reading it at the invalid entry {})",
                                        quote_value(*vs.invalid_entry))
                          : std::string();
    notes.push_back(
        "'-': hidden from CUDA by " + describe_preset(env) + why +
        ". With this preset, --gpu indices count within the devices CUDA sees (the CUDA "
        "column); to use another GPU, change or unset CUDA_VISIBLE_DEVICES.");
  }
  if (reordered) {
    const std::string cause = env.visible_devices ? "under " + describe_preset(env)
                              : failed            ? std::string("because CUDA skips the failed GPU")
                              : !vs.pci_order     ? std::string("in CUDA's FASTEST_FIRST order")
                                                  : std::string("because MIG devices come first");
    notes.push_back("CUDA ordinals differ from nvidia-smi indices here (" + cause +
                    "); --gpu takes " +
                    (env.visible_devices
                         ? std::string("positions in the CUDA column while the preset is set")
                         : std::string("nvidia-smi indices, so `--gpu 0` is the GPU in row 0")) +
                    ", or UUIDs.");
  }
  return rows;
}

std::string ordinal_text(Visibility v, int ordinal) {
  if (v == Visibility::Unknown) return "?";
  return ordinal < 0 ? "-" : std::to_string(ordinal);
}

nlohmann::json ordinal_json(int ordinal) {
  return ordinal < 0 ? nlohmann::json(nullptr) : nlohmann::json(ordinal);
}

// Under --sim, why NVML is unavailable: the fault the machine file models (suggesting --sim there
// would not help).
std::string simulated_nvml_fault(const std::string& name) {
  std::string fault;
  std::string file = env_value("GPUSEL_SIM_MACHINE").value_or("");
  try {
    if (const auto m = describe_sim_machine(sim_root(), file, std::nullopt); m && m->ok)
      fault = m->nvml_fault;
  } catch (const std::exception&) {
  }
  const std::string what = fault == "missing"      ? "a machine without libnvidia-ml.so.1"
                           : fault == "no_v2"      ? "an NVML without its _v2 entry points"
                           : fault == "init_fails" ? "an NVML whose nvmlInit fails"
                                                   : "";
  if (what.empty()) {
    return "This is the simulated machine " + name + " (" + file +
           "), whose NVML double could not be loaded; check GPUSEL_SIM_ROOT=" +
           quote_value(env_value("GPUSEL_SIM_ROOT").value_or("(unset)")) +
           " holds the simulator, or rebuild the gpusel_sim target";
  }
  return "That is the fault the simulated machine " + name + " models: " + what +
         " ([faults] nvml = \"" + fault + "\" in " + file +
         "); `gpusel sim list` shows the machines, and those without an NVML fault list GPUs";
}

}  // namespace

CLI::App* setup_list(CLI::App& app, ListOptions& options) {
  CLI::App* cmd =
      app.add_subcommand("list", "list the GPUs: nvidia-smi index, CUDA ordinal here, UUID, ...");
  cmd->add_flag("--json", options.json, "print one JSON object");
  cmd->add_flag("--probe", options.probe,
                "also ask CUDA, in a child process, how it numbers the GPUs, and flag any "
                "difference from NVML's reading");
  return cmd;
}

int run_list(const ListOptions& options) {
  const NvmlSnapshot snap = query_nvml(NvmlQuery{true, false});  // with usage
  const auto simulated = simulated_machine();
  if (!snap.available) {
    if (simulated) {
      print_error("cannot list GPUs: NVML is unavailable: " + snap.reason + ". " +
                  simulated_nvml_fault(*simulated));
      return 1;
    }
    print_error("cannot list GPUs: NVML is unavailable: " + snap.reason +
                ". To try gpusel on a machine without GPUs, use a simulated one: "
                "`gpusel --sim dgx-h100 list` (`gpusel sim list` shows all of them).");
    return 1;
  }
  const CudaEnv env = cuda_env_from_environment();
  // Each GPU's lease, from one read of the kernel's lock table; a lease folder that cannot be used
  // is a note, not a failure of `list`.
  std::vector<LeaseStanding> leases(snap.gpus.size());
  std::vector<std::string> lease_notes;
  std::vector<WaitingJob> waiting;
  try {
    const LeaseStore store = LeaseStore::locate();
    std::vector<std::string> uuids;
    for (const GpuInfo& g : snap.gpus) uuids.push_back(g.failed() ? std::string() : g.uuid);
    leases = store.standings(uuids);
    waiting = store.waiting();
    for (std::size_t i = 0; i < snap.gpus.size(); ++i) {
      if (snap.gpus[i].failed()) leases[i] = LeaseStanding{};
    }
  } catch (const Error& e) {
    lease_notes.push_back(std::string("leases cannot be read: ") + e.what());
  }
  VisibleSet vs = model_visible(snap.gpus, env);
  ProbeResult probe;  // CUDA's own view under this environment
  std::vector<std::string> probe_notes;
  if (options.probe) {
    const std::string helper = default_probe_helper();
    if (!vs.known) {  // CUDA's order fills in what NVML cannot tell
      ProbeResult all = probe_cuda(helper, true);
      if (auto order = all.ok ? cuda_order_from(snap.gpus, all.devices) : std::nullopt) {
        vs = model_visible(snap.gpus, env, &*order);
        probe_notes.push_back(
            "CUDA ordinals come from asking CUDA (--probe), not from NVML alone.");
      }
    }
    probe = probe_cuda(helper, false);
    if (!probe.ok) {
      probe_notes.push_back("--probe: asking CUDA failed: " + probe.reason);
    } else if (vs.known) {
      std::vector<std::string> predicted;
      for (const VisibleDevice& d : vs.devices) {
        const GpuInfo& g = snap.gpus[static_cast<std::size_t>(d.gpu)];
        predicted.push_back(d.mig < 0 ? g.uuid : g.migs[static_cast<std::size_t>(d.mig)].uuid);
      }
      std::vector<std::string> actual;
      for (const CudaDevice& d : probe.devices) actual.push_back(d.uuid);
      if (predicted != actual) {
        probe_notes.push_back(
            "--probe: CUDA's numbering DIFFERS from gpusel's reading of NVML and the "
            "environment; trust the CUDA map, and please report this machine");
      } else {
        probe_notes.push_back("--probe: CUDA's numbering matches gpusel's reading.");
      }
    }
  }
  std::vector<std::string> notes;
  const std::vector<Row> rows = place(snap, env, vs, notes);
  notes.insert(notes.end(), probe_notes.begin(), probe_notes.end());
  notes.insert(notes.end(), lease_notes.begin(), lease_notes.end());
  auto nvml_index = [&](const CudaDevice& d) -> std::optional<unsigned> {
    for (const GpuInfo& g : snap.gpus) {
      if (g.uuid == d.parent_uuid) return g.index;
    }
    return std::nullopt;
  };
  const std::string order = pci_bus_order(env) ? "PCI_BUS_ID" : "FASTEST_FIRST";

  if (options.json) {
    nlohmann::json out;
    out["simulated"] = simulated ? nlohmann::json(*simulated) : nlohmann::json(nullptr);
    out["driver_version"] = snap.driver_version;
    out["cuda_driver_version"] = cuda_version_text(snap.cuda_driver_version);
    out["cuda_visible_devices"] =
        env.visible_devices ? nlohmann::json(*env.visible_devices) : nlohmann::json(nullptr);
    out["cuda_device_order"] = order;
    out["notes"] = notes;
    // Jobs waiting for GPUs (gpusel run --wait), in the order they will be served.
    out["waiting"] = nlohmann::json::array();
    for (const WaitingJob& w : waiting) {
      out["waiting"].push_back(
          {{"pid", w.who ? nlohmann::json(w.who->pid) : nlohmann::json(nullptr)},
           {"user", w.who ? nlohmann::json(w.who->user) : nlohmann::json(nullptr)},
           {"command", w.who ? nlohmann::json(printable(w.who->command)) : nlohmann::json(nullptr)},
           {"request", w.what},
           {"gpus", w.gpus}});
    }
    out["gpus"] = nlohmann::json::array();
    for (std::size_t g = 0; g < snap.gpus.size(); ++g) {
      const GpuInfo& gpu = snap.gpus[g];
      nlohmann::json j;
      j["index"] = gpu.index;
      j["cuda_ordinal"] = ordinal_json(rows[g].ordinal);
      j["cuda_visibility"] = rows[g].visibility == Visibility::Visible  ? "visible"
                             : rows[g].visibility == Visibility::Hidden ? "hidden"
                                                                        : "unknown";
      j["uuid"] = gpu.failed() ? nlohmann::json(nullptr) : nlohmann::json(gpu.uuid);
      j["state"] = gpu.failed() ? (gpu.failure.rfind("lost", 0) == 0 ? "lost" : "error") : "ok";
      j["failure"] = gpu.failed() ? nlohmann::json(gpu.failure) : nlohmann::json(nullptr);
      j["name"] = gpu.name;
      j["memory_total_bytes"] = gpu.memory_total;
      j["pci_bus_id"] = gpu.pci_bus_id;
      j["numa_node"] = gpu.numa_node ? nlohmann::json(*gpu.numa_node) : nlohmann::json(nullptr);
      j["compute_capability"] =
          gpu.cc_major < 0 ? nlohmann::json(nullptr)
                           : nlohmann::json(fmt::format("{}.{}", gpu.cc_major, gpu.cc_minor));
      j["cpus"] = format_cpu_list(gpu.cpus);
      j["pcie_link"] =
          gpu.pcie_generation == 0
              ? nlohmann::json(nullptr)
              : nlohmann::json(
                    {{"generation", gpu.pcie_generation},
                     {"width", gpu.pcie_width},
                     {"max_generation", gpu.pcie_max_generation},
                     {"max_width", gpu.pcie_max_width},
                     {"max_gbps", pcie_link_gbps(gpu.pcie_max_generation, gpu.pcie_max_width)}});
      j["memory_used_bytes"] =
          gpu.memory_used ? nlohmann::json(*gpu.memory_used) : nlohmann::json(nullptr);
      j["utilization_percent"] =
          gpu.utilization ? nlohmann::json(*gpu.utilization) : nlohmann::json(nullptr);
      j["processes"] = nlohmann::json::array();
      for (const GpuProcess& p : gpu.processes.value_or(std::vector<GpuProcess>{})) {
        const LeaseHolder who = process_details(static_cast<int>(p.pid));
        j["processes"].push_back(
            {{"pid", p.pid},
             {"used_memory_bytes", p.used_memory},
             {"user", who.user.empty() ? nlohmann::json(nullptr) : nlohmann::json(who.user)},
             {"command", who.command.empty() ? nlohmann::json(nullptr)
                                             : nlohmann::json(printable(who.command))}});
      }
      // The holder of a lease (null when free), and why a lease file cannot be used (null when
      // it can). "lease": {} when the holder cannot be named (another pid namespace).
      const LeaseStanding& lease = leases[g];
      const std::optional<LeaseHolder>& holder = lease.holder;
      j["lease"] = lease.state != LeaseStanding::State::Held ? nlohmann::json(nullptr)
                   : holder                                  ? nlohmann::json({{"pid", holder->pid},
                                                                               {"user", holder->user},
                                                                               {"command", printable(holder->command)},
                                                                               {"started", holder->started}})
                                                             : nlohmann::json::object();
      j["lease_problem"] = lease.state == LeaseStanding::State::Unusable
                               ? nlohmann::json(lease.problem)
                               : nlohmann::json(nullptr);
      j["mig_enabled"] = gpu.mig_enabled;
      j["mig_devices"] = nlohmann::json::array();
      for (std::size_t m = 0; m < gpu.migs.size(); ++m) {
        j["mig_devices"].push_back({{"uuid", gpu.migs[m].uuid},
                                    {"name", gpu.migs[m].name},
                                    {"memory_total_bytes", gpu.migs[m].memory_total},
                                    {"gpu_instance", gpu.migs[m].gpu_instance},
                                    {"compute_instance", gpu.migs[m].compute_instance},
                                    {"cuda_ordinal", ordinal_json(rows[g].mig_ordinals[m])}});
      }
      out["gpus"].push_back(j);
    }
    if (options.probe) {
      nlohmann::json p;
      p["ok"] = probe.ok;
      p["reason"] = probe.ok ? nlohmann::json(nullptr) : nlohmann::json(probe.reason);
      p["devices"] = nlohmann::json::array();
      for (const CudaDevice& d : probe.devices) {
        auto idx = nvml_index(d);
        p["devices"].push_back({{"cuda_ordinal", d.ordinal},
                                {"uuid", d.uuid},
                                {"name", d.name},
                                {"index", idx ? nlohmann::json(*idx) : nlohmann::json(nullptr)}});
      }
      out["probe"] = p;
    }
    // Driver strings may hold bytes that are not UTF-8: they become U+FFFD.
    std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 0;
  }

  if (simulated) fmt::print("simulated machine: {}\n", *simulated);
  fmt::print("driver {}, CUDA {}; {}; CUDA_DEVICE_ORDER {}\n",
             snap.driver_version.empty() ? "unknown" : printable(snap.driver_version),
             cuda_version_text(snap.cuda_driver_version), describe_preset(env),
             env.device_order ? "=" + quote_value(*env.device_order)
                              : std::string("unset (FASTEST_FIRST)"));
  std::size_t name_width = 4;
  // Text from the driver is printed with control bytes escaped: it never drives the terminal.
  for (const GpuInfo& gpu : snap.gpus)
    name_width = std::max(name_width, printable(gpu.name).size());
  fmt::print("{:<5} {:<4} {:<40} {:<{}} {:>10} {:<16} {:<4} {:>10} {:>4}\n", "INDEX", "CUDA",
             "UUID", "NAME", name_width, "MEMORY", "PCI BUS ID", "NUMA", "USED", "UTIL");
  for (std::size_t g = 0; g < snap.gpus.size(); ++g) {
    const GpuInfo& gpu = snap.gpus[g];
    if (gpu.failed()) {
      fmt::print("{:<5} {:<4} {}\n", gpu.index, "-", "FAILED: " + printable(gpu.failure));
      continue;
    }
    fmt::print("{:<5} {:<4} {:<40} {:<{}} {:>10} {:<16} {:<4} {:>10} {:>4}\n", gpu.index,
               ordinal_text(rows[g].visibility, rows[g].ordinal), printable(gpu.uuid),
               printable(gpu.name), name_width,
               gpu.memory_total ? format_bytes(gpu.memory_total) : "?", printable(gpu.pci_bus_id),
               gpu.numa_node ? std::to_string(*gpu.numa_node) : "-",
               gpu.memory_used ? format_bytes(*gpu.memory_used) : "?",
               gpu.utilization ? std::to_string(*gpu.utilization) + "%" : "?");
    for (const GpuProcess& p : gpu.processes.value_or(std::vector<GpuProcess>{})) {
      const LeaseHolder who = process_details(static_cast<int>(p.pid));
      fmt::print("      process {}{}{}, {}\n", p.pid,
                 who.user.empty() ? std::string() : " of " + printable(who.user),
                 who.command.empty() ? std::string() : ": " + printable(who.command),
                 format_bytes(p.used_memory));
    }
    if (leases[g].state != LeaseStanding::State::Free) {
      fmt::print("      {}\n", describe_standing(leases[g]));
    }
    for (std::size_t m = 0; m < gpu.migs.size(); ++m) {
      const int ord = rows[g].mig_ordinals[m];
      fmt::print("  MIG {:<4} {:<40} {:<{}} {:>10}  (GPU instance {}, compute instance {})\n",
                 ordinal_text(rows[g].visibility == Visibility::Unknown ? Visibility::Unknown
                                                                        : Visibility::Visible,
                              ord),
                 printable(gpu.migs[m].uuid), printable(gpu.migs[m].name), name_width,
                 format_bytes(gpu.migs[m].memory_total), gpu.migs[m].gpu_instance,
                 gpu.migs[m].compute_instance);
    }
  }
  if (snap.gpus.empty()) fmt::print("(no GPUs)\n");
  if (!waiting.empty()) {
    fmt::print("{} job{} waiting for GPUs, in the order they will be served:\n", waiting.size(),
               waiting.size() == 1 ? "" : "s");
    for (const WaitingJob& w : waiting) fmt::print("  {}\n", describe_waiting(w));
  }
  if (options.probe && probe.ok) {
    fmt::print("CUDA's own view (--probe):\n");
    for (const CudaDevice& d : probe.devices) {
      auto idx = nvml_index(d);
      fmt::print("  CUDA {:<3} {:<40} nvidia-smi index {}  {}\n", d.ordinal, printable(d.uuid),
                 idx ? std::to_string(*idx) : "?", printable(d.name));
    }
  }
  for (const std::string& note : notes) fmt::print("note: {}\n", printable(note));
  return 0;
}

}  // namespace gpusel::cli
