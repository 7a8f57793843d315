// libgpusel-sim-machines.so: the simulator's reader of machine files. The doubles take their
// machine from it (machine_share.hpp), so that a process parses each machine file once whatever
// it loads; and `gpusel --sim` sees machines through it (found and checked exactly as the doubles
// find and check them), so that the gpusel command itself links no simulator code: it dlopens
// this library from the simulator's folder when --sim is used.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "machine.hpp"
#include "machine_share.hpp"
#include "sim_common.hpp"
#include "usage.hpp"

namespace {

void field(std::string& out, const std::string& value) {
  out += value;
  out += '\0';
}

// The machine GPUSEL_SIM_MACHINE-style `spec` names, for a library outside the simulator's own
// doubles (the thunk): a bundled machine's name, found in the machines folder beside this
// library, or a file's path, as the doubles find it.
const gpusel::sim::SimMachine& machine_named(const char* spec) {
  static const char anchor = 0;
  const std::string file = gpusel::sim::platform::library_file(&anchor);
  std::vector<std::string> dirs;
  if (!file.empty()) dirs.push_back(gpusel::sim::platform::folder_of(file) + "/machines");
  return gpusel::sim::shared_machine(gpusel::sim::find_machine(spec, dirs));
}

}  // namespace

// Finds the machine `spec` (a bundled name looked up in `machines_dir`, or a path; with
// `machines_dir` NULL, `spec` is the machine file itself) and loads it. The answer is a list of
// NUL-terminated fields: "ok", the file, the machine's name, its description, its NVML fault, its
// CUDA fault, the last static-runtime program noted on it ("<time> <pid> <carrier or ->
// <executable>" or "") and its vendor ("nvidia", "amd", or "nvidia+amd" for GPUs of both);
// or "error" and the message of a machine that cannot be used; or "fatal" and what went wrong
// otherwise. Returns the answer's size, and writes it to `buf` when `len` is enough.
#ifdef _WIN32
#define GPUSEL_SIM_MACHINES_API extern "C" __declspec(dllexport)
#else
#define GPUSEL_SIM_MACHINES_API extern "C" __attribute__((visibility("default")))
#endif
GPUSEL_SIM_MACHINES_API std::size_t gpuselSimDescribeMachine(const char* spec,
                                                             const char* machines_dir, char* buf,
                                                             std::size_t len) noexcept {
  std::string out;
  try {
    std::string path = spec != nullptr ? spec : "";
    if (machines_dir != nullptr) path = gpusel::sim::find_machine(path, {machines_dir});
    const gpusel::sim::SimMachine& m = gpusel::sim::shared_machine(path);
    field(out, "ok");
    field(out, path);
    field(out, m.name);
    field(out, m.description);
    field(out, m.faults.nvml);
    field(out, m.faults.cuda);
    // The last program on this machine that ran NVIDIA's own (static) CUDA runtime, or "".
    field(out, gpusel::sim::static_runtime_note(m));
    field(out, gpusel::sim::mixed_vendors(m) ? "nvidia+amd" : m.vendor);
  } catch (const gpusel::sim::MachineError& e) {
    out.clear();
    field(out, "error");
    field(out, e.what());
  } catch (const std::exception& e) {
    out.clear();
    field(out, "fatal");
    field(out, e.what());
  }
  if (buf != nullptr && len >= out.size()) std::memcpy(buf, out.data(), out.size());
  return out.size();
}

// For the doubles (machine_share.hpp): the layout of the machines this library hands out, and the
// machine in `path`, parsed once per process (nullptr after fail(context, message) when the file
// cannot be used).
GPUSEL_SIM_MACHINES_API std::uint64_t gpuselSimMachineLayout() noexcept {
  return gpusel::sim::kMachineLayout;
}

GPUSEL_SIM_MACHINES_API const gpusel::sim::SimMachine* gpuselSimSharedMachine(
    const char* path, gpusel::sim::FailFunction fail, void* context) noexcept {
  try {
    return &gpusel::sim::shared_machine(path != nullptr ? path : "");
  } catch (const std::exception& e) {
    if (fail != nullptr) fail(context, e.what());
  }
  return nullptr;
}

// For a stand-in outside the simulator's own libraries (the tests' thunk for ROCr, which makes
// AMD queues): this process uses the GPU `uuid` of the machine in `path`, holding `bytes` of its
// memory, as the CUDA double records a context (usage.hpp: the entry lasts while the process
// does). `library` names the caller in the one message about an unusable usage folder. 0 when
// recorded, -1 when the machine file or the GPU cannot be found.
GPUSEL_SIM_MACHINES_API int gpuselSimNoteUsage(const char* path, const char* uuid,
                                               std::uint64_t bytes, const char* library) noexcept {
  try {
    if (path == nullptr || uuid == nullptr) return -1;
    const gpusel::sim::SimMachine& m = machine_named(path);
    bool known = false;
    for (const gpusel::sim::SimGpu& g : m.gpus) known = known || g.uuid == uuid;
    if (!known) return -1;
    gpusel::sim::note_usage(m, uuid, bytes, library != nullptr ? library : "a simulated library");
    return 0;
  } catch (const std::exception&) {
    return -1;
  }
}

// For the same thunk: the unique ids of a machine's AMD GPUs in KFD order (the order of their
// [[gpu]] tables), as 64-bit numbers (GPU-3c4d5e6f708192a3: 0x3c4d5e6f708192a3), at most `max`
// into `ids`. `path`: a bundled machine's name or a file, as GPUSEL_SIM_MACHINE. Returns how many
// AMD GPUs the machine has (0 for none), or -1 when it cannot be found or used (the reason, at
// most `why_len` bytes with its NUL, in `why` where not NULL).
GPUSEL_SIM_MACHINES_API long gpuselSimAmdGpuIds(const char* path, std::uint64_t* ids,
                                                std::size_t max, char* why,
                                                std::size_t why_len) noexcept {
  try {
    if (path == nullptr) return -1;
    const gpusel::sim::SimMachine& m = machine_named(path);
    long count = 0;
    for (const gpusel::sim::SimGpu& g : m.gpus) {  // kept in PCI order; KFD order is the file's
      if (g.vendor != "amd") continue;
      if (ids != nullptr && g.kfd_position < max)
        ids[g.kfd_position] = std::strtoull(g.uuid.c_str() + 4, nullptr, 16);  // past "GPU-"
      ++count;
    }
    return count;
  } catch (const std::exception& e) {
    if (why != nullptr && why_len > 0) {
      std::strncpy(why, e.what(), why_len - 1);
      why[why_len - 1] = '\0';
    }
    return -1;
  }
}

// For the same thunk: what HIP is told of the machine's AMD GPU `kfd` (its place in KFD order):
// its name (at most `name_len` bytes with the NUL), PCI domain, bus, device and function, PCI
// device id, and memory. 0, or -1 when there is no such GPU or the machine cannot be used.
GPUSEL_SIM_MACHINES_API int gpuselSimAmdGpuAt(const char* path, std::size_t kfd, char* name,
                                              std::size_t name_len, unsigned* pci,
                                              unsigned* device_id, std::uint64_t* memory) noexcept {
  try {
    if (path == nullptr || name == nullptr || name_len == 0 || pci == nullptr ||
        device_id == nullptr || memory == nullptr)
      return -1;
    for (const gpusel::sim::SimGpu& g : machine_named(path).gpus) {
      if (g.vendor != "amd" || g.kfd_position != kfd) continue;
      std::strncpy(name, g.name.c_str(), name_len - 1);
      name[name_len - 1] = '\0';
      pci[0] = g.pci_domain;
      pci[1] = g.pci_bus;
      pci[2] = g.pci_device;
      pci[3] = g.pci_function;
      *device_id = g.pci_device_id >> 16;
      *memory = g.memory_total;
      return 0;
    }
  } catch (const std::exception&) {
  }
  return -1;
}
