// The simulated libcuda.so.1's cuDeviceGetAttribute values.
#include "cuda_sim.hpp"

#include <algorithm>
#include <cstdint>

#include "gpu_model.hpp"

namespace gpusel::sim::cuda {

// Attributes 88 and above (unified memory, clusters, memory pools, NUMA): split off
// attribute_value to keep each function short.
std::optional<int> later_attribute(const SimGpu& g, int cc, bool geforce, int l2, int a) {
  switch (a) {
    case 88:
      return 0;  // PAGEABLE_MEMORY_ACCESS (needs HMM)
    case 89:
      return 1;  // CONCURRENT_MANAGED_ACCESS
    case 90:
      return 1;  // COMPUTE_PREEMPTION_SUPPORTED
    case 91:
      return 0;
    case 92:
    case 93:
    case 94:
      return 0;  // the _V1 stream memory operations
    case 95:
    case 96:
      return 1;  // cooperative launches
    case 97:
      return cc >= 90 ? 232448 : cc == 80 ? 166912 : cc >= 86 ? 101376 : cc == 75 ? 65536 : 98304;
    case 98:
      return 0;
    case 99:
      return 1;  // HOST_REGISTER_SUPPORTED
    case 100:
    case 101:
      return 0;
    case 102:
    case 103:
      return 1;  // VMM, POSIX fd handles
    case 104:
    case 105:
      return 0;  // Windows handles
    case 106:
      return (cc == 86 || cc == 87) ? 16 : cc == 89 ? 24 : cc == 75 ? 16 : 32;
    case 107:
      return cc >= 80 ? 1 : 0;  // GENERIC_COMPRESSION_SUPPORTED
    case 108:
      return cc >= 80 ? l2 / 4 * 3 : 0;  // MAX_PERSISTING_L2_CACHE_SIZE
    case 109:
      return cc >= 80 ? 134213632 : 0;  // MAX_ACCESS_POLICY_WINDOW_SIZE
    case 110:
      return geforce ? 0 : 1;  // GPU_DIRECT_RDMA_WITH_CUDA_VMM
    case 111:
      return cc >= 80 ? 1024 : 0;  // RESERVED_SHARED_MEMORY_PER_BLOCK
    case 112:
    case 113:
    case 114:
    case 115:
      return 1;
    case 116:
      return geforce ? 0 : 1;  // GPU_DIRECT_RDMA_SUPPORTED
    case 117:
      return geforce ? 0 : 1;
    case 118:
      return geforce ? 0 : 100;  // writes ordered for the owner
    case 119:
      return 1;  // MEMPOOL handle types: POSIX fd
    case 120:
      return cc >= 90 ? 1 : 0;  // CLUSTER_LAUNCH
    case 121:
    case 122:
    case 123:
    case 124:
      return 1;
    case 125:
      return 0;  // IPC_EVENT_SUPPORTED: the simulator has no IPC
    case 126:
      return cc >= 90 ? 4 : 1;  // MEM_SYNC_DOMAIN_COUNT
    case 127:
      return cc >= 90 ? 1 : 0;  // TENSOR_MAP_ACCESS_SUPPORTED
    case 128:
    case 129:
    case 130:
      return 0;
    case 131:
      return -1;  // NUMA_ID: device memory is not a NUMA node here
    case 132:
    case 133:
      return 0;
    case 134:
      return g.numa_node;
    case 139:
      return static_cast<int>(g.pci_device_id);
    default:
      return 0;  // 135-147 (CIG, decompression, host NUMA memory features): not here
  }
}

// Every CUdevice_attribute CUDA 13 defines: the machine file's value, else the default for the
// GPU's model and architecture. nullopt for a number CUDA does not define.
std::optional<int> attribute_value(const State& s, const Device& d, int a) {
  if (a < 1 || a > gpusel::sim::model::kMaxAttribute) return std::nullopt;
  const SimGpu& g = gpu_of(s, d);
  if (auto it = g.cuda_attributes.find(a); it != g.cuda_attributes.end()) return it->second;
  const int cc = 10 * g.cc_major + g.cc_minor;
  const bool datacenter = g.brand == "NVIDIA" || g.brand == "Tesla";
  const bool geforce = g.brand == "GeForce" || g.brand == "Titan";
  // A MIG device has its GPU instance's share of the L2.
  const std::uint64_t l2_bytes =
      d.mig >= 0 ? g.migs[static_cast<std::size_t>(d.mig)].l2_cache_bytes : g.l2_cache_bytes;
  const int l2 = static_cast<int>(std::min<std::uint64_t>(l2_bytes, INT32_MAX));
  switch (a) {
    case 1:
    case 2:
    case 3:
      return 1024;  // threads per block, block x, y
    case 4:
      return 64;  // block z
    case 5:
      return 2147483647;  // grid x
    case 6:
    case 7:
      return 65535;  // grid y, z
    case 8:
      return 49152;  // shared memory per block
    case 9:
      return 65536;  // constant memory
    case 10:
      return 32;  // warp size
    case 11:
      return 2147483647;  // max pitch
    case 12:
      return 65536;  // registers per block
    case 13:
      return static_cast<int>(g.clock_mhz) * 1000;  // kHz
    case 14:
      return 512;
    case 15:
      return 1;
    case 16:
      return d.sm_count;
    case 17:
      return 0;  // KERNEL_EXEC_TIMEOUT: no display watchdog on these machines
    case 18:
      return 0;  // INTEGRATED
    case 19:
      return 1;  // CAN_MAP_HOST_MEMORY
    case 20:
      return 0;  // COMPUTE_MODE default
    case 21:
    case 22:
      return 131072;
    case 23:
      return 65536;
    case 24:
    case 25:
    case 26:
      return 16384;
    case 27:
    case 28:
      return 32768;
    case 29:
      return 2048;
    case 30:
      return 512;
    case 31:
      return 1;  // CONCURRENT_KERNELS
    case 32:
      return datacenter ? 1 : 0;  // ECC_ENABLED
    case 33:
      return static_cast<int>(g.pci_bus);
    case 34:
      return static_cast<int>(g.pci_device);
    case 35:
      return 0;  // TCC_DRIVER (Windows)
    case 36:
      return static_cast<int>(g.memory_clock_mhz) * 1000;  // kHz
    case 37:
      return static_cast<int>(g.memory_bus_width);
    case 38:
      return l2;
    case 39:
      return (cc == 86 || cc == 87 || cc == 89) ? 1536 : cc == 75 ? 1024 : 2048;
    case 40:
      return datacenter ? 3 : 2;  // ASYNC_ENGINE_COUNT
    case 41:
      return 1;  // UNIFIED_ADDRESSING
    case 42:
      return 32768;
    case 43:
      return 2048;
    case 44:
      return 1;
    case 45:
    case 46:
      return 32768;
    case 47:
    case 48:
      return 8192;
    case 49:
      return 32768;
    case 50:
      return static_cast<int>(g.pci_domain);
    case 51:
      return 32;
    case 52:
    case 53:
      return 32768;
    case 54:
      return 2046;
    case 55:
      return 32768;
    case 56:
      return 131072;
    case 57:
      return 65536;
    case 58:
    case 59:
    case 60:
      return 16384;
    case 61:
      return 32768;
    case 62:
      return 2048;
    case 63:
    case 64:
      return 32768;
    case 65:
      return 2048;
    case 66:
    case 67:
      return 32768;
    case 68:
      return 2046;
    case 69:
      return 268435456;
    case 70:
      return 131072;
    case 71:
      return 65000;
    case 72:
      return 2097120;
    case 73:
    case 74:
      return 32768;
    case 75:
      return g.cc_major;
    case 76:
      return g.cc_minor;
    case 77:
      return 32768;
    case 78:
    case 79:
    case 80:
      return 1;
    case 81:
      return cc >= 90 ? 233472 : cc == 80 ? 167936 : cc >= 86 ? 102400 : cc == 75 ? 65536 : 98304;
    case 82:
      return 65536;
    case 83:
      return 1;  // MANAGED_MEMORY
    case 84:
      return 0;  // MULTI_GPU_BOARD
    case 85:
      return d.gpu;  // MULTI_GPU_BOARD_GROUP_ID
    case 86:
      return 0;  // HOST_NATIVE_ATOMIC_SUPPORTED
    case 87:
      return (cc == 60 || cc == 70 || cc == 80 || cc == 90) ? 2 : cc == 75 ? 32 : 64;
    default:
      return later_attribute(g, cc, geforce, l2, a);
  }
}

}  // namespace gpusel::sim::cuda
