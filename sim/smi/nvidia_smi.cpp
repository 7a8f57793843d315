// The simulator's nvidia-smi: the forms launch scripts use, in NVIDIA's output formats, answered
// from whatever libnvidia-ml.so.1 the loader finds (under `gpusel sim env`/`sim exec`, the
// simulated one, so every answer is the simulated machine's live state). It is a plain NVML
// client: no simulator code. docs/simulator.md lists what it covers.
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nvml_abi.hpp"

namespace {

// NVML's nvmlBAR1Memory_t and nvmlDeviceAttributes_t (nvml.h's layouts).
struct Bar1Memory {
  unsigned long long total, free, used;
};
struct DeviceAttributes {
  unsigned multiprocessors, copy_engines, decoders, encoders, jpegs, ofas, gi_slices, ci_slices;
  unsigned long long memory_mb;
};

// ---- NVML, loaded by name ----------------------------------------------------------------------
// Each function this program calls: name, return type, parameters.
#define SMI_NVML_FUNCTIONS(X)                                                                    \
  X(nvmlInit_v2, nvmlReturn_t, (void))                                                           \
  X(nvmlShutdown, nvmlReturn_t, (void))                                                          \
  X(nvmlErrorString, const char*, (nvmlReturn_t))                                                \
  X(nvmlSystemGetDriverVersion, nvmlReturn_t, (char*, unsigned))                                 \
  X(nvmlSystemGetNVMLVersion, nvmlReturn_t, (char*, unsigned))                                   \
  X(nvmlSystemGetCudaDriverVersion_v2, nvmlReturn_t, (int*))                                     \
  X(nvmlSystemGetProcessName, nvmlReturn_t, (unsigned, char*, unsigned))                         \
  X(nvmlDeviceGetCount_v2, nvmlReturn_t, (unsigned*))                                            \
  X(nvmlDeviceGetHandleByIndex_v2, nvmlReturn_t, (unsigned, nvmlDevice_t*))                      \
  X(nvmlDeviceGetUUID, nvmlReturn_t, (nvmlDevice_t, char*, unsigned))                            \
  X(nvmlDeviceGetName, nvmlReturn_t, (nvmlDevice_t, char*, unsigned))                            \
  X(nvmlDeviceGetPciInfo_v3, nvmlReturn_t, (nvmlDevice_t, nvmlPciInfo_t*))                       \
  X(nvmlDeviceGetMemoryInfo, nvmlReturn_t, (nvmlDevice_t, nvmlMemory_t*))                        \
  X(nvmlDeviceGetUtilizationRates, nvmlReturn_t, (nvmlDevice_t, nvmlUtilization_t*))             \
  X(nvmlDeviceGetTemperature, nvmlReturn_t, (nvmlDevice_t, int, unsigned*))                      \
  X(nvmlDeviceGetPowerUsage, nvmlReturn_t, (nvmlDevice_t, unsigned*))                            \
  X(nvmlDeviceGetEnforcedPowerLimit, nvmlReturn_t, (nvmlDevice_t, unsigned*))                    \
  X(nvmlDeviceGetPerformanceState, nvmlReturn_t, (nvmlDevice_t, int*))                           \
  X(nvmlDeviceGetFanSpeed, nvmlReturn_t, (nvmlDevice_t, unsigned*))                              \
  X(nvmlDeviceGetPersistenceMode, nvmlReturn_t, (nvmlDevice_t, unsigned*))                       \
  X(nvmlDeviceGetComputeMode, nvmlReturn_t, (nvmlDevice_t, int*))                                \
  X(nvmlDeviceGetCudaComputeCapability, nvmlReturn_t, (nvmlDevice_t, int*, int*))                \
  X(nvmlDeviceGetMinorNumber, nvmlReturn_t, (nvmlDevice_t, unsigned*))                           \
  X(nvmlDeviceGetMigMode, nvmlReturn_t, (nvmlDevice_t, unsigned*, unsigned*))                    \
  X(nvmlDeviceGetMaxMigDeviceCount, nvmlReturn_t, (nvmlDevice_t, unsigned*))                     \
  X(nvmlDeviceGetMigDeviceHandleByIndex, nvmlReturn_t, (nvmlDevice_t, unsigned, nvmlDevice_t*))  \
  X(nvmlDeviceGetGpuInstanceId, nvmlReturn_t, (nvmlDevice_t, unsigned*))                         \
  X(nvmlDeviceGetComputeInstanceId, nvmlReturn_t, (nvmlDevice_t, unsigned*))                     \
  X(nvmlDeviceGetComputeRunningProcesses_v3, nvmlReturn_t,                                       \
    (nvmlDevice_t, unsigned*, nvmlProcessInfo_t*))                                               \
  X(nvmlDeviceGetCurrPcieLinkGeneration, nvmlReturn_t, (nvmlDevice_t, unsigned*))                \
  X(nvmlDeviceGetCurrPcieLinkWidth, nvmlReturn_t, (nvmlDevice_t, unsigned*))                     \
  X(nvmlDeviceGetTopologyCommonAncestor, nvmlReturn_t, (nvmlDevice_t, nvmlDevice_t, int*))       \
  X(nvmlDeviceGetNvLinkState, nvmlReturn_t, (nvmlDevice_t, unsigned, int*))                      \
  X(nvmlDeviceGetNvLinkRemotePciInfo_v2, nvmlReturn_t, (nvmlDevice_t, unsigned, nvmlPciInfo_t*)) \
  X(nvmlDeviceGetCpuAffinity, nvmlReturn_t, (nvmlDevice_t, unsigned, unsigned long*))            \
  X(nvmlDeviceGetDisplayMode, nvmlReturn_t, (nvmlDevice_t, int*))                                \
  X(nvmlDeviceGetDisplayActive, nvmlReturn_t, (nvmlDevice_t, int*))                              \
  X(nvmlDeviceGetEccMode, nvmlReturn_t, (nvmlDevice_t, int*, int*))                              \
  X(nvmlDeviceGetTotalEccErrors, nvmlReturn_t, (nvmlDevice_t, int, int, unsigned long long*))    \
  X(nvmlDeviceGetVbiosVersion, nvmlReturn_t, (nvmlDevice_t, char*, unsigned))                    \
  X(nvmlDeviceGetBAR1MemoryInfo, nvmlReturn_t, (nvmlDevice_t, Bar1Memory*))                      \
  X(nvmlDeviceGetAttributes_v2, nvmlReturn_t, (nvmlDevice_t, DeviceAttributes*))                 \
  X(nvmlDeviceGetMemoryAffinity, nvmlReturn_t, (nvmlDevice_t, unsigned, unsigned long*, unsigned))

struct Nvml {
#define SMI_FIELD(name, ret, params) ret(*name) params = nullptr;
  SMI_NVML_FUNCTIONS(SMI_FIELD)
#undef SMI_FIELD
};

Nvml nvml;

// What NVIDIA's nvidia-smi says when the driver cannot be reached, in this program's words; the
// exit status is NVIDIA's for it (9).
[[noreturn]] void no_driver(const std::string& why) {
  std::fprintf(stderr,
               "nvidia-smi (gpusel simulator): cannot talk to the NVIDIA driver: %s. This is the "
               "simulated machine's nvidia-smi; on a machine that models a missing or broken NVML "
               "that is the expected answer (`gpusel sim list` shows the machines).\n",
               why.c_str());
  std::exit(9);
}

void load_nvml() {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr)
    no_driver(std::string("libnvidia-ml.so.1 cannot be loaded (") + dlerror() + ")");
#define SMI_LOOKUP(name, ret, params) \
  nvml.name = reinterpret_cast<ret(*) params>(dlsym(lib, #name));
  SMI_NVML_FUNCTIONS(SMI_LOOKUP)
#undef SMI_LOOKUP
  if (nvml.nvmlInit_v2 == nullptr || nvml.nvmlDeviceGetCount_v2 == nullptr ||
      nvml.nvmlDeviceGetHandleByIndex_v2 == nullptr) {
    no_driver("libnvidia-ml.so.1 lacks nvmlInit_v2 (a driver older than any this program knows)");
  }
  if (const nvmlReturn_t rc = nvml.nvmlInit_v2(); rc != NVML_SUCCESS) {
    no_driver(std::string("nvmlInit_v2 failed: ") +
              (nvml.nvmlErrorString != nullptr ? nvml.nvmlErrorString(rc) : std::to_string(rc)));
  }
}

// Calls an optional function: its result, or NOT_SUPPORTED when the library lacks it.
template <typename F, typename... A>
nvmlReturn_t call(F* fn, A... args) {
  return fn == nullptr ? static_cast<nvmlReturn_t>(NVML_ERROR_NOT_SUPPORTED) : fn(args...);
}

// ---- one GPU, read once
// --------------------------------------------------------------------------

struct Mig {
  nvmlDevice_t handle = nullptr;
  std::string uuid, name;
  unsigned gi = 0, ci = 0;
  std::optional<nvmlMemory_t> memory;
  std::optional<Bar1Memory> bar1;
  std::optional<DeviceAttributes> attributes;
};

struct Process {
  unsigned pid = 0;
  unsigned long long used = 0;
  std::optional<unsigned> gi, ci;
};

struct Gpu {
  unsigned index = 0;
  nvmlDevice_t handle = nullptr;
  nvmlReturn_t handle_result = NVML_SUCCESS;  // not SUCCESS: NVML gives no handle (a lost GPU)
  std::string uuid, name, bus;                // bus: "00000000:18:00.0"
  nvmlPciInfo_t pci{};
  std::optional<nvmlMemory_t> memory;
  std::optional<nvmlUtilization_t> util;
  std::optional<unsigned> temperature, power_mw, limit_mw, fan, persistence, minor;
  std::optional<unsigned> mig_current, mig_pending, link_gen, link_width;
  std::optional<int> pstate, compute_mode, cc_major, cc_minor;
  std::optional<int> display_mode, display_active, ecc_current, ecc_pending;
  std::optional<unsigned long long> ecc_uncorrected;  // volatile, since the driver loaded
  std::optional<Bar1Memory> bar1;
  std::string vbios;
  std::vector<Mig> migs;
  std::vector<Process> processes;
};

// An NVML getter's answer for one device: the value, or nullopt when NVML does not give it.
template <typename T>
std::optional<T> get(nvmlReturn_t (*fn)(nvmlDevice_t, T*), nvmlDevice_t d) {
  T value{};
  if (call(fn, d, &value) != NVML_SUCCESS) return std::nullopt;
  return value;
}

std::string text_of(nvmlReturn_t (*fn)(nvmlDevice_t, char*, unsigned), nvmlDevice_t d) {
  char buf[256] = {};
  return call(fn, d, buf, static_cast<unsigned>(sizeof buf)) == NVML_SUCCESS ? std::string(buf)
                                                                             : "";
}

void read_migs(Gpu& g) {
  unsigned max = 0;
  if (!g.mig_current || *g.mig_current != 1 ||
      call(nvml.nvmlDeviceGetMaxMigDeviceCount, g.handle, &max) != NVML_SUCCESS)
    return;
  for (unsigned i = 0; i < max; ++i) {
    Mig m;
    if (call(nvml.nvmlDeviceGetMigDeviceHandleByIndex, g.handle, i, &m.handle) != NVML_SUCCESS)
      continue;
    m.uuid = text_of(nvml.nvmlDeviceGetUUID, m.handle);
    m.name = text_of(nvml.nvmlDeviceGetName, m.handle);
    call(nvml.nvmlDeviceGetGpuInstanceId, m.handle, &m.gi);
    call(nvml.nvmlDeviceGetComputeInstanceId, m.handle, &m.ci);
    m.memory = get<nvmlMemory_t>(nvml.nvmlDeviceGetMemoryInfo, m.handle);
    m.bar1 = get<Bar1Memory>(nvml.nvmlDeviceGetBAR1MemoryInfo, m.handle);
    m.attributes = get<DeviceAttributes>(nvml.nvmlDeviceGetAttributes_v2, m.handle);
    g.migs.push_back(m);
  }
}

void read_processes(Gpu& g) {
  unsigned count = 0;
  std::vector<nvmlProcessInfo_t> infos;
  nvmlReturn_t rc = call(nvml.nvmlDeviceGetComputeRunningProcesses_v3, g.handle, &count,
                         static_cast<nvmlProcessInfo_t*>(nullptr));
  if (rc == NVML_ERROR_INSUFFICIENT_SIZE) {
    infos.resize(count + 8);
    count = static_cast<unsigned>(infos.size());
    rc = call(nvml.nvmlDeviceGetComputeRunningProcesses_v3, g.handle, &count, infos.data());
  }
  if (rc != NVML_SUCCESS) return;
  for (unsigned i = 0; i < count && i < infos.size(); ++i) {
    Process p;
    p.pid = infos[i].pid;
    p.used = infos[i].usedGpuMemory;
    if (infos[i].gpuInstanceId != 0xFFFFFFFFu) p.gi = infos[i].gpuInstanceId;
    if (infos[i].computeInstanceId != 0xFFFFFFFFu) p.ci = infos[i].computeInstanceId;
    g.processes.push_back(p);
  }
}

Gpu read_gpu(unsigned index) {
  Gpu g;
  g.index = index;
  g.handle_result = nvml.nvmlDeviceGetHandleByIndex_v2(index, &g.handle);
  if (g.handle_result != NVML_SUCCESS) return g;
  g.uuid = text_of(nvml.nvmlDeviceGetUUID, g.handle);
  g.name = text_of(nvml.nvmlDeviceGetName, g.handle);
  if (call(nvml.nvmlDeviceGetPciInfo_v3, g.handle, &g.pci) == NVML_SUCCESS) g.bus = g.pci.busId;
  g.memory = get<nvmlMemory_t>(nvml.nvmlDeviceGetMemoryInfo, g.handle);
  g.util = get<nvmlUtilization_t>(nvml.nvmlDeviceGetUtilizationRates, g.handle);
  if (unsigned t = 0; call(nvml.nvmlDeviceGetTemperature, g.handle, 0, &t) == NVML_SUCCESS)
    g.temperature = t;
  g.power_mw = get<unsigned>(nvml.nvmlDeviceGetPowerUsage, g.handle);
  g.limit_mw = get<unsigned>(nvml.nvmlDeviceGetEnforcedPowerLimit, g.handle);
  g.fan = get<unsigned>(nvml.nvmlDeviceGetFanSpeed, g.handle);
  g.persistence = get<unsigned>(nvml.nvmlDeviceGetPersistenceMode, g.handle);
  g.minor = get<unsigned>(nvml.nvmlDeviceGetMinorNumber, g.handle);
  g.link_gen = get<unsigned>(nvml.nvmlDeviceGetCurrPcieLinkGeneration, g.handle);
  g.link_width = get<unsigned>(nvml.nvmlDeviceGetCurrPcieLinkWidth, g.handle);
  g.pstate = get<int>(nvml.nvmlDeviceGetPerformanceState, g.handle);
  g.compute_mode = get<int>(nvml.nvmlDeviceGetComputeMode, g.handle);
  int i = 0, j = 0;
  if (call(nvml.nvmlDeviceGetCudaComputeCapability, g.handle, &i, &j) == NVML_SUCCESS) {
    g.cc_major = i;
    g.cc_minor = j;
  }
  g.display_mode = get<int>(nvml.nvmlDeviceGetDisplayMode, g.handle);
  g.display_active = get<int>(nvml.nvmlDeviceGetDisplayActive, g.handle);
  g.bar1 = get<Bar1Memory>(nvml.nvmlDeviceGetBAR1MemoryInfo, g.handle);
  g.vbios = text_of(nvml.nvmlDeviceGetVbiosVersion, g.handle);
  if (int ecc = 0, ecc_next = 0;
      call(nvml.nvmlDeviceGetEccMode, g.handle, &ecc, &ecc_next) == NVML_SUCCESS) {
    g.ecc_current = ecc;
    g.ecc_pending = ecc_next;
    // NVML_MEMORY_ERROR_TYPE_UNCORRECTED (1), NVML_VOLATILE_ECC (0)
    unsigned long long errors = 0;
    if (call(nvml.nvmlDeviceGetTotalEccErrors, g.handle, 1, 0, &errors) == NVML_SUCCESS)
      g.ecc_uncorrected = errors;
  }
  unsigned current = 0, pending = 0;
  if (call(nvml.nvmlDeviceGetMigMode, g.handle, &current, &pending) == NVML_SUCCESS) {
    g.mig_current = current;
    g.mig_pending = pending;
  }
  read_migs(g);
  read_processes(g);
  return g;
}

// The GPUs NVML counts (the CSV's count and -q's Attached GPUs: all of them, whatever -i picks).
unsigned attached() {
  unsigned count = 0;
  return nvml.nvmlDeviceGetCount_v2(&count) == NVML_SUCCESS ? count : 0;
}

// GPUs NVML gives no handle for (a GPU fallen off the bus): one line each on stderr, left out of
// what is printed; the first one's NVML code, to exit with (as NVIDIA's tool does), or 0.
int leave_out_unreachable(std::vector<Gpu>& gpus) {
  int code = 0;
  for (const Gpu& g : gpus) {
    if (g.handle_result == NVML_SUCCESS) continue;
    const char* why = nvml.nvmlErrorString != nullptr ? nvml.nvmlErrorString(g.handle_result) : "";
    std::fprintf(stderr, "Unable to determine the device handle for GPU %u: %s (NVML error %d)\n",
                 g.index, why, g.handle_result);
    if (code == 0) code = g.handle_result;
  }
  std::erase_if(gpus, [](const Gpu& g) { return g.handle_result != NVML_SUCCESS; });
  return code;
}

std::vector<Gpu> read_all() {
  unsigned count = 0;
  if (nvml.nvmlDeviceGetCount_v2(&count) != NVML_SUCCESS) no_driver("nvmlDeviceGetCount_v2 failed");
  std::vector<Gpu> out;
  for (unsigned i = 0; i < count; ++i) out.push_back(read_gpu(i));
  return out;
}

std::string driver_version() {
  char buf[96] = {};
  return call(nvml.nvmlSystemGetDriverVersion, buf, static_cast<unsigned>(sizeof buf)) ==
                 NVML_SUCCESS
             ? std::string(buf)
             : "N/A";
}

std::string cuda_version() {
  int v = 0;
  if (call(nvml.nvmlSystemGetCudaDriverVersion_v2, &v) != NVML_SUCCESS || v <= 0) return "N/A";
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

std::string process_name(unsigned pid) {
  char buf[256] = {};
  if (call(nvml.nvmlSystemGetProcessName, pid, buf, static_cast<unsigned>(sizeof buf)) ==
          NVML_SUCCESS &&
      buf[0] != '\0')
    return buf;
  return "[Not Found]";
}

unsigned long long mib(unsigned long long bytes) {
  return bytes >> 20;
}

// ---- bad input
// -----------------------------------------------------------------------------------

[[noreturn]] void bad_input(const std::string& message) {
  std::fprintf(stderr,
               "nvidia-smi (gpusel simulator): %s. This stand-in answers: -L, the default table, "
               "-q [-d MEMORY|UTILIZATION|ECC|TEMPERATURE|POWER|PCI|COMPUTE], -i ID, "
               "--query-gpu=FIELDS and --query-compute-apps=FIELDS with --format=csv[,noheader]"
               "[,nounits], topo -m, mig -lgi, --version (docs/simulator.md).\n",
               message.c_str());
  std::exit(2);
}

// ---- -L
// ------------------------------------------------------------------------------------------

int smi_list(const std::vector<Gpu>& gpus) {
  for (const Gpu& g : gpus) {
    std::printf("GPU %u: %s (UUID: %s)\n", g.index, g.name.c_str(), g.uuid.c_str());
    for (std::size_t i = 0; i < g.migs.size(); ++i) {
      const Mig& m = g.migs[i];
      // "NVIDIA A100-SXM4-40GB MIG 2g.10gb" -> "MIG 2g.10gb"
      const std::size_t at = m.name.find("MIG ");
      const std::string profile = at == std::string::npos ? m.name : m.name.substr(at);
      std::printf("  %-15s Device %2zu: (UUID: %s)\n", profile.c_str(), i, m.uuid.c_str());
    }
  }
  return 0;
}

// ---- --query-gpu / --query-compute-apps ---------------------------------------------------------

struct Format {
  bool header = true, units = true;
};

Format read_format(const std::string& format) {
  Format f;
  std::size_t start = 0;
  bool csv = false;
  while (start <= format.size()) {
    std::size_t comma = format.find(',', start);
    if (comma == std::string::npos) comma = format.size();
    const std::string part = format.substr(start, comma - start);
    if (part == "csv") {
      csv = true;
    } else if (part == "noheader") {
      f.header = false;
    } else if (part == "nounits") {
      f.units = false;
    } else {
      bad_input("--format: \"" + part + "\" is not csv, noheader or nounits");
    }
    start = comma + 1;
  }
  if (!csv) bad_input("--format must include csv (as in --format=csv,noheader)");
  return f;
}

std::vector<std::string> split_fields(const std::string& fields) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= fields.size()) {
    std::size_t comma = fields.find(',', start);
    if (comma == std::string::npos) comma = fields.size();
    std::string f = fields.substr(start, comma - start);
    f.erase(0, f.find_first_not_of(' '));
    f.erase(f.find_last_not_of(' ') + 1);
    if (!f.empty()) out.push_back(f);
    start = comma + 1;
  }
  return out;
}

// A value with its unit: "81559 MiB", or "81559" under nounits; "[N/A]" when unknown.
struct Value {
  std::optional<std::string> text;
  std::string unit;
};

std::string show(const Value& v, bool units) {
  if (!v.text) return "[N/A]";
  return units && !v.unit.empty() ? *v.text + " " + v.unit : *v.text;
}

template <typename T>
Value num(const std::optional<T>& v, const std::string& unit = "") {
  return {v ? std::optional<std::string>(std::to_string(*v)) : std::nullopt, unit};
}

std::string watts(unsigned mw) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", mw / 1000.0);
  return buf;
}

template <typename T>
Value enabled(const std::optional<T>& v) {
  return {v ? std::optional<std::string>(*v ? "Enabled" : "Disabled") : std::nullopt, ""};
}

Value hex(unsigned value, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%0*X", digits, value);
  return {buf, ""};
}

// NVML's compute modes as the CSV and -q write them.
const char* compute_mode_name(int mode) {
  switch (mode) {
    case 0:
      return "Default";
    case 1:
      return "Exclusive_Thread";
    case 2:
      return "Prohibited";
    case 3:
      return "Exclusive_Process";
    default:
      return "Unknown";
  }
}

using GpuField = std::function<Value(const Gpu&)>;

// Each --query-gpu field: its names (the first is the header's) and the header's unit.
struct FieldDef {
  std::vector<std::string> names;
  std::string header_unit;
  GpuField value;
};

const std::vector<FieldDef>& gpu_fields() {
  static const std::vector<FieldDef> fields = {
      {{"index"}, "", [](const Gpu& g) { return num(std::optional<unsigned>(g.index)); }},
      {{"name", "gpu_name"},
       "",
       [](const Gpu& g) {
         return Value{g.name, ""};
       }},
      {{"uuid", "gpu_uuid"},
       "",
       [](const Gpu& g) {
         return Value{g.uuid, ""};
       }},
      {{"pci.bus_id", "gpu_bus_id"},
       "",
       [](const Gpu& g) {
         return Value{g.bus, ""};
       }},
      {{"driver_version"},
       "",
       [](const Gpu&) {
         return Value{driver_version(), ""};
       }},
      {{"count"},
       "",
       [](const Gpu&) {
         return Value{std::nullopt, ""};
       }},  // filled by the caller
      {{"memory.total"},
       "MiB",
       [](const Gpu& g) {
         return num(g.memory ? std::optional(mib(g.memory->total)) : std::nullopt, "MiB");
       }},
      {{"memory.used"},
       "MiB",
       [](const Gpu& g) {
         return num(g.memory ? std::optional(mib(g.memory->used)) : std::nullopt, "MiB");
       }},
      {{"memory.free"},
       "MiB",
       [](const Gpu& g) {
         return num(g.memory ? std::optional(mib(g.memory->free)) : std::nullopt, "MiB");
       }},
      {{"utilization.gpu"},
       "%",
       [](const Gpu& g) { return num(g.util ? std::optional(g.util->gpu) : std::nullopt, "%"); }},
      {{"utilization.memory"},
       "%",
       [](const Gpu& g) {
         return num(g.util ? std::optional(g.util->memory) : std::nullopt, "%");
       }},
      {{"temperature.gpu"}, "", [](const Gpu& g) { return num(g.temperature); }},
      {{"power.draw"},
       "W",
       [](const Gpu& g) {
         return Value{g.power_mw ? std::optional(watts(*g.power_mw)) : std::nullopt, "W"};
       }},
      {{"power.limit", "enforced.power.limit"},
       "W",
       [](const Gpu& g) {
         return Value{g.limit_mw ? std::optional(watts(*g.limit_mw)) : std::nullopt, "W"};
       }},
      {{"fan.speed"}, "%", [](const Gpu& g) { return num(g.fan, "%"); }},
      {{"pstate"},
       "",
       [](const Gpu& g) {
         return Value{g.pstate ? std::optional("P" + std::to_string(*g.pstate)) : std::nullopt, ""};
       }},
      {{"compute_cap"},
       "",
       [](const Gpu& g) {
         return Value{g.cc_major ? std::optional(std::to_string(*g.cc_major) + "." +
                                                 std::to_string(*g.cc_minor))
                                 : std::nullopt,
                      ""};
       }},
      {{"mig.mode.current"}, "", [](const Gpu& g) { return enabled(g.mig_current); }},
      {{"mig.mode.pending"}, "", [](const Gpu& g) { return enabled(g.mig_pending); }},
      {{"persistence_mode"}, "", [](const Gpu& g) { return enabled(g.persistence); }},
      {{"display_mode"}, "", [](const Gpu& g) { return enabled(g.display_mode); }},
      {{"display_active"}, "", [](const Gpu& g) { return enabled(g.display_active); }},
      {{"ecc.mode.current"}, "", [](const Gpu& g) { return enabled(g.ecc_current); }},
      {{"ecc.mode.pending"}, "", [](const Gpu& g) { return enabled(g.ecc_pending); }},
      {{"compute_mode"},
       "",
       [](const Gpu& g) {
         return Value{g.compute_mode
                          ? std::optional<std::string>(compute_mode_name(*g.compute_mode))
                          : std::nullopt,
                      ""};
       }},
      {{"vbios_version"},
       "",
       [](const Gpu& g) {
         return Value{g.vbios.empty() ? std::nullopt : std::optional(g.vbios), ""};
       }},
      {{"pci.domain"}, "", [](const Gpu& g) { return hex(g.pci.domain, 4); }},
      {{"pci.bus"}, "", [](const Gpu& g) { return hex(g.pci.bus, 2); }},
      {{"pci.device"}, "", [](const Gpu& g) { return hex(g.pci.device, 2); }},
      {{"pci.device_id"}, "", [](const Gpu& g) { return hex(g.pci.pciDeviceId, 8); }},
      {{"pci.sub_device_id"}, "", [](const Gpu& g) { return hex(g.pci.pciSubSystemId, 8); }},
      {{"pcie.link.gen.current"}, "", [](const Gpu& g) { return num(g.link_gen); }},
      {{"pcie.link.width.current"}, "", [](const Gpu& g) { return num(g.link_width); }},
      {{"minor_number"}, "", [](const Gpu& g) { return num(g.minor); }},
  };
  return fields;
}

const FieldDef* find_field(const std::string& name) {
  for (const FieldDef& f : gpu_fields()) {
    if (std::find(f.names.begin(), f.names.end(), name) != f.names.end()) return &f;
  }
  return nullptr;
}

std::string header_of(const std::string& asked, const FieldDef& f) {
  return f.header_unit.empty() ? asked : asked + " [" + f.header_unit + "]";
}

int smi_query(const std::vector<Gpu>& gpus, const std::string& fields, const std::string& format) {
  const Format fmt = read_format(format);
  const std::vector<std::string> names = split_fields(fields);
  if (names.empty()) bad_input("--query-gpu names no field");
  std::vector<const FieldDef*> defs;
  for (const std::string& n : names) {
    const FieldDef* f = find_field(n);
    if (f == nullptr) {
      std::string known;
      for (const FieldDef& d : gpu_fields()) known += (known.empty() ? "" : ", ") + d.names.front();
      bad_input("--query-gpu: \"" + n + "\" is not a field this stand-in knows (it knows " + known +
                ")");
    }
    defs.push_back(f);
  }
  if (fmt.header) {
    for (std::size_t i = 0; i < names.size(); ++i)
      std::printf("%s%s", i ? ", " : "", header_of(names[i], *defs[i]).c_str());
    std::printf("\n");
  }
  for (const Gpu& g : gpus) {
    for (std::size_t i = 0; i < names.size(); ++i) {
      Value v = names[i] == "count" ? Value{std::to_string(attached()), ""} : defs[i]->value(g);
      std::printf("%s%s", i ? ", " : "", show(v, fmt.units).c_str());
    }
    std::printf("\n");
  }
  return 0;
}

int smi_query_apps(const std::vector<Gpu>& gpus, const std::string& fields,
                   const std::string& format) {
  const Format fmt = read_format(format);
  const std::vector<std::string> names = split_fields(fields);
  static const std::map<std::string, std::string> headers = {
      {"pid", "pid"},
      {"process_name", "process_name"},
      {"name", "process_name"},
      {"used_memory", "used_gpu_memory [MiB]"},
      {"used_gpu_memory", "used_gpu_memory [MiB]"},
      {"gpu_uuid", "gpu_uuid"},
      {"gpu_bus_id", "gpu_bus_id"},
      {"gpu_name", "gpu_name"},
  };
  for (const std::string& n : names) {
    if (headers.count(n) == 0)
      bad_input("--query-compute-apps: \"" + n +
                "\" is not a field this stand-in knows (it knows pid, "
                "process_name, used_memory, gpu_uuid, gpu_bus_id, gpu_name)");
  }
  if (names.empty()) bad_input("--query-compute-apps names no field");
  if (fmt.header) {
    for (std::size_t i = 0; i < names.size(); ++i)
      std::printf("%s%s", i ? ", " : "", headers.at(names[i]).c_str());
    std::printf("\n");
  }
  for (const Gpu& g : gpus) {
    for (const Process& p : g.processes) {
      for (std::size_t i = 0; i < names.size(); ++i) {
        const std::string& n = names[i];
        std::string v;
        if (n == "pid") v = std::to_string(p.pid);
        if (n == "process_name" || n == "name") v = process_name(p.pid);
        if (n == "used_memory" || n == "used_gpu_memory")
          v = std::to_string(mib(p.used)) + (fmt.units ? " MiB" : "");
        if (n == "gpu_uuid") v = g.uuid;
        if (n == "gpu_bus_id") v = g.bus;
        if (n == "gpu_name") v = g.name;
        std::printf("%s%s", i ? ", " : "", v.c_str());
      }
      std::printf("\n");
    }
  }
  return 0;
}

// ---- the default table
// ---------------------------------------------------------------------------

std::string na_or(const std::optional<unsigned>& v, const char* suffix) {
  return v ? std::to_string(*v) + suffix : "N/A";
}

// The table's "Volatile Uncorr. ECC": the count with ECC on, Off, or N/A on a board without it.
std::string ecc_column(const Gpu& g) {
  if (!g.ecc_current) return "N/A";
  if (*g.ecc_current == 0) return "Off";
  return g.ecc_uncorrected ? std::to_string(*g.ecc_uncorrected) : "N/A";
}

void table_gpu(const Gpu& g) {
  const std::string persistence = g.persistence ? (*g.persistence ? "On" : "Off") : "N/A";
  const char* display = !g.display_active ? "N/A" : *g.display_active ? "On" : "Off";
  std::string name = g.name.size() > 28 ? g.name.substr(0, 25) + "..." : g.name;
  std::printf("| %3u  %-28s %4s  | %18s %3s | %20s |\n", g.index, name.c_str(), persistence.c_str(),
              g.bus.c_str(), display, ecc_column(g).c_str());
  const std::string fan = g.fan ? std::to_string(*g.fan) + "%" : "N/A";
  const std::string temp = na_or(g.temperature, "C");
  const std::string perf = g.pstate ? "P" + std::to_string(*g.pstate) : "N/A";
  const std::string power = g.power_mw ? std::to_string(*g.power_mw / 1000) + "W" : "N/A";
  const std::string cap = g.limit_mw ? std::to_string(*g.limit_mw / 1000) + "W" : "N/A";
  const std::string used = g.memory ? std::to_string(mib(g.memory->used)) + "MiB" : "N/A";
  const std::string total = g.memory ? std::to_string(mib(g.memory->total)) + "MiB" : "N/A";
  const std::string util = g.util ? std::to_string(g.util->gpu) + "%" : "N/A";
  const char* mode = !g.compute_mode        ? "N/A"
                     : *g.compute_mode == 3 ? "E. Process"
                     : *g.compute_mode == 2 ? "Prohibited"
                                            : "Default";
  std::printf("| %4s %5s %4s %15s / %5s | %10s / %9s | %7s %12s |\n", fan.c_str(), temp.c_str(),
              perf.c_str(), power.c_str(), cap.c_str(), used.c_str(), total.c_str(), util.c_str(),
              mode);
  const char* mig = !g.mig_current ? "N/A" : *g.mig_current ? "Enabled" : "Disabled";
  std::printf("|                                         |                        | %20s |\n", mig);
  std::printf(
      "+-----------------------------------------+------------------------+----------------------+"
      "\n");
}

// The MIG devices of GPUs in MIG mode, as the summary table shows them under the GPUs.
void table_migs(const std::vector<Gpu>& gpus) {
  if (std::all_of(gpus.begin(), gpus.end(), [](const Gpu& g) { return g.migs.empty(); })) return;
  const char* rule =
      "+------------------+----------------------------------+-----------+-----------------------+"
      "\n";
  std::printf(
      "\n+-----------------------------------------------------------------------------------------"
      "+\n");
  std::printf(
      "| MIG devices:                                                                            "
      "|\n");
  std::printf("%s", rule);
  std::printf(
      "| GPU  GI  CI  MIG |                     Memory-Usage |        Vol|        Shared         "
      "|\n");
  std::printf(
      "|      ID  ID  Dev |                       BAR1-Usage | SM     Unc| CE ENC  DEC  OFA  JPG "
      "|\n");
  std::printf(
      "|                  |                                  |        ECC|                       "
      "|\n");
  std::printf(
      "|==================+==================================+===========+=======================|"
      "\n");
  auto usage = [](bool known, unsigned long long used, unsigned long long total) {
    return known ? std::make_pair(std::to_string(mib(used)) + "MiB",
                                  std::to_string(mib(total)) + "MiB")
                 : std::make_pair(std::string("N/A"), std::string("N/A"));
  };
  for (const Gpu& g : gpus) {
    for (std::size_t i = 0; i < g.migs.size(); ++i) {
      const Mig& m = g.migs[i];
      const auto [used, total] = usage(m.memory.has_value(), m.memory ? m.memory->used : 0,
                                       m.memory ? m.memory->total : 0);
      const auto [bar1_used, bar1_total] =
          usage(m.bar1.has_value(), m.bar1 ? m.bar1->used : 0, m.bar1 ? m.bar1->total : 0);
      const std::string ecc = ecc_column(g);
      std::printf("| %2u %4u %3u %3zu  | %18s / %-12s|", g.index, m.gi, m.ci, i, used.c_str(),
                  total.c_str());
      if (m.attributes) {
        const DeviceAttributes& a = *m.attributes;
        std::printf("%3u %6s | %2u %3u %4u %4u %4u |\n", a.multiprocessors, ecc.c_str(),
                    a.copy_engines, a.encoders, a.decoders, a.ofas, a.jpegs);
      } else {
        std::printf("N/A %6s |                   N/A |\n", ecc.c_str());
      }
      std::printf("|                  | %20s / %-10s|           |                       |\n",
                  bar1_used.c_str(), bar1_total.c_str());
      std::printf("%s", rule);
    }
  }
}

void table_processes(const std::vector<Gpu>& gpus) {
  std::printf(
      "\n+-----------------------------------------------------------------------------------------"
      "+\n");
  std::printf(
      "| Processes:                                                                              "
      "|\n");
  std::printf(
      "|  GPU   GI   CI              PID   Type   Process name                        GPU Memory "
      "|\n");
  std::printf(
      "|        ID   ID                                                               Usage      "
      "|\n");
  std::printf(
      "|=========================================================================================|"
      "\n");
  bool any = false;
  for (const Gpu& g : gpus) {
    for (const Process& p : g.processes) {
      any = true;
      std::string name = process_name(p.pid);
      if (name.size() > 34) name = "..." + name.substr(name.size() - 31);
      const std::string gi = p.gi ? std::to_string(*p.gi) : "N/A";
      const std::string ci = p.ci ? std::to_string(*p.ci) : "N/A";
      const std::string used = std::to_string(mib(p.used)) + "MiB";
      std::printf("|  %3u  %4s %4s %12u      C   %-34s %10s |\n", g.index, gi.c_str(), ci.c_str(),
                  p.pid, name.c_str(), used.c_str());
    }
  }
  if (!any)
    std::printf(
        "|  No running processes found                                                             "
        "|\n");
  std::printf(
      "+-----------------------------------------------------------------------------------------+"
      "\n");
}

int smi_table(const std::vector<Gpu>& gpus) {
  const std::time_t now = std::time(nullptr);
  char when[64];
  std::strftime(when, sizeof when, "%a %b %e %H:%M:%S %Y", std::localtime(&now));
  std::printf("%s       \n", when);
  std::printf(
      "+-----------------------------------------------------------------------------------------+"
      "\n");
  const std::string version = driver_version();
  std::printf("| NVIDIA-SMI %-22s Driver Version: %-14s CUDA Version: %-9s|\n", version.c_str(),
              version.c_str(), cuda_version().c_str());
  std::printf(
      "|-----------------------------------------+------------------------+----------------------+"
      "\n");
  std::printf(
      "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC "
      "|\n");
  std::printf(
      "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. "
      "|\n");
  std::printf(
      "|                                         |                        |               MIG M. "
      "|\n");
  std::printf(
      "|=========================================+========================+======================|"
      "\n");
  for (const Gpu& g : gpus) table_gpu(g);
  table_migs(gpus);
  table_processes(gpus);
  return 0;
}

// ---- -q
// ------------------------------------------------------------------------------------------

void line(int depth, const std::string& key, const std::string& value) {
  std::string k = std::string(static_cast<std::size_t>(depth) * 4, ' ') + key;
  if (k.size() < 44) k.resize(44, ' ');
  std::printf("%s: %s\n", k.c_str(), value.c_str());
}
void heading(int depth, const std::string& key) {
  std::printf("%s%s\n", std::string(static_cast<std::size_t>(depth) * 4, ' ').c_str(), key.c_str());
}

std::string mem_text(unsigned long long bytes) {
  return std::to_string(mib(bytes)) + " MiB";
}

const char* on_off(const std::optional<int>& v) {
  return !v ? "N/A" : *v ? "Enabled" : "Disabled";
}

void usage_lines(int depth, const char* title, bool known, unsigned long long total,
                 unsigned long long used, unsigned long long free) {
  heading(depth, title);
  line(depth + 1, "Total", known ? mem_text(total) : "N/A");
  line(depth + 1, "Used", known ? mem_text(used) : "N/A");
  line(depth + 1, "Free", known ? mem_text(free) : "N/A");
}

// -q's "MIG Devices": each one's ids, shared engines and memory.
void details_migs(const Gpu& g) {
  if (g.migs.empty()) {
    line(1, "MIG Devices", "None");
    return;
  }
  heading(1, "MIG Devices");
  for (std::size_t i = 0; i < g.migs.size(); ++i) {
    const Mig& m = g.migs[i];
    heading(2, "MIG Device");
    line(3, "Index", std::to_string(i));
    line(3, "GPU Instance ID", std::to_string(m.gi));
    line(3, "Compute Instance ID", std::to_string(m.ci));
    line(3, "MIG Device UUID", m.uuid);
    if (m.attributes) {
      heading(3, "Device Attributes");
      heading(4, "Shared");
      line(5, "Multiprocessor count", std::to_string(m.attributes->multiprocessors));
      line(5, "Copy Engine count", std::to_string(m.attributes->copy_engines));
      line(5, "Encoder count", std::to_string(m.attributes->encoders));
      line(5, "Decoder count", std::to_string(m.attributes->decoders));
      line(5, "OFA count", std::to_string(m.attributes->ofas));
      line(5, "JPG count", std::to_string(m.attributes->jpegs));
    }
    const nvmlMemory_t mem = m.memory.value_or(nvmlMemory_t{});
    usage_lines(3, "FB Memory Usage", m.memory.has_value(), mem.total, mem.used, mem.free);
    const Bar1Memory bar1 = m.bar1.value_or(Bar1Memory{});
    usage_lines(3, "BAR1 Memory Usage", m.bar1.has_value(), bar1.total, bar1.used, bar1.free);
  }
}

void details_identity(const Gpu& g) {
  line(1, "Product Name", g.name);
  line(1, "Display Mode", on_off(g.display_mode));
  line(1, "Display Active", on_off(g.display_active));
  line(1, "Persistence Mode", g.persistence ? (*g.persistence ? "Enabled" : "Disabled") : "N/A");
  heading(1, "MIG Mode");
  line(2, "Current", g.mig_current ? (*g.mig_current ? "Enabled" : "Disabled") : "N/A");
  line(2, "Pending", g.mig_pending ? (*g.mig_pending ? "Enabled" : "Disabled") : "N/A");
  details_migs(g);
  line(1, "GPU UUID", g.uuid);
  line(1, "Minor Number", g.minor ? std::to_string(*g.minor) : "N/A");
  line(1, "VBIOS Version", g.vbios.empty() ? "N/A" : g.vbios);
}

void details_pci(const Gpu& g) {
  heading(1, "PCI");
  line(2, "Bus", *hex(g.pci.bus, 2).text);
  line(2, "Device", *hex(g.pci.device, 2).text);
  line(2, "Domain", *hex(g.pci.domain, 4).text);
  line(2, "Device Id", *hex(g.pci.pciDeviceId, 8).text);
  line(2, "Bus Id", g.bus);
  line(2, "Sub System Id", *hex(g.pci.pciSubSystemId, 8).text);
  heading(2, "GPU Link Info");
  heading(3, "PCIe Generation");
  line(4, "Current", na_or(g.link_gen, ""));
  heading(3, "Link Width");
  line(4, "Current", g.link_width ? std::to_string(*g.link_width) + "x" : "N/A");
}

void details_processes(const Gpu& g) {
  if (g.processes.empty()) {
    line(1, "Processes", "None");
    return;
  }
  heading(1, "Processes");
  for (const Process& p : g.processes) {
    line(2, "GPU instance ID", p.gi ? std::to_string(*p.gi) : "N/A");
    line(2, "Compute instance ID", p.ci ? std::to_string(*p.ci) : "N/A");
    line(2, "Process ID", std::to_string(p.pid));
    line(3, "Type", "C");
    line(3, "Name", process_name(p.pid));
    line(3, "Used GPU Memory", mem_text(p.used));
  }
}

void details_gpu(const Gpu& g, const std::vector<std::string>& wanted) {
  auto want = [&](const char* s) {
    return wanted.empty() || std::find(wanted.begin(), wanted.end(), s) != wanted.end();
  };
  std::printf("\nGPU %s\n", g.bus.c_str());
  if (wanted.empty()) details_identity(g);
  if (want("PCI")) details_pci(g);
  if (want("MEMORY")) {
    const nvmlMemory_t mem = g.memory.value_or(nvmlMemory_t{});
    usage_lines(1, "FB Memory Usage", g.memory.has_value(), mem.total, mem.used, mem.free);
    const Bar1Memory bar1 = g.bar1.value_or(Bar1Memory{});
    usage_lines(1, "BAR1 Memory Usage", g.bar1.has_value(), bar1.total, bar1.used, bar1.free);
  }
  if (want("COMPUTE"))
    line(1, "Compute Mode", g.compute_mode ? compute_mode_name(*g.compute_mode) : "N/A");
  if (want("UTILIZATION")) {
    heading(1, "Utilization");
    line(2, "Gpu", g.util ? std::to_string(g.util->gpu) + " %" : "N/A");
    line(2, "Memory", g.util ? std::to_string(g.util->memory) + " %" : "N/A");
  }
  if (want("ECC")) {
    heading(1, "ECC Mode");
    line(2, "Current", on_off(g.ecc_current));
    line(2, "Pending", on_off(g.ecc_pending));
    heading(1, "ECC Errors");
    heading(2, "Volatile");
    line(3, "DRAM Uncorrectable", g.ecc_uncorrected ? std::to_string(*g.ecc_uncorrected) : "N/A");
  }
  if (want("TEMPERATURE")) {
    heading(1, "Temperature");
    line(2, "GPU Current Temp", na_or(g.temperature, " C"));
  }
  if (want("POWER")) {
    heading(1, "GPU Power Readings");
    line(2, "Power Draw", g.power_mw ? watts(*g.power_mw) + " W" : "N/A");
    line(2, "Current Power Limit", g.limit_mw ? watts(*g.limit_mw) + " W" : "N/A");
  }
  if (wanted.empty()) details_processes(g);
}

int smi_details(const std::vector<Gpu>& gpus, const std::string& sections) {
  std::vector<std::string> wanted;
  for (std::string s : split_fields(sections)) {
    for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    static const std::vector<std::string> known = {"MEMORY", "UTILIZATION", "ECC",    "TEMPERATURE",
                                                   "POWER",  "PCI",         "COMPUTE"};
    if (std::find(known.begin(), known.end(), s) == known.end())
      bad_input("-d " + s +
                ": this stand-in shows MEMORY, UTILIZATION, ECC, TEMPERATURE, POWER, PCI "
                "and COMPUTE");
    wanted.push_back(s);
  }
  const std::time_t now = std::time(nullptr);
  char when[64];
  std::strftime(when, sizeof when, "%a %b %e %H:%M:%S %Y", std::localtime(&now));
  std::printf("\n==============NVSMI LOG==============\n\n");
  line(0, "Timestamp", when);
  line(0, "Driver Version", driver_version());
  line(0, "CUDA Version", cuda_version());
  std::printf("\n");
  line(0, "Attached GPUs", std::to_string(attached()));
  for (const Gpu& g : gpus) details_gpu(g, wanted);
  std::printf("\n");
  return 0;
}

// ---- topo -m
// -------------------------------------------------------------------------------------

constexpr unsigned kNvLinkMax = 18;  // NVML_NVLINK_MAX_LINKS

// "0-55,112-167": the set bits of NVML's affinity words.
std::string ranges(const std::vector<unsigned long>& words) {
  std::vector<unsigned> bits;
  for (std::size_t w = 0; w < words.size(); ++w) {
    for (unsigned b = 0; b < 8 * sizeof(unsigned long); ++b) {
      if ((words[w] >> b) & 1ul)
        bits.push_back(static_cast<unsigned>(w * 8 * sizeof(unsigned long) + b));
    }
  }
  std::string out;
  for (std::size_t i = 0; i < bits.size();) {
    std::size_t j = i;
    while (j + 1 < bits.size() && bits[j + 1] == bits[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(bits[i]) +
           (j > i ? "-" + std::to_string(bits[j]) : "");
    i = j + 1;
  }
  return out.empty() ? "N/A" : out;
}

// NVLinks of `g` that end at `peer`'s bus (`peer` null: those that end at no GPU of `gpus`, an
// NVSwitch's).
unsigned nvlinks(const Gpu& g, const Gpu* peer, const std::vector<Gpu>& gpus) {
  unsigned links = 0;
  for (unsigned l = 0; l < kNvLinkMax; ++l) {
    int active = 0;
    nvmlPciInfo_t remote{};
    if (call(nvml.nvmlDeviceGetNvLinkState, g.handle, l, &active) != NVML_SUCCESS || active == 0 ||
        call(nvml.nvmlDeviceGetNvLinkRemotePciInfo_v2, g.handle, l, &remote) != NVML_SUCCESS)
      continue;
    const std::string bus = remote.busId;
    if (peer != nullptr
            ? bus == peer->bus
            : std::none_of(gpus.begin(), gpus.end(), [&](const Gpu& o) { return o.bus == bus; }))
      ++links;
  }
  return links;
}

// The matrix's entry for a and b: NV# over direct NVLinks, or over NVSwitches both reach (as
// NVIDIA's tool shows an NVSwitch system: the links each GPU has), else where their PCIe paths
// meet.
std::string link_between(const Gpu& a, const Gpu& b, const std::vector<Gpu>& gpus) {
  unsigned links = nvlinks(a, &b, gpus);
  if (links == 0) links = std::min(nvlinks(a, nullptr, gpus), nvlinks(b, nullptr, gpus));
  if (links > 0) return "NV" + std::to_string(links);
  int level = 0;
  if (call(nvml.nvmlDeviceGetTopologyCommonAncestor, a.handle, b.handle, &level) != NVML_SUCCESS)
    return "N/A";
  switch (level) {
    case 10:
      return "PIX";
    case 20:
      return "PXB";
    case 30:
      return "PHB";
    case 40:
      return "NODE";
    case 50:
      return "SYS";
    default:
      return "X";
  }
}

int smi_topology(const std::vector<Gpu>& gpus) {
  std::printf("\t");
  for (const Gpu& g : gpus) std::printf("GPU%u\t", g.index);
  std::printf("CPU Affinity\tNUMA Affinity\tGPU NUMA ID\n");
  for (const Gpu& a : gpus) {
    std::printf("GPU%u\t", a.index);
    for (const Gpu& b : gpus)
      std::printf("%s\t", &a == &b ? " X " : link_between(a, b, gpus).c_str());
    std::vector<unsigned long> cpus(16), nodes(4);
    const std::string cpu =
        call(nvml.nvmlDeviceGetCpuAffinity, a.handle, 16u, cpus.data()) == NVML_SUCCESS
            ? ranges(cpus)
            : "N/A";
    const std::string node =
        call(nvml.nvmlDeviceGetMemoryAffinity, a.handle, 4u, nodes.data(), 0u) == NVML_SUCCESS
            ? ranges(nodes)
            : "N/A";
    std::printf("%s\t%s\t\tN/A\n", cpu.c_str(), node.c_str());
  }
  std::printf("\nLegend:\n\n");
  std::printf("  X    = Self\n");
  std::printf(
      "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes "
      "(e.g., QPI/UPI)\n");
  std::printf(
      "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges "
      "within a NUMA node\n");
  std::printf(
      "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n");
  std::printf(
      "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host "
      "Bridge)\n");
  std::printf("  PIX  = Connection traversing at most a single PCIe bridge\n");
  std::printf("  NV#  = Connection traversing a bonded set of # NVLinks\n");
  return 0;
}

// ---- mig -lgi
// ------------------------------------------------------------------------------------

// The GPU-instance profile of a MIG device's name ("MIG 2g.10gb"): NVIDIA's profile id and the
// memory slices it takes (A100/H100 numbering).
std::pair<unsigned, unsigned> profile_of(const std::string& name) {
  const std::size_t at = name.find("MIG ");
  const char slices = at == std::string::npos || at + 4 >= name.size() ? '?' : name[at + 4];
  switch (slices) {
    case '1':
      return {19, 1};
    case '2':
      return {14, 2};
    case '3':
      return {9, 4};
    case '4':
      return {5, 4};
    case '7':
      return {0, 8};
    default:
      return {0, 0};
  }
}

int smi_mig_instances(const std::vector<Gpu>& gpus) {
  bool any = false;
  for (const Gpu& g : gpus) any = any || !g.migs.empty();
  if (!any) {
    std::printf("No MIG-enabled devices found.\n");
    return 6;
  }
  std::printf("+-------------------------------------------------------+\n");
  std::printf("| GPU instances:                                        |\n");
  std::printf("| GPU   Name             Profile  Instance   Placement  |\n");
  std::printf("|                          ID       ID       Start:Size |\n");
  std::printf("|=======================================================|\n");
  for (const Gpu& g : gpus) {
    std::vector<unsigned> seen;
    unsigned start = 0;
    for (const Mig& m : g.migs) {
      if (std::find(seen.begin(), seen.end(), m.gi) != seen.end()) continue;
      seen.push_back(m.gi);
      const std::size_t at = m.name.find("MIG ");
      const std::string profile = at == std::string::npos ? m.name : m.name.substr(at);
      const auto [id, size] = profile_of(m.name);
      const std::string placement = std::to_string(start) + ":" + std::to_string(size);
      start += size;
      std::printf("|  %2u  %-16s %6u  %8u  %10s    |\n", g.index, profile.c_str(), id, m.gi,
                  placement.c_str());
    }
  }
  std::printf("+-------------------------------------------------------+\n");
  return 0;
}

// ---- the command line
// ----------------------------------------------------------------------------

int smi_version() {
  char nvml_version[96] = "N/A";
  call(nvml.nvmlSystemGetNVMLVersion, nvml_version, static_cast<unsigned>(sizeof nvml_version));
  const std::string driver = driver_version();
  std::printf("NVIDIA-SMI version  : %s\n", driver.c_str());
  std::printf("NVML version        : %s\n", nvml_version);
  std::printf("DRIVER version      : %s\n", driver.c_str());
  std::printf("CUDA Version        : %s\n", cuda_version().c_str());
  return 0;
}

void usage() {
  std::printf(
      "nvidia-smi, as gpusel's simulator answers it (docs/simulator.md): the simulated machine's\n"
      "GPUs, read through NVML. Forms:\n"
      "  nvidia-smi                         the summary table\n"
      "  nvidia-smi -L                      one line per GPU and MIG device\n"
      "  nvidia-smi -q [-d SECTION,...]     details (MEMORY, UTILIZATION, ECC, TEMPERATURE,\n"
      "                                     POWER, PCI, COMPUTE)\n"
      "  nvidia-smi --query-gpu=FIELDS --format=csv[,noheader][,nounits]\n"
      "  nvidia-smi --query-compute-apps=FIELDS --format=csv[,noheader][,nounits]\n"
      "  nvidia-smi topo -m                 the connection matrix\n"
      "  nvidia-smi mig -lgi                GPU instances\n"
      "  nvidia-smi --version\n"
      "-i ID (an index, a UUID or a PCI bus id; several with commas) limits any form to those "
      "GPUs.\n");
}

// The GPUs `-i` names (all when empty).
std::vector<Gpu> select(std::vector<Gpu> gpus, const std::string& ids) {
  if (ids.empty()) return gpus;
  std::vector<Gpu> out;
  for (const std::string& id : split_fields(ids)) {
    auto it = std::find_if(gpus.begin(), gpus.end(), [&](const Gpu& g) {
      if (id.find_first_not_of("0123456789") == std::string::npos)
        return std::to_string(g.index) == id;
      if (id.rfind("GPU-", 0) == 0) return g.uuid.rfind(id, 0) == 0;
      std::string bus = g.bus;
      return bus == id ||
             (bus.size() >= id.size() && bus.compare(bus.size() - id.size(), id.size(), id) == 0);
    });
    if (it == gpus.end()) {
      std::fprintf(stderr,
                   "No devices were found matching -i %s (the machine has %zu GPUs, "
                   "indices 0 to %zu)\n",
                   id.c_str(), gpus.size(), gpus.size() - 1);
      std::exit(6);
    }
    out.push_back(*it);
  }
  return out;
}

struct Args {
  std::string form = "table", fields, format, display, ids;
};

// "--name=value" or "--name value" (and the short "-x value"): the value, advancing `i`.
std::optional<std::string> value_of(int argc, char** argv, int& i, const char* long_name,
                                    const char* short_name) {
  const std::string a = argv[i];
  const std::string prefix = std::string(long_name) + "=";
  if (a.rfind(prefix, 0) == 0) return a.substr(prefix.size());
  if (a == long_name || (short_name != nullptr && a == short_name)) {
    if (i + 1 >= argc) bad_input(a + " needs a value");
    return std::string(argv[++i]);
  }
  return std::nullopt;
}

Args read_args(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    std::optional<std::string> v;
    if (a == "-L" || a == "--list-gpus") {
      args.form = "list";
    } else if (a == "-q" || a == "--query") {
      args.form = "details";
    } else if (a == "-h" || a == "--help") {
      args.form = "help";
    } else if (a == "--version") {
      args.form = "version";
    } else if (a == "topo" && i + 1 < argc &&
               (std::string(argv[i + 1]) == "-m" || std::string(argv[i + 1]) == "--matrix")) {
      args.form = "topo";
      ++i;
    } else if (a == "mig" && i + 1 < argc &&
               (std::string(argv[i + 1]) == "-lgi" ||
                std::string(argv[i + 1]) == "--list-gpu-instances")) {
      args.form = "mig";
      ++i;
    } else if ((v = value_of(argc, argv, i, "--query-gpu", nullptr))) {
      args.form = "query-gpu";
      args.fields = *v;
    } else if ((v = value_of(argc, argv, i, "--query-compute-apps", nullptr))) {
      args.form = "query-apps";
      args.fields = *v;
    } else if ((v = value_of(argc, argv, i, "--format", nullptr))) {
      args.format = *v;
    } else if ((v = value_of(argc, argv, i, "--display", "-d"))) {
      args.display = *v;
    } else if ((v = value_of(argc, argv, i, "--id", "-i"))) {
      args.ids = *v;
    } else {
      bad_input("\"" + a + "\" is not an option this stand-in knows");
    }
  }
  if ((args.form == "query-gpu" || args.form == "query-apps") && args.format.empty())
    bad_input("--query-gpu and --query-compute-apps need --format=csv");
  if (!args.display.empty() && args.form != "details") bad_input("-d goes with -q");
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = read_args(argc, argv);
  if (args.form == "help") {
    usage();
    return 0;
  }
  load_nvml();
  if (args.form == "version") return smi_version();
  std::vector<Gpu> gpus = select(read_all(), args.ids);
  const int unreachable = leave_out_unreachable(gpus);
  int rc = 0;
  if (args.form == "list") {
    rc = smi_list(gpus);
  } else if (args.form == "query-gpu") {
    rc = smi_query(gpus, args.fields, args.format);
  } else if (args.form == "query-apps") {
    rc = smi_query_apps(gpus, args.fields, args.format);
  } else if (args.form == "details") {
    rc = smi_details(gpus, args.display);
  } else if (args.form == "topo") {
    rc = smi_topology(gpus);
  } else if (args.form == "mig") {
    rc = smi_mig_instances(gpus);
  } else {
    rc = smi_table(gpus);
  }
  return rc != 0 ? rc : unreachable;
}
