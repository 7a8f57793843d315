"""AMD machines in the simulator, and `gpusel list` on them (issue 35).

The simulated librocm_smi64.so.1 answers from machine files whose `vendor` is "amd"; gpusel asks it
when NVIDIA's NVML is unavailable. Held against AMD's own tools: Debian's rocm-smi (the Python
program over ctypes, package rocm-smi, fetched with scripts/fetch-extras into the build folder's
extras/, never installed) runs over the simulated library and must report each GPU under the same
index, unique id and PCI address as `gpusel list`; the simulated library's ABI (src/driver/
rocm_smi_abi.hpp, rocm_smi.def) must compile against Debian's rocm_smi.h (librocm-smi-dev).

Skipped when the packages cannot be fetched (no network), except under CI (CI set).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import tomllib

from support import (BIN, BUILD, CUDA_HOLD, MACHINES, PYTHON_LOADS_LIBRARIES, SIM_ROOT, SOURCE, Case, Holding,
                     base_env, for_python, gpusel, gpusel_json)

EXTRAS = os.path.join(BUILD, "extras")
PACKAGES = ("rocm-smi", "librocm-smi-dev")
AMD_LIB = os.path.join(SIM_ROOT, "amd", "librocm_smi64.so.1")

# amd-mi210.toml: KFD order B, C, A; DRM cards C=0, A=1, B=2; PCI order A, B, C.
EXPECTED = [  # rocm-smi index order: DRM card
    ("GPU-3c4d5e6f708192a3", "00000000:83:00.0"),  # C
    ("GPU-1a2b3c4d5e6f7081", "00000000:03:00.0"),  # A
    ("GPU-2b3c4d5e6f708192", "00000000:43:00.0"),  # B
]


def read(*path):
    with open(os.path.join(*path)) as f:
        return f.read()


def with_processes():
    """amd-mi210 with processes: 4242 on A (1 GiB), 5151 on A and B (2 + 3 GiB)."""
    text = read(MACHINES, "amd-mi210.toml")
    text = text.replace("drm_card = 1\n", 'drm_card = 1\nprocesses = [{pid = 4242, used_memory = "1GiB"}, '
                        '{pid = 5151, used_memory = "2GiB"}]\n')
    return text.replace("drm_card = 2\n", 'drm_card = 2\nprocesses = [{pid = 5151, used_memory = "3GiB"}]\n')


def kfd_topology(folder, machine_text, change=None, render=False):
    """The kernel's KFD topology of an AMD machine file, as amdgpu writes it in sysfs: node 0 the CPU
    (gpu_id 0), then a node per GPU in the file's [[gpu]] order (KFD order), each with its PCI
    address as properties' domain and location_id (bus << 8 | device << 3 | function). `change`
    maps a GPU's position to another bus id (a topology that does not match); with `render`, each
    GPU node names its render node (drm_render_minor: 128 + its DRM card, as amdgpu numbers them)."""
    gpus = tomllib.loads(machine_text)["gpu"]
    os.makedirs(os.path.join(folder, "0"))
    with open(os.path.join(folder, "0", "gpu_id"), "w") as f:
        f.write("0\n")
    with open(os.path.join(folder, "0", "properties"), "w") as f:
        f.write("cpu_cores_count 64\nsimd_count 0\nlocation_id 0\ndomain 0\n")
    for k, g in enumerate(gpus):
        bus_id = (change or {}).get(k, g["pci_bus_id"])
        domain, bus, rest = bus_id.split(":")
        device, function = rest.split(".")
        location = int(bus, 16) << 8 | int(device, 16) << 3 | int(function, 16)
        node = os.path.join(folder, str(k + 1))
        os.makedirs(node)
        with open(os.path.join(node, "gpu_id"), "w") as f:
            f.write("%d\n" % (4660 + k))
        with open(os.path.join(node, "properties"), "w") as f:
            f.write("cpu_cores_count 0\nsimd_count 416\nlocation_id %d\ndomain %d\n" % (location, int(domain, 16)))
            if render:
                f.write("drm_render_minor %d\n" % (128 + g["drm_card"]))
    return folder


def parse_cpus(text):
    """"0-2,5" -> [0, 1, 2, 5]."""
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


def plain_env():
    """This process's environment without the sanitizer preload, with the simulator's usage folder
    of this test run's own (support.base_env), never the machine's default /tmp/gpusel-sim-UID."""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "ASAN_OPTIONS")}
    env["GPUSEL_SIM_STATE_DIR"] = base_env()["GPUSEL_SIM_STATE_DIR"]
    return env


def fetch():
    """None when Debian's packages are unpacked in EXTRAS, else why not (a skip, or a failure
    under CI)."""
    r = subprocess.run([os.path.join(SOURCE, "scripts", "fetch-extras"), EXTRAS, *PACKAGES],
                       capture_output=True, text=True, env=plain_env())
    if r.returncode == 0:
        return None
    why = "Debian's ROCm SMI packages could not be fetched: " + r.stderr.strip()[-500:]
    if os.environ.get("CI"):
        raise AssertionError(why)
    return why


def run_rocm_smi(tmp, machine, *args):
    """Debian's rocm-smi (fetched by fetch()) over the simulated library, on `machine`, in a copy of
    its scripts made in `tmp` beside the simulated library (it loads ../../lib/librocm_smi64.so.1),
    with a `cat` that says the driver is loaded and a `ps` that names every process "simulated"
    (--showpids asks `ps -p PID -o comm=`; `ps` under a sanitizer's preloaded runtime can hang).
    The simulator's usage folder is this test run's (support.base_env)."""
    home = os.path.join(tmp, "rocm-smi")
    if not os.path.exists(home):
        shutil.copytree(os.path.join(EXTRAS, "root", "usr", "libexec", "rocm_smi"),
                        os.path.join(home, "libexec", "rocm_smi"))
        os.symlink(os.path.abspath(os.path.dirname(AMD_LIB)), os.path.join(home, "lib"))
        os.makedirs(os.path.join(home, "bin"))
        with open(os.path.join(home, "bin", "cat"), "w") as f:
            f.write('#!/bin/sh\n[ "$1" = /sys/module/amdgpu/initstate ] && { echo live; exit 0; }\n'
                    'exec /bin/cat "$@"\n')
        os.chmod(os.path.join(home, "bin", "cat"), 0o755)
        with open(os.path.join(home, "bin", "ps"), "w") as f:
            f.write('#!/bin/sh\necho simulated\n')
        os.chmod(os.path.join(home, "bin", "ps"), 0o755)
    env = for_python(plain_env())
    env["PATH"] = os.path.join(home, "bin") + ":" + env.get("PATH", "/usr/bin:/bin")
    env["GPUSEL_SIM_MACHINE"] = os.path.abspath(machine)
    return subprocess.run(["/usr/bin/python3", os.path.join(home, "libexec", "rocm_smi", "rocm_smi.py"), *args],
                          capture_output=True, text=True, env=env, timeout=60)


# A Python program that prints gpusel.list_gpus() (the C ABI's list of fields by name) and each GPU's
# fixed struct from gpusel_gpu_list_get ([index, cuda_ordinal, uuid, total_bytes]), as JSON.
LISTS_SCRIPT = (
    "import ctypes, json, gpusel\n"
    "class Info(ctypes.Structure):\n"
    "    _fields_ = [('size', ctypes.c_size_t), ('index', ctypes.c_uint), ('cuda_ordinal', ctypes.c_int),\n"
    "                ('uuid', ctypes.c_char * 96), ('name', ctypes.c_char * 256), ('pci', ctypes.c_char * 32),\n"
    "                ('total', ctypes.c_ulonglong), ('numa', ctypes.c_int), ('cc_major', ctypes.c_int),\n"
    "                ('cc_minor', ctypes.c_int), ('mig', ctypes.c_int)]\n"
    "lib = ctypes.CDLL(gpusel.library_path)\n"
    "lib.gpusel_gpu_list_count.restype = ctypes.c_size_t\n"
    "lib.gpusel_gpu_list_count.argtypes = [ctypes.c_void_p]\n"
    "lib.gpusel_gpu_list_get.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]\n"
    "lib.gpusel_gpu_list_free.argtypes = [ctypes.c_void_p]\n"
    "lib.gpusel_last_error.restype = ctypes.c_char_p\n"
    "lst = ctypes.c_void_p()\n"
    "assert lib.gpusel_list_gpus(ctypes.byref(lst)) == 0, lib.gpusel_last_error()\n"
    "structs = []\n"
    "for i in range(lib.gpusel_gpu_list_count(lst)):\n"
    "    info = Info(); info.size = ctypes.sizeof(Info)\n"
    "    assert lib.gpusel_gpu_list_get(lst, i, ctypes.byref(info)) == 0, lib.gpusel_last_error()\n"
    "    structs.append([info.index, info.cuda_ordinal, info.uuid.decode(), info.total])\n"
    "lib.gpusel_gpu_list_free(lst)\n"
    "print(json.dumps({'gpus': gpusel.list_gpus(usage=True), 'structs': structs}))\n")


class AmdListTest(Case):
    def test_list_reads_the_amd_machine_through_rocm_smi(self):
        doc = gpusel_json("--sim", "amd-mi210", "list", "--json")
        self.assertEqual(doc["vendor"], "amd")
        self.assertEqual(doc["driver_version"], "6.7.0")
        got = [(g["uuid"], g["pci_bus_id"]) for g in doc["gpus"]]
        self.assertEqual(got, EXPECTED)
        self.assertEqual([g["rocm_smi_index"] for g in doc["gpus"]], [0, 1, 2])
        self.assertEqual({g["vendor"] for g in doc["gpus"]}, {"amd"})
        # HIP numbers in KFD order (B, C, A), which ROCm 6's SMI gives by each GPU's node.
        self.assertEqual([g["hip_ordinal"] for g in doc["gpus"]], [1, 2, 0])
        self.assertEqual(doc["note_codes"], ["amd-hip-ordinal"])
        doc = gpusel_json("--sim", "amd-mi210", "list", "--json", ROCR_VISIBLE_DEVICES="2,0")
        self.assertEqual([g["hip_ordinal"] for g in doc["gpus"]], [None, 0, 1])
        # Where the order cannot be told, said, never guessed: an SMI without node ids, or
        # variables HIP versions read differently.
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "rocm5.toml")
            with open(path, "w") as f:
                f.write(read(MACHINES, "amd-mi210.toml").replace('vendor = "amd"',
                                                                 'vendor = "amd"\nrocm_smi_node_ids = false'))
            for args, env in (((path,), {}), (("amd-mi210",), {"HIP_VISIBLE_DEVICES": ""})):
                doc = gpusel_json("--sim", *args, "list", "--json", **env)
                self.assertEqual({g["hip_ordinal"] for g in doc["gpus"]}, {None})
                self.assertEqual(doc["note_codes"], ["amd-hip-order-unread"])
            self.kfd_topology_fills_in(tmp, path)
        used = {g["uuid"]: (g["memory_used_bytes"], g["utilization_percent"]) for g in doc["gpus"]}
        self.assertEqual(used["GPU-3c4d5e6f708192a3"], (12 << 30, 37))
        self.assertEqual(used["GPU-1a2b3c4d5e6f7081"], (0, 0))
        self.assertEqual({g["memory_total_bytes"] for g in doc["gpus"]}, {64 << 30})

    def test_list_text_names_rocm_and_the_order(self):
        r = gpusel("--sim", "amd-mi210", "list")
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = [line.split() for line in r.stdout.splitlines() if re.match(r"^\d+\s+\d\s+GPU-", line)]
        self.assertEqual([(row[0], row[1], row[2]) for row in rows],
                         [(str(i), hip, uid) for i, ((uid, _), hip) in enumerate(zip(EXPECTED, "120"))])
        self.assertIn("AMD GPUs (ROCm SMI, amdgpu 6.7.0)", r.stdout)
        self.assertIn("KFD order", r.stdout)

    def test_no_nvidia_library_is_offered_on_an_amd_machine(self):
        env = dict(line.split("=", 1) for line in subprocess.run(
            [BIN, "sim", "env", "amd-mi210"], capture_output=True, text=True, env=base_env(),
            check=True).stdout.replace("export ", "").replace("'", "").splitlines() if "=" in line)
        self.assertFalse(os.path.exists(env["GPUSEL_NVML_LIBRARY"]), env["GPUSEL_NVML_LIBRARY"])
        self.assertFalse(os.path.exists(env["GPUSEL_CUDA_LIBRARY"]), env["GPUSEL_CUDA_LIBRARY"])
        self.assertTrue(os.path.exists(env["GPUSEL_ROCM_SMI_LIBRARY"]), env["GPUSEL_ROCM_SMI_LIBRARY"])
        # And an NVIDIA machine offers no ROCm SMI, so a machine without NVML lists nothing.
        nv = subprocess.run([BIN, "sim", "env", "nvml-missing"], capture_output=True, text=True,
                            env=base_env(), check=True).stdout
        path = re.search(r"GPUSEL_ROCM_SMI_LIBRARY='?([^'\n]*)", nv).group(1)
        self.assertFalse(os.path.exists(path), path)
        r = gpusel("--sim", "nvml-missing", "list")
        self.assertEqual(r.returncode, 1)
        self.assertIn("NVML is unavailable", r.stderr)

    def test_the_nvidia_doubles_refuse_an_amd_machine(self):
        """Loaded by hand on an AMD machine file, NVML and CUDA say there is no NVIDIA driver."""
        env = base_env(GPUSEL_SIM_MACHINE=os.path.join(MACHINES, "amd-mi210.toml"),
                       GPUSEL_NVML_LIBRARY=os.path.join(SIM_ROOT, "libnvidia-ml.so.1"),
                       GPUSEL_CUDA_LIBRARY=os.path.join(SIM_ROOT, "libcuda.so.1"),
                       GPUSEL_ROCM_SMI_LIBRARY=os.path.join(SIM_ROOT, "none", "librocm_smi64.so.1"))
        r = gpusel("list", env=env)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("NVML is unavailable", r.stderr)

    def test_doctor_on_an_amd_machine(self):
        """No NVIDIA driver is a note there; Slurm's two variables, which leave HIP no GPU, an
        error (on an NVIDIA machine without /dev/kfd the same composition is only a note)."""
        r = gpusel("--sim", "amd-mi210", "doctor", "--json")
        self.assertEqual(r.returncode, 0, r.stdout)
        found = {f["id"]: f for f in json.loads(r.stdout)["findings"]}
        self.assertEqual(found["amd-gpus"]["severity"], "info")
        self.assertIn("GPU-3c4d5e6f708192a3", found["amd-gpus"]["message"])
        self.assertEqual({f["severity"] for f in found.values()}, {"info"})
        r = gpusel("--sim", "amd-mi210", "doctor", "--json", ROCR_VISIBLE_DEVICES="1", CUDA_VISIBLE_DEVICES="1")
        self.assertEqual(r.returncode, 1, r.stdout)
        found = {f["id"]: f for f in json.loads(r.stdout)["findings"]}
        self.assertEqual(found["amd-composition-hides-all"]["severity"], "error")

    def test_resolve_on_an_amd_machine(self):
        by_index = [uid for uid, _ in EXPECTED]
        for request, want in (("0", [by_index[0]]), ("2,0", [by_index[2], by_index[0]]),
                              ("GPU-3c4d", [by_index[0]]), ("GPU-1A2B3C4D5E6F7081", [by_index[1]]),
                              ("gpu-2b", [by_index[2]]), ("all", by_index)):
            with self.subTest(request=request):
                doc = gpusel_json("--sim", "amd-mi210", "resolve", "--gpu", request, "--json")
                self.assertEqual(doc["gpus"], want)
                self.assertTrue(doc["resolved"])
                self.assertIn("amd-gpus", doc["note_codes"])
        for request, code, reason in (("5", 2, "out-of-range"), ("GPU-99", 2, "no-match"),
                                      ("GPU-", 2, "ambiguous-prefix")):
            with self.subTest(request=request):
                r = gpusel("--sim", "amd-mi210", "resolve", "--gpu", request, "--json")
                self.assertEqual(r.returncode, code, r.stderr)
                self.assertIn("--gpu " + request, r.stderr)
                self.assertEqual(json.loads(r.stdout)["error"]["fields"]["reason"], reason)

    def test_rocms_variables_are_a_quota_read_by_rocms_rules(self):
        # KFD order is B, C, A (the double gives ROCm 6's node ids): ROCR_VISIBLE_DEVICES=2,0 leaves
        # A then B, so --gpu 0 is A and 1 is B; C is outside. HIP then picks among ROCr's result.
        a, b, c = EXPECTED[1][0], EXPECTED[2][0], EXPECTED[0][0]
        for env, request, want in (
                ({"ROCR_VISIBLE_DEVICES": "2,0"}, "0", [a]),
                ({"ROCR_VISIBLE_DEVICES": "2,0"}, "1,0", [b, a]),
                ({"ROCR_VISIBLE_DEVICES": "2,0"}, "all", [a, b]),
                ({"ROCR_VISIBLE_DEVICES": "2,0"}, "GPU-2b", [b]),
                ({"ROCR_VISIBLE_DEVICES": "2,0", "HIP_VISIBLE_DEVICES": "1"}, "0", [b]),
                ({"HIP_VISIBLE_DEVICES": "1"}, "0", [c]),
                ({"CUDA_VISIBLE_DEVICES": "2,1"}, "all", [a, c]),
                ({"ROCR_VISIBLE_DEVICES": c.upper()[:8] + ",0"}, "all", [c, b])):
            with self.subTest(env=env, request=request):
                doc = gpusel_json("--sim", "amd-mi210", "resolve", "--gpu", request, "--json", **env)
                self.assertEqual(doc["gpus"], want)
        for env, request, reason in (
                ({"ROCR_VISIBLE_DEVICES": "2,0"}, "2", "out-of-range"),
                ({"ROCR_VISIBLE_DEVICES": "2,0"}, "GPU-3c", "outside-preset"),
                ({"ROCR_VISIBLE_DEVICES": "1,,2"}, "0", "amd-rocr-empty-entry"),
                ({"HIP_VISIBLE_DEVICES": ""}, "0", "amd-hip-version-dependent"),
                ({"ROCR_VISIBLE_DEVICES": "1", "CUDA_VISIBLE_DEVICES": "1"}, "0", "amd-preset-hides-all")):
            with self.subTest(env=env, request=request):
                r = gpusel("--sim", "amd-mi210", "resolve", "--gpu", request, "--json", **env)
                self.assertEqual(r.returncode, 2, r.stderr)
                for name, value in env.items():
                    self.assertIn('%s="%s"' % (name, value), r.stderr)
                self.assertEqual(json.loads(r.stdout)["error"]["fields"]["reason"], reason)
        # Run places each worker on its GPU of the quota, by id; the worker sees only that one.
        show = 'echo "$LOCAL_RANK ${ROCR_VISIBLE_DEVICES-unset} ${HIP_VISIBLE_DEVICES-unset}"'
        r = gpusel("--sim", "amd-mi210", "run", "--quiet", "--gpu", "1,0", "--", "sh", "-c", show,
                   ROCR_VISIBLE_DEVICES="2,0", HIP_VISIBLE_DEVICES="1,0")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(r.stdout.split("\n")[:-1]), ["0 %s unset" % a, "1 %s unset" % b])
        # Without node ids (ROCm SMI 5.x) the KFD order is unknown: refused, never guessed.
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "rocm5.toml")
            with open(path, "w") as f:
                f.write(read(MACHINES, "amd-mi210.toml").replace('vendor = "amd"',
                                                                 'vendor = "amd"\nrocm_smi_node_ids = false'))
            r = gpusel("--sim", path, "resolve", "--gpu", "0", "--json", ROCR_VISIBLE_DEVICES="0")
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertEqual(json.loads(r.stdout)["error"]["fields"]["reason"], "amd-kfd-order-unknown")
            doc = gpusel_json("--sim", path, "resolve", "--gpu", "GPU-1a", "--json")  # no preset: fine
            self.assertEqual(doc["gpus"], [a])

    def test_the_c_and_python_lists_give_the_amd_gpus(self):
        """gpusel.list_gpus() (the C ABI's list of fields by name) on an AMD machine gives the GPUs
        `gpusel list --json` gives, under the same names, HIP's numbers as the environment sets
        them, and NVIDIA's own fields absent; the fixed struct gives rocm-smi's index as the index
        and no CUDA ordinal."""
        if not PYTHON_LOADS_LIBRARIES:
            self.skipTest("the ThreadSanitizer build's simulated library cannot load into Python")
        library = os.path.abspath(os.environ.get("GPUSEL_LIBRARY_FILE", os.path.join(BUILD, "lib", "libgpusel.so.2")))
        for preset in ({}, {"ROCR_VISIBLE_DEVICES": "2,0"}):
            with self.subTest(preset=preset):
                env = for_python(base_env(PYTHONPATH=os.path.abspath(os.path.join(SOURCE, "python")),
                                          GPUSEL_LIBRARY=library, **preset))
                r = subprocess.run([BIN, "sim", "exec", "amd-mi210", "--", sys.executable, "-c", LISTS_SCRIPT],
                                   capture_output=True, text=True, env=env, timeout=60)
                self.assertEqual(r.returncode, 0, r.stderr)
                got = json.loads(r.stdout)
                want = gpusel_json("--sim", "amd-mi210", "list", "--json", **preset)["gpus"]
                self.assertEqual(len(got["gpus"]), len(want))
                for g, w, st in zip(got["gpus"], want, got["structs"]):
                    for key in ("vendor", "uuid", "name", "pci_bus_id", "memory_total_bytes", "memory_used_bytes",
                                "utilization_percent", "rocm_smi_index", "hip_ordinal", "failure"):
                        self.assertEqual(g[key], w[key], key)
                    for key in ("nvidia_smi_index", "cuda_ordinal", "cuda_visibility", "compute_capability",
                                "mig_enabled"):
                        self.assertIsNone(g[key], key)
                    self.assertEqual(st, [w["rocm_smi_index"], -1, w["uuid"], w["memory_total_bytes"]])
        # On NVIDIA GPUs the AMD fields are absent and the vendor says so.
        doc = gpusel_json("--sim", "dgx-h100", "list", "--json")
        self.assertEqual({(g["vendor"], g["rocm_smi_index"], g["hip_ordinal"]) for g in doc["gpus"]},
                         {("nvidia", None, None)})

    def kfd_topology_fills_in(self, tmp, path):
        """Without node ids from ROCm SMI (5.x), the kernel's KFD topology gives the order: the same
        HIP column and the same answers under a preset as where ROCm SMI gives each GPU's node. A
        topology that does not match ROCm SMI's GPUs one to one is never used."""
        text = read(MACHINES, "amd-mi210.toml")
        good = kfd_topology(os.path.join(tmp, "kfd"), text)
        for preset in ({}, {"ROCR_VISIBLE_DEVICES": "2,0"}, {"HIP_VISIBLE_DEVICES": "1"}):
            with self.subTest(preset=preset):
                want = gpusel_json("--sim", "amd-mi210", "list", "--json", **preset)
                got = gpusel_json("--sim", path, "list", "--json", GPUSEL_KFD_TOPOLOGY=good, **preset)
                self.assertEqual([g["hip_ordinal"] for g in got["gpus"]], [g["hip_ordinal"] for g in want["gpus"]])
                self.assertNotIn("amd-hip-order-unread", got["note_codes"])
        for request in ("0", "1", "0,1"):
            want = gpusel_json("--sim", "amd-mi210", "resolve", "--gpu", request, "--json", ROCR_VISIBLE_DEVICES="2,0")
            got = gpusel_json("--sim", path, "resolve", "--gpu", request, "--json", ROCR_VISIBLE_DEVICES="2,0",
                              GPUSEL_KFD_TOPOLOGY=good)
            self.assertEqual(got["gpus"], want["gpus"])
        # A GPU at an address ROCm SMI does not have, two nodes at one address (a partitioned
        # GPU), a node too few, or no topology: the order stays unknown, and the preset refused.
        moved = kfd_topology(os.path.join(tmp, "moved"), text, {1: "00000000:84:00.0"})
        shared = kfd_topology(os.path.join(tmp, "shared"), text, {1: "00000000:43:00.0"})
        short = kfd_topology(os.path.join(tmp, "short"), text)
        shutil.rmtree(os.path.join(short, "3"))
        no_id = kfd_topology(os.path.join(tmp, "no-id"), text)
        os.remove(os.path.join(no_id, "2", "gpu_id"))
        # Each refusal says what did not match, naming the node, the address or the file.
        # (Node 1 is rocm-smi's GPU 0, at 83:00.0: moved elsewhere, or onto GPU 2's address.)
        for folder, why in ((moved, r"no GPU node is at 00000000:83:00\.0, ROCm SMI's GPU 0"),
                            (shared, r"no GPU node is at 00000000:83:00\.0, ROCm SMI's GPU 0"),
                            (short, r"it has 2 GPU nodes, and ROCm SMI 3 GPUs"),
                            (no_id, r"/no-id/2/gpu_id cannot be read: No such file or directory"),
                            (os.path.join(tmp, "none"), r"/none cannot be read: No such file or directory")):
            with self.subTest(topology=os.path.basename(folder)):
                r = gpusel("--sim", path, "resolve", "--gpu", "0", "--json", ROCR_VISIBLE_DEVICES="2,0",
                           GPUSEL_KFD_TOPOLOGY=folder)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertEqual(json.loads(r.stdout)["error"]["fields"]["reason"], "amd-kfd-order-unknown")
                self.assertIn(folder, r.stderr)
                self.assertRegex(r.stderr, why)

    def test_a_gpu_whose_render_node_cannot_be_opened_is_never_given(self):
        """ROCm's thunk numbers only the GPUs whose render node (/dev/dri/renderD<n>) it can open: one
        missing here (a container given other GPUs) is left out of HIP's numbers and refused by name;
        one that fails otherwise stops ROCm altogether, so nothing is placed. Judged in `sim shell`'s
        private /dev, with the kernel's topology naming each GPU's render node."""
        with tempfile.TemporaryDirectory() as tmp:
            text = read(MACHINES, "amd-mi210.toml").replace('vendor = "amd"', 'vendor = "amd"\nrocm_smi_node_ids = false')
            path = os.path.join(tmp, "rocm5.toml")
            with open(path, "w") as f:
                f.write(text)
            topology = kfd_topology(os.path.join(tmp, "kfd"), text, render=True)
            # renderD129 (DRM card 1: rocm-smi index 1, GPU-1a2b...) is missing, then a link to itself
        # (ELOOP: an error other than a missing node); the others may be opened.
            script = ("(cd /dev/dri && rm -f renderD128 renderD129 renderD130 && : > renderD128 && : > renderD130)"
                      " && {g} list --json && {g} resolve --gpu all && ROCR_VISIBLE_DEVICES=1 {g} resolve --gpu 0"
                      " && {{ {g} resolve --gpu 1; echo exit $?; }}"
                      " && {{ {g} doctor >&2; echo exit $?; }}"
                      " && ln -s renderD129 /dev/dri/renderD129 && {{ {g} resolve --gpu 0; echo exit $?; }}"
                      " && {{ {g} doctor >&2; echo exit $?; }}").format(g=BIN)
            r = subprocess.run([BIN, "sim", "shell", path, "--", "sh", "-c", script], capture_output=True, text=True,
                               timeout=120, env=base_env(GPUSEL_KFD_TOPOLOGY=topology))
            if r.returncode != 0 and "namespace" in r.stderr:
                self.skipTest("no private mount namespace here: " + r.stderr.strip()[-300:])
            self.assertEqual(r.returncode, 0, r.stderr)
            out = r.stdout
            doc, _, rest = out.partition("\n}\n")
            doc = json.loads(doc + "}")
            # KFD order 2b3c (renderD130), 3c4d (128), 1a2b (129, missing): HIP numbers the first two.
            self.assertEqual([(g["uuid"], g["hip_ordinal"]) for g in doc["gpus"]],
                             [("GPU-3c4d5e6f708192a3", 1), ("GPU-1a2b3c4d5e6f7081", None), ("GPU-2b3c4d5e6f708192", 0)])
            lines = rest.split("\n")
            self.assertEqual(lines[:3], ["GPU-3c4d5e6f708192a3", "GPU-2b3c4d5e6f708192", "GPU-3c4d5e6f708192a3"])
            # doctor: a missing render node is a warning (exit 0), an unopenable one an error (1).
            self.assertEqual(lines[3:7], ["exit 2", "exit 0", "exit 1", "exit 1"])
            self.assertIn("warning: /dev/dri/renderD129 (GPU-1a2b3c4d5e6f7081) does not exist here", r.stderr)
            self.assertIn("error: /dev/dri/renderD129 (GPU-1a2b3c4d5e6f7081) cannot be opened (Too many levels of "
                          "symbolic links)", r.stderr)
            self.assertIn("--gpu 1: that is GPU-1a2b3c4d5e6f7081, whose render node /dev/dri/renderD129 does not "
                          "exist here", r.stderr)
            self.assertIn("HIP programs cannot start here", r.stderr)
            self.assertIn("/dev/dri/renderD129 (GPU-1a2b3c4d5e6f7081) cannot be opened (Too many levels of symbolic "
                          "links)", r.stderr)

    def test_run_gives_each_worker_its_gpu_by_rocrs_variable_and_leases_it(self):
        show = 'echo "$LOCAL_RANK ${ROCR_VISIBLE_DEVICES-unset} ${HIP_VISIBLE_DEVICES-unset} ${CUDA_VISIBLE_DEVICES-unset}"'
        r = gpusel("--sim", "amd-mi210", "run", "--quiet", "--gpu", "2,0", "--", "sh", "-c", show,
                   HIP_VISIBLE_DEVICES=None)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(r.stdout.split("\n")[:-1]),
                         ["0 %s unset unset" % EXPECTED[2][0], "1 %s unset unset" % EXPECTED[0][0]])
        # The lease is the GPU's, by its id: a second job asking for it by index is refused.
        env = base_env()
        with subprocess.Popen([BIN, "--sim", "amd-mi210", "run", "--quiet", "--gpu", "GPU-3c", "--",
                               "sh", "-c", "echo up; sleep 30"], stdout=subprocess.PIPE, text=True,
                              env=env) as holder:
            try:
                self.assertEqual(holder.stdout.readline(), "up\n")
                r = gpusel("--sim", "amd-mi210", "run", "--gpu", "0", "--", "true", env=env)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertIn("is leased by pid %d" % holder.pid, r.stderr)
                # `list` shows the lease on its GPU's row, and on no other.
                doc = gpusel_json("--sim", "amd-mi210", "list", "--json", env=env)
                leases = {g["uuid"]: (g["lease"] or {}).get("pid") for g in doc["gpus"]}
                self.assertEqual(leases, {EXPECTED[0][0]: holder.pid, EXPECTED[1][0]: None,
                                          EXPECTED[2][0]: None})
                text = gpusel("--sim", "amd-mi210", "list", env=env).stdout.splitlines()
                row = next(i for i, line in enumerate(text) if line.startswith("0 "))
                self.assertIn("leased by pid %d" % holder.pid, text[row + 1])
            finally:
                holder.terminate()
        # A CUDA bind cannot place a HIP program: said, with the way that can.
        r = gpusel("--sim", "amd-mi210", "bind", "--gpu", "0")
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("gpusel run --gpu", r.stderr)
        self.assertIn("ROCR_VISIBLE_DEVICES", r.stderr)

    def test_bind_cpu_takes_the_cpus_of_the_numa_node_rocm_smi_gives(self):
        # rocm-smi indices 1 and 2 hang from NUMA node 0 in the machine file, index 0 from node 1
        # (rsmi_topo_numa_affinity_get): the workers run on this machine's node's CPUs, split
        # between them with exclusive, shared with node; a node this machine lacks is refused.
        allowed = sorted(os.sched_getaffinity(0))
        with open("/sys/devices/system/node/node0/cpulist") as f:
            node0 = parse_cpus(f.read().strip())
        near = [c for c in node0 if c in allowed]
        show = 'echo "$LOCAL_RANK $(grep Cpus_allowed_list /proc/self/status | cut -f2)"'
        for mode in ("node", "exclusive"):
            with self.subTest(mode=mode):
                r = gpusel("--sim", "amd-mi210", "run", "--quiet", "--bind-cpu", mode, "--gpu", "1,2", "--",
                           "sh", "-c", show)
                self.assertEqual(r.returncode, 0, r.stderr)
                got = dict(line.split() for line in r.stdout.splitlines())
                if mode == "node" or len(near) < 2:
                    self.assertEqual({k: parse_cpus(v) for k, v in got.items()}, {"0": near, "1": near})
                else:
                    half = len(near) // 2
                    self.assertEqual({k: parse_cpus(v) for k, v in got.items()}, {"0": near[:half], "1": near[half:]})
        if not os.path.exists("/sys/devices/system/node/node1"):
            r = gpusel("--sim", "amd-mi210", "run", "--bind-cpu", "node", "--gpu", "0", "--", "true")
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("its NUMA node is 1, and /sys/devices/system/node/node1/cpulist cannot be read", r.stderr)

    def test_free_picks_among_the_amd_gpus_by_their_usage(self):
        a, b, c = EXPECTED[1][0], EXPECTED[2][0], EXPECTED[0][0]
        # C has 12 GiB of its 64 in use (more than the 10% a free GPU may have): A and B are free.
        doc = gpusel_json("--sim", "amd-mi210", "resolve", "--gpu", "free:2", "--json")
        self.assertEqual(sorted(doc["gpus"]), sorted([a, b]))
        self.assertIn("picked rocm-smi 1,2", doc["picked"])
        self.assertIn("amd-gpus", doc["note_codes"])
        r = gpusel("--sim", "amd-mi210", "resolve", "--gpu", "free:3", "--json")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("12 GiB of memory in use", r.stderr)
        self.assertEqual(json.loads(r.stdout)["error"]["fields"]["reason"], "taken")
        # Within ROCm's variables only: ROCr's 0,1 are B and C (KFD order), and C is busy.
        doc = gpusel_json("--sim", "amd-mi210", "resolve", "--gpu", "free:1", "--json", ROCR_VISIBLE_DEVICES="0,1")
        self.assertEqual(doc["gpus"], [b])
        r = gpusel("--sim", "amd-mi210", "resolve", "--gpu", "free:2", "--json", ROCR_VISIBLE_DEVICES="1")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(json.loads(r.stdout)["error"]["fields"]["reason"], "too-few-gpus")
        with tempfile.TemporaryDirectory() as tmp:
            # A GPU with a process on it is not free, whatever memory it holds.
            busy = os.path.join(tmp, "busy.toml")
            with open(busy, "w") as f:
                f.write(with_processes().replace('{pid = 5151, used_memory = "3GiB"}', ""))
            doc = gpusel_json("--sim", busy, "resolve", "--gpu", "free:1", "--json")
            self.assertEqual(doc["gpus"], [b])
            r = gpusel("--sim", busy, "resolve", "--gpu", "free:2")
            self.assertEqual(r.returncode, 1)
            self.assertIn("2 compute processes on it (pid 4242, 5151)", r.stderr)
            listing = gpusel_json("--sim", busy, "list", "--json")
            self.assertEqual([[p["pid"] for p in g["processes"]] for g in listing["gpus"]], [[], [4242, 5151], []])
        # A leased GPU is not free: run holds B, so a second free:2 has only A; with --wait it
        # gets A and B once the first job ends, each worker on its own GPU by ROCr's variable.
        env = base_env()
        with subprocess.Popen([BIN, "--sim", "amd-mi210", "run", "--quiet", "--gpu", "free:1", "--",
                               "sh", "-c", 'echo "$ROCR_VISIBLE_DEVICES"; sleep 2'], stdout=subprocess.PIPE,
                              text=True, env=env) as holder:
            first = holder.stdout.readline().strip()
            self.assertEqual(first, a)  # the least used, then the lowest rocm-smi index
            r = gpusel("--sim", "amd-mi210", "run", "--gpu", "free:2", "--", "true", env=env)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("leased by pid %d" % holder.pid, r.stderr)
            r = gpusel("--sim", "amd-mi210", "run", "--quiet", "--wait", "60", "--gpu", "free:2", "--",
                       "sh", "-c", 'echo "$ROCR_VISIBLE_DEVICES"', env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(sorted(r.stdout.split()), sorted([a, b]))
            self.assertIsNotNone(holder.poll())  # it ran only once the holder had ended

    def test_bind_wraps_a_hip_program_on_its_gpu(self):
        a, b, c = EXPECTED[1][0], EXPECTED[2][0], EXPECTED[0][0]
        show = 'echo "$ROCR_VISIBLE_DEVICES ${HIP_VISIBLE_DEVICES-unset} ${GPUSEL_GPUS-unset}"'
        env = base_env()
        for extra, words, want in (
                ({"GPUSEL_GPUS": ",".join([b, c]), "LOCAL_RANK": "1"}, "chosen by GPUSEL_GPUS", c),
                # A launcher's rank alone is a HIP ordinal here: KFD order is B, C, A.
                ({"LOCAL_RANK": "2"}, "chosen by launcher", a),
                # Under ROCm's variables, within them: ROCr's 2,0 are A then B.
                ({"ROCR_VISIBLE_DEVICES": "2,0", "HIP_VISIBLE_DEVICES": "1", "LOCAL_RANK": "0"},
                 "chosen by single", b)):
            with self.subTest(extra=extra):
                r = gpusel("--sim", "amd-mi210", "bind", "--", "sh", "-c", show, env=dict(env, **extra))
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(r.stdout, "%s unset unset\n" % want)
                self.assertIn(words, r.stderr)
                self.assertIn("HIP device 0", r.stderr)
        r = gpusel("--sim", "amd-mi210", "bind", "--gpu", "GPU-1a", "--", "sh", "-c", show, env=env)
        self.assertEqual(r.stdout, "%s unset unset\n" % a)
        # Outside the quota: refused, no program started.
        r = gpusel("--sim", "amd-mi210", "bind", "--", "sh", "-c", "echo started",
                   env=dict(env, ROCR_VISIBLE_DEVICES="2,0", GPUSEL_GPU=c))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(r.stdout, "")
        self.assertIn('ROCR_VISIBLE_DEVICES="2,0"', r.stderr)
        # The program holds the claim while it runs: a second wrapper on that GPU is refused, and
        # `run` finds it leased.
        with subprocess.Popen([BIN, "--sim", "amd-mi210", "bind", "--gpu", "0", "--", "sh", "-c",
                               "echo up; exec sleep 30"], stdout=subprocess.PIPE, text=True, env=env) as holder:
            try:
                self.assertEqual(holder.stdout.readline(), "up\n")
                r = gpusel("--sim", "amd-mi210", "bind", "--gpu", "0", "--", "true", env=env)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn("already bound by pid %d" % holder.pid, r.stderr)
                r = gpusel("--sim", "amd-mi210", "run", "--gpu", c, "--", "true", env=env)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertIn("leased by pid %d" % holder.pid, r.stderr)
            finally:
                holder.terminate()

    def test_an_amd_machine_whose_rocm_smi_cannot_be_read_places_no_worker(self):
        """In `sim shell` the AMD machine has its device files (/dev/kfd, /dev/dri/*). With ROCm SMI
        broken there, nothing can check which GPU a HIP worker gets: run, resolve (free:N too) and
        list refuse, naming ROCm SMI and GPUSEL_ROCM_SMI_LIBRARY, where without /dev/kfd gpusel
        would pass the request on unchecked as on an NVIDIA machine without NVML."""
        script = ('ls /dev/kfd /dev/dri/card0 /dev/dri/renderD130 && '
                  'gpusel run --quiet --gpu GPU-1a2b -- sh -c \'echo "R=$ROCR_VISIBLE_DEVICES"\' && '
                  'export GPUSEL_ROCM_SMI_LIBRARY=/nonexistent/librocm_smi64.so.1; '
                  'for args in "run --gpu GPU-1a2b3c4d5e6f7081 -- echo started" "resolve --gpu free:1" "list"; do '
                  'gpusel $args; echo "exit $?"; done')
        env = base_env()
        env["PATH"] = os.path.dirname(os.path.abspath(BIN)) + ":" + env.get("PATH", "/usr/bin:/bin")
        r = subprocess.run([BIN, "sim", "shell", "amd-mi210", "--", "sh", "-c", script], capture_output=True,
                           text=True, env=env, timeout=60)
        if r.returncode != 0 and "namespace" in r.stderr:
            self.skipTest("no private mount namespace here: " + r.stderr.strip()[-300:])
        self.assertIn("R=GPU-1a2b3c4d5e6f7081\n", r.stdout, r.stderr)
        self.assertNotIn("started", r.stdout)
        self.assertEqual(r.stdout.count("exit 1\n"), 3, r.stdout + r.stderr)
        self.assertEqual(r.stderr.count("this machine has AMD's GPU driver (/dev/kfd)"), 3, r.stderr)
        self.assertEqual(r.stderr.count('GPUSEL_ROCM_SMI_LIBRARY="/nonexistent/librocm_smi64.so.1"'), 3)

    def test_machine_file_mistakes_name_the_key(self):
        good = read(MACHINES, "amd-mi210.toml")
        cases = [
            (good.replace('vendor = "amd"', 'vendor = "intel"'), "key 'vendor' must be"),
            (good.replace('"GPU-2b3c4d5e6f708192"', '"GPU-2B3C4D5E6F708192"'), "16 lower-case hex"),
            (good.replace('"GPU-2b3c4d5e6f708192"', '"GPU-0aa6453f-95c4-3054-d031-f0fbc96d793e"'),
             "unique id as ROCr prints it"),
            (good.replace("drm_card = 1", "drm_card = 0"), "two GPUs share drm_card 0"),
            (good.replace("drm_card = 2", "drm_card = -1"), "key 'drm_card' must be between"),
            (good.replace('memory_used = "12GiB"', 'memory_used = "80GiB"'), "must not exceed memory_total"),
        ]
        with tempfile.TemporaryDirectory() as tmp:
            for text, words in cases:
                self.assertNotEqual(text, good)
                path = os.path.join(tmp, "m.toml")
                with open(path, "w") as f:
                    f.write(text)
                r = gpusel("--sim", path, "list")
                self.assertEqual(r.returncode, 2, (words, r.stdout, r.stderr))
                self.assertIn(words, r.stderr)
                self.assertIn("m.toml", r.stderr)

    def test_every_listed_function_is_exported(self):
        names = re.findall(r"^GPUSEL_RSMI\((\w+),", read(SOURCE, "src", "driver", "rocm_smi.def"),
                           re.M)
        self.assertGreater(len(names), 5)
        out = subprocess.run(["nm", "-D", "--defined-only", AMD_LIB], capture_output=True, text=True,
                             check=True).stdout
        exported = {line.split()[-1] for line in out.splitlines()}
        self.assertEqual([n for n in names if n not in exported], [])


MIXED = "workstation-nvidia-amd"
# workstation-nvidia-amd.toml, PCI order: NVIDIA, AMD, NVIDIA, AMD.
MIXED_NVIDIA = ["GPU-3ce1b347-0187-9c05-70cc-76289bd7f38b", "GPU-3ddab6b5-edb6-ce2f-0d8e-b596c8965f78"]
MIXED_AMD = ["GPU-5d6e7f8091a2b3c4", "GPU-6e7f8091a2b3c4d5"]


class MixedMachineTest(Case):
    """NVIDIA's GPUs and AMD's in one machine (workstation-nvidia-amd): the simulated NVML and CUDA
    see NVIDIA's, the simulated ROCm SMI AMD's; gpusel lists both, takes --gpu indices as
    nvidia-smi's and AMD GPUs by unique id, one maker per job."""

    def test_list_shows_both_makers_gpus(self):
        doc = gpusel_json("--sim", MIXED, "list", "--json")
        self.assertEqual([(g["vendor"], g["uuid"]) for g in doc["gpus"]],
                         [("nvidia", u) for u in MIXED_NVIDIA] + [("amd", u) for u in MIXED_AMD])
        self.assertEqual([g["index"] for g in doc["gpus"]], [0, 1, None, None])  # `--gpu N` counts NVIDIA's
        self.assertEqual([g["nvidia_smi_index"] for g in doc["gpus"]], [0, 1, None, None])
        amd = [g for g in doc["gpus"] if g["vendor"] == "amd"]
        self.assertEqual([(g["rocm_smi_index"], g["hip_ordinal"]) for g in amd], [(0, 0), (1, 1)])
        self.assertEqual([g["memory_used_bytes"] for g in amd], [0, 6 << 30])
        self.assertEqual((doc["driver_version"], doc["amd_driver_version"]), ("570.133.07", "6.7.0"))
        note = doc["notes"][doc["note_codes"].index("amd-hip-ordinal")]
        self.assertIn("`--gpu N` and free:N count nvidia-smi's GPUs", note)
        text = gpusel("--sim", MIXED, "list").stdout
        nvidia_row, amd_head = text.index(MIXED_NVIDIA[1]), text.index("AMD GPUs (ROCm SMI, amdgpu 6.7.0):")
        self.assertLess(nvidia_row, amd_head)
        self.assertRegex(text, r"\n1 +1 +GPU-6e7f8091a2b3c4d5 +48 GiB +6 GiB +12%")
        # An NVIDIA-only or AMD-only machine lists its maker's GPUs alone, as before.
        self.assertEqual({g["vendor"] for g in gpusel_json("--sim", "dgx-h100", "list", "--json")["gpus"]},
                         {"nvidia"})
        self.assertNotIn("amd_driver_version", gpusel_json("--sim", "single-l4", "list", "--json"))

    def test_the_python_list_gives_both_makers_gpus(self):
        """gpusel.list_gpus() (the C ABI's list) on the mixed machine: the GPUs and fields `gpusel
        list --json` gives, NVIDIA's first."""
        if not PYTHON_LOADS_LIBRARIES:
            self.skipTest("the ThreadSanitizer build's simulated library cannot load into Python")
        library = os.path.abspath(os.environ.get("GPUSEL_LIBRARY_FILE", os.path.join(BUILD, "lib", "libgpusel.so.2")))
        env = for_python(base_env(PYTHONPATH=os.path.abspath(os.path.join(SOURCE, "python")), GPUSEL_LIBRARY=library))
        r = subprocess.run([BIN, "sim", "exec", MIXED, "--", sys.executable, "-c", LISTS_SCRIPT],
                           capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        both = json.loads(r.stdout)
        got = both["gpus"]
        # The fixed struct: an AMD GPU beside NVIDIA's has no index `--gpu N` would mean (UINT_MAX).
        self.assertEqual([s[0] for s in both["structs"]], [0, 1, 2**32 - 1, 2**32 - 1])
        self.assertEqual([s[2] for s in both["structs"]], MIXED_NVIDIA + MIXED_AMD)
        want = gpusel_json("--sim", MIXED, "list", "--json")["gpus"]
        self.assertEqual(len(got), 4)
        for g, w in zip(got, want):
            for key in ("vendor", "uuid", "name", "pci_bus_id", "memory_total_bytes", "memory_used_bytes",
                        "rocm_smi_index", "hip_ordinal"):
                self.assertEqual(g[key], w[key], (key, w["uuid"]))
            self.assertEqual(g["nvidia_smi_index"], w.get("nvidia_smi_index"), w["uuid"])

    def test_doctor_reads_rocms_variables_for_the_amd_gpus_here(self):
        r = gpusel("--sim", MIXED, "doctor", "--json", ROCR_VISIBLE_DEVICES="")
        self.assertEqual(r.returncode, 1, r.stderr)
        findings = {f["id"]: f["severity"] for f in json.loads(r.stdout)["findings"]}
        self.assertEqual(findings.get("amd-gpus-beside-nvidia"), "info", findings)
        self.assertEqual(findings.get("amd-rocr-hides-all"), "error", findings)
        # A worker of a job of AMD GPUs (GPUSEL_GPU an AMD id): no CUDA placement error, a note.
        r = gpusel("--sim", MIXED, "doctor", "--json", GPUSEL_GPU=MIXED_AMD[1])
        self.assertEqual(r.returncode, 0, r.stderr)
        findings = {f["id"]: f["severity"] for f in json.loads(r.stdout)["findings"]}
        self.assertEqual(findings.get("worker-gpu-amd"), "info", findings)
        self.assertNotIn("error", findings.values())

    def test_each_simulated_library_sees_its_makers_gpus(self):
        env = base_env()
        env.update(dict(line[len("export "):].split("=", 1) for line in
                        gpusel("sim", "env", MIXED).stdout.replace("'", "").splitlines()
                        if line.startswith("export ")))
        smi = subprocess.run([os.path.join(SIM_ROOT, "bin", "nvidia-smi"), "-L"], capture_output=True,
                             text=True, env=env)
        self.assertEqual(smi.returncode, 0, smi.stderr)
        self.assertEqual(re.findall(r"UUID: (GPU-[0-9a-f-]+)", smi.stdout), MIXED_NVIDIA)
        self.assertTrue(env["GPUSEL_ROCM_SMI_LIBRARY"].endswith("/amd/librocm_smi64.so.1"), env)
        self.assertIn(os.path.join(SIM_ROOT, "amd"), env["LD_LIBRARY_PATH"].split(":"))
        # An NVIDIA-only machine offers no ROCm SMI.
        only = gpusel("sim", "env", "dgx-h100").stdout
        self.assertNotIn("/amd/", only)

    def test_indices_are_nvidias_and_amd_gpus_are_named_by_id(self):
        r = gpusel("--sim", MIXED, "resolve", "--gpu", "1,0")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), [MIXED_NVIDIA[1], MIXED_NVIDIA[0]])
        r = gpusel("--sim", MIXED, "resolve", "--gpu", "GPU-6e7f,GPU-5d6e7f8091a2b3c4")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), [MIXED_AMD[1], MIXED_AMD[0]])
        self.assertIn("this machine has NVIDIA and AMD GPUs", r.stderr)
        for request, words in (("GPU-3ddab6b5,GPU-6e7f", '"GPU-6e7f" is an AMD GPU and "GPU-3ddab6b5" an NVIDIA GPU'),
                               ("GPU-6e7f,GPU-ffff", '"GPU-ffff" matches no GPU on this machine (2 NVIDIA, 2 AMD)'),
                               ("GPU-ffff", '"GPU-ffff" matches no GPU on this machine (2 NVIDIA, 2 AMD)'),
                               ("2", "out of range")):
            with self.subTest(request=request):
                r = gpusel("--sim", MIXED, "resolve", "--gpu", request)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(words, r.stderr)
                self.assertEqual(r.stdout, "")
        # A prefix both makers' GPUs start with.
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "m.toml")
            with open(path, "w") as f:
                f.write(read(MACHINES, MIXED + ".toml").replace("GPU-5d6e7f8091a2b3c4", "GPU-3ce1f8091a2b3c4d"))
            for request in ("GPU-3ce1,GPU-6e7f", "GPU-3ce1", "GPU-3c,GPU-3dd"):
                r = gpusel("--sim", path, "resolve", "--gpu", request)
                self.assertEqual(r.returncode, 2, (request, r.stderr))
                self.assertIn("starts the UUID of an NVIDIA GPU and the id of an AMD GPU", r.stderr)
            # Past the NVIDIA UUID's first dash (or whole), no AMD id can start so.
            r = gpusel("--sim", path, "resolve", "--gpu", "GPU-3ce1b347-0187")
            self.assertEqual(r.stdout.split(), [MIXED_NVIDIA[0]], r.stderr)
        # Two prefixes of one AMD GPU are one GPU named twice.
        r = gpusel("--sim", MIXED, "resolve", "--gpu", "GPU-6e7f,GPU-6E7F8")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn('"GPU-6e7f" and "GPU-6E7F8" both name GPU GPU-6e7f8091a2b3c4d5', r.stderr)

    def test_run_places_each_makers_workers_by_its_variable_and_leases_them(self):
        show = 'echo "$LOCAL_RANK ${GPUSEL_GPU-unset} ${ROCR_VISIBLE_DEVICES-unset} ${CUDA_VISIBLE_DEVICES-unset}"'
        r = gpusel("--sim", MIXED, "run", "--gpu", "GPU-6e7f,GPU-5d6e", "--", "sh", "-c", show)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(r.stdout.splitlines()),
                         [f"0 {MIXED_AMD[1]} {MIXED_AMD[1]} unset", f"1 {MIXED_AMD[0]} {MIXED_AMD[0]} unset"])
        self.assertIn(f"rocm-smi GPU 1 ({MIXED_AMD[1]})", r.stderr)
        r = gpusel("--sim", MIXED, "run", "--quiet", "--gpu", "1", "--", "sh", "-c", show)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), ["0", MIXED_NVIDIA[1], "unset", "unset"])
        env = base_env()
        with subprocess.Popen([BIN, "--sim", MIXED, "run", "--quiet", "--gpu", MIXED_AMD[1], "--",
                               "sh", "-c", "echo up; sleep 30"], stdout=subprocess.PIPE, text=True,
                              env=env) as holder:
            try:
                self.assertEqual(holder.stdout.readline(), "up\n")
                leases = {g["uuid"]: (g["lease"] or {}).get("pid")
                          for g in gpusel_json("--sim", MIXED, "list", "--json", env=env)["gpus"]}
                self.assertEqual(leases, {MIXED_NVIDIA[0]: None, MIXED_NVIDIA[1]: None, MIXED_AMD[0]: None,
                                          MIXED_AMD[1]: holder.pid})
                r = gpusel("--sim", MIXED, "run", "--gpu", "GPU-6e7f", "--", "true", env=env)
                self.assertEqual(r.returncode, 1, r.stderr)
                # By rocm-smi's index, said so: nvidia-smi's GPU 1 is the RTX 4090 here.
                self.assertIn(f"rocm-smi GPU 1 ({MIXED_AMD[1]}) is leased by pid {holder.pid}", r.stderr)
            finally:
                holder.terminate()

    def test_the_run_time_check_sees_a_cuda_program_in_a_job_of_amd_gpus(self):
        # ROCR_VISIBLE_DEVICES leaves CUDA every NVIDIA GPU: a CUDA program (cuda_hold takes CUDA's
        # device 0, the RTX 4090 under FASTEST_FIRST) started on an AMD GPU is stopped, in words
        # that say which maker's GPUs the job has.
        with Holding([BIN, "--sim", MIXED, "run", "--quiet", "--gpu", "GPU-6e7f", "--", CUDA_HOLD, "{DIR}"],
                     base_env()) as h:
            self.assertEqual(len(h.ready), 1)
            h.proc.wait(timeout=30)  # the check stops it while it holds its context
            rc, _, err = h.finish()
        self.assertEqual(rc, 1, err)
        self.assertIn(f"rank 0 (GPU {MIXED_AMD[1]}) opened a CUDA context on GPU 1 ({MIXED_NVIDIA[1]}), not its own",
                      err)
        self.assertIn("the job's GPUs are AMD's; ROCR_VISIBLE_DEVICES does not restrict CUDA", err)

    def test_bind_takes_an_amd_gpu_as_on_an_amd_machine(self):
        show = 'echo "$ROCR_VISIBLE_DEVICES ${CUDA_VISIBLE_DEVICES-unset} ${GPUSEL_GPU-unset}"'
        r = gpusel("--sim", MIXED, "bind", "--gpu", "GPU-6e7f", "--", "sh", "-c", show)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), [MIXED_AMD[1], "unset", "unset"])
        self.assertIn("rocm-smi index 1 = " + MIXED_AMD[1], r.stderr)
        # A worker of `run` wrapping its program in `gpusel bind`: each on its own AMD GPU.
        r = gpusel("--sim", MIXED, "run", "--quiet", "--gpu", "GPU-6e7f,GPU-5d6e", "--", BIN, "bind", "--quiet", "--",
                   "sh", "-c", 'echo "$LOCAL_RANK $ROCR_VISIBLE_DEVICES"')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(r.stdout.splitlines()), [f"0 {MIXED_AMD[1]}", f"1 {MIXED_AMD[0]}"])
        # Without a program, bind would bind itself in CUDA: said, exit 1. So is an in-process
        # bind in CUDA handed an AMD GPU (the Python module's: the worker API, no HIP loaded).
        r = gpusel("--sim", MIXED, "bind", "--gpu", "GPU-6e7f")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("is an AMD GPU of this machine", r.stderr)
        if PYTHON_LOADS_LIBRARIES:
            library = os.path.abspath(os.environ.get("GPUSEL_LIBRARY_FILE",
                                                     os.path.join(BUILD, "lib", "libgpusel.so.2")))
            env = for_python(base_env(PYTHONPATH=os.path.abspath(os.path.join(SOURCE, "python")),
                                      GPUSEL_LIBRARY=library, GPUSEL_GPU="GPU-6e7f"))
            r = subprocess.run([BIN, "sim", "exec", MIXED, "--", sys.executable, "-c",
                                "import gpusel\ntry:\n    gpusel.bind_assigned_gpu()\nexcept Exception as e:\n"
                                "    print(e)\n"], capture_output=True, text=True, env=env, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn(f"GPU {MIXED_AMD[1]} is an AMD GPU of this machine (rocm-smi index 1)", r.stdout)
            self.assertIn("Bind after the program's first HIP call", r.stdout)
        # GPUSEL_GPUS naming both makers' GPUs: refused whatever the rank (exit 2).
        r = gpusel("--sim", MIXED, "bind", "--", "true", GPUSEL_GPUS=f"{MIXED_NVIDIA[0]},{MIXED_AMD[1]}",
                   LOCAL_RANK="0")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("GPUSEL_GPUS names GPUs of two makers", r.stderr)
        # NVIDIA's GPUs bind in CUDA as ever.
        r = gpusel("--sim", MIXED, "bind", "--gpu", "1", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["uuid"], MIXED_NVIDIA[1])

    def test_bench_bw_refuses_amd_gpus(self):
        # Its copies are CUDA's: AMD GPUs are refused before any worker starts, on either machine.
        for machine, gpu in ((MIXED, "GPU-6e7f"), ("amd-mi210", "0")):
            r = gpusel("--sim", machine, "bench", "bw", "--gpu", gpu)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn(f"--gpu {gpu} names AMD GPUs, which it does not measure", r.stderr)
            self.assertNotIn("rank 0", r.stderr)

    def test_sim_shell_makes_both_makers_device_files(self):
        r = gpusel("sim", "shell", MIXED, "--", "sh", "-c", "ls /dev /dev/dri")
        if r.returncode != 0 and "namespace" in r.stderr:
            self.skipTest("no private mount namespace here: " + r.stderr.strip())
        self.assertEqual(r.returncode, 0, r.stderr)
        names = r.stdout.split()
        for name in ("nvidia0", "nvidia1", "nvidiactl", "kfd", "card0", "card1", "renderD128", "renderD129"):
            self.assertIn(name, names)
        self.assertNotIn("nvidia2", names)
        self.assertNotIn("card2", names)

    def test_machine_file_marks_each_amd_gpu(self):
        good = read(MACHINES, MIXED + ".toml")
        cases = [
            (good.replace('vendor = "amd"\nuuid = "GPU-6e7f', 'vendor = "intel"\nuuid = "GPU-6e7f'),
             "key 'vendor' must be"),
            (good.replace('driver_version = "570.133.07"  # NVIDIA\'s', 'vendor = "amd"\ndriver_version = "1"')
             .replace('[[gpu]]\nuuid = "GPU-3ce1', '[[gpu]]\nvendor = "nvidia"\nuuid = "GPU-3ce1'),
             "leaves its top-level vendor"),
            (good.replace('uuid = "GPU-6e7f8091a2b3c4d5"', 'uuid = "GPU-6e7f8091-a2b3-c4d5-0000-000000000000"'),
             "unique id as ROCr prints it"),
            (good.replace('cuda_driver_version = 12080\n', ''), "cuda_driver_version"),
            # Only the AMD tables of the machine: an AMD machine, which says so at its top.
            (good[:good.index("[[gpu]]")] + good[good.index('[[gpu]]\nvendor = "amd"'):good.index("[[gpu]]\nuuid = \"GPU-3dd")]
             + good[good.rindex("[[gpu]]"):], 'every [[gpu]] says vendor = "amd"'),
        ]
        with tempfile.TemporaryDirectory() as tmp:
            for text, words in cases:
                self.assertNotEqual(text, good)
                path = os.path.join(tmp, "m.toml")
                with open(path, "w") as f:
                    f.write(text)
                r = gpusel("--sim", path, "list")
                self.assertEqual(r.returncode, 2, (words, r.stdout, r.stderr))
                self.assertIn(words, r.stderr)


class AmdAgainstRocmTest(Case):
    @classmethod
    def setUpClass(cls):
        why = fetch()
        if why:
            raise unittest.SkipTest(why)
        cls.root = os.path.join(EXTRAS, "root")

    def test_rocm_smi_over_the_simulator_agrees_with_gpusel(self):
        """Debian's rocm-smi loads ../../lib/librocm_smi64.so.1 beside its own script, and asks
        /sys/module/amdgpu/initstate whether the driver is loaded (with `cat`): a copy of its
        scripts beside the simulated library, and a `cat` that answers for that one file."""
        if not PYTHON_LOADS_LIBRARIES:
            self.skipTest("the ThreadSanitizer build's simulated library cannot load into Python")
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copytree(os.path.join(self.root, "usr", "libexec", "rocm_smi"),
                            os.path.join(tmp, "libexec", "rocm_smi"))
            os.symlink(os.path.abspath(os.path.dirname(AMD_LIB)), os.path.join(tmp, "lib"))
            os.makedirs(os.path.join(tmp, "bin"))
            cat = os.path.join(tmp, "bin", "cat")
            with open(cat, "w") as f:
                f.write('#!/bin/sh\n[ "$1" = /sys/module/amdgpu/initstate ] && { echo live; exit 0; }\n'
                        'exec /bin/cat "$@"\n')
            os.chmod(cat, 0o755)
            env = for_python(plain_env())  # the sanitizer runtime, where the library needs it
            env["PATH"] = os.path.join(tmp, "bin") + ":" + env.get("PATH", "/usr/bin:/bin")
            env["GPUSEL_SIM_MACHINE"] = os.path.join(os.path.abspath(MACHINES), "amd-mi210.toml")
            r = subprocess.run(["/usr/bin/python3", os.path.join(tmp, "libexec", "rocm_smi", "rocm_smi.py"),
                                "--showuniqueid", "--showbus", "--showmeminfo", "vram", "--json"],
                               capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        smi = json.loads(r.stdout)
        doc = gpusel_json("--sim", "amd-mi210", "list", "--json")
        self.assertEqual(len(smi), len(doc["gpus"]))
        for g in doc["gpus"]:
            card = smi["card%d" % g["rocm_smi_index"]]
            self.assertEqual("GPU-" + card["Unique ID"][2:].rjust(16, "0"), g["uuid"])
            self.assertEqual(card["PCI Bus"], g["pci_bus_id"][4:])
            self.assertEqual(int(card["VRAM Total Memory (B)"]), g["memory_total_bytes"])
            self.assertEqual(int(card["VRAM Total Used Memory (B)"]), g["memory_used_bytes"])

    def test_rocm_smi_sees_the_processes_gpusel_sees(self):
        """rocm-smi --showpidgpus and --showpids over the simulated library, on a machine whose
        GPUs run processes (one on two GPUs): the GPUs of each pid, and its VRAM, as in `list`."""
        if not PYTHON_LOADS_LIBRARIES:
            self.skipTest("the ThreadSanitizer build's simulated library cannot load into Python")
        with tempfile.TemporaryDirectory() as tmp:
            machine = os.path.join(tmp, "busy.toml")
            with open(machine, "w") as f:
                f.write(with_processes())
            outputs = [self.rocm_smi(tmp, machine, flag) for flag in ("--showpidgpus", "--showpids")]
            doc = gpusel_json("--sim", machine, "list", "--json")
        by_pid = {}
        for g in doc["gpus"]:
            for p in g["processes"]:
                by_pid.setdefault(p["pid"], (set(), p["used_memory_bytes"]))[0].add(g["rocm_smi_index"])
        self.assertEqual(set(by_pid), {4242, 5151})
        smi_gpus = {int(pid): {int(i) for i in gpus.split()} for pid, gpus in
                    re.findall(r"PID (\d+) is using \d+ DRM device\(s\):\s*\n([\d ]+)", outputs[0])}
        self.assertEqual(smi_gpus, {pid: gpus for pid, (gpus, _) in by_pid.items()})
        smi_vram = {int(m[0]): int(m[3]) for m in re.findall(r"^(\d+)\s+(\S+)\s+(\d+)\s+(\d+)\s", outputs[1], re.M)}
        self.assertEqual(smi_vram, {pid: vram for pid, (_, vram) in by_pid.items()})

    def test_free_n_prefers_gpus_linked_by_xgmi(self):
        """free:N on AMD GPUs picks GPUs of one XGMI hive first (as NVLink on NVIDIA's), then one NUMA
        node: on amd-mi210 with every GPU free and rocm-smi's 0 and 1 bridged (on two NUMA nodes),
        free:2 takes those two; without the bridge, 1 and 2 (NUMA node 0). The link types are the
        ones Debian's rocm-smi reads from the simulated library (--showtopotype)."""
        if not PYTHON_LOADS_LIBRARIES:
            self.skipTest("the ThreadSanitizer build's simulated library cannot load into Python")
        text = read(MACHINES, "amd-mi210.toml").replace('memory_used = "12GiB"\n', "").replace(
            "utilization_gpu = 37\n", "")
        bridged = text.replace("drm_card = 0\n", "drm_card = 0\nxgmi_hive = 0\n").replace(
            "drm_card = 1\n", "drm_card = 1\nxgmi_hive = 0\n")
        by_index = [uid for uid, _ in EXPECTED]
        with tempfile.TemporaryDirectory() as tmp:
            for name, body, want, words in (("bridged", bridged, [0, 1], "all connected by XGMI"),
                                             ("pcie", text, [1, 2], "on one NUMA node")):
                with self.subTest(machine=name):
                    path = os.path.join(tmp, name + ".toml")
                    with open(path, "w") as f:
                        f.write(body)
                    links = json.loads(self.rocm_smi(tmp, path, "--showtopotype", "--json"))["system"]
                    xgmi = sorted(tuple(int(d) for d in re.findall(r"\d+", k)) for k, v in links.items()
                                  if v == "XGMI")
                    self.assertEqual(xgmi, [(0, 1)] if name == "bridged" else [])
                    self.assertEqual(len(links), 3)
                    r = gpusel("--sim", path, "resolve", "--gpu", "free:2")
                    self.assertEqual(r.returncode, 0, r.stderr)
                    self.assertEqual(r.stdout.split(), [by_index[i] for i in want])
                    self.assertIn(f"picked rocm-smi {want[0]},{want[1]} of 3 free GPUs: {words}", r.stderr)
            # All three in one hive: within XGMI, the pair on one NUMA node (rocm-smi 1 and 2).
            one_hive = os.path.join(tmp, "one-hive.toml")
            with open(one_hive, "w") as f:
                f.write(re.sub(r"(drm_card = \d\n)", r"\1xgmi_hive = 0\n", text))
            r = gpusel("--sim", one_hive, "resolve", "--gpu", "free:2")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.split(), [by_index[1], by_index[2]])
            self.assertIn("picked rocm-smi 1,2 of 3 free GPUs: all connected by XGMI", r.stderr)
            for value, words in (("-1", "must be between 0 and 1023"), ("true", "must be an integer"),
                                 ("1.0", "must be an integer")):
                bad = os.path.join(tmp, "bad.toml")
                with open(bad, "w") as f:
                    f.write(text.replace("drm_card = 0\n", f"drm_card = 0\nxgmi_hive = {value}\n"))
                r = gpusel("--sim", bad, "list")
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(f"key 'xgmi_hive' {words}", r.stderr)
            # Too few: the refusal names ROCm's variables, not CUDA's alone.
            r = gpusel("--sim", one_hive, "resolve", "--gpu", "free:4")
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("ROCR_, HIP_ and CUDA_VISIBLE_DEVICES unset", r.stderr)

    def rocm_smi(self, tmp, machine, *args):
        """Debian's rocm-smi over the simulated library, on `machine` (its output)."""
        r = run_rocm_smi(tmp, machine, *args)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def test_the_abi_compiles_against_debians_header(self):
        """Each constant of rocm_smi_abi.hpp equals rocm_smi.h's, and each function of rocm_smi.def
        has the header's type (a C compiler with -Werror refuses a pointer of another type)."""
        if shutil.which("cc") is None:
            self.skipTest("no C compiler (cc)")
        abi = read(SOURCE, "src", "driver", "rocm_smi_abi.hpp")
        constants = re.findall(r"^\s+(RSMI_\w+) = (0x[0-9A-Fa-f]+u?|\d+),", abi, re.M)
        self.assertGreater(len(constants), 10)
        lines = ["#include <stddef.h>", "#include <stdint.h>", "#include <rocm_smi/rocm_smi.h>"]
        for name, value in constants:
            lines.append(f"_Static_assert((uint32_t){name} == (uint32_t){value.rstrip('u')}, \"{name}\");")
        defs = re.findall(r"^GPUSEL_RSMI\((\w+), \w+, (\w+), \((.*)\)\)$",
                          read(SOURCE, "src", "driver", "rocm_smi.def"), re.M)
        header = read(self.root, "usr", "include", "rocm_smi", "rocm_smi.h")
        # Functions newer than Debian's ROCm 5.2.3, optional in rocm_smi.def (checked against the
        # declaration ROCm 6 ships instead, below).
        newer = {"rsmi_dev_node_id_get": "rsmi_status_t (uint32_t, uint32_t*)"}
        for name, ret, params in defs:
            params = params.replace("std::", "")
            if name in newer:
                self.assertNotIn(name + "(", header)
                self.assertEqual(f"{ret} ({params})", newer[name])
                continue
            # The software component is the header's enum, a uint32_t in rocm_smi.def.
            if name == "rsmi_version_str_get":
                params = params.replace("uint32_t, char*", "rsmi_sw_component_t, char*", 1)
            lines.append(f"{ret} (*p_{name})({params}) = {name};")
        # rsmi_process_info_t's layout, as rocm_smi_abi.hpp's static_assert pins it.
        self.assertIn("sizeof(rsmi_process_info_t) == 32 && offsetof(rsmi_process_info_t, vram_usage) == 8",
                      abi)
        lines.append("_Static_assert(sizeof(rsmi_process_info_t) == 32 && "
                     "offsetof(rsmi_process_info_t, vram_usage) == 8, \"rsmi_process_info_t\");")
        lines.append("int main(void) { return 0; }")
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "abi.c")
            with open(src, "w") as f:
                f.write("\n".join(lines) + "\n")
            r = subprocess.run(["cc", "-Wall", "-Werror", "-c", "-I", os.path.join(self.root, "usr", "include"),
                                "-o", os.path.join(tmp, "abi.o"), src], capture_output=True, text=True,
                               env=plain_env())
        self.assertEqual(r.returncode, 0, r.stderr + "\n".join(lines))


if __name__ == "__main__":
    unittest.main()
