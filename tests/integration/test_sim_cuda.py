"""The CUDA double, driven by a C program (tests/integration/cuda_user.c) and by ctypes, against
every rule of docs/driver-rules.md. Expected values are written out by hand from the
machine files, not computed by gpusel's own model."""

import json
import os
import subprocess
import sys
import unittest

from support import CUDA_USER, SIM_ROOT, Case, for_python, machine, private_path, sim_env, uuids

DGX = uuids("dgx-h100")
MIX = uuids("workstation-mixed")  # PCI order: A4000, 4090, A6000
MIG_GPUS = uuids("mig-a100")
MIGS = [m["uuid"] for m in machine("mig-a100")["gpu"][0]["mig"]]


def enumerate_cuda(name, **env):
    """What the C program sees: (init error or None, [ (uuid_v2, uuid_v1, bus, bytes, cc, sms, name) ])."""
    r = subprocess.run([CUDA_USER], capture_output=True, text=True, env=sim_env(name, **env), timeout=60)
    if r.returncode != 0:
        raise AssertionError(r.stdout + r.stderr)
    lines = r.stdout.splitlines()
    if lines[0].startswith("init "):
        return lines[0].split()[2], []
    devices = []
    for line in lines[1:]:
        parts = line.split(" ", 7)
        devices.append((parts[1], parts[2], parts[3], int(parts[4]), parts[5], int(parts[6]), parts[7]))
    assert lines[0] == f"count {len(devices)}"
    return None, devices


def visible(name, **env):
    err, devices = enumerate_cuda(name, **env)
    return err or [d[0] for d in devices]


def gpu(u):
    return u[4:]  # the C program prints v2 UUIDs without a prefix


class CudaRulesTest(Case):
    def test_unset_is_everything_in_order(self):
        self.assertEqual(visible("dgx-h100"), [gpu(u) for u in DGX])

    def test_fastest_first_on_mixed_machine(self):
        self.assertEqual(visible("workstation-mixed"), [gpu(MIX[1]), gpu(MIX[2]), gpu(MIX[0])])
        self.assertEqual(visible("workstation-mixed", CUDA_DEVICE_ORDER="FASTEST_FIRST"),
                         [gpu(MIX[1]), gpu(MIX[2]), gpu(MIX[0])])
        self.assertEqual(visible("workstation-mixed", CUDA_DEVICE_ORDER="bogus"),
                         [gpu(MIX[1]), gpu(MIX[2]), gpu(MIX[0])])

    def test_pci_bus_id_order(self):
        self.assertEqual(visible("workstation-mixed", CUDA_DEVICE_ORDER="PCI_BUS_ID"), [gpu(u) for u in MIX])

    def test_integers_are_positions_in_cuda_order(self):
        # Under FASTEST_FIRST, 0 is the 4090 (nvidia-smi index 1).
        self.assertEqual(visible("workstation-mixed", CUDA_VISIBLE_DEVICES="0"), [gpu(MIX[1])])
        self.assertEqual(visible("workstation-mixed", CUDA_VISIBLE_DEVICES="2,0"), [gpu(MIX[0]), gpu(MIX[1])])
        self.assertEqual(visible("workstation-mixed", CUDA_VISIBLE_DEVICES="0", CUDA_DEVICE_ORDER="PCI_BUS_ID"),
                         [gpu(MIX[0])])

    def test_integer_entries(self):
        cases = {
            "2,1": [2, 1],
            "0,2,-1,1": [0, 2],
            " 3, 4": [3, 4],
            "5abc": [5],
            "+6,-0": [6, 0],
            "7,8,1": [7],
            "x,1": [],
            "1,,2": [1],
            "1,GPU-0": [1],
        }
        for value, want in cases.items():
            with self.subTest(CUDA_VISIBLE_DEVICES=value):
                got = visible("dgx-h100", CUDA_VISIBLE_DEVICES=value)
                self.assertEqual(got, [gpu(DGX[i]) for i in want] if want else "CUDA_ERROR_NO_DEVICE")

    def test_empty_and_duplicates_expose_nothing(self):
        for value in ("", "1,1", "2,02", f"{DGX[3][:10]},{DGX[3]}"):
            with self.subTest(CUDA_VISIBLE_DEVICES=value):
                self.assertEqual(visible("dgx-h100", CUDA_VISIBLE_DEVICES=value), "CUDA_ERROR_NO_DEVICE")

    def test_uuid_entries(self):
        cases = {
            f"{DGX[5]},{DGX[0]}": [5, 0],
            f"{DGX[5][:9]}": [5],
            f"{DGX[2][:9].upper().replace('GPU-', 'GPU-')}": [2],
            f"{DGX[4][:8]},1": [4],
            f"{DGX[4][:8]}, {DGX[1]}": [4],
            f"{DGX[4]} ": [],
            "GPU-": [],
            f"GPU-ffffffff,{DGX[1]}": [],
        }
        for value, want in cases.items():
            with self.subTest(CUDA_VISIBLE_DEVICES=value):
                got = visible("dgx-h100", CUDA_VISIBLE_DEVICES=value)
                self.assertEqual(got, [gpu(DGX[i]) for i in want] if want else "CUDA_ERROR_NO_DEVICE")

    def test_uuid_entries_ignore_device_order(self):
        value = f"{MIX[0]},{MIX[2][:10]}"
        self.assertEqual(visible("workstation-mixed", CUDA_VISIBLE_DEVICES=value), [gpu(MIX[0]), gpu(MIX[2])])

    def test_mig_r570(self):
        err, devices = enumerate_cuda("mig-a100")
        self.assertIsNone(err)
        self.assertEqual([d[0] for d in devices], [m[4:] for m in MIGS] + [gpu(MIG_GPUS[1])])
        # v1 gives the parent GPU for a MIG device; v2 the MIG device itself.
        self.assertEqual(devices[0][1], MIG_GPUS[0])
        self.assertEqual(devices[0][6], "NVIDIA A100-SXM4-40GB MIG 2g.10gb")
        self.assertEqual(devices[0][3], 9984 << 20)
        self.assertEqual(devices[0][5], 28)
        self.assertEqual(visible("mig-a100", CUDA_VISIBLE_DEVICES=f"{MIGS[2][:12]},{MIGS[0]}"),
                         [MIGS[2][4:], MIGS[0][4:]])
        self.assertEqual(visible("mig-a100", CUDA_VISIBLE_DEVICES=f"MIG-{MIG_GPUS[0]}/4/0"), [MIGS[1][4:]])
        self.assertEqual(visible("mig-a100", CUDA_VISIBLE_DEVICES="1"), [gpu(MIG_GPUS[1])])
        self.assertEqual(visible("mig-a100", CUDA_VISIBLE_DEVICES="0"), [m[4:] for m in MIGS])

    def test_mig_legacy_rule(self):
        path = private_path("mig-legacy.toml")
        with open(os.path.join(os.path.dirname(CUDA_USER), "..", "lib", "gpusel", "sim", "machines", "mig-a100.toml")) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(text.replace('cuda_driver_version = 12080', 'cuda_driver_version = 12040\nmig_rule = "legacy"'))
        try:
            self.assertEqual(visible(path), [MIGS[0][4:]])
            self.assertEqual(visible(path, CUDA_VISIBLE_DEVICES=f"{MIGS[1]},{MIGS[2]}"), [MIGS[1][4:]])
            self.assertEqual(visible(path, CUDA_VISIBLE_DEVICES="1"), [gpu(MIG_GPUS[1])])
        finally:
            os.unlink(path)

    def test_device_properties(self):
        err, devices = enumerate_cuda("single-l4")
        self.assertIsNone(err)
        (u2, u1, bus, total, cc, sms, name), = devices
        self.assertEqual(u2, "5e0a7c31-00d2-4b9e-8f00-1c2d3e4f5a6b")  # holds 00 bytes
        self.assertEqual(u1, "GPU-" + u2)
        self.assertEqual(bus.upper(), "0000:00:03.0")
        self.assertEqual(total, 23034 << 20)
        self.assertEqual((cc, sms, name), ("8.9", 58, "NVIDIA L4"))

    def test_cuda_faults(self):
        self.assertEqual(visible("cuda-init-fails"), "CUDA_ERROR_UNKNOWN")
        # A library loaded despite the "missing" fault behaves as the toolkit's stub would.
        self.assertEqual(visible("cuda-missing", LD_LIBRARY_PATH=SIM_ROOT), "CUDA_ERROR_STUB_LIBRARY")
        self.assertEqual(visible("dgx-h100", GPUSEL_SIM_MACHINE="/nonexistent.toml"), "CUDA_ERROR_NO_DEVICE")

    def test_lost_gpu_is_not_enumerated(self):
        u = uuids("lost-gpu")
        self.assertEqual(visible("lost-gpu"), [gpu(u[0]), gpu(u[1]), gpu(u[3])])


# Memory, copies, streams and events, through ctypes in a child process.
TIMING = r'''
import ctypes, json, os
lib = ctypes.CDLL(os.path.join(os.environ["GPUSEL_SIM_ROOT"], "libcuda.so.1"))
out = {}
def call(name, *args):
    return getattr(lib, name)(*args)
out["before_init"] = call("cuDeviceGetCount", ctypes.byref(ctypes.c_int()))
out["init"] = call("cuInit", 0)
dev = ctypes.c_int()
call("cuDeviceGet", ctypes.byref(dev), 0)
ctx = ctypes.c_void_p()
out["alloc_no_ctx"] = call("cuMemAlloc_v2", ctypes.byref(ctypes.c_ulonglong()), ctypes.c_size_t(16))
out["retain"] = call("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev)
out["set"] = call("cuCtxSetCurrent", ctx)
cur = ctypes.c_void_p()
call("cuCtxGetCurrent", ctypes.byref(cur))
out["current_is_primary"] = cur.value == ctx.value
size = 64 << 20
d1, d2 = ctypes.c_ulonglong(), ctypes.c_ulonglong()
out["alloc"] = [call("cuMemAlloc_v2", ctypes.byref(d1), ctypes.c_size_t(size)),
                call("cuMemAlloc_v2", ctypes.byref(d2), ctypes.c_size_t(size))]
out["oom"] = call("cuMemAlloc_v2", ctypes.byref(ctypes.c_ulonglong()), ctypes.c_size_t(1 << 40))
host = ctypes.c_void_p()
out["host"] = call("cuMemHostAlloc", ctypes.byref(host), ctypes.c_size_t(size), 0)
ctypes.memset(host, 0x5A, size)
s1, s2 = ctypes.c_void_p(), ctypes.c_void_p()
call("cuStreamCreate", ctypes.byref(s1), 1)
call("cuStreamCreate", ctypes.byref(s2), 1)
ev = [ctypes.c_void_p() for _ in range(6)]
for e in ev:
    call("cuEventCreate", ctypes.byref(e), 0)
def elapsed(a, b):
    ms = ctypes.c_float()
    rc = call("cuEventElapsedTime", ctypes.byref(ms), a, b)
    return ms.value if rc == 0 else -rc
n = 4
# h2d: n copies on one stream
call("cuEventRecord", ev[0], s1)
for _ in range(n):
    call("cuMemcpyHtoDAsync_v2", d1, host, ctypes.c_size_t(size), s1)
call("cuEventRecord", ev[1], s1)
out["h2d_ms"] = elapsed(ev[0], ev[1])
# d2d
call("cuEventRecord", ev[0], s1)
call("cuMemcpyDtoDAsync_v2", d2, d1, ctypes.c_size_t(size), s1)
call("cuEventRecord", ev[1], s1)
out["d2d_ms"] = elapsed(ev[0], ev[1])
# d2h into pinned memory after clearing it, then check the data came back
ctypes.memset(host, 0, size)
call("cuEventRecord", ev[0], s1)
call("cuMemcpyDtoHAsync_v2", host, d2, ctypes.c_size_t(size), s1)
call("cuEventRecord", ev[1], s1)
call("cuStreamSynchronize", s1)
out["d2h_ms"] = elapsed(ev[0], ev[1])
buf = (ctypes.c_ubyte * size).from_address(host.value)
out["roundtrip_ok"] = all(b == 0x5A for b in bytes(buf[:4096])) and buf[size - 1] == 0x5A and buf[size // 2] == 0x5A
# two h2d copies on two streams share one link: together they take twice as long as one
call("cuEventRecord", ev[2], s1)
call("cuStreamWaitEvent", s2, ev[2], 0)
call("cuMemcpyHtoDAsync_v2", d1, host, ctypes.c_size_t(size), s1)
call("cuMemcpyHtoDAsync_v2", d2, host, ctypes.c_size_t(size), s2)
call("cuEventRecord", ev[3], s1)
call("cuEventRecord", ev[4], s2)
out["shared_link_ms"] = max(elapsed(ev[2], ev[3]), elapsed(ev[2], ev[4]))
# h2d and d2h at once use both directions of the link: no slower than one
call("cuStreamWaitEvent", s1, ev[4], 0)  # join: s1 waits for the end of s2's copy
call("cuEventRecord", ev[2], s1)
call("cuStreamWaitEvent", s2, ev[2], 0)
call("cuMemcpyHtoDAsync_v2", d1, host, ctypes.c_size_t(size), s1)
call("cuMemcpyDtoHAsync_v2", host, d2, ctypes.c_size_t(size), s2)
call("cuEventRecord", ev[3], s1)
call("cuEventRecord", ev[4], s2)
out["bidir_ms"] = max(elapsed(ev[2], ev[3]), elapsed(ev[2], ev[4]))
# pageable host memory is slower in this model
pageable = ctypes.create_string_buffer(size)
call("cuMemcpyHtoD_v2", d1, pageable, ctypes.c_size_t(size))  # the link is free after this one
call("cuEventRecord", ev[0], None)
call("cuMemcpyHtoD_v2", d1, pageable, ctypes.c_size_t(size))
call("cuEventRecord", ev[1], None)
out["pageable_ms"] = elapsed(ev[0], ev[1])
# memset writes the pattern
out["memset"] = call("cuMemsetD32Async", d1, 0xDEADBEEF, ctypes.c_size_t(size // 4), s1)
small = (ctypes.c_uint * 4)()
call("cuMemcpyDtoH_v2", small, d1, ctypes.c_size_t(16))
out["memset_ok"] = list(small) == [0xDEADBEEF] * 4
# out-of-range copies and bad handles fail cleanly
out["overrun"] = call("cuMemcpyHtoD_v2", ctypes.c_ulonglong(d1.value + size - 8), host, ctypes.c_size_t(16))
out["bad_stream"] = call("cuMemcpyHtoDAsync_v2", d1, host, ctypes.c_size_t(16), ctypes.c_void_p(0x10))
out["unrecorded"] = elapsed(ev[5], ev[1])
out["free"] = [call("cuMemFree_v2", d1), call("cuMemFree_v2", d1), call("cuMemFreeHost", host)]
name = ctypes.c_char_p()
call("cuGetErrorName", 2, ctypes.byref(name))
out["err_name"] = name.value.decode()
fn, status = ctypes.c_void_p(), ctypes.c_int()
out["proc"] = [call("cuGetProcAddress_v2", b"cuMemAlloc", ctypes.byref(fn), 12000, ctypes.c_ulonglong(0), ctypes.byref(status)),
               fn.value == ctypes.cast(lib.cuMemAlloc_v2, ctypes.c_void_p).value, status.value]
fn2 = ctypes.c_void_p()
out["proc_uuid_old"] = [call("cuGetProcAddress_v2", b"cuDeviceGetUuid", ctypes.byref(fn2), 11000, ctypes.c_ulonglong(0), None),
                        fn2.value == ctypes.cast(lib.cuDeviceGetUuid, ctypes.c_void_p).value]
out["proc_unknown"] = call("cuGetProcAddress_v2", b"cuNoSuchThing", ctypes.byref(fn), 12000, ctypes.c_ulonglong(0), ctypes.byref(status)), status.value
out["module"] = call("cuModuleLoadData", ctypes.byref(ctypes.c_void_p()), b"// ptx")
out["release"] = [call("cuDevicePrimaryCtxRelease_v2", dev), call("cuDevicePrimaryCtxRelease_v2", dev)]
print(json.dumps(out))
'''


class CudaMemoryTest(Case):
    def run_timing(self, name):
        env = sim_env(name, GPUSEL_SIM_ROOT=SIM_ROOT)
        r = subprocess.run([sys.executable, "-c", TIMING], capture_output=True, text=True, env=for_python(env),
                           timeout=120)
        if r.returncode != 0:
            raise AssertionError(r.stdout + r.stderr)
        return json.loads(r.stdout)

    def test_dgx_copies(self):
        out = self.run_timing("dgx-h100")
        g = machine("dgx-h100")["gpu"][0]
        size = 64 << 20
        ms = lambda nbytes, gbps: nbytes / (gbps * 1e9) * 1e3
        self.assertEqual(out["before_init"], 3)  # NOT_INITIALIZED
        self.assertEqual(out["init"], 0)
        self.assertEqual(out["alloc_no_ctx"], 201)  # INVALID_CONTEXT
        self.assertEqual([out["retain"], out["set"]], [0, 0])
        self.assertTrue(out["current_is_primary"])
        self.assertEqual(out["alloc"], [0, 0])
        self.assertEqual(out["oom"], 2)
        self.assertEqual(out["host"], 0)
        self.assertAlmostEqual(out["h2d_ms"], ms(4 * size, g["pcie_h2d_gbps"]), delta=1e-3)
        self.assertAlmostEqual(out["d2d_ms"], ms(2 * size, g["memory_bandwidth_gbps"]), delta=1e-4)
        self.assertAlmostEqual(out["d2h_ms"], ms(size, g["pcie_d2h_gbps"]), delta=1e-3)
        self.assertTrue(out["roundtrip_ok"])
        self.assertAlmostEqual(out["shared_link_ms"], ms(2 * size, g["pcie_h2d_gbps"]), delta=1e-3)
        self.assertAlmostEqual(out["bidir_ms"], max(ms(size, g["pcie_h2d_gbps"]), ms(size, g["pcie_d2h_gbps"])),
                               delta=1e-3)
        self.assertAlmostEqual(out["pageable_ms"], 2 * ms(size, g["pcie_h2d_gbps"]), delta=1e-3)
        self.assertEqual([out["memset"], out["memset_ok"]], [0, True])
        self.assertEqual(out["overrun"], 1)  # INVALID_VALUE
        self.assertEqual(out["bad_stream"], 400)  # INVALID_HANDLE
        self.assertEqual(out["unrecorded"], -400)
        self.assertEqual(out["free"], [0, 1, 0])
        self.assertEqual(out["err_name"], "CUDA_ERROR_OUT_OF_MEMORY")
        self.assertEqual(out["proc"], [0, True, 0])
        self.assertEqual(out["proc_uuid_old"], [0, True])
        self.assertEqual(out["proc_unknown"], [500, 1])
        self.assertEqual(out["module"], 801)  # NOT_SUPPORTED: no JIT in the simulator
        self.assertEqual(out["release"], [0, 201])

    def test_corrupt_copies_fault(self):
        out = self.run_timing("corrupt-copies")
        self.assertFalse(out["roundtrip_ok"])


# Issue 10: what real clients call, through ctypes in a child process.
CLIENT_API = r"""
import ctypes, json, os
lib = ctypes.CDLL(os.path.join(os.environ["GPUSEL_SIM_ROOT"], "libcuda.so.1"))
out = {}
def call(name, *args):
    return getattr(lib, name)(*args)
call("cuInit", 0)
n = ctypes.c_int()
call("cuDeviceGetCount", ctypes.byref(n))
v = ctypes.c_int()
# CUdevice handles come from cuDeviceGet; the double's differ from the ordinals.
h = []
for i in range(n.value):
    call("cuDeviceGet", ctypes.byref(v), i)
    h.append(v.value)
out["handles"] = h
out["ordinal_as_handle"] = [call("cuDeviceGetAttribute", ctypes.byref(v), 13, i) for i in range(n.value)
                            if i not in h]
found = ctypes.c_int()
bus = ctypes.create_string_buffer(32)
call("cuDeviceGetPCIBusId", bus, 32, h[1])
out["by_bus"] = [call("cuDeviceGetByPCIBusId", ctypes.byref(found), bus.value), found.value == h[1]]
out["attrs"] = {a: [call("cuDeviceGetAttribute", ctypes.byref(v), a, h[0]), v.value][0] for a in range(-1, 150)}
out["clock"] = [call("cuDeviceGetAttribute", ctypes.byref(v), 13, d) or v.value for d in h]
out["bus_width"] = [call("cuDeviceGetAttribute", ctypes.byref(v), 37, d) or v.value for d in h]
out["peer"] = [[call("cuDeviceCanAccessPeer", ctypes.byref(v), a, b) or v.value for b in h] for a in h]
out["atomic"] = [call("cuDeviceGetP2PAttribute", ctypes.byref(v), 3, h[0], h[1]) or v.value,
                 call("cuDeviceGetP2PAttribute", ctypes.byref(v), 2, h[0], h[0])]
ma, mi = ctypes.c_int(), ctypes.c_int()
out["cc"] = [call("cuDeviceComputeCapability", ctypes.byref(ma), ctypes.byref(mi), h[0]), ma.value, mi.value]
ctx, popped, dev = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_int()
out["ctx"] = [call("cuCtxCreate_v2", ctypes.byref(ctx), 0, h[1]), call("cuCtxGetDevice", ctypes.byref(dev)),
              dev.value == h[1],
              call("cuCtxPopCurrent_v2", ctypes.byref(popped)), popped.value == ctx.value,
              call("cuCtxGetDevice", ctypes.byref(dev)), call("cuCtxPushCurrent_v2", ctx),
              call("cuCtxDestroy_v2", ctx), call("cuCtxGetDevice", ctypes.byref(dev))]
free, total = ctypes.c_size_t(), ctypes.c_size_t()
pctx = ctypes.c_void_p()
call("cuDevicePrimaryCtxRetain", ctypes.byref(pctx), h[0])
call("cuCtxSetCurrent", pctx)
out["meminfo"] = [call("cuMemGetInfo_v2", ctypes.byref(free), ctypes.byref(total)), free.value < total.value]
class IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]  # passed by value
ev, st = ctypes.c_void_p(), ctypes.c_void_p()
call("cuEventCreate", ctypes.byref(ev), 0)
call("cuStreamCreate", ctypes.byref(st), 0)
out["queries"] = [call("cuEventQuery", ev), call("cuStreamQuery", st), call("cuModuleUnload", ctypes.c_void_p(8)),
                  call("cuIpcOpenMemHandle_v2", ctypes.byref(ctypes.c_ulonglong()), IpcHandle(), 1),
                  call("cuDevicePrimaryCtxRelease", h[0])]
fn, status = ctypes.c_void_p(), ctypes.c_int()
def proc(name, version):
    rc = call("cuGetProcAddress_v2", name.encode(), ctypes.byref(fn), version, ctypes.c_ulonglong(0), ctypes.byref(status))
    return [rc, status.value, fn.value]
addr = lambda s: ctypes.cast(getattr(lib, s), ctypes.c_void_p).value
out["proc"] = {
    "ctxcreate": proc("cuCtxCreate", 12000)[2] == addr("cuCtxCreate_v2"),
    "release_old": proc("cuDevicePrimaryCtxRelease", 10000)[2] == addr("cuDevicePrimaryCtxRelease"),
    "release_new": proc("cuDevicePrimaryCtxRelease", 11000)[2] == addr("cuDevicePrimaryCtxRelease_v2"),
    "ipc_new": proc("cuIpcOpenMemHandle", 12000)[2] == addr("cuIpcOpenMemHandle_v2"),
    "peer": proc("cuDeviceCanAccessPeer", 12000)[2] == addr("cuDeviceCanAccessPeer"),
    "too_old": proc("cuMemAlloc", 2000)[:2],
    "versioned_name": proc("cuMemAlloc_v2", 12000)[:2],
}
print(json.dumps(out))
"""


class CudaClientApiTest(Case):
    def run_api(self, name, **env):
        r = subprocess.run([sys.executable, "-c", CLIENT_API], capture_output=True, text=True,
                           env=for_python(sim_env(name, GPUSEL_SIM_ROOT=SIM_ROOT, **env)), timeout=120)
        if r.returncode != 0:
            raise AssertionError(r.stdout + r.stderr)
        return json.loads(r.stdout), r.stderr

    def test_device_handles_are_not_ordinals(self):
        # NVIDIA's drivers make a CUdevice equal to its ordinal, which the API does not promise; the
        # double's differ, so that a program passing an ordinal where a handle belongs fails here.
        out, _ = self.run_api("dgx-h100")
        self.assertEqual(len(set(out["handles"])), 8)
        self.assertEqual(set(out["handles"]) & set(range(8)), set())
        self.assertEqual(out["ordinal_as_handle"], [101] * 8)  # CUDA_ERROR_INVALID_DEVICE
        self.assertEqual(out["by_bus"], [0, True])

    def test_every_defined_attribute_answers(self):
        out, _ = self.run_api("dgx-h100")
        rcs = {int(k): v for k, v in out["attrs"].items()}
        self.assertEqual([a for a in range(1, 148) if rcs[a] != 0], [])
        self.assertEqual([rcs[a] for a in (-1, 0, 148, 149)], [1, 1, 1, 1])  # INVALID_VALUE
        self.assertEqual(out["cc"], [0, 9, 0])

    def test_per_model_figures_and_peer_access(self):
        dgx, _ = self.run_api("dgx-h100")
        self.assertEqual(set(dgx["clock"]), {1980000})
        self.assertEqual(set(dgx["bus_width"]), {5120})
        self.assertEqual(dgx["peer"], [[int(a != b) for b in range(8)] for a in range(8)])  # NVLink all-to-all
        self.assertEqual(dgx["atomic"], [1, 101])  # native atomics over NVLink; a device to itself: INVALID_DEVICE
        mixed, _ = self.run_api("workstation-mixed", CUDA_DEVICE_ORDER="PCI_BUS_ID")  # A4000, 4090, A6000
        self.assertEqual(mixed["clock"], [1560000, 2520000, 1800000])
        self.assertEqual(mixed["bus_width"], [256, 384, 384])
        # PCIe peers between the RTX boards; the GeForce 4090 has peer access off.
        self.assertEqual(mixed["peer"], [[0, 0, 1], [0, 0, 0], [1, 0, 0]])
        self.assertEqual(mixed["atomic"], [0, 101])

    def test_contexts_queries_and_proc_address(self):
        out, _ = self.run_api("dgx-h100")
        self.assertEqual(out["ctx"], [0, 0, True, 0, True, 201, 0, 0, 201])
        self.assertEqual(out["meminfo"], [0, True])
        self.assertEqual(out["queries"], [0, 0, 400, 801, 0])
        self.assertEqual(out["proc"], {"ctxcreate": True, "release_old": True, "release_new": True, "ipc_new": True,
                                       "peer": True, "too_old": [500, 2], "versioned_name": [500, 1]})

    def test_trace(self):
        out, err = self.run_api("dgx-h100", GPUSEL_SIM_TRACE="stderr")
        self.assertRegex(err, r"gpusel-sim\[\d+\] libcuda.so.1: cuInit\(0\) = 0 CUDA_SUCCESS")
        self.assertRegex(err, r"cuDeviceGetCount\(0x[0-9a-f]+->8\) = 0 CUDA_SUCCESS")
        self.assertIn("cuDeviceGetAttribute(", err)
        self.assertIn("= 1 CUDA_ERROR_INVALID_VALUE", err)
        self.assertIn('MISSING cuGetProcAddress "cuMemAlloc_v2" (version 12000)', err)


if __name__ == "__main__":
    unittest.main()
