#!/usr/bin/env python3
"""Every NVML function the simulated libnvidia-ml.so.1 exports with parameters (sim/nvml_exports.inc,
and nvmlErrorString, defined on its own in sim/nvml_sim.cpp) against NVIDIA's nvml.h, at compile
time: each line of nvml_exports.inc is read by the compiler itself (the same macro expansion the
library is built from, not a copy), and its parameter list, read inside namespace ours where
nvml_abi.hpp and sim/nvml_sim_types.hpp are, must have the prototype nvml.h gives the symbol,
compared by ABI as check_nvml_header.py compares gpusel's own declarations (nvml_header_common).
Every struct of nvml_sim_types.hpp and nvml_abi.hpp is held against its nvml.h counterpart
(STRUCTS): size, and each field's offset, size and type.

An export with no entry in nvml.h fails the check unless ABSENT lists it with the reason; an ABSENT
entry that nvml.h now declares fails it too (check it instead). LEGACY_PCI lists the exports that
nvml.h declares with today's 68-byte nvmlPciInfo_t but that write the 52-byte struct of their time
(nvmlPciInfoLegacy_t): they are compared with that struct in nvml.h's place, and the legacy struct
with the first 36 bytes of nvml.h's (its last 16 are reserved).

Usage: check_sim_nvml_header.py [--self-test] CXX SOURCE_DIR EXTRAS [NVML_INCLUDE_DIR]
--self-test: the check must fail on each of MUTATIONS (a copy of the sources with one deliberate
drift each) and pass on the unchanged copy. Exit 77 (skipped) when nvml.h is neither given nor
fetchable (offline); 1, with the compiler's message, on any drift.
"""

import os
import re
import subprocess
import sys
import tempfile

from mutation_test import run_mutations
from nvml_header_common import SAME_ABI, fetch

# Exports Debian 12's nvml.h (NVML API 11, driver 525) does not declare, and why.
ABSENT = {
    "nvmlDeviceGetNumaNodeId": "declared by later nvml.h (NVML 12), not by Debian's (API 11)",
    "nvmlDeviceGetCurrentClocksEventReasons": "later nvml.h's (NVML 12) new name of "
                                              "nvmlDeviceGetCurrentClocksThrottleReasons, which is checked",
    "nvmlDeviceGetSupportedClocksEventReasons": "later nvml.h's (NVML 12) new name of "
                                                "nvmlDeviceGetSupportedClocksThrottleReasons, which is checked",
}

# Exports defined on their own in nvml_sim.cpp that are NVIDIA's private entry points (no nvml.h
# declares them), and why the simulator has them.
PRIVATE = {
    "nvmlInternalGetExportTable": "NVIDIA's nvidia-smi asks for it first; the simulator's says once which "
                                  "program answers instead, and refuses",
}

# Exports that write the legacy 52-byte PCI struct where nvml.h names today's 68-byte one.
LEGACY_PCI = ("nvmlDeviceGetPciInfo", "nvmlDeviceGetPciInfo_v2", "nvmlDeviceGetNvLinkRemotePciInfo")

# The simulator's structs (nvml_sim_types.hpp, nvml_abi.hpp) and the nvml.h type each stands for.
# nvml.h's nvmlProcessInfo_v2_t is a struct of its own with nvmlProcessInfo_t's layout: both are
# gpusel's nvmlProcessInfo_t.
STRUCTS = {
    "nvmlPciInfo_t": ["nvmlPciInfo_t"],
    "nvmlMemory_t": ["nvmlMemory_t"],
    "nvmlMemory_v2_t": ["nvmlMemory_v2_t"],
    "nvmlUtilization_t": ["nvmlUtilization_t"],
    "nvmlProcessInfo_t": ["nvmlProcessInfo_t", "nvmlProcessInfo_v2_t"],
    "ProcessInfoV1": ["nvmlProcessInfo_v1_t"],
    "BAR1Memory": ["nvmlBAR1Memory_t"],
    "DeviceAttributes": ["nvmlDeviceAttributes_t"],
    "FieldValue": ["nvmlFieldValue_t"],
    "ProcessUtilizationSample": ["nvmlProcessUtilizationSample_t"],
    "AccountingStats": ["nvmlAccountingStats_t"],
    "GpuInstancePlacement": ["nvmlGpuInstancePlacement_t"],
    "GpuInstanceProfileInfo": ["nvmlGpuInstanceProfileInfo_t"],
    "GpuInstanceProfileInfoV2": ["nvmlGpuInstanceProfileInfo_v2_t"],
    "GpuInstanceInfo": ["nvmlGpuInstanceInfo_t"],
    "ComputeInstancePlacement": ["nvmlComputeInstancePlacement_t"],
    "ComputeInstanceProfileInfo": ["nvmlComputeInstanceProfileInfo_t"],
    "ComputeInstanceProfileInfoV2": ["nvmlComputeInstanceProfileInfo_v2_t"],
    "ComputeInstanceInfo": ["nvmlComputeInstanceInfo_t"],
}

# nvml.h's opaque handles besides nvmlDevice_t (which SAME_ABI maps) and the simulator's.
HANDLES = {"nvmlGpuInstance_st": "gpuselNvmlGpuInstance", "nvmlComputeInstance_st": "gpuselNvmlComputeInstance"}
LEGACY_FIELDS = [("busId", "busIdLegacy"), ("domain", "domain"), ("bus", "bus"), ("device", "device"),
                 ("pciDeviceId", "pciDeviceId"), ("pciSubSystemId", "pciSubSystemId")]

PRELUDE = r'''
#include <cstddef>
#include <type_traits>

#define NVML_NO_UNVERSIONED_FUNC_DEFS
#include <nvml.h>

namespace ours {
#include "nvml_abi.hpp"
#include "nvml_sim_types.hpp"
}
''' + SAME_ABI + r'''
// A field of nvml.h and the simulator's: the same ABI, or nvml.h's union (nvmlValue_t) and the
// member of its size the simulator writes.
template <typename T, typename U>
constexpr bool same_field() {
  if constexpr (std::is_union_v<T>) {
    return sizeof(T) == sizeof(U);
  } else {
    return same_abi<T, U>();
  }
}
'''

# Each export of nvml_exports.inc goes through SIMCHECK_<name>, which the check defines as one of
# these; an export without one is a compiler error, so none can go unchecked.
CHECKS = r'''
#define SIMCHECK_HEADER(name, params)                                                   \
  namespace ours {                                                                    \
  using name##_fn = nvmlReturn_t(*) params;                                           \
  }                                                                                   \
  static_assert(same_abi<decltype(&::name), ours::name##_fn>(),                       \
                "sim/nvml_exports.inc: " #name " differs from nvml.h");
#define SIMCHECK_LEGACY_PCI(name, params)                                               \
  namespace ours::legacy_pci {                                                        \
  using nvmlPciInfoLegacy_t = ::ours::nvmlPciInfo_t;                                  \
  using name##_fn = nvmlReturn_t(*) params;                                           \
  }                                                                                   \
  static_assert(same_abi<decltype(&::name), ours::legacy_pci::name##_fn>(),           \
                "sim/nvml_exports.inc: " #name " differs from nvml.h");
#define SIMCHECK_ABSENT(name, params)                                                   \
  namespace ours {                                                                    \
  using name##_fn = nvmlReturn_t(*) params;                                           \
  }
#define SIM_NVML(name, params, args) SIMCHECK_##name(name, params)
#define SIM_NVML_V2(name, params, args) SIMCHECK_##name(name, params)
#include "nvml_exports.inc"
#undef SIM_NVML
#undef SIM_NVML_V2
'''


def read(path):
    with open(path) as f:
        return f.read()


def struct_checks(theirs, ours, body):
    """static_asserts: nvml.h's struct `theirs` and the simulator's `ours` (its body's fields)."""
    out = [f'static_assert(sizeof(::{theirs}) == sizeof(ours::{ours}), "sizeof({ours}) differs from nvml.h\'s {theirs}");']
    fields = re.findall(r"^\s+[\w ]+?\**\s*(\w+)(?:\[\w+\])?;", body, re.M)
    for field in fields:
        out.append(f"static_assert(offsetof(::{theirs}, {field}) == offsetof(ours::{ours}, {field}) &&\n"
                   f"              sizeof(::{theirs}::{field}) == sizeof(ours::{ours}::{field}) &&\n"
                   f"              same_field<decltype(::{theirs}::{field}), decltype(ours::{ours}::{field})>(),\n"
                   f'              "{ours}::{field} differs from nvml.h\'s {theirs}");')
    return out, len(fields)


def legacy_checks():
    """The legacy PCI struct: nvml.h's nvmlPciInfo_t up to busId, then 16 reserved bytes."""
    out = ["static_assert(sizeof(ours::nvmlPciInfoLegacy_t) == offsetof(::nvmlPciInfo_t, busId) + 16 &&\n"
           "              offsetof(ours::nvmlPciInfoLegacy_t, reserved) == offsetof(::nvmlPciInfo_t, busId),\n"
           '              "nvmlPciInfoLegacy_t differs from the first 36 bytes of nvml.h\'s nvmlPciInfo_t");']
    for ours, theirs in LEGACY_FIELDS:
        out.append(f"static_assert(offsetof(::nvmlPciInfo_t, {theirs}) == offsetof(ours::nvmlPciInfoLegacy_t, {ours}) &&\n"
                   f"              same_abi<decltype(::nvmlPciInfo_t::{theirs}), decltype(ours::nvmlPciInfoLegacy_t::{ours})>(),\n"
                   f'              "nvmlPciInfoLegacy_t::{ours} differs from nvml.h\'s nvmlPciInfo_t::{theirs}");')
    return out


def plan(sim, driver, header, direct):
    """The exports (name -> parameter text), the checks' C++ and a summary, or an error string."""
    exports = dict(re.findall(r"^SIM_NVML(?:_V2)?\((\w+), (\(.*?\)), \(", read(os.path.join(sim, "nvml_exports.inc")), re.M))
    structs = re.findall(r"^(?:struct (\w+) \{\n(.*?)^\};|typedef struct \{\n(.*?)^\} (\w+);)",
                         read(os.path.join(driver, "nvml_abi.hpp")) + read(os.path.join(sim, "nvml_sim_types.hpp")),
                         re.M | re.S)
    structs = {a or d: b or c for a, b, c, d in structs}
    errors = [f"{name}: listed in ABSENT or LEGACY_PCI but not exported" for name in list(ABSENT) + list(LEGACY_PCI)
              if name not in exports]
    errors += [f"{name}: ABSENT says nvml.h lacks it, but it declares it now: remove it from ABSENT"
               for name in ABSENT if re.search(rf"\b{name}\s*\(", header)]
    errors += [f"{name}: in LEGACY_PCI but does not take nvmlPciInfoLegacy_t" for name in LEGACY_PCI
               if "nvmlPciInfoLegacy_t" not in exports.get(name, "nvmlPciInfoLegacy_t")]
    errors += [f"struct {name} (nvml_abi.hpp or nvml_sim_types.hpp) has no nvml.h counterpart in STRUCTS"
               for name in structs if name not in STRUCTS and name != "nvmlPciInfoLegacy_t"]
    errors += [f"STRUCTS names {name}, which is not in nvml_abi.hpp or nvml_sim_types.hpp" for name in STRUCTS
               if name not in structs]
    if len(exports) < 100:
        errors.append(f"read only {len(exports)} exports from nvml_exports.inc: the parser is out of date")
    if errors:
        return None, None, "\n".join(errors)
    unit = [PRELUDE]
    fields = 0
    for theirs, ours in HANDLES.items():
        unit.append(f"template <> struct ours_of<::{theirs}> {{ using type = ours::{ours}; }};")
    for ours, theirs_list in STRUCTS.items():
        for theirs in theirs_list:
            unit.append(f"template <> struct ours_of<::{theirs}> {{ using type = ours::{ours}; }};")
    for ours, theirs_list in STRUCTS.items():
        for theirs in theirs_list:
            lines, n = struct_checks(theirs, ours, structs[ours])
            unit += lines
            fields += n
    unit += legacy_checks()
    for name in exports:
        kind = "ABSENT" if name in ABSENT else "LEGACY_PCI" if name in LEGACY_PCI else "HEADER"
        unit.append(f"#define SIMCHECK_{name} SIMCHECK_{kind}")
    unit.append(CHECKS)
    for ret, name, params in direct:
        unit.append(f"namespace ours {{ using {name}_fn = {ret} (*){params}; }}\n"
                    f"static_assert(same_abi<decltype(&::{name}), ours::{name}_fn>(), "
                    f'"sim/nvml_sim.cpp: {name} differs from nvml.h");')
    summary = (f"{len(exports) - len(ABSENT)} of the {len(exports)} exports of nvml_exports.inc and "
               f"{', '.join(d[1] for d in direct)} match nvml.h ({len(LEGACY_PCI)} of them with the legacy PCI struct); "
               f"{sum(len(t) for t in STRUCTS.values())} struct pairs ({fields} fields) match; "
               f"{len(ABSENT)} not in this nvml.h: " + "; ".join(f"{k} ({v})" for k, v in ABSENT.items()))
    return exports, "\n".join(unit) + "\n", summary


def check(cxx, source, include, quiet=False):
    sim = os.path.join(source, "sim")
    driver = os.path.join(source, "src", "driver")
    # The exports defined one by one in nvml_sim.cpp (nvmlErrorString): return type and parameters.
    direct = re.findall(r"^NVML_SIM_API ([\w *]+?) ?\b(\w+)(\([^)]*\)) \{", read(os.path.join(sim, "nvml_sim.cpp")), re.M)
    direct = [d for d in direct if d[1] not in PRIVATE]
    if not direct:
        print("found no export defined on its own in nvml_sim.cpp (nvmlErrorString): the parser is out of date")
        return 1
    exports, unit, summary = plan(sim, driver, read(os.path.join(include, "nvml.h")), direct)
    if exports is None:
        if not quiet or os.environ.get("GPUSEL_CHECK_VERBOSE"):
            print(summary)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "sim_nvml_header_check.cpp")
        with open(path, "w") as f:
            f.write(unit)
        r = subprocess.run([cxx, "-std=c++20", "-fsyntax-only", "-Wall", "-Werror", "-I", sim, "-I", driver,
                            "-isystem", include, path], capture_output=True, text=True)
    if r.returncode != 0:
        if quiet:  # a drift (a static_assert, or an export nvml.h lacks), or another compiler error
            drift = "differs from nvml.h" in r.stderr or re.search(r"::nvml\w+. has not been declared", r.stderr)
            if os.environ.get("GPUSEL_CHECK_VERBOSE"):
                print("\n".join(line for line in r.stderr.splitlines() if "error" in line)[:600])
            return 1 if drift else 3
        print(r.stdout + r.stderr)
        print(f"the simulator's NVML exports drifted from {include}/nvml.h (above): fix sim/nvml_exports.inc or "
              "sim/nvml_sim_types.hpp; a new export nvml.h lacks goes in ABSENT with the reason")
        return 1
    if not quiet:
        print(summary)
    return 0


# One drift each: (file under the source folder, text, replacement). Each must fail the check.
MUTATIONS = [
    ("sim/nvml_exports.inc", "nvmlDeviceGetPowerUsage, (nvmlDevice_t device, unsigned int* milliwatts)",
     "nvmlDeviceGetPowerUsage, (nvmlDevice_t device, unsigned long long* milliwatts)"),
    ("sim/nvml_exports.inc", "nvmlDeviceGetCpuAffinity, (nvmlDevice_t device, unsigned int words, unsigned long* mask)",
     "nvmlDeviceGetCpuAffinity, (nvmlDevice_t device, unsigned long* mask)"),
    ("sim/nvml_exports.inc", "nvmlDeviceGetNvLinkRemotePciInfo_v2, (nvmlDevice_t device, unsigned int link, nvmlPciInfo_t* pci)",
     "nvmlDeviceGetNvLinkRemotePciInfo_v2, (nvmlDevice_t device, unsigned int link, nvmlPciInfoLegacy_t* pci)"),
    ("sim/nvml_exports.inc", "nvmlDeviceGetComputeRunningProcesses, (nvmlDevice_t device, unsigned int* count, ProcessInfoV1* infos)",
     "nvmlDeviceGetComputeRunningProcesses, (nvmlDevice_t device, unsigned int* count, nvmlProcessInfo_t* infos)"),
    ("sim/nvml_exports.inc", "SIM_NVML(nvmlShutdown, (void), ())\n",
     "SIM_NVML(nvmlShutdown, (void), ())\nSIM_NVML(nvmlDeviceGetFrobnication, (nvmlDevice_t device, unsigned int* f), (device, f))\n"),
    ("sim/nvml_sim_types.hpp", "  unsigned int smUtil;\n  unsigned int memUtil;",
     "  unsigned int memUtil;\n  unsigned int smUtil;"),
    ("sim/nvml_sim_types.hpp", "  unsigned int bus;\n  unsigned int device;\n  unsigned int pciDeviceId;\n  unsigned int pciSubSystemId;\n  unsigned int reserved[4];",
     "  unsigned int bus;\n  unsigned int device;\n  unsigned int pciSubSystemId;\n  unsigned int pciDeviceId;\n  unsigned int reserved[4];"),
    ("sim/nvml_sim_types.hpp", "  long long latencyUsec;", "  unsigned long long latencyUsec;"),
    ("sim/nvml_sim_types.hpp", "  nvmlDevice_t device;\n  nvmlGpuInstance_t gpuInstance;",
     "  nvmlDevice_t device;\n  nvmlDevice_t gpuInstance;"),
    ("sim/nvml_sim_types.hpp", "  unsigned int ofaCount;\n  unsigned long long memorySizeMB;\n};",
     "  unsigned int ofaCount;\n  unsigned int memorySizeMB;\n};"),
    ("src/driver/nvml_abi.hpp", "  unsigned int gpuInstanceId;\n  unsigned int computeInstanceId;",
     "  unsigned int computeInstanceId;\n  unsigned int gpuInstanceId;"),
    ("sim/nvml_sim.cpp", "NVML_SIM_API const char* nvmlErrorString(nvmlReturn_t result) {",
     "NVML_SIM_API char* nvmlErrorString(nvmlReturn_t result) {"),
]


def self_test(cxx, source, include):
    """The check passes on a copy of the sources and fails on each mutation of it."""
    return run_mutations(source, ("sim", os.path.join("src", "driver")), MUTATIONS,
                         lambda tree, _: check(cxx, tree, include, quiet=True), "sim/ and src/driver")


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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
