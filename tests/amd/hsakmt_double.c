/* A stand-in for ROCm's thunk, libhsakmt.so.1 (the library ROCr talks to the kernel's KFD driver
 * through), so that Debian's real ROCr (libhsa-runtime64.so.1, ROCm 5.2.3) starts without an AMD
 * GPU and reads ROCR_VISIBLE_DEVICES itself: the oracle tests/integration/test_amd_rocr.py compares
 * gpusel's model of that variable with (docs/amd.md). It is compiled by that test against Debian's
 * own hsakmt.h (libhsakmt-dev, fetched into the build folder), so each structure is the header's.
 *
 * The machine: one CPU node, then one gfx90a GPU node per entry of GPUSEL_TEST_AMD_GPUS, a comma
 * list of unique ids in hexadecimal (0: a GPU without one, which ROCr calls "GPU-XX"). Memory is
 * host memory; queues cannot be made (no GPU work runs). ROCr imports 42 hsaKmt* functions with
 * the version node HSAKMT_1 (tests/amd/hsakmt.map); each is here. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "hsakmt.h"

#define MAX_GPUS 64

static unsigned long long gpu_ids[MAX_GPUS];
static unsigned gpu_count;
static int loaded;

static void load(void) {
  if (loaded) return;
  loaded = 1;
  const char* list = getenv("GPUSEL_TEST_AMD_GPUS");
  if (list == NULL) return;
  while (*list != '\0' && gpu_count < MAX_GPUS) {
    char* end = NULL;
    gpu_ids[gpu_count++] = strtoull(list, &end, 16);
    if (end == list) break;
    list = *end == ',' ? end + 1 : end;
  }
}

static int is_gpu(HSAuint32 node) {
  return node >= 1 && node <= gpu_count;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtOpenKFD(void) {
  load();
  return HSAKMT_STATUS_SUCCESS;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtCloseKFD(void) {
  return HSAKMT_STATUS_SUCCESS;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtGetVersion(HsaVersionInfo* v) {
  if (v == NULL) return HSAKMT_STATUS_INVALID_PARAMETER;
  v->KernelInterfaceMajorVersion = 1;
  v->KernelInterfaceMinorVersion = 8;
  return HSAKMT_STATUS_SUCCESS;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtAcquireSystemProperties(HsaSystemProperties* p) {
  load();
  if (p == NULL) return HSAKMT_STATUS_INVALID_PARAMETER;
  memset(p, 0, sizeof *p);
  p->NumNodes = 1 + gpu_count;
  return HSAKMT_STATUS_SUCCESS;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtReleaseSystemProperties(void) {
  return HSAKMT_STATUS_SUCCESS;
}

static void set_name(HsaNodeProperties* p, const char* name) {
  for (size_t i = 0; name[i] != '\0' && i + 1 < HSA_PUBLIC_NAME_SIZE; ++i) {
    p->MarketingName[i] = (HSAuint16)name[i];
    p->AMDName[i] = (HSAuint8)name[i];
  }
}

HSAKMT_STATUS HSAKMTAPI hsaKmtGetNodeProperties(HSAuint32 node, HsaNodeProperties* p) {
  load();
  if (p == NULL) return HSAKMT_STATUS_INVALID_PARAMETER;
  if (node > gpu_count) return HSAKMT_STATUS_INVALID_NODE_UNIT;
  memset(p, 0, sizeof *p);
  if (node == 0) {
    p->NumCPUCores = 2;
    p->NumMemoryBanks = 1;
    p->NumCaches = 1;
    p->MaxEngineClockMhzCCompute = 2000;
    set_name(p, "Simulated CPU");
    return HSAKMT_STATUS_SUCCESS;
  }
  p->NumFComputeCores = 416; /* 104 CUs x 4 SIMDs, as an MI210 */
  p->NumMemoryBanks = 4;     /* frame buffer, LDS, scratch, SVM, as the real thunk reports them */
  p->NumCaches = 2;
  p->FComputeIdLo = 0x80001000u + (node - 1) * 0x1000u;
  p->MaxWavesPerSIMD = 8;
  p->LDSSizeInKB = 64;
  p->WaveFrontSize = 64;
  p->NumShaderBanks = 8;
  p->NumArrays = 1;
  p->NumCUPerArray = 13;
  p->NumSIMDPerCU = 4;
  p->MaxSlotsScratchCU = 32;
  p->EngineId.ui32.uCode = 0x37;
  p->EngineId.ui32.Major = 9;
  p->EngineId.ui32.Minor = 0;
  p->EngineId.ui32.Stepping = 10; /* gfx90a */
  p->VendorId = 0x1002;
  p->DeviceId = 0x740f;
  p->LocationId = (HSAuint32)((0x10 + node) << 8); /* bus 0x11, 0x12, ... device 0 function 0 */
  p->LocalMemSize = 64ull << 30;
  p->MaxEngineClockMhzFCompute = 1700;
  p->DrmRenderMinor = 128 + (HSAint32)node;
  p->NumSdmaEngines = 2;
  p->NumSdmaXgmiEngines = 0;
  p->NumSdmaQueuesPerEngine = 8;
  p->NumCpQueues = 8;
  p->UniqueID = gpu_ids[node - 1];
  p->VGPRSizePerCU = 512 * 1024;
  p->SGPRSizePerCU = 800 * 8 * 4;
  set_name(p, "Simulated gfx90a");
  return HSAKMT_STATUS_SUCCESS;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtGetNodeMemoryProperties(HSAuint32 node, HSAuint32 banks,
                                                      HsaMemoryProperties* m) {
  load();
  if (m == NULL) return HSAKMT_STATUS_INVALID_PARAMETER;
  if (node > gpu_count) return HSAKMT_STATUS_INVALID_NODE_UNIT;
  memset(m, 0, sizeof *m * banks);
  if (node == 0) {
    if (banks >= 1) {
      m[0].HeapType = HSA_HEAPTYPE_SYSTEM;
      m[0].SizeInBytes = 16ull << 30;
    }
    return HSAKMT_STATUS_SUCCESS;
  }
  static const HSA_HEAPTYPE heaps[4] = {HSA_HEAPTYPE_FRAME_BUFFER_PUBLIC, HSA_HEAPTYPE_GPU_LDS,
                                        HSA_HEAPTYPE_GPU_SCRATCH, HSA_HEAPTYPE_DEVICE_SVM};
  static const unsigned long long sizes[4] = {64ull << 30, 64ull << 10, 4ull << 30, 1ull << 47};
  for (HSAuint32 i = 0; i < banks && i < 4; ++i) {
    m[i].HeapType = heaps[i];
    m[i].SizeInBytes = sizes[i];
    m[i].Width = heaps[i] == HSA_HEAPTYPE_FRAME_BUFFER_PUBLIC ? 4096 : 0;
    m[i].MemoryClockMax = heaps[i] == HSA_HEAPTYPE_FRAME_BUFFER_PUBLIC ? 1600 : 0;
    m[i].VirtualBaseAddress = heaps[i] == HSA_HEAPTYPE_GPU_LDS       ? 0x1000000000000ull
                              : heaps[i] == HSA_HEAPTYPE_GPU_SCRATCH ? 0x2000000000000ull
                                                                     : 0;
  }
  return HSAKMT_STATUS_SUCCESS;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtGetNodeCacheProperties(HSAuint32 node, HSAuint32 processor,
                                                     HSAuint32 count, HsaCacheProperties* c) {
  load();
  if (c == NULL) return HSAKMT_STATUS_INVALID_PARAMETER;
  if (node > gpu_count) return HSAKMT_STATUS_INVALID_NODE_UNIT;
  memset(c, 0, sizeof *c * count);
  for (HSAuint32 i = 0; i < count; ++i) {
    c[i].ProcessorIdLow = processor;
    c[i].CacheLevel = i + 1;
    c[i].CacheSize = node == 0 ? 32 * 1024 : (i == 0 ? 16 : 8192); /* GPUs: KiB */
    c[i].CacheLineSize = node == 0 ? 64 : 128;
    c[i].CacheLinesPerTag = 1;
    c[i].CacheAssociativity = node == 0 ? 8 : 16;
    c[i].CacheLatency = 1;
    if (node == 0) {
      c[i].CacheType.ui32.Data = 1;
      c[i].CacheType.ui32.CPU = 1;
    } else {
      c[i].CacheType.ui32.Data = 1;
      c[i].CacheType.ui32.HSACU = 1;
    }
    c[i].SiblingMap[0] = 1;
  }
  return HSAKMT_STATUS_SUCCESS;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtGetNodeIoLinkProperties(HSAuint32 node, HSAuint32 links,
                                                      HsaIoLinkProperties* l) {
  load();
  if (l == NULL && links > 0) return HSAKMT_STATUS_INVALID_PARAMETER;
  if (node > gpu_count) return HSAKMT_STATUS_INVALID_NODE_UNIT;
  if (links > 0) memset(l, 0, sizeof *l * links);
  return HSAKMT_STATUS_SUCCESS;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtGetClockCounters(HSAuint32 node, HsaClockCounters* c) {
  (void)node;
  if (c == NULL) return HSAKMT_STATUS_INVALID_PARAMETER;
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  const HSAuint64 ns = (HSAuint64)t.tv_sec * 1000000000ull + (HSAuint64)t.tv_nsec;
  c->GPUClockCounter = ns / 10;
  c->CPUClockCounter = ns;
  c->SystemClockCounter = ns;
  c->SystemClockFrequencyHz = 1000000000ull;
  return HSAKMT_STATUS_SUCCESS;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtGetTileConfig(HSAuint32 node, HsaGpuTileConfig* config) {
  if (config == NULL || !is_gpu(node)) return HSAKMT_STATUS_INVALID_PARAMETER;
  config->NumTileConfigs = 0;
  config->NumMacroTileConfigs = 0;
  config->GbAddrConfig = 0; /* pipe interleave 256 bytes (field 0) */
  config->NumBanks = 0;
  config->NumRanks = 0;
  return HSAKMT_STATUS_SUCCESS;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtGetXNACKMode(HSAint32* enable) {
  if (enable == NULL) return HSAKMT_STATUS_INVALID_PARAMETER;
  *enable = 0;
  return HSAKMT_STATUS_SUCCESS;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtSetXNACKMode(HSAint32 enable) {
  return enable == 0 ? HSAKMT_STATUS_SUCCESS : HSAKMT_STATUS_NOT_SUPPORTED;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtRuntimeEnable(void* debug, bool setup_ttmp) {
  (void)debug;
  (void)setup_ttmp;
  return HSAKMT_STATUS_SUCCESS;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtRuntimeDisable(void) {
  return HSAKMT_STATUS_SUCCESS;
}

/* ---- memory: host memory stands for every kind ---- */

HSAKMT_STATUS HSAKMTAPI hsaKmtAllocMemory(HSAuint32 node, HSAuint64 size, HsaMemFlags flags,
                                          void** address) {
  (void)node;
  (void)flags;
  if (address == NULL || size == 0) return HSAKMT_STATUS_INVALID_PARAMETER;
  void* p =
      mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return HSAKMT_STATUS_NO_MEMORY;
  *address = p;
  return HSAKMT_STATUS_SUCCESS;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtFreeMemory(void* address, HSAuint64 size) {
  if (address != NULL && size > 0) munmap(address, size);
  return HSAKMT_STATUS_SUCCESS;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtMapMemoryToGPU(void* address, HSAuint64 size, HSAuint64* gpu_va) {
  (void)size;
  if (gpu_va != NULL) *gpu_va = (HSAuint64)(uintptr_t)address;
  return HSAKMT_STATUS_SUCCESS;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtMapMemoryToGPUNodes(void* address, HSAuint64 size, HSAuint64* gpu_va,
                                                  HsaMemMapFlags flags, HSAuint64 nodes,
                                                  HSAuint32* node_array) {
  (void)flags;
  (void)nodes;
  (void)node_array;
  return hsaKmtMapMemoryToGPU(address, size, gpu_va);
}

HSAKMT_STATUS HSAKMTAPI hsaKmtUnmapMemoryToGPU(void* address) {
  (void)address;
  return HSAKMT_STATUS_SUCCESS;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtRegisterMemoryWithFlags(void* address, HSAuint64 size,
                                                      HsaMemFlags flags) {
  (void)address;
  (void)size;
  (void)flags;
  return HSAKMT_STATUS_SUCCESS;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtDeregisterMemory(void* address) {
  (void)address;
  return HSAKMT_STATUS_SUCCESS;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtQueryPointerInfo(const void* pointer, HsaPointerInfo* info) {
  if (info == NULL) return HSAKMT_STATUS_INVALID_PARAMETER;
  memset(info, 0, sizeof *info);
  info->Type = HSA_POINTER_UNKNOWN;
  info->CPUAddress = (void*)pointer;
  return HSAKMT_STATUS_SUCCESS;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtSetMemoryUserData(const void* pointer, void* data) {
  (void)pointer;
  (void)data;
  return HSAKMT_STATUS_SUCCESS;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtSetMemoryPolicy(HSAuint32 node, HSAuint32 policy, HSAuint32 alternate,
                                              void* address, HSAuint64 size) {
  (void)node;
  (void)policy;
  (void)alternate;
  (void)address;
  (void)size;
  return HSAKMT_STATUS_SUCCESS;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtShareMemory(void* address, HSAuint64 size,
                                          HsaSharedMemoryHandle* handle) {
  (void)address;
  (void)size;
  (void)handle;
  return HSAKMT_STATUS_NOT_SUPPORTED;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtRegisterSharedHandle(const HsaSharedMemoryHandle* handle,
                                                   void** address, HSAuint64* size) {
  (void)handle;
  (void)address;
  (void)size;
  return HSAKMT_STATUS_NOT_SUPPORTED;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtRegisterSharedHandleToNodes(const HsaSharedMemoryHandle* handle,
                                                          void** address, HSAuint64* size,
                                                          HSAuint64 nodes, HSAuint32* node_array) {
  (void)nodes;
  (void)node_array;
  return hsaKmtRegisterSharedHandle(handle, address, size);
}

HSAKMT_STATUS HSAKMTAPI hsaKmtRegisterGraphicsHandleToNodes(HSAuint64 handle,
                                                            HsaGraphicsResourceInfo* info,
                                                            HSAuint64 nodes,
                                                            HSAuint32* node_array) {
  (void)handle;
  (void)info;
  (void)nodes;
  (void)node_array;
  return HSAKMT_STATUS_NOT_SUPPORTED;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtSVMSetAttr(void* start, HSAuint64 size, unsigned int count,
                                         HSA_SVM_ATTRIBUTE* attrs) {
  (void)start;
  (void)size;
  (void)count;
  (void)attrs;
  return HSAKMT_STATUS_NOT_SUPPORTED;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtSVMGetAttr(void* start, HSAuint64 size, unsigned int count,
                                         HSA_SVM_ATTRIBUTE* attrs) {
  return hsaKmtSVMSetAttr(start, size, count, attrs);
}

/* ---- events: made and signalled; nothing ever waits long ---- */

static HSA_EVENTID next_event = 1;

HSAKMT_STATUS HSAKMTAPI hsaKmtCreateEvent(HsaEventDescriptor* desc, bool manual_reset,
                                          bool signaled, HsaEvent** event) {
  (void)manual_reset;
  (void)signaled;
  if (desc == NULL || event == NULL) return HSAKMT_STATUS_INVALID_PARAMETER;
  HsaEvent* e = calloc(1, sizeof *e);
  if (e == NULL) return HSAKMT_STATUS_NO_MEMORY;
  e->EventId = next_event++;
  e->EventData.EventType = desc->EventType;
  e->EventData.HWData2 = (HSAuint64)(uintptr_t)e; /* an address ROCr may read the signal from */
  *event = e;
  return HSAKMT_STATUS_SUCCESS;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtDestroyEvent(HsaEvent* event) {
  free(event);
  return HSAKMT_STATUS_SUCCESS;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtSetEvent(HsaEvent* event) {
  (void)event;
  return HSAKMT_STATUS_SUCCESS;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtWaitOnEvent(HsaEvent* event, HSAuint32 ms) {
  (void)event;
  (void)ms;
  return HSAKMT_STATUS_WAIT_TIMEOUT;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtWaitOnMultipleEvents(HsaEvent* events[], HSAuint32 count, bool all,
                                                   HSAuint32 ms) {
  (void)events;
  (void)count;
  (void)all;
  (void)ms;
  return HSAKMT_STATUS_WAIT_TIMEOUT;
}

/* ---- queues: none can be made (no GPU work runs here) ---- */

HSAKMT_STATUS HSAKMTAPI hsaKmtCreateQueue(HSAuint32 node, HSA_QUEUE_TYPE type, HSAuint32 percent,
                                          HSA_QUEUE_PRIORITY priority, void* address,
                                          HSAuint64 size, HsaEvent* event,
                                          HsaQueueResource* resource) {
  (void)node;
  (void)type;
  (void)percent;
  (void)priority;
  (void)address;
  (void)size;
  (void)event;
  (void)resource;
  return HSAKMT_STATUS_OUT_OF_RESOURCES;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtUpdateQueue(HSA_QUEUEID queue, HSAuint32 percent,
                                          HSA_QUEUE_PRIORITY priority, void* address,
                                          HSAuint64 size, HsaEvent* event) {
  (void)queue;
  (void)percent;
  (void)priority;
  (void)address;
  (void)size;
  (void)event;
  return HSAKMT_STATUS_INVALID_HANDLE;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtDestroyQueue(HSA_QUEUEID queue) {
  (void)queue;
  return HSAKMT_STATUS_INVALID_HANDLE;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtSetQueueCUMask(HSA_QUEUEID queue, HSAuint32 count, HSAuint32* mask) {
  (void)queue;
  (void)count;
  (void)mask;
  return HSAKMT_STATUS_INVALID_HANDLE;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtAllocQueueGWS(HSA_QUEUEID queue, HSAuint32 count, HSAuint32* first) {
  (void)queue;
  (void)count;
  (void)first;
  return HSAKMT_STATUS_NOT_SUPPORTED;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtSetTrapHandler(HSAuint32 node, void* handler, HSAuint64 handler_size,
                                             void* buffer, HSAuint64 buffer_size) {
  (void)node;
  (void)handler;
  (void)handler_size;
  (void)buffer;
  (void)buffer_size;
  return HSAKMT_STATUS_SUCCESS;
}
