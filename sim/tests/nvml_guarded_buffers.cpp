// Every NVML getter of the simulated libnvidia-ml.so.1 writes inside the caller's output buffers.
//
// Each output argument of each call is a buffer of exactly its documented size (nvml.h's type; the
// simulator's copies of nvml.h's structs are held against nvml.h by abi.sim_nvml_header), placed
// at the very end of a page whose next page is PROT_NONE, so a write past the end kills the call
// with SIGSEGV; the page before is PROT_NONE too, and the bytes of the page in front of the buffer
// hold a canary that must survive, so a write before the start is caught as well. Each call runs
// in a child process of its own, so the one that overran is named. String getters get exactly the
// length their answer needs (it must fit, NUL included) and then one byte less (it must answer
// NVML_ERROR_INSUFFICIENT_SIZE; nvmlSystemGetProcessName truncates instead); list getters get
// arrays of exactly the count they answered.
//
// The exports come from sim/nvml_exports.inc, the list the library is built from: each must be
// called here or listed in kNoOutput with the reason, and each getter must succeed at least once
// (or be listed in kNeverSucceeds with the reason), so that no check is vacuous.
//
// Usage: nvml_guarded_buffers SIM_DIR   (the folder holding the simulated libnvidia-ml.so.1)
#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "nvml_abi.hpp"
#include "nvml_sim_types.hpp"

namespace {

// Every function the simulator exports with parameters, as it is built.
#define SIM_NVML(name, params, args) #name,
#define SIM_NVML_V2(name, params, args) #name,
const char* const kExports[] = {
#include "nvml_exports.inc"
    "nvmlErrorString"};
#undef SIM_NVML
#undef SIM_NVML_V2

// Exports that write through no output pointer.
const std::map<std::string, std::string> kNoOutput = {
    {"nvmlInit", "takes no arguments"},
    {"nvmlInit_v2", "takes no arguments"},
    {"nvmlShutdown", "takes no arguments"},
    {"nvmlInitWithFlags", "takes flags by value only"},
    {"nvmlErrorString", "takes a code by value and returns a static string"},
};

// Getters that answer an error on every simulated machine, so their buffers are never written.
const std::map<std::string, std::string> kNeverSucceeds = {
    {"nvmlDeviceGetAccountingStats", "accounting is off: NVML_ERROR_NOT_FOUND for every pid"},
    {"nvmlDeviceGetNumaNodeId",
     "NVML_ERROR_NOT_SUPPORTED: no simulated GPU's memory is a NUMA node of its own"},
};

constexpr unsigned char kCanary = 0xA5;
constexpr int kUnderrun = 250;    // a child's exit status: a canary before a buffer was overwritten
constexpr int kRuleBroken = 251;  // a child's exit status: a documented rule broken (it says which)

const std::size_t kPage = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));

// The output buffers of one call: each ends where a PROT_NONE page begins.
class Arena {
 public:
  template <typename T>
  T* out(std::size_t count = 1) {
    return static_cast<T*>(bytes(sizeof(T) * count));
  }
  void* bytes(std::size_t n) {
    void* map = mmap(nullptr, 3 * kPage, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED || n > kPage) std::abort();
    auto* page = static_cast<unsigned char*>(map) + kPage;
    if (mprotect(page, kPage, PROT_READ | PROT_WRITE) != 0) std::abort();
    std::memset(page, kCanary, kPage);
    regions_.push_back({page, kPage - n});
    return page + kPage - n;
  }
  // Whether every byte in front of every buffer is still the canary.
  bool intact() const {
    for (const Region& r : regions_)
      for (std::size_t i = 0; i < r.offset; ++i)
        if (r.page[i] != kCanary) return false;
    return true;
  }

 private:
  struct Region {
    unsigned char* page;
    std::size_t offset;
  };
  std::vector<Region> regions_;
};

[[noreturn]] void broken(const std::string& what) {
  std::fprintf(stderr, "    %s\n", what.c_str());
  std::fflush(stderr);
  _exit(kRuleBroken);
}

// What a call is made on.
struct Target {
  void* lib;
  nvmlDevice_t device;  // a GPU or a MIG device
  nvmlDevice_t other;   // another GPU (the same when alone)
  unsigned index;       // the GPU's index
  std::string uuid, bus_id;
  std::string what;  // for messages
};

using Call = std::function<int(const Target&, Arena&)>;

template <typename F>
F symbol(const Target& t, const char* name) {
  void* p = dlsym(t.lib, name);
  if (p == nullptr) broken(std::string(name) + ": not exported");
  return reinterpret_cast<F>(p);
}

// A string getter, given f(buffer, length): the exact length fits, one byte less does not.
int text(std::function<int(char*, unsigned)> f, bool truncates, Arena& a) {
  constexpr unsigned kBig = 256;
  char* big = a.out<char>(kBig);
  const int rc = f(big, kBig);
  if (rc != NVML_SUCCESS) return rc;
  const std::size_t n = strnlen(big, kBig);
  if (n == 0 || n == kBig) broken("answered an empty or unterminated string in 256 bytes");
  const auto need = static_cast<unsigned>(n + 1);
  char* exact = a.out<char>(need);
  if (f(exact, need) != NVML_SUCCESS) broken("failed with exactly the length its answer needs");
  if (exact[n] != '\0' || std::strcmp(exact, big) != 0)
    broken("answered differently in the exact length");
  char* small = a.out<char>(need - 1);
  const int short_rc = f(small, need - 1);
  if (truncates) {
    if (short_rc != NVML_SUCCESS || small[n - 1] != '\0' || std::strncmp(small, big, n - 1) != 0)
      broken("did not truncate to one byte less, NUL-terminated");
  } else if (short_rc != NVML_ERROR_INSUFFICIENT_SIZE) {
    broken("answered " + std::to_string(short_rc) +
           ", not NVML_ERROR_INSUFFICIENT_SIZE, one byte short");
  }
  return rc;
}

// A list getter, given f(count, array): asked for its count with none, then given exactly that
// many entries, then (when it has any) one fewer.
template <typename T>
int list(std::function<int(unsigned*, T*)> f, bool short_fails, Arena& a) {
  unsigned* count = a.out<unsigned>();
  *count = 0;
  int rc = f(count, nullptr);
  if (rc != NVML_SUCCESS && rc != NVML_ERROR_INSUFFICIENT_SIZE) return rc;
  const unsigned need = *count;
  T* exact = a.out<T>(need);
  rc = f(count, exact);
  if (rc != NVML_SUCCESS || *count != need) broken("failed with exactly the count it answered");
  if (need > 0 && short_fails) {
    T* fewer = a.out<T>(need - 1);
    *count = need - 1;
    if (f(count, fewer) != NVML_ERROR_INSUFFICIENT_SIZE || *count != need)
      broken("one entry short, did not answer NVML_ERROR_INSUFFICIENT_SIZE and the count");
  }
  return rc;
}

struct Table {
  std::map<std::string, std::vector<Call>> calls;

  void add(const char* name, Call c) { calls[name].push_back(std::move(c)); }
  // (device, T*)
  template <typename T>
  void one(const char* name) {
    add(name, [name](const Target& t, Arena& a) {
      return symbol<nvmlReturn_t (*)(nvmlDevice_t, T*)>(t, name)(t.device, a.out<T>());
    });
  }
  // (device, A, T*), once for each argument.
  template <typename A, typename T>
  void with(const char* name, std::vector<A> args) {
    for (A arg : args)
      add(name, [name, arg](const Target& t, Arena& a) {
        return symbol<nvmlReturn_t (*)(nvmlDevice_t, A, T*)>(t, name)(t.device, arg, a.out<T>());
      });
  }
  // (device, T*, U*)
  template <typename T, typename U>
  void two(const char* name) {
    add(name, [name](const Target& t, Arena& a) {
      return symbol<nvmlReturn_t (*)(nvmlDevice_t, T*, U*)>(t, name)(t.device, a.out<T>(),
                                                                     a.out<U>());
    });
  }
  // (device, unsigned* count, T* array)
  template <typename T>
  void processes(const char* name, bool short_fails = true) {
    add(name, [name, short_fails](const Target& t, Arena& a) {
      auto f = symbol<nvmlReturn_t (*)(nvmlDevice_t, unsigned*, T*)>(t, name);
      return list<T>([&](unsigned* n, T* array) { return f(t.device, n, array); }, short_fails, a);
    });
  }
};

void add_scalars(Table& t) {
  for (const char* name : {"nvmlDeviceGetArchitecture",
                           "nvmlDeviceGetNumGpuCores",
                           "nvmlDeviceGetMemoryBusWidth",
                           "nvmlDeviceGetIndex",
                           "nvmlDeviceGetMinorNumber",
                           "nvmlDeviceGetNumaNodeId",
                           "nvmlDeviceGetPersistenceMode",
                           "nvmlDeviceGetMaxMigDeviceCount",
                           "nvmlDeviceIsMigDeviceHandle",
                           "nvmlDeviceGetGpuInstanceId",
                           "nvmlDeviceGetComputeInstanceId",
                           "nvmlDeviceGetCurrPcieLinkGeneration",
                           "nvmlDeviceGetCurrPcieLinkWidth",
                           "nvmlDeviceGetMaxPcieLinkGeneration",
                           "nvmlDeviceGetMaxPcieLinkWidth",
                           "nvmlDeviceGetPowerUsage",
                           "nvmlDeviceGetPowerManagementLimit",
                           "nvmlDeviceGetPowerManagementDefaultLimit",
                           "nvmlDeviceGetEnforcedPowerLimit",
                           "nvmlDeviceGetFanSpeed",
                           "nvmlDeviceGetNumFans",
                           "nvmlDeviceGetPcieReplayCounter",
                           "nvmlDeviceGetInforomConfigurationChecksum",
                           "nvmlDeviceGetBoardId",
                           "nvmlDeviceGetMultiGpuBoard",
                           "nvmlDeviceGetAccountingBufferSize",
                           "nvmlDeviceGetPcieLinkMaxSpeed",
                           "nvmlDeviceGetPcieSpeed"})
    t.one<unsigned>(name);
  for (const char* name :
       {"nvmlDeviceGetBrand", "nvmlDeviceGetPerformanceState", "nvmlDeviceGetPowerState",
        "nvmlDeviceGetDisplayActive", "nvmlDeviceGetDisplayMode", "nvmlDeviceGetComputeMode",
        "nvmlDeviceGetDefaultEccMode", "nvmlDeviceGetAccountingMode"})
    t.one<int>(name);  // (nvml.h's enums: int-sized)
  for (const char* name :
       {"nvmlDeviceGetCurrentClocksThrottleReasons", "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetSupportedClocksThrottleReasons", "nvmlDeviceGetSupportedClocksEventReasons",
        "nvmlDeviceGetTotalEnergyConsumption"})
    t.one<unsigned long long>(name);
  t.one<nvmlMemory_t>("nvmlDeviceGetMemoryInfo");
  t.one<nvmlPciInfoLegacy_t>("nvmlDeviceGetPciInfo");
  t.one<nvmlPciInfoLegacy_t>("nvmlDeviceGetPciInfo_v2");
  t.one<nvmlPciInfo_t>("nvmlDeviceGetPciInfo_v3");
  t.one<nvmlUtilization_t>("nvmlDeviceGetUtilizationRates");
  t.one<BAR1Memory>("nvmlDeviceGetBAR1MemoryInfo");
  t.one<DeviceAttributes>("nvmlDeviceGetAttributes");
  t.one<DeviceAttributes>("nvmlDeviceGetAttributes_v2");
  t.one<nvmlDevice_t>("nvmlDeviceGetDeviceHandleFromMigDeviceHandle");
  t.add("nvmlDeviceGetMemoryInfo_v2", [](const Target& tg, Arena& a) {
    auto* m = a.out<nvmlMemory_v2_t>();
    m->version = gpusel::abi::kNvmlMemoryV2Version;
    return symbol<nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_v2_t*)>(
        tg, "nvmlDeviceGetMemoryInfo_v2")(tg.device, m);
  });
  t.two<int, int>("nvmlDeviceGetCudaComputeCapability");
  t.two<unsigned, unsigned>("nvmlDeviceGetMigMode");
  t.two<unsigned, unsigned>("nvmlDeviceGetPowerManagementLimitConstraints");
  t.two<unsigned, unsigned>("nvmlDeviceGetEncoderUtilization");
  t.two<unsigned, unsigned>("nvmlDeviceGetDecoderUtilization");
  t.two<int, int>("nvmlDeviceGetEccMode");
}

void add_with_arguments(Table& t) {
  const std::vector<int> clocks = {0, 1, 2, 3};  // graphics, SM, memory, video
  t.with<int, unsigned>("nvmlDeviceGetTemperature", {0});
  t.with<int, unsigned>("nvmlDeviceGetTemperatureThreshold", {0, 1, 2, 3, 4, 5, 6, 7});
  for (const char* name :
       {"nvmlDeviceGetClockInfo", "nvmlDeviceGetMaxClockInfo", "nvmlDeviceGetApplicationsClock",
        "nvmlDeviceGetDefaultApplicationsClock"})
    t.with<int, unsigned>(name, clocks);
  t.with<int, unsigned>("nvmlDeviceGetPcieThroughput", {0, 1});
  t.with<int, unsigned>("nvmlDeviceGetEncoderCapacity", {0, 1, 2});
  t.with<unsigned, unsigned>("nvmlDeviceGetFanSpeed_v2", {0, 1});
  const std::vector<unsigned> links = {0, 1, 17, 18};
  t.with<unsigned, int>("nvmlDeviceGetNvLinkState", links);
  t.with<unsigned, unsigned>("nvmlDeviceGetNvLinkVersion", links);
  t.with<unsigned, nvmlPciInfoLegacy_t>("nvmlDeviceGetNvLinkRemotePciInfo", links);
  t.with<unsigned, nvmlPciInfo_t>("nvmlDeviceGetNvLinkRemotePciInfo_v2", links);
  t.with<unsigned, int>("nvmlDeviceGetNvLinkRemoteDeviceType", links);
  t.with<unsigned, nvmlDevice_t>("nvmlDeviceGetMigDeviceHandleByIndex", {0, 1, 6});
  t.with<unsigned, AccountingStats>("nvmlDeviceGetAccountingStats",
                                    {static_cast<unsigned>(getpid()), 1});
  for (int type : clocks)
    for (int id : {0, 1, 2})
      t.add("nvmlDeviceGetClock", [type, id](const Target& tg, Arena& a) {
        using F = nvmlReturn_t (*)(nvmlDevice_t, int, int, unsigned*);
        return symbol<F>(tg, "nvmlDeviceGetClock")(tg.device, type, id, a.out<unsigned>());
      });
  for (int type : {0, 1})
    for (int counter : {0, 1}) {
      t.add("nvmlDeviceGetTotalEccErrors", [type, counter](const Target& tg, Arena& a) {
        using F = nvmlReturn_t (*)(nvmlDevice_t, int, int, unsigned long long*);
        return symbol<F>(tg, "nvmlDeviceGetTotalEccErrors")(tg.device, type, counter,
                                                            a.out<unsigned long long>());
      });
      for (int location : {0, 1, 2, 3, 4, 5, 6})
        t.add("nvmlDeviceGetMemoryErrorCounter",
              [type, counter, location](const Target& tg, Arena& a) {
                using F = nvmlReturn_t (*)(nvmlDevice_t, int, int, int, unsigned long long*);
                return symbol<F>(tg, "nvmlDeviceGetMemoryErrorCounter")(
                    tg.device, type, counter, location, a.out<unsigned long long>());
              });
    }
  for (unsigned link : links) {
    for (unsigned counter : {0u, 1u})
      t.add("nvmlDeviceGetNvLinkUtilizationCounter", [link, counter](const Target& tg, Arena& a) {
        using F = nvmlReturn_t (*)(nvmlDevice_t, unsigned, unsigned, unsigned long long*,
                                   unsigned long long*);
        return symbol<F>(tg, "nvmlDeviceGetNvLinkUtilizationCounter")(
            tg.device, link, counter, a.out<unsigned long long>(), a.out<unsigned long long>());
      });
    for (int capability : {0, 1, 2, 3, 4, 5})
      t.add("nvmlDeviceGetNvLinkCapability", [link, capability](const Target& tg, Arena& a) {
        using F = nvmlReturn_t (*)(nvmlDevice_t, unsigned, int, unsigned*);
        return symbol<F>(tg, "nvmlDeviceGetNvLinkCapability")(tg.device, link, capability,
                                                              a.out<unsigned>());
      });
  }
  t.add("nvmlDeviceGetEncoderStats", [](const Target& tg, Arena& a) {
    using F = nvmlReturn_t (*)(nvmlDevice_t, unsigned*, unsigned*, unsigned*);
    return symbol<F>(tg, "nvmlDeviceGetEncoderStats")(tg.device, a.out<unsigned>(),
                                                      a.out<unsigned>(), a.out<unsigned>());
  });
}

void add_system_and_handles(Table& t) {
  for (const char* name : {"nvmlSystemGetCudaDriverVersion", "nvmlSystemGetCudaDriverVersion_v2"})
    t.add(name, [name](const Target& tg, Arena& a) {
      return symbol<nvmlReturn_t (*)(int*)>(tg, name)(a.out<int>());
    });
  for (const char* name : {"nvmlDeviceGetCount", "nvmlDeviceGetCount_v2"})
    t.add(name, [name](const Target& tg, Arena& a) {
      return symbol<nvmlReturn_t (*)(unsigned*)>(tg, name)(a.out<unsigned>());
    });
  for (const char* name : {"nvmlDeviceGetHandleByIndex", "nvmlDeviceGetHandleByIndex_v2"})
    t.add(name, [name](const Target& tg, Arena& a) {
      return symbol<nvmlReturn_t (*)(unsigned, nvmlDevice_t*)>(tg, name)(tg.index,
                                                                         a.out<nvmlDevice_t>());
    });
  t.add("nvmlDeviceGetHandleByUUID", [](const Target& tg, Arena& a) {
    using F = nvmlReturn_t (*)(const char*, nvmlDevice_t*);
    return symbol<F>(tg, "nvmlDeviceGetHandleByUUID")(tg.uuid.c_str(), a.out<nvmlDevice_t>());
  });
  for (const char* name : {"nvmlDeviceGetHandleByPciBusId", "nvmlDeviceGetHandleByPciBusId_v2"})
    t.add(name, [name](const Target& tg, Arena& a) {
      return symbol<nvmlReturn_t (*)(const char*, nvmlDevice_t*)>(tg, name)(tg.bus_id.c_str(),
                                                                            a.out<nvmlDevice_t>());
    });
  t.add("nvmlDeviceGetTopologyCommonAncestor", [](const Target& tg, Arena& a) {
    using F = nvmlReturn_t (*)(nvmlDevice_t, nvmlDevice_t, int*);
    return symbol<F>(tg, "nvmlDeviceGetTopologyCommonAncestor")(tg.device, tg.other, a.out<int>());
  });
  for (int caps : {0, 1, 2, 3, 4, 6})
    t.add("nvmlDeviceGetP2PStatus", [caps](const Target& tg, Arena& a) {
      using F = nvmlReturn_t (*)(nvmlDevice_t, nvmlDevice_t, int, int*);
      return symbol<F>(tg, "nvmlDeviceGetP2PStatus")(tg.device, tg.other, caps, a.out<int>());
    });
}

void add_strings(Table& t) {
  for (const char* name : {"nvmlSystemGetDriverVersion", "nvmlSystemGetNVMLVersion"})
    t.add(name, [name](const Target& tg, Arena& a) {
      auto f = symbol<nvmlReturn_t (*)(char*, unsigned)>(tg, name);
      return text([&](char* s, unsigned n) { return f(s, n); }, false, a);
    });
  for (const char* name : {"nvmlDeviceGetUUID", "nvmlDeviceGetName", "nvmlDeviceGetSerial",
                           "nvmlDeviceGetVbiosVersion", "nvmlDeviceGetInforomImageVersion"})
    t.add(name, [name](const Target& tg, Arena& a) {
      auto f = symbol<nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned)>(tg, name);
      return text([&](char* s, unsigned n) { return f(tg.device, s, n); }, false, a);
    });
  for (int object : {0, 1, 2})
    t.add("nvmlDeviceGetInforomVersion", [object](const Target& tg, Arena& a) {
      auto f = symbol<nvmlReturn_t (*)(nvmlDevice_t, int, char*, unsigned)>(
          tg, "nvmlDeviceGetInforomVersion");
      return text([&](char* s, unsigned n) { return f(tg.device, object, s, n); }, false, a);
    });
  // nvmlSystemGetProcessName truncates to the length given, as NVIDIA's does.
  t.add("nvmlSystemGetProcessName", [](const Target& tg, Arena& a) {
    auto f = symbol<nvmlReturn_t (*)(unsigned, char*, unsigned)>(tg, "nvmlSystemGetProcessName");
    return text([&](char* s, unsigned n) { return f(static_cast<unsigned>(getpid()), s, n); }, true,
                a);
  });
}

void add_lists(Table& t) {
  for (const char* name :
       {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2",
        "nvmlDeviceGetGraphicsRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v2",
        "nvmlDeviceGetMPSComputeRunningProcesses_v3", "nvmlDeviceGetMPSComputeRunningProcesses_v2"})
    t.processes<nvmlProcessInfo_t>(name);
  for (const char* name :
       {"nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses",
        "nvmlDeviceGetMPSComputeRunningProcesses"})
    t.processes<ProcessInfoV1>(name);
  t.processes<unsigned>("nvmlDeviceGetAccountingPids");
  // The nearest GPUs and the GPUs of a CPU answer at most the count given (no INSUFFICIENT_SIZE).
  for (int level : {0, 10, 20, 30, 40, 50})
    t.add("nvmlDeviceGetTopologyNearestGpus", [level](const Target& tg, Arena& a) {
      auto f = symbol<nvmlReturn_t (*)(nvmlDevice_t, int, unsigned*, nvmlDevice_t*)>(
          tg, "nvmlDeviceGetTopologyNearestGpus");
      return list<nvmlDevice_t>(
          [&](unsigned* n, nvmlDevice_t* d) { return f(tg.device, level, n, d); }, false, a);
    });
  t.add("nvmlDeviceGetSupportedMemoryClocks", [](const Target& tg, Arena& a) {
    auto f = symbol<nvmlReturn_t (*)(nvmlDevice_t, unsigned*, unsigned*)>(
        tg, "nvmlDeviceGetSupportedMemoryClocks");
    return list<unsigned>([&](unsigned* n, unsigned* c) { return f(tg.device, n, c); }, true, a);
  });
  t.add("nvmlDeviceGetSupportedGraphicsClocks", [](const Target& tg, Arena& a) {
    auto memory = symbol<nvmlReturn_t (*)(nvmlDevice_t, unsigned*, unsigned*)>(
        tg, "nvmlDeviceGetSupportedMemoryClocks");
    auto f = symbol<nvmlReturn_t (*)(nvmlDevice_t, unsigned, unsigned*, unsigned*)>(
        tg, "nvmlDeviceGetSupportedGraphicsClocks");
    unsigned one = 1, mhz = 0;
    if (int rc = memory(tg.device, &one, &mhz); rc != NVML_SUCCESS) return rc;
    return list<unsigned>([&](unsigned* n, unsigned* c) { return f(tg.device, mhz, n, c); }, true,
                          a);
  });
  t.add("nvmlSystemGetTopologyGpuSet", [](const Target& tg, Arena& a) {
    auto f = symbol<nvmlReturn_t (*)(unsigned, unsigned*, nvmlDevice_t*)>(
        tg, "nvmlSystemGetTopologyGpuSet");
    return list<nvmlDevice_t>([&](unsigned* n, nvmlDevice_t* d) { return f(0, n, d); }, false, a);
  });
  t.add("nvmlDeviceGetProcessUtilization", [](const Target& tg, Arena& a) {
    auto f = symbol<nvmlReturn_t (*)(nvmlDevice_t, ProcessUtilizationSample*, unsigned*,
                                     unsigned long long)>(tg, "nvmlDeviceGetProcessUtilization");
    return list<ProcessUtilizationSample>(
        [&](unsigned* n, ProcessUtilizationSample* s) { return f(tg.device, s, n, 0); }, true, a);
  });
  for (unsigned words : {1u, 2u}) {
    t.add("nvmlDeviceGetCpuAffinity", [words](const Target& tg, Arena& a) {
      using F = nvmlReturn_t (*)(nvmlDevice_t, unsigned, unsigned long*);
      return symbol<F>(tg, "nvmlDeviceGetCpuAffinity")(tg.device, words,
                                                       a.out<unsigned long>(words));
    });
    for (unsigned scope : {0u, 1u})
      t.add("nvmlDeviceGetMemoryAffinity", [words, scope](const Target& tg, Arena& a) {
        using F = nvmlReturn_t (*)(nvmlDevice_t, unsigned, unsigned long*, unsigned);
        return symbol<F>(tg, "nvmlDeviceGetMemoryAffinity")(tg.device, words,
                                                            a.out<unsigned long>(words), scope);
      });
  }
  // Field values: nvmlFieldValue_t entries in and out, the ids the simulator answers and one it
  // does not.
  t.add("nvmlDeviceGetFieldValues", [](const Target& tg, Arena& a) {
    const unsigned ids[] = {1, 2, 82, 83, 90, 91, 94, 164, 185, 186, 190, 9999};
    constexpr int n = static_cast<int>(sizeof ids / sizeof ids[0]);
    FieldValue* values = a.out<FieldValue>(n);
    for (int i = 0; i < n; ++i) values[i] = FieldValue{ids[i], 0, 0, 0, 0, 0, 0};
    return symbol<nvmlReturn_t (*)(nvmlDevice_t, int, FieldValue*)>(tg, "nvmlDeviceGetFieldValues")(
        tg.device, n, values);
  });
}

// The GPU instance profiles' ids on the simulated A100s and H100s (nvmlGpuInstanceProfileInfo_t.id)
// and one that is none.
const std::vector<unsigned> kGpuInstanceProfileIds = {19, 14, 9, 5, 0, 77};

// A target's first GPU instance, found without guards (nullptr on a GPU without MIG).
nvmlGpuInstance_t first_gpu_instance(const Target& t) {
  using F = nvmlReturn_t (*)(nvmlDevice_t, unsigned, nvmlGpuInstance_t*, unsigned*);
  auto f = symbol<F>(t, "nvmlDeviceGetGpuInstances");
  for (unsigned id : kGpuInstanceProfileIds) {
    nvmlGpuInstance_t found[8] = {};
    unsigned n = 0;
    if (f(t.device, id, found, &n) == NVML_SUCCESS && n > 0) return found[0];
  }
  return nullptr;
}

// Its first compute instance (nullptr without one).
nvmlComputeInstance_t first_compute_instance(const Target& t) {
  using F = nvmlReturn_t (*)(nvmlGpuInstance_t, unsigned, nvmlComputeInstance_t*, unsigned*);
  nvmlGpuInstance_t gi = first_gpu_instance(t);
  if (gi == nullptr) return nullptr;
  auto f = symbol<F>(t, "nvmlGpuInstanceGetComputeInstances");
  for (unsigned profile = 0; profile < 8; ++profile) {
    nvmlComputeInstance_t found[8] = {};
    unsigned n = 0;
    if (f(gi, profile, found, &n) == NVML_SUCCESS && n > 0) return found[0];
  }
  return nullptr;
}

void add_gpu_instances(Table& t) {
  const std::vector<unsigned> indexes = {0, 1, 2, 3, 4, 5, 7, 40};
  t.with<unsigned, GpuInstanceProfileInfo>("nvmlDeviceGetGpuInstanceProfileInfo", indexes);
  for (unsigned index : indexes)
    t.add("nvmlDeviceGetGpuInstanceProfileInfoV", [index](const Target& tg, Arena& a) {
      auto* info = a.out<GpuInstanceProfileInfoV2>();
      info->version = kGpuInstanceProfileInfoV2Version;
      using F = nvmlReturn_t (*)(nvmlDevice_t, unsigned, GpuInstanceProfileInfoV2*);
      return symbol<F>(tg, "nvmlDeviceGetGpuInstanceProfileInfoV")(tg.device, index, info);
    });
  t.with<unsigned, unsigned>("nvmlDeviceGetGpuInstanceRemainingCapacity", kGpuInstanceProfileIds);
  t.with<unsigned, nvmlGpuInstance_t>("nvmlDeviceGetGpuInstanceById", {0, 1, 3, 5, 14});
  for (unsigned id : kGpuInstanceProfileIds) {
    for (const char* name : {"nvmlDeviceGetGpuInstancePossiblePlacements_v2",
                             "nvmlDeviceGetGpuInstancePossiblePlacements"})
      t.add(name, [name, id](const Target& tg, Arena& a) {
        using F = nvmlReturn_t (*)(nvmlDevice_t, unsigned, GpuInstancePlacement*, unsigned*);
        auto f = symbol<F>(tg, name);
        return list<GpuInstancePlacement>(
            [&](unsigned* n, GpuInstancePlacement* p) { return f(tg.device, id, p, n); }, false, a);
      });
    // The array holds the profile's instanceCount handles, as nvml.h asks.
    t.add("nvmlDeviceGetGpuInstances", [id](const Target& tg, Arena& a) {
      using Info = nvmlReturn_t (*)(nvmlDevice_t, unsigned, GpuInstanceProfileInfo*);
      auto info = symbol<Info>(tg, "nvmlDeviceGetGpuInstanceProfileInfo");
      GpuInstanceProfileInfo profile{};
      profile.instanceCount = 1;
      for (unsigned index = 0; index < 8; ++index) {
        GpuInstanceProfileInfo p{};
        if (info(tg.device, index, &p) == NVML_SUCCESS && p.id == id) profile = p;
      }
      using F = nvmlReturn_t (*)(nvmlDevice_t, unsigned, nvmlGpuInstance_t*, unsigned*);
      return symbol<F>(tg, "nvmlDeviceGetGpuInstances")(
          tg.device, id, a.out<nvmlGpuInstance_t>(profile.instanceCount), a.out<unsigned>());
    });
  }
}

void add_compute_instances(Table& t) {
  t.add("nvmlGpuInstanceGetInfo", [](const Target& tg, Arena& a) {
    nvmlGpuInstance_t gi = first_gpu_instance(tg);
    if (gi == nullptr) return static_cast<int>(NVML_ERROR_NOT_SUPPORTED);
    using F = nvmlReturn_t (*)(nvmlGpuInstance_t, GpuInstanceInfo*);
    return symbol<F>(tg, "nvmlGpuInstanceGetInfo")(gi, a.out<GpuInstanceInfo>());
  });
  for (unsigned profile : {0u, 1u, 2u, 4u, 5u, 40u}) {
    t.add("nvmlGpuInstanceGetComputeInstanceProfileInfo", [profile](const Target& tg, Arena& a) {
      nvmlGpuInstance_t gi = first_gpu_instance(tg);
      if (gi == nullptr) return static_cast<int>(NVML_ERROR_NOT_SUPPORTED);
      using F =
          nvmlReturn_t (*)(nvmlGpuInstance_t, unsigned, unsigned, ComputeInstanceProfileInfo*);
      return symbol<F>(tg, "nvmlGpuInstanceGetComputeInstanceProfileInfo")(
          gi, profile, 0, a.out<ComputeInstanceProfileInfo>());
    });
    t.add("nvmlGpuInstanceGetComputeInstanceProfileInfoV", [profile](const Target& tg, Arena& a) {
      nvmlGpuInstance_t gi = first_gpu_instance(tg);
      if (gi == nullptr) return static_cast<int>(NVML_ERROR_NOT_SUPPORTED);
      auto* info = a.out<ComputeInstanceProfileInfoV2>();
      info->version = kComputeInstanceProfileInfoV2Version;
      using F =
          nvmlReturn_t (*)(nvmlGpuInstance_t, unsigned, unsigned, ComputeInstanceProfileInfoV2*);
      return symbol<F>(tg, "nvmlGpuInstanceGetComputeInstanceProfileInfoV")(gi, profile, 0, info);
    });
    // The array holds the compute instance profile's instanceCount handles, as nvml.h asks.
    t.add("nvmlGpuInstanceGetComputeInstances", [profile](const Target& tg, Arena& a) {
      nvmlGpuInstance_t gi = first_gpu_instance(tg);
      if (gi == nullptr) return static_cast<int>(NVML_ERROR_NOT_SUPPORTED);
      using Info =
          nvmlReturn_t (*)(nvmlGpuInstance_t, unsigned, unsigned, ComputeInstanceProfileInfo*);
      ComputeInstanceProfileInfo p{};
      p.instanceCount = 1;
      symbol<Info>(tg, "nvmlGpuInstanceGetComputeInstanceProfileInfo")(gi, profile, 0, &p);
      using F = nvmlReturn_t (*)(nvmlGpuInstance_t, unsigned, nvmlComputeInstance_t*, unsigned*);
      return symbol<F>(tg, "nvmlGpuInstanceGetComputeInstances")(
          gi, profile, a.out<nvmlComputeInstance_t>(p.instanceCount), a.out<unsigned>());
    });
  }
  for (unsigned id : {0u, 1u, 7u})
    t.add("nvmlGpuInstanceGetComputeInstanceById", [id](const Target& tg, Arena& a) {
      nvmlGpuInstance_t gi = first_gpu_instance(tg);
      if (gi == nullptr) return static_cast<int>(NVML_ERROR_NOT_SUPPORTED);
      using F = nvmlReturn_t (*)(nvmlGpuInstance_t, unsigned, nvmlComputeInstance_t*);
      return symbol<F>(tg, "nvmlGpuInstanceGetComputeInstanceById")(gi, id,
                                                                    a.out<nvmlComputeInstance_t>());
    });
  t.add("nvmlComputeInstanceGetInfo_v2", [](const Target& tg, Arena& a) {
    nvmlComputeInstance_t ci = first_compute_instance(tg);
    if (ci == nullptr) return static_cast<int>(NVML_ERROR_NOT_SUPPORTED);
    using F = nvmlReturn_t (*)(nvmlComputeInstance_t, ComputeInstanceInfo*);
    return symbol<F>(tg, "nvmlComputeInstanceGetInfo_v2")(ci, a.out<ComputeInstanceInfo>());
  });
  // The unversioned call's struct is nvml.h's of its time: 24 bytes, no placement.
  t.add("nvmlComputeInstanceGetInfo", [](const Target& tg, Arena& a) {
    nvmlComputeInstance_t ci = first_compute_instance(tg);
    if (ci == nullptr) return static_cast<int>(NVML_ERROR_NOT_SUPPORTED);
    using F = nvmlReturn_t (*)(nvmlComputeInstance_t, void*);
    return symbol<F>(tg, "nvmlComputeInstanceGetInfo")(
        ci, a.bytes(offsetof(ComputeInstanceInfo, placement)));
  });
}

// The results every machine's child adds to (shared memory): per export, whether any call
// succeeded.
struct Shared {
  bool succeeded[sizeof kExports / sizeof kExports[0]];
  int failures;
};

// One call on one target, in a child process; false (and a message) when it broke a rule.
bool run_one(const std::string& name, std::size_t variant, const Call& call, const Target& t,
             int* rc) {
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid == 0) {
    Arena a;
    const int r = call(t, a);
    if (!a.intact()) _exit(kUnderrun);
    _exit(r == NVML_ERROR_UNKNOWN ? 99 : r);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) std::abort();
  const std::string where = name + " on " + t.what + " (call " + std::to_string(variant + 1) + ")";
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    std::fprintf(stderr, "FAIL %s: killed by signal %d (%s)%s\n", where.c_str(), sig,
                 strsignal(sig),
                 sig == SIGSEGV || sig == SIGBUS
                     ? ": it wrote outside an output buffer of the documented size"
                     : "");
    return false;
  }
  const int code = WEXITSTATUS(status);
  if (code == kUnderrun || code == kRuleBroken) {
    std::fprintf(
        stderr, "FAIL %s: %s\n", where.c_str(),
        code == kUnderrun ? "it wrote in front of an output buffer" : "broke the rule above");
    return false;
  }
  *rc = code;
  return true;
}

// A machine file whose GPU has processes (this one among them), so that the process lists, the
// per-process utilisation and the accounting calls have entries to write.
std::string write_machine_with_processes(const std::string& folder) {
  const std::string path = folder + "/processes.toml";
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) std::abort();
  std::fprintf(
      f,
      "name = \"guarded-processes\"\n"
      "description = \"1x L4 with processes\"\n"
      "driver_version = \"565.57.01\"\n"
      "cuda_driver_version = 12070\n"
      "[[gpu]]\n"
      "uuid = \"GPU-5e0a7c31-00d2-4b9e-8f00-1c2d3e4f5a6b\"\n"
      "name = \"NVIDIA L4\"\n"
      "pci_bus_id = \"00000000:00:03.0\"\n"
      "memory_total = \"23034MiB\"\n"
      "compute_capability = \"8.9\"\n"
      "sm_count = 58\n"
      "numa_node = 0\n"
      "cpus = \"0-7\"\n"
      "pcie_h2d_gbps = 25.4\n"
      "pcie_d2h_gbps = 26.1\n"
      "memory_bandwidth_gbps = 250.0\n"
      "pcie_link_gbps = 31.5\n"
      "pcie_generation = 4\n"
      "pcie_width = 16\n"
      "processes = [{ pid = %d, used_memory = \"1GiB\" }, { pid = 1, used_memory = \"2GiB\" }]\n",
      static_cast<int>(getpid()));
  std::fclose(f);
  return path;
}

}  // namespace

int run_machine(const std::string& sim_dir, const std::string& machine, const Table& table,
                Shared* shared);

// One call of the table: its export (index in kExports, name) and which of its calls.
struct Job {
  std::size_t export_index;
  const std::string* name;
  std::size_t variant;
  const Call* call;
};
void run_target(const std::vector<Job>& jobs, const Target& t, Shared* shared);

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: nvml_guarded_buffers SIM_DIR\n");
    return 2;
  }
  Table table;
  add_scalars(table);
  add_with_arguments(table);
  add_system_and_handles(table);
  add_strings(table);
  add_lists(table);
  add_gpu_instances(table);
  add_compute_instances(table);
  int failures = 0;
  std::map<std::string, bool> exported;
  for (const char* name : kExports) {
    exported[name] = true;
    if (table.calls.count(name) == 0 && kNoOutput.count(name) == 0) {
      std::fprintf(stderr, "FAIL %s: exported, but neither called here nor listed in kNoOutput\n",
                   name);
      ++failures;
    }
  }
  for (const auto& [name, calls] : table.calls)
    if (exported.count(name) == 0) {
      std::fprintf(stderr, "FAIL %s: called here, but not in sim/nvml_exports.inc\n", name.c_str());
      ++failures;
    }
  auto* shared = static_cast<Shared*>(
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (shared == MAP_FAILED) return 2;
  std::memset(shared, 0, sizeof(Shared));
  char folder[] = "/tmp/gpusel-guarded-XXXXXX";
  if (mkdtemp(folder) == nullptr) return 2;
  setenv("GPUSEL_SIM_STATE_DIR", (std::string(folder) + "/state").c_str(), 1);
  const std::vector<std::string> machines = {"dgx-h100", "mig-a100", "workstation-mixed",
                                             write_machine_with_processes(folder)};
  for (const std::string& m : machines) failures += run_machine(argv[1], m, table, shared);
  std::system(("rm -rf '" + std::string(folder) + "'").c_str());
  failures += shared->failures;
  std::size_t getters = 0;
  for (std::size_t i = 0; i < sizeof kExports / sizeof kExports[0]; ++i) {
    const std::string name = kExports[i];
    if (table.calls.count(name) == 0) continue;
    ++getters;
    if (!shared->succeeded[i] && kNeverSucceeds.count(name) == 0) {
      std::fprintf(stderr,
                   "FAIL %s: never succeeded, so its buffers were never written (list it in "
                   "kNeverSucceeds with the reason, or give it a machine where it answers)\n",
                   name.c_str());
      ++failures;
    }
  }
  std::printf(
      "%zu exports: %zu getters called with guarded buffers, %zu without output buffers; %d "
      "failures\n",
      sizeof kExports / sizeof kExports[0], getters, kNoOutput.size(), failures);
  return failures == 0 ? 0 : 1;
}

// All calls on one machine, in a child process (the simulator reads GPUSEL_SIM_MACHINE once).
int run_machine(const std::string& sim_dir, const std::string& machine, const Table& table,
                Shared* shared) {
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid != 0) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
    std::fprintf(stderr, "FAIL machine %s: its child ended with status %d\n", machine.c_str(),
                 status);
    return 1;
  }
  setenv("GPUSEL_SIM_MACHINE", machine.c_str(), 1);
  void* lib = dlopen((sim_dir + "/libnvidia-ml.so.1").c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "%s\n", dlerror());
    _exit(1);
  }
  using Init = nvmlReturn_t (*)();
  if (reinterpret_cast<Init>(dlsym(lib, "nvmlInit_v2"))() != NVML_SUCCESS) _exit(1);
  auto get_count =
      reinterpret_cast<nvmlReturn_t (*)(unsigned*)>(dlsym(lib, "nvmlDeviceGetCount_v2"));
  auto by_index = reinterpret_cast<nvmlReturn_t (*)(unsigned, nvmlDevice_t*)>(
      dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
  auto mig = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, unsigned, nvmlDevice_t*)>(
      dlsym(lib, "nvmlDeviceGetMigDeviceHandleByIndex"));
  auto uuid = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned)>(
      dlsym(lib, "nvmlDeviceGetUUID"));
  auto pci = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, nvmlPciInfo_t*)>(
      dlsym(lib, "nvmlDeviceGetPciInfo_v3"));
  unsigned count = 0;
  if (get_count(&count) != NVML_SUCCESS || count == 0) _exit(1);
  std::vector<Target> targets;
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t gpu = nullptr, other = nullptr;
    by_index(i, &gpu);
    by_index((i + 1) % count, &other);
    char id[96] = {};
    nvmlPciInfo_t info{};
    uuid(gpu, id, sizeof id);
    pci(gpu, &info);
    targets.push_back({lib, gpu, other, i, id, info.busId, machine + " GPU " + std::to_string(i)});
    for (unsigned m = 0; m < 7; ++m) {
      nvmlDevice_t handle = nullptr;
      if (mig(gpu, m, &handle) != NVML_SUCCESS) continue;
      targets.push_back(
          {lib, handle, other, i, id, info.busId,
           machine + " GPU " + std::to_string(i) + " MIG device " + std::to_string(m)});
    }
  }
  std::vector<Job> jobs;
  for (std::size_t e = 0; e < sizeof kExports / sizeof kExports[0]; ++e) {
    const auto it = table.calls.find(kExports[e]);
    if (it == table.calls.end()) continue;
    for (std::size_t v = 0; v < it->second.size(); ++v)
      jobs.push_back({e, &it->first, v, &it->second[v]});
  }
  for (const Target& t : targets) run_target(jobs, t, shared);
  _exit(0);
}

// Every call on one target. They run one after another in one child process, each with buffers of
// its own; when that child breaks a rule or dies (a write past a buffer), the calls from the one
// it stopped at are made again, each in a child of its own, which names the call that broke it.
// (A child per call from the start made 5,000 forks, minutes under AddressSanitizer.)
void run_target(const std::vector<Job>& jobs, const Target& t, Shared* shared) {
  const std::size_t bytes = sizeof(int) * (jobs.size() + 1);
  auto* results = static_cast<int*>(
      mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (results == MAP_FAILED) std::abort();
  int& done = results[0];  // how many calls returned, with no rule broken
  done = 0;
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid == 0) {
    for (std::size_t j = 0; j < jobs.size(); ++j) {
      Arena a;
      results[j + 1] = (*jobs[j].call)(t, a);
      if (!a.intact()) _exit(kUnderrun);
      done = static_cast<int>(j + 1);
    }
    _exit(0);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) std::abort();
  const auto finished = static_cast<std::size_t>(done);
  for (std::size_t j = 0; j < finished; ++j)
    if (results[j + 1] == NVML_SUCCESS) shared->succeeded[jobs[j].export_index] = true;
  for (std::size_t j = finished; j < jobs.size(); ++j) {
    int rc = -1;
    if (!run_one(*jobs[j].name, jobs[j].variant, *jobs[j].call, t, &rc))
      ++shared->failures;
    else if (rc == NVML_SUCCESS)
      shared->succeeded[jobs[j].export_index] = true;
  }
  munmap(results, bytes);
}
