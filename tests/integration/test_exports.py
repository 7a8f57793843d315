"""The doubles export every symbol gpusel's loaders list (src/driver/*.def), and nothing else."""

import os
import re
import subprocess
import unittest

from support import SIM_ROOT, SOURCE, Case


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


# The symbols of NVIDIA's two libraries that gpusel, the reference module and the real clients
# the tests run (tests/integration/test_clients.py) look up: the versioned names where NVIDIA's
# headers map a name to one. Kept here, in the repository, so that the check needs nothing beside
# it; abi.nvml_header and abi.cuda_header check the prototypes of those gpusel itself declares.
NVML_SYMBOLS = {
    "nvmlInit_v2", "nvmlInitWithFlags", "nvmlShutdown", "nvmlErrorString", "nvmlSystemGetDriverVersion",
    "nvmlSystemGetCudaDriverVersion_v2", "nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex_v2",
    "nvmlDeviceGetHandleByUUID", "nvmlDeviceGetUUID", "nvmlDeviceGetName", "nvmlDeviceGetIndex",
    "nvmlDeviceGetMinorNumber", "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetPciInfo_v3",
    "nvmlDeviceGetCudaComputeCapability", "nvmlDeviceGetCpuAffinity", "nvmlDeviceGetMemoryAffinity",
    "nvmlDeviceGetNumaNodeId", "nvmlDeviceGetMigMode", "nvmlDeviceGetMaxMigDeviceCount",
    "nvmlDeviceGetMigDeviceHandleByIndex", "nvmlDeviceIsMigDeviceHandle", "nvmlDeviceGetDeviceHandleFromMigDeviceHandle",
    "nvmlDeviceGetUtilizationRates", "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetTopologyCommonAncestor",
}
CUDA_SYMBOLS = {
    "cuInit", "cuDriverGetVersion", "cuGetErrorString", "cuGetErrorName", "cuDeviceGetCount", "cuDeviceGet",
    "cuDeviceGetName", "cuDeviceGetUuid_v2", "cuDeviceTotalMem_v2", "cuDeviceGetAttribute", "cuDeviceGetPCIBusId",
    "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease_v2", "cuCtxSetCurrent", "cuCtxGetCurrent",
    "cuCtxSynchronize", "cuMemAlloc_v2", "cuMemFree_v2", "cuMemAllocHost_v2", "cuMemHostAlloc", "cuMemFreeHost",
    "cuMemHostRegister_v2", "cuMemcpyHtoDAsync_v2", "cuMemcpyDtoHAsync_v2", "cuMemcpyDtoDAsync_v2",
    "cuMemsetD32Async", "cuStreamCreate", "cuStreamDestroy_v2", "cuStreamSynchronize", "cuEventCreate",
    "cuEventRecord", "cuEventSynchronize", "cuEventElapsedTime", "cuEventElapsedTime_v2", "cuEventDestroy_v2",
    "cuModuleLoadData", "cuModuleGetFunction", "cuLaunchKernel", "cuGetProcAddress_v2",
}


class ExportsTest(Case):
    def test_export_lists_match_the_libraries(self):
        cuda = exported(os.path.join(SIM_ROOT, "libcuda.so.1"))
        self.assertEqual(simulator_list("cuda_exports.inc", ["SIM_CU"]), cuda)
        nvml = exported(os.path.join(SIM_ROOT, "libnvidia-ml.so.1"))
        self.assertEqual(simulator_list("nvml_exports.inc", ["SIM_NVML", "SIM_NVML_V2"]) | {"nvmlErrorString"}, nvml)

    def test_the_doubles_export_the_symbols_clients_rely_on(self):
        self.assertEqual(CUDA_SYMBOLS - simulator_list("cuda_exports.inc", ["SIM_CU"]), set())
        self.assertEqual(NVML_SYMBOLS - simulator_list("nvml_exports.inc", ["SIM_NVML", "SIM_NVML_V2"]) - {"nvmlErrorString"},
                         set())
        # gpusel's loaders look up nothing the simulator lacks.
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
