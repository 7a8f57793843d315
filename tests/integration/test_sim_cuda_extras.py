"""The CUDA double's calls beyond gpusel's needs (issue 21), through ctypes as a program makes them:
unified and peer copies, 16-bit memsets, stream getters, pointer attributes, stream-ordered
allocation and pools, event records with flags, and the documented errors of libraries, kernels,
launches and occupancy. In a child process (the double reads GPUSEL_SIM_MACHINE once)."""

import json
import os
import subprocess
import sys
import unittest

from support import PYTHON_LOADS_LIBRARIES, SIM_ROOT, Case, for_python, sim_env

CUDART_THREADS = os.environ.get("GPUSEL_CUDART_THREADS", "build/bin/cudart_threads")

SUCCESS, INVALID_VALUE, INVALID_CONTEXT, INVALID_HANDLE, NOT_SUPPORTED = 0, 1, 201, 400, 801

PROGRAM = r'''
import ctypes, json, os
cu = ctypes.CDLL(os.path.join(os.environ["GPUSEL_SIM_ROOT"], "libcuda.so.1"))
out = {}
assert cu.cuInit(0) == 0
dev0, dev1 = ctypes.c_int(), ctypes.c_int()
cu.cuDeviceGet(ctypes.byref(dev0), 0)
cu.cuDeviceGet(ctypes.byref(dev1), 1)
ctx0, ctx1 = ctypes.c_void_p(), ctypes.c_void_p()
cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx1), dev1)
cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx0), dev0)
cu.cuCtxSetCurrent(ctx1)
far = ctypes.c_ulonglong()
cu.cuMemAlloc_v2(ctypes.byref(far), 4096)
cu.cuCtxSetCurrent(ctx0)
a, b = ctypes.c_ulonglong(), ctypes.c_ulonglong()
cu.cuMemAlloc_v2(ctypes.byref(a), 4096)
host = (ctypes.c_ubyte * 4096)(*([7] * 4096))
back = (ctypes.c_ubyte * 4096)()
# Unified copies: host -> device -> host through cuMemcpy, and a peer copy to device 1 and back.
out["memcpy"] = [cu.cuMemcpy(a, ctypes.c_ulonglong(ctypes.addressof(host)), ctypes.c_size_t(4096)),
                 cu.cuMemcpyPeer(far, ctx1, a, ctx0, ctypes.c_size_t(4096)),
                 cu.cuMemsetD16_v2(a, ctypes.c_ushort(0x0102), ctypes.c_size_t(8)),
                 cu.cuMemcpyPeer(a, ctx0, far, ctx1, ctypes.c_size_t(16)),
                 cu.cuMemcpy(ctypes.c_ulonglong(ctypes.addressof(back)), a, ctypes.c_size_t(4096))]
out["bytes"] = [back[0], back[15], back[16], back[4095]]
cu.cuMemsetD16_v2(a, ctypes.c_ushort(0x0102), ctypes.c_size_t(8))
cu.cuMemcpy(ctypes.c_ulonglong(ctypes.addressof(back)), a, ctypes.c_size_t(16))
out["d16"] = list(back[:4])
out["peer_bad_ctx"] = cu.cuMemcpyPeer(far, ctypes.c_void_p(0x1234), a, ctx0, ctypes.c_size_t(16))
# Streams.
stream = ctypes.c_void_p()
cu.cuStreamCreateWithPriority(ctypes.byref(stream), 1, -3)
prio, flags, sctx, sdev = ctypes.c_int(), ctypes.c_uint(), ctypes.c_void_p(), ctypes.c_int()
out["stream"] = [cu.cuStreamGetPriority(stream, ctypes.byref(prio)), prio.value,
                 cu.cuStreamGetFlags(stream, ctypes.byref(flags)), flags.value,
                 cu.cuStreamGetCtx(stream, ctypes.byref(sctx)), sctx.value == ctx0.value,
                 cu.cuStreamGetDevice(stream, ctypes.byref(sdev)), sdev.value == dev0.value,
                 cu.cuStreamGetPriority(ctypes.c_void_p(2), ctypes.byref(prio)),
                 cu.cuStreamGetPriority(ctypes.c_void_p(0xdead0), ctypes.byref(prio))]
status = ctypes.c_int(-1)
out["capturing"] = [cu.cuStreamIsCapturing(stream, ctypes.byref(status)), status.value]
event = ctypes.c_void_p()
cu.cuEventCreate(ctypes.byref(event), 0)
out["record_flags"] = [cu.cuEventRecordWithFlags(event, stream, 0), cu.cuEventRecordWithFlags(event, stream, 9)]
# Pointer attributes: device memory, then unknown host memory.
kinds = (ctypes.c_int * 3)(2, 9, 1)   # MEMORY_TYPE, DEVICE_ORDINAL, CONTEXT
mtype, ordinal, pctx = ctypes.c_uint(), ctypes.c_int(), ctypes.c_void_p()
data = (ctypes.c_void_p * 3)(ctypes.addressof(mtype), ctypes.addressof(ordinal), ctypes.addressof(pctx))
rc = cu.cuPointerGetAttributes(3, kinds, data, far)
out["attrs_device"] = [rc, mtype.value, ordinal.value, pctx.value == ctx1.value]
rc = cu.cuPointerGetAttributes(3, kinds, data, ctypes.c_ulonglong(ctypes.addressof(host)))
out["attrs_host"] = [rc, mtype.value, ordinal.value, pctx.value]
# Stream-ordered allocation and the default pool.
p, pool, threshold = ctypes.c_ulonglong(), ctypes.c_void_p(), ctypes.c_ulonglong(1 << 30)
free_before, total = ctypes.c_size_t(), ctypes.c_size_t()
cu.cuMemGetInfo_v2(ctypes.byref(free_before), ctypes.byref(total))
out["async"] = [cu.cuMemAllocAsync(ctypes.byref(p), ctypes.c_size_t(1 << 20), stream)]
free_after = ctypes.c_size_t()
cu.cuMemGetInfo_v2(ctypes.byref(free_after), ctypes.byref(total))
out["async"] += [free_before.value - free_after.value, cu.cuMemFreeAsync(p, stream),
                 cu.cuDeviceGetDefaultMemPool(ctypes.byref(pool), dev0),
                 cu.cuMemPoolSetAttribute(pool, 4, ctypes.byref(threshold))]
got = ctypes.c_ulonglong()
out["async"] += [cu.cuMemPoolGetAttribute(pool, 4, ctypes.byref(got)), got.value,
                 cu.cuMemAllocFromPoolAsync(ctypes.byref(p), ctypes.c_size_t(64), pool, stream)]
# No device code: libraries cannot load, kernels and launches name invalid handles.
lib, fn = ctypes.c_void_p(), ctypes.c_void_p()
n = ctypes.c_int()
config = (ctypes.c_ubyte * 64)()
out["code"] = [cu.cuLibraryLoadData(ctypes.byref(lib), b"\0" * 16, None, None, 0, None, None, 0),
               cu.cuLaunchKernelEx(ctypes.byref(config), fn, None, None),
               cu.cuLaunchKernelEx(None, fn, None, None),
               cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(n), fn, 128, ctypes.c_size_t(0)),
               cu.cuKernelGetFunction(ctypes.byref(fn), ctypes.c_void_p(0x10))]
# An unmodelled call, and the deprecated context calls pycuda binds.
attached = ctypes.c_void_p()
out["deprecated"] = [cu.cuCtxAttach(ctypes.byref(attached), 0), attached.value == ctx0.value,
                     cu.cuCtxDetach(attached), cu.cuGraphAddEmptyNode(ctypes.byref(fn), None, None, 0)]
print(json.dumps(out))
'''


@unittest.skipUnless(PYTHON_LOADS_LIBRARIES, "ThreadSanitizer build: Python cannot load the doubles")
class CudaExtrasTest(Case):
    def test_calls_programs_make(self):
        r = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=60,
                           env=for_python(sim_env("dgx-h100", GPUSEL_SIM_ROOT=SIM_ROOT)))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual(out["memcpy"], [SUCCESS] * 5)
        # The peer copy back from device 1 put its 7s over the 16-bit memset's first 16 bytes.
        self.assertEqual(out["bytes"], [7, 7, 7, 7])
        self.assertEqual(out["d16"], [0x02, 0x01, 0x02, 0x01])
        self.assertEqual(out["peer_bad_ctx"], INVALID_CONTEXT)
        self.assertEqual(out["stream"], [SUCCESS, -3, SUCCESS, 1, SUCCESS, True, SUCCESS, True, SUCCESS,
                                         INVALID_HANDLE])
        self.assertEqual(out["capturing"], [SUCCESS, 0])
        self.assertEqual(out["record_flags"], [SUCCESS, INVALID_VALUE])
        self.assertEqual(out["attrs_device"], [SUCCESS, 2, 1, True])
        self.assertEqual(out["attrs_host"], [SUCCESS, 0, -2, None])
        self.assertEqual(out["async"], [SUCCESS, 1 << 20, SUCCESS, SUCCESS, SUCCESS, SUCCESS, 1 << 30, SUCCESS])
        self.assertEqual(out["code"], [NOT_SUPPORTED, INVALID_HANDLE, INVALID_VALUE, INVALID_HANDLE, INVALID_HANDLE])
        self.assertEqual(out["deprecated"], [SUCCESS, True, SUCCESS, NOT_SUPPORTED])



class RuntimeThreadsTest(Case):
    """The simulated runtime from four threads on different devices at once (built in every preset,
    so ThreadSanitizer and AddressSanitizer check its locking)."""

    def test_threads_each_on_their_device(self):
        if not os.path.exists(CUDART_THREADS):
            self.skipTest(f"{CUDART_THREADS} is not built")
        # libcudart.so.12: the bundled machines' drivers are CUDA 12.8.
        r = subprocess.run([CUDART_THREADS, os.path.join(SIM_ROOT, "libcudart.so.12")], capture_output=True,
                           text=True, timeout=120, env=sim_env("dgx-h100", GPUSEL_SIM_DEVICE_HANDLES=None))
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "ok"), r.stderr)
        self.assertNotIn("ThreadSanitizer", r.stderr)
        self.assertNotIn("AddressSanitizer", r.stderr)


if __name__ == "__main__":
    unittest.main()
