#!/usr/bin/env python3
"""The CUDA driver ABI gpusel declares by hand (src/driver/cuda.def, src/driver/cuda_abi.hpp)
against NVIDIA's own cuda.h: every function of cuda.def has the prototype cuda.h gives the symbol
it names (the versioned one, e.g. cuDeviceTotalMem_v2, which cuda.h #defines cuDeviceTotalMem to),
every enumerator of cuda_abi.hpp and cuda_errors.def has NVIDIA's value, and the types and CUuuid have NVIDIA's layout.
Types are compared by ABI: integers by size and signedness (cuda.h's cuuint64_t, unsigned long,
is gpusel's unsigned long long), cuda.h's enums (CUresult, CUdevice_attribute) as ints of their
size, NVIDIA's CUuuid as gpusel's.

Usage: check_cuda_header.py CXX SOURCE_DIR [CUDA_INCLUDE_DIR]   (default /usr/local/cuda/include)
Exit 77 (skipped) when cuda.h is absent; 1, with the compiler's message, on any drift.
"""

import os
import re
import subprocess
import sys
import tempfile

PRELUDE = r'''
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <cuda.h>

namespace ours {
#include "cuda_abi.hpp"
}

// A type as the ABI sees it: integers and enums by size (any signedness), NVIDIA's handle and
// UUID structs as gpusel's, through pointers, const and function types.
template <typename T, typename = void>
struct abi { using type = T; };
template <std::size_t N, bool Signed> struct integer {};
template <typename T>
struct abi<T, std::enable_if_t<!std::is_const_v<T> && std::is_integral_v<T>>> {
  using type = integer<sizeof(T), std::is_signed_v<T>>;
};
// cuda.h's enums (CUresult, CUdevice_attribute, ...) are gpusel's ints.
template <typename T>
struct abi<T, std::enable_if_t<!std::is_const_v<T> && std::is_enum_v<T>>> {
  using type = integer<sizeof(T), true>;
};
template <typename T> struct abi<T*> { using type = typename abi<T>::type*; };
template <typename T> struct abi<const T> { using type = const typename abi<T>::type; };
// (gpusel's `struct CUctx_st*` and the other handles find NVIDIA's declarations: the same types.)
template <> struct abi<::CUuuid_st> { using type = ours::CUuuid_st; };
template <typename R, typename... A> struct abi<R (*)(A...)> {
  using type = typename abi<R>::type (*)(typename abi<A>::type...);
};
template <typename T> using abi_t = typename abi<T>::type;

static_assert(sizeof(::CUresult) == sizeof(ours::CUresult));
static_assert(std::is_same_v<abi_t<::CUdevice>, abi_t<ours::CUdevice>>);
static_assert(std::is_same_v<abi_t<::CUdeviceptr>, abi_t<ours::CUdeviceptr>>);
static_assert(sizeof(::CUuuid) == sizeof(ours::CUuuid) && offsetof(::CUuuid, bytes) == 0 &&
              sizeof(::CUuuid::bytes) == sizeof(ours::CUuuid::bytes));
'''


def main(argv):
    if len(argv) not in (2, 3):
        sys.exit(__doc__)
    cxx, source = argv[0], argv[1]
    include = argv[2] if len(argv) == 3 else "/usr/local/cuda/include"
    if not os.path.isfile(os.path.join(include, "cuda.h")):
        print(f"no {include}/cuda.h: skipped")
        return 77
    driver = os.path.join(source, "src", "driver")
    with open(os.path.join(driver, "cuda.def")) as f:
        entries = re.findall(r"^GPUSEL_CUDA\((\w+),\s*(\w+),\s*\w+,\s*(\(.*\))\)\s*$", f.read(), re.M)
    with open(os.path.join(driver, "cuda_abi.hpp")) as f:
        enumerators = re.findall(r"^\s+((?:CUDA|CU)_[A-Z0-9_]+) = ", f.read(), re.M)
    with open(os.path.join(driver, "cuda_errors.def")) as f:
        enumerators += re.findall(r"^GPUSEL_CUDA_ERROR\((CUDA_\w+),", f.read(), re.M)
    if len(entries) < 20 or len(enumerators) < 10:
        print(f"read only {len(entries)} functions and {len(enumerators)} enumerators: the parser is out of date")
        return 1
    unit = [PRELUDE]
    for api, symbol, params in entries:
        params = "()" if params == "(void)" else params
        # Inside namespace ours, cuda.def's parameter lists name gpusel's types.
        unit.append(f"namespace ours {{ using {api}_t = CUresult(*){params}; }}")
        unit.append(f"static_assert(std::is_same_v<abi_t<decltype(&::{symbol})>, abi_t<ours::{api}_t>>,\n"
                    f'              "cuda.def: {api} ({symbol}) differs from cuda.h");')
    for name in enumerators:
        unit.append(f"static_assert(static_cast<long long>(ours::{name}) == static_cast<long long>(::{name}),\n"
                    f'              "cuda_abi.hpp: {name} differs from cuda.h");')
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cuda_header_check.cpp")
        with open(path, "w") as f:
            f.write("\n".join(unit) + "\n")
        r = subprocess.run([cxx, "-std=c++20", "-fsyntax-only", "-Wall", "-Werror", "-I", driver, "-isystem", include,
                            path], capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stdout + r.stderr)
        print(f"gpusel's CUDA declarations drifted from {include}/cuda.h (above): fix src/driver/cuda.def or "
              "cuda_abi.hpp (and the simulator, which is built from them)")
        return 1
    print(f"{len(entries)} functions of cuda.def and {len(enumerators)} enumerators of cuda_abi.hpp match "
          f"{include}/cuda.h")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
