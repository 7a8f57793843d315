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
    # A versioned symbol (NVIDIA's libcudart's) prints as name@@VERSION.
    return {line.split()[-1].split("@")[0] for line in out.splitlines() if line.split()[1] in "TtWi"}


def simulator_list(inc, macros):
    """The symbols of sim/cuda_exports.inc or sim/nvml_exports.inc."""
    with open(os.path.join(SOURCE, "sim", inc)) as f:
        text = f.read()
    return {m.group(2) for m in re.finditer(rf"^({'|'.join(macros)})\((\w+)[,)]", text, re.M)}


CUDA_MODELLED = ("cuda_exports.inc", ["SIM_CU", "SIM_CU_AS"])
NVML_MODELLED = ("nvml_exports.inc", ["SIM_NVML", "SIM_NVML_V2"])


def api_list(name):
    """The names of sim/<name> (one per line, '#' comments), with the rest of each line."""
    out = {}
    with open(os.path.join(SOURCE, "sim", name)) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                words = line.split()
                out[words[0]] = words[1:]
    return out


TOOLKIT = os.environ.get("GPUSEL_CUDA_TOOLKIT", "/usr/local/cuda")
BUILD = os.environ.get("GPUSEL_BUILD_DIR", "build")



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
        modelled = simulator_list(*CUDA_MODELLED)
        unmodelled = simulator_list("cuda_unmodelled.inc", ["SIM_CU_UNMODELLED"])
        self.assertEqual(modelled & unmodelled, set())
        self.assertEqual(modelled | unmodelled, cuda)
        nvml = exported(os.path.join(SIM_ROOT, "libnvidia-ml.so.1"))
        modelled = simulator_list(*NVML_MODELLED)
        unmodelled = simulator_list("nvml_unmodelled.inc", ["SIM_NVML_UNMODELLED"])
        self.assertEqual(modelled & unmodelled, set())
        # nvmlErrorString, and nvmlInternalGetExportTable (NVIDIA's private entry point, which
        # NVIDIA's nvidia-smi calls first: the simulator's says which program answers instead).
        self.assertEqual(modelled | unmodelled | {"nvmlErrorString", "nvmlInternalGetExportTable"}, nvml)

    def test_nvml_exports_the_whole_current_api(self):
        # sim/nvml_api.txt: every function of NVML 13.3's nvml.h (issue 21).
        api = set(api_list("nvml_api.txt"))
        self.assertGreater(len(api), 400)
        self.assertIn("nvmlDeviceGetPcieThroughput", api)
        self.assertEqual(api - exported(os.path.join(SIM_ROOT, "libnvidia-ml.so.1")), set())

    def test_nvml_exports_the_fetched_header(self):
        # The nvml.h that scripts/fetch-extras unpacks (Debian's libnvidia-ml-dev) when the tests that
        # run real clients fetched it: every function it declares is exported, less the three power-mode
        # calls NVIDIA has since removed from the API.
        header = os.path.join(BUILD, "extras", "root", "usr", "include", "nvml.h")
        if not os.path.exists(header):
            self.skipTest(f"{header} is not fetched (scripts/fetch-extras)")
        with open(header) as f:
            names = set(re.findall(r"DECLDIR\s+(nvml\w+)\s*\(", f.read()))
        removed = {"nvmlDeviceGetPowerMode", "nvmlDeviceGetSupportedPowerModes", "nvmlDeviceSetPowerMode"}
        self.assertEqual(names - removed - exported(os.path.join(SIM_ROOT, "libnvidia-ml.so.1")), set())

    def test_cuda_exports_what_the_toolkit_stub_exports(self):
        api = exported(os.path.join(SIM_ROOT, "libcuda.so.1"))
        for name in ("cuMemcpyPeer", "cuCtxAttach", "cuLaunchGrid", "cuProfilerStart", "cuMemsetD16_v2",
                     "cuGetExportTable", "cuLibraryLoadData", "cuOccupancyMaxPotentialBlockSize"):
            self.assertIn(name, api)
        stub = os.path.join(TOOLKIT, "lib64", "stubs", "libcuda.so")
        if not os.path.exists(stub):
            self.skipTest(f"no CUDA toolkit stub at {stub}")
        self.assertEqual(exported(stub) - api, set())

    def test_cudart_libraries(self):
        api = api_list("cudart_api.txt")
        for soname, version in (("libcudart.so.11.0", "11"), ("libcudart.so.12", None), ("libcudart.so.13", "13")):
            with self.subTest(library=soname):
                path = os.path.join(SIM_ROOT, soname)
                names = exported(path)
                wanted = {n for n, versions in api.items() if version is None or version in versions}
                self.assertEqual(wanted - names, set())
                self.assertTrue(all(n.startswith(("cuda", "__cuda")) for n in names))
                dynamic = subprocess.run(["readelf", "-d", "--dyn-syms", "-W", path], capture_output=True, text=True).stdout
                self.assertIn(f"[{soname}]", dynamic)  # the SONAME
                self.assertIn(f"cudaMalloc@@{soname}", dynamic)  # the symbols' version node
                for fault in ("no-nvml", "no-cuda", "nvml-no-v2"):
                    self.assertTrue(os.path.exists(os.path.join(SIM_ROOT, fault, soname)), fault)
        real = os.path.join(TOOLKIT, "lib64", "libcudart.so.13")
        if os.path.exists(real):
            self.assertEqual(exported(real) - exported(os.path.join(SIM_ROOT, "libcudart.so.13")), set())

    def test_the_doubles_export_the_symbols_clients_rely_on(self):
        self.assertEqual(CUDA_SYMBOLS - simulator_list(*CUDA_MODELLED), set())
        self.assertEqual(NVML_SYMBOLS - simulator_list(*NVML_MODELLED) - {"nvmlErrorString"}, set())
        # gpusel's loaders look up nothing the simulator lacks.
        self.assertEqual(set(listed("cuda.def", "GPUSEL_CUDA")) - simulator_list(*CUDA_MODELLED), set())

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
