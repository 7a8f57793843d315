/* gpusel: the C ABI of libgpusel (libgpusel.so.2), for C, Rust, Go, Python (ctypes) and others.
 *
 * Every function returns a gpusel_status. On anything but GPUSEL_OK, gpusel_last_error() gives
 * the message for the calling thread. Strings are returned in caller-owned buffers: pass the
 * buffer and its size; when it is too small the call returns GPUSEL_TOO_SMALL and sets *needed
 * (the size including the terminating zero), so a second call can succeed. `needed` may be NULL.
 * Lists are opaque handles, released with their own free function. Nothing here initialises CUDA
 * except gpusel_bind_assigned_gpu, gpusel_assigned_visible_gpu and gpusel_gpu_identity. */
#ifndef GPUSEL_GPUSEL_H
#define GPUSEL_GPUSEL_H

#include <stddef.h>

#include "gpusel/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef int gpusel_status;
#define GPUSEL_OK 0
#define GPUSEL_FAILURE 1   /* NVML or CUDA unavailable, or another failure outside the input */
#define GPUSEL_BAD_INPUT 2 /* a --gpu value, an environment value, a GPU CUDA does not expose */
#define GPUSEL_TOO_SMALL 3 /* the caller's buffer is too small; *needed says how large */

/* The library's version, "MAJOR.MINOR.PATCH": GPUSEL_VERSION_STRING of the gpusel/version.h it was
 * built with. */
GPUSEL_API const char* gpusel_version(void);

/* The message of the calling thread's last failed call; "" when none failed. Valid until the
 * thread's next gpusel call. */
GPUSEL_API const char* gpusel_last_error(void);

/* The calling thread's last failure as data, to decide from (the message's words may change):
 * one of the GPUSEL_ERROR_* codes; GPUSEL_ERROR_NONE when the last call did not fail. */
#define GPUSEL_ERROR_NONE 0
#define GPUSEL_ERROR_UNSPECIFIED 1        /* no code of its own; the message says what */
#define GPUSEL_ERROR_BAD_INPUT 2          /* a value the caller gave */
#define GPUSEL_ERROR_LIBRARY_NOT_LOADED 3 /* libnvidia-ml.so.1 or libcuda.so.1 cannot be opened */
#define GPUSEL_ERROR_LIBRARY_INCOMPLETE 4 /* it lacks functions gpusel needs */
#define GPUSEL_ERROR_CUDA_LINK_STUB 5     /* libcuda.so.1 is the CUDA toolkit's link stub */
#define GPUSEL_ERROR_NO_DEVICE 6          /* CUDA enumerates no device */
#define GPUSEL_ERROR_DRIVER_CALL 7        /* a driver function failed: gpusel_last_error_call */
#define GPUSEL_ERROR_GPU_LOST 8           /* NVML says the GPU fell off the bus */
#define GPUSEL_ERROR_DRIVER_BROKEN 9      /* the driver answered something impossible */
#define GPUSEL_ERROR_PROBE_UNAVAILABLE 10 /* the CUDA probe's helper is missing or cannot start */
#define GPUSEL_ERROR_PROBE_TIMED_OUT 11   /* the CUDA probe did not answer in time */
#define GPUSEL_ERROR_PROBE_FAILED 12      /* the CUDA probe ended without a readable answer */
#define GPUSEL_ERROR_BUFFER_TOO_SMALL 13  /* the status was GPUSEL_TOO_SMALL */
GPUSEL_API int gpusel_last_error_code(void);

/* The NVIDIA driver function whose return value made the calling thread's last call fail
 * ("cuInit", "nvmlInit_v2"), "" when none did; its return value (a CUresult or nvmlReturn_t) in
 * *result when `result` is not NULL (0 when none). Valid until the thread's next gpusel call. */
GPUSEL_API const char* gpusel_last_error_call(long long* result);

/* What the calling thread's last failure is about, by a stable name: "gpu-entry" (one entry of a
 * GPU request), "gpu-request", "cuda-visible-devices", "launch-variable", "gpu", "lease",
 * "command", "probe"; "" when it is about nothing in particular or none failed.
 * Valid until the thread's next gpusel call. */
GPUSEL_API const char* gpusel_last_error_subject(void);

/* The named values of the calling thread's last failure (the entry as given, a variable's value,
 * a GPU's UUID, a stable "reason" word): the name of the i-th, or NULL past the last, and the
 * value of the one named `name`, or NULL when it has none. docs/c-api.md lists them by subject.
 * Valid until the thread's next gpusel call. */
GPUSEL_API const char* gpusel_last_error_field_name(size_t i);
GPUSEL_API const char* gpusel_last_error_field(const char* name);

/* 1 when `entry` starts with "GPU-" in any case / is ASCII digits only, else 0. */
GPUSEL_API int gpusel_is_gpu_uuid(const char* entry);
GPUSEL_API int gpusel_is_gpu_index(const char* entry);

/* A --gpu value -> its canonical entries, comma-separated; "all" alone stays "all", "free:N"
 * stays one entry (gpusel_resolve expands both). */
GPUSEL_API gpusel_status gpusel_parse_gpu_spec(const char* value, char* buf, size_t size,
                                               size_t* needed);
/* The same for a value that must hold exactly one entry. */
GPUSEL_API gpusel_status gpusel_parse_single_gpu(const char* value, char* buf, size_t size,
                                                 size_t* needed);

/* A --gpu value -> full GPU UUIDs, comma-separated, in rank order, as a launcher's parent resolves
 * it (NVML, a preset CUDA_VISIBLE_DEVICES as a quota, a CUDA probe only where NVML cannot tell).
 * "all" gives every GPU this process may use, "free:N" picks N free GPUs (leasing none).
 * *resolved is 1 when NVML answered, 0 when it is unavailable and the entries are passed on. */
GPUSEL_API gpusel_status gpusel_resolve(const char* value, char* buf, size_t size, size_t* needed,
                                        int* resolved);

/* The structs below can grow (later versions only append fields). A caller sets `size` to sizeof
 * the struct it was compiled with before each call; the library then writes the bytes after `size`
 * up to the smaller of that size and the end of its own struct's last field, and never one byte
 * further, whatever `size` says. So a newer library serves an older caller, and a newer caller's
 * fields that an older library does not know keep what the caller put there: initialise the whole
 * struct (as below) and such fields stay zero. `size` itself is never written. A size below the
 * first version's (the struct as declared here in gpusel 0.1) is GPUSEL_BAD_INPUT, and nothing is
 * written.
 *
 *   gpusel_identity id = {sizeof id};
 *   gpusel_gpu_identity(0, &id); */

/* One physical GPU, as NVML and the CUDA_VISIBLE_DEVICES model see it. */
typedef struct gpusel_gpu_info {
  size_t size;               /* set by the caller: sizeof(gpusel_gpu_info) */
  unsigned nvidia_smi_index; /* NVML's index, as nvidia-smi shows it */
  int cuda_ordinal;          /* under this process's environment; -1 hidden or unknown */
  char uuid[96];
  char name[256];
  char pci_bus_id[32];
  unsigned long long total_bytes; /* the GPU's memory */
  int numa_node;                  /* -1 when unknown */
  int cc_major, cc_minor;         /* -1 when unknown */
  int mig_enabled;
} gpusel_gpu_info;

typedef struct gpusel_gpu_list gpusel_gpu_list;

/* Enumerates the GPUs through NVML, then the AMD GPUs ROCm SMI lists (all of them where NVML is
 * unavailable; after NVIDIA's on a machine with both makers' GPUs). For an AMD GPU,
 * nvidia_smi_index holds rocm-smi's index (what `--gpu N` means on a machine of AMD GPUs; UINT_MAX
 * beside NVIDIA's GPUs, where `--gpu N` counts NVIDIA's: name it by uuid) and cuda_ordinal is -1;
 * the fields vendor, rocm_smi_index and hip_ordinal say more. GPUSEL_FAILURE (with the reason) when
 * neither can be read. */
GPUSEL_API gpusel_status gpusel_list_gpus(gpusel_gpu_list** list);
GPUSEL_API size_t gpusel_gpu_list_count(const gpusel_gpu_list* list);
GPUSEL_API gpusel_status gpusel_gpu_list_get(const gpusel_gpu_list* list, size_t i,
                                             gpusel_gpu_info* info);
GPUSEL_API void gpusel_gpu_list_free(gpusel_gpu_list* list);

/* Every field of a GPU by name, from the one table gpusel/gpu_fields.def (docs/design.md): the
 * same names as `gpusel list --json`, so a field added to the table reaches C and Python with no
 * new struct. gpusel_gpu_field_name(k) is the k-th name, k = 0, 1, ...; NULL past the last. */
GPUSEL_API const char* gpusel_gpu_field_name(size_t k);
/* How the k-th field is written: GPUSEL_FIELD_TEXT, _NUMBER (a decimal integer, "-1" possible)
 * or _FLAG ("1" or "0"); -1 past the last. */
#define GPUSEL_FIELD_TEXT 0
#define GPUSEL_FIELD_NUMBER 1
#define GPUSEL_FIELD_FLAG 2
GPUSEL_API int gpusel_gpu_field_kind(size_t k);
/* GPUSEL_LIST_USAGE: also read the fields gpusel/gpu_fields.def reads only with usage (memory in
 * use, utilisation, persistence mode, the power limit: what `gpusel list` alone needs); without
 * it, those fields are absent. */
#define GPUSEL_LIST_USAGE 1u
/* gpusel_list_gpus with `flags` (0 or GPUSEL_LIST_USAGE). */
GPUSEL_API gpusel_status gpusel_list_gpus_with(unsigned flags, gpusel_gpu_list** list);
/* Field `name` of GPU i of the list, as text, copied into buf as gpusel_parse_gpu_spec copies;
 * *present (when not NULL) is 0 where the field is absent (the text is then ""): a number NVML
 * did not give, a GPU's uuid, compute_capability and failure where they do not apply. A text
 * field NVML did not give (name, pci_bus_id, cpus) is present and "", as in `gpusel list --json`.
 * A name not in the table is GPUSEL_BAD_INPUT. */
GPUSEL_API gpusel_status gpusel_gpu_list_field(const gpusel_gpu_list* list, size_t i,
                                               const char* name, char* buf, size_t size,
                                               size_t* needed, int* present);

/* The worker side (see gpusel/worker.hpp). */
GPUSEL_API gpusel_status gpusel_set_assigned_gpu(const char* target);
GPUSEL_API gpusel_status gpusel_assign_gpu(const char* value);
/* Publishes GPUSEL_GPU, else this rank's entry of GPUSEL_GPUS. *rank: the local rank that chose
 * the entry, or -1 (GPUSEL_GPU decided, or neither variable is set and nothing was published). */
GPUSEL_API gpusel_status gpusel_assign_from_environment(int* rank);

/* Where this process's GPU came from (see gpusel/assignment.hpp for the rule). */
#define GPUSEL_SOURCE_NONE (-1) /* nothing published or bound yet */
#define GPUSEL_SOURCE_CODE 0    /* gpusel_set_assigned_gpu or gpusel_assign_gpu */
#define GPUSEL_SOURCE_GPUSEL_GPU 1
#define GPUSEL_SOURCE_GPUSEL_GPUS 2
#define GPUSEL_SOURCE_LAUNCHER 3 /* a launcher's local rank among several visible devices */
#define GPUSEL_SOURCE_SINGLE 4   /* the only visible device */
#define GPUSEL_SOURCE_DEFAULT 5  /* no launcher: the default ordinal */
/* *source: one of GPUSEL_SOURCE_*; *rank: the local rank that decided, or -1. Either may be NULL.
 */
GPUSEL_API gpusel_status gpusel_assignment_source(int* source, int* rank);
/* *rank: the launcher's local rank, or -1 when no local-rank variable is set. */
GPUSEL_API gpusel_status gpusel_local_rank(int* rank);
/* Binds this process's GPU (gpusel::bind_assigned_gpu): *ordinal is its CUDA ordinal, or in a
 * program that has loaded HIP (AMD GPUs) its HIP ordinal, made the current HIP device. */
GPUSEL_API gpusel_status gpusel_bind_assigned_gpu(int default_ordinal, int* ordinal);
/* *ordinal: -1 when nothing is published or bound. */
GPUSEL_API gpusel_status gpusel_assigned_visible_gpu(int* ordinal);
/* After gpusel_bind_assigned_gpu: "" when this process claimed its GPU in full (or shares it on
 * purpose); else why it could not (so another process may bind that GPU too), copied into buf as
 * gpusel_parse_gpu_spec copies. A bind without a claim is also said on stderr, once per process,
 * unless gpusel_set_stderr_warnings(0) was called: a caller that reports this note in its own way
 * (the Python module raises a warning) turns that off. */
GPUSEL_API gpusel_status gpusel_claim_note(char* buf, size_t size, size_t* needed);
GPUSEL_API void gpusel_set_stderr_warnings(int on);

typedef struct gpusel_identity {
  size_t size;          /* set by the caller: sizeof(gpusel_identity) */
  int nvidia_smi_index; /* NVML's index, as nvidia-smi shows it; -1 without NVML */
  int cuda_ordinal;     /* the ordinal asked for: CUDA's numbering in this process */
  char uuid[96];
  char name[256];
  unsigned long long total_bytes; /* the GPU's (or MIG device's) memory */
  int cc_major, cc_minor;         /* -1 when unknown */
  char pci_bus_id[32];
} gpusel_identity;

GPUSEL_API gpusel_status gpusel_gpu_identity(int cuda_ordinal, gpusel_identity* identity);

#ifdef __cplusplus
}
#endif

#endif /* GPUSEL_GPUSEL_H */
