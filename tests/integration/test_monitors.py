"""GPU monitors and clients people use, from Debian, on the simulated machines (issue 21): nvtop (a
curses program, run under tmux and read from its screen), pynvml (nvidia-ml-py), gpustat and pycuda.
Debian ships them in contrib/non-free: scripts/fetch-extras downloads them with a private apt
configuration into the build folder (build/extras) and unpacks them there with dpkg -x, so nothing
is installed on the machine. Each compares what the client shows with `gpusel list --json`.

Skipped when the packages cannot be fetched (no network) and under sanitizer builds (a foreign
program cannot load instrumented doubles); run through `launchers.py run test_monitors`, a module
whose every test was skipped exits 77. py3nvml is not in Debian (its memory-safety failure is
covered by test_sim_nvml_abi's guard bytes); nvitop neither.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

from support import BIN, SIM_ROOT, SOURCE, Case, base_env, machine, sim_env

BUILD = os.environ.get("GPUSEL_BUILD_DIR", "build")
EXTRAS = os.path.join(BUILD, "extras")
ROOT = os.path.join(EXTRAS, "root")
DIST = os.path.join(ROOT, "usr", "lib", "python3", "dist-packages")
DEBIAN_PYTHON = "/usr/bin/python3"  # the clients are Debian packages for its Python 3.11
INSTRUMENTED = "GPUSEL_TEST_PRELOAD" in os.environ or "GPUSEL_TEST_TSAN" in os.environ
PACKAGES = ["nvtop", "python3-pynvml", "gpustat", "python3-blessed", "python3-wcwidth", "libnvidia-ml-dev",
            "python3-pycuda", "libboost-python1.74.0", "python3-pytools", "python3-mako", "python3-appdirs",
            "python3-platformdirs", "python3-markupsafe"]
_fetched = None


def fetch():
    """None when the packages are unpacked in build/extras, else why not."""
    global _fetched
    if _fetched is None:
        r = subprocess.run([os.path.join(SOURCE, "scripts", "fetch-extras"), EXTRAS, *PACKAGES],
                           capture_output=True, text=True, timeout=600)
        _fetched = "" if r.returncode == 0 else f"scripts/fetch-extras failed: {r.stderr.strip()[-500:]}"
    return _fetched or None


def listed(name, **env):
    r = subprocess.run([BIN, "--sim", name, "list", "--json"], capture_output=True, text=True,
                       env=base_env(**env), timeout=60)
    if r.returncode != 0:
        raise AssertionError(r.stdout + r.stderr)
    return json.loads(r.stdout)


def client_env(name, **extra):
    env = sim_env(name, GPUSEL_SIM_DEVICE_HANDLES=None, **extra)
    env["PYTHONPATH"] = DIST
    libs = os.path.join(ROOT, "usr", "lib", "x86_64-linux-gnu")
    env["LD_LIBRARY_PATH"] = env["LD_LIBRARY_PATH"] + ":" + libs
    return env


def run(cmd, name, timeout=120, **env):
    r = subprocess.run(cmd, capture_output=True, text=True, env=client_env(name, **env), timeout=timeout)
    if r.returncode != 0:
        raise AssertionError(f"{cmd} on {name}: exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r


@unittest.skipIf(INSTRUMENTED, "the doubles are built with a sanitizer; a foreign program cannot load them")
class MonitorsTest(Case):
    @classmethod
    def setUpClass(cls):
        reason = fetch()
        if reason:
            raise unittest.SkipTest(reason)

    def test_pynvml_agrees_with_gpusel(self):
        script = r'''
import json, pynvml
pynvml.nvmlInit()
out = []
for i in range(pynvml.nvmlDeviceGetCount()):
    h = pynvml.nvmlDeviceGetHandleByIndex(i)
    mem = pynvml.nvmlDeviceGetMemoryInfo(h)
    pci = pynvml.nvmlDeviceGetPciInfo(h)
    procs = [p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)]
    def s(v): return v.decode() if isinstance(v, bytes) else v
    out.append({"uuid": s(pynvml.nvmlDeviceGetUUID(h)), "name": s(pynvml.nvmlDeviceGetName(h)),
                "bus": s(pci.busId), "total": mem.total, "procs": procs,
                "bar1": pynvml.nvmlDeviceGetBAR1MemoryInfo(h).bar1Total > 0,
                "pcie_tx": pynvml.nvmlDeviceGetPcieThroughput(h, pynvml.NVML_PCIE_UTIL_TX_BYTES)})
print(json.dumps(out))
'''
        for name in ("dgx-h100", "workstation-mixed", "single-l4"):
            with self.subTest(machine=name):
                got = json.loads(run([DEBIAN_PYTHON, "-c", script], name).stdout)
                want = listed(name)["gpus"]
                self.assertEqual([(g["uuid"], g["name"], g["bus"], g["total"]) for g in got],
                                 [(g["uuid"], g["name"], g["pci_bus_id"], g["memory_total_bytes"]) for g in want])
                self.assertTrue(all(g["bar1"] for g in got))
                self.assertEqual([g["pcie_tx"] for g in got], [0] * len(got))

    def test_pynvml_walks_mig_instances(self):
        """pynvml's MIG instance calls, as a MIG tool walks a GPU: each GPU instance profile, its
        instances and their compute instances, against the machine file's MIG devices."""
        script = r'''
import ctypes, json, pynvml
pynvml.nvmlInit()
out = []
for i in range(pynvml.nvmlDeviceGetCount()):
    h = pynvml.nvmlDeviceGetHandleByIndex(i)
    profiles = []
    for index in range(pynvml.NVML_GPU_INSTANCE_PROFILE_COUNT):
        try:
            profile = pynvml.nvmlDeviceGetGpuInstanceProfileInfo(h, index)
        except pynvml.NVMLError as e:
            profiles.append(e.value)
            continue
        gis = (pynvml.c_nvmlGpuInstance_t * profile.instanceCount)()
        count = ctypes.c_uint()
        pynvml.nvmlDeviceGetGpuInstances(h, profile.id, gis, ctypes.byref(count))
        instances = []
        for gi in gis[:count.value]:
            info = pynvml.nvmlGpuInstanceGetInfo(gi)
            whole = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4}[profile.sliceCount]  # the compute profile of all its slices
            ci_profile = pynvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(
                gi, whole, pynvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
            cis = (pynvml.c_nvmlComputeInstance_t * ci_profile.instanceCount)()
            found = ctypes.c_uint()
            pynvml.nvmlGpuInstanceGetComputeInstances(gi, ci_profile.id, cis, ctypes.byref(found))
            ci = pynvml.nvmlComputeInstanceGetInfo(cis[0])
            by_id = pynvml.nvmlDeviceGetGpuInstanceById(h, info.id)
            same = ctypes.cast(by_id, ctypes.c_void_p).value == ctypes.cast(gi, ctypes.c_void_p).value
            instances.append([info.id, info.profileId, [info.placement.start, info.placement.size], found.value,
                              ci.id, same])
        name = profile.name.decode() if isinstance(profile.name, bytes) else profile.name
        profiles.append([name, profile.id, profile.memorySizeMB, instances])
    out.append(profiles)
print(json.dumps(out))
'''
        got = json.loads(run([DEBIAN_PYTHON, "-c", script], "mig-a100").stdout)
        migs = machine("mig-a100")["gpu"][0]["mig"]
        g0 = got[0]
        self.assertEqual([p[:3] for p in g0[:5]], [["MIG 1g.5gb", 19, 4992], ["MIG 2g.10gb", 14, 9984],
                                                   ["MIG 3g.20gb", 9, 19968], ["MIG 4g.20gb", 5, 19968],
                                                   ["MIG 7g.40gb", 0, 39936]])
        self.assertEqual([g0[i][3] for i in (0, 2, 3, 4)], [[]] * 4)
        self.assertEqual(g0[1][3], [[m["gpu_instance"], 14, [2 * k, 2], 1, m["compute_instance"], True]
                                    for k, m in enumerate(migs)])
        self.assertEqual(g0[5:], [3] * (len(g0) - 5))  # NOT_SUPPORTED: the 8- and 6-slice and later ones
        self.assertEqual(got[1], [3] * len(g0))  # MIG off

    def test_gpustat_agrees_with_gpusel(self):
        for name in ("dgx-h100", "mig-a100"):
            with self.subTest(machine=name):
                r = run([DEBIAN_PYTHON, "-m", "gpustat", "--json"], name)
                got = json.loads(r.stdout)["gpus"]
                want = listed(name)["gpus"]
                self.assertEqual([(g["index"], g["uuid"], g["name"], g["memory.total"]) for g in got],
                                 [(g["index"], g["uuid"], g["name"], g["memory_total_bytes"] >> 20) for g in want])

    def test_pycuda_reads_the_devices(self):
        script = r'''
import json
import pycuda.driver as drv
drv.init()
out = []
for i in range(drv.Device.count()):
    d = drv.Device(i)
    attrs = d.get_attributes()
    out.append({"name": d.name(), "bus": d.pci_bus_id(), "total": d.total_memory(),
                "cc": "%d.%d" % d.compute_capability(),
                "sms": attrs[drv.device_attribute.MULTIPROCESSOR_COUNT]})
ctx = drv.Device(0).make_context()
free, total = drv.mem_get_info()
buf = drv.mem_alloc(1 << 20)
import numpy
a = numpy.arange(256, dtype=numpy.float32)
drv.memcpy_htod(buf, a)
b = numpy.zeros_like(a)
drv.memcpy_dtoh(b, buf)
ctx.pop()
print(json.dumps({"devices": out, "roundtrip": bool((a == b).all()), "total": total}))
'''
        for name, env in (("dgx-h100", {"CUDA_VISIBLE_DEVICES": "5,2"}), ("workstation-mixed", {})):
            with self.subTest(machine=name, env=env):
                got = json.loads(run([DEBIAN_PYTHON, "-c", script], name, **env).stdout.strip().splitlines()[-1])
                probe = subprocess.run([BIN, "--sim", name, "list", "--json", "--probe"], capture_output=True,
                                       text=True, env=base_env(**env), timeout=60)
                data = json.loads(probe.stdout)
                by_index = {g["index"]: g for g in data["gpus"]}
                want = [by_index[d["index"]] for d in sorted(data["probe"]["devices"], key=lambda d: d["cuda_ordinal"])]
                self.assertEqual([(d["name"], d["bus"].upper(), d["total"], d["cc"]) for d in got["devices"]],
                                 [(g["name"], g["pci_bus_id"][4:], g["memory_total_bytes"], g["compute_capability"])
                                  for g in want])
                self.assertTrue(got["roundtrip"])

    def test_nvtop_shows_the_gpus(self):
        if shutil.which("tmux") is None:
            self.skipTest("tmux is not installed (scripts/install-deps installs it)")
        nvtop = os.path.join(ROOT, "usr", "bin", "nvtop")
        tmp = tempfile.mkdtemp(prefix="gpusel-nvtop-")
        self.addCleanup(shutil.rmtree, tmp, True)
        socket = os.path.join(tmp, "tmux.sock")
        env = client_env("dgx-h100")
        env["HOME"] = tmp  # nvtop's configuration file
        env["TERM"] = "xterm"
        subprocess.run(["tmux", "-S", socket, "new-session", "-d", "-x", "200", "-y", "60", nvtop], env=env,
                       check=True, timeout=30)
        self.addCleanup(subprocess.run, ["tmux", "-S", socket, "kill-server"], capture_output=True)
        screen = ""
        for _ in range(50):
            time.sleep(0.2)
            screen = subprocess.run(["tmux", "-S", socket, "capture-pane", "-p"], capture_output=True,
                                    text=True, env=env).stdout
            if "H100" in screen or "No GPU" in screen:
                break
        self.assertNotIn("No GPU to monitor", screen)
        self.assertIn("NVIDIA H100 80GB HBM3", screen, screen)
        self.assertGreaterEqual(screen.count("Device"), 8, screen)


if __name__ == "__main__":
    unittest.main()
