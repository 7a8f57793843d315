// Reading and parsing machine files (machine.hpp). Linked into libgpusel-sim-machines.so, which
// parses each file once per process for every library of the simulator (machine_share.hpp), and
// into the tests; the doubles have no TOML parser of their own.
#include "machine.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <version>
// toml++ reads floats through a string stream on GCC and Clang (its default predates their
// std::from_chars for double): 7,500 instructions per float, a sixth of a machine file's parse.
// Where the library has from_chars for floating point, it is exact and far cheaper.
#if defined(__cpp_lib_to_chars) && !defined(TOML_FLOAT_CHARCONV)
#define TOML_FLOAT_CHARCONV 1
#endif
#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <unordered_map>
#ifdef _WIN32
#include <filesystem>
#include <fstream>
#endif

#include "gpu_model.hpp"
#include "gpusel_detail.hpp"

namespace gpusel::sim {
namespace {

struct Reader {
  std::string path;

  [[noreturn]] void fail(const toml::source_region& where, const std::string& what) const {
    throw MachineError(path + ":" + std::to_string(where.begin.line) + ": " + what);
  }

  const toml::node& need(const toml::table& t, const std::string& key,
                         const std::string& ctx) const {
    const toml::node* n = t.get(key);
    if (n == nullptr) fail(t.source(), "missing required key '" + key + "'" + ctx);
    return *n;
  }

  std::string text(const toml::node& n, const std::string& key) const {
    if (auto v = n.value<std::string>()) return *v;
    fail(n.source(), "key '" + key + "' must be a string");
  }

  double number(const toml::node& n, const std::string& key) const {
    if (auto v = n.value<double>()) return *v;  // integers convert too
    fail(n.source(), "key '" + key + "' must be a number");
  }

  long long integer(const toml::node& n, const std::string& key) const {
    // An integer as written (not true, nor 1.0, which toml++ would also give as one).
    if (auto v = n.value<long long>(); v && n.is_integer()) return *v;
    fail(n.source(), "key '" + key + "' must be an integer");
  }

  std::uint64_t bytes(const toml::node& n, const std::string& key) const {
    if (auto v = n.value<long long>(); v && n.is_integer()) {
      if (*v > 0) return static_cast<std::uint64_t>(*v);
    } else if (auto s = n.value<std::string>()) {
      if (auto b = detail::parse_byte_size(*s)) return *b;
    }
    fail(n.source(), "key '" + key + "' must be a byte count or a size such as \"80GiB\"");
  }

  bool flag(const toml::table& t, const std::string& key) const {
    const toml::node* n = t.get(key);
    if (n == nullptr) return false;
    if (auto v = n->value<bool>()) return *v;
    fail(n->source(), "key '" + key + "' must be true or false");
  }
};

bool is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// "GPU-" or "MIG-" then 8-4-4-4-12 hex digits.
bool well_formed_uuid(const std::string& u, const char* head) {
  if (u.size() != 40 || u.compare(0, 4, head) != 0) return false;
  for (std::size_t i = 4; i < u.size(); ++i) {
    const std::size_t k = i - 4;
    const bool dash = k == 8 || k == 13 || k == 18 || k == 23;
    if (dash ? u[i] != '-' : !is_hex(u[i])) return false;
  }
  return true;
}

// "9.0": major 1-99, minor 0-99, digits only. nullopt otherwise.
bool parse_compute_capability(const std::string& text, int& major, int& minor) {
  const char* begin = text.data();
  const char* end = begin + text.size();
  const char* dot = std::find(begin, end, '.');
  if (dot == begin || dot == end || dot + 1 == end) return false;
  for (const char* p = begin; p != end; ++p) {
    if (p != dot && (*p < '0' || *p > '9')) return false;
  }
  auto a = std::from_chars(begin, dot, major);
  auto b = std::from_chars(dot + 1, end, minor);
  return a.ec == std::errc() && a.ptr == dot && b.ec == std::errc() && b.ptr == end && major >= 1 &&
         major <= kMaxComputeCapability && minor >= 0 && minor <= kMaxComputeCapability;
}

// The first control character in `text` (C0, DEL, or C1 as UTF-8), or -1.
int control_character(const std::string& text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) return c;
    if (c == 0xc2 && i + 1 < text.size()) {
      const auto next = static_cast<unsigned char>(text[i + 1]);
      if (next >= 0x80 && next <= 0x9f) return next;
    }
  }
  return -1;
}

// Identity, sensors, PCIe peer access, NVLink and CUDA attributes: optional keys, defaults per
// model (gpu_model.hpp). Needs name, compute capability, memory and sm_count already read.
void parse_sensors(const Reader& r, const toml::table& t, SimGpu& g) {
  const model::ModelDefaults d = model::defaults_for(g.name, g.cc_major, g.memory_total);
  auto count = [&](const char* key, unsigned fallback, long long max) {
    const toml::node* n = t.get(key);
    if (n == nullptr) return fallback;
    const long long v = r.integer(*n, key);
    if (v < 0 || v > max)
      r.fail(n->source(),
             std::string("key '") + key + "' must be between 0 and " + std::to_string(max));
    return static_cast<unsigned>(v);
  };
  g.clock_mhz = count("clock_mhz", d.clock_mhz, 100000);
  g.memory_clock_mhz = count("memory_clock_mhz", d.memory_clock_mhz, 100000);
  g.memory_bus_width = count("memory_bus_width", d.memory_bus_width, 65536);
  g.gpu_cores = count("gpu_cores",
                      static_cast<unsigned>(std::max(0, g.sm_count)) *
                          static_cast<unsigned>(model::cores_per_sm(g.cc_major, g.cc_minor)),
                      1u << 24);
  g.nvlinks = count("nvlinks", g.nvlink_domain >= 0 ? (d.nvlinks > 0 ? d.nvlinks : 4) : 0, 64);
  g.nvlink_version = count("nvlink_version", d.nvlink_version > 0 ? d.nvlink_version : 4, 10);
  g.temperature = count("temperature", 33, 200);
  g.temperature_slowdown = count("temperature_slowdown", 89, 200);
  g.temperature_shutdown = count("temperature_shutdown", 92, 200);
  g.temperature_gpu_max = count("temperature_gpu_max", 87, 200);
  g.temperature_memory_max = count("temperature_memory_max", 95, 200);
  g.power_limit_mw = 1000 * count("power_limit_w", d.power_limit_w, 100000);
  g.power_draw_mw = 1000 * count("power_draw_w", d.power_idle_w, 100000);
  g.performance_state = count("performance_state", 0, 15);
  if (const toml::node* n = t.get("fan_speed")) {
    g.fan_speed = static_cast<int>(count("fan_speed", 0, 100));
    (void)n;
  } else {
    g.fan_speed = d.fan ? 30 : -1;
  }
  if (const toml::node* n = t.get("throttle_reasons")) {
    const long long v = r.integer(*n, "throttle_reasons");
    if (v < 0) r.fail(n->source(), "key 'throttle_reasons' must be a bit mask (0 or more)");
    g.throttle_reasons = static_cast<std::uint64_t>(v);
    g.throttle_given = true;
  }
  g.brand = d.brand;
  if (const toml::node* n = t.get("brand")) {
    g.brand = r.text(*n, "brand");
    if (model::brand_by_name(g.brand) == 0)
      r.fail(n->source(),
             "key 'brand' must be \"NVIDIA\", \"NVIDIA RTX\", \"GeForce\", \"Tesla\", \"Quadro\" "
             "or \"Titan\"");
  }
  g.pcie_p2p = d.pcie_p2p;
  // L2 and the PCIe link: the model's unless the file says (a model the table does not know has
  // none: CUDA says 0 and NVML NOT_SUPPORTED, as before).
  if (g.l2_cache_bytes == 0) g.l2_cache_bytes = std::uint64_t{d.l2_mib} << 20;
  if (g.pcie_generation == 0) g.pcie_generation = d.pcie_generation;
  if (g.pcie_width == 0) g.pcie_width = d.pcie_width;
  if (g.pcie_max_generation == 0) g.pcie_max_generation = g.pcie_generation;
  if (g.pcie_max_width == 0) g.pcie_max_width = g.pcie_width;
  if (t.get("pcie_p2p") != nullptr) g.pcie_p2p = r.flag(t, "pcie_p2p");
  g.vbios_version = d.vbios;
  if (const toml::node* n = t.get("vbios_version")) g.vbios_version = r.text(*n, "vbios_version");
  g.bar1_mib = count("bar1_memory_mib", d.bar1_mib, 1u << 24);
  g.ecc = count("ecc", d.ecc, 2);
  g.compute_mode = count("compute_mode", 0, 3);
  if (g.compute_mode == 1)
    r.fail(t.get("compute_mode")->source(),
           "key 'compute_mode' must be 0 (default), 2 (prohibited) or 3 (exclusive process)");
  if (t.get("display_active") != nullptr) g.display_active = r.flag(t, "display_active");
  g.encoders = count("encoders", d.encoders, 64);
  g.decoders = count("decoders", d.decoders, 64);
  if (const toml::node* n = t.get("serial")) {
    g.serial = r.text(*n, "serial");
  } else if (g.brand != "GeForce") {
    // A 13-digit board serial, stable per GPU: from the UUID's hex digits.
    std::string digits;
    for (char c : g.uuid.substr(4)) {
      if (c >= '0' && c <= '9') digits += c;
      if (c >= 'a' && c <= 'f') digits += static_cast<char>('0' + (c - 'a'));
    }
    g.serial = "132" + (digits + "0000000000").substr(0, 10);
  }
  if (const toml::node* n = t.get("cuda_attributes")) {
    const auto* table = n->as_table();
    if (table == nullptr)
      r.fail(n->source(),
             "key 'cuda_attributes' must be a table such as { KERNEL_EXEC_TIMEOUT = 1 }");
    for (const auto& [key, value] : *table) {
      const int id = model::attribute_by_name(key.str());
      if (id == 0)
        r.fail(value.source(), "cuda_attributes: '" + std::string(key.str()) +
                                   "' is not a CUdevice_attribute of CUDA 13 (write it without "
                                   "the CU_DEVICE_ATTRIBUTE_ prefix, e.g. KERNEL_EXEC_TIMEOUT)");
      const long long v = r.integer(value, std::string(key.str()));
      if (v < INT32_MIN || v > INT32_MAX)
        r.fail(value.source(),
               "cuda_attributes: '" + std::string(key.str()) + "' must fit in an int");
      g.cuda_attributes[id] = static_cast<int>(v);
    }
  }
}

// The GPU's PCI address (key pci_bus_id), kept in NVML's form: 00000000:18:00.0, upper-case hex.
void parse_bus(const Reader& r, const toml::table& t, const std::string& ctx, SimGpu& g) {
  const auto& bus = r.need(t, "pci_bus_id", ctx);
  const std::string bus_text = r.text(bus, "pci_bus_id");
  unsigned dom = 0, b = 0, d = 0, f = 0;
  char tail = 0;
  if (std::sscanf(bus_text.c_str(), "%8x:%2x:%2x.%1x%c", &dom, &b, &d, &f, &tail) != 4 ||
      bus_text.size() != 16) {
    r.fail(bus.source(), "key 'pci_bus_id' must look like 00000000:18:00.0");
  }
  g.pci_domain = dom;
  g.pci_bus = b;
  g.pci_device = d;
  g.pci_function = f;
  char canon[32];
  std::snprintf(canon, sizeof canon, "%08X:%02X:%02X.%X", dom, b, d, f);
  g.pci_bus_id = canon;
}

// An AMD GPU's id as ROCr and HIP print it: GPU- and the 64-bit unique id in 16 lower-case hex
// digits.
bool well_formed_amd_id(const std::string& u) {
  if (u.size() != 20 || u.compare(0, 4, "GPU-") != 0) return false;
  return std::all_of(u.begin() + 4, u.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// A GPU's `processes`: [{pid, used_memory}, ...], the compute processes its driver lists.
void parse_processes(const Reader& r, const toml::table& t, const std::string& ctx, SimGpu& g) {
  const auto* procs = t.get("processes");
  if (procs == nullptr) return;
  const auto* arr = procs->as_array();
  if (arr == nullptr)
    r.fail(procs->source(), "key 'processes' must be an array of {pid, used_memory} tables");
  for (const auto& p : *arr) {
    const auto* pt = p.as_table();
    if (pt == nullptr) r.fail(p.source(), "key 'processes' must hold tables");
    SimProcess sp;
    sp.pid = static_cast<unsigned>(r.integer(r.need(*pt, "pid", ctx), "pid"));
    if (sp.pid == 0) r.fail(pt->source(), "key 'pid' must be a process id above 0");
    sp.used_memory = r.bytes(r.need(*pt, "used_memory", ctx), "used_memory");
    g.processes.push_back(sp);
  }
}

// An AMD GPU (the machine's or its table's vendor = "amd"): what ROCm SMI reports of it. The AMD
// GPUs' tables are in the kernel's KFD topology order (`kfd` counts them), the order ROCr and HIP
// number GPUs in; `position` counts every [[gpu]] table, for messages.
void parse_amd_gpu(const Reader& r, const toml::table& t, std::size_t position, std::size_t kfd,
                   SimGpu& g) {
  const std::string ctx = " in [[gpu]] number " + std::to_string(position + 1);
  g.uuid = r.text(r.need(t, "uuid", ctx), "uuid");
  if (!well_formed_amd_id(g.uuid)) {
    r.fail(t["uuid"].node()->source(),
           "key 'uuid' of an AMD GPU must be its unique id as ROCr prints it: GPU- and 16 "
           "lower-case hex digits, such as GPU-3c4d5e6f708192a3");
  }
  g.name = r.text(r.need(t, "name", ctx), "name");
  parse_bus(r, t, ctx, g);
  g.pci_device_id = 0x1002u;  // AMD's vendor id
  if (const auto* n = t.get("pci_device_id"))
    g.pci_device_id |= static_cast<unsigned>(r.integer(*n, "pci_device_id")) << 16;
  g.memory_total = r.bytes(r.need(t, "memory_total", ctx), "memory_total");
  g.kfd_position = static_cast<unsigned>(kfd);
  if (const auto* n = t.get("drm_card")) {
    const long long v = r.integer(*n, "drm_card");
    if (v < 0 || v > 1023) r.fail(n->source(), "key 'drm_card' must be between 0 and 1023");
    g.drm_card = static_cast<int>(v);
  }
  if (const auto* n = t.get("numa_node"))
    g.numa_node = static_cast<int>(r.integer(*n, "numa_node"));
  if (const auto* n = t.get("xgmi_hive")) {
    const long long v = r.integer(*n, "xgmi_hive");
    if (v < 0 || v > 1023) r.fail(n->source(), "key 'xgmi_hive' must be between 0 and 1023");
    g.xgmi_hive = static_cast<int>(v);
  }
  if (const auto* n = t.get("utilization_gpu")) {
    const long long v = r.integer(*n, "utilization_gpu");
    if (v < 0 || v > 100) r.fail(n->source(), "key 'utilization_gpu' must be between 0 and 100");
    g.utilization_gpu = static_cast<unsigned>(v);
  }
  parse_processes(r, t, ctx, g);
  if (const auto* n = t.get("memory_used")) {
    const std::uint64_t used = r.bytes(*n, "memory_used");
    if (used > g.memory_total)
      r.fail(n->source(), "key 'memory_used' must not exceed memory_total");
    g.processes.push_back(SimProcess{0, used});  // memory held outside any listed process
  }
}

void parse_gpu(const Reader& r, const toml::table& t, std::size_t position, SimGpu& g) {
  const std::string ctx = " in [[gpu]] number " + std::to_string(position + 1);
  g.uuid = r.text(r.need(t, "uuid", ctx), "uuid");
  if (!well_formed_uuid(g.uuid, "GPU-")) {
    r.fail(t["uuid"].node()->source(),
           "key 'uuid' must look like GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx");
  }
  g.name = r.text(r.need(t, "name", ctx), "name");
  parse_bus(r, t, ctx, g);
  g.memory_total = r.bytes(r.need(t, "memory_total", ctx), "memory_total");
  const auto& ccn = r.need(t, "compute_capability", ctx);
  const std::string cc = r.text(ccn, "compute_capability");
  if (!parse_compute_capability(cc, g.cc_major, g.cc_minor)) {
    r.fail(ccn.source(), "key 'compute_capability' must look like \"9.0\" (major 1-" +
                             std::to_string(kMaxComputeCapability) + ", minor 0-" +
                             std::to_string(kMaxComputeCapability) + ")");
  }
  g.sm_count = static_cast<int>(r.integer(r.need(t, "sm_count", ctx), "sm_count"));
  g.numa_node = static_cast<int>(r.integer(r.need(t, "numa_node", ctx), "numa_node"));
  const auto& cpus = r.need(t, "cpus", ctx);
  auto list = detail::parse_cpu_list(r.text(cpus, "cpus"));
  if (!list) r.fail(cpus.source(), "key 'cpus' must be a CPU list such as \"0-55,112-167\"");
  g.cpus = *list;
  g.pcie_h2d_gbps = r.number(r.need(t, "pcie_h2d_gbps", ctx), "pcie_h2d_gbps");
  g.pcie_d2h_gbps = r.number(r.need(t, "pcie_d2h_gbps", ctx), "pcie_d2h_gbps");
  g.memory_bandwidth_gbps =
      r.number(r.need(t, "memory_bandwidth_gbps", ctx), "memory_bandwidth_gbps");
  for (const char* key : {"pcie_h2d_gbps", "pcie_d2h_gbps", "memory_bandwidth_gbps"}) {
    if (!(r.number(*t.get(key), key) > 0))
      r.fail(t.get(key)->source(), std::string("key '") + key + "' must be positive");
  }
  if (const auto* n = t.get("pcie_link_gbps")) g.pcie_link_gbps = r.number(*n, "pcie_link_gbps");
  if (const auto* n = t.get("l2_cache")) g.l2_cache_bytes = r.bytes(*n, "l2_cache");
  auto small = [&](const char* key, unsigned& field) {
    if (const auto* n = t.get(key)) {
      const long long v = r.integer(*n, key);
      if (v < 1 || v > 64)
        r.fail(n->source(), std::string("key '") + key + "' must be between 1 and 64");
      field = static_cast<unsigned>(v);
    }
  };
  small("pcie_generation", g.pcie_generation);
  small("pcie_width", g.pcie_width);
  small("pcie_max_generation", g.pcie_max_generation);
  small("pcie_max_width", g.pcie_max_width);
  if (g.pcie_max_generation == 0) g.pcie_max_generation = g.pcie_generation;
  if (g.pcie_max_width == 0) g.pcie_max_width = g.pcie_width;
  if (const auto* n = t.get("pci_device_id"))
    g.pci_device_id = static_cast<unsigned>(r.integer(*n, "pci_device_id"));
  g.pci_device_id = (g.pci_device_id << 16) | 0x10deu;
  if (const auto* n = t.get("speed")) {
    g.speed = r.number(*n, "speed");
    if (!std::isfinite(g.speed)) r.fail(n->source(), "key 'speed' must be a finite number");
    g.speed_given = true;
  } else {
    g.speed = derived_speed(g.cc_major, g.cc_minor, g.sm_count);
  }
  g.lost = r.flag(t, "lost");
  if (t.get("persistence_mode") != nullptr) g.persistence_mode = r.flag(t, "persistence_mode");
  if (const auto* n = t.get("nvlink_domain"))
    g.nvlink_domain = static_cast<int>(r.integer(*n, "nvlink_domain"));
  if (const auto* n = t.get("pcie_switch"))
    g.pcie_switch = static_cast<int>(r.integer(*n, "pcie_switch"));
  if (const auto* n = t.get("pcie_root"))
    g.pcie_root = static_cast<int>(r.integer(*n, "pcie_root"));
  parse_sensors(r, t, g);
  if (const auto* n = t.get("utilization_gpu"))
    g.utilization_gpu = static_cast<unsigned>(r.integer(*n, "utilization_gpu"));
  if (const auto* n = t.get("utilization_memory"))
    g.utilization_memory = static_cast<unsigned>(r.integer(*n, "utilization_memory"));
  parse_processes(r, t, ctx, g);
  if (const auto* mig = t.get("mig")) {
    const auto* arr = mig->as_array();
    if (arr == nullptr) r.fail(mig->source(), "key 'mig' must be an array of [[gpu.mig]] tables");
    g.mig_enabled = true;
    for (const auto& m : *arr) {
      const auto* mt = m.as_table();
      if (mt == nullptr) r.fail(m.source(), "key 'mig' must hold [[gpu.mig]] tables");
      const std::string mctx = ctx + ", [[gpu.mig]] number " + std::to_string(g.migs.size() + 1);
      SimMig sm;
      sm.uuid = r.text(r.need(*mt, "uuid", mctx), "uuid");
      if (!well_formed_uuid(sm.uuid, "MIG-")) {
        r.fail(mt->get("uuid")->source(),
               "key 'uuid' must look like MIG-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx");
      }
      sm.gpu_instance =
          static_cast<unsigned>(r.integer(r.need(*mt, "gpu_instance", mctx), "gpu_instance"));
      sm.compute_instance = static_cast<unsigned>(
          r.integer(r.need(*mt, "compute_instance", mctx), "compute_instance"));
      sm.name = r.text(r.need(*mt, "name", mctx), "name");
      sm.memory_total = r.bytes(r.need(*mt, "memory_total", mctx), "memory_total");
      sm.sm_count = static_cast<int>(r.integer(r.need(*mt, "sm_count", mctx), "sm_count"));
      sm.l2_cache_bytes =
          mt->get("l2_cache") != nullptr
              ? r.bytes(*mt->get("l2_cache"), "l2_cache")
              : model::mig_l2_bytes(g.l2_cache_bytes, g.memory_total, sm.memory_total);
      g.migs.push_back(sm);
    }
  }
}

// What a machine file must be, for messages about one that is not.
std::string size_limit() {
  return "a machine file is a regular file of at most " +
         std::to_string(kMaxMachineFileBytes / 1024 / 1024) + " MiB (" +
         std::to_string(kMaxMachineFileBytes) + " bytes)";
}

// Refuses, before the TOML parser sees it, text that would make toml++ fail badly:
// - keys, tables and arrays nested deeper than kMaxMachineNesting (its recursion overflows the
//   stack). An over-estimate: outside strings and comments, each open '[' or '{' is a level and
//   each '.' (in a key, or a number) one more; a value nests under its key.
// - a non-ASCII character outside strings and comments (TOML allows none there), or after a
//   backslash in a multi-line basic string: toml++ 3.3 asks whether such a character is
//   whitespace and reaches __builtin_unreachable for many of them (marzer/tomlplusplus#190).
// It follows TOML's structure as toml++ reads it: keys, then values after '='; a value that does
// not start with a quote, '[' or '{' is scanned as one bare token up to a blank, ',', ']', '}',
// '#' or a line break, quotes included (and after a blank, in case it is a date and a time). On
// text that is not TOML it may refuse more than it must, never less: toml++ stops at the first
// error.
void prescan(std::string_view text, const std::string& path) {
  struct Level {
    char kind;      // '^' the document, 'H' a table header, 'A' an array, 'T' an inline table
    bool value;     // reading a value (after '=', or in an array), not a key
    int dots_base;  // the depth of the level itself
  };
  std::vector<Level> levels{{'^', false, 0}};
  bool bare = false;  // inside (or just after) a bare value: quotes are part of it
  int dots = 0;
  std::size_t line = 1;
  const std::size_t n = text.size();
  auto too_deep = [&] {
    throw MachineError(path + ":" + std::to_string(line) +
                       ": keys, tables and arrays nest more than " +
                       std::to_string(kMaxMachineNesting) +
                       " levels deep (each '.' of a dotted key counts as one); machine files need "
                       "a handful: shorten the key or flatten the nesting");
  };
  auto non_ascii = [&](const char* where) {
    throw MachineError(path + ":" + std::to_string(line) + ": a non-ASCII character " + where +
                       "; TOML allows them only inside strings and comments: quote it");
  };
  auto end_of_entry = [&] {
    bare = false;
    dots = levels.back().dots_base;
  };
  std::size_t i = 0;
  while (i < n) {
    const char c = text[i];
    if (c == '#') {
      while (i < n && text[i] != '\n') ++i;
      continue;
    }
    if ((c == '"' || c == '\'') && !bare) {
      const bool basic = c == '"';
      const bool triple = i + 2 < n && text[i + 1] == c && text[i + 2] == c;
      i += triple ? 3 : 1;
      while (i < n) {
        const char d = text[i];
        if (d == '\n') {
          if (!triple) break;  // an unterminated string: the parser reports it
          ++line;
        }
        if (basic && d == '\\') {
          if (triple) {  // an escape, or a line-ending backslash and the whitespace it trims
            std::size_t j = i + 1;
            while (j < n &&
                   (text[j] == ' ' || text[j] == '\t' || text[j] == '\r' || text[j] == '\n'))
              ++j;
            if (j < n && static_cast<unsigned char>(text[j]) >= 0x80)
              non_ascii("after a backslash in a multi-line string");
          }
          if (i + 1 < n && text[i + 1] == '\n') ++line;
          i += 2;
          continue;
        }
        if (d == c && (!triple || (i + 2 < n && text[i + 1] == c && text[i + 2] == c))) {
          i += triple ? 3 : 1;
          // A multi-line string may end in up to two more quotes of its own kind.
          for (int extra = 0; triple && extra < 2 && i < n && text[i] == c; ++extra) ++i;
          break;
        }
        ++i;
      }
      continue;
    }
    Level& level = levels.back();
    switch (c) {
      case '\n':
        ++line;
        if (level.kind == '^') level.value = false;
        end_of_entry();
        break;
      case ' ':
      case '\t':
      case '\r':
        break;
      case ',':
        level.value = level.kind == 'A';
        end_of_entry();
        break;
      case '=':
        if (!level.value) {
          level.value = true;
        } else {
          bare = true;
        }
        break;
      case '[':
      case '{':
        if (bare) break;  // part of a bare value
        levels.push_back(
            {c == '{' ? 'T' : (level.value ? 'A' : 'H'), c == '[' && level.value, dots + 1});
        dots = levels.back().dots_base;
        if (dots > kMaxMachineNesting) too_deep();
        break;
      case ']':
      case '}':
        if (levels.size() > 1) levels.pop_back();
        end_of_entry();
        break;
      case '.':
        if (++dots > kMaxMachineNesting) too_deep();
        if (level.value) bare = true;
        break;
      default:
        if (static_cast<unsigned char>(c) >= 0x80) non_ascii("outside a string or a comment");
        if (level.value) bare = true;
        break;
    }
    ++i;
  }
}

}  // namespace

// Opened without blocking (a FIFO with no writer would block open), checked on the opened file,
// and read with a bound (/dev/zero never ends).
#ifdef _WIN32
// Windows: std::filesystem for the checks (no FIFOs or devices to guard against on a path there).
MachineFile::MachineFile(const std::string& path) : path_(path) {
  const std::filesystem::path p = std::filesystem::u8path(path);
  std::error_code ec;
  const auto status = std::filesystem::status(p, ec);
  if (ec) throw MachineError(path + ": cannot open the machine file: " + ec.message());
  if (status.type() == std::filesystem::file_type::directory)
    throw MachineError(path + ": is a folder; " + size_limit());
  if (status.type() != std::filesystem::file_type::regular)
    throw MachineError(path + ": is not a regular file; " + size_limit());
  const auto size = std::filesystem::file_size(p, ec);
  if (ec || size > kMaxMachineFileBytes)
    throw MachineError(path + ": is " + std::to_string(size) + " bytes; " + size_limit());
  stamp_.size = static_cast<std::uint64_t>(size);
  const auto modified = std::filesystem::last_write_time(p, ec);
  if (!ec) stamp_.modified_ns = static_cast<std::int64_t>(modified.time_since_epoch().count());
}

MachineFile::~MachineFile() = default;

std::string MachineFile::read() {
  const std::filesystem::path p = std::filesystem::u8path(path_);
  std::ifstream in(p, std::ios::binary);
  if (!in) throw MachineError(path_ + ": cannot open the machine file");
  // A buffer of the file's size, grown (never past the limit) if the file grows meanwhile.
  std::string text(static_cast<std::size_t>(stamp_.size) + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  std::size_t have = static_cast<std::size_t>(in.gcount());
  while (have == text.size() && text.size() <= kMaxMachineFileBytes) {
    text.resize(std::min<std::size_t>(text.size() * 2, kMaxMachineFileBytes + 1));
    in.read(text.data() + have, static_cast<std::streamsize>(text.size() - have));
    if (in.gcount() == 0) break;
    have += static_cast<std::size_t>(in.gcount());
  }
  if (have > kMaxMachineFileBytes) {
    throw MachineError(path_ + ": is more than " + std::to_string(kMaxMachineFileBytes) +
                       " bytes; " + size_limit());
  }
  text.resize(have);
  return text;
}
#else
MachineFile::MachineFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    throw MachineError(path + ": cannot open the machine file: " + std::strerror(errno));
  }
  struct Closer {
    int fd;
    ~Closer() {
      if (fd >= 0) ::close(fd);
    }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    throw MachineError(path + ": cannot read the machine file: " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    const char* kind = S_ISDIR(st.st_mode)    ? "a folder"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a regular file";
    throw MachineError(path + ": is " + std::string(kind) + "; " + size_limit());
  }
  if (st.st_size < 0 || static_cast<std::uint64_t>(st.st_size) > kMaxMachineFileBytes) {
    throw MachineError(path + ": is " + std::to_string(st.st_size) + " bytes; " + size_limit());
  }
  stamp_.device = static_cast<std::uint64_t>(st.st_dev);
  stamp_.inode = static_cast<std::uint64_t>(st.st_ino);
  stamp_.size = static_cast<std::uint64_t>(st.st_size);
  stamp_.modified_ns = std::int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
  stamp_.changed_ns = std::int64_t{st.st_ctim.tv_sec} * 1000000000 + st.st_ctim.tv_nsec;
  fd_ = fd;
  closer.fd = -1;
}

MachineFile::~MachineFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::string MachineFile::read() {
  // A buffer of the file's size and a byte more (to see it grow), grown while it keeps growing,
  // never past the limit and a byte: a 1 MiB buffer cleared for a 4 KiB file was a quarter of
  // every simulated NVML start.
  std::string text;
  text.resize(static_cast<std::size_t>(stamp_.size) + 1);
  std::size_t have = 0;
  while (true) {
    if (have == text.size()) {
      if (text.size() > kMaxMachineFileBytes) break;
      text.resize(std::min(text.size() * 2, kMaxMachineFileBytes + 1));
    }
    const ssize_t n = ::read(fd_, text.data() + have, text.size() - have);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw MachineError(path_ + ": cannot read the machine file: " + std::strerror(errno));
    }
    have += static_cast<std::size_t>(n);
  }
  if (have > kMaxMachineFileBytes) {  // it grew while being read
    throw MachineError(path_ + ": is more than " + std::to_string(kMaxMachineFileBytes) +
                       " bytes; " + size_limit());
  }
  text.resize(have);
  return text;
}
#endif

SimMachine load_machine(const std::string& path) {
  MachineFile file(path);
  return parse_machine(file.read(), path);
}

SimMachine parse_machine(std::string_view text, const std::string& path) {
  if (text.size() > kMaxMachineFileBytes) {
    throw MachineError(path + ": is " + std::to_string(text.size()) +
                       " bytes; a machine file holds at most " +
                       std::to_string(kMaxMachineFileBytes) + " bytes");
  }
  prescan(text, path);
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    throw MachineError(path + ":" + std::to_string(e.source().begin.line) + ": " +
                       std::string(e.description()));
  }
  Reader r{path};
  SimMachine m;
  m.path = path;
  m.name = r.text(r.need(root, "name", ""), "name");
  if (const int c = control_character(m.name); c >= 0) {
    char hex[16];  // room for any unsigned value, so no truncation warning in any build
    std::snprintf(hex, sizeof hex, "0x%02x", static_cast<unsigned>(c) & 0xffu);
    r.fail(root.get("name")->source(),
           std::string("key 'name' holds a control character (") + hex +
               "); a machine's name is printed in shell settings and on terminals: write it "
               "on one line, in printable characters");
  }
  if (const auto* n = root.get("description")) m.description = r.text(*n, "description");
  if (const auto* n = root.get("vendor")) {
    m.vendor = r.text(*n, "vendor");
    if (m.vendor != "nvidia" && m.vendor != "amd")
      r.fail(n->source(), "key 'vendor' must be \"nvidia\" or \"amd\"");
  }
  // Each GPU's vendor: its table's `vendor`, else the machine's. A machine with GPUs of both
  // makers is NVIDIA's at its top (its driver keys are required) with AMD GPUs marked.
  const toml::node* gpus = root.get("gpu");
  std::vector<std::string> vendors;
  if (gpus != nullptr && gpus->is_array_of_tables()) {
    for (const auto& node : *gpus->as_array()) {
      std::string v = m.vendor;
      if (const auto* n = node.as_table()->get("vendor")) {
        v = r.text(*n, "vendor");
        if (v != "nvidia" && v != "amd")
          r.fail(n->source(), "key 'vendor' must be \"nvidia\" or \"amd\"");
        if (v == "nvidia" && m.vendor == "amd") {
          r.fail(n->source(),
                 "an NVIDIA GPU on a machine whose vendor is \"amd\": a machine with GPUs of "
                 "both makers leaves its top-level vendor \"nvidia\" (the default) and marks "
                 "each AMD GPU with vendor = \"amd\"");
        }
      }
      vendors.push_back(v);
    }
  }
  const bool any_amd =
      m.vendor == "amd" || std::find(vendors.begin(), vendors.end(), "amd") != vendors.end();
  if (m.vendor == "nvidia" && !vendors.empty() &&
      std::find(vendors.begin(), vendors.end(), "nvidia") == vendors.end()) {
    r.fail(gpus->source(),
           "every [[gpu]] says vendor = \"amd\": a machine of AMD GPUs says vendor = \"amd\" at "
           "its top (its driver_version then amdgpu's); the tables' vendor marks the AMD GPUs "
           "of a machine that has NVIDIA GPUs too");
  }
  if (m.vendor == "amd") {
    // NVIDIA's driver is absent from an AMD machine: its versions are not asked for.
    if (const auto* n = root.get("driver_version")) m.driver_version = r.text(*n, "driver_version");
    m.amd_driver_version = m.driver_version;
  } else {
    m.driver_version = r.text(r.need(root, "driver_version", ""), "driver_version");
    m.cuda_driver_version =
        static_cast<int>(r.integer(r.need(root, "cuda_driver_version", ""), "cuda_driver_version"));
    if (const auto* n = root.get("amdgpu_version"); n != nullptr && any_amd)
      m.amd_driver_version = r.text(*n, "amdgpu_version");
  }
  if (any_amd && root.get("rocm_smi_node_ids") != nullptr)
    m.rocm_smi_node_ids = r.flag(root, "rocm_smi_node_ids");
  if (const auto* n = root.get("mig_rule")) {
    m.mig_rule = r.text(*n, "mig_rule");
    if (m.mig_rule != "r570" && m.mig_rule != "legacy")
      r.fail(n->source(), "key 'mig_rule' must be \"r570\" or \"legacy\"");
  }
  if (const auto* f = root.get("faults")) {
    const auto* ft = f->as_table();
    if (ft == nullptr) r.fail(f->source(), "key 'faults' must be a table");
    if (const auto* n = ft->get("nvml")) {
      m.faults.nvml = r.text(*n, "nvml");
      if (m.faults.nvml != "missing" && m.faults.nvml != "no_v2" && m.faults.nvml != "init_fails") {
        r.fail(n->source(), "key 'faults.nvml' must be \"missing\", \"no_v2\" or \"init_fails\"");
      }
    }
    if (const auto* n = ft->get("cuda")) {
      m.faults.cuda = r.text(*n, "cuda");
      if (m.faults.cuda != "missing" && m.faults.cuda != "init_fails") {
        r.fail(n->source(), "key 'faults.cuda' must be \"missing\" or \"init_fails\"");
      }
    }
    m.faults.corrupt_copies = r.flag(*ft, "corrupt_copies");
  }
  if (gpus == nullptr || !gpus->is_array_of_tables()) {
    throw MachineError(path +
                       ":1: missing required key 'gpu' (one [[gpu]] table per physical GPU)");
  }
  // Each GPU's UUID and bus id, to find one given twice without comparing every pair (a file
  // of 1,024 GPUs would make half a million comparisons).
  std::unordered_map<std::string, std::size_t> by_uuid, by_bus;
  std::size_t n = 0, kfd = 0;
  for (const auto& node : *gpus->as_array()) {
    SimGpu g;
    g.vendor = vendors[n];
    if (g.vendor == "amd") {
      parse_amd_gpu(r, *node.as_table(), n, kfd++, g);
    } else {
      parse_gpu(r, *node.as_table(), n, g);
    }
    const auto uuid = by_uuid.emplace(g.uuid, n);
    const auto bus = by_bus.emplace(g.pci_bus_id, n);
    if (!uuid.second || !bus.second) {
      // The message names what the first GPU that g repeats shares with it.
      const std::size_t first =
          std::min(uuid.second ? n : uuid.first->second, bus.second ? n : bus.first->second);
      r.fail(node.source(),
             "two GPUs share " +
                 (m.gpus[first].uuid == g.uuid ? "uuid " + g.uuid : "pci_bus_id " + g.pci_bus_id));
    }
    m.gpus.push_back(std::move(g));
    ++n;
  }
  std::stable_sort(m.gpus.begin(), m.gpus.end(),
                   [](const SimGpu& a, const SimGpu& b) { return a.pci_bus_id < b.pci_bus_id; });
  if (any_amd) {
    // DRM card numbers: as given, else the next free ones in KFD order; no two GPUs share one.
    std::unordered_map<int, std::size_t> cards;
    for (std::size_t i = 0; i < m.gpus.size(); ++i) {
      if (m.gpus[i].vendor != "amd" || m.gpus[i].drm_card < 0) continue;
      if (!cards.emplace(m.gpus[i].drm_card, i).second) {
        throw MachineError(path + ": two GPUs share drm_card " +
                           std::to_string(m.gpus[i].drm_card));
      }
    }
    std::vector<SimGpu*> by_kfd;
    for (SimGpu& g : m.gpus) {
      if (g.vendor == "amd") by_kfd.push_back(&g);
    }
    std::sort(by_kfd.begin(), by_kfd.end(),
              [](const SimGpu* a, const SimGpu* b) { return a->kfd_position < b->kfd_position; });
    int next = 0;
    for (SimGpu* g : by_kfd) {
      if (g->drm_card >= 0) continue;
      while (cards.count(next) != 0) ++next;
      g->drm_card = next;
      cards.emplace(next, 0);
    }
  }
  return m;
}

}  // namespace gpusel::sim
