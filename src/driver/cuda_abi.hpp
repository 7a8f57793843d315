// The slice of the CUDA driver's C ABI that gpusel loads by hand and its simulator exports
// (docs/abi.md). No CUDA header is needed to build.
#pragma once

#include <cstddef>

extern "C" {

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st* CUcontext;
typedef struct CUstream_st* CUstream;
typedef struct CUevent_st* CUevent;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
typedef struct CUuuid_st {
  char bytes[16];
} CUuuid;

// CUDA_SUCCESS and the CUDA_ERROR_* result codes, from the one list of them.
enum : int {
#define GPUSEL_CUDA_ERROR(name, value, text) name = value,
#include "cuda_errors.def"
#undef GPUSEL_CUDA_ERROR
};

enum : int {
  CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13,
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
  CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34,
  CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36,
  CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH = 37,
  CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
  CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_NUMA_ID = 131,
  CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID = 134,
};

enum : unsigned { CU_STREAM_DEFAULT = 0, CU_STREAM_NON_BLOCKING = 1 };

enum : int {
  CU_GET_PROC_ADDRESS_SUCCESS = 0,
  CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
  CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2,
};

}  // extern "C"

static_assert(sizeof(CUresult) == 4 && sizeof(CUdevice) == 4 && sizeof(CUdeviceptr) == 8);
static_assert(sizeof(CUuuid) == 16);
