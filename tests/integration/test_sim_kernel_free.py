"""The calls that need no kernel on a real GPU either (issue 32), on the simulated driver: 2D copies
and memsets with the data moved, host functions and stream callbacks in stream order, prefetches
and advice on managed memory, host allocation flags, IPC handles and pool attributes, from a C
program (tests/integration/cuda_kernel_free.c: no CUDA toolkit needed). The CUDA runtime's side
is in test_sim_runtime.py (nvcc-built). And NVML's supported clocks, which Slurm reads per GPU."""

import json
import os
import subprocess
import sys
import unittest

from support import PYTHON_LOADS_LIBRARIES, Case, for_python, sim_env

KERNEL_FREE = os.environ.get("GPUSEL_CUDA_KERNEL_FREE", "build/bin/cuda_kernel_free")

SUCCESS, INVALID_VALUE, INVALID_DEVICE, INVALID_HANDLE, NOT_SUPPORTED = 0, 1, 101, 400, 801


class KernelFreeDriverTest(Case):
    @classmethod
    def setUpClass(cls):
        r = subprocess.run([KERNEL_FREE], capture_output=True, text=True, env=sim_env("dgx-h100"), timeout=60)
        if r.returncode != 0:
            raise AssertionError(r.stdout + r.stderr)
        cls.out = {line.split()[0]: line.split()[1:] for line in r.stdout.splitlines()}

    def values(self, key):
        return [int(v, 0) if v.lstrip("-").isdigit() else v for v in self.out[key]]

    def test_2d_copies_move_the_rows_and_only_them(self):
        # Host -> pitched device (x offset 4) -> device (unified addressing, on a stream) -> host at
        # pitch 32: the rows arrive, the padding between them is untouched.
        self.assertEqual(self.values("copy2d"), [SUCCESS, SUCCESS, SUCCESS, 1, 1])
        self.assertEqual(self.values("copy2d_v1"), [SUCCESS, 1])  # the legacy 32-bit struct
        # A pitch narrower than a row, an array (none can exist), a block past its allocation.
        self.assertEqual(self.values("copy2d_errors"), [INVALID_VALUE, NOT_SUPPORTED, INVALID_VALUE])

    def test_2d_memsets(self):
        # cuMemsetD2D32 of 3 words x 2 rows at pitch 64, then cuMemsetD2D8Async of 2 bytes x 2 rows
        # one byte in: the words around stay as they were.
        self.assertEqual(self.out["memset2d"],
                         ["0", "0", "abcd1234", "abcd1234", "abcd1234", "0", "34", "11", "11", "ab", "11"])

    def test_a_2d_copy_takes_the_time_of_its_bytes(self):
        # 256 rows of 1 KiB from pageable memory: as long as one flat copy of 256 KiB (dgx-h100's
        # 55.2 GB/s host-to-device, halved for pageable memory: 9.498 us).
        two_d, flat = (float(v) for v in self.out["timing"])
        self.assertAlmostEqual(two_d, flat, places=5)
        self.assertAlmostEqual(flat, 2 * 262144 / 55.2e9 * 1e3, places=5)

    def test_host_functions_run_in_stream_order(self):
        # Copy, host function, callback on the stream, callback on the legacy stream, synchronise;
        # then a callback with flags 1, a null function, an unknown stream.
        self.assertEqual(self.values("hostfn"), [SUCCESS] * 5 + [INVALID_VALUE, INVALID_VALUE, INVALID_HANDLE])
        # Three ran, in order (the callback on the stream got its handle, status 0), and the host
        # function saw the bytes the copy queued before it.
        self.assertEqual(self.out["hostfn_order"], ["3", "1", "12", "3", "5c"])

    def test_managed_memory_hints(self):
        # Prefetch to device 0, the host, NUMA node 0; to device 99; with flags; of cuMemAlloc memory;
        # past the allocation; the legacy call to a device and to CU_DEVICE_CPU.
        self.assertEqual(self.values("prefetch"), [SUCCESS, SUCCESS, SUCCESS, INVALID_DEVICE, INVALID_VALUE,
                                                   INVALID_VALUE, INVALID_VALUE, SUCCESS, SUCCESS])
        # Read-mostly (no location needed), preferred location device 0, accessed by device 99, advice
        # 9, advice on cuMemAlloc memory, the legacy call.
        self.assertEqual(self.values("advise"), [SUCCESS, SUCCESS, INVALID_DEVICE, INVALID_VALUE, INVALID_VALUE,
                                                 SUCCESS])
        self.assertEqual(self.values("managed_data"), [1])

    def test_host_flags(self):
        # cuMemHostAlloc's flags (DEVICEMAP | WRITECOMBINED) from inside the block; cuMemAllocHost's 0;
        # unpinned memory and a null pointer are invalid.
        self.assertEqual(self.values("host_flags"), [SUCCESS, 6, SUCCESS, 0, INVALID_VALUE, 99, INVALID_VALUE])

    def test_ipc_handles(self):
        # A handle from inside an allocation names the allocation (the same as its base's); host
        # memory has none; opening one is not supported; device memory is IPC-capable.
        self.assertEqual(self.values("ipc"), [SUCCESS, SUCCESS, 1, 1, INVALID_VALUE, NOT_SUPPORTED, SUCCESS, 1])

    def test_pool_attributes_read_back(self):
        # REUSE_ALLOW_OPPORTUNISTIC set to 0 reads 0; RESERVED_MEM_CURRENT is read-only; the high
        # watermarks take only a reset (0).
        self.assertEqual(self.values("pool"), [SUCCESS, SUCCESS, 0, INVALID_VALUE, SUCCESS, INVALID_VALUE,
                                               SUCCESS, 0])

    def test_cu_get_proc_address(self):
        # cuMemcpy2D is cuMemcpy2D_v2 (CUDA 3.2 on); cuMemPrefetchAsync the legacy one before 12.2.
        self.assertEqual(self.values("proc"), [0, 0, 0, 0, 1, 1, 1, 1])


CLOCKS = r'''
import ctypes, json, os
nvml = ctypes.CDLL(os.path.join(os.environ["GPUSEL_SIM_ROOT"], "libnvidia-ml.so.1"))
nvml.nvmlInit_v2()
out = {}
for index in (0, 1):
    dev = ctypes.c_void_p()
    nvml.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(dev))
    n = ctypes.c_uint(0)
    first = nvml.nvmlDeviceGetSupportedMemoryClocks(dev, ctypes.byref(n), None)
    mem = (ctypes.c_uint * n.value)()
    rc = nvml.nvmlDeviceGetSupportedMemoryClocks(dev, ctypes.byref(n), mem)
    g = ctypes.c_uint(0)
    gfirst = nvml.nvmlDeviceGetSupportedGraphicsClocks(dev, mem[0], ctypes.byref(g), None)
    clocks = (ctypes.c_uint * g.value)()
    grc = nvml.nvmlDeviceGetSupportedGraphicsClocks(dev, mem[0], ctypes.byref(g), clocks)
    other = nvml.nvmlDeviceGetSupportedGraphicsClocks(dev, mem[0] + 1, ctypes.byref(g), clocks)
    out[index] = [first, rc, list(mem), gfirst, grc, g.value, clocks[0], clocks[g.value - 1], other]
print(json.dumps(out))
'''


@unittest.skipUnless(PYTHON_LOADS_LIBRARIES, "a Python child cannot load the doubles in this build")
class SupportedClocksTest(Case):
    def test_memory_and_graphics_clocks(self):
        r = subprocess.run([sys.executable, "-c", CLOCKS], capture_output=True, text=True,
                           env=for_python(sim_env("mig-a100")), timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        out = json.loads(r.stdout)
        # An A100 (MIG mode or not): one memory clock; the graphics clocks from 1410 MHz down to
        # 210 in 15 MHz steps (81); asked with no room, NVML_ERROR_INSUFFICIENT_SIZE (7) and the
        # count; another memory clock, NVML_ERROR_NOT_FOUND (6).
        for index in ("0", "1"):
            first, rc, mem, gfirst, grc, count, top, bottom, other = out[index]
            self.assertEqual([first, rc, len(mem), gfirst, grc, other], [7, 0, 1, 7, 0, 6])
            self.assertEqual([count, top, bottom], [81, 1410, 210])


if __name__ == "__main__":
    unittest.main()
