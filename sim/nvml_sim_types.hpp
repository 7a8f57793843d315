// The NVML structs the simulated libnvidia-ml.so.1 writes beyond those of src/driver/nvml_abi.hpp
// (which gpusel itself reads). Their own header, not nvml_sim.cpp's, so that
// tests/abi/check_sim_nvml_header.py can hold them and sim/nvml_exports.inc against NVIDIA's nvml.h
// (one field a line: the check reads them). No NVIDIA header is needed to build.
#pragma once

#include <cstddef>

#include "nvml_abi.hpp"

extern "C" {

// The legacy nvmlPciInfo_t of nvmlDeviceGetPciInfo (v1), _v2 and nvmlDeviceGetNvLinkRemotePciInfo:
// 52 bytes, busId first. nvml.h declares those symbols with today's 68-byte nvmlPciInfo_t, which
// they never write: the check compares this struct with the first 36 bytes of that one instead.
typedef struct {
  char busId[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  unsigned int reserved[4];
} nvmlPciInfoLegacy_t;

// nvmlProcessInfo_v1_t (nvmlDeviceGet*RunningProcesses): pid and memory only, 16 bytes.
struct ProcessInfoV1 {
  unsigned int pid;
  unsigned long long usedGpuMemory;
};

// nvmlBAR1Memory_t.
struct BAR1Memory {
  unsigned long long bar1Total;
  unsigned long long bar1Free;
  unsigned long long bar1Used;
};

// nvmlDeviceAttributes_t: MIG devices only, as on real drivers.
struct DeviceAttributes {
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
  unsigned int gpuInstanceSliceCount;
  unsigned int computeInstanceSliceCount;
  unsigned long long memorySizeMB;
};

// nvmlFieldValue_t: 40 bytes; each field answered or marked NOT_SUPPORTED in its own nvmlReturn.
// (nvml.h's value is the 8-byte union nvmlValue_t; the simulator writes its unsigned long long.)
struct FieldValue {
  unsigned int fieldId;
  unsigned int scopeId;
  long long timestamp;
  long long latencyUsec;
  int valueType;
  nvmlReturn_t nvmlReturn;
  unsigned long long value;
};

// nvmlProcessUtilizationSample_t: 32 bytes; one sample per simulated process with a context.
struct ProcessUtilizationSample {
  unsigned int pid;
  unsigned long long timeStamp;
  unsigned int smUtil;
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
};

// nvmlAccountingStats_t (nvmlDeviceGetAccountingStats; accounting is off, so never written).
struct AccountingStats {
  unsigned int gpuUtilization;
  unsigned int memoryUtilization;
  unsigned long long maxMemoryUsage;
  unsigned long long time;
  unsigned long long startTime;
  unsigned int isRunning;
  unsigned int reserved[5];
};

// MIG GPU and compute instances (nvmlGpuInstance_t, nvmlComputeInstance_t): opaque handles, like
// nvmlDevice_t.
typedef struct gpuselNvmlGpuInstance* nvmlGpuInstance_t;
typedef struct gpuselNvmlComputeInstance* nvmlComputeInstance_t;

// nvmlGpuInstancePlacement_t: the memory slices a GPU instance occupies.
struct GpuInstancePlacement {
  unsigned int start;
  unsigned int size;
};

// nvmlGpuInstanceProfileInfo_t (nvmlDeviceGetGpuInstanceProfileInfo).
struct GpuInstanceProfileInfo {
  unsigned int id;
  unsigned int isP2pSupported;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int copyEngineCount;
  unsigned int decoderCount;
  unsigned int encoderCount;
  unsigned int jpegCount;
  unsigned int ofaCount;
  unsigned long long memorySizeMB;
};

// nvmlGpuInstanceProfileInfo_v2_t (nvmlDeviceGetGpuInstanceProfileInfoV): a version first, a name
// last.
struct GpuInstanceProfileInfoV2 {
  unsigned int version;
  unsigned int id;
  unsigned int isP2pSupported;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int copyEngineCount;
  unsigned int decoderCount;
  unsigned int encoderCount;
  unsigned int jpegCount;
  unsigned int ofaCount;
  unsigned long long memorySizeMB;
  char name[96];
};

// nvmlGpuInstanceInfo_t (nvmlGpuInstanceGetInfo).
struct GpuInstanceInfo {
  nvmlDevice_t device;
  unsigned int id;
  unsigned int profileId;
  GpuInstancePlacement placement;
};

// nvmlComputeInstancePlacement_t: the compute slices of its GPU instance a compute instance holds.
struct ComputeInstancePlacement {
  unsigned int start;
  unsigned int size;
};

// nvmlComputeInstanceProfileInfo_t (nvmlGpuInstanceGetComputeInstanceProfileInfo).
struct ComputeInstanceProfileInfo {
  unsigned int id;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
};

// nvmlComputeInstanceProfileInfo_v2_t (nvmlGpuInstanceGetComputeInstanceProfileInfoV).
struct ComputeInstanceProfileInfoV2 {
  unsigned int version;
  unsigned int id;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
  char name[96];
};

// nvmlComputeInstanceInfo_t (nvmlComputeInstanceGetInfo_v2). The unversioned
// nvmlComputeInstanceGetInfo predates `placement` and writes the first 24 bytes only.
struct ComputeInstanceInfo {
  nvmlDevice_t device;
  nvmlGpuInstance_t gpuInstance;
  unsigned int id;
  unsigned int profileId;
  ComputeInstancePlacement placement;
};

}  // extern "C"

static_assert(sizeof(nvmlPciInfoLegacy_t) == 52);
static_assert(sizeof(ProcessInfoV1) == 16);
static_assert(sizeof(BAR1Memory) == 24);
static_assert(sizeof(DeviceAttributes) == 40);
static_assert(sizeof(FieldValue) == 40);
static_assert(sizeof(ProcessUtilizationSample) == 32);
static_assert(sizeof(AccountingStats) == 56);
static_assert(sizeof(GpuInstancePlacement) == 8);
static_assert(sizeof(GpuInstanceProfileInfo) == 48);
static_assert(sizeof(GpuInstanceProfileInfoV2) == 152);
static_assert(sizeof(GpuInstanceInfo) == 24);
static_assert(sizeof(ComputeInstancePlacement) == 8);
static_assert(sizeof(ComputeInstanceProfileInfo) == 36);
static_assert(sizeof(ComputeInstanceProfileInfoV2) == 136);
static_assert(sizeof(ComputeInstanceInfo) == 32);
static_assert(offsetof(ComputeInstanceInfo, placement) == 24);  // what the unversioned call skips

// The version words of the versioned profile structs (nvml.h's NVML_STRUCT_VERSION: size | v <<
// 24).
constexpr unsigned kGpuInstanceProfileInfoV2Version =
    static_cast<unsigned>(sizeof(GpuInstanceProfileInfoV2)) | 2u << 24;
constexpr unsigned kComputeInstanceProfileInfoV2Version =
    static_cast<unsigned>(sizeof(ComputeInstanceProfileInfoV2)) | 2u << 24;
