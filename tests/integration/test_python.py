"""The Python stand-in (python/gpusel) over the C ABI, and a side-by-side run with the reference
module (gpu_select.py, the behaviour specification kept beside the repository and found through
GPUSEL_SHARED_DIR; see docs/design.md) on the same simulated NVML."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import reference_answers
from reference_answers import Answers
from support import SHARED, SOURCE, Case, for_python, gpusel_json, machine, sim_env, uuids

LIBRARY = os.environ.get("GPUSEL_LIBRARY_FILE", "build/lib/libgpusel.so.2")
DGX = uuids("dgx-h100")
MIX = uuids("workstation-mixed")


def python(code, machine_name="dgx-h100", **env):
    e = sim_env(machine_name, PYTHONPATH=os.path.join(SOURCE, "python"), GPUSEL_LIBRARY=LIBRARY,
                GPUSEL_SEED=os.path.join(SHARED, "seed"), **env)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=for_python(e), timeout=60)
    if r.returncode != 0:
        raise AssertionError(r.stdout + r.stderr)
    return json.loads(r.stdout)


# Each spec's outcome: [the reference module's (null without WITH_REFERENCE), gpusel's].
COMPARE = r'''
import json, os, sys
with_reference = os.environ.get("WITH_REFERENCE") == "1"
if with_reference:
    sys.path.insert(0, os.environ["GPUSEL_SEED"])
    import gpu_select
import gpusel
def outcome(mod, spec):
    try:
        r = mod.resolve_gpu_uuids([spec])
        return list(r) if r is not None else None
    except ValueError:
        return "ValueError"
print(json.dumps({s: [outcome(gpu_select, s) if with_reference else None, outcome(gpusel, s)]
                  for s in json.loads(os.environ["SPECS"])}))
'''
ANSWERS = Answers("python")


def compare(machine_name, env, specs):
    """{spec: [the reference module's outcome, gpusel's]}: the module's from the module where it is
    present (checked against the stored answers), else from the stored answers."""
    out = python(COMPARE, machine_name, SPECS=json.dumps(specs),
                 WITH_REFERENCE="1" if reference_answers.PRESENT else "", **env)
    return {spec: [ANSWERS.answer(json.dumps([machine_name, env, spec], sort_keys=True),
                                  lambda spec=spec: out[spec][0]), out[spec][1]]
            for spec in specs}

# Every resolve case the CLI tests hold where the module is right: (machine, environment, specs).
SAME = [
    ("dgx-h100", {}, ["0", "7", "3,1", DGX[4][:10], DGX[4][:10].lower(), DGX[6], "8", "GPU-ffff", "GPU-", "0,GPU-1",
                      "1,1", "", " , ", "cuda:0", "0-3", "MIG-1234", DGX[1] + "," + DGX[1][:9]]),
    ("dgx-h100", {"CUDA_VISIBLE_DEVICES": "5,1,3"}, ["0", "2", "3", "1,0"]),
    ("dgx-h100", {"CUDA_VISIBLE_DEVICES": "6,4"}, ["0,1", "1", "2"]),
    ("dgx-h100", {"CUDA_VISIBLE_DEVICES": f"{DGX[2]},{DGX[0][:12]}"},
     [DGX[0][:8], DGX[2], "1", "0", "2", DGX[5], "GPU-zz"]),
    ("dgx-h100", {"CUDA_VISIBLE_DEVICES": f"{DGX[4][:12]},{DGX[1][:12]}"}, ["1", DGX[4]]),
    ("dgx-h100", {"CUDA_VISIBLE_DEVICES": "1,2"}, ["0"]),
    ("dgx-h100", {"CUDA_VISIBLE_DEVICES": "MIG-aaaa"}, ["0"]),
    ("workstation-mixed", {}, ["0", "1,2", MIX[2][:9]]),
    ("workstation-mixed", {"CUDA_VISIBLE_DEVICES": "2", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, ["0"]),
    ("single-l4", {}, ["0", "1", "GPU-5e0a"]),
    ("mig-a100", {}, ["1"]),
    ("nvml-missing", {}, ["GPU-ab"]),
]
NVMLESS = uuids("nvml-missing")

# Where gpusel departs from the reference module (docs/design.md): (machine, environment, spec, module's, gpusel's).
DIFFERENT = [
    ("dgx-h100", {"CUDA_VISIBLE_DEVICES": "0,-1,2"}, "2", [DGX[2]], "ValueError"),  # 1: -1 ends the list
    ("dgx-h100", {"CUDA_VISIBLE_DEVICES": "1,1"}, "0", [DGX[1]], "ValueError"),  # 1: a duplicate hides all
    ("workstation-mixed", {"CUDA_VISIBLE_DEVICES": "0"}, "0", [MIX[0]], [MIX[1]]),  # 2: CUDA's order
    ("nvml-missing", {}, "1,01", None, "ValueError"),  # 6: duplicates without NVML
    # 8: a UUID under a preset of indices, placed where the order is known
    ("dgx-h100", {"CUDA_VISIBLE_DEVICES": "5,1,3"}, DGX[1][:9], "ValueError", [DGX[1]]),
    ("dgx-h100", {"CUDA_VISIBLE_DEVICES": "1,2"}, DGX[0][:10], "ValueError", "ValueError"),
    # 10 (and issue 9): without NVML, indices are placed through CUDA's own list in PCI order
    ("nvml-missing", {}, "0,1", None, NVMLESS[:2]),
    ("nvml-missing", {}, "2", None, "ValueError"),
    ("nvml-init-fails", {}, "0", None, uuids("nvml-init-fails")[:1]),
    ("mig-a100", {}, "0", [uuids("mig-a100")[0]], "ValueError"),  # a MIG-enabled GPU is refused
    # 11: "all" is a request, expanded as `gpusel resolve --gpu all` expands it
    ("dgx-h100", {}, "all", "ValueError", DGX),
    ("dgx-h100", {"CUDA_VISIBLE_DEVICES": "6,4"}, " ALL ", "ValueError", [DGX[6], DGX[4]]),
    ("dgx-h100", {}, "all,0", "ValueError", "ValueError"),
]


class SideBySideTest(Case):
    def test_same_results_as_the_reference_module(self):
        count = 0
        for machine_name, env, specs in SAME:
            out = compare(machine_name, env, specs)
            for spec in specs:
                with self.subTest(machine=machine_name, env=env, spec=spec):
                    reference, ours = out[spec]
                    self.assertEqual(ours, reference)
                    count += 1
        self.assertGreater(count, 40)

    def test_documented_deviations(self):
        for machine_name, env, spec, reference, ours in DIFFERENT:
            with self.subTest(machine=machine_name, env=env, spec=spec):
                out = compare(machine_name, env, [spec])
                self.assertEqual(out[spec], [reference, ours])


# The C ABI alone, through ctypes (argv: the library): bind, then print gpusel_claim_note.
C_CLAIM_NOTE = r'''
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
ordinal = ctypes.c_int(-1)
assert lib.gpusel_bind_assigned_gpu(0, ctypes.byref(ordinal)) == 0
buf = ctypes.create_string_buffer(4096)
needed = ctypes.c_size_t(0)
assert lib.gpusel_claim_note(buf, ctypes.c_size_t(len(buf)), ctypes.byref(needed)) == 0
print(buf.value.decode())
'''

MODULE = r'''
import argparse, ctypes, json, os, sys
out = {}
import gpusel
cuda = ctypes.CDLL(os.environ["GPUSEL_CUDA_LIBRARY"])
n = ctypes.c_int()
out["cuda_after_import"] = cuda.cuDeviceGetCount(ctypes.byref(n))  # 3: CUDA not initialised
out["names"] = [name for name in ("is_gpu_uuid", "is_gpu_index", "parse_gpu_spec", "gpu_arg", "single_gpu_arg",
    "resolve_gpu_uuids", "set_assigned_gpu", "assign_gpu", "bind_assigned_gpu", "assigned_visible_gpu",
    "format_gpu_uuid", "gpu_identity", "assign_from_environment", "assignment_source", "local_rank")
    if callable(getattr(gpusel, name, None))]
out["parse"] = gpusel.parse_gpu_spec(" 3, ,gpu-ab ".replace("gpu-ab", "1"))
out["parse_all"] = [gpusel.parse_gpu_spec("All"), gpusel.gpu_arg("all"), gpusel.parse_gpu_spec("free:2")]
out["is"] = [gpusel.is_gpu_uuid("gPu-x"), gpusel.is_gpu_index("\u00b2"), gpusel.is_gpu_index("07")]
def err(fn, *a):
    try:
        fn(*a)
        return None
    except Exception as e:
        return [type(e).__name__, str(e)]
out["gpu_arg"] = err(gpusel.gpu_arg, "0,GPU-1")
out["single_gpu_arg"] = [gpusel.single_gpu_arg("gpu-AB"), err(gpusel.single_gpu_arg, "0,1")]
out["format"] = [gpusel.format_gpu_uuid(None), gpusel.format_gpu_uuid("abc")]
out["visible_before"] = gpusel.assigned_visible_gpu()
gpusel.assign_gpu(None)
gpusel.assign_gpu(os.environ["WANT"])
out["visible"] = gpusel.assigned_visible_gpu()
out["bound"] = gpusel.bind_assigned_gpu()
out["again"] = err(gpusel.set_assigned_gpu, "0")
out["identity"] = gpusel.gpu_identity(out["bound"])
out["bad_assign"] = err(gpusel.assign_gpu, "0,1")
print(json.dumps(out))
'''


class ModuleTest(Case):
    def test_module(self):
        out = python(MODULE, "workstation-mixed", WANT="0")
        self.assertEqual(out["cuda_after_import"], 3)
        self.assertEqual(len(out["names"]), 15)
        self.assertEqual(out["parse"], ["3", "1"])
        self.assertEqual(out["parse_all"], [["all"], ["all"], ["free:2"]])
        self.assertEqual(out["is"], [True, False, True])
        self.assertEqual(out["gpu_arg"][0], "ArgumentTypeError")
        self.assertIn("mixes", out["gpu_arg"][1])
        self.assertEqual(out["single_gpu_arg"][0], "GPU-AB")
        self.assertEqual(out["single_gpu_arg"][1][0], "ArgumentTypeError")
        self.assertEqual(out["format"], [None, "GPU-abc"])
        self.assertIsNone(out["visible_before"])
        self.assertEqual(out["visible"], 2)  # nvidia-smi 0 is CUDA's 2 on this machine
        self.assertEqual(out["bound"], 2)  # no torch here: the CUDA ordinal
        self.assertEqual(out["again"][0], "RuntimeError")
        # "index" is the CUDA ordinal, as in the reference module; both numberings by their names too.
        self.assertEqual(out["identity"], {"index": 2, "cuda_ordinal": 2, "nvidia_smi_index": 0,
                                           "name": "NVIDIA RTX A4000", "uuid": MIX[0], "total_bytes": 16 << 30,
                                           "memory_total_bytes": 16 << 30, "compute_capability": [8, 6], "pci_bus_id": "00000000:01:00.0"})
        self.assertEqual(out["bad_assign"][0], "ValueError")

    def test_probe_from_python(self):
        # The unknowable case, from a Python process: libgpusel finds gpusel beside itself to ask CUDA.
        out = python("import gpusel, json; print(json.dumps(gpusel.resolve_gpu_uuids(['0'])))", "workstation-mixed",
                     CUDA_VISIBLE_DEVICES="0,2")
        self.assertEqual(out, [MIX[1]])

    def test_failures_carry_their_data(self):
        # The code, the driver call and its return value reach Python as attributes: a caller
        # decides from them, never from the message's words.
        code = r'''
import gpusel, json
out = {}
for name, call in (("hidden", lambda: gpusel.gpu_identity(0)), ("bad", lambda: gpusel.parse_gpu_spec("0,GPU-1")),
                   ("far", lambda: gpusel.resolve_gpu_uuids(["7"])),
                   ("typo", lambda: gpusel.resolve_gpu_uuids(["GPU-\u00e9x"]))):
    try:
        call()
        out[name] = None
    except Exception as e:
        out[name] = [type(e).__name__, e.code, e.call, e.result, e.subject, e.fields]
print(json.dumps(out))
'''
        out = python(code, "workstation-mixed", CUDA_VISIBLE_DEVICES="-1")
        self.assertEqual(out["hidden"], ["RuntimeError", 6, "cuInit", 100, "", {}])  # GPUSEL_ERROR_NO_DEVICE
        # GPUSEL_ERROR_BAD_INPUT, with what it is about (the request as a whole, or one entry of
        # it) and the values it names, as given (a non-ASCII entry comes back as it went in).
        self.assertEqual(out["bad"], ["ValueError", 2, "", 0, "gpu-request",
                                      {"request": "0,GPU-1", "reason": "mixed-kinds"}])
        self.assertEqual(out["far"], ["ValueError", 2, "", 0, "gpu-entry", {"entry": "7", "reason": "out-of-range"}])
        self.assertEqual(out["typo"][4:], ["gpu-entry", {"entry": "GPU-\u00e9x", "reason": "no-match"}])
        out = python(code, "workstation-mixed")
        self.assertEqual(out["far"][4:], ["gpu-entry", {"entry": "7", "reason": "out-of-range"}])
        self.assertEqual(out["typo"][4:], ["gpu-entry", {"entry": "GPU-\u00e9x", "reason": "no-match"}])

    def test_list_gpus_says_what_list_json_says(self):
        # One field table (gpu_fields.def) drives `list --json`, the C accessor and list_gpus():
        # every GPU has the same fields, under the same names, with the same values, on machines
        # with MIG, a lost GPU and a preset that hides and reorders GPUs.
        code = "import gpusel, json; print(json.dumps([gpusel.list_gpus(), gpusel.list_gpus(usage=True)]))"
        for name, env in (("dgx-h100", {}), ("mig-a100", {}), ("lost-gpu", {}),
                          ("workstation-mixed", {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "1"})):
            with self.subTest(machine=name):
                plain, usage = python(code, name, **env)
                listed = gpusel_json("list", "--json", env=sim_env(name, **env))["gpus"]
                self.assertEqual(len(usage), len(listed))
                for ours, theirs, without in zip(usage, listed, plain):
                    self.assertIn("memory_total_bytes", ours)
                    self.assertEqual(ours, {key: theirs[key] for key in ours})
                    # Without usage, the fields read with usage are absent and the others agree.
                    self.assertIsNone(without["memory_used_bytes"])
                    self.assertEqual({k: v for k, v in without.items() if without[k] is not None},
                                     {k: ours[k] for k in without if without[k] is not None})
        # Without NVML: RuntimeError, with the failure as data (GPUSEL_ERROR_LIBRARY_NOT_LOADED).
        missing = python("import gpusel, json\ntry:\n    gpusel.list_gpus()\n    print('null')\n"
                         "except RuntimeError as e:\n    print(json.dumps([e.code, str(e)]))", "nvml-missing")
        self.assertEqual(missing[0], 3)
        self.assertIn("NVML is unavailable", missing[1])
        # The simulator models every field of the table: on a healthy machine, with usage, each
        # GPU has them all (a field added without the simulator's getter fails here), but for the
        # failure and AMD GPUs' own numbers (test_amd_list has those).
        dgx = python(code, "dgx-h100")[1]
        self.assertEqual({key for gpu in dgx for key, value in gpu.items() if value is None},
                         {"failure", "rocm_smi_index", "hip_ordinal"})

    def test_a_relative_library_path_still_finds_the_probe_helper(self):
        # GPUSEL_LIBRARY=build/lib/libgpusel.so.2: the library finds gpusel-probe-cuda beside it as
        # with an absolute path, so a preset that only CUDA can place still resolves.
        relative = os.path.relpath(LIBRARY)
        self.assertFalse(os.path.isabs(relative))
        e = sim_env("workstation-mixed", PYTHONPATH=os.path.join(SOURCE, "python"), GPUSEL_LIBRARY=relative,
                    CUDA_VISIBLE_DEVICES="2,0")
        e.pop("GPUSEL_PROBE_HELPER", None)
        r = subprocess.run([sys.executable, "-c", "import gpusel, json; print(json.dumps(gpusel.resolve_gpu_uuids(['0'])))"],
                           capture_output=True, text=True, env=for_python(e), timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout), [MIX[0]])

    def test_all_enumerates_once_for_a_program_too(self):
        # The library reads the GPUs once for `all`, whoever calls it (not only the gpusel command).
        with tempfile.TemporaryDirectory() as d:
            trace = os.path.join(d, "trace")
            out = python("import gpusel, json; print(json.dumps(gpusel.resolve_gpu_uuids(['all'])))",
                         "dgx-h100", GPUSEL_SIM_TRACE=trace)
            self.assertEqual(out, DGX)
            with open(trace) as f:
                self.assertEqual(f.read().count("libnvidia-ml.so.1: nvmlDeviceGetCount_v2("), 1)

    def test_messages_speak_of_the_request_python_passed(self):
        # Python gave the library a value, not gpusel's --gpu option: the message names the value
        # as a GPU request or entry, and its remedy is one a program has (the command's own
        # wording is for the command: integration.cli_resolve).
        code = r'''
import gpusel, json
out = []
for call in (lambda: gpusel.resolve_gpu_uuids(["9"]), lambda: gpusel.parse_gpu_spec("0 1"),
             lambda: gpusel.resolve_gpu_uuids(["free:0"])):
    try:
        call()
        out.append(None)
    except ValueError as e:
        out.append(str(e))
print(json.dumps(out))
'''
        out = python(code, "dgx-h100")
        self.assertTrue(out[0].startswith('GPU entry "9" is out of range: this machine has 8 GPUs'), out[0])
        self.assertIn("gpusel_list_gpus", out[0])
        self.assertTrue(out[1].startswith('GPU entry "0 1" is neither a GPU index'), out[1])
        self.assertIn('separated by commas, not blanks: "0,1"', out[1])
        self.assertTrue(out[2].startswith('GPU request "free:0" asks for no GPU'), out[2])
        for message in out:
            self.assertNotIn("--gpu", message)

    def test_bind_never_imports_a_framework(self):
        # Stand-ins for the frameworks a program might have installed, first on sys.path: importing
        # any of them leaves a mark. gpusel, imported and used as a worker uses it, must leave none.
        frameworks = ("torch", "tensorflow", "jax", "cupy", "numba", "paddle", "mxnet", "pycuda")
        with tempfile.TemporaryDirectory(prefix="gpusel-frameworks-") as site:
            marks = os.path.join(site, "imported")
            for name in frameworks:
                os.makedirs(os.path.join(site, name))
                with open(os.path.join(site, name, "__init__.py"), "w") as f:
                    f.write(f"with open({marks!r}, 'a') as m:\n    m.write({name!r} + '\\n')\n"
                            "cuda = None\n")
            code = ("import sys, json, gpusel; b = gpusel.bind_assigned_gpu(); i = gpusel.gpu_identity(b); "
                    "gpusel.assigned_visible_gpu(); gpusel.assign_from_environment(); "
                    f"print(json.dumps({{'bound': b, 'uuid': i['uuid'], "
                    f"'loaded': [m for m in {list(frameworks)!r} if m in sys.modules]}}))")
            e = sim_env("dgx-h100", PYTHONPATH=os.pathsep.join([site, os.path.join(SOURCE, "python")]),
                        GPUSEL_LIBRARY=LIBRARY, GPUSEL_GPU=DGX[3])
            r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=for_python(e),
                               timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(json.loads(r.stdout), {"bound": 3, "uuid": DGX[3], "loaded": []})
            self.assertFalse(os.path.exists(marks), "imported: " + (open(marks).read() if os.path.exists(marks) else ""))
            # The stand-ins do mark an import (the check above can fail): a program that imports torch
            # itself is seen.
            r = subprocess.run([sys.executable, "-c", "import torch, jax"], env=for_python(e), timeout=60)
            self.assertEqual(r.returncode, 0)
            with open(marks) as m:
                self.assertEqual(m.read().split(), ["torch", "jax"])

    def test_a_bind_without_a_claim_is_a_python_warning(self):
        # A lease folder others may write cannot hold a claim: the bind goes ahead, and Python is
        # told with a ClaimWarning, not by a line the library writes on stderr.
        with tempfile.TemporaryDirectory(prefix="gpusel-open-leases-") as d:
            os.chmod(d, 0o777)
            code = ("import json, warnings, gpusel\n"
                    "with warnings.catch_warnings(record=True) as caught:\n"
                    "    warnings.simplefilter('always')\n"
                    "    b = gpusel.bind_assigned_gpu()\n"
                    "print(json.dumps({'bound': b, 'warnings': [(w.category.__name__, str(w.message), "
                    "w.filename) for w in caught]}))")
            e = sim_env("dgx-h100", PYTHONPATH=os.path.join(SOURCE, "python"), GPUSEL_LIBRARY=LIBRARY,
                        GPUSEL_GPU=DGX[2], GPUSEL_LEASE_DIR=d)
            r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               env=for_python(e), timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            out = json.loads(r.stdout)
            self.assertEqual(out["bound"], 2)
            self.assertEqual(len(out["warnings"]), 1, out)
            category, message, filename = out["warnings"][0]
            self.assertEqual(category, "ClaimWarning")
            self.assertIn("no claim was taken", message)
            self.assertIn(d, message)
            self.assertIn("GPUSEL_LEASE_DIR", message)
            self.assertEqual(filename, "<string>")  # points at the caller's line
            self.assertNotIn("gpusel: warning", r.stderr)
            # The C ABI says the same (gpusel_claim_note) and, by default, on stderr too.
            e.pop("PYTHONPATH")
            r = subprocess.run([sys.executable, "-c", C_CLAIM_NOTE, LIBRARY], capture_output=True, text=True,
                               env=for_python(e), timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("no claim was taken", r.stdout)
            self.assertEqual(r.stderr.count("gpusel: warning"), 1, r.stderr)

    def test_bind_informs_a_framework_already_imported(self):
        # A stand-in for torch, imported by the program before binding: it is told the device.
        code = """
import json, sys, types
calls = []
torch = types.ModuleType("torch")
torch.device = lambda kind, index: ("device", kind, index)
torch.cuda = types.SimpleNamespace(is_available=lambda: True, set_device=lambda d: calls.append(d))
sys.modules["torch"] = torch
import gpusel
device = gpusel.bind_assigned_gpu()
no_cuda = types.SimpleNamespace(is_available=lambda: False, set_device=lambda d: calls.append("wrong"))
torch.cuda = no_cuda
again = gpusel.bind_assigned_gpu()
print(json.dumps({"device": device, "calls": calls, "again": again}))
"""
        out = python(code, GPUSEL_GPU=DGX[6])
        self.assertEqual(out, {"device": ["device", "cuda", 6], "calls": [["device", "cuda", 6]], "again": 6})

    def test_environment_rule_from_python(self):
        code = ("import gpusel, json; o = {}; o['source'] = gpusel.assign_from_environment(); "
                "o['bound'] = gpusel.bind_assigned_gpu(); o['how'] = gpusel.assignment_source(); "
                "o['uuid'] = gpusel.gpu_identity(o['bound'])['uuid']; print(json.dumps(o))")
        # What gpusel run hands a rank, under a scheduler's integer preset: the UUID is accepted.
        out = python(code, GPUSEL_GPU=DGX[6], CUDA_VISIBLE_DEVICES="4,5,6,7", LOCAL_RANK="0")
        self.assertEqual(out, {"source": "GPUSEL_GPU", "bound": 2, "how": ["GPUSEL_GPU", 0], "uuid": DGX[6]})
        out = python(code, GPUSEL_GPUS=f"{DGX[2]},{DGX[5]}", LOCAL_RANK="1")
        self.assertEqual(out, {"source": "GPUSEL_GPUS", "bound": 5, "how": ["GPUSEL_GPUS", 1], "uuid": DGX[5]})
        # No GPUSEL_* variable: bind_assigned_gpu alone follows the launcher's rank.
        out = python(code, LOCAL_RANK="1", CUDA_VISIBLE_DEVICES="3,4")
        self.assertEqual(out, {"source": None, "bound": 1, "how": ["launcher", 1], "uuid": DGX[4]})
        # The reference module's own call, under an integer preset, takes the parent's UUID.
        out = python("import gpusel, json, os; gpusel.assign_gpu(os.environ['GPUSEL_GPU']); "
                     "print(json.dumps(gpusel.bind_assigned_gpu()))", GPUSEL_GPU=DGX[5], CUDA_VISIBLE_DEVICES="4,5,6,7")
        self.assertEqual(out, 1)

    def test_integers_out_of_range_are_refused(self):
        code = r'''
import gpusel, json
out = {}
for name, call in (("bind", lambda: gpusel.bind_assigned_gpu(2**32 + 5)), ("identity", lambda: gpusel.gpu_identity(2**32 + 3)),
                   ("negative", lambda: gpusel.gpu_identity(-2**40)), ("float", lambda: gpusel.gpu_identity(1.0))):
    try:
        call()
        out[name] = "accepted"
    except (ValueError, TypeError) as e:
        out[name] = type(e).__name__
out["still_unbound"] = gpusel.assignment_source()
print(json.dumps(out))
'''
        out = python(code)
        self.assertEqual(out, {"bind": "ValueError", "identity": "ValueError", "negative": "ValueError",
                               "float": "TypeError", "still_unbound": None})

    def test_struct_layout_matches_c(self):
        # The ctypes mirror of gpusel_identity against the C compiler's own layout.
        import shutil
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            self.skipTest("no C compiler")
        fields = ["size", "nvidia_smi_index", "cuda_ordinal", "uuid", "name", "total_bytes", "cc_major", "cc_minor",
                  "pci_bus_id"]
        program = "#include <stdio.h>\n#include <stddef.h>\n#include <gpusel/gpusel.h>\nint main(void) {\n"
        program += '  printf("%zu", sizeof(gpusel_identity));\n'
        for f in fields:
            program += f'  printf(" %zu", offsetof(gpusel_identity, {f}));\n'
        program += "  return 0;\n}\n"
        with tempfile.TemporaryDirectory() as d:
            src, exe = os.path.join(d, "layout.c"), os.path.join(d, "layout")
            with open(src, "w") as f:
                f.write(program)
            subprocess.run([cc, "-I", os.path.join(SOURCE, "include"), src, "-o", exe], check=True)
            c_layout = [int(x) for x in subprocess.run([exe], capture_output=True, text=True, check=True).stdout.split()]
        py = python("import ctypes, gpusel, json; I = gpusel._Identity; "
                    f"print(json.dumps([ctypes.sizeof(I)] + [getattr(I, f).offset for f in {fields!r}]))")
        self.assertEqual(py, c_layout)

    def test_structs_serve_callers_of_other_sizes(self):
        # A newer caller's larger struct: the library fills what it knows and leaves the rest as
        # the caller had it (it never writes past its own struct); a caller of exactly the first
        # version's size is served; a smaller size is bad input.
        code = r'''
import ctypes, json, gpusel
lib, I = gpusel._lib, gpusel._Identity
def call(size, extra=0, prefill=0xff):
    buf = (ctypes.c_ubyte * (ctypes.sizeof(I) + extra))(*([prefill] * (ctypes.sizeof(I) + extra)))
    ident = I.from_buffer(buf)
    ident.size = size
    rc = lib.gpusel_gpu_identity(1, ctypes.byref(ident))
    return rc, ident, bytes(buf[ctypes.sizeof(I):])
out = {}
rc, ident, tail = call(ctypes.sizeof(I) + 16, 16)
out["newer"] = [rc, ident.size, ident.uuid.decode(), ident.cuda_ordinal, tail.hex()]
first = I.pci_bus_id.offset + I.pci_bus_id.size
rc, ident, _ = call(first)
out["first"] = [rc, ident.uuid.decode(), ident.pci_bus_id.decode() != ""]
rc, _, _ = call(first - 1)
out["short"] = [rc, lib.gpusel_last_error().decode()]
lib.gpusel_list_gpus.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
lib.gpusel_gpu_list_get.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
lst = ctypes.c_void_p()
assert lib.gpusel_list_gpus(ctypes.byref(lst)) == 0
info = (ctypes.c_ubyte * 512)()
ctypes.c_size_t.from_buffer(info).value = 512
for i in range(8, 512):
    info[i] = 0xee
out["info"] = [lib.gpusel_gpu_list_get(lst, 2, info), bytes(info[12:16]).hex(), bytes(info[500:512]).hex()]
ctypes.c_size_t.from_buffer(info).value = 4
out["info_short"] = lib.gpusel_gpu_list_get(lst, 2, info)
print(json.dumps(out))
'''
        out = python(code)
        u = uuids("dgx-h100")[1]
        size = python("import ctypes, gpusel; print(ctypes.sizeof(gpusel._Identity))")
        self.assertEqual(out["newer"], [0, size + 16, u, 1, "ff" * 16])  # `size` stays the caller's
        self.assertEqual(out["first"], [0, u, True])
        self.assertEqual(out["short"][0], 2)
        self.assertIn("gpusel_identity->size is", out["short"][1])
        # index 2 of the GPU list (little-endian unsigned after the size), and the untouched tail.
        self.assertEqual(out["info"], [0, "02000000", "ee" * 12])
        self.assertEqual(out["info_short"], 2)

    def test_library_not_found(self):
        e = sim_env("dgx-h100", PYTHONPATH=os.path.join(SOURCE, "python"), GPUSEL_LIBRARY="/nonexistent/libgpusel.so.2")
        r = subprocess.run([sys.executable, "-c", "import gpusel"], capture_output=True, text=True, env=e)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("ImportError: gpusel: cannot find libgpusel.so.2; set GPUSEL_LIBRARY", r.stderr)


if __name__ == "__main__":
    unittest.main()
