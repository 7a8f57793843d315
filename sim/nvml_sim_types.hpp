// The NVML structs the simulated libnvidia-ml.so.1 writes beyond those of src/driver/nvml_abi.hpp
// (which gpusel itself reads). Their own header, not nvml_sim.cpp's, so that
// tests/abi/check_sim_nvml_header.py can hold them and sim/nvml_exports.inc against NVIDIA's nvml.h
// (one field a line: the check reads them). No NVIDIA header is needed to build.
#pragma once

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

}  // extern "C"

static_assert(sizeof(nvmlPciInfoLegacy_t) == 52);
static_assert(sizeof(ProcessInfoV1) == 16);
static_assert(sizeof(BAR1Memory) == 24);
static_assert(sizeof(DeviceAttributes) == 40);
static_assert(sizeof(FieldValue) == 40);
static_assert(sizeof(ProcessUtilizationSample) == 32);
static_assert(sizeof(AccountingStats) == 56);
