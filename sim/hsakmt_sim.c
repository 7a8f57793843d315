/* The simulator's ROCm thunk, libhsakmt.so.1 (the library ROCr talks to the kernel's KFD driver
 * through), so that Debian's real ROCr (libhsa-runtime64.so.1, ROCm 5.2.3) and HIP start without an
 * AMD GPU on a simulated AMD machine (in lib/gpusel/sim/amd/, which `gpusel sim env` puts on the
 * loader's path), and read ROCR_VISIBLE_DEVICES themselves: the oracle of
 * tests/integration/test_amd_visible.py compares gpusel's model of the variables with them
 * (docs/amd.md). Built with the simulator against Debian's own hsakmt.h (libhsakmt-dev), so each
 * structure is the header's; never under a sanitizer (it loads into HIP programs, which are not).
 *
 * The machine: one CPU node, then one gfx90a GPU node per entry of GPUSEL_TEST_AMD_GPUS, a comma
 * list of unique ids in hexadecimal (0: a GPU without one, which ROCr calls "GPU-XX"); where that
 * is unset, one per GPU of the simulated AMD machine GPUSEL_SIM_MACHINE names, in its file's order
 * (KFD order). Memory is
 * host memory. Queues: ROCr's AQL queues are made, and a thread stands in for the GPU's command
 * processor, taking each packet ROCr rings the doorbell for and completing it (its signal
 * decremented) without doing its work: enough for HIP to make streams and allocate memory, not to
 * compute. Where GPUSEL_SIM_MACHINE names a simulated machine, the first queue on a GPU records the
 * process on that GPU (unique id GPU-<hex>) in the simulator's usage folder, through
 * libgpusel-sim-machines.so: the simulated ROCm SMI then lists it there, as the kernel lists a
 * process's queues for ROCm SMI (/sys/class/kfd/kfd/proc/<pid>/queues). ROCr imports 42 hsaKmt*
 * functions with the version node HSAKMT_1 (sim/hsakmt.map); each is here. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "hsakmt.h"

#define MAX_GPUS 64

static unsigned long long gpu_ids[MAX_GPUS];
static unsigned gpu_count;
static int loaded;

static void* machines_library(void);

/* What HIP is told of each GPU: from the simulated machine's file, else (GPUSEL_TEST_AMD_GPUS) an
 * MI210 on bus 0x11, 0x12, ... */
struct gpu_facts {
  char name[64];
  unsigned pci[4]; /* domain, bus, device, function */
  unsigned device_id;
  unsigned long long memory;
};
static struct gpu_facts facts[MAX_GPUS];

static const char kSelf[] = "libhsakmt.so.1 (gpusel's simulator)";

/* GPUSEL_TEST_AMD_GPUS's ids (hexadecimal, "GPU-" before each allowed) into gpu_ids. */
static void read_test_gpus(const char* list) {
  while (*list != '\0' && gpu_count < MAX_GPUS) {
    if (strncmp(list, "GPU-", 4) == 0 || strncmp(list, "gpu-", 4) == 0) list += 4;
    char* end = NULL;
    const unsigned long long id = strtoull(list, &end, 16);
    if (end == list || (*end != ',' && *end != '\0')) {
      fprintf(stderr,
              "%s: GPUSEL_TEST_AMD_GPUS: %s is not a unique id in hexadecimal: the GPUs "
              "from there on are left out\n",
              kSelf, list);
      break;
    }
    gpu_ids[gpu_count++] = id;
    list = *end == ',' ? end + 1 : end;
  }
}

/* The machine: GPUSEL_TEST_AMD_GPUS's ids where set (the differential tests' machines of their
 * own; said on stderr where GPUSEL_SIM_MACHINE names a machine too, whose GPUs they replace; the
 * machine is then not read, so that no simulator library loads into the program), else the
 * simulated machine GPUSEL_SIM_MACHINE names (a bundled name or a file; its AMD GPUs' ids in KFD
 * order, and what HIP is told of each, from libgpusel-sim-machines.so), as `gpusel sim env` sets.
 */
static void load(void) {
  if (loaded) return;
  loaded = 1;
  const char* list = getenv("GPUSEL_TEST_AMD_GPUS");
  const char* machine = getenv("GPUSEL_SIM_MACHINE");
  for (unsigned i = 0; i < MAX_GPUS; ++i) {
    snprintf(facts[i].name, sizeof facts[i].name, "Simulated gfx90a");
    facts[i].pci[1] = 0x11 + i;
    facts[i].device_id = 0x740f;
    facts[i].memory = 64ull << 30;
  }
  if (list != NULL) {
    if (machine != NULL && *machine != '\0')
      fprintf(stderr,
              "%s: GPUSEL_TEST_AMD_GPUS=%s stands for the AMD GPUs of the simulated "
              "machine %s (unset it to see that machine's)\n",
              kSelf, list, machine);
    read_test_gpus(list);
    return;
  }
  if (machine == NULL || *machine == '\0') return;
  typedef long (*ids_fn)(const char*, unsigned long long*, size_t, char*, size_t);
  typedef int (*at_fn)(const char*, size_t, char*, size_t, unsigned*, unsigned*,
                       unsigned long long*);
  void* lib = machines_library();
  ids_fn ids = lib != NULL ? (ids_fn)dlsym(lib, "gpuselSimAmdGpuIds") : NULL;
  at_fn at = lib != NULL ? (at_fn)dlsym(lib, "gpuselSimAmdGpuAt") : NULL;
  char why[512] = "";
  const long n = ids != NULL ? ids(machine, gpu_ids, MAX_GPUS, why, sizeof why) : -1;
  if (ids == NULL) {
    fprintf(stderr,
            "%s: cannot read GPUSEL_SIM_MACHINE=%s: libgpusel-sim-machines.so is not on "
            "the loader's path nor beside this library\n",
            kSelf, machine);
  } else if (n < 0) {
    fprintf(stderr, "%s: cannot read GPUSEL_SIM_MACHINE=%s: %s\n", kSelf, machine, why);
  } else if (n == 0) {
    fprintf(stderr, "%s: the simulated machine %s has no AMD GPU: HIP finds none\n", kSelf,
            machine);
  }
  gpu_count = n < 0 ? 0 : n > MAX_GPUS ? MAX_GPUS : (unsigned)n;
  for (unsigned i = 0; at != NULL && i < gpu_count; ++i)
    at(machine, i, facts[i].name, sizeof facts[i].name, facts[i].pci, &facts[i].device_id,
       &facts[i].memory);
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
  const struct gpu_facts* f = &facts[node - 1];
  p->VendorId = 0x1002;
  p->DeviceId = (HSAuint16)f->device_id;
  p->Domain = f->pci[0];
  p->LocationId = (HSAuint32)(f->pci[1] << 8 | f->pci[2] << 3 | f->pci[3]); /* ROCr's BDF */
  p->LocalMemSize = f->memory;
  p->MaxEngineClockMhzFCompute = 1700;
  p->DrmRenderMinor = 128 + (HSAint32)node;
  p->NumSdmaEngines = 2;
  p->NumSdmaXgmiEngines = 0;
  p->NumSdmaQueuesPerEngine = 8;
  p->NumCpQueues = 8;
  p->UniqueID = gpu_ids[node - 1];
  p->VGPRSizePerCU = 512 * 1024;
  p->SGPRSizePerCU = 800 * 8 * 4;
  set_name(p, f->name);
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
  const unsigned long long sizes[4] = {facts[node - 1].memory, 64ull << 10, 4ull << 30, 1ull << 47};
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

/* No event is ever signalled by an interrupt here: a wait lasts its time, at most 1 ms, so that
 * ROCr, which then looks at its signals' values again, does not spin a core. */
static HSAKMT_STATUS wait_a_little(HSAuint32 ms) {
  const struct timespec pause = {0, (long)(ms < 1 ? ms : 1) * 1000000L};
  if (pause.tv_nsec > 0) nanosleep(&pause, NULL);
  return HSAKMT_STATUS_WAIT_TIMEOUT;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtWaitOnEvent(HsaEvent* event, HSAuint32 ms) {
  (void)event;
  return wait_a_little(ms);
}

HSAKMT_STATUS HSAKMTAPI hsaKmtWaitOnMultipleEvents(HsaEvent* events[], HSAuint32 count, bool all,
                                                   HSAuint32 ms) {
  (void)events;
  (void)count;
  (void)all;
  return wait_a_little(ms);
}

/* ---- queues, and the command processor that completes their packets ---- */

struct queue {
  _Atomic HSAuint64 doorbell; /* what ROCr rings; the write index below says more (see below) */
  volatile HSAuint64* read;   /* the next packet to take (ROCr's read_dispatch_id) */
  volatile HSAuint64* write;  /* one past the last packet slot ROCr has taken (write_dispatch_id) */
  unsigned char* ring;
  HSAuint64 slots; /* 64-byte packets */
  int live;
};

#define MAX_QUEUES 256
static struct queue queue_table[MAX_QUEUES];
static int gpu_noted[MAX_GPUS];
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static int processor_started;

static HSAuint64 now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (HSAuint64)t.tv_sec * 1000000000u + (HSAuint64)t.tv_nsec;
}

/* A packet's completion signal (an amd_signal_t: the value at offset 8, the event mailbox at 16,
 * the event's id at 24, the packet's start and end times at 32 and 40, as ROCr lays it out)
 * counts one down, its times set (ROCr warns of a signal whose times are unset). */
static void complete(HSAuint64 signal) {
  if (signal == 0) return;
  const HSAuint64 t = now_ns();
  *(volatile HSAuint64*)(uintptr_t)(signal + 32) = t;
  *(volatile HSAuint64*)(uintptr_t)(signal + 40) = t;
  atomic_fetch_sub((_Atomic int64_t*)(uintptr_t)(signal + 8), 1);
  const HSAuint64 mailbox = *(volatile HSAuint64*)(uintptr_t)(signal + 16);
  if (mailbox != 0)
    *(volatile HSAuint64*)(uintptr_t)mailbox = *(volatile HSAuint32*)(uintptr_t)(signal + 24);
}

/* The command processor: every packet from the read index up to the write index whose header is
 * written (a slot taken but not yet written still has the invalid type, 1) is completed, then
 * marked invalid again as the HSA packet rules ask of a packet processor, so that a slot used
 * again after the ring wraps is taken only once ROCr has written it anew. (The doorbell is not
 * read: with the node properties given here ROCr rings a 32-bit one, half a 64-bit index.) */
static void* command_processor(void* unused) {
  (void)unused;
  for (;;) {
    pthread_mutex_lock(&queue_lock);
    for (unsigned q = 0; q < MAX_QUEUES; ++q) {
      struct queue* Q = &queue_table[q];
      if (!Q->live) continue;
      while (*Q->read < *Q->write) {
        unsigned char* packet = Q->ring + (*Q->read % Q->slots) * 64;
        _Atomic HSAuint16* header = (_Atomic HSAuint16*)packet;
        if ((atomic_load(header) & 0xff) == 1) break;  /* not written yet */
        complete(*(volatile HSAuint64*)(packet + 56)); /* every packet type has it there */
        atomic_store(header, (HSAuint16)1);
        *Q->read += 1;
      }
    }
    pthread_mutex_unlock(&queue_lock);
    const struct timespec pause = {0, 500000};
    nanosleep(&pause, NULL);
  }
  return NULL;
}

/* Records this process on the GPU of `node` in the simulated machine's usage folder. */
/* The simulator's machine reader, found as the simulated libraries are: by name, else in each
 * folder of LD_LIBRARY_PATH or the one above it (gpusel sim env puts the AMD folder, amd/, there).
 * NULL when it cannot be loaded. */
static void* machines_library(void) {
  static void* lib;
  static int tried;
  if (tried) return lib;
  tried = 1;
  lib = dlopen("libgpusel-sim-machines.so", RTLD_NOW | RTLD_LOCAL);
  const char* path = getenv("LD_LIBRARY_PATH");
  while (lib == NULL && path != NULL && *path != '\0') {
    const char* colon = strchr(path, ':');
    const size_t n = colon != NULL ? (size_t)(colon - path) : strlen(path);
    char file[4096];
    for (int up = 0; up < 2 && lib == NULL; ++up) {
      if (snprintf(file, sizeof file, "%.*s%s/libgpusel-sim-machines.so", (int)n, path,
                   up ? "/.." : "") < (int)sizeof file)
        lib = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    }
    path = colon != NULL ? colon + 1 : path + n;
  }
  return lib;
}

/* Records this process on the GPU of `node` in the simulated machine's usage folder. */
static void note_gpu_in_use(HSAuint32 node) {
  const char* machine = getenv("GPUSEL_SIM_MACHINE");
  if (machine == NULL || gpu_noted[node - 1] || gpu_ids[node - 1] == 0) return;
  gpu_noted[node - 1] = 1;
  typedef int (*note_fn)(const char*, const char*, HSAuint64, const char*);
  void* lib = machines_library();
  note_fn note = lib != NULL ? (note_fn)dlsym(lib, "gpuselSimNoteUsage") : NULL;
  char uuid[32];
  snprintf(uuid, sizeof uuid, "GPU-%016llx", gpu_ids[node - 1]);
  if (note == NULL || note(machine, uuid, 0, kSelf) != 0)
    fprintf(stderr, "%s: cannot record %s in use on %s\n", kSelf, uuid, machine);
}

HSAKMT_STATUS HSAKMTAPI hsaKmtCreateQueue(HSAuint32 node, HSA_QUEUE_TYPE type, HSAuint32 percent,
                                          HSA_QUEUE_PRIORITY priority, void* address,
                                          HSAuint64 size, HsaEvent* event,
                                          HsaQueueResource* resource) {
  (void)percent;
  (void)priority;
  (void)event;
  /* ROCr makes AQL queues (its blit kernels and HIP's streams) and gives its own read and write
   * indices; SDMA queues are not made (ROCr then copies with kernels). */
  if (!is_gpu(node) || resource == NULL || address == NULL || size < 64 ||
      type != HSA_QUEUE_COMPUTE_AQL || resource->Queue_read_ptr_aql == NULL ||
      resource->Queue_write_ptr_aql == NULL)
    return HSAKMT_STATUS_INVALID_PARAMETER;
  pthread_mutex_lock(&queue_lock);
  unsigned q = 0; /* a destroyed queue's slot is taken again, as the kernel reuses queue ids */
  while (q < MAX_QUEUES && queue_table[q].live) ++q;
  if (q == MAX_QUEUES) {
    pthread_mutex_unlock(&queue_lock);
    return HSAKMT_STATUS_OUT_OF_RESOURCES;
  }
  struct queue* Q = &queue_table[q];
  atomic_store(&Q->doorbell, 0);
  Q->read = (volatile HSAuint64*)resource->Queue_read_ptr_aql;
  Q->write = (volatile HSAuint64*)resource->Queue_write_ptr_aql;
  Q->ring = address;
  Q->slots = size / 64;
  Q->live = 1;
  resource->QueueId = q + 1;
  resource->Queue_DoorBell_aql = (HSAuint64*)&Q->doorbell;
  if (!processor_started) {
    pthread_t thread;
    if (pthread_create(&thread, NULL, command_processor, NULL) == 0) {
      pthread_detach(thread);
      processor_started = 1;
    }
  }
  note_gpu_in_use(node);
  pthread_mutex_unlock(&queue_lock);
  return HSAKMT_STATUS_SUCCESS;
}

static struct queue* queue_of(HSA_QUEUEID id) {
  return id >= 1 && id <= MAX_QUEUES && queue_table[id - 1].live ? &queue_table[id - 1] : NULL;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtUpdateQueue(HSA_QUEUEID queue, HSAuint32 percent,
                                          HSA_QUEUE_PRIORITY priority, void* address,
                                          HSAuint64 size, HsaEvent* event) {
  (void)percent;
  (void)priority;
  (void)address;
  (void)size;
  (void)event;
  pthread_mutex_lock(&queue_lock);
  const int known = queue_of(queue) != NULL;
  pthread_mutex_unlock(&queue_lock);
  return known ? HSAKMT_STATUS_SUCCESS : HSAKMT_STATUS_INVALID_HANDLE;
}

/* ROCr frees the ring and its indices after this: the processor lets go of them first. */
HSAKMT_STATUS HSAKMTAPI hsaKmtDestroyQueue(HSA_QUEUEID queue) {
  pthread_mutex_lock(&queue_lock);
  struct queue* Q = queue_of(queue);
  if (Q != NULL) Q->live = 0;
  pthread_mutex_unlock(&queue_lock);
  return Q != NULL ? HSAKMT_STATUS_SUCCESS : HSAKMT_STATUS_INVALID_HANDLE;
}

HSAKMT_STATUS HSAKMTAPI hsaKmtSetQueueCUMask(HSA_QUEUEID queue, HSAuint32 count, HSAuint32* mask) {
  (void)count;
  (void)mask;
  pthread_mutex_lock(&queue_lock);
  const int known = queue_of(queue) != NULL;
  pthread_mutex_unlock(&queue_lock);
  return known ? HSAKMT_STATUS_SUCCESS : HSAKMT_STATUS_INVALID_HANDLE;
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
