// The slice of ROCm SMI's C ABI (librocm_smi64, AMD's GPU monitoring library) that gpusel loads
// by hand and its simulator exports. No AMD header is needed to build; the values are checked
// against Debian's rocm_smi.h (librocm-smi-dev 5.2.3) by tests/integration/test_amd_list.py.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

typedef std::uint32_t rsmi_status_t;
typedef std::uint32_t rsmi_memory_type_t;

enum : std::uint32_t {
  RSMI_STATUS_SUCCESS = 0,
  RSMI_STATUS_INVALID_ARGS = 1,
  RSMI_STATUS_NOT_SUPPORTED = 2,
  RSMI_STATUS_FILE_ERROR = 3,
  RSMI_STATUS_PERMISSION = 4,
  RSMI_STATUS_OUT_OF_RESOURCES = 5,
  RSMI_STATUS_INTERNAL_EXCEPTION = 6,
  RSMI_STATUS_INPUT_OUT_OF_BOUNDS = 7,
  RSMI_STATUS_INIT_ERROR = 8,
  RSMI_STATUS_NOT_YET_IMPLEMENTED = 9,
  RSMI_STATUS_NOT_FOUND = 10,
  RSMI_STATUS_INSUFFICIENT_SIZE = 11,
  RSMI_STATUS_NO_DATA = 14,
  RSMI_STATUS_UNKNOWN_ERROR = 0xFFFFFFFFu,
};

enum : std::uint32_t {
  RSMI_MEM_TYPE_VRAM = 0,
};

// How two GPUs are linked (rsmi_topo_get_link_type).
typedef std::uint32_t RSMI_IO_LINK_TYPE;
enum : std::uint32_t {
  RSMI_IOLINK_TYPE_PCIEXPRESS = 1,
  RSMI_IOLINK_TYPE_XGMI = 2,
};

// One process using GPUs (rsmi_compute_process_info_get).
typedef struct {
  std::uint32_t process_id;
  std::uint32_t pasid;
  std::uint64_t vram_usage;
  std::uint64_t sdma_usage;
  std::uint32_t cu_occupancy;
} rsmi_process_info_t;
// The layout rocm_smi.h gives it (test_amd_list checks the header against these numbers).
static_assert(sizeof(rsmi_process_info_t) == 32 && offsetof(rsmi_process_info_t, vram_usage) == 8,
              "rsmi_process_info_t as in rocm_smi.h");

// AMD's PCI vendor id (rsmi_dev_vendor_id_get).
inline constexpr std::uint16_t kAmdPciVendor = 0x1002;

}  // extern "C"
