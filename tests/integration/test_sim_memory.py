"""The simulator's device-wide memory model, copy paths and per-model defaults (issue 32), through
ctypes as programs call the doubles, each compared with the machine file:

- free memory in CUDA and NVML agree and count every live simulated process on the GPU (its
  context's reservation included), MIG devices too; an allocation past free fails;
- copies between devices are timed by their path: NVLink, the PCIe link, or staged through host
  memory when peer access is off;
- a GPU without l2_cache or PCIe keys reports its model's, a MIG device its slice's L2, and a
  process on a MIG device adds its slice's share of utilisation to its GPU, not a whole GPU's;
- mapped pinned memory can be copied from by its device pointer.
Each double runs in a child process (it reads GPUSEL_SIM_MACHINE once)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from support import (BIN, INSTRUMENTED, MACHINES, NVCC, PYTHON_LOADS_LIBRARIES, SIM_ROOT, Case, base_env,
                     build_cuda_program, for_python, machine, machine_with_driver, sim_env)

SUCCESS, OUT_OF_MEMORY = 0, 2
CONTEXT_BYTES = 512 << 20  # each context's own reservation (sim/usage.hpp, docs/simulator.md)
UTILIZATION_PER_PROCESS = 40  # percent a process adds to its GPU (sim/usage.hpp)
# The copy model of docs/simulator.md: per link and direction, NVLink 2-4 25 GB/s; a peer copy
# reaches 85% of NVLink's rate and 80% of the PCIe link's; PCIe per lane after line coding.
NVLINK_GBPS_PER_LINK, NVLINK_EFFICIENCY, PCIE_PEER_EFFICIENCY = 25.0, 0.85, 0.80
PCIE_LANE_GBPS = {3: 0.985, 4: 1.969, 5: 3.938}
GIB = 1 << 30

PRELUDE = r'''
import ctypes, json, os, sys
cu = ctypes.CDLL(os.path.join(os.environ["GPUSEL_SIM_ROOT"], "libcuda.so.1"))
nv = ctypes.CDLL(os.path.join(os.environ["GPUSEL_SIM_ROOT"], "libnvidia-ml.so.1"))
assert cu.cuInit(0) == 0 and nv.nvmlInit_v2() == 0
def ctx_on(ordinal):
    d, ctx = ctypes.c_int(), ctypes.c_void_p()
    assert cu.cuDeviceGet(ctypes.byref(d), ordinal) == 0
    assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), d) == 0
    return d, ctx
def alloc(n):
    p = ctypes.c_ulonglong()
    rc = cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(n))
    return rc, p
def meminfo():
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    assert cu.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)) == 0
    return free.value, total.value
def nvml_memory(uuid):
    h = ctypes.c_void_p()
    assert nv.nvmlDeviceGetHandleByUUID(uuid.encode(), ctypes.byref(h)) == 0
    m = (ctypes.c_ulonglong * 3)()  # total, free, used
    assert nv.nvmlDeviceGetMemoryInfo(h, m) == 0
    return {"total": m[0], "free": m[1], "used": m[2]}
'''

# Holds `bytes` on CUDA device 0 until its stdin closes.
HOLDER = PRELUDE + r'''
_, ctx = ctx_on(0)
cu.cuCtxSetCurrent(ctx)
rc, _ = alloc(int(sys.argv[1]))
print(rc, flush=True)
sys.stdin.read()
'''

# On CUDA device 0: free memory from CUDA and NVML (for the device's UUID and, for a MIG device,
# its parent's), then an allocation of free + 1 and of free.
QUERY = PRELUDE + r'''
d, ctx = ctx_on(0)
cu.cuCtxSetCurrent(ctx)
uuid, parent = sys.argv[1], sys.argv[2]
free, total = meminfo()
out = {"cuda_free": free, "cuda_total": total, "nvml": nvml_memory(uuid),
       "parent": nvml_memory(parent) if parent else None}
out["past_free"] = alloc(free + 1)[0]
out["all_free"] = alloc(free)[0]
out["free_after"] = meminfo()[0]
print(json.dumps(out))
'''

# Copies of `n` bytes from CUDA device a to device b (cuMemcpyPeerAsync, then cuMemcpyAsync with
# unified addresses), peer access enabled from a to b or not; simulated GB/s of each.
COPY = PRELUDE + r'''
a, b, enable = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
n = 64 << 20  # moved for real: small enough to be quick, large enough for float milliseconds
da, ca = ctx_on(a)
db, cb = ctx_on(b)
cu.cuCtxSetCurrent(cb)
_, dst = alloc(n)
cu.cuCtxSetCurrent(ca)
_, src = alloc(n)
can = ctypes.c_int()
cu.cuDeviceCanAccessPeer(ctypes.byref(can), da, db)
if enable:
    assert cu.cuCtxEnablePeerAccess(cb, 0) == 0
start, end = ctypes.c_void_p(), ctypes.c_void_p()
cu.cuEventCreate(ctypes.byref(start), 0)
cu.cuEventCreate(ctypes.byref(end), 0)
rates = []
for peer in (True, False):
    assert cu.cuEventRecord(start, None) == 0
    if peer:
        assert cu.cuMemcpyPeerAsync(dst, cb, src, ca, ctypes.c_size_t(n), None) == 0
    else:
        assert cu.cuMemcpyAsync(dst, src, ctypes.c_size_t(n), None) == 0
    assert cu.cuEventRecord(end, None) == 0
    ms = ctypes.c_float()
    assert cu.cuEventElapsedTime(ctypes.byref(ms), start, end) == 0
    rates.append(n / (ms.value / 1e3) / 1e9)
local = ctypes.c_ulonglong()
cu.cuMemAlloc_v2(ctypes.byref(local), ctypes.c_size_t(n))
cu.cuEventRecord(start, None)
cu.cuMemcpyDtoDAsync_v2(local, src, ctypes.c_size_t(n), None)
cu.cuEventRecord(end, None)
ms = ctypes.c_float()
cu.cuEventElapsedTime(ctypes.byref(ms), start, end)
print(json.dumps({"can_access": can.value, "rates": rates, "local": n / (ms.value / 1e3) / 1e9}))
'''

# L2 of every CUDA device; NVML's PCIe link of every GPU (current and max generation and width).
DEFAULTS = PRELUDE + r'''
n = ctypes.c_int()
cu.cuDeviceGetCount(ctypes.byref(n))
l2 = []
for i in range(n.value):
    d, v = ctypes.c_int(), ctypes.c_int()
    cu.cuDeviceGet(ctypes.byref(d), i)
    cu.cuDeviceGetAttribute(ctypes.byref(v), 38, d)
    l2.append(v.value)
count = ctypes.c_uint()
nv.nvmlDeviceGetCount_v2(ctypes.byref(count))
pcie = []
for i in range(count.value):
    h = ctypes.c_void_p()
    if nv.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h)) != 0:
        pcie.append(None)
        continue
    row = []
    for f in ("CurrPcieLinkGeneration", "CurrPcieLinkWidth", "MaxPcieLinkGeneration", "MaxPcieLinkWidth"):
        v = ctypes.c_uint()
        rc = getattr(nv, "nvmlDevice" + "Get" + f)(h, ctypes.byref(v))
        row.append(v.value if rc == 0 else -rc)
    pcie.append(row)
print(json.dumps({"l2": l2, "pcie": pcie}))
'''

# nvmlDeviceGetProcessUtilization's sample for the process `pid` on the GPU `uuid`.
UTILIZATION = PRELUDE + r'''
class Sample(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("ts", ctypes.c_ulonglong), ("sm", ctypes.c_uint),
                ("mem", ctypes.c_uint), ("enc", ctypes.c_uint), ("dec", ctypes.c_uint)]
h = ctypes.c_void_p()
assert nv.nvmlDeviceGetHandleByUUID(sys.argv[1].encode(), ctypes.byref(h)) == 0
samples, count = (Sample * 16)(), ctypes.c_uint(16)
assert nv.nvmlDeviceGetProcessUtilization(h, samples, ctypes.byref(count), ctypes.c_ulonglong(0)) == 0
pid = int(sys.argv[2])
print(json.dumps([[s.sm, s.mem] for s in samples[:count.value] if s.pid == pid]))
'''

# Mapped pinned memory through the simulated CUDA runtime: cudaHostAlloc(Mapped), its device
# pointer, then cudaMemcpy from that pointer to host memory and to device memory.
MAPPED = r'''
import ctypes, json, os
rt = ctypes.CDLL(os.path.join(os.environ["GPUSEL_SIM_ROOT"], "libcudart.so.12"))
n = 4096
host, dev, devmem = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
out = [rt.cudaSetDeviceFlags(8),  # cudaDeviceMapHost
       rt.cudaHostAlloc(ctypes.byref(host), ctypes.c_size_t(n), 2)]  # cudaHostAllocMapped
ctypes.memset(host, 0x5a, n)
out.append(rt.cudaHostGetDevicePointer(ctypes.byref(dev), host, 0))
back = (ctypes.c_ubyte * n)()
out.append(rt.cudaMemcpy(back, dev, ctypes.c_size_t(n), 2))  # DeviceToHost
out.append(rt.cudaMalloc(ctypes.byref(devmem), ctypes.c_size_t(n)))
out.append(rt.cudaMemcpy(devmem, dev, ctypes.c_size_t(n), 3))  # DeviceToDevice
again = (ctypes.c_ubyte * n)()
out.append(rt.cudaMemcpy(again, devmem, ctypes.c_size_t(n), 2))
print(json.dumps({"rc": out, "bytes": [back[0], back[n - 1], again[0], again[n - 1]]}))
'''


def gpu_by_uuid(name, uuid):
    for g in machine(name)["gpu"]:
        if g["uuid"] == uuid:
            return g
        for m in g.get("mig", []):
            if m["uuid"] == uuid:
                return m
    raise KeyError(uuid)


def size_of(text):
    """A machine file's size ("80GiB", "9984MiB") in bytes."""
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if text.endswith(unit):
            return int(float(text[: -len(unit)]) * factor)
    return int(text)


@unittest.skipUnless(PYTHON_LOADS_LIBRARIES, "ThreadSanitizer build: Python cannot load the doubles")
class SimMemoryTest(Case):
    def env(self, name, **extra):
        return for_python(sim_env(name, GPUSEL_SIM_ROOT=SIM_ROOT, **extra))

    def python(self, program, env, *args):
        r = subprocess.run([sys.executable, "-c", program, *map(str, args)], capture_output=True, text=True,
                           timeout=120, env=env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return json.loads(r.stdout)

    def holding(self, env, nbytes):
        """A child process holding `nbytes` on CUDA device 0 of `env` (stopped by the caller)."""
        p = subprocess.Popen([sys.executable, "-c", HOLDER, str(nbytes)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=env)
        self.addCleanup(p.wait, 60)
        self.addCleanup(p.stdout.close)
        self.addCleanup(p.stdin.close)
        self.assertEqual(p.stdout.readline().strip(), str(SUCCESS))
        return p

    def check_shared(self, name, uuid, parent=""):
        env = self.env(name, CUDA_VISIBLE_DEVICES=uuid)
        total = size_of(gpu_by_uuid(name, uuid)["memory_total"])
        held = 2 * GIB
        self.holding(env, held)
        out = self.python(QUERY, env, uuid, parent)
        others = held + CONTEXT_BYTES  # the holder
        self.assertEqual(out["cuda_total"], total)
        self.assertEqual(out["cuda_free"], total - others - CONTEXT_BYTES)
        self.assertEqual(out["nvml"]["free"], out["cuda_free"])
        self.assertEqual(out["nvml"]["used"], others + CONTEXT_BYTES)
        self.assertEqual(out["past_free"], OUT_OF_MEMORY)
        self.assertEqual(out["all_free"], SUCCESS)
        self.assertEqual(out["free_after"], 0)
        return out

    def test_free_memory_is_device_wide(self):
        gpu = machine("dgx-h100")["gpu"][3]
        self.check_shared("dgx-h100", gpu["uuid"])

    def test_free_memory_of_a_mig_device_and_its_parent(self):
        gpu = machine("mig-a100")["gpu"][0]
        mig = gpu["mig"][1]
        out = self.check_shared("mig-a100", mig["uuid"], gpu["uuid"])
        # The parent GPU counts its MIG devices' processes.
        self.assertEqual(out["parent"]["total"], size_of(gpu["memory_total"]))
        self.assertEqual(out["parent"]["used"], out["nvml"]["used"])

    def test_allocation_past_the_gpu_fails(self):
        # cudaMalloc(40 GiB) on a 40 GiB A100: the context's own reservation leaves less.
        gpu = machine("mig-a100")["gpu"][1]
        self.assertNotIn("mig", gpu)
        total = size_of(gpu["memory_total"])
        env = self.env("mig-a100", CUDA_VISIBLE_DEVICES=gpu["uuid"])
        program = PRELUDE + r'''
_, ctx = ctx_on(0)
cu.cuCtxSetCurrent(ctx)
print(json.dumps([alloc(int(sys.argv[1]))[0], alloc(int(sys.argv[1]) - (1 << 30))[0]]))
'''
        self.assertEqual(self.python(program, env, total), [OUT_OF_MEMORY, SUCCESS])
        # Another process holding 2 GiB leaves total - 2 GiB - two contexts.
        self.holding(env, 2 * GIB)
        left = total - 2 * GIB - 2 * CONTEXT_BYTES
        self.assertEqual(self.python(program, env, left + 1), [OUT_OF_MEMORY, SUCCESS])
        self.assertEqual(self.python(program, env, left + (1 << 30)), [OUT_OF_MEMORY, SUCCESS])

    def copy_rates(self, name, a, b, enable):
        return self.python(COPY, self.env(name, CUDA_DEVICE_ORDER="PCI_BUS_ID"), a, b, "1" if enable else "0")

    def assert_rate(self, got, want):
        self.assertAlmostEqual(got / want, 1.0, delta=0.01, msg=f"{got:.1f} GB/s, expected {want:.1f}")

    def test_nvlink_peer_copies(self):
        gpus = machine("dgx-h100")["gpu"]
        self.assertEqual(gpus[0]["nvlink_domain"], gpus[5]["nvlink_domain"])
        out = self.copy_rates("dgx-h100", 0, 5, True)
        links = self.nvml_links("dgx-h100", gpus[0]["uuid"])
        want = links * NVLINK_GBPS_PER_LINK * NVLINK_EFFICIENCY
        self.assertEqual(out["can_access"], 1)
        for rate in out["rates"]:
            self.assert_rate(rate, want)
        self.assert_rate(out["local"], gpus[0]["memory_bandwidth_gbps"] / 2)

    def nvml_links(self, name, uuid):
        """Active NVLink links of a GPU and their version, as the NVML double reports them (the
        machine file's nvlinks, else its model's)."""
        program = PRELUDE + r'''
h = ctypes.c_void_p()
assert nv.nvmlDeviceGetHandleByUUID(sys.argv[1].encode(), ctypes.byref(h)) == 0
links, version = 0, ctypes.c_uint()
for link in range(64):
    active = ctypes.c_int()
    if nv.nvmlDeviceGetNvLinkState(h, link, ctypes.byref(active)) != 0:
        break
    links += active.value
nv.nvmlDeviceGetNvLinkVersion(h, 0, ctypes.byref(version))
print(json.dumps([links, version.value]))
'''
        links, version = self.python(program, self.env(name), uuid)
        # nvmlNvlinkVersion_t, as NVML answers: 2.0, 2.2, 3.0, 3.1 and 4.0 carry 25 GB/s per link
        # and direction.
        self.assertIn(version, (2, 3, 4, 5, 6))
        return links

    def test_pcie_peer_and_staged_copies(self):
        gpus = machine("workstation-mixed")["gpu"]  # PCI order: A4000, 4090, A6000
        a4000, _, a6000 = gpus

        def link(g):
            return PCIE_LANE_GBPS[g["pcie_generation"]] * g["pcie_width"]

        # A6000 -> A4000 with peer access enabled: over PCIe, the slower link of the two.
        out = self.copy_rates("workstation-mixed", 2, 0, True)
        self.assertEqual(out["can_access"], 1)
        for rate in out["rates"]:
            self.assert_rate(rate, min(link(a6000), link(a4000)) * PCIE_PEER_EFFICIENCY)
        # The same pair without enabling peer access, and the GeForce board (no peer access):
        # staged through host memory, the source's device-to-host then the target's host-to-device.
        for src, dst, enable in ((2, 0, False), (1, 2, False)):
            out = self.copy_rates("workstation-mixed", src, dst, enable)
            if src == 1:
                self.assertEqual(out["can_access"], 0)
            want = 1 / (1 / gpus[src]["pcie_d2h_gbps"] + 1 / gpus[dst]["pcie_h2d_gbps"])
            for rate in out["rates"]:
                self.assert_rate(rate, want)

    def test_model_defaults_for_l2_and_pcie(self):
        # lost-gpu's A100 80GB PCIe boards give neither l2_cache nor PCIe keys: the model's
        # (40 MiB L2, PCIe Gen4 x16, NVIDIA's specification) must show, not 0 / NOT_SUPPORTED.
        gpus = machine("lost-gpu")["gpu"]
        self.assertTrue(all("l2_cache" not in g and "pcie_generation" not in g for g in gpus))
        out = self.python(DEFAULTS, self.env("lost-gpu"))
        self.assertEqual(out["l2"], [40 << 20] * 3)
        self.assertEqual([row for row in out["pcie"] if row is not None], [[4, 16, 4, 16]] * 3)
        # mig-a100: the 2g.10gb MIG devices have 2 of the GPU's 8 memory slices and their L2.
        gpu = machine("mig-a100")["gpu"][0]
        l2, memory = size_of(gpu["l2_cache"]), size_of(gpu["memory_total"])
        slices = round(8 * size_of(gpu["mig"][0]["memory_total"]) / memory)
        self.assertEqual(slices, 2)
        out = self.python(DEFAULTS, self.env("mig-a100"))
        self.assertEqual(out["l2"], [l2 // 8 * slices] * 3 + [l2])

    def test_machine_file_overrides_the_model(self):
        with open(os.path.join(MACHINES, "mig-a100.toml")) as f:
            text = f.read()
        text = text.replace('l2_cache = "40MiB"', 'l2_cache = "24MiB"', 1)
        text = text.replace('sm_count = 28\n', 'sm_count = 28\nl2_cache = "3MiB"\n', 1)
        text = text.replace("pcie_generation = 4\npcie_width = 16", "pcie_generation = 3\npcie_width = 8", 1)
        folder = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, folder, True)
        path = os.path.join(folder, "custom.toml")
        with open(path, "w") as f:
            f.write(text)
        out = self.python(DEFAULTS, self.env(path))
        self.assertEqual(out["l2"], [3 << 20, 6 << 20, 6 << 20, 40 << 20])
        self.assertEqual(out["pcie"][0], [3, 8, 3, 8])

    def test_a_mig_process_adds_its_slice_of_utilisation(self):
        gpus = machine("mig-a100")["gpu"]
        mig_gpu, whole = gpus[0], gpus[1]
        mig = mig_gpu["mig"][0]
        for gpu, device in ((whole, whole), (mig_gpu, mig)):
            env = self.env("mig-a100", CUDA_VISIBLE_DEVICES=device["uuid"])
            holder = self.holding(env, 1 << 20)
            samples = self.python(UTILIZATION, env, gpu["uuid"], holder.pid)
            share = device["sm_count"] / gpu["sm_count"]
            self.assertEqual(samples, [[int(UTILIZATION_PER_PROCESS * share),
                                        int(UTILIZATION_PER_PROCESS * share) // 2]])
            holder.stdin.close()
            holder.wait(60)

    def test_mapped_pinned_memory(self):
        out = self.python(MAPPED, self.env("dgx-h100"))
        self.assertEqual(out["rc"], [SUCCESS] * 7)
        self.assertEqual(out["bytes"], [0x5A] * 4)


@unittest.skipIf(INSTRUMENTED, "the doubles are built with a sanitizer; a foreign program cannot load them")
@unittest.skipUnless(os.path.exists(NVCC), f"no CUDA toolkit ({NVCC} is absent)")
class RuntimeProgramTest(Case):
    """The same through a real program built with nvcc -cudart shared (cuda_memory_paths.cu)."""

    @classmethod
    def setUpClass(cls):
        cls.program = build_cuda_program("cuda_memory_paths")[0]
        cls.tmp = tempfile.mkdtemp(prefix="gpusel-memory-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_on(self, name, *args, **env):
        env.setdefault("GPUSEL_SIM_DEVICE_HANDLES", None)  # NVIDIA's handles equal the ordinals
        r = subprocess.run([BIN, "--sim", machine_with_driver(self.tmp, name), "--", self.program, *map(str, args)],
                           capture_output=True, text=True, env=base_env(**env), timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return r.stdout.split()

    def test_cuda_malloc_past_free_fails(self):
        gpu = machine("mig-a100")["gpu"][1]
        free, total, past, whole = map(int, self.run_on("mig-a100", "mem", CUDA_VISIBLE_DEVICES=gpu["uuid"]))
        self.assertEqual(total, size_of(gpu["memory_total"]))
        self.assertEqual(free, total - CONTEXT_BYTES)
        self.assertEqual([past, whole], [2, 0])  # cudaErrorMemoryAllocation, then cudaSuccess

    def test_cuda_memcpy_peer_follows_the_links(self):
        gpus = machine("dgx-h100")["gpu"]
        can, rate = self.run_on("dgx-h100", "peer", 0, 1, CUDA_DEVICE_ORDER="PCI_BUS_ID")
        links = gpus[0].get("nvlinks", 18)  # the H100 SXM's 18 links when the file does not say
        self.assertEqual(can, "1")
        self.assertAlmostEqual(float(rate) / (links * NVLINK_GBPS_PER_LINK * NVLINK_EFFICIENCY), 1.0, delta=0.01)
        mixed = machine("workstation-mixed")["gpu"]  # PCI order: A4000, 4090, A6000
        can, rate = self.run_on("workstation-mixed", "peer", 1, 2, CUDA_DEVICE_ORDER="PCI_BUS_ID")
        self.assertEqual(can, "0")
        want = 1 / (1 / mixed[1]["pcie_d2h_gbps"] + 1 / mixed[2]["pcie_h2d_gbps"])
        self.assertAlmostEqual(float(rate) / want, 1.0, delta=0.01)

    def test_cuda_memcpy_from_mapped_pinned_memory(self):
        self.assertEqual(self.run_on("single-l4", "mapped"), ["0", "90", "90"])


if __name__ == "__main__":
    unittest.main()
