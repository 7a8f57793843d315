// What the simulated GPUs report beyond the machine file's required keys: per-model defaults for
// clocks, bus width, power, fan, brand and NVLink, per-architecture defaults for CUDA's device
// attributes, and the attribute names a machine file may set. Header-only (the machine loader and
// both doubles use it). Facts about the ABI (attribute numbers and names) are CUDA 13.0's cuda.h;
// the per-model figures are the vendors' published specifications.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

namespace gpusel::sim::model {

// Every CUdevice_attribute CUDA 13.0 defines (1-147), by number, without the
// CU_DEVICE_ATTRIBUTE_ prefix. A number outside the table is CUDA_ERROR_INVALID_VALUE.
struct AttributeName {
  int id;
  const char* name;
};
inline constexpr AttributeName kAttributes[] = {
    {1, "MAX_THREADS_PER_BLOCK"},
    {2, "MAX_BLOCK_DIM_X"},
    {3, "MAX_BLOCK_DIM_Y"},
    {4, "MAX_BLOCK_DIM_Z"},
    {5, "MAX_GRID_DIM_X"},
    {6, "MAX_GRID_DIM_Y"},
    {7, "MAX_GRID_DIM_Z"},
    {8, "MAX_SHARED_MEMORY_PER_BLOCK"},
    {9, "TOTAL_CONSTANT_MEMORY"},
    {10, "WARP_SIZE"},
    {11, "MAX_PITCH"},
    {12, "MAX_REGISTERS_PER_BLOCK"},
    {13, "CLOCK_RATE"},
    {14, "TEXTURE_ALIGNMENT"},
    {15, "GPU_OVERLAP"},
    {16, "MULTIPROCESSOR_COUNT"},
    {17, "KERNEL_EXEC_TIMEOUT"},
    {18, "INTEGRATED"},
    {19, "CAN_MAP_HOST_MEMORY"},
    {20, "COMPUTE_MODE"},
    {21, "MAXIMUM_TEXTURE1D_WIDTH"},
    {22, "MAXIMUM_TEXTURE2D_WIDTH"},
    {23, "MAXIMUM_TEXTURE2D_HEIGHT"},
    {24, "MAXIMUM_TEXTURE3D_WIDTH"},
    {25, "MAXIMUM_TEXTURE3D_HEIGHT"},
    {26, "MAXIMUM_TEXTURE3D_DEPTH"},
    {27, "MAXIMUM_TEXTURE2D_LAYERED_WIDTH"},
    {28, "MAXIMUM_TEXTURE2D_LAYERED_HEIGHT"},
    {29, "MAXIMUM_TEXTURE2D_LAYERED_LAYERS"},
    {30, "SURFACE_ALIGNMENT"},
    {31, "CONCURRENT_KERNELS"},
    {32, "ECC_ENABLED"},
    {33, "PCI_BUS_ID"},
    {34, "PCI_DEVICE_ID"},
    {35, "TCC_DRIVER"},
    {36, "MEMORY_CLOCK_RATE"},
    {37, "GLOBAL_MEMORY_BUS_WIDTH"},
    {38, "L2_CACHE_SIZE"},
    {39, "MAX_THREADS_PER_MULTIPROCESSOR"},
    {40, "ASYNC_ENGINE_COUNT"},
    {41, "UNIFIED_ADDRESSING"},
    {42, "MAXIMUM_TEXTURE1D_LAYERED_WIDTH"},
    {43, "MAXIMUM_TEXTURE1D_LAYERED_LAYERS"},
    {44, "CAN_TEX2D_GATHER"},
    {45, "MAXIMUM_TEXTURE2D_GATHER_WIDTH"},
    {46, "MAXIMUM_TEXTURE2D_GATHER_HEIGHT"},
    {47, "MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE"},
    {48, "MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE"},
    {49, "MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE"},
    {50, "PCI_DOMAIN_ID"},
    {51, "TEXTURE_PITCH_ALIGNMENT"},
    {52, "MAXIMUM_TEXTURECUBEMAP_WIDTH"},
    {53, "MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH"},
    {54, "MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS"},
    {55, "MAXIMUM_SURFACE1D_WIDTH"},
    {56, "MAXIMUM_SURFACE2D_WIDTH"},
    {57, "MAXIMUM_SURFACE2D_HEIGHT"},
    {58, "MAXIMUM_SURFACE3D_WIDTH"},
    {59, "MAXIMUM_SURFACE3D_HEIGHT"},
    {60, "MAXIMUM_SURFACE3D_DEPTH"},
    {61, "MAXIMUM_SURFACE1D_LAYERED_WIDTH"},
    {62, "MAXIMUM_SURFACE1D_LAYERED_LAYERS"},
    {63, "MAXIMUM_SURFACE2D_LAYERED_WIDTH"},
    {64, "MAXIMUM_SURFACE2D_LAYERED_HEIGHT"},
    {65, "MAXIMUM_SURFACE2D_LAYERED_LAYERS"},
    {66, "MAXIMUM_SURFACECUBEMAP_WIDTH"},
    {67, "MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH"},
    {68, "MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS"},
    {69, "MAXIMUM_TEXTURE1D_LINEAR_WIDTH"},
    {70, "MAXIMUM_TEXTURE2D_LINEAR_WIDTH"},
    {71, "MAXIMUM_TEXTURE2D_LINEAR_HEIGHT"},
    {72, "MAXIMUM_TEXTURE2D_LINEAR_PITCH"},
    {73, "MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH"},
    {74, "MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT"},
    {75, "COMPUTE_CAPABILITY_MAJOR"},
    {76, "COMPUTE_CAPABILITY_MINOR"},
    {77, "MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH"},
    {78, "STREAM_PRIORITIES_SUPPORTED"},
    {79, "GLOBAL_L1_CACHE_SUPPORTED"},
    {80, "LOCAL_L1_CACHE_SUPPORTED"},
    {81, "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"},
    {82, "MAX_REGISTERS_PER_MULTIPROCESSOR"},
    {83, "MANAGED_MEMORY"},
    {84, "MULTI_GPU_BOARD"},
    {85, "MULTI_GPU_BOARD_GROUP_ID"},
    {86, "HOST_NATIVE_ATOMIC_SUPPORTED"},
    {87, "SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO"},
    {88, "PAGEABLE_MEMORY_ACCESS"},
    {89, "CONCURRENT_MANAGED_ACCESS"},
    {90, "COMPUTE_PREEMPTION_SUPPORTED"},
    {91, "CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM"},
    {92, "CAN_USE_STREAM_MEM_OPS_V1"},
    {93, "CAN_USE_64_BIT_STREAM_MEM_OPS_V1"},
    {94, "CAN_USE_STREAM_WAIT_VALUE_NOR_V1"},
    {95, "COOPERATIVE_LAUNCH"},
    {96, "COOPERATIVE_MULTI_DEVICE_LAUNCH"},
    {97, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"},
    {98, "CAN_FLUSH_REMOTE_WRITES"},
    {99, "HOST_REGISTER_SUPPORTED"},
    {100, "PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES"},
    {101, "DIRECT_MANAGED_MEM_ACCESS_FROM_HOST"},
    {102, "VIRTUAL_ADDRESS_MANAGEMENT_SUPPORTED"},
    {103, "HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED"},
    {104, "HANDLE_TYPE_WIN32_HANDLE_SUPPORTED"},
    {105, "HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED"},
    {106, "MAX_BLOCKS_PER_MULTIPROCESSOR"},
    {107, "GENERIC_COMPRESSION_SUPPORTED"},
    {108, "MAX_PERSISTING_L2_CACHE_SIZE"},
    {109, "MAX_ACCESS_POLICY_WINDOW_SIZE"},
    {110, "GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED"},
    {111, "RESERVED_SHARED_MEMORY_PER_BLOCK"},
    {112, "SPARSE_CUDA_ARRAY_SUPPORTED"},
    {113, "READ_ONLY_HOST_REGISTER_SUPPORTED"},
    {114, "TIMELINE_SEMAPHORE_INTEROP_SUPPORTED"},
    {115, "MEMORY_POOLS_SUPPORTED"},
    {116, "GPU_DIRECT_RDMA_SUPPORTED"},
    {117, "GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS"},
    {118, "GPU_DIRECT_RDMA_WRITES_ORDERING"},
    {119, "MEMPOOL_SUPPORTED_HANDLE_TYPES"},
    {120, "CLUSTER_LAUNCH"},
    {121, "DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED"},
    {122, "CAN_USE_64_BIT_STREAM_MEM_OPS"},
    {123, "CAN_USE_STREAM_WAIT_VALUE_NOR"},
    {124, "DMA_BUF_SUPPORTED"},
    {125, "IPC_EVENT_SUPPORTED"},
    {126, "MEM_SYNC_DOMAIN_COUNT"},
    {127, "TENSOR_MAP_ACCESS_SUPPORTED"},
    {128, "HANDLE_TYPE_FABRIC_SUPPORTED"},
    {129, "UNIFIED_FUNCTION_POINTERS"},
    {130, "NUMA_CONFIG"},
    {131, "NUMA_ID"},
    {132, "MULTICAST_SUPPORTED"},
    {133, "MPS_ENABLED"},
    {134, "HOST_NUMA_ID"},
    {135, "D3D12_CIG_SUPPORTED"},
    {136, "MEM_DECOMPRESS_ALGORITHM_MASK"},
    {137, "MEM_DECOMPRESS_MAXIMUM_LENGTH"},
    {138, "VULKAN_CIG_SUPPORTED"},
    {139, "GPU_PCI_DEVICE_ID"},
    {140, "GPU_PCI_SUBSYSTEM_ID"},
    {141, "HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED"},
    {142, "HOST_NUMA_MEMORY_POOLS_SUPPORTED"},
    {143, "HOST_NUMA_MULTINODE_IPC_SUPPORTED"},
    {144, "HOST_MEMORY_POOLS_SUPPORTED"},
    {145, "HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED"},
    {146, "HOST_ALLOC_DMA_BUF_SUPPORTED"},
    {147, "ONLY_PARTIAL_HOST_NATIVE_ATOMIC_SUPPORTED"},
};
inline constexpr int kMaxAttribute = 147;

// The attribute's number for a machine file's name (case-insensitive, prefix optional), or 0.
inline int attribute_by_name(std::string_view name) {
  constexpr std::string_view kPrefix = "CU_DEVICE_ATTRIBUTE_";
  auto upper = [](std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c);
    return out;
  };
  std::string key = upper(name);
  if (key.compare(0, kPrefix.size(), kPrefix) == 0) key = key.substr(kPrefix.size());
  for (const auto& a : kAttributes) {
    if (key == a.name) return a.id;
  }
  return 0;
}

// nvmlDeviceArchitecture_t from the compute capability.
inline unsigned architecture(int major, int minor) {
  if (major >= 10) return 10;                 // BLACKWELL
  if (major == 9) return 9;                   // HOPPER
  if (major == 8) return minor == 9 ? 8 : 7;  // ADA : AMPERE
  if (major == 7) return minor >= 5 ? 6 : 5;  // TURING : VOLTA
  if (major == 6) return 4;                   // PASCAL
  if (major == 5) return 3;                   // MAXWELL
  if (major == 3) return 2;                   // KEPLER
  return 0xffffffffu;                         // UNKNOWN
}

// CUDA cores per SM.
inline int cores_per_sm(int major, int minor) {
  if (major == 3) return 192;
  if (major == 5) return 128;
  if (major == 6) return minor == 0 ? 64 : 128;
  if (major == 7) return 64;
  if (major == 8) return minor == 0 ? 64 : 128;
  return 128;
}

// nvmlBrandType_t values the simulator uses.
inline constexpr unsigned kBrandQuadro = 1, kBrandTesla = 2, kBrandGeForce = 5, kBrandTitan = 6,
                          kBrandNvidiaRtx = 13, kBrandNvidia = 14;

inline unsigned brand_by_name(std::string_view brand) {
  if (brand == "GeForce") return kBrandGeForce;
  if (brand == "NVIDIA RTX") return kBrandNvidiaRtx;
  if (brand == "NVIDIA") return kBrandNvidia;
  if (brand == "Tesla") return kBrandTesla;
  if (brand == "Quadro") return kBrandQuadro;
  if (brand == "Titan") return kBrandTitan;
  return 0;
}

// Figures of one product, by its marketing name as NVML reports it.
struct ModelDefaults {
  const char* match;          // a substring of the name
  unsigned clock_mhz;         // SM boost clock
  unsigned memory_clock_mhz;  // as CUDA reports it (kHz / 1000)
  unsigned memory_bus_width;  // bits
  unsigned power_limit_w;     // default power limit
  unsigned power_idle_w;      // drawn with nothing running
  bool fan;                   // actively cooled (fan speed reported)
  const char* brand;
  bool pcie_p2p;     // peer access over PCIe (GeForce boards have it off)
  unsigned nvlinks;  // NVLink links, when on NVLink
  unsigned nvlink_version;
  // NVML's identity and engine figures (nvmlDeviceGetVbiosVersion, GetBAR1MemoryInfo, GetEccMode,
  // GetEncoderCapacity / Get*Utilization): the VBIOS string, BAR1 aperture in MiB, ECC memory
  // (enabled by default on data-centre parts, present but off on workstation ones, absent on
  // GeForce: 2 / 1 / 0), and video encoder and decoder engines.
  const char* vbios;
  unsigned bar1_mib;
  unsigned ecc;
  unsigned encoders, decoders;
  // L2 cache in MiB and the PCIe link the board has (generation, lanes): what CUDA's l2CacheSize
  // and NVML's PCIe link queries report when a machine file does not say. 0: unknown.
  unsigned l2_mib;
  unsigned pcie_generation, pcie_width;
};

inline constexpr ModelDefaults kModels[] = {
    {"H100 80GB HBM3", 1980, 2619, 5120, 700, 70, false, "NVIDIA", true, 18, 4, "96.00.99.00.01",
     131072, 2, 0, 7, 50, 5, 16},
    {"H100 PCIe", 1755, 1593, 5120, 350, 50, false, "NVIDIA", true, 12, 4, "96.00.30.00.01", 131072,
     2, 0, 7, 50, 5, 16},
    {"H100", 1980, 2619, 5120, 700, 70, false, "NVIDIA", true, 18, 4, "96.00.99.00.01", 131072, 2,
     0, 7, 50, 5, 16},
    {"A100-SXM4-40GB", 1410, 1215, 5120, 400, 55, false, "NVIDIA", true, 12, 3, "92.00.45.00.03",
     65536, 2, 0, 5, 40, 4, 16},
    {"A100-SXM4-80GB", 1410, 1593, 5120, 400, 60, false, "NVIDIA", true, 12, 3, "92.00.45.00.06",
     131072, 2, 0, 5, 40, 4, 16},
    {"A100 80GB PCIe", 1410, 1512, 5120, 300, 45, false, "NVIDIA", true, 12, 3, "92.00.90.00.04",
     131072, 2, 0, 5, 40, 4, 16},
    {"A100", 1410, 1215, 5120, 250, 40, false, "NVIDIA", true, 12, 3, "92.00.25.00.08", 65536, 2, 0,
     5, 40, 4, 16},
    {"RTX A6000", 1800, 8001, 384, 300, 25, true, "NVIDIA RTX", true, 4, 3, "94.02.5C.00.02", 256,
     1, 1, 2, 6, 4, 16},
    {"RTX A4000", 1560, 7001, 256, 140, 12, true, "NVIDIA RTX", true, 0, 0, "94.04.3F.00.02", 256,
     1, 1, 1, 4, 4, 16},
    {"RTX 4090", 2520, 10501, 384, 450, 25, true, "GeForce", false, 0, 0, "95.02.3C.40.B8", 256, 0,
     2, 1, 72, 4, 16},
    {"L40S", 2520, 9001, 384, 350, 35, false, "NVIDIA", true, 0, 0, "95.02.66.00.02", 65536, 2, 3,
     3, 96, 4, 16},
    {"L4", 2040, 6251, 192, 72, 16, false, "NVIDIA", true, 0, 0, "95.04.29.00.06", 32768, 2, 2, 4,
     48, 4, 16},
};

// The first model whose match is in `name`; a generic one (by compute capability) otherwise.
inline ModelDefaults defaults_for(std::string_view name, int cc_major, std::uint64_t memory) {
  for (const auto& m : kModels) {
    if (name.find(m.match) != std::string_view::npos) return m;
  }
  const bool geforce = name.find("GeForce") != std::string_view::npos;
  const bool wide = memory > (48ull << 30);  // HBM parts
  return {"",
          cc_major >= 8 ? 1700u : 1500u,
          wide ? 1593u : 7000u,
          wide ? 5120u : 384u,
          300,
          40,
          geforce,
          geforce ? "GeForce" : "NVIDIA",
          !geforce,
          0,
          0,
          cc_major >= 9   ? "96.00.00.00.01"
          : cc_major == 8 ? "94.00.00.00.01"
                          : "90.00.00.00.01",
          wide ? 65536u : 256u,
          geforce ? 0u : 2u,
          1,
          1,
          0,
          0,
          0};
}

// A MIG device's L2: its GPU instance owns whole memory slices (eighths of the GPU's memory on
// A100 and H100) and the L2 that sits with them, so its share is its memory's, rounded to slices
// (a 2g.10gb on a 40 GiB A100: 2 of 8 slices, 10 of 40 MiB).
inline std::uint64_t mig_l2_bytes(std::uint64_t gpu_l2, std::uint64_t gpu_memory,
                                  std::uint64_t mig_memory) {
  constexpr std::uint64_t kSlices = 8;
  if (gpu_memory == 0 || gpu_l2 == 0) return 0;
  const double share = static_cast<double>(mig_memory) / static_cast<double>(gpu_memory);
  auto slices = static_cast<std::uint64_t>(share * kSlices + 0.5);
  slices = std::clamp<std::uint64_t>(slices, 1, kSlices);
  return gpu_l2 / kSlices * slices;
}

}  // namespace gpusel::sim::model
