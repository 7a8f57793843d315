"""The NVML double, driven through ctypes as a Python user would, and the reference module on it."""

import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from reference_answers import Answers
from support import (BIN, PYTHON_LOADS_LIBRARIES, SHARED, SIM_ROOT, Case, base_env, for_python, gpusel_json, machine,
                     sim_env, uuids)

SUCCESS, UNINITIALIZED, INVALID_ARGUMENT, NOT_SUPPORTED, NOT_FOUND, INSUFFICIENT_SIZE = 0, 1, 2, 3, 6, 7
GPU_IS_LOST = 15


class PciInfo(ctypes.Structure):
    _fields_ = [("busIdLegacy", ctypes.c_char * 16), ("domain", ctypes.c_uint), ("bus", ctypes.c_uint),
                ("device", ctypes.c_uint), ("pciDeviceId", ctypes.c_uint), ("pciSubSystemId", ctypes.c_uint),
                ("busId", ctypes.c_char * 32)]


class Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class MemoryV2(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("total", ctypes.c_ulonglong), ("reserved", ctypes.c_ulonglong),
                ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class ProcessInfo(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong), ("gpuInstanceId", ctypes.c_uint),
                ("computeInstanceId", ctypes.c_uint)]


# A child process per machine: the library reads GPUSEL_SIM_MACHINE once, at first use.
PROBE = r'''
import ctypes, json, os, sys
sys.path.insert(0, os.environ["GPUSEL_TEST_DIR"])
from test_sim_nvml import PciInfo, Memory, MemoryV2, ProcessInfo
lib = ctypes.CDLL(os.path.join(os.environ["GPUSEL_SIM_ROOT"], "libnvidia-ml.so.1"))
lib.nvmlErrorString.restype = ctypes.c_char_p
out = {}
count = ctypes.c_uint()
out["count_before_init"] = lib.nvmlDeviceGetCount_v2(ctypes.byref(count))
out["shutdown_before_init"] = lib.nvmlShutdown()
out["init"] = [lib.nvmlInit_v2(), lib.nvmlInit()]
out["count"] = [lib.nvmlDeviceGetCount_v2(ctypes.byref(count)), count.value]
gpus = []
for i in range(count.value):
    h = ctypes.c_void_p()
    g = {"handle": lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h))}
    if g["handle"] == 0:
        buf = ctypes.create_string_buffer(96)
        g["uuid"] = [lib.nvmlDeviceGetUUID(h, buf, 96), buf.value.decode()]
        small = ctypes.create_string_buffer(8)
        g["uuid_small"] = lib.nvmlDeviceGetUUID(h, small, 8)
        g["name"] = [lib.nvmlDeviceGetName(h, buf, 96), buf.value.decode()]
        pci = PciInfo()
        g["pci"] = [lib.nvmlDeviceGetPciInfo_v3(h, ctypes.byref(pci)), pci.busId.decode(), pci.bus, pci.pciDeviceId]
        mem, mem2 = Memory(), MemoryV2(version=0x02000028)
        g["mem"] = [lib.nvmlDeviceGetMemoryInfo(h, ctypes.byref(mem)), mem.total, mem.used]
        g["mem2"] = [lib.nvmlDeviceGetMemoryInfo_v2(h, ctypes.byref(mem2)), mem2.total]
        g["mem2_badversion"] = lib.nvmlDeviceGetMemoryInfo_v2(h, ctypes.byref(MemoryV2(version=1)))
        major, minor = ctypes.c_int(), ctypes.c_int()
        g["cc"] = [lib.nvmlDeviceGetCudaComputeCapability(h, ctypes.byref(major), ctypes.byref(minor)), major.value, minor.value]
        mask = (ctypes.c_ulong * 4)()
        g["cpus"] = [lib.nvmlDeviceGetCpuAffinity(h, 4, mask), [m for m in mask]]
        nodes = (ctypes.c_ulong * 1)()
        g["numa"] = [lib.nvmlDeviceGetMemoryAffinity(h, 1, nodes, 0), nodes[0]]
        idx = ctypes.c_uint()
        g["index"] = [lib.nvmlDeviceGetIndex(h, ctypes.byref(idx)), idx.value]
        cur, pend, slots = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint()
        g["mig"] = [lib.nvmlDeviceGetMigMode(h, ctypes.byref(cur), ctypes.byref(pend)), cur.value,
                    lib.nvmlDeviceGetMaxMigDeviceCount(h, ctypes.byref(slots)), slots.value]
        migs = []
        for s in range(slots.value):
            mh = ctypes.c_void_p()
            rc = lib.nvmlDeviceGetMigDeviceHandleByIndex(h, s, ctypes.byref(mh))
            if rc != 0:
                migs.append(rc)
                continue
            is_mig, parent, gi = ctypes.c_uint(), ctypes.c_void_p(), ctypes.c_uint()
            lib.nvmlDeviceIsMigDeviceHandle(mh, ctypes.byref(is_mig))
            lib.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mh, ctypes.byref(parent))
            lib.nvmlDeviceGetGpuInstanceId(mh, ctypes.byref(gi))
            lib.nvmlDeviceGetUUID(mh, buf, 96)
            migs.append([buf.value.decode(), is_mig.value, parent.value == h.value, gi.value])
        g["migs"] = migs
        n = ctypes.c_uint(0)
        rc = lib.nvmlDeviceGetComputeRunningProcesses_v3(h, ctypes.byref(n), None)
        procs = (ProcessInfo * max(n.value, 1))()
        rc2 = lib.nvmlDeviceGetComputeRunningProcesses_v3(h, ctypes.byref(n), procs)
        g["procs"] = [rc, n.value, rc2, [[p.pid, p.usedGpuMemory] for p in procs][: n.value]]
        by_uuid = ctypes.c_void_p()
        g["by_uuid"] = [lib.nvmlDeviceGetHandleByUUID(g["uuid"][1].encode(), ctypes.byref(by_uuid)), by_uuid.value == h.value]
    gpus.append(g)
out["gpus"] = gpus
h = ctypes.c_void_p()
out["index_out_of_range"] = lib.nvmlDeviceGetHandleByIndex_v2(count.value, ctypes.byref(h))
out["bad_handle"] = lib.nvmlDeviceGetUUID(ctypes.c_void_p(0x1234), ctypes.create_string_buffer(96), 96)
out["uuid_unknown"] = lib.nvmlDeviceGetHandleByUUID(b"GPU-00000000-0000-0000-0000-000000000000", ctypes.byref(h))
ver = ctypes.create_string_buffer(80)
cuda = ctypes.c_int()
out["driver"] = [lib.nvmlSystemGetDriverVersion(ver, 80), ver.value.decode(),
                 lib.nvmlSystemGetCudaDriverVersion_v2(ctypes.byref(cuda)), cuda.value]
out["error_string"] = lib.nvmlErrorString(15).decode()
out["shutdown"] = [lib.nvmlShutdown(), lib.nvmlDeviceGetCount_v2(ctypes.byref(count)), lib.nvmlShutdown(),
                   lib.nvmlDeviceGetCount_v2(ctypes.byref(count)), lib.nvmlShutdown()]
print(json.dumps(out))
'''


def probe(name):
    env = sim_env(name, GPUSEL_TEST_DIR=os.path.dirname(os.path.abspath(__file__)), GPUSEL_SIM_ROOT=SIM_ROOT)
    r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=for_python(env), timeout=60)
    if r.returncode != 0:
        raise AssertionError(r.stderr)
    return json.loads(r.stdout)


class NvmlDoubleTest(Case):
    def test_structure_layouts(self):
        self.assertEqual(ctypes.sizeof(PciInfo), 68)
        self.assertEqual(PciInfo.busId.offset, 36)
        self.assertEqual(ctypes.sizeof(MemoryV2), 40)
        self.assertEqual(MemoryV2.free.offset, 24)
        self.assertEqual(ctypes.sizeof(ProcessInfo), 24)

    def test_dgx(self):
        out = probe("dgx-h100")
        m = machine("dgx-h100")
        self.assertEqual(out["count_before_init"], UNINITIALIZED)
        self.assertEqual(out["shutdown_before_init"], UNINITIALIZED)
        self.assertEqual(out["init"], [SUCCESS, SUCCESS])
        self.assertEqual(out["count"], [SUCCESS, 8])
        for i, g in enumerate(out["gpus"]):
            want = m["gpu"][i]
            self.assertEqual(g["uuid"], [SUCCESS, want["uuid"]])
            self.assertEqual(g["uuid_small"], INSUFFICIENT_SIZE)
            self.assertEqual(g["name"], [SUCCESS, want["name"]])
            self.assertEqual(g["pci"], [SUCCESS, want["pci_bus_id"], int(want["pci_bus_id"][9:11], 16),
                                        (0x2330 << 16) | 0x10DE])
            self.assertEqual(g["mem"], [SUCCESS, 80 << 30, 0])
            self.assertEqual(g["mem2"], [SUCCESS, 80 << 30])
            self.assertEqual(g["mem2_badversion"], INVALID_ARGUMENT)
            self.assertEqual(g["cc"], [SUCCESS, 9, 0])
            low = (1 << 56) - 1 if i < 4 else ((1 << 64) - 1) ^ ((1 << 56) - 1)
            self.assertEqual(g["cpus"][0], SUCCESS)
            self.assertEqual(g["cpus"][1][0], low)
            self.assertEqual(g["numa"], [SUCCESS, 1 if i < 4 else 2])
            self.assertEqual(g["index"], [SUCCESS, i])
            self.assertEqual(g["mig"], [SUCCESS, 0, SUCCESS, 0])
            self.assertEqual(g["procs"], [SUCCESS, 0, SUCCESS, []])
            self.assertEqual(g["by_uuid"], [SUCCESS, True])
        self.assertEqual(out["index_out_of_range"], INVALID_ARGUMENT)
        self.assertEqual(out["bad_handle"], INVALID_ARGUMENT)
        self.assertEqual(out["uuid_unknown"], NOT_FOUND)
        self.assertEqual(out["driver"], [SUCCESS, "570.124.06", SUCCESS, 12080])
        self.assertEqual(out["error_string"], "GPU is lost")
        # Two inits need two shutdowns; after that, calls are uninitialised again.
        self.assertEqual(out["shutdown"], [SUCCESS, SUCCESS, SUCCESS, UNINITIALIZED, UNINITIALIZED])

    def test_mig(self):
        out = probe("mig-a100")
        g0, g1 = out["gpus"]
        self.assertEqual(g0["mig"], [SUCCESS, 1, SUCCESS, 7])
        mig_uuids = [m["uuid"] for m in machine("mig-a100")["gpu"][0]["mig"]]
        self.assertEqual(g0["migs"][:3], [[u, 1, True, gi] for u, gi in zip(mig_uuids, (3, 4, 5))])
        self.assertEqual(g0["migs"][3:], [NOT_FOUND] * 4)
        self.assertEqual(g1["mig"], [SUCCESS, 0, SUCCESS, 0])

    def test_lost_gpu(self):
        out = probe("lost-gpu")
        self.assertEqual(out["count"], [SUCCESS, 4])
        self.assertEqual([g["handle"] for g in out["gpus"]], [SUCCESS, SUCCESS, GPU_IS_LOST, SUCCESS])

    def test_init_fails(self):
        out = probe("nvml-init-fails")
        self.assertEqual(out["init"], [9, 9])  # DRIVER_NOT_LOADED
        self.assertEqual(out["count"], [UNINITIALIZED, 0])


class GpuInstanceProfileInfoV2(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint)] + [(n, ctypes.c_uint) for n in (
        "id", "isP2pSupported", "sliceCount", "instanceCount", "multiprocessorCount", "copyEngineCount",
        "decoderCount", "encoderCount", "jpegCount", "ofaCount")] + [("memorySizeMB", ctypes.c_ulonglong),
                                                                     ("name", ctypes.c_char * 96)]


class Placement(ctypes.Structure):
    _fields_ = [("start", ctypes.c_uint), ("size", ctypes.c_uint)]


class GpuInstanceInfo(ctypes.Structure):
    _fields_ = [("device", ctypes.c_void_p), ("id", ctypes.c_uint), ("profileId", ctypes.c_uint),
                ("placement", Placement)]


class ComputeInstanceProfileInfoV2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint) for n in (
        "version", "id", "sliceCount", "instanceCount", "multiprocessorCount", "sharedCopyEngineCount",
        "sharedDecoderCount", "sharedEncoderCount", "sharedJpegCount", "sharedOfaCount")] + [
            ("name", ctypes.c_char * 96)]


class ComputeInstanceInfo(ctypes.Structure):
    _fields_ = [("device", ctypes.c_void_p), ("gpuInstance", ctypes.c_void_p), ("id", ctypes.c_uint),
                ("profileId", ctypes.c_uint), ("placement", Placement)]


# MIG GPU and compute instances through NVML's calls, as a MIG tool walks them: every GPU instance
# profile index, each profile's placements, capacity and instances, each instance's compute instance
# profiles and compute instances; then bad input.
INSTANCES = r'''
import ctypes, json, os, sys
sys.path.insert(0, os.environ["GPUSEL_TEST_DIR"])
from test_sim_nvml import (GpuInstanceProfileInfoV2, Placement, GpuInstanceInfo, ComputeInstanceProfileInfoV2,
                           ComputeInstanceInfo)
lib = ctypes.CDLL(os.path.join(os.environ["GPUSEL_SIM_ROOT"], "libnvidia-ml.so.1"))
V = lambda t: ctypes.sizeof(t) | 2 << 24
ref = ctypes.byref
out = {"before_init": lib.nvmlDeviceGetGpuInstances(ctypes.c_void_p(0), 14, (ctypes.c_void_p * 8)(),
                                                    ref(ctypes.c_uint()))}
assert lib.nvmlInit_v2() == 0
count = ctypes.c_uint()
lib.nvmlDeviceGetCount_v2(ref(count))
def profile(h, index, version=None):
    info = GpuInstanceProfileInfoV2(version=V(GpuInstanceProfileInfoV2) if version is None else version)
    rc = lib.nvmlDeviceGetGpuInstanceProfileInfoV(h, index, ref(info))
    return rc, info
def compute_instances(h, gi):
    out = {}
    for index in range(6):
        info = ComputeInstanceProfileInfoV2(version=V(ComputeInstanceProfileInfoV2))
        rc = lib.nvmlGpuInstanceGetComputeInstanceProfileInfoV(gi, index, 0, ref(info))
        if rc != 0:
            out[index] = rc
            continue
        cis, n = (ctypes.c_void_p * info.instanceCount)(), ctypes.c_uint(99)
        rc = lib.nvmlGpuInstanceGetComputeInstances(gi, info.id, cis, ref(n))
        listed = []
        for ci in cis[:n.value]:
            c = ComputeInstanceInfo()
            lib.nvmlComputeInstanceGetInfo_v2(ctypes.c_void_p(ci), ref(c))
            by_id = ctypes.c_void_p()
            lib.nvmlGpuInstanceGetComputeInstanceById(gi, c.id, ref(by_id))
            # The unversioned call writes nvml.h's old 24-byte struct: the guard after it stays.
            old = ctypes.create_string_buffer(b"\xab" * 32, 32)
            lib.nvmlComputeInstanceGetInfo(ctypes.c_void_p(ci), old)
            listed.append([c.id, c.profileId, c.placement.start, c.placement.size, c.device == h.value,
                           c.gpuInstance == gi.value, by_id.value == ci, old.raw[24:] == b"\xab" * 8,
                           old.raw[16:24] == bytes(c)[16:24]])
        out[index] = [info.name.decode(), info.id, info.sliceCount, info.instanceCount, info.multiprocessorCount,
                      info.sharedCopyEngineCount, rc, listed]
    bad = ComputeInstanceProfileInfoV2(version=V(ComputeInstanceProfileInfoV2))
    out["engine_1"] = lib.nvmlGpuInstanceGetComputeInstanceProfileInfoV(gi, 0, 1, ref(bad))
    out["index_40"] = lib.nvmlGpuInstanceGetComputeInstanceProfileInfoV(gi, 40, 0, ref(bad))
    bad.version = 1
    out["bad_version"] = lib.nvmlGpuInstanceGetComputeInstanceProfileInfoV(gi, 0, 0, ref(bad))
    out["by_id_missing"] = lib.nvmlGpuInstanceGetComputeInstanceById(gi, 7, ref(ctypes.c_void_p()))
    return out
gpus = []
for i in range(count.value):
    h = ctypes.c_void_p()
    lib.nvmlDeviceGetHandleByIndex_v2(i, ref(h))
    g = {"profiles": {}}
    for index in list(range(9)) + [40]:
        rc, info = profile(h, index)
        if rc != 0:
            g["profiles"][index] = rc
            continue
        n = ctypes.c_uint(0)
        rc_count = lib.nvmlDeviceGetGpuInstancePossiblePlacements_v2(h, info.id, None, ref(n))
        placements = (Placement * n.value)()
        rc_list = lib.nvmlDeviceGetGpuInstancePossiblePlacements_v2(h, info.id, placements, ref(n))
        left = ctypes.c_uint(99)
        rc_left = lib.nvmlDeviceGetGpuInstanceRemainingCapacity(h, info.id, ref(left))
        gis, found = (ctypes.c_void_p * info.instanceCount)(), ctypes.c_uint(0)
        rc_gis = lib.nvmlDeviceGetGpuInstances(h, info.id, gis, ref(found))
        instances = []
        for gi in gis[:found.value]:
            gi = ctypes.c_void_p(gi)
            gi_info, by_id = GpuInstanceInfo(), ctypes.c_void_p()
            lib.nvmlGpuInstanceGetInfo(gi, ref(gi_info))
            lib.nvmlDeviceGetGpuInstanceById(h, gi_info.id, ref(by_id))
            instances.append([gi_info.id, gi_info.profileId, gi_info.placement.start, gi_info.placement.size,
                              gi_info.device == h.value, by_id.value == gi.value, compute_instances(h, gi)])
        g["profiles"][index] = [info.name.decode(), info.id, info.sliceCount, info.instanceCount,
                                info.multiprocessorCount, info.memorySizeMB, info.copyEngineCount, info.isP2pSupported,
                                [rc_count, rc_list, [[p.start, p.size] for p in placements]], [rc_left, left.value],
                                [rc_gis, instances]]
    g["bad_version"] = profile(h, 1, version=1)[0]
    g["enum_as_id"] = lib.nvmlDeviceGetGpuInstances(h, 4, (ctypes.c_void_p * 8)(), ref(ctypes.c_uint()))
    g["no_array"] = lib.nvmlDeviceGetGpuInstances(h, 14, None, ref(ctypes.c_uint()))
    g["by_id_missing"] = lib.nvmlDeviceGetGpuInstanceById(h, 6, ref(ctypes.c_void_p()))
    migs = []
    for slot in range(7):
        m = ctypes.c_void_p()
        if lib.nvmlDeviceGetMigDeviceHandleByIndex(h, slot, ref(m)) != 0:
            break
        gi_id, ci_id = ctypes.c_uint(), ctypes.c_uint()
        migs.append([lib.nvmlDeviceGetGpuInstanceId(m, ref(gi_id)), gi_id.value,
                     lib.nvmlDeviceGetComputeInstanceId(m, ref(ci_id)), ci_id.value,
                     lib.nvmlDeviceGetGpuInstances(m, 14, (ctypes.c_void_p * 8)(), ref(ctypes.c_uint()))])
    g["migs"] = migs
    gpus.append(g)
out["gpus"] = gpus
out["bad_handle"] = lib.nvmlGpuInstanceGetInfo(ctypes.c_void_p(0x1234), ref(GpuInstanceInfo()))
print(json.dumps(out))
'''


def instances(name):
    env = sim_env(name, GPUSEL_TEST_DIR=os.path.dirname(os.path.abspath(__file__)), GPUSEL_SIM_ROOT=SIM_ROOT)
    r = subprocess.run([sys.executable, "-c", INSTANCES], capture_output=True, text=True, env=for_python(env),
                       timeout=60)
    if r.returncode != 0:
        raise AssertionError(r.stderr)
    return json.loads(r.stdout, object_hook=lambda d: {int(k) if k.isdigit() else k: v for k, v in d.items()})


# An A100 split in two 3g.20gb GPU instances in the order a file may give them: the second (id 2)
# with one compute instance, the first (id 1) with a 1-slice and a 2-slice one.
SPLIT_A100 = """name = "split-a100"
driver_version = "570.124.06"
cuda_driver_version = 12080
[[gpu]]
uuid = "GPU-11111111-2222-3333-4444-000000000001"
name = "NVIDIA A100-SXM4-40GB"
pci_bus_id = "00000000:07:00.0"
memory_total = "40GiB"
compute_capability = "8.0"
sm_count = 108
numa_node = 0
cpus = "0-7"
pcie_h2d_gbps = 24.5
pcie_d2h_gbps = 25.0
memory_bandwidth_gbps = 1400.0
[[gpu.mig]]
uuid = "MIG-11111111-2222-3333-4444-000000000010"
gpu_instance = 1
compute_instance = 0
name = "NVIDIA A100-SXM4-40GB MIG 1c.3g.20gb"
memory_total = "19968MiB"
sm_count = 14
[[gpu.mig]]
uuid = "MIG-11111111-2222-3333-4444-000000000011"
gpu_instance = 2
compute_instance = 0
name = "NVIDIA A100-SXM4-40GB MIG 3g.20gb"
memory_total = "19968MiB"
sm_count = 42
[[gpu.mig]]
uuid = "MIG-11111111-2222-3333-4444-000000000012"
gpu_instance = 1
compute_instance = 1
name = "NVIDIA A100-SXM4-40GB MIG 2c.3g.20gb"
memory_total = "19968MiB"
sm_count = 28
"""


class MigInstancesTest(Case):
    """NVML's MIG GPU and compute instance queries answer from the machine file's MIG devices."""

    def test_mig_a100(self):
        out = instances("mig-a100")
        self.assertEqual(out["before_init"], UNINITIALIZED)
        self.assertEqual(out["bad_handle"], INVALID_ARGUMENT)
        g0, g1 = out["gpus"]
        p = g0["profiles"]
        # Profile indexes are nvml.h's NVML_GPU_INSTANCE_PROFILE_*; the ids they answer are NVIDIA's.
        self.assertEqual([p[i][:5] for i in range(5)],
                         [["MIG 1g.5gb", 19, 1, 7, 14], ["MIG 2g.10gb", 14, 2, 3, 28], ["MIG 3g.20gb", 9, 3, 2, 42],
                          ["MIG 4g.20gb", 5, 4, 1, 56], ["MIG 7g.40gb", 0, 7, 1, 98]])
        self.assertEqual(p[1][5:8], [9984, 2, 0])  # the file's 2g.10gb memory, copy engines, no P2P
        self.assertEqual([p[i][5] for i in (0, 2, 4)], [4992, 19968, 39936])  # its memory per slice
        self.assertEqual([p[i] for i in (5, 6, 7, 8, 40)], [NOT_SUPPORTED] * 4 + [INVALID_ARGUMENT])
        self.assertEqual(p[0][8], [SUCCESS, SUCCESS, [[s, 1] for s in range(7)]])
        self.assertEqual(p[1][8], [SUCCESS, SUCCESS, [[0, 2], [2, 2], [4, 2]]])
        self.assertEqual(p[2][8][2], [[0, 4], [4, 4]])
        self.assertEqual(p[4][8][2], [[0, 8]])
        # Three 2g instances take memory slices 0-5 and six compute slices: one 1g fits, nothing else.
        self.assertEqual([p[i][9] for i in range(5)], [[SUCCESS, 1]] + [[SUCCESS, 0]] * 4)
        self.assertEqual([p[i][10] for i in (0, 2, 3, 4)], [[SUCCESS, []]] * 4)
        rc, gis = p[1][10]
        self.assertEqual(rc, SUCCESS)
        self.assertEqual([gi[:6] for gi in gis], [[3, 14, 0, 2, True, True], [4, 14, 2, 2, True, True],
                                                  [5, 14, 4, 2, True, True]])
        for gi in gis:
            cis = gi[6]
            self.assertEqual(cis[0][:6], ["MIG 1c.2g.10gb", 0, 1, 2, 14, 2])
            self.assertEqual(cis[0][6:], [SUCCESS, []])
            self.assertEqual(cis[1], ["MIG 2g.10gb", 1, 2, 1, 28, 2, SUCCESS,
                                      [[0, 1, 0, 2, True, True, True, True, True]]])
            self.assertEqual([cis[i] for i in (2, 3, 4, 5)], [NOT_SUPPORTED] * 4)
            self.assertEqual([cis[k] for k in ("engine_1", "index_40", "bad_version", "by_id_missing")],
                             [INVALID_ARGUMENT, INVALID_ARGUMENT, INVALID_ARGUMENT, NOT_FOUND])
        self.assertEqual([g0[k] for k in ("bad_version", "enum_as_id", "no_array", "by_id_missing")],
                         [INVALID_ARGUMENT, INVALID_ARGUMENT, INVALID_ARGUMENT, NOT_FOUND])
        # MIG device handles: their instance ids; they are no parent of GPU instances.
        self.assertEqual(g0["migs"], [[SUCCESS, gi, SUCCESS, 0, INVALID_ARGUMENT] for gi in (3, 4, 5)])
        # GPU 1 has MIG off.
        self.assertEqual(g1["profiles"], {i: NOT_SUPPORTED for i in range(9)} | {40: INVALID_ARGUMENT})
        self.assertEqual([g1[k] for k in ("enum_as_id", "no_array", "by_id_missing")],
                         [NOT_SUPPORTED, INVALID_ARGUMENT, NOT_SUPPORTED])

    def test_same_instances_as_nvidia_smi(self):
        """The simulator's `nvidia-smi mig -lgi` (its own reading of the machine file) and NVML agree."""
        r = subprocess.run(["nvidia-smi", "mig", "-lgi"], capture_output=True, text=True, env=sim_env("mig-a100"),
                           timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = [line.strip("| ").split() for line in r.stdout.splitlines() if " MIG " in line]
        smi = [[int(gpu), f"{mig} {profile}", int(pid), int(gid), placement]
               for gpu, mig, profile, pid, gid, placement in rows]
        nvml = [[i, info[0], gi[1], gi[0], f"{gi[2]}:{gi[3]}"] for i, g in enumerate(instances("mig-a100")["gpus"])
                for info in g["profiles"].values() if isinstance(info, list) for gi in info[10][1]]
        self.assertEqual(len(smi), 3)
        self.assertEqual(sorted(smi), sorted(nvml))

    def test_gpu_without_mig(self):
        for name in ("dgx-h100", "workstation-mixed"):
            with self.subTest(machine=name):
                for g in instances(name)["gpus"]:
                    self.assertEqual(g["profiles"], {i: NOT_SUPPORTED for i in range(9)} | {40: INVALID_ARGUMENT})
                    self.assertEqual(g["by_id_missing"], NOT_SUPPORTED)

    def test_split_gpu_instance(self):
        folder = tempfile.mkdtemp(prefix="gpusel-mig-")
        self.addCleanup(shutil.rmtree, folder, ignore_errors=True)
        path = os.path.join(folder, "split-a100.toml")
        with open(path, "w", encoding="utf-8") as f:
            f.write(SPLIT_A100)
        (g,) = instances(path)["gpus"]
        p = g["profiles"]
        self.assertEqual(p[2][:6], ["MIG 3g.20gb", 9, 3, 2, 42, 19968])
        self.assertEqual([p[i][9] for i in range(5)], [[SUCCESS, 0]] * 5)  # memory is all taken
        rc, (first, second) = p[2][10]
        self.assertEqual([first[:6], second[:6]], [[1, 9, 0, 4, True, True], [2, 9, 4, 4, True, True]])
        cis = first[6]
        self.assertEqual(cis[0], ["MIG 1c.3g.20gb", 0, 1, 3, 14, 3, SUCCESS,
                                  [[0, 0, 0, 1, True, True, True, True, True]]])
        self.assertEqual(cis[1], ["MIG 2c.3g.20gb", 1, 2, 1, 28, 3, SUCCESS,
                                  [[1, 1, 1, 2, True, True, True, True, True]]])
        self.assertEqual(cis[2][6:], [SUCCESS, []])
        self.assertEqual(second[6][2], ["MIG 3g.20gb", 2, 3, 1, 42, 3, SUCCESS,
                                        [[0, 2, 0, 3, True, True, True, True, True]]])
        self.assertEqual([m[1:4] for m in g["migs"]], [[1, SUCCESS, 0], [2, SUCCESS, 0], [1, SUCCESS, 1]])


def handles_machine(count):
    """`count` GPUs over two PCI domains: GPUs 0-1 an NVLink pair, 2-9 an NVLink domain of eight, the
    rest on PCIe only; every fifth GPU from 10 on in MIG mode with two MIG devices. Returns (text,
    gpus) with gpus [(uuid, pci_bus_id, nvlink partner's index or None, in a domain, [MIG uuids])]."""
    lines = ['name = "handles"', 'driver_version = "570.124.06"', "cuda_driver_version = 12080"]
    gpus = []
    for i in range(count):
        uuid = f"GPU-{i:08x}-1111-2222-3333-{i * 31:012x}"
        bus = f"{i // 100:08X}:{0x10 + i % 100:02X}:00.0"
        domain = 0 if i < 2 else 1 if i < 10 else None
        lines += ["[[gpu]]", f'uuid = "{uuid}"', 'name = "NVIDIA A100-SXM4-40GB"', f'pci_bus_id = "{bus}"',
                  'memory_total = "40GiB"', 'compute_capability = "8.0"', "sm_count = 108",
                  f"numa_node = {i % 2}", 'cpus = "0-7"', "pcie_h2d_gbps = 24.5", "pcie_d2h_gbps = 25.0",
                  "memory_bandwidth_gbps = 1400.0"]
        if domain is not None:
            lines.append(f"nvlink_domain = {domain}")
        migs = []
        if i >= 10 and i % 5 == 0:
            for m in range(2):
                migs.append(f"MIG-{i:08x}-4444-5555-6666-{m:012x}")
                lines += ["[[gpu.mig]]", f'uuid = "{migs[-1]}"', f"gpu_instance = {m + 1}", "compute_instance = 0",
                          'name = "NVIDIA A100-SXM4-40GB MIG 3g.20gb"', 'memory_total = "20GiB"', "sm_count = 42"]
        partner = (1 - i) if i < 2 else None
        gpus.append((uuid, bus, partner, domain is not None, migs))
    return "\n".join(lines) + "\n", gpus


# Every handle found every way a client finds one, and handles that are not this library's.
HANDLES = r'''
import ctypes, json, os, sys
sys.path.insert(0, os.environ["GPUSEL_TEST_DIR"])
from test_sim_nvml import PciInfo
lib = ctypes.CDLL(os.path.join(os.environ["GPUSEL_SIM_ROOT"], "libnvidia-ml.so.1"))
assert lib.nvmlInit_v2() == 0
count = ctypes.c_uint()
lib.nvmlDeviceGetCount_v2(ctypes.byref(count))
out = {"count": count.value, "gpus": []}
handles = []
def handle(call, key):
    h = ctypes.c_void_p()
    return [call(key, ctypes.byref(h)), h.value]
for i in range(count.value):
    h = ctypes.c_void_p()
    lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h))
    handles.append(h.value)
    buf = ctypes.create_string_buffer(96)
    lib.nvmlDeviceGetUUID(h, buf, 96)
    uuid = buf.value
    pci = PciInfo()
    lib.nvmlDeviceGetPciInfo_v3(h, ctypes.byref(pci))
    bus = pci.busId.decode()
    d, b, rest = bus.split(":")
    g = {"uuid": uuid.decode(), "bus": bus,
         "by_uuid": handle(lib.nvmlDeviceGetHandleByUUID, uuid) == [0, h.value],
         "by_bus": [handle(lib.nvmlDeviceGetHandleByPciBusId_v2, form.encode()) == [0, h.value]
                    for form in (bus, bus.lower(), d[4:] + ":" + b + ":" + rest)],
         "by_short_bus": None}
    found = ctypes.c_void_p()
    if lib.nvmlDeviceGetHandleByPciBusId_v2((b + ":" + rest).encode(), ctypes.byref(found)) == 0:
        lib.nvmlDeviceGetUUID(found, buf, 96)
        g["by_short_bus"] = buf.value.decode()
    remote = PciInfo()
    kind = ctypes.c_int()
    g["nvlink"] = [lib.nvmlDeviceGetNvLinkRemotePciInfo_v2(h, 0, ctypes.byref(remote)), remote.busId.decode(),
                   lib.nvmlDeviceGetNvLinkRemoteDeviceType(h, 0, ctypes.byref(kind)), kind.value]
    migs = []
    for slot in range(7):
        mh = ctypes.c_void_p()
        if lib.nvmlDeviceGetMigDeviceHandleByIndex(h, slot, ctypes.byref(mh)) != 0:
            break
        lib.nvmlDeviceGetUUID(mh, buf, 96)
        migs.append([buf.value.decode(), handle(lib.nvmlDeviceGetHandleByUUID, buf.value) == [0, mh.value]])
    g["migs"] = migs
    out["gpus"].append(g)
stride = handles[1] - handles[0]
name = ctypes.create_string_buffer(96)
out["stride_positive"] = stride > 0
out["forged"] = [lib.nvmlDeviceGetName(ctypes.c_void_p(p), name, 96)
                 for p in (handles[0] + 1, handles[0] + stride // 2, handles[-1] + stride, handles[0] - stride)]
out["unknown"] = [handle(lib.nvmlDeviceGetHandleByUUID, b"GPU-ffffffff-1111-2222-3333-000000000000")[0],
                  handle(lib.nvmlDeviceGetHandleByPciBusId_v2, b"00000000:FF:00.0")[0],
                  handle(lib.nvmlDeviceGetHandleByPciBusId_v2, b"00000000:1000:00.0")[0],
                  handle(lib.nvmlDeviceGetHandleByPciBusId_v2, b"not a bus id")[0]]
print(json.dumps(out))
'''


@unittest.skipUnless(PYTHON_LOADS_LIBRARIES, "ThreadSanitizer build: Python cannot load the doubles")
class HandleLookupTest(Case):
    """Handles by index, UUID (GPU and MIG) and PCI bus id agree on a machine of 250 GPUs, NVLink
    peers are named from their domains, and pointers that are not handles are refused."""

    def test_every_lookup_on_a_large_machine(self):
        folder = tempfile.mkdtemp(prefix="gpusel-handles-")
        self.addCleanup(shutil.rmtree, folder, ignore_errors=True)
        text, gpus = handles_machine(250)
        path = os.path.join(folder, "handles.toml")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        env = base_env(GPUSEL_SIM_MACHINE=path, GPUSEL_SIM_ROOT=SIM_ROOT,
                       GPUSEL_TEST_DIR=os.path.dirname(os.path.abspath(__file__)))
        r = subprocess.run([sys.executable, "-c", HANDLES], capture_output=True, text=True, env=for_python(env),
                           timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual(out["count"], 250)
        by_bus = {bus: i for i, (_, bus, _, _, _) in enumerate(gpus)}
        self.assertEqual(len(by_bus), 250)
        for i, g in enumerate(out["gpus"]):
            uuid, bus, partner, on_nvlink, migs = gpus[i]
            with self.subTest(gpu=i):
                self.assertEqual((g["uuid"], g["bus"]), (uuid, bus))
                self.assertTrue(g["by_uuid"])
                self.assertEqual(g["by_bus"], [True, True, True])
                # "BB:DD.F" names the GPU of PCI domain 0 with that bus and device.
                self.assertEqual(g["by_short_bus"], gpus[by_bus["00000000" + bus[8:]]][0])
                if partner is not None:  # a pair: the other GPU, over a bridge
                    self.assertEqual(g["nvlink"], [SUCCESS, gpus[partner][1], SUCCESS, 0])
                elif on_nvlink:  # a larger domain: an NVSwitch
                    self.assertEqual(g["nvlink"], [SUCCESS, "0000000F:F0:00.0", SUCCESS, 2])
                else:
                    self.assertEqual(g["nvlink"][0], NOT_SUPPORTED)
                self.assertEqual(g["migs"], [[m, True] for m in migs])
        self.assertTrue(out["stride_positive"])
        self.assertEqual(out["forged"], [INVALID_ARGUMENT] * 4)
        self.assertEqual(out["unknown"], [NOT_FOUND] * 4)


REFERENCE = r'''
import json, os, sys
sys.path.insert(0, os.environ["GPUSEL_SHARED_SEED"])
import gpu_select
out = {"uuids": gpu_select._nvml_uuids(), "resolved": {}}
for spec in json.loads(os.environ["SPECS"]):
    try:
        r = gpu_select.resolve_gpu_uuids([spec])
        out["resolved"][spec] = list(r) if r is not None else None
    except ValueError as e:
        out["resolved"][spec] = "error"
print(json.dumps(out))
'''


ANSWERS = Answers("sim_nvml")


def reference(name, specs, **env_extra):
    """The reference module's NVML UUIDs and resolutions on machine `name`: from the module where it
    is present (checked against the stored answers), else from the stored answers."""
    def ask():
        env = sim_env(name, GPUSEL_SHARED_SEED=os.path.join(SHARED, "seed"), SPECS=json.dumps(specs),
                      **env_extra)
        r = subprocess.run([sys.executable, "-c", REFERENCE], capture_output=True, text=True,
                           env=for_python(env), timeout=60)
        if r.returncode != 0:
            raise AssertionError(r.stderr)
        return json.loads(r.stdout)
    return ANSWERS.answer(json.dumps([name, specs, env_extra], sort_keys=True), ask)


class ReferenceModuleTest(Case):
    def test_same_uuids_as_gpusel_list(self):
        for name in ("dgx-h100", "workstation-mixed", "single-l4", "mig-a100"):
            with self.subTest(machine=name):
                ref = reference(name, [])
                ours = gpusel_json("list", "--json", env=sim_env(name))
                self.assertEqual(ref["uuids"], [g["uuid"] for g in ours["gpus"]])
                self.assertEqual(ref["uuids"], uuids(name))

    def test_nvml_faults_give_none(self):
        for name in ("nvml-missing", "nvml-no-v2", "nvml-init-fails", "lost-gpu"):
            with self.subTest(machine=name):
                self.assertIsNone(reference(name, [])["uuids"])

    def test_same_resolution_where_the_module_is_right(self):
        u = uuids("dgx-h100")
        specs = ["0", "7", "3", u[4][:10], u[6], "8", "GPU-ffff"]
        cases = [({}, specs), ({"CUDA_VISIBLE_DEVICES": "5,1,3"}, ["0", "2", "3"]),
                 ({"CUDA_VISIBLE_DEVICES": f"{u[2]},{u[0][:12]}"}, [u[0][:8], u[2], "1", "2", u[5]])]
        for env, specs_here in cases:
            ref = reference("dgx-h100", specs_here, **env)
            for spec in specs_here:
                with self.subTest(env=env, spec=spec):
                    r = subprocess.run([BIN, "resolve", "--gpu", spec], capture_output=True, text=True,
                                       env=sim_env("dgx-h100", **env))
                    want = ref["resolved"][spec]
                    if want == "error":
                        self.assertEqual(r.returncode, 2, r.stdout)
                    else:
                        self.assertEqual(r.returncode, 0, r.stderr)
                        self.assertEqual(r.stdout.split(), want)

    def test_deviation_one_fails_fast(self):
        # The module indexes the raw list and resolves --gpu 2 to physical GPU 2, which the driver
        # never exposes under 0,-1,2; gpusel refuses in the parent (docs/design.md, departure 1).
        ref = reference("dgx-h100", ["2"], CUDA_VISIBLE_DEVICES="0,-1,2")
        self.assertEqual(ref["resolved"]["2"], [uuids("dgx-h100")[2]])
        r = subprocess.run([BIN, "resolve", "--gpu", "2"], capture_output=True, text=True,
                           env=sim_env("dgx-h100", CUDA_VISIBLE_DEVICES="0,-1,2"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("exposes 1 device", r.stderr)


if __name__ == "__main__":
    unittest.main()
