#!/usr/bin/env python3
"""The simulator's CUDA exports against NVIDIA's own headers, at compile time.

Driver (libcuda.so.1): every line of sim/cuda_exports.inc is expanded by the compiler itself (the
macro list the library is built from, not a copy), its parameter list read inside namespace ours,
where the simulator's types are (sim/cuda_sim.hpp, src/driver/cuda_abi.hpp), and held against the
prototype cuda.h gives that exact symbol. cuda.h is read with __CUDA_API_VERSION_INTERNAL, as a
driver is built, so that every exported name (cuMemAlloc_v2, the legacy cuMemAlloc, cuMemcpy_ptds)
is declared as itself rather than renamed to the current version.

Runtime (libcudart.so.13): every function sim/cudart.cpp defines with parameters (the file as the
preprocessor gives it for GPUSEL_CUDART_MAJOR=13) is held against cuda_runtime_api.h (or, for the
registration entry points nvcc's generated code calls, crt/host_runtime.h). The functions of
cudart_unmodelled.inc take no parameters on purpose (they never read them) and are not checked.

Types are compared by ABI: integers by size and signedness, NVIDIA's enums as integers of their
size, structs passed by value by size and alignment, a pointer to a struct or to void as any other
such pointer with the same const (NVIDIA's handles are pointers to structs only the driver
completes; the simulated runtime passes cudaDeviceProp and streams as void*), but two complete
structs behind pointers must have one size. The structs the simulator lays out itself (dim3,
cudaChannelFormatDesc, cudaPointerAttributes, cudaDeviceProp, CUipcMemHandle, CUipcEventHandle)
are held against NVIDIA's field by field.

An export the header does not declare fails the check unless ABSENT lists it with the reason.

Usage: check_sim_cuda_header.py [--self-test] CXX SOURCE_DIR [CUDA_INCLUDE_DIR]
  (default /usr/local/cuda/include)
--self-test: the check must fail on each of MUTATIONS (a copy of the sources with one deliberate
drift each) and pass on the unchanged copy. Exit 77 (skipped) when cuda.h is absent; 1, with the
compiler's message, on any drift.
"""

import os
import re
import subprocess
import sys
import tempfile

from mutation_test import run_mutations

# Exports no header of the CUDA 13 toolkit declares, and why.
ABSENT = {
    "__cudaRegisterHostVar": "an nvcc registration entry point NVIDIA's runtime exports but no toolkit header declares",
    "__cudaRegisterUnifiedTable": "an nvcc registration entry point NVIDIA's runtime exports but no toolkit header "
                                  "declares",
}

# Exports CUDA 13's headers no longer declare, each checked against the function that has its
# prototype there, and why.
SAME_AS = {
    "cudaGetDeviceProperties_v2": ("cudaGetDeviceProperties", "CUDA 12's name for the call; CUDA 13 made it the "
                                   "unversioned one and still exports both"),
    "cudaEventElapsedTime_v2": ("cudaEventElapsedTime", "CUDA 12.8's name; CUDA 13 made it the unversioned one"),
    "cudaThreadSynchronize": ("cudaDeviceSynchronize", "deprecated since CUDA 4, gone from CUDA 13's header, "
                              "still exported by the runtimes the simulator stands in for"),
    "cudaThreadExit": ("cudaDeviceReset", "deprecated since CUDA 4, gone from CUDA 13's header, still exported"),
}

SAME_ABI = r'''
template <typename T>
constexpr bool opaque_v = std::is_class_v<std::remove_cv_t<T>> || std::is_void_v<std::remove_cv_t<T>>;
template <typename T, typename = void> struct complete : std::false_type {};
template <typename T> struct complete<T, std::void_t<decltype(sizeof(T))>> : std::true_type {};

template <typename T, typename U> constexpr bool same_abi();
template <typename R, typename... A, typename S, typename... B>
constexpr bool same_function(R (*)(A...), S (*)(B...)) {
  if constexpr (sizeof...(A) != sizeof...(B)) {
    return false;
  } else {
    return same_abi<R, S>() && (same_abi<A, B>() && ...);
  }
}
// Two pointees: both structs (or void) with one const, of one size where both are complete; else
// the same ABI.
template <typename T, typename U>
constexpr bool same_pointee() {
  if constexpr (opaque_v<T> || opaque_v<U>) {
    if constexpr (!opaque_v<T> || !opaque_v<U> || std::is_const_v<T> != std::is_const_v<U>) {
      return false;
    } else if constexpr (std::is_class_v<T> && std::is_class_v<U> && complete<T>::value && complete<U>::value) {
      return sizeof(T) == sizeof(U);
    } else {
      return true;
    }
  } else {
    return same_abi<T, U>();
  }
}
template <typename T, typename U>
constexpr bool same_abi() {
  if constexpr (std::is_same_v<T, U>) {
    return true;
  } else if constexpr (std::is_const_v<T> || std::is_const_v<U>) {
    return std::is_const_v<T> && std::is_const_v<U> &&
           same_abi<std::remove_const_t<T>, std::remove_const_t<U>>();
  } else if constexpr (std::is_pointer_v<T> && std::is_pointer_v<U>) {
    using PT = std::remove_pointer_t<T>;
    using PU = std::remove_pointer_t<U>;
    if constexpr (std::is_function_v<PT> && std::is_function_v<PU>) {
      return same_function(static_cast<T>(nullptr), static_cast<U>(nullptr));
    } else {
      return same_pointee<PT, PU>();
    }
  } else if constexpr (std::is_array_v<T> && std::is_array_v<U>) {
    return std::extent_v<T> == std::extent_v<U> &&
           same_abi<std::remove_extent_t<T>, std::remove_extent_t<U>>();
  } else if constexpr ((std::is_enum_v<T> && (std::is_integral_v<U> || std::is_enum_v<U>)) ||
                       (std::is_integral_v<T> && std::is_enum_v<U>)) {
    return sizeof(T) == sizeof(U);
  } else if constexpr (std::is_integral_v<T> && std::is_integral_v<U>) {
    return sizeof(T) == sizeof(U) && std::is_signed_v<T> == std::is_signed_v<U>;
  } else if constexpr ((std::is_class_v<T> || std::is_array_v<T>) && (std::is_class_v<U> || std::is_array_v<U>)) {
    // a struct by value, or a field that one side names as a struct (cudaUUID_t) and the other
    // as its bytes
    return sizeof(T) == sizeof(U) && alignof(T) == alignof(U);
  } else {
    return false;
  }
}
'''

# The standard headers the simulator's headers include, read before namespace ours opens so that
# their include guards keep them out of it.
STD = ["algorithm", "atomic", "cmath", "cstddef", "cstdint", "cstring", "functional", "map", "memory", "mutex",
       "optional", "set", "stdexcept", "string", "string_view", "type_traits", "utility", "vector"]

DRIVER_PRELUDE = "".join(f"#include <{h}>\n" for h in STD) + r'''
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cudaProfiler.h>

namespace ours {
#include "cuda_sim.hpp"
}
''' + SAME_ABI + r'''
#define SIMCHECK_HEADER(name, params)                                      \
  namespace ours {                                                       \
  using name##_fn = CUresult(*) params;                                  \
  }                                                                      \
  static_assert(same_abi<decltype(&::name), ours::name##_fn>(),          \
                "sim/cuda_exports.inc: " #name " differs from cuda.h");
#define SIMCHECK_ABSENT(name, params)
'''

DRIVER_STRUCTS = [  # (NVIDIA's, the simulator's, fields)
    ("CUipcMemHandle", "CUipcMemHandle", ["reserved"]),
    ("CUipcEventHandle", "CUipcEventHandle", ["reserved"]),
    ("CUDA_MEMCPY2D", "CUDA_MEMCPY2D", ["srcXInBytes", "srcY", "srcMemoryType", "srcHost", "srcDevice", "srcArray",
                                       "srcPitch", "dstXInBytes", "dstY", "dstMemoryType", "dstHost", "dstDevice",
                                       "dstArray", "dstPitch", "WidthInBytes", "Height"]),
    ("CUDA_MEMCPY2D_v1", "CUDA_MEMCPY2D_v1", ["srcXInBytes", "srcY", "srcMemoryType", "srcHost", "srcDevice",
                                             "srcArray", "srcPitch", "dstXInBytes", "dstY", "dstMemoryType", "dstHost",
                                             "dstDevice", "dstArray", "dstPitch", "WidthInBytes", "Height"]),
    ("CUmemLocation", "CUmemLocation", ["type", "id"]),
]

RUNTIME_PRELUDE = "".join(f"#include <{h}>\n" for h in STD) + r'''
#include <cuda_runtime_api.h>
#include <cuda_profiler_api.h>
// The entry points nvcc's generated code calls (__cudaRegisterFatBinary, ...) are declared by a
// header that code reads as nvcc writes it: twice (its first reading only sets up the second),
// marked as the compiler's own. (__cudaPushCallConfiguration and __cudaGetKernel are declared in
// crt/device_functions.h, which needs device compilation: the check copies their declarations
// from it as it runs, DEVICE_FUNCTIONS.)
#define __CUDA_INCLUDE_COMPILER_INTERNAL_HEADERS__
#include <crt/host_runtime.h>
#include <crt/host_runtime.h>

namespace ours {
#include "cudart_abi.hpp"
using namespace gpusel::sim::cudart;
}
''' + SAME_ABI

RUNTIME_STRUCTS = [
    ("dim3", "Dim3", None),
    ("cudaChannelFormatDesc", "ChannelFormatDesc", None),
    ("cudaPointerAttributes", "PointerAttributes", None),
    ("cudaDeviceProp", "DeviceProp13", None),
    ("cudaMemLocation", "MemLocation", None),
    ("cudaIpcMemHandle_t", "IpcMemHandle", None),
]


def read(path):
    with open(path) as f:
        return f.read()


def struct_checks(theirs, ours, fields, header):
    out = [f'static_assert(sizeof(::{theirs}) == sizeof(ours::{ours}) && alignof(::{theirs}) == alignof(ours::{ours}),\n'
           f'              "{ours} differs from {header}\'s {theirs}");']
    for field in fields:
        out.append(f"static_assert(offsetof(::{theirs}, {field}) == offsetof(ours::{ours}, {field}) &&\n"
                   f"              same_abi<decltype(::{theirs}::{field}), decltype(ours::{ours}::{field})>(),\n"
                   f'              "{ours}::{field} differs from {header}\'s {theirs}");')
    return out


def struct_fields(text, name):
    """The field names of `struct NAME { ... };` in TEXT (arrays and pointers included)."""
    m = re.search(rf"^struct {name} \{{\n(.*?)^\}};", text, re.M | re.S)
    if not m:
        return None
    body = re.sub(r"//[^\n]*", "", m.group(1))
    return [f for group in re.findall(r"^\s+[\w: ]+?\**\s*(\w+(?:\s*,\s*\w+)*)(?:\[\w+\])*;", body, re.M)
            for f in re.split(r"\s*,\s*", group)]


def driver_unit(source, include):
    sim = os.path.join(source, "sim")
    exports = re.findall(r"^SIM_CU(?:_AS)?\((\w+),", read(os.path.join(sim, "cuda_exports.inc")), re.M)
    if len(exports) < 100:
        return None, f"read only {len(exports)} exports from sim/cuda_exports.inc: the parser is out of date"
    unit = [DRIVER_PRELUDE]
    for name in exports:
        unit.append(f"#define SIMCHECK_{name} SIMCHECK_{'ABSENT' if name in ABSENT else 'HEADER'}")
    unit.append("#define SIM_CU(name, params, args) SIMCHECK_##name(name, params)")
    unit.append("#define SIM_CU_AS(name, implementation, params, args) SIMCHECK_##name(name, params)")
    unit.append('#include "cuda_exports.inc"')
    for theirs, ours, fields in DRIVER_STRUCTS:
        unit += struct_checks(theirs, ours, fields, "cuda.h")
    return unit, len(exports)


def runtime_exports(cxx, source):
    """(return type, name, parameters) of each function sim/cudart.cpp defines for CUDA 13."""
    sim = os.path.join(source, "sim")
    r = subprocess.run([cxx, "-std=c++20", "-E", "-P", "-DGPUSEL_CUDART_MAJOR=13", "-I", sim,
                        os.path.join(sim, "cudart.cpp")], capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr
    marker = r'extern "C" __attribute__\(\(visibility\("default"\)\)\)'
    found = re.findall(marker + r"\s+([\w\s\*]+?)\s*\b(\w+)\s*\(((?:[^()]|\([^()]*\))*)\)\s*\{", r.stdout)
    unmodelled = set(re.findall(r"^SIM_CUDART_UNMODELLED\((\w+)\)", read(os.path.join(sim, "cudart_unmodelled.inc")),
                                re.M))
    return [(ret.strip(), name, params.strip()) for ret, name, params in found if name not in unmodelled], None


# Declared in crt/device_functions.h, which only nvcc can read whole: each declaration is taken from
# the header's text when the check runs, without its device qualifiers and default arguments.
DEVICE_FUNCTIONS = ["__cudaPushCallConfiguration", "__cudaGetKernel", "__cudaLaunchKernel", "__cudaLaunchKernel_ptsz"]


def device_function_declarations(include):
    text = read(os.path.join(include, "crt", "device_functions.h"))
    out = []
    for name in DEVICE_FUNCTIONS:
        m = re.search(rf'extern "C"[\w\s]*?\b(\w+)\s+CUDARTAPI\s+{name}\s*\(([^;]*?)\);', text)
        if not m:
            return None, f"found no declaration of {name} in {include}/crt/device_functions.h: the parser is out of date"
        params = re.sub(r"\s*=\s*[\w.]+", "", m.group(2))
        out.append(f'extern "C" {m.group(1)} {name}({params});')
    return out, None


def runtime_unit(cxx, source, include):
    exports, error = runtime_exports(cxx, source)
    if exports is None:
        return None, error
    if len(exports) < 80:
        return None, f"read only {len(exports)} functions from sim/cudart.cpp: the parser is out of date"
    headers = "".join(read(os.path.join(include, h)) for h in ("cuda_runtime_api.h", os.path.join("crt", "host_runtime.h")))
    names = {name for _, name, _ in exports}
    errors = [f"{name}: ABSENT says no header declares it, but one does now: remove it from ABSENT"
              for name in ABSENT if re.search(rf"\b{name}\s*\(", headers)]
    errors += [f"{name}: listed in ABSENT or SAME_AS but sim/cudart.cpp does not define it"
               for name in list(ABSENT) + list(SAME_AS) if name not in names]
    if errors:
        return None, "\n".join(errors)
    abi = read(os.path.join(source, "sim", "cudart_abi.hpp"))
    declarations, error = device_function_declarations(include)
    if declarations is None:
        return None, error
    unit = [RUNTIME_PRELUDE] + declarations
    for ret, name, params in exports:
        if name in ABSENT:
            continue
        # The per-thread default stream's variants (cudaMemcpy_ptds, ...): the header declares each
        # by renaming the plain name when a program asks for them, so they share its prototype.
        theirs = SAME_AS.get(name, (re.sub(r"_pt(?:ds|sz)$", "", name) if name not in DEVICE_FUNCTIONS else name,))[0]
        unit.append(f"namespace ours {{ using {name}_fn = {ret} (*)({params or 'void'}); }}\n"
                    f"static_assert(same_abi<decltype(&::{theirs}), ours::{name}_fn>(),\n"
                    f'              "sim/cudart.cpp: {name} differs from cuda_runtime_api.h");')
    for theirs, ours, _ in RUNTIME_STRUCTS:
        fields = struct_fields(abi, ours)
        if not fields:
            return None, f"found no struct {ours} in sim/cudart_abi.hpp: the parser is out of date"
        # CUDA 13's cudaDeviceProp ends in reserved[56] where the simulator's may name its own.
        unit += struct_checks(theirs, ours, fields, "cuda_runtime_api.h")
    return unit, len(exports)


def compile_unit(cxx, source, include, unit, name):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            f.write("\n".join(unit) + "\n")
        return subprocess.run([cxx, "-std=c++20", "-fsyntax-only", "-Wall", "-Werror", "-Wno-deprecated-declarations",
                               "-I", os.path.join(source, "sim"), "-I", os.path.join(source, "src", "driver"),
                               "-isystem", include, path], capture_output=True, text=True)


def check(cxx, source, include, quiet=False, only=None):
    """0 when every export matches; 1 on a drift; 3 (quiet) on another compiler error. `only`:
    "driver" or "runtime", to check one library (the self-test's mutations each touch one)."""
    failed = False
    counts = {}
    units = (("driver", lambda: driver_unit(source, include)), ("runtime", lambda: runtime_unit(cxx, source, include)))
    for what, make in units:
        if only not in (None, what):
            continue
        unit, n = make()
        if unit is None:
            if not quiet:
                print(n)
            return 1
        r = compile_unit(cxx, source, include, unit, f"sim_cuda_{what}_check.cpp")
        if r.returncode != 0:
            failed = True
            if quiet:
                if os.environ.get("GPUSEL_CHECK_VERBOSE"):
                    print("\n".join(line for line in r.stderr.splitlines() if "error" in line)[:800])
                drift = "differs from" in r.stderr or re.search(r".::_*cu\w+. has not been declared", r.stderr)
                if not drift:
                    return 3
            else:
                print(r.stdout + r.stderr)
        counts[what] = n
    if failed:
        if not quiet:
            print(f"the simulator's CUDA exports drifted from {include}/cuda.h or cuda_runtime_api.h (above): fix "
                  "sim/cuda_exports.inc, sim/cudart.cpp or sim/cudart_abi.hpp; an export no header declares goes "
                  "in ABSENT with the reason")
        return 1
    if not quiet:
        print(f"{counts['driver']} exports of sim/cuda_exports.inc match {include}/cuda.h; "
              f"{counts['runtime'] - len(ABSENT)} of the {counts['runtime']} functions sim/cudart.cpp defines for "
              f"CUDA 13 match cuda_runtime_api.h and nvcc's crt headers ({len(SAME_AS)} of them through the function "
              f"that has their prototype now); {len(DRIVER_STRUCTS) + len(RUNTIME_STRUCTS)} structs match field by "
              f"field; not in these headers: " + "; ".join(f"{k} ({v})" for k, v in ABSENT.items()))
    return 0


# One drift each: (file under the source folder, text, replacement). Each must fail the check.
MUTATIONS = [
    ("sim/cuda_exports.inc", "SIM_CU(cuDeviceGetCount, (int* count), (count))",
     "SIM_CU(cuDeviceGetCount, (unsigned int* count), (count))"),
    ("sim/cuda_exports.inc", "SIM_CU(cuDeviceGetName, (char* name, int len, CUdevice dev), (name, len, dev))",
     "SIM_CU(cuDeviceGetName, (int len, char* name, CUdevice dev), (name, len, dev))"),
    ("sim/cuda_exports.inc", "SIM_CU(cuInit, (unsigned int flags), (flags))\n",
     "SIM_CU(cuInit, (unsigned int flags), (flags))\nSIM_CU(cuDeviceFrobnicate, (int* f), (f))\n"),
    ("sim/cuda_exports.inc", "SIM_CU(cuDeviceGetUuid, (CUuuid* uuid, CUdevice dev), (uuid, dev))",
     "SIM_CU(cuDeviceGetUuid, (const CUuuid* uuid, CUdevice dev), (uuid, dev))"),
    ("sim/cuda_sim.hpp", "  char reserved[64];\n} CUipcMemHandle;", "  char reserved[32];\n} CUipcMemHandle;"),
    ("sim/cudart.cpp", "CUDART_API cudaError_t cudaGetDeviceCount(int* count) {",
     "CUDART_API cudaError_t cudaGetDeviceCount(std::size_t* count) {"),
    ("sim/cudart.cpp", "CUDART_API cudaError_t cudaDeviceGetAttribute(int* value, int attribute, int device) {",
     "CUDART_API cudaError_t cudaDeviceGetAttribute(int* value, int device, int attribute, int extra) {"),
    ("sim/cudart_abi.hpp", "  int type;  // cudaMemoryType", "  long type;  // cudaMemoryType"),
    ("sim/cudart_abi.hpp", "  int multiProcessorCount;\n  int integrated;\n  int canMapHostMemory;",
     "  int integrated;\n  int multiProcessorCount;\n  int canMapHostMemory;"),
]


def self_test(cxx, source, include):
    def one(tree, mutation):
        only = None if mutation is None else "runtime" if "cudart" in mutation[0] else "driver"
        return check(cxx, tree, include, quiet=True, only=only)

    return run_mutations(source, ("sim", os.path.join("src", "driver")), MUTATIONS, one, "sim/ and src/driver")


def main(argv):
    test = argv[:1] == ["--self-test"]
    if test:
        argv = argv[1:]
    if len(argv) not in (2, 3):
        sys.exit(__doc__)
    cxx, source = argv[0], argv[1]
    include = argv[2] if len(argv) == 3 and argv[2] else "/usr/local/cuda/include"
    if not (os.path.isfile(os.path.join(include, "cuda.h")) and
            os.path.isfile(os.path.join(include, "cuda_runtime_api.h"))):
        print(f"no {include}/cuda.h and cuda_runtime_api.h (the CUDA toolkit, or Debian's nvidia-cuda-dev): skipped")
        return 77
    return self_test(cxx, source, include) if test else check(cxx, source, include)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
