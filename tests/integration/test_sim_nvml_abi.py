"""The NVML double's ABI (issue 21): every versioned call writes exactly its version's struct (guard
bytes after every struct of every versioned call stay untouched), the getters monitors read answer
from the machine file, and MIG usage is booked to the MIG device. Through ctypes, in a child process
per machine (the double reads GPUSEL_SIM_MACHINE once)."""

import json
import os
import subprocess
import sys
import unittest

from support import PYTHON_LOADS_LIBRARIES, SIM_ROOT, Case, for_python, machine, private_dir, sim_env, uuids

SUCCESS, NOT_SUPPORTED, NOT_FOUND, INSUFFICIENT_SIZE = 0, 3, 6, 7
GUARD = 64

# Each call: (name, the arguments before the struct, struct bytes, entries, arguments after). The
# struct pointer is a buffer of bytes * entries + GUARD bytes, all 0xAB; the call may write the first
# bytes * entries and nothing after. "count" stands for a c_uint holding `entries`.
GUARDED = r'''
import ctypes, json, os, sys
lib = ctypes.CDLL(os.path.join(os.environ["GPUSEL_SIM_ROOT"], "libnvidia-ml.so.1"))
GUARD = 64
assert lib.nvmlInit_v2() == 0
def handle(i):
    h = ctypes.c_void_p()
    assert lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h)) == 0
    return h
def mig(h, i):
    m = ctypes.c_void_p()
    rc = lib.nvmlDeviceGetMigDeviceHandleByIndex(h, i, ctypes.byref(m))
    return m if rc == 0 else None
CALLS = json.loads(sys.argv[1])
out = []
for name, device, before, size, entries, after in CALLS:
    h = handle(device[0]) if device[1] < 0 else mig(handle(device[0]), device[1])
    buf = ctypes.create_string_buffer(b"\xab" * (size * entries + GUARD), size * entries + GUARD)
    if name == "nvmlDeviceGetMemoryInfo_v2":
        ctypes.memmove(buf, (0x02000028).to_bytes(4, "little"), 4)
    if name == "nvmlDeviceGetFieldValues":
        for k, field in enumerate((1, 83, 91, 186)[:entries]):
            ctypes.memmove(ctypes.addressof(buf) + 40 * k, field.to_bytes(4, "little") + b"\0\0\0\0", 8)
    args = [h]
    count = ctypes.c_uint(entries)
    for a in before:
        args.append(ctypes.byref(count) if a == "count" else a)
    if name == "nvmlDeviceGetProcessUtilization":
        args = [h, buf, ctypes.byref(count), ctypes.c_ulonglong(0)]
    elif name == "nvmlDeviceGetFieldValues":
        args = [h, entries, buf]
    else:
        args.append(buf)
        for a in after:
            args.append(ctypes.byref(count) if a == "count" else a)
    rc = lib[name](*args)
    raw = buf.raw
    out.append({"name": name, "rc": rc, "guard_intact": raw[size * entries:] == b"\xab" * GUARD,
                "written": raw[:size * entries] != b"\xab" * (size * entries), "count": count.value,
                "head": raw[:16].hex()})
print(json.dumps(out))
'''


def run_guarded(machine_spec, calls, **env):
    r = subprocess.run([sys.executable, "-c", GUARDED, json.dumps(calls)], capture_output=True, text=True,
                       timeout=60, env=for_python(sim_env(machine_spec, GPUSEL_SIM_ROOT=SIM_ROOT, **env)))
    if r.returncode != 0:
        raise AssertionError(r.stdout + r.stderr)
    return {c["name"]: c for c in json.loads(r.stdout)}


@unittest.skipUnless(PYTHON_LOADS_LIBRARIES, "ThreadSanitizer build: Python cannot load the doubles")
class GuardBytesTest(Case):
    def setUp(self):
        self.tmp = private_dir("gpusel-nvml-abi-")
        # dgx-h100 with two foreign processes on GPU 0, so the process lists have entries to write.
        with open(os.path.join(os.path.dirname(__file__), "..", "..", "sim", "machines", "dgx-h100.toml")) as f:
            text = f.read()
        first = text.index("[[gpu]]")
        second = text.index("[[gpu]]", first + 1)
        text = text[:second] + 'processes = [{pid = 4242, used_memory = "1GiB"}, {pid = 4343, used_memory = "2GiB"}]\n\n' + text[second:]
        self.machine = os.path.join(self.tmp, "dgx-procs.toml")
        with open(self.machine, "w") as f:
            f.write(text)

    def test_every_versioned_struct_is_written_at_its_size(self):
        whole = [0, -1]
        calls = [
            ("nvmlDeviceGetPciInfo", whole, [], 52, 1, []),
            ("nvmlDeviceGetPciInfo_v2", whole, [], 52, 1, []),
            ("nvmlDeviceGetPciInfo_v3", whole, [], 68, 1, []),
            ("nvmlDeviceGetNvLinkRemotePciInfo", whole, [0], 52, 1, []),
            ("nvmlDeviceGetNvLinkRemotePciInfo_v2", whole, [0], 68, 1, []),
            ("nvmlDeviceGetMemoryInfo", whole, [], 24, 1, []),
            ("nvmlDeviceGetMemoryInfo_v2", whole, [], 40, 1, []),
            ("nvmlDeviceGetBAR1MemoryInfo", whole, [], 24, 1, []),
            ("nvmlDeviceGetUtilizationRates", whole, [], 8, 1, []),
            ("nvmlDeviceGetComputeRunningProcesses", whole, ["count"], 16, 2, []),
            ("nvmlDeviceGetComputeRunningProcesses_v2", whole, ["count"], 24, 2, []),
            ("nvmlDeviceGetComputeRunningProcesses_v3", whole, ["count"], 24, 2, []),
            ("nvmlDeviceGetGraphicsRunningProcesses", whole, ["count"], 16, 2, []),
            ("nvmlDeviceGetGraphicsRunningProcesses_v2", whole, ["count"], 24, 2, []),
            ("nvmlDeviceGetGraphicsRunningProcesses_v3", whole, ["count"], 24, 2, []),
            ("nvmlDeviceGetMPSComputeRunningProcesses", whole, ["count"], 16, 2, []),
            ("nvmlDeviceGetMPSComputeRunningProcesses_v2", whole, ["count"], 24, 2, []),
            ("nvmlDeviceGetMPSComputeRunningProcesses_v3", whole, ["count"], 24, 2, []),
            ("nvmlDeviceGetFieldValues", whole, [], 40, 4, []),
            ("nvmlDeviceGetProcessUtilization", whole, [], 32, 2, []),
            ("nvmlDeviceGetTopologyNearestGpus", whole, [50, "count"], 8, 7, []),
        ]
        got = run_guarded(self.machine, calls)
        for name, *_ in calls:
            with self.subTest(call=name):
                self.assertTrue(got[name]["guard_intact"], f"{name} wrote past its struct: {got[name]}")
        for name in ("nvmlDeviceGetPciInfo", "nvmlDeviceGetPciInfo_v2", "nvmlDeviceGetPciInfo_v3",
                     "nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetBAR1MemoryInfo",
                     "nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetComputeRunningProcesses_v2",
                     "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetFieldValues",
                     "nvmlDeviceGetTopologyNearestGpus"):
            with self.subTest(call=name):
                self.assertEqual(got[name]["rc"], SUCCESS, got[name])
                self.assertTrue(got[name]["written"], got[name])
        # The v1 process list: pid then memory in 16 bytes (4242, 1 GiB), no instance ids.
        head = bytes.fromhex(got["nvmlDeviceGetComputeRunningProcesses"]["head"])
        self.assertEqual(int.from_bytes(head[0:4], "little"), 4242)
        self.assertEqual(int.from_bytes(head[8:16], "little"), 1 << 30)
        self.assertEqual(got["nvmlDeviceGetComputeRunningProcesses"]["count"], 2)
        self.assertEqual(got["nvmlDeviceGetGraphicsRunningProcesses_v3"]["count"], 0)
        # v2's busId is the legacy 16-byte one first.
        self.assertTrue(bytes.fromhex(got["nvmlDeviceGetPciInfo_v2"]["head"]).startswith(b"0000:18:00.0\0"))
        # At SYSTEM (50) or closer: the 7 other GPUs of the machine.
        self.assertEqual(got["nvmlDeviceGetTopologyNearestGpus"]["count"], 7)

    def test_pci_info_v2_writes_52_bytes(self):
        # py3nvml passes nvmlDeviceGetPciInfo_v2 a 52-byte struct; the double wrote 68 bytes into it.
        got = run_guarded("dgx-h100", [("nvmlDeviceGetPciInfo_v2", [0, -1], [], 52, 1, []),
                                       ("nvmlDeviceGetPciInfo", [0, -1], [], 52, 1, [])])
        for name in got:
            self.assertEqual(got[name]["rc"], SUCCESS)
            self.assertTrue(got[name]["guard_intact"], f"{name} wrote past its 52 bytes: {got[name]}")

    def test_mig_device_attributes(self):
        # nvitop reads BAR1 memory of MIG devices too.
        calls = [("nvmlDeviceGetAttributes_v2", [0, 0], [], 40, 1, []),
                 ("nvmlDeviceGetAttributes", [0, 1], [], 40, 1, []),
                 ("nvmlDeviceGetBAR1MemoryInfo", [0, 2], [], 24, 1, [])]
        got = run_guarded("mig-a100", calls)
        for name, *_ in calls:
            self.assertTrue(got[name]["guard_intact"], got[name])
            self.assertEqual(got[name]["rc"], SUCCESS, got[name])
        head = bytes.fromhex(got["nvmlDeviceGetAttributes_v2"]["head"])
        mig0 = machine("mig-a100")["gpu"][0]["mig"][0]
        self.assertEqual(int.from_bytes(head[0:4], "little"), mig0["sm_count"])


GETTERS = r'''
import ctypes, json, os
lib = ctypes.CDLL(os.path.join(os.environ["GPUSEL_SIM_ROOT"], "libnvidia-ml.so.1"))
lib.nvmlInit_v2()
out = []
n = ctypes.c_uint()
lib.nvmlDeviceGetCount_v2(ctypes.byref(n))
for i in range(n.value):
    h = ctypes.c_void_p()
    lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h))
    g = {}
    v, w = ctypes.c_uint(), ctypes.c_uint()
    g["pcie_tx"] = [lib.nvmlDeviceGetPcieThroughput(h, 0, ctypes.byref(v)), v.value]
    g["encoder"] = [lib.nvmlDeviceGetEncoderUtilization(h, ctypes.byref(v), ctypes.byref(w)), v.value]
    g["decoder"] = [lib.nvmlDeviceGetDecoderUtilization(h, ctypes.byref(v), ctypes.byref(w)), v.value]
    g["display"] = [lib.nvmlDeviceGetDisplayActive(h, ctypes.byref(v)), v.value]
    g["compute_mode"] = [lib.nvmlDeviceGetComputeMode(h, ctypes.byref(v)), v.value]
    cur, pend = ctypes.c_int(), ctypes.c_int()
    g["ecc"] = [lib.nvmlDeviceGetEccMode(h, ctypes.byref(cur), ctypes.byref(pend)), cur.value]
    e = ctypes.c_ulonglong()
    g["energy"] = [lib.nvmlDeviceGetTotalEnergyConsumption(h, ctypes.byref(e)), e.value > 0]
    buf = ctypes.create_string_buffer(64)
    g["vbios"] = [lib.nvmlDeviceGetVbiosVersion(h, buf, 64), buf.value.decode()]
    g["inforom"] = [lib.nvmlDeviceGetInforomImageVersion(h, buf, 64), buf.value.decode()]
    g["board"] = [lib.nvmlDeviceGetBoardId(h, ctypes.byref(v)), v.value]
    g["accounting"] = [lib.nvmlDeviceGetAccountingMode(h, ctypes.byref(v)), v.value]
    g["util"] = lib.nvmlDeviceGetUtilizationRates(h, ctypes.create_string_buffer(8))
    g["unmodelled"] = lib.nvmlDeviceGetGspFirmwareVersion(h, buf)
    out.append(g)
buf = ctypes.create_string_buffer(256)
out.append({"process_name": [lib.nvmlSystemGetProcessName(os.getpid(), buf, 256), buf.value.decode()]})
print(json.dumps(out))
'''


@unittest.skipUnless(PYTHON_LOADS_LIBRARIES, "ThreadSanitizer build: Python cannot load the doubles")
class GettersTest(Case):
    def getters(self, name):
        r = subprocess.run([sys.executable, "-c", GETTERS], capture_output=True, text=True, timeout=60,
                           env=for_python(sim_env(name, GPUSEL_SIM_ROOT=SIM_ROOT)))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return json.loads(r.stdout)

    def test_monitor_getters_answer_from_the_model(self):
        out = self.getters("workstation-mixed")
        a4000, rtx4090, a6000 = out[0], out[1], out[2]
        for g in (a4000, rtx4090, a6000):
            self.assertEqual(g["pcie_tx"], [SUCCESS, 0])  # idle
            self.assertEqual(g["encoder"], [SUCCESS, 0])
            self.assertEqual(g["display"], [SUCCESS, 0])
            self.assertEqual(g["compute_mode"], [SUCCESS, 0])
            self.assertEqual(g["energy"], [SUCCESS, True])
            self.assertEqual(g["accounting"], [SUCCESS, 0])
            self.assertEqual(g["unmodelled"], NOT_SUPPORTED)
        self.assertEqual(rtx4090["ecc"][0], NOT_SUPPORTED)  # GeForce: no ECC memory
        self.assertEqual(a6000["ecc"], [SUCCESS, 0])       # workstation: present, off
        self.assertEqual(rtx4090["vbios"], [SUCCESS, "95.02.3C.40.B8"])
        self.assertTrue(a4000["inforom"][1].startswith("G860."), a4000)
        self.assertEqual(a4000["board"], [SUCCESS, 0x0100])
        self.assertEqual(out[3]["process_name"][0], SUCCESS)
        self.assertIn("python", out[3]["process_name"][1])

    def test_datacentre_defaults_and_mig_utilisation(self):
        dgx = self.getters("dgx-h100")
        self.assertEqual(dgx[0]["ecc"], [SUCCESS, 1])
        self.assertEqual(dgx[0]["encoder"][0], NOT_SUPPORTED)  # H100: no NVENC
        self.assertEqual(dgx[0]["decoder"], [SUCCESS, 0])
        mig = self.getters("mig-a100")
        self.assertEqual(mig[0]["util"], NOT_SUPPORTED)  # MIG enabled: per-GPU utilisation is not
        self.assertEqual(mig[1]["util"], SUCCESS)


# A process holding a context and 1 GiB on one MIG device (CUDA_VISIBLE_DEVICES=MIG-...), and, while
# it holds them, what NVML shows in another process.
HOLD = r'''
import ctypes, json, os, subprocess, sys
cu = ctypes.CDLL(os.path.join(os.environ["GPUSEL_SIM_ROOT"], "libcuda.so.1"))
assert cu.cuInit(0) == 0
dev, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_ulonglong()
assert cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
assert cu.cuCtxSetCurrent(ctx) == 0
assert cu.cuMemAlloc_v2(ctypes.byref(ptr), 1 << 30) == 0
env = dict(os.environ)
env.pop("CUDA_VISIBLE_DEVICES")
r = subprocess.run([sys.executable, "-c", sys.argv[1]], capture_output=True, text=True, env=env)
print(r.stdout, r.stderr)
'''
LOOK = r'''
import ctypes, json, os
lib = ctypes.CDLL(os.path.join(os.environ["GPUSEL_SIM_ROOT"], "libnvidia-ml.so.1"))
lib.nvmlInit_v2()
class Info(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("used", ctypes.c_ulonglong), ("gi", ctypes.c_uint), ("ci", ctypes.c_uint)]
class Mem(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]
def look(h):
    infos, n, mem = (Info * 8)(), ctypes.c_uint(8), Mem()
    rc = lib.nvmlDeviceGetComputeRunningProcesses_v3(h, ctypes.byref(n), infos)
    lib.nvmlDeviceGetMemoryInfo(h, ctypes.byref(mem))
    return {"rc": rc, "procs": [[infos[i].pid, infos[i].used, infos[i].gi, infos[i].ci] for i in range(n.value)],
            "used": mem.used}
gpu = ctypes.c_void_p()
lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(gpu))
out = {"gpu": look(gpu), "migs": []}
for i in range(3):
    m = ctypes.c_void_p()
    lib.nvmlDeviceGetMigDeviceHandleByIndex(gpu, i, ctypes.byref(m))
    out["migs"].append(look(m))
print("LOOK " + json.dumps(out))
'''


@unittest.skipUnless(PYTHON_LOADS_LIBRARIES, "ThreadSanitizer build: Python cannot load the doubles")
class MigUsageTest(Case):
    def test_a_context_on_a_mig_device_is_booked_to_it(self):
        mig = machine("mig-a100")["gpu"][0]["mig"]
        r = subprocess.run([sys.executable, "-c", HOLD, LOOK], capture_output=True, text=True, timeout=60,
                           env=for_python(sim_env("mig-a100", GPUSEL_SIM_ROOT=SIM_ROOT,
                                                  CUDA_VISIBLE_DEVICES=mig[1]["uuid"])))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        line = [l for l in r.stdout.splitlines() if l.startswith("LOOK ")]
        self.assertEqual(len(line), 1, r.stdout + r.stderr)
        out = json.loads(line[0][5:])
        booked = (1 << 30) + (512 << 20)  # the allocation and the context
        # The MIG device in use has the process, with its instance ids, and the memory.
        self.assertEqual(len(out["migs"][1]["procs"]), 1, out)
        pid, used, gi, ci = out["migs"][1]["procs"][0]
        self.assertEqual((used, gi, ci), (booked, mig[1]["gpu_instance"], mig[1]["compute_instance"]))
        self.assertEqual(out["migs"][1]["used"], booked)
        # The other MIG devices are free.
        self.assertEqual(out["migs"][0]["procs"], [])
        self.assertEqual(out["migs"][2]["procs"], [])
        self.assertEqual(out["migs"][0]["used"], 0)
        # The parent GPU lists the process with the MIG device's instance ids, not 0xFFFFFFFF.
        self.assertEqual(out["gpu"]["procs"], [[pid, booked, mig[1]["gpu_instance"], mig[1]["compute_instance"]]])


if __name__ == "__main__":
    unittest.main()
