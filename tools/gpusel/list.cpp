// gpusel list: every physical GPU with its nvidia-smi index and its CUDA ordinal here.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iterator>
#include <nlohmann/json.hpp>
#include <thread>

#ifdef _WIN32
#include <io.h>
#else
#include <sys/ioctl.h>
#include <unistd.h>
#endif

#include "commands.hpp"
#include "common.hpp"
#include "gpusel/amd.hpp"
#include "gpusel/bandwidth.hpp"
#include "gpusel/error.hpp"
#include "gpusel/gpu_fields.hpp"
#include "gpusel/lease.hpp"
#include "gpusel/nvml.hpp"
#include "gpusel/probe.hpp"
#include "gpusel/resolution.hpp"
#include "gpusel_detail.hpp"
#include "problem_json.hpp"
#include "sim_machine.hpp"

namespace gpusel::cli {

namespace {

enum class Visibility { Visible, Hidden, Unknown };

struct Row {
  Visibility visibility = Visibility::Hidden;
  int ordinal = -1;
  std::vector<int> mig_ordinals;  // per MIG device, -1 when hidden
};

// Where each GPU lands in CUDA's numbering, and the notes that explain it.
std::vector<Row> place(const NvmlSnapshot& snap, const CudaEnv& env, const VisibleSet& vs,
                       std::vector<Note>& notes) {
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
        {"order-unknown",
         "'?': " + vs.unknown_reason +
             ". `gpusel list --probe` asks CUDA itself; to make CUDA ordinals follow this table, "
             "set CUDA_DEVICE_ORDER=PCI_BUS_ID. gpusel's --gpu "
             "takes nvidia-smi indices or UUIDs, which never depend on CUDA's order."});
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
      notes.push_back({"mig-enabled",
                       fmt::format("GPU {} has MIG enabled: CUDA sees its MIG devices (listed "
                                   "under it), not the GPU itself; gpusel assigns whole GPUs, so "
                                   "--gpu cannot name it.",
                                   g)});
    }
  }
  if (hidden) {
    std::string why = vs.invalid_entry
                          ? fmt::format(" (the driver stops reading it at the invalid entry {})",
                                        detail::quote_value(*vs.invalid_entry))
                          : std::string();
    notes.push_back(
        {"preset-hides",
         "'-': hidden from CUDA by " + detail::describe_preset(env) + why +
             ". With this preset, --gpu indices count within the devices CUDA sees (the CUDA "
             "column); to use another GPU, change or unset CUDA_VISIBLE_DEVICES."});
  }
  if (reordered) {
    // The example names a GPU that --gpu accepts (not one with MIG enabled, not a failed one).
    std::string example;
    for (std::size_t g = 0; g < rows.size() && example.empty(); ++g) {
      if (!snap.gpus[g].mig_enabled && !snap.gpus[g].failed()) {
        example = fmt::format(" (`--gpu {0}` is the GPU with INDEX {0})", g);
      }
    }
    const std::string cause = env.visible_devices ? "under " + detail::describe_preset(env)
                              : failed            ? std::string("because CUDA skips the failed GPU")
                              : !vs.pci_order     ? std::string("in CUDA's FASTEST_FIRST order")
                                                  : std::string("because MIG devices come first");
    notes.push_back({"ordinals-differ",
                     "CUDA ordinals differ from nvidia-smi indices here (" + cause +
                         "); --gpu takes " +
                         (env.visible_devices
                              ? std::string("positions in the CUDA column while the preset is set")
                              : "nvidia-smi indices, the INDEX column" + example) +
                         ", or UUIDs."});
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
           detail::quote_value(env_value("GPUSEL_SIM_ROOT").value_or("(unset)")) +
           " holds the simulator, or rebuild the gpusel_sim target";
  }
  return "That is the fault the simulated machine " + name + " models: " + what +
         " ([faults] nvml = \"" + fault + "\" in " + file +
         "); `gpusel sim list` shows the machines, and those without an NVML fault list GPUs";
}

}  // namespace

ListOptions read_list(const CommandLine& line) {
  ListOptions o;
  o.json = line.flag("--json");
  o.probe = line.flag("--probe");
  o.watch_text = line.value("--watch").value_or("");
  return o;
}

namespace {

// What one listing shows, gathered before it is written as text or JSON.
struct Listing {
  NvmlSnapshot snap;
  std::optional<std::string> simulated;
  CudaEnv env;
  std::vector<LeaseStanding> leases;
  std::vector<WaitingJob> waiting;
  VisibleSet vs;
  ProbeResult probe;  // CUDA's own view under this environment (--probe)
  std::vector<Note> notes;
  std::vector<Row> rows;
  std::string order;  // CUDA_DEVICE_ORDER in effect
};

// A process on a GPU, with its user and command where they can be read.
nlohmann::json process_json(const GpuProcess& p) {
  const LeaseHolder who = detail::process_details(static_cast<int>(p.pid));
  return {{"pid", p.pid},
          {"used_memory_bytes", p.used_memory},
          {"user", who.user.empty() ? nlohmann::json(nullptr) : nlohmann::json(who.user)},
          {"command", who.command.empty() ? nlohmann::json(nullptr)
                                          : nlohmann::json(detail::printable(who.command))}};
}

// The text line under a GPU's row for a process on it (`memory`: how its memory is said).
std::string process_line(const GpuProcess& p, const std::string& memory) {
  const LeaseHolder who = detail::process_details(static_cast<int>(p.pid));
  return fmt::format("      process {}{}{}, {}\n", p.pid,
                     who.user.empty() ? std::string() : " of " + detail::printable(who.user),
                     who.command.empty() ? std::string() : ": " + detail::printable(who.command),
                     memory);
}

// The holder of a lease (null when free), and why a lease file cannot be used (null when it
// can), into a GPU's JSON object. "lease": {} when the holder cannot be named (another pid
// namespace).
void lease_fields(nlohmann::json& j, const LeaseStanding& lease) {
  const std::optional<LeaseHolder>& holder = lease.holder;
  j["lease"] = lease.state != LeaseStanding::State::Held ? nlohmann::json(nullptr)
               : holder ? nlohmann::json({{"pid", holder->pid > 0 ? nlohmann::json(holder->pid)
                                                                  : nlohmann::json(nullptr)},
                                          {"user", holder->user},
                                          {"command", detail::printable(holder->command)},
                                          {"started", holder->started}})
                        : nlohmann::json::object();
  j["lease_problem"] = lease.state == LeaseStanding::State::Unusable ? nlohmann::json(lease.problem)
                                                                     : nlohmann::json(nullptr);
}

// Each GPU's lease, from one read of the kernel's lock table; a lease folder that cannot be used
// is a note, not a failure of `list`.
void read_leases(Listing& l, std::vector<Note>& lease_notes) {
  const NvmlSnapshot& snap = l.snap;
  std::vector<LeaseStanding>& leases = l.leases;
  std::vector<WaitingJob>& waiting = l.waiting;
  leases.assign(snap.gpus.size(), LeaseStanding{});
  try {
    const LeaseStore store = LeaseStore::locate();
    std::vector<std::string> uuids;
    for (const GpuInfo& g : snap.gpus) uuids.push_back(g.failed() ? std::string() : g.uuid);
    // As picking looks: a GPU is leased when its mark and the lock table say so, and the table
    // is read only when some GPU is marked (to name its holder).
    leases = store.standings(uuids, LeaseStore::Look::Quick);
    waiting = store.waiting();
    for (std::size_t i = 0; i < snap.gpus.size(); ++i) {
      if (snap.gpus[i].failed()) leases[i] = LeaseStanding{};
    }
  } catch (const Error& e) {
    lease_notes.push_back({"leases-unreadable", std::string("leases cannot be read: ") + said(e)});
  }
}

// --probe: CUDA's own view, and whether it matches gpusel's reading (notes).
void probe_listing(Listing& l, std::vector<Note>& probe_notes) {
  const NvmlSnapshot& snap = l.snap;
  VisibleSet& vs = l.vs;
  ProbeResult& probe = l.probe;
  const CudaEnv& env = l.env;
  const std::string helper = default_probe_helper();
  if (!vs.known) {  // CUDA's order fills in what NVML cannot tell
    ProbeResult all = probe_cuda(helper, true);
    if (auto order = all.ok ? detail::cuda_order_from(snap.gpus, all.devices) : std::nullopt) {
      vs = model_visible(snap.gpus, env, &*order);
      probe_notes.push_back(
          {"probe-ordinals",
           "CUDA ordinals come from asking CUDA (--probe), not from NVML alone."});
    }
  }
  probe = probe_cuda(helper, false);
  if (!probe.ok) {
    probe_notes.push_back({"probe-failed", "--probe: asking CUDA failed: " + probe.reason});
  } else if (vs.known) {
    std::vector<std::string> predicted;
    for (const VisibleDevice& d : vs.devices) {
      const GpuInfo& g = snap.gpus[static_cast<std::size_t>(d.gpu)];
      predicted.push_back(d.mig < 0 ? g.uuid : g.migs[static_cast<std::size_t>(d.mig)].uuid);
    }
    std::vector<std::string> actual;
    for (const CudaDevice& d : probe.devices) actual.push_back(d.uuid);
    if (predicted != actual) {
      probe_notes.push_back({"probe-differs",
                             "--probe: CUDA's numbering DIFFERS from gpusel's reading of NVML "
                             "and the environment; trust the CUDA map, and please report this "
                             "machine"});
    } else {
      probe_notes.push_back(
          {"probe-matches", "--probe: CUDA's numbering matches gpusel's reading."});
    }
  }
}

// The NVML index of the GPU a CUDA device is (on), if NVML lists it.
std::optional<unsigned> nvml_index(const NvmlSnapshot& snap, const CudaDevice& d) {
  for (const GpuInfo& g : snap.gpus) {
    if (g.uuid == d.parent_uuid) return g.index;
  }
  return std::nullopt;
}

GpuView gpu_view(const Listing& l, std::size_t g) {
  const Row& row = l.rows[g];
  return GpuView{l.snap.gpus[g], row.visibility == Visibility::Visible ? row.ordinal : -1,
                 row.visibility != Visibility::Unknown};
}

nlohmann::json field_json(const FieldSpec& spec, const FieldValue& value) {
  if (!value.present) return nullptr;
  if (spec.kind == FieldKind::Text) return value.text;
  if (spec.kind == FieldKind::Flag) return value.number != 0;
  return value.number;
}

nlohmann::json gpu_json(const Listing& l, std::size_t g) {
  const NvmlSnapshot& snap = l.snap;
  const std::vector<Row>& rows = l.rows;
  const std::vector<LeaseStanding>& leases = l.leases;
  const GpuInfo& gpu = snap.gpus[g];
  nlohmann::json j;
  // Every field of the table (gpu_fields.def) under its name; the nvidia-smi index also as "index".
  const GpuView view = gpu_view(l, g);
  for (const FieldSpec& spec : gpu_field_specs())
    j[spec.name] = field_json(spec, gpu_field(view, spec.field));
  j["index"] = gpu.index;
  j["problem"] = problem_json(gpu.problem);  // the failure as data: code, call, result
  j["pcie_link"] =
      gpu.pcie_generation == 0
          ? nlohmann::json(nullptr)
          : nlohmann::json(
                {{"generation", gpu.pcie_generation},
                 {"width", gpu.pcie_width},
                 {"max_generation", gpu.pcie_max_generation},
                 {"max_width", gpu.pcie_max_width},
                 {"max_gbps", pcie_link_gbps(gpu.pcie_max_generation, gpu.pcie_max_width)}});
  j["processes"] = nlohmann::json::array();
  for (const GpuProcess& p : gpu.processes.value_or(std::vector<GpuProcess>{}))
    j["processes"].push_back(process_json(p));
  lease_fields(j, leases[g]);
  j["mig_devices"] = nlohmann::json::array();
  for (std::size_t m = 0; m < gpu.migs.size(); ++m) {
    j["mig_devices"].push_back({{"uuid", gpu.migs[m].uuid},
                                {"name", gpu.migs[m].name},
                                {"memory_total_bytes", gpu.migs[m].memory_total_bytes},
                                {"gpu_instance", gpu.migs[m].gpu_instance},
                                {"compute_instance", gpu.migs[m].compute_instance},
                                {"cuda_ordinal", ordinal_json(rows[g].mig_ordinals[m])}});
  }
  return j;
}

nlohmann::json list_doc(const Listing& l, const ListOptions& options) {
  const NvmlSnapshot& snap = l.snap;
  const auto& simulated = l.simulated;
  const CudaEnv& env = l.env;
  const std::string& order = l.order;
  const std::vector<Note>& notes = l.notes;
  const std::vector<WaitingJob>& waiting = l.waiting;
  const ProbeResult& probe = l.probe;
  nlohmann::json doc;
  doc["simulated"] = simulated ? nlohmann::json(*simulated) : nlohmann::json(nullptr);
  doc["driver_version"] = snap.driver_version;
  doc["cuda_driver_version"] = cuda_version_text(snap.cuda_driver_version);
  doc["cuda_visible_devices"] =
      env.visible_devices ? nlohmann::json(*env.visible_devices) : nlohmann::json(nullptr);
  doc["cuda_device_order"] = order;
  doc["notes"] = nlohmann::json::array();
  doc["note_codes"] = nlohmann::json::array();  // note_codes[i] is the code of notes[i]
  for (const Note& note : notes) {
    doc["notes"].push_back(note.text);
    doc["note_codes"].push_back(note.code);
  }
  // Jobs waiting for GPUs (gpusel run --wait), in the order they will be served.
  doc["waiting"] = nlohmann::json::array();
  for (const WaitingJob& w : waiting) {
    doc["waiting"].push_back(
        {{"pid", w.who && w.who->pid > 0 ? nlohmann::json(w.who->pid) : nlohmann::json(nullptr)},
         {"user", w.who ? nlohmann::json(w.who->user) : nlohmann::json(nullptr)},
         {"command",
          w.who ? nlohmann::json(detail::printable(w.who->command)) : nlohmann::json(nullptr)},
         {"request", w.what},
         {"gpus", w.gpus}});
  }
  doc["gpus"] = nlohmann::json::array();
  for (std::size_t g = 0; g < snap.gpus.size(); ++g) doc["gpus"].push_back(gpu_json(l, g));
  if (options.probe) {
    nlohmann::json p;
    p["ok"] = probe.ok;
    p["reason"] = probe.ok ? nlohmann::json(nullptr) : nlohmann::json(said(probe.reason));
    p["devices"] = nlohmann::json::array();
    for (const CudaDevice& d : probe.devices) {
      auto idx = nvml_index(snap, d);
      p["devices"].push_back(
          {{"cuda_ordinal", d.cuda_ordinal},
           {"uuid", d.uuid},
           {"name", d.name},
           {"index", idx ? nlohmann::json(*idx) : nlohmann::json(nullptr)},
           {"nvidia_smi_index", idx ? nlohmann::json(*idx) : nlohmann::json(nullptr)}});
    }
    doc["probe"] = p;
  }
  return doc;
}

// Driver strings may hold bytes that are not UTF-8: they become U+FFFD. Watched, one line per
// listing (JSON lines).
std::string dumped(const nlohmann::json& doc, const ListOptions& options) {
  return doc.dump(options.watch ? -1 : 2, ' ', false, nlohmann::json::error_handler_t::replace) +
         "\n";
}

// The text table's columns: the fields of gpu_fields.def with a header, in the table's order.
// All of them are shown unless `columns` (a terminal's width) is narrower than the rows; then, in
// the order of their give_way (PCI BUS ID, NUMA, UUID), they give way until the rows fit: dropped,
// or cut (a UUID to its first 12 characters: GPU-4ba71ab7).
class TableLayout {
 public:
  struct Column {
    GpuField field;
    std::size_t width;
    bool right;  // numbers with a unit are right-aligned
    bool cut = false;
    bool dropped = false;
  };

  // `at_least`: a column's width when other rows (MIG devices) need more than the GPUs' cells.
  TableLayout(const std::vector<GpuView>& gpus, std::size_t columns,
              const std::vector<std::pair<GpuField, std::size_t>>& at_least) {
    std::size_t total = 0;
    for (const FieldSpec& spec : gpu_field_specs()) {
      if (*spec.header == '\0') continue;
      std::size_t width = spec.width != 0 ? spec.width : std::string_view(spec.header).size();
      if (spec.width == 0) {
        for (const GpuView& v : gpus) width = std::max(width, gpu_field_cell(v, spec.field).size());
      }
      for (const auto& [field, least] : at_least) {
        if (field == spec.field) width = std::max(width, least);
      }
      shown_.push_back(
          {spec.field, width, spec.kind == FieldKind::Bytes || spec.kind == FieldKind::Percent});
      total += (shown_.size() > 1 ? 1 : 0) + width;
    }
    unsigned turns = 0;
    for (const FieldSpec& spec : gpu_field_specs()) turns = std::max(turns, spec.give_way);
    // Columns of the same give_way give way together.
    for (unsigned turn = 1; turn <= turns && columns != 0 && total > columns; ++turn) {
      for (Column& c : shown_) {
        const FieldSpec& spec = gpu_field_spec(c.field);
        if (spec.give_way != turn) continue;
        const std::size_t cut = std::min<std::size_t>(spec.cut, c.width);
        total -= spec.cut != 0 ? c.width - cut : c.width + 1;
        c.width = spec.cut != 0 ? cut : 0;
        c.cut = spec.cut != 0;
        c.dropped = spec.cut == 0;
      }
      std::erase_if(shown_, [](const Column& c) { return c.dropped; });
    }
  }

  // A column's width, 0 when it gave way.
  std::size_t width(GpuField field) const {
    const Column* c = find(field);
    return c == nullptr ? 0 : c->width;
  }
  // A cell of that column as shown: cut when the column is.
  std::string fit(GpuField field, const std::string& text) const {
    const Column* c = find(field);
    return c != nullptr && c->cut && text.size() > c->width ? text.substr(0, c->width) : text;
  }
  // The header row.
  std::string header() const {
    return line([&](const Column& c) { return fit(c.field, gpu_field_spec(c.field).header); });
  }
  // One GPU's row.
  std::string row(const GpuView& view) const {
    return line([&](const Column& c) { return fit(c.field, gpu_field_cell(view, c.field)); });
  }

 private:
  template <typename Cell>
  std::string line(Cell cell) const {
    std::string out;
    for (std::size_t i = 0; i < shown_.size(); ++i) {
      const Column& c = shown_[i];
      if (i > 0) out += ' ';
      out += c.right ? fmt::format("{:>{}}", cell(c), c.width)
                     : fmt::format("{:<{}}", cell(c), c.width);
    }
    return out + "\n";
  }
  const Column* find(GpuField field) const {
    for (const Column& c : shown_) {
      if (c.field == field) return &c;
    }
    return nullptr;
  }
  std::vector<Column> shown_;
};

void list_text(const Listing& l, const ListOptions& options, std::string& out_text) {
  auto out = std::back_inserter(out_text);
  const NvmlSnapshot& snap = l.snap;
  const auto& simulated = l.simulated;
  const CudaEnv& env = l.env;
  const std::vector<Row>& rows = l.rows;
  const std::vector<LeaseStanding>& leases = l.leases;
  const std::vector<WaitingJob>& waiting = l.waiting;
  const ProbeResult& probe = l.probe;
  const std::vector<Note>& notes = l.notes;
  if (simulated) fmt::format_to(out, "simulated machine: {}\n", *simulated);
  fmt::format_to(out, "driver {}, CUDA {}; {}; CUDA_DEVICE_ORDER{}\n",
                 snap.driver_version.empty() ? "unknown" : detail::printable(snap.driver_version),
                 cuda_version_text(snap.cuda_driver_version), detail::describe_preset(env),
                 env.device_order ? "=" + detail::quote_value(*env.device_order)
                                  : std::string(" unset (FASTEST_FIRST)"));
  // Text from the driver is printed with control bytes escaped: it never drives the terminal.
  std::size_t mig_name_width = 0;
  std::vector<GpuView> views;
  for (std::size_t g = 0; g < snap.gpus.size(); ++g) {
    views.push_back(gpu_view(l, g));
    for (const auto& mig : snap.gpus[g].migs)
      mig_name_width = std::max(mig_name_width, detail::printable(mig.name).size());
  }
  const TableLayout layout(views, options.columns, {{GpuField::name, mig_name_width}});
  out_text += layout.header();
  for (std::size_t g = 0; g < snap.gpus.size(); ++g) {
    const GpuInfo& gpu = snap.gpus[g];
    if (gpu.failed()) {
      fmt::format_to(out, "{:<5} {:<4} {}\n", gpu.index, "-",
                     "FAILED: " + detail::printable(gpu.failure));
      continue;
    }
    out_text += layout.row(views[g]);
    for (const GpuProcess& p : gpu.processes.value_or(std::vector<GpuProcess>{}))
      out_text += process_line(p, detail::format_bytes(p.used_memory));
    if (leases[g].state != LeaseStanding::State::Free) {
      fmt::format_to(out, "      {}\n", describe_standing(leases[g]));
    }
    for (std::size_t m = 0; m < gpu.migs.size(); ++m) {
      const int ord = rows[g].mig_ordinals[m];
      fmt::format_to(
          out, "  MIG {:<4} {:<{}} {:<{}} {:>10}  (GPU instance {}, compute instance {})\n",
          ordinal_text(
              rows[g].visibility == Visibility::Unknown ? Visibility::Unknown : Visibility::Visible,
              ord),
          layout.fit(GpuField::uuid, detail::printable(gpu.migs[m].uuid)),
          layout.width(GpuField::uuid), detail::printable(gpu.migs[m].name),
          layout.width(GpuField::name), detail::format_bytes(gpu.migs[m].memory_total_bytes),
          gpu.migs[m].gpu_instance, gpu.migs[m].compute_instance);
    }
  }
  if (snap.gpus.empty()) fmt::format_to(out, "(no GPUs)\n");
  if (!waiting.empty()) {
    fmt::format_to(out, "{} job{} waiting for GPUs, in the order they will be served:\n",
                   waiting.size(), waiting.size() == 1 ? "" : "s");
    for (const WaitingJob& w : waiting) fmt::format_to(out, "  {}\n", describe_waiting(w));
  }
  if (options.probe && probe.ok) {
    fmt::format_to(out, "CUDA's own view (--probe):\n");
    for (const CudaDevice& d : probe.devices) {
      auto idx = nvml_index(snap, d);
      fmt::format_to(out, "  CUDA {:<3} {:<40} nvidia-smi index {}  {}\n", d.cuda_ordinal,
                     detail::printable(d.uuid), idx ? std::to_string(*idx) : "?",
                     detail::printable(d.name));
    }
  }
  for (const Note& note : notes) fmt::format_to(out, "note: {}\n", detail::printable(note.text));
}

}  // namespace

namespace {

// Where NVIDIA's NVML is unavailable: AMD's GPUs as ROCm SMI gives them, in rocm-smi's order,
// with the ordinal a HIP program started here would give each: HIP numbers GPUs in the kernel's
// KFD order (ROCm SMI gives each GPU's node from ROCm 6 on) through ROCR_, HIP_ and
// CUDA_VISIBLE_DEVICES as set now. Where that cannot be told, the ordinal is null and a note says
// why (docs/amd.md). Each GPU's lease is read by its id, as on NVIDIA.
struct AmdListing {
  std::vector<std::optional<int>> hip;  // by position in the snapshot's gpus
  bool hip_known = false;
  std::vector<LeaseStanding> leases;
  std::vector<Note> notes;
};

// `beside_nvidia`: the machine has NVIDIA GPUs too, whose indices `--gpu N` counts.
AmdListing read_amd_listing(const AmdSnapshot& amd, bool beside_nvidia) {
  AmdListing l;
  Note hip_note{"amd-hip-order-unread",
                "HIP numbers AMD GPUs in the kernel's KFD order, which can differ from rocm-smi's "
                "INDEX, and " +
                    kfd_order_unknown_text(amd) +
                    ", so the HIP column is unknown: name GPUs to ROCm by UUID "
                    "(ROCR_VISIBLE_DEVICES=GPU-...), which ROCr reads alike in every ROCm "
                    "version"};
  const HipDevices here = hip_devices(cuda_env_from_environment(), amd);
  l.hip = hip_ordinals(here, amd);
  if (here.unknown.empty()) {
    l.hip_known = true;
    hip_note = {
        "amd-hip-ordinal",
        std::string("HIP is the device number a HIP program started from this shell "
                    "gives the GPU (KFD order, through ROCR_, HIP_ and "
                    "CUDA_VISIBLE_DEVICES as set here; \"-\" where they hide it); ") +
            (beside_nvidia ? "on this machine, with NVIDIA GPUs too, `--gpu N` and free:N count "
                             "nvidia-smi's GPUs: name AMD GPUs by UUID (--gpu GPU-...)"
             : here.preset ? "with those variables set, `--gpu N` is the GPU in the HIP column"
                           : "`--gpu N` is the GPU at INDEX N, rocm-smi's number")};
  } else if (here.unknown != "amd-kfd-order-unknown") {
    hip_note.text = "the HIP column is unknown: " +
                    std::string(here.unknown == "amd-rocr-empty-entry"
                                    ? "ROCR_VISIBLE_DEVICES has an empty entry, which makes HIP "
                                      "programs abort"
                                    : "under the visibility variables set here, which GPUs HIP "
                                      "sees depends on its version") +
                    "; `gpusel doctor` explains the variables, and naming GPUs to ROCm by UUID "
                    "(ROCR_VISIBLE_DEVICES=GPU-...) reads alike in every ROCm version";
  }
  l.notes.push_back(hip_note);
  l.leases.assign(amd.gpus.size(), LeaseStanding{});
  try {
    std::vector<std::string> ids;
    for (const AmdGpu& g : amd.gpus) ids.push_back(g.id);
    l.leases = LeaseStore::locate().standings(ids, LeaseStore::Look::Quick);
  } catch (const Error& e) {
    l.notes.push_back({"leases-unreadable", std::string("leases cannot be read: ") + said(e)});
  }
  return l;
}

// Each AMD GPU's entry in a JSON listing; `beside_nvidia`: the machine has NVIDIA's GPUs too, whose
// nvidia-smi indices `--gpu N` counts (an AMD GPU's `index` is then null).
nlohmann::json amd_gpus_json(const AmdSnapshot& amd, const AmdListing& l, bool beside_nvidia) {
  nlohmann::json gpus = nlohmann::json::array();
  for (std::size_t i = 0; i < amd.gpus.size(); ++i) {
    const AmdGpu& g = amd.gpus[i];
    nlohmann::json j = {
        {"vendor", "amd"},
        {"index", beside_nvidia ? nlohmann::json(nullptr) : nlohmann::json(g.index)},
        {"nvidia_smi_index", nullptr},
        {"rocm_smi_index", g.index},
        {"hip_ordinal", l.hip[i] ? nlohmann::json(*l.hip[i]) : nlohmann::json(nullptr)},
        {"uuid", g.id.empty() ? nlohmann::json(nullptr) : nlohmann::json(g.id)},
        {"name", detail::printable(g.name)},
        {"memory_total_bytes", g.memory_total},
        {"pci_bus_id", g.pci_bus_id},
        {"memory_used_bytes", g.memory_used},
        {"utilization_percent",
         g.busy_percent ? nlohmann::json(*g.busy_percent) : nlohmann::json(nullptr)},
        {"failure", g.failure.empty() ? nlohmann::json(nullptr)
                                      : nlohmann::json(detail::printable(g.failure))}};
    j["processes"] = nlohmann::json(nullptr);
    if (g.processes) {
      j["processes"] = nlohmann::json::array();
      for (const GpuProcess& p : *g.processes) j["processes"].push_back(process_json(p));
    }
    lease_fields(j, l.leases[i]);
    gpus.push_back(std::move(j));
  }
  return gpus;
}

void amd_listing_json(const AmdSnapshot& amd, const AmdListing& l,
                      const std::optional<std::string>& simulated, std::string& out) {
  nlohmann::json doc;
  doc["simulated"] = simulated ? nlohmann::json(*simulated) : nlohmann::json(nullptr);
  doc["vendor"] = "amd";
  doc["driver_version"] = amd.driver_version;
  doc["notes"] = nlohmann::json::array();
  doc["note_codes"] = nlohmann::json::array();
  for (const Note& n : l.notes) {
    doc["notes"].push_back(n.text);
    doc["note_codes"].push_back(n.code);
  }
  doc["gpus"] = amd_gpus_json(amd, l, false);
  out += doc.dump(2) + "\n";
}

// The AMD table. In a terminal of `columns` (0: any width) narrower than its rows, columns give
// way as the NVIDIA table's do (gpu_fields.def): PCI BUS ID left out, then each UUID cut to its
// first 12 characters (GPU-3c4d5e6f), so that the NAME, last, stays in view.
void amd_listing_text(const AmdSnapshot& amd, const AmdListing& l,
                      const std::optional<std::string>& simulated, std::size_t columns,
                      std::string& out) {
  auto o = std::back_inserter(out);
  if (simulated) fmt::format_to(o, "simulated machine: {}\n", detail::printable(*simulated));
  fmt::format_to(
      o, "AMD GPUs (ROCm SMI{}):\n",
      amd.driver_version.empty() ? "" : ", amdgpu " + detail::printable(amd.driver_version));
  std::size_t name_width = 4;
  for (const AmdGpu& g : amd.gpus)
    name_width =
        std::max(name_width, detail::printable(g.failure.empty() ? g.name : g.failure).size());
  constexpr std::size_t kPciColumn = 16 + 2, kUuidCut = 8;  // what each gives back
  std::size_t width = 5 + 2 + 3 + 2 + 20 + 2 + 10 + 2 + 10 + 2 + 4 + 2 + kPciColumn + name_width;
  const bool pci = columns == 0 || width <= columns;
  if (!pci) width -= kPciColumn;
  const std::size_t uuid_width = columns == 0 || width <= columns ? 20 : 20 - kUuidCut;
  auto row = [&](const std::string& index, const std::string& hip, const std::string& uuid,
                 const std::string& memory, const std::string& used, const std::string& util,
                 const std::string& bus, const std::string& name) {
    fmt::format_to(o, "{:<5}  {:<3}  {:<{}}  {:<10}  {:<10}  {:<4}  ", index, hip,
                   uuid.substr(0, uuid_width), uuid_width, memory, used, util);
    if (pci) fmt::format_to(o, "{:<16}  ", bus);
    fmt::format_to(o, "{}\n", name);
  };
  row("INDEX", "HIP", "UUID", "MEMORY", "USED", "UTIL", "PCI BUS ID", "NAME");
  for (std::size_t i = 0; i < amd.gpus.size(); ++i) {
    const AmdGpu& g = amd.gpus[i];
    const std::string hip = !l.hip_known ? "?" : l.hip[i] ? std::to_string(*l.hip[i]) : "-";
    row(std::to_string(g.index), hip, g.id.empty() ? "?" : g.id,
        detail::format_bytes(g.memory_total), detail::format_bytes(g.memory_used),
        g.busy_percent ? std::to_string(*g.busy_percent) + "%" : "?",
        g.pci_bus_id.empty() ? "?" : g.pci_bus_id,
        detail::printable(g.failure.empty() ? g.name : g.failure));
    for (const GpuProcess& p : g.processes.value_or(std::vector<GpuProcess>{}))
      out += process_line(p, detail::format_bytes(p.used_memory) + " of VRAM on its GPUs");
    if (l.leases[i].state != LeaseStanding::State::Free)
      fmt::format_to(o, "      {}\n", describe_standing(l.leases[i]));
  }
  for (const Note& n : l.notes) fmt::format_to(o, "note: {}\n", detail::printable(n.text));
}

void amd_listing(const AmdSnapshot& amd, const std::optional<std::string>& simulated,
                 const ListOptions& options, std::string& out) {
  const AmdListing l = read_amd_listing(amd, false);
  if (options.json)
    amd_listing_json(amd, l, simulated, out);
  else
    amd_listing_text(amd, l, simulated, options.columns, out);
}

}  // namespace

// One listing, into `out_text`; returns the exit status (1, with the message on stderr, when
// neither NVML nor ROCm SMI is available).
static int render_list(const ListOptions& options, std::string& out_text) {
  Listing l;
  l.snap = query_nvml(NvmlQuery{true, false});  // with usage
  l.simulated = simulated_machine();
  if (!l.snap.available) {
    // No NVIDIA driver: an AMD machine, perhaps (ROCm SMI installed and monitoring GPUs).
    const AmdSnapshot amd = query_rocm_smi(true);
    if (amd.available && !amd.gpus.empty()) {
      amd_listing(amd, l.simulated, options, out_text);
      return 0;
    }
    // An AMD machine whose ROCm SMI cannot be read: that is the failure to report.
    if (std::optional<Error> e = amd_unreadable("cannot list GPUs", amd))
      return report_failure(*e, options.json && !options.watch);
    const std::string message =
        "cannot list GPUs: NVML is unavailable: " + sentence(l.snap.reason) +
        (l.simulated ? simulated_nvml_fault(*l.simulated)
                     : "To try gpusel on a machine without GPUs, use a simulated one: "
                       "`gpusel --sim dgx-h100 list` (`gpusel sim list` shows all of them).");
    // --json: the failure on stdout too, with its code (a watched listing keeps its screen).
    return report_failure(gpusel::failure(message, l.snap.problem), options.json && !options.watch);
  }
  l.env = cuda_env_from_environment();
  std::vector<Note> lease_notes, probe_notes;
  read_leases(l, lease_notes);
  l.vs = model_visible(l.snap.gpus, l.env);
  if (options.probe) probe_listing(l, probe_notes);
  l.rows = place(l.snap, l.env, l.vs, l.notes);
  l.notes.insert(l.notes.end(), probe_notes.begin(), probe_notes.end());
  l.notes.insert(l.notes.end(), lease_notes.begin(), lease_notes.end());
  for (Note& note : l.notes) note.text = said(note.text);  // the library's, in this command's words
  l.order = detail::pci_bus_order(l.env) ? "PCI_BUS_ID" : "FASTEST_FIRST";
  // A machine with AMD GPUs too: theirs follow in the same listing, as ROCm SMI gives them.
  const AmdSnapshot amd = query_rocm_smi(true);
  std::optional<AmdListing> beside;
  if (amd.available && !amd.gpus.empty()) beside = read_amd_listing(amd, true);
  if (options.json) {
    nlohmann::json doc = list_doc(l, options);
    if (beside) {
      doc["amd_driver_version"] = amd.driver_version;
      for (const Note& n : beside->notes) {
        doc["notes"].push_back(n.text);
        doc["note_codes"].push_back(n.code);
      }
      for (nlohmann::json& g : amd_gpus_json(amd, *beside, true))
        doc["gpus"].push_back(std::move(g));
    }
    out_text += dumped(doc, options);
  } else {
    list_text(l, options, out_text);
    if (beside) {
      out_text += "\n";
      amd_listing_text(amd, *beside, std::nullopt, options.columns, out_text);
    }
  }
  return 0;
}

namespace {

std::atomic<int> g_stop_signal{0};

extern "C" void on_stop_signal(int sig) {
  g_stop_signal.store(sig);
}

bool stdout_is_terminal() {
#ifdef _WIN32
  return _isatty(1) != 0;
#else
  return isatty(1) != 0;
#endif
}

// The terminal's height in lines and width in columns, 0 each when unknown.
std::pair<std::size_t, std::size_t> terminal_size() {
#ifdef _WIN32
  return {0, 0};
#else
  winsize ws{};
  if (ioctl(1, TIOCGWINSZ, &ws) != 0) return {0, 0};
  return {ws.ws_row, ws.ws_col};
#endif
}

// `line` cut to `columns` (0: as it is), never inside a UTF-8 character: a line never wraps.
std::string fit_line(const std::string& line, std::size_t columns) {
  if (columns == 0 || line.size() <= columns) return line;
  std::size_t end = columns;
  while (end > 0 && (static_cast<unsigned char>(line[end]) & 0xC0) == 0x80) --end;
  return line.substr(0, end);
}

// A watched listing as a screen: the title, then `frame`'s lines, each cut to the terminal's
// width, and cut to its height with the last line saying how many more there are (the title and
// the table's header stay in view: nothing scrolls).
std::string watch_screen(const std::string& head, const std::string& frame) {
  std::vector<std::string> lines{head, ""};
  std::size_t start = 0;
  while (start < frame.size()) {
    const std::size_t end = frame.find('\n', start);
    lines.push_back(frame.substr(start, end - start));
    start = end == std::string::npos ? frame.size() : end + 1;
  }
  const auto [rows, columns] = terminal_size();
  if (rows > 1 && lines.size() > rows) {
    const std::size_t more = lines.size() - (rows - 1);
    lines.resize(rows - 1);
    lines.push_back(fmt::format("-- {} more line{} below: a taller terminal shows them --", more,
                                more == 1 ? "" : "s"));
  }
  std::string screen = "\x1b[H";
  for (std::size_t i = 0; i < lines.size(); ++i) {
    screen += fit_line(lines[i], columns) + "\x1b[K";
    if (i + 1 < lines.size()) screen += "\n";
  }
  return screen + "\x1b[J";
}

std::string clock_text() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
#ifdef _WIN32
  localtime_s(&local, &now);
#else
  localtime_r(&now, &local);
#endif
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &local);
  return buf;
}

void write_out(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

double watch_interval(const std::string& text) {
  char* end = nullptr;
  const double seconds = std::strtod(text.c_str(), &end);
  if (text.empty() || end == nullptr || *end != '\0' || !std::isfinite(seconds) || seconds < 0.1 ||
      seconds > 86400) {
    throw bad_input("--watch " + detail::quote_value(text) +
                    " is not a number of seconds from 0.1 to 86400; give --watch alone to "
                    "refresh every 2 seconds");
  }
  return seconds;
}

// `gpusel list --watch`: the listing again every `seconds` until a signal. On a terminal each
// listing replaces the last in place (the alternate screen, the cursor sent home and each line
// cleared as it is overwritten, so nothing flickers), cut to the terminal's height; elsewhere,
// one listing after another, each under a line with its time (--json: one object a line).
int watch_list(const ListOptions& given, double seconds) {
  const bool terminal = stdout_is_terminal() && !given.json;
  ListOptions options = given;
  if (terminal) options.columns = terminal_size().second;
  for (int sig : {SIGINT, SIGTERM
#ifdef SIGHUP
                  ,
                  SIGHUP
#endif
       }) {
    std::signal(sig, on_stop_signal);
  }
  const auto period = std::chrono::duration<double>(seconds);
  const std::string interval = fmt::format("{:g}", seconds);
  std::string last;
  std::string frame;
  int status = render_list(options, frame);  // before the screen is switched: errors stay visible
  if (status != 0) return status;
  if (terminal) write_out("\x1b[?1049h\x1b[?25l");  // alternate screen, cursor hidden
  bool first = true;
  while (g_stop_signal.load() == 0) {
    if (!first) {
      frame.clear();
      if (terminal) options.columns = terminal_size().second;  // as it is now, after any resize
      status = render_list(options, frame);
      if (status != 0) break;
    }
    first = false;
    if (terminal) {
      write_out(watch_screen(
          "gpusel list, every " + interval + " s; " + clock_text() + "; Ctrl-C to stop", frame));
    } else if (options.json) {
      write_out(frame);
    } else {
      write_out((last.empty() ? "" : "\n") + std::string("=== ") + clock_text() + " ===\n" + frame);
    }
    last = frame;
    const auto until = std::chrono::steady_clock::now() + period;
    while (g_stop_signal.load() == 0 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  if (terminal) {
    write_out("\x1b[?25h\x1b[?1049l");  // back to the screen as it was, cursor shown
    write_out(last);                    // and the last listing left on it
  }
  const int sig = g_stop_signal.load();
  if (status != 0) return status;
  return sig == 0 || sig == SIGINT ? 0 : 128 + sig;
}

}  // namespace

int run_list(const ListOptions& given) {
  ListOptions options = given;
  if (!options.watch_text.empty()) {
    options.watch = true;
    return watch_list(options, watch_interval(options.watch_text));
  }
  std::string text;
  const int status = render_list(options, text);
  write_out(text);
  return status;
}

}  // namespace gpusel::cli
