"""CUDA runtime programs on the simulator (issue 21): a program built here with the CUDA toolkit's
nvcc (`nvcc -cudart shared`, tests/integration/cuda_runtime_user.cu) runs against the simulator's
libcudart.so.13 and must see the devices `gpusel list --json --probe` describes, in the same order,
under several CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER values; its memory, copies, streams,
events, peer copies and a kernel launch behave as documented. The same program linked with the
static runtime (nvcc's default) gets one clear line, not a crash.

Skipped (77, via `launchers.py run`) only where the toolkit is absent (no /usr/local/cuda/bin/nvcc,
or GPUSEL_NVCC pointing elsewhere), and under the sanitizer builds (a foreign program cannot load
instrumented doubles). The program is compiled once per build folder (about 3 s of CPU), cached.
"""

import ctypes
import json
import os
import shutil
import subprocess
import tempfile
import unittest

from support import (BIN, INSTRUMENTED, NVCC, Case, base_env, build_cuda_program, machine_with_driver, sim_env,
                     uuids)

LIBRARY = os.environ.get("GPUSEL_LIBRARY_FILE", "build/lib/libgpusel.so.2")
CUDA_HOME = os.path.dirname(os.path.dirname(NVCC))  # /usr/local/cuda: cuBLAS is in its lib64


def build_programs():
    """The program linked with the shared runtime and with the static one: (shared, static) paths."""
    return tuple(build_cuda_program("cuda_runtime_user", ("shared", "static")))


def expected(machine, **env):
    """CUDA's devices as gpusel sees them under `env`: [(uuid, name, pci_bus_id, memory)] by ordinal."""
    r = subprocess.run([BIN, "--sim", machine, "list", "--json", "--probe"], capture_output=True, text=True,
                       env=base_env(**env), timeout=60)
    if r.returncode != 0:
        raise AssertionError(r.stdout + r.stderr)
    data = json.loads(r.stdout)
    by_index = {g["index"]: g for g in data["gpus"]}
    out = []
    for d in sorted(data["probe"]["devices"], key=lambda d: d["cuda_ordinal"]):
        g = by_index[d["index"]]
        out.append((d["uuid"], d["name"], g["pci_bus_id"], g["memory_total_bytes"]))
    return out


def run_program(program, machine, *args, **env):
    env.setdefault("GPUSEL_SIM_DEVICE_HANDLES", None)  # NVIDIA's handles equal the ordinals
    return subprocess.run([BIN, "--sim", machine, "--", program, *args], capture_output=True, text=True,
                          env=base_env(**env), timeout=120)


@unittest.skipIf(INSTRUMENTED, "the doubles are built with a sanitizer; a foreign program cannot load them")
@unittest.skipUnless(os.path.exists(NVCC), f"no CUDA toolkit ({NVCC} is absent)")
class RuntimeProgramTest(Case):
    @classmethod
    def setUpClass(cls):
        cls.shared, cls.static = build_programs()
        cls.tmp = tempfile.mkdtemp(prefix="gpusel-runtime-")
        cls.dgx = machine_with_driver(cls.tmp, "dgx-h100")
        cls.mixed = machine_with_driver(cls.tmp, "workstation-mixed")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def devices(self, machine, **env):
        r = run_program(self.shared, machine, "--devices", **env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual(out["failures"], [])
        # cudaDeviceGetPCIBusId's form has a 4-digit domain: 0000:18:00.0.
        return out, [(d["uuid"], d["name"], "0000" + d["pci_bus_id"].upper(), d["memory"]) for d in out["devices"]]

    def test_devices_agree_with_gpusel_list(self):
        dgx = uuids("dgx-h100")
        cases = [
            (self.dgx, {}),
            (self.dgx, {"CUDA_VISIBLE_DEVICES": "5,2"}),
            (self.dgx, {"CUDA_VISIBLE_DEVICES": dgx[6][:12] + "," + dgx[1]}),
            (self.dgx, {"CUDA_VISIBLE_DEVICES": "0,2,-1,1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}),
            (self.mixed, {}),
            (self.mixed, {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}),
            (self.mixed, {"CUDA_VISIBLE_DEVICES": "2,0"}),
            (self.mixed, {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "2,0"}),
        ]
        for machine, env in cases:
            with self.subTest(machine=os.path.basename(machine), env=env):
                out, seen = self.devices(machine, **env)
                self.assertEqual(seen, expected(machine, **env))
                self.assertEqual(out["runtime"], 13000)
                self.assertEqual(out["driver"], 13000)
                self.assertEqual(out["current_at_start"], 0)

    def test_a_program_runs_its_steps(self):
        r = run_program(self.shared, self.dgx, CUDA_VISIBLE_DEVICES="1,0")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual(out["failures"], [])
        self.assertEqual(out["launch"], "cudaErrorNotSupported")
        self.assertEqual(out["peer_0_1"], 1)  # NVLink between every H100 of the DGX
        self.assertGreater(out["copy_ms"], 0)
        # The launch is said once on stderr, naming the kernel; nothing else is printed.
        self.assertEqual(r.stderr.count("was not run"), 1, r.stderr)
        self.assertIn("scale", r.stderr)
        self.assertNotIn("cuGetExportTable", r.stderr)

    def test_geforce_boards_have_no_peer_access(self):
        # workstation-mixed: the RTX 4090 (GeForce) has PCIe peer access off.
        r = run_program(self.shared, self.mixed, CUDA_DEVICE_ORDER="PCI_BUS_ID", CUDA_VISIBLE_DEVICES="1,2")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(json.loads(r.stdout)["peer_0_1"], 0)

    def test_nothing_stays_booked_after_the_program(self):
        # The program had a context and memory on the GPU; once it exited, `gpusel list` in another
        # process shows no process there.
        r = run_program(self.shared, self.dgx, CUDA_VISIBLE_DEVICES="3")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        data = json.loads(subprocess.run([BIN, "--sim", self.dgx, "list", "--json"], capture_output=True,
                                         text=True, env=base_env(), timeout=60).stdout)
        self.assertEqual([g["processes"] for g in data["gpus"] if g["index"] == 3], [[]])

    def test_a_driver_older_than_the_runtime_is_refused(self):
        # The bundled dgx-h100 has a CUDA 12.8 driver: CUDA 13's runtime cannot run on it.
        r = run_program(self.shared, "dgx-h100", "--devices")
        out = json.loads(r.stdout)
        self.assertEqual(out["count_error"], "cudaErrorInsufficientDriver")
        self.assertEqual(out["driver"], 12080)
        self.assertIn("older than this runtime", r.stderr)
        self.assertEqual(r.stderr.count("gpusel-sim ("), 1, r.stderr)

    def test_a_machine_without_libcuda_has_no_driver(self):
        # cuda-missing (with a CUDA 13 driver version): the runtime finds no libcuda.so.1 in its
        # folder and never takes one from elsewhere on the search path.
        missing = machine_with_driver(self.tmp, "cuda-missing")
        r = run_program(self.shared, missing, "--devices")
        out = json.loads(r.stdout)
        self.assertEqual((out["count_error"], out["driver"], out["devices"]), ("cudaErrorInsufficientDriver", 0, []))

    def test_static_runtime_is_told_once(self):
        r = run_program(self.static, self.dgx, "--devices")
        self.assertGreaterEqual(r.returncode, 0, r.stderr)  # no crash
        self.assertEqual(r.stderr.count("cuGetExportTable"), 1, r.stderr)
        self.assertIn("nvcc -cudart shared", r.stderr)
        self.assertEqual(json.loads(r.stdout)["devices"], [])
        # gpusel doctor says the same afterwards, naming the program.
        d = subprocess.run([BIN, "--sim", self.dgx, "doctor", "--json"], capture_output=True, text=True,
                           env=base_env(), timeout=60)
        found = [f for f in json.loads(d.stdout)["findings"] if f["id"] == "sim-static-runtime"]
        self.assertEqual(len(found), 1, d.stdout)
        self.assertEqual(found[0]["severity"], "warning")
        self.assertIn(os.path.basename(self.static), found[0]["message"])
        self.assertIn("nvcc -cudart shared", found[0]["remedy"])

    def test_a_cublas_program_is_told_that_cublas_carries_its_own_runtime(self):
        # cuBLAS carries NVIDIA's runtime inside libcublas: the program itself uses the simulator's
        # libcudart (it counts the devices), and rebuilding it with -cudart shared would not help.
        (program,) = build_cuda_program("cuda_cublas_user", ("shared",),
                                        ("-lcublas", "-Xlinker", "-rpath=" + os.path.join(CUDA_HOME, "lib64")))
        r = run_program(program, self.dgx)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual((out["count_error"], out["count"]), (0, 8))
        self.assertNotEqual(out["cublas_status"], 0)  # CUBLAS_STATUS_SUCCESS: not on the simulator
        self.assertEqual(r.stderr.count("cuGetExportTable"), 1, r.stderr)
        self.assertRegex(r.stderr, r"libcublas(Lt)?\.so\.\d+, which this program loads, carries NVIDIA's own CUDA")
        self.assertNotIn("-cudart shared", r.stderr)
        d = subprocess.run([BIN, "--sim", self.dgx, "doctor", "--json"], capture_output=True, text=True,
                           env=base_env(), timeout=60)
        found = [f for f in json.loads(d.stdout)["findings"] if f["id"] == "sim-static-runtime"]
        self.assertEqual(len(found), 1, d.stdout)
        self.assertIn(os.path.basename(program), found[0]["message"])
        self.assertRegex(found[0]["message"], r"loads libcublas(Lt)?\.so\.\d+, which carries")
        self.assertNotIn("-cudart shared", found[0]["remedy"])
        self.assertIn("without libcublas", found[0]["remedy"])

    @unittest.skipUnless(os.path.exists(LIBRARY), "libgpusel is not built")
    def test_a_gpu_bound_with_gpusel_is_the_current_device(self):
        # gpusel's C API binds GPUSEL_GPU (nvidia-smi 3 under a preset "5,3,1": ordinal 1); the
        # runtime loaded afterwards in the same process reports that device as current.
        dgx = uuids("dgx-h100")
        script = f"""
import ctypes, json
lib = ctypes.CDLL({os.path.abspath(LIBRARY)!r})
ordinal = ctypes.c_int(-1)
status = lib.gpusel_bind_assigned_gpu(0, ctypes.byref(ordinal))
rt = ctypes.CDLL("libcudart.so.13")
current = ctypes.c_int(-1)
rc = rt.cudaGetDevice(ctypes.byref(current))
prop = ctypes.create_string_buffer(1008)
rt.cudaGetDeviceProperties(prop, current)
uuid = prop.raw[256:272].hex()
print(json.dumps({{"status": status, "ordinal": ordinal.value, "rc": rc, "current": current.value, "uuid": uuid}}))
"""
        r = subprocess.run(["python3", "-c", script], capture_output=True, text=True, timeout=60,
                           env=sim_env("dgx-h100", GPUSEL_SIM_MACHINE=self.dgx, GPUSEL_GPU=dgx[3],
                                       CUDA_VISIBLE_DEVICES="5,3,1", GPUSEL_SIM_DEVICE_HANDLES=None))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        out = json.loads(r.stdout.strip().splitlines()[-1])
        self.assertEqual((out["status"], out["ordinal"], out["rc"], out["current"]), (0, 1, 0, 1), r.stderr)
        self.assertEqual(out["uuid"], dgx[3][4:].replace("-", ""))


CARRIER_LIBRARY = r"""
#include <dlfcn.h>
typedef int (*export_table_fn)(const void**, const void*);
/* What a library carrying NVIDIA's runtime does first: asks libcuda for its private tables. */
int carrier_call(void) {
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW);
  if (cuda == 0) return -1;
  export_table_fn get = (export_table_fn)dlsym(cuda, "cuGetExportTable");
  const void* table = 0;
  unsigned char id[16] = {0};
  return get != 0 ? get(&table, id) : -2;
}
"""

CARRIER_PROGRAM = r"""
#include <stdio.h>
int carrier_call(void);
int main(void) { printf("%d\n", carrier_call()); return 0; }
"""

ASKING_PROGRAM = r"""
#include <dlfcn.h>
#include <stdio.h>
typedef int (*export_table_fn)(const void**, const void*);
int main(void) {
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW);
  export_table_fn get = cuda != 0 ? (export_table_fn)dlsym(cuda, "cuGetExportTable") : 0;
  const void* table = 0;
  unsigned char id[16] = {0};
  printf("%d\n", get != 0 ? get(&table, id) : -2);
  return 0;
}
"""


@unittest.skipIf(INSTRUMENTED, "the doubles are built with a sanitizer; a foreign program cannot load them")
@unittest.skipUnless(shutil.which("cc"), "no C compiler")
class RuntimeCarrierTest(Case):
    """Who asked for the driver's private tables: the program (NVIDIA's runtime linked statically)
    or a library it loads (cuBLAS, NCCL: their runtime is inside them). Without the toolkit: a
    library and programs built here with cc, asking as NVIDIA's runtime does."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="gpusel-carrier-")
        t = cls.tmp
        for name, text in (("carrier.c", CARRIER_LIBRARY), ("main.c", CARRIER_PROGRAM), ("ask.c", ASKING_PROGRAM)):
            with open(os.path.join(t, name), "w") as f:
                f.write(text)
        for cmd in (["cc", "-shared", "-fPIC", "-o", f"{t}/libfakeblas.so.7", f"{t}/carrier.c", "-ldl"],
                    ["cc", "-o", f"{t}/uses_fakeblas", f"{t}/main.c", f"{t}/libfakeblas.so.7", f"-Wl,-rpath,{t}"],
                    ["cc", "-o", f"{t}/asks_itself", f"{t}/ask.c", "-ldl"]):
            subprocess.run(cmd, check=True, capture_output=True, timeout=120)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def finding(self, machine):
        d = subprocess.run([BIN, "--sim", machine, "doctor", "--json"], capture_output=True, text=True,
                           env=base_env(), timeout=60)
        found = [f for f in json.loads(d.stdout)["findings"] if f["id"] == "sim-static-runtime"]
        self.assertEqual(len(found), 1, d.stdout)
        return found[0]

    def test_a_library_that_asks_is_named_and_the_program_is_not_told_to_rebuild(self):
        machine = machine_with_driver(self.tmp, "dgx-h100")
        r = run_program(os.path.join(self.tmp, "uses_fakeblas"), machine)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "801")  # CUDA_ERROR_NOT_SUPPORTED
        self.assertIn("libfakeblas.so.7, which this program loads, carries NVIDIA's own CUDA runtime", r.stderr)
        self.assertNotIn("-cudart shared", r.stderr)
        f = self.finding(machine)
        self.assertIn("(" + os.path.join(self.tmp, "uses_fakeblas") + ", pid ", f["message"])
        self.assertIn("loads libfakeblas.so.7, which carries", f["message"])
        self.assertIn("without libfakeblas.so.7", f["remedy"])

    def test_the_program_itself_asking_is_told_to_load_libcudart_by_name(self):
        machine = machine_with_driver(self.tmp, "mig-a100")
        r = run_program(os.path.join(self.tmp, "asks_itself"), machine)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "801")
        self.assertIn("this program uses NVIDIA's own CUDA runtime", r.stderr)
        self.assertNotIn("which this program loads", r.stderr)
        f = self.finding(machine)
        self.assertIn("(" + os.path.join(self.tmp, "asks_itself") + ", pid ", f["message"])
        self.assertIn("links NVIDIA's CUDA runtime statically", f["message"])
        self.assertIn("nvcc -cudart shared", f["remedy"])


if __name__ == "__main__":
    unittest.main()


def checks_of(name):
    """tests/integration/NAME.cu built with `nvcc -cudart shared` and run on dgx-h100 (with a CUDA
    13 driver): its lines "<check> <values...>" as {check: [values]}."""
    (program,) = build_cuda_program(name)
    tmp = tempfile.mkdtemp(prefix=f"gpusel-{name}-")
    try:
        r = run_program(program, machine_with_driver(tmp, "dgx-h100"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if r.returncode != 0:
        raise AssertionError(r.stdout + r.stderr)
    return {line.split()[0]: line.split()[1:] for line in r.stdout.splitlines()}


@unittest.skipIf(INSTRUMENTED, "the doubles are built with a sanitizer; a foreign program cannot load them")
@unittest.skipUnless(os.path.exists(NVCC), f"no CUDA toolkit ({NVCC} is absent)")
class KernelFreeProgramTest(Case):
    """The runtime's calls that need no kernel (issue 32), from tests/integration/cuda_kernel_free.cu."""

    @classmethod
    def setUpClass(cls):
        cls.out = checks_of("cuda_kernel_free")

    def test_2d_copies_and_memsets(self):
        # Host -> pitched device -> pitched device (a stream) -> host at pitch 32 (cudaMemcpyDefault):
        # the rows arrive and the padding stays; a pitch under the width, a bad direction.
        self.assertEqual(self.out["memcpy2d"], ["0", "0", "0", "0", "1", "1", "12", "21", "512"])
        # 3 bytes of 2 rows set to 0x7f, then 2 bytes of 2 rows one byte in to 0x22 (on a stream).
        self.assertEqual(self.out["memset2d"], ["0", "0", "7f", "22", "22", "2c", "22", "1"])

    def test_device_symbols(self):
        # __device__ int counter = 41: the simulator reads no device image, so a variable starts as
        # its host shadow does (zero; docs/simulator.md); written, read back, 4 bytes, a 64-float
        # table of 256 bytes, its address reads the same value.
        self.assertEqual(self.out["symbols"], ["0", "0", "0", "0", "7", "0", "4", "0", "256", "0", "7", "0"])
        # An async copy at an offset and back; past the end (cudaErrorInvalidValue), the wrong
        # direction (cudaErrorInvalidMemcpyDirection), not a symbol (cudaErrorInvalidSymbol).
        self.assertEqual(self.out["symbols_more"][2:], ["0", "1", "2.5", "3.5", "1", "21", "13"])

    def test_host_functions_in_stream_order(self):
        self.assertEqual(self.out["hostfn"], ["0", "0", "0", "0", "0", "1", "1"])
        # host function, callback (status cudaSuccess), the legacy stream's host function; the
        # first saw the bytes the copy before it moved.
        self.assertEqual(self.out["hostfn_order"], ["3", "1", "2", "3", "3c"])

    def test_managed_pools_streams_ipc_flags(self):
        # To device 0, to the host, to device 64 (cudaErrorInvalidDevice), of cudaMalloc memory
        # (cudaErrorInvalidValue); advice of a preferred location.
        self.assertEqual(self.out["prefetch"], ["0", "0", "101", "1", "0"])
        self.assertEqual(self.out["pool"], ["0", "0", "0", "0", str(1 << 30), "0"])
        self.assertEqual(self.out["stream_id"], ["0", "0", "1"])
        # A handle for device memory, none for host memory; opening one is not supported; the
        # flags cudaHostAlloc was given (mapped | portable).
        self.assertEqual(self.out["ipc_flags"], ["0", "1", "801", "0", "3"])
        self.assertEqual(self.out["launch"], ["801"])  # a kernel still does not run

    def test_managed_variables(self):
        # Zeroed at first (the initialiser is in the device image), written by the host; to the
        # runtime it is managed memory (cudaMemoryTypeManaged, 3), and a copy from it reads 12.
        self.assertEqual(self.out["managed_var"], ["0", "0", "3", "0", "12", "2.5", "1"])


@unittest.skipIf(INSTRUMENTED, "the doubles are built with a sanitizer; a foreign program cannot load them")
@unittest.skipUnless(os.path.exists(NVCC), f"no CUDA toolkit ({NVCC} is absent)")
class GraphCaptureTest(Case):
    """Stream capture of copies, memsets and host functions, and the graph's launches (issue 32),
    from tests/integration/cuda_graph_capture.cu (built with `nvcc -cudart shared`)."""

    @classmethod
    def setUpClass(cls):
        cls.out = checks_of("cuda_graph_capture")

    def check(self, name, expected):
        self.assertEqual(self.out.get(name), expected)

    def test_captured_work_runs_only_when_the_graph_is_launched(self):
        # Begin (0), capturing (1), the last captured call (0), end (0), no longer capturing (0),
        # 5 nodes, nothing moved before the launch, instantiate and launch (0); the memset's 0x55
        # then byte 100; the second launch copies the host buffer as changed (7); the host function
        # ran once per launch.
        self.check("capture", ["0", "1", "0", "0", "0", "0", "5", "1", "0", "0", "55", "64", "7", "2"])

    def test_a_second_stream_joins_through_an_event(self):
        # The second stream captures once it waits for the capture's event; ending there is refused;
        # the end, 3 nodes (events add none), nothing before the launch, the second stream released;
        # both copies out arrive.
        self.check("fork_join", ["1", "0", "0", "3", "0", "0", "190", "190"])

    def test_waiting_for_a_capture_invalidates_it(self):
        # cudaStreamSynchronize while capturing: cudaErrorStreamCaptureUnsupported (900), the
        # capture invalidated (status 2), its end cudaErrorStreamCaptureInvalidated (901) with no
        # graph; the legacy stream cannot be captured (900); ending a capture never begun,
        # cudaErrorIllegalState (401); a stream drawn into a capture (1) is released (0) when the
        # capture's own stream is destroyed (0).
        self.check("refusals", ["900", "2", "901", "1", "900", "401", "1", "0", "0"])
