// A simulated GPU machine, read from a TOML machine file. Used by the two driver doubles and by
// `gpusel sim`. Never linked into libgpusel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace gpusel::sim {

struct SimMig {
  std::string uuid;  // MIG-...
  unsigned gpu_instance = 0;
  unsigned compute_instance = 0;
  std::string name;
  std::uint64_t memory_total = 0;
  int sm_count = 0;
  std::uint64_t l2_cache_bytes = 0;  // its share of the GPU's L2 (gpu_model.hpp's mig_l2_bytes)
};

struct SimProcess {
  unsigned pid = 0;
  std::uint64_t used_memory = 0;
};

struct SimGpu {
  // Whose GPU: "nvidia" or "amd" (its table's `vendor`, else the machine's). A machine with both
  // is seen by each vendor's library as its GPUs alone (vendor_view).
  std::string vendor = "nvidia";
  std::string uuid;
  std::string name;
  std::string pci_bus_id;  // canonical: 00000000:18:00.0, upper-case hex
  unsigned pci_domain = 0, pci_bus = 0, pci_device = 0, pci_function = 0;
  unsigned pci_device_id = 0;  // device id << 16 | 0x10de
  std::uint64_t memory_total = 0;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int numa_node = -1;
  std::vector<int> cpus;
  double pcie_h2d_gbps = 0, pcie_d2h_gbps = 0, memory_bandwidth_gbps = 0;
  double pcie_link_gbps = 0;  // theoretical per-direction figure of the link, 0 when unknown
  unsigned pcie_generation = 0, pcie_width = 0;          // as trained now; 0: not reported
  unsigned pcie_max_generation = 0, pcie_max_width = 0;  // 0: the same as now
  std::uint64_t l2_cache_bytes = 0;                      // 0 when unknown (model default)
  double speed = 0;                                      // FASTEST_FIRST key, highest first
  bool speed_given = false;
  bool mig_enabled = false;
  std::vector<SimMig> migs;
  bool lost = false;
  bool persistence_mode = true;  // NVML's persistence mode (machine file: persistence_mode)
  unsigned utilization_gpu = 0, utilization_memory = 0;
  std::vector<SimProcess> processes;
  // Topology: GPUs in one NVLink domain are connected all-to-all (an NVSwitch system); GPUs
  // under one PCIe switch share it. -1: none.
  int nvlink_domain = -1;
  int pcie_switch = -1;
  // The PCIe host bridge (root port) the GPU hangs from; -1: one per NUMA node. GPUs under one
  // host bridge are HOSTBRIDGE apart, under two of one NUMA node NODE, across nodes SYSTEM.
  int pcie_root = -1;
  bool pcie_p2p = true;                      // peer access over PCIe (off on GeForce boards)
  unsigned nvlinks = 0, nvlink_version = 0;  // links per GPU when on NVLink
  // Identity and sensors (defaults per model: sim/gpu_model.hpp).
  std::string brand;   // "NVIDIA", "NVIDIA RTX", "GeForce", "Tesla", "Quadro", "Titan"
  std::string serial;  // empty: not reported (GeForce boards)
  unsigned clock_mhz = 0, memory_clock_mhz = 0, memory_bus_width = 0, gpu_cores = 0;
  unsigned temperature = 0;  // degrees C
  unsigned temperature_slowdown = 0, temperature_shutdown = 0, temperature_gpu_max = 0,
           temperature_memory_max = 0;
  unsigned power_limit_mw = 0, power_draw_mw = 0;
  int fan_speed = -1;  // percent; -1: passively cooled, NVML says NOT_SUPPORTED
  unsigned performance_state = 0;
  std::uint64_t throttle_reasons = 0;
  bool throttle_given = false;
  std::map<int, int> cuda_attributes;  // CUdevice_attribute -> value, from the machine file
  // NVML-only identity and modes (defaults per model: sim/gpu_model.hpp).
  std::string vbios_version;
  unsigned bar1_mib = 0;        // BAR1 aperture
  unsigned ecc = 0;             // 0: no ECC memory, 1: present but off, 2: enabled
  unsigned compute_mode = 0;    // nvmlComputeMode_t: 0 DEFAULT, 2 PROHIBITED, 3 EXCLUSIVE_PROCESS
  bool display_active = false;  // a display is driven from this GPU
  unsigned encoders = 0, decoders = 0;  // video engines
  // AMD GPUs only: the GPU's place in the kernel's KFD topology (the order of its [[gpu]] table
  // among the file's AMD GPUs, which ROCr and HIP number from) and its DRM card number (the order
  // rocm-smi 5.x numbers in; its position in that order when the file gives none).
  unsigned kfd_position = 0;
  int drm_card = -1;
  // The XGMI hive the GPU is bridged into (GPUs of one hive are linked by XGMI; ROCm SMI's link
  // type between them), -1 for none: PCIe only.
  int xgmi_hive = -1;
};

struct SimFaults {
  std::string nvml;             // "", "missing", "no_v2", "init_fails"
  std::string cuda;             // "", "missing", "init_fails"
  bool corrupt_copies = false;  // device-to-host copies flip a byte (a broken copy path)
};

struct SimMachine {
  std::string path;
  std::string name;
  // "nvidia" or "amd": the machine file's `vendor` key, its GPUs' vendor unless a [[gpu]] table
  // says otherwise (a machine with both keeps "nvidia" here; its AMD GPUs say "amd").
  std::string vendor = "nvidia";
  std::string description;
  std::string driver_version;  // the machine's vendor's driver (NVIDIA's, or amdgpu's)
  std::string
      amd_driver_version;  // amdgpu's: driver_version on an AMD machine, else amdgpu_version
  int cuda_driver_version = 0;
  std::string mig_rule = "r570";  // "r570" or "legacy"
  // AMD machines: whether ROCm SMI gives each GPU's KFD node (rsmi_dev_node_id_get, which the
  // ROCm 5.x SMI Debian ships lacks); the file's `rocm_smi_node_ids`, true when absent.
  bool rocm_smi_node_ids = true;
  std::vector<SimGpu> gpus;  // sorted by PCI bus id: NVML order
  SimFaults faults;
  // In a vendor's view of a machine with both (vendor_view): the whole machine, whose GPUs all
  // share its usage folder. nullptr otherwise.
  const SimMachine* whole = nullptr;
};

// Whether the machine has GPUs of `vendor` (or, with none at all, is that vendor's machine).
bool has_vendor(const SimMachine& m, const std::string& vendor);
// Whether some GPU's vendor is not the machine's (an NVIDIA machine with AMD GPUs too).
bool mixed_vendors(const SimMachine& m);
// What `vendor`'s driver and libraries see of a machine with both: its GPUs alone, with its
// driver's version; `whole` points back to `m`.
SimMachine vendor_view(const SimMachine& m, const std::string& vendor);

class MachineError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A machine file is a regular file of at most this many bytes (not a device, a FIFO or a folder).
inline constexpr std::size_t kMaxMachineFileBytes = 1024 * 1024;
// Keys, tables and arrays nest at most this deep (counted before parsing: the TOML parser
// recurses once per level, and a dotted key 300,000 deep overflows the stack).
inline constexpr int kMaxMachineNesting = 64;
// Compute capability values a machine file may give: major 1-99, minor 0-99.
inline constexpr int kMaxComputeCapability = 99;

// Reads and checks a machine file. Throws MachineError naming the file, the line and the key.
// (The doubles take theirs from libgpusel-sim-machines.so, which reads each file once per
// process: machine_share.hpp.)
SimMachine load_machine(const std::string& path);

// A machine file, opened and checked: a regular file of at most kMaxMachineFileBytes (throws
// MachineError naming the file otherwise), with what shows whether it has changed.
class MachineFile {
 public:
  // The same file, unchanged, has the same stamp. Windows: size and modification time only.
  struct Stamp {
    std::uint64_t device = 0, inode = 0;  // 0: the platform does not say which file it is
    std::uint64_t size = 0;
    std::int64_t modified_ns = 0, changed_ns = 0;
    bool operator==(const Stamp&) const = default;
  };

  explicit MachineFile(const std::string& path);
  ~MachineFile();
  MachineFile(const MachineFile&) = delete;
  MachineFile& operator=(const MachineFile&) = delete;

  const Stamp& stamp() const { return stamp_; }
  // Its text, once: refused (MachineError) if it grew past the limit since it was opened.
  std::string read();

 private:
  std::string path_;
  int fd_ = -1;  // POSIX
  Stamp stamp_;
};

// The same over the file's text; `path` names it in messages.
SimMachine parse_machine(std::string_view text, const std::string& path);

// A bundled machine's name or a path -> the file. A spec holding '/' or ending in ".toml" is a
// path; otherwise "<dir>/<spec>.toml" for the first dir that has it. Throws MachineError.
std::string find_machine(const std::string& spec, const std::vector<std::string>& dirs);

// The default FASTEST_FIRST key when a file gives none: 1000 * (10 * major + minor) + SM count.
double derived_speed(int cc_major, int cc_minor, int sm_count);

// nvmlGpuTopologyLevel_t between two GPUs of one machine: INTERNAL 0 (the same GPU), SINGLE 10
// (one PCIe switch), HOSTBRIDGE 30 (one host bridge, pcie_root), NODE 40 (one NUMA node),
// SYSTEM 50 (across NUMA nodes).
int topology_level(const SimGpu& a, const SimGpu& b);

// The two GPUs are in one NVLink domain (NVLink all-to-all).
bool nvlink_between(const SimGpu& a, const SimGpu& b);

// Peer access (cuDeviceCanAccessPeer): over NVLink, or over PCIe where both boards allow it and
// the path stays within one NUMA node (at most NODE apart).
bool peer_access(const SimGpu& a, const SimGpu& b);

// CUDA's enumeration order under FASTEST_FIRST: positions into gpus, by speed (highest first),
// ties by PCI bus id.
std::vector<int> fastest_first_order(const SimMachine& m);

}  // namespace gpusel::sim
