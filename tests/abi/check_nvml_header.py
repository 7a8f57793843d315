#!/usr/bin/env python3
"""The NVML ABI gpusel declares by hand (src/driver/nvml.def, src/driver/nvml_abi.hpp) against
NVIDIA's own nvml.h, at compile time (static_assert, as PyTorch checks its copies of NVIDIA's
prototypes):
- every function of nvml.def has the prototype nvml.h gives the symbol it names (nvml.h's
  "auto upgrading" macros are switched off with NVML_NO_UNVERSIONED_FUNC_DEFS, so an unversioned
  name such as nvmlDeviceGetMemoryInfo means the unversioned symbol, as dlsym finds it);
- every struct of nvml_abi.hpp has nvml.h's size, and each field its offset, size and type;
- every NVML_* enumerator of nvml_abi.hpp has nvml.h's value;
- every constant of gpusel::abi has the value of the nvml.h name it stands for (CONSTANTS below;
  a constant without an entry there fails the check).
Types are compared by ABI (same_abi below): integers by size and signedness, nvml.h's enums
(nvmlReturn_t, nvmlEnableState_t, ...) as integers of their size, of either signedness, nvml.h's
device handle and structs as gpusel's.

nvml.h comes from Debian's libnvidia-ml-dev (non-free): NVML_INCLUDE_DIR when it holds nvml.h,
else EXTRAS/root/usr/include, fetched there first with scripts/fetch-extras (a private apt
configuration; nothing is installed) when absent.

Usage: check_nvml_header.py [--self-test] CXX SOURCE_DIR EXTRAS [NVML_INCLUDE_DIR]
--self-test: the check must fail on each of MUTATIONS, copies of nvml.def and nvml_abi.hpp with
one deliberate drift each (and pass on the unchanged copy), so that it is known not to be vacuous.
Exit 77 (skipped) when nvml.h is neither given nor fetchable (offline); 1, with the compiler's
message, on any drift.
"""

import os
import re
import subprocess
import sys
import tempfile

from mutation_test import run_mutations
from nvml_header_common import SAME_ABI, fetch

# gpusel::abi's constants and the nvml.h expression each must equal.
CONSTANTS = {
    "kNvmlMemoryV2Version": "nvmlMemory_v2",
    "kNvmlUuidBuffer": "NVML_DEVICE_UUID_V2_BUFFER_SIZE",
    "kNvmlNameBuffer": "NVML_DEVICE_NAME_V2_BUFFER_SIZE",
    "kNvmlDriverVersionBuffer": "NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE",
    "kNvmlDeviceMigEnable": "NVML_DEVICE_MIG_ENABLE",
    "kNvmlP2PCapsIndexNvlink": "NVML_P2P_CAPS_INDEX_NVLINK",
    "kNvmlP2PStatusOk": "NVML_P2P_STATUS_OK",
}

PRELUDE = r'''
#include <cstddef>
#include <type_traits>

#define NVML_NO_UNVERSIONED_FUNC_DEFS
#include <nvml.h>

namespace ours {
#include "nvml_abi.hpp"
}
''' + SAME_ABI


# One drift each, in the file named: (file, text, replacement). Each must fail the check.
MUTATIONS = [
    ("nvml.def", "GPUSEL_NVML(nvmlDeviceGetCudaComputeCapability, false, nvmlReturn_t, (nvmlDevice_t, int*, int*))",
     "GPUSEL_NVML(nvmlDeviceGetCudaComputeCapability, false, nvmlReturn_t, (nvmlDevice_t, unsigned int*, int*))"),
    ("nvml.def", "GPUSEL_NVML(nvmlDeviceGetCpuAffinity, false, nvmlReturn_t, (nvmlDevice_t, unsigned int, unsigned long*))",
     "GPUSEL_NVML(nvmlDeviceGetCpuAffinity, false, nvmlReturn_t, (nvmlDevice_t, unsigned long*))"),
    ("nvml.def", "GPUSEL_NVML(nvmlErrorString, false, const char*, (nvmlReturn_t))",
     "GPUSEL_NVML(nvmlErrorString, false, char*, (nvmlReturn_t))"),
    ("nvml_abi.hpp", "  unsigned long long reserved;\n", ""),
    ("nvml_abi.hpp", "  char busId[32];", "  char busId[16];"),
    ("nvml_abi.hpp", "  unsigned int gpuInstanceId;\n  unsigned int computeInstanceId;",
     "  unsigned int computeInstanceId;\n  unsigned int gpuInstanceId;"),
    ("nvml_abi.hpp", "NVML_ERROR_GPU_IS_LOST = 15,", "NVML_ERROR_GPU_IS_LOST = 14,"),
    ("nvml_abi.hpp", "kNvmlUuidBuffer = 96;", "kNvmlUuidBuffer = 80;"),
]


def self_test(cxx, source, include):
    """The check passes on a copy of src/driver and fails on each mutation of it (MUTATIONS name
    files in src/driver)."""
    driver = os.path.join("src", "driver")
    mutations = [(os.path.join(driver, name), old, new) for name, old, new in MUTATIONS]
    return run_mutations(source, (driver,), mutations, lambda tree, _: check(cxx, tree, include, quiet=True),
                         "src/driver")


def main(argv):
    test = argv[:1] == ["--self-test"]
    if test:
        argv = argv[1:]
    if len(argv) not in (3, 4):
        sys.exit(__doc__)
    cxx, source, extras = argv[0], argv[1], argv[2]
    given = argv[3] if len(argv) == 4 else ""
    if given and os.path.isfile(os.path.join(given, "nvml.h")):
        include = given
    else:
        include = fetch(source, extras)
        if include is None:
            print("nvml.h: not given (GPUSEL_NVML_INCLUDE_DIR) and scripts/fetch-extras could not fetch "
                  "libnvidia-ml-dev (above; offline?): skipped")
            return 77
    return self_test(cxx, source, include) if test else check(cxx, source, include)


def check(cxx, source, include, quiet=False):
    driver = os.path.join(source, "src", "driver")
    with open(os.path.join(driver, "nvml.def")) as f:
        functions = re.findall(r"^GPUSEL_NVML\((\w+),", f.read(), re.M)
    with open(os.path.join(driver, "nvml_abi.hpp")) as f:
        abi_header = f.read()
    enumerators = re.findall(r"^\s+(NVML_[A-Z0-9_]+) = ", abi_header, re.M)
    structs = re.findall(r"^typedef struct \{\n(.*?)^\} (\w+);", abi_header, re.M | re.S)
    constants = re.findall(r"^constexpr \w+(?: \w+)* (k\w+) = ", abi_header, re.M)
    if len(functions) < 20 or len(enumerators) < 10 or len(structs) < 4 or len(constants) < 4:
        print(f"read only {len(functions)} functions, {len(enumerators)} enumerators, {len(structs)} structs and "
              f"{len(constants)} constants: the parser is out of date")
        return 1
    unmapped = [c for c in constants if c not in CONSTANTS]
    if unmapped:
        print(f"gpusel::abi constants without an nvml.h counterpart in {__file__}'s CONSTANTS: {', '.join(unmapped)}")
        return 1

    unit = [PRELUDE]
    for _, name in structs:
        unit.append(f"template <> struct ours_of<::{name}> {{ using type = ours::{name}; }};")
    unit.append('static_assert(sizeof(::nvmlReturn_t) == sizeof(ours::nvmlReturn_t), "nvmlReturn_t");')
    fields_checked = 0
    for body, name in structs:
        unit.append(f'static_assert(sizeof(::{name}) == sizeof(ours::{name}), "nvml_abi.hpp: sizeof({name}) differs from nvml.h");')
        for field in re.findall(r"^\s+[\w ]+?\**\s*(\w+)(?:\[\w+\])?;", body, re.M):
            fields_checked += 1
            where = f"{name}::{field}"
            unit.append(f"static_assert(offsetof(::{name}, {field}) == offsetof(ours::{name}, {field}) &&\n"
                        f"              sizeof(::{name}::{field}) == sizeof(ours::{name}::{field}) &&\n"
                        f"              same_abi<decltype(::{name}::{field}), decltype(ours::{name}::{field})>(),\n"
                        f'              "nvml_abi.hpp: {where} differs from nvml.h");')
    for name in enumerators:
        unit.append(f"static_assert(static_cast<long long>(ours::{name}) == static_cast<long long>(::{name}),\n"
                    f'              "nvml_abi.hpp: {name} differs from nvml.h");')
    for ours_name, theirs in CONSTANTS.items():
        unit.append(f"static_assert(static_cast<long long>(ours::gpusel::abi::{ours_name}) == static_cast<long long>({theirs}),\n"
                    f'              "nvml_abi.hpp: gpusel::abi::{ours_name} differs from nvml.h\'s {theirs}");')
    # The functions, through nvml.def itself: each line's own return type and parameter list,
    # read inside namespace ours (so they name gpusel's types), against the symbol's declaration.
    unit.append(r'''
#define GPUSEL_NVML(name, required, ret, params)                                                  \
  namespace ours {                                                                              \
  using name##_fn = ret(*) params;                                                              \
  }                                                                                             \
  static_assert(same_abi<decltype(&::name), ours::name##_fn>(),                                 \
                "nvml.def: " #name " differs from nvml.h");
#include "nvml.def"
#undef GPUSEL_NVML
''')
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "nvml_header_check.cpp")
        with open(path, "w") as f:
            f.write("\n".join(unit) + "\n")
        r = subprocess.run([cxx, "-std=c++20", "-fsyntax-only", "-Wall", "-Werror", "-I", driver, "-isystem", include,
                            path], capture_output=True, text=True)
    if r.returncode != 0:
        if quiet:  # (a drift, found by a static_assert, or another compiler error)
            return 1 if "differs from nvml.h" in r.stderr else 3
        print(r.stdout + r.stderr)
        print(f"gpusel's NVML declarations drifted from {include}/nvml.h (above): fix src/driver/nvml.def or "
              "nvml_abi.hpp (and the simulator, which is built from them)")
        return 1
    if not quiet:
        print(f"{len(functions)} functions of nvml.def, {len(structs)} structs ({fields_checked} fields), "
              f"{len(enumerators)} enumerators and {len(constants)} constants of nvml_abi.hpp match {include}/nvml.h")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
