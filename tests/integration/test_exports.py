"""The doubles export every symbol gpusel's loaders list (src/driver/*.def), and nothing else."""

import os
import re
import subprocess
import unittest

from support import SHARED, SIM_ROOT, SOURCE, Case


def listed(def_file, macro):
    with open(os.path.join(SOURCE, "src", "driver", def_file)) as f:
        text = f.read()
    out = []
    for m in re.finditer(rf"^{macro}\((.*)$", text, re.M):
        args = [a.strip() for a in m.group(1).split(",")]
        out.append(args[1] if macro == "GPUSEL_CUDA" else args[0])
    return out


def exported(path):
    out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.split()[1] in "TtWi"}


def simulator_list(inc, macros):
    """The symbols of sim/cuda_exports.inc or sim/nvml_exports.inc."""
    with open(os.path.join(SOURCE, "sim", inc)) as f:
        text = f.read()
    return {m.group(2) for m in re.finditer(rf"^({'|'.join(macros)})\((\w+),", text, re.M)}


def abi_symbols(section):
    """Every function name in a section of the ABI reference's tables (reference/abi.md in the project's
    reference folder beside the repository, GPUSEL_SHARED_DIR; docs/abi.md says what it holds)."""
    with open(os.path.join(SHARED, "reference", "abi.md")) as f:
        text = f.read()
    part = text.split("\n## ")[{"nvml": 1, "cuda": 2}[section]]
    names = set()
    for line in part.splitlines():
        if not line.startswith("| ") or line.startswith("| symbol") or line.startswith("| API") or "---" in line:
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        column = cells[0] if section == "nvml" else cells[1]
        names.update(re.findall(r"\b(?:nvml|cu)[A-Za-z0-9_]+", column))
    return names


class ExportsTest(Case):
    def test_export_lists_match_the_libraries(self):
        cuda = exported(os.path.join(SIM_ROOT, "libcuda.so.1"))
        self.assertEqual(simulator_list("cuda_exports.inc", ["SIM_CU"]), cuda)
        nvml = exported(os.path.join(SIM_ROOT, "libnvidia-ml.so.1"))
        self.assertEqual(simulator_list("nvml_exports.inc", ["SIM_NVML", "SIM_NVML_V2"]) | {"nvmlErrorString"}, nvml)

    @unittest.skipUnless(os.path.exists(os.path.join(SHARED, "reference", "abi.md")),
                         "the ABI reference (GPUSEL_SHARED_DIR/reference/abi.md) is not beside this checkout")
    def test_the_export_lists_and_the_reference_abi_agree(self):
        cuda_abi, nvml_abi = abi_symbols("cuda"), abi_symbols("nvml")
        self.assertIn("cuDeviceGetUuid_v2", cuda_abi)
        self.assertIn("nvmlDeviceGetTopologyCommonAncestor", nvml_abi)
        self.assertEqual(cuda_abi - simulator_list("cuda_exports.inc", ["SIM_CU"]), set())
        self.assertEqual(nvml_abi - simulator_list("nvml_exports.inc", ["SIM_NVML", "SIM_NVML_V2"]) - {"nvmlErrorString"},
                         set())
        # gpusel's loaders look up nothing the reference does not describe or the simulator lacks.
        self.assertEqual(set(listed("cuda.def", "GPUSEL_CUDA")) - simulator_list("cuda_exports.inc", ["SIM_CU"]), set())

    def test_nvml(self):
        names = listed("nvml.def", "GPUSEL_NVML")
        self.assertIn("nvmlDeviceGetUUID", names)
        symbols = exported(os.path.join(SIM_ROOT, "libnvidia-ml.so.1"))
        self.assertEqual(set(names) - symbols, set())
        self.assertTrue(all(s.startswith("nvml") for s in symbols), sorted(symbols))
        # The reference module calls the unversioned nvmlInit.
        self.assertIn("nvmlInit", symbols)

    def test_nvml_no_v2_variant(self):
        symbols = exported(os.path.join(SIM_ROOT, "nvml-no-v2", "libnvidia-ml.so.1"))
        self.assertNotIn("nvmlInit_v2", symbols)
        self.assertNotIn("nvmlDeviceGetCount_v2", symbols)
        self.assertIn("nvmlInit", symbols)

    def test_cuda(self):
        names = listed("cuda.def", "GPUSEL_CUDA")
        self.assertIn("cuDeviceGetUuid_v2", names)
        symbols = exported(os.path.join(SIM_ROOT, "libcuda.so.1"))
        self.assertEqual(set(names) - symbols, set())
        self.assertTrue(all(s.startswith("cu") for s in symbols), sorted(symbols))

    def test_sonames(self):
        for lib, soname in (("libnvidia-ml.so.1", "libnvidia-ml.so.1"), ("libcuda.so.1", "libcuda.so.1")):
            out = subprocess.run(["readelf", "-d", os.path.join(SIM_ROOT, lib)], capture_output=True, text=True).stdout
            self.assertIn(f"[{soname}]", out)
            self.assertNotIn("gpusel", re.sub(r"\[lib.*?\]", "", " ".join(l for l in out.splitlines() if "NEEDED" in l)))


if __name__ == "__main__":
    unittest.main()
