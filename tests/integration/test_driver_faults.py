"""Broken and hostile drivers: gpusel against a fake libnvidia-ml.so.1 and libcuda.so.1
(tests/fault/, built into <build>/lib/gpusel/fault/) that report absurd counts, hang in cuInit, fill
string buffers without a terminating NUL, return bytes that are not UTF-8 or hold terminal escape
sequences, or an empty UUID. gpusel must stay bounded and prompt, read every driver string within
its buffer, print valid JSON and inert text, and never report a false success."""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from support import BIN, SIM_ROOT, Case, base_env

BUILD = os.environ.get("GPUSEL_BUILD_DIR", "build")
FAULT_DIR = os.path.join(BUILD, "lib", "gpusel", "fault")
FAULT_NVML = os.path.join(FAULT_DIR, "libnvidia-ml.so.1")
FAULT_CUDA = os.path.join(FAULT_DIR, "libcuda.so.1")
SIM_NVML = os.path.join(SIM_ROOT, "libnvidia-ml.so.1")

# What a command may take at most; a fixed gpusel answers in well under a second.
LIMIT = 30


class Result:
    def __init__(self, returncode, stdout, stderr, seconds):
        self.returncode = returncode
        self.raw_stdout = stdout
        self.stdout = stdout.decode("utf-8", "replace")
        self.stderr = stderr.decode("utf-8", "replace")
        self.seconds = seconds


class HostileDriverTest(Case):
    def setUp(self):
        for lib in (FAULT_NVML, FAULT_CUDA):
            self.assertTrue(os.path.exists(lib), f"{lib} is missing: build the gpusel_fault_* targets")
        self.dir = tempfile.mkdtemp(prefix="gpusel-fault-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)

    def run_gpusel(self, *args, fault="", nvml=FAULT_NVML, cuda=FAULT_CUDA, **extra):
        """Runs gpusel in a session of its own against the given libraries; kills the whole session
        and fails the test when it takes longer than LIMIT seconds."""
        env = base_env(GPUSEL_NVML_LIBRARY=nvml, GPUSEL_CUDA_LIBRARY=cuda, GPUSEL_FAULT=fault, **extra)
        start = time.monotonic()
        proc = subprocess.Popen([BIN, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                start_new_session=True)
        try:
            out, err = proc.communicate(timeout=LIMIT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            self.fail(f"gpusel {' '.join(args)} (GPUSEL_FAULT={fault}) did not finish within {LIMIT} s")
        return Result(proc.returncode, out, err, time.monotonic() - start)

    def assertFailed(self, r, code, *pieces):
        self.assertFailsWith(r, code, *pieces)
        self.assertNotIn("AddressSanitizer", r.stderr)

    def assertNoControlBytes(self, r):
        """Text output holds no terminal control bytes (C0 but newline, DEL) and is valid UTF-8."""
        for b in r.raw_stdout:
            self.assertFalse((b < 0x20 and b != 0x0A) or b == 0x7F, f"control byte {b:#x} in {r.raw_stdout!r}")
        r.raw_stdout.decode("utf-8")

    def json_of(self, r):
        self.assertEqual(r.returncode, 0, f"stdout={r.stdout!r} stderr={r.stderr!r}")
        return json.loads(r.raw_stdout.decode("utf-8"))  # strict: invalid UTF-8 fails here

    def assertNothingResolved(self, r, args, code=None):
        """A failed command printed no GPU: nothing on stdout, or under --json only the error object
        (with `code`, when given)."""
        if "--json" not in args:
            self.assertEqual(r.stdout, "")
            return
        out = json.loads(r.raw_stdout.decode("utf-8"))
        self.assertEqual(list(out), ["error"], r.stdout)
        self.assertEqual(out["error"]["exit_code"], r.returncode)
        if code is not None:
            self.assertEqual(out["error"]["code"], code, r.stdout)

    # ---- 1. absurd NVML counts -----------------------------------------------------------------

    def test_absurd_nvml_device_count_is_refused(self):
        for fault, value in (("nvml_count_int", "2147483647"), ("nvml_count_uint", "4294967295")):
            with self.subTest(fault=fault):
                for args in (("list",), ("list", "--json")):
                    r = self.run_gpusel(*args, fault=fault)
                    self.assertFailed(r, 1, "nvmlDeviceGetCount_v2", value)
                    self.assertNothingResolved(r, args, "driver-broken")

    def test_absurd_mig_device_count_is_refused(self):
        for args in (("list",), ("list", "--json")):
            r = self.run_gpusel(*args, fault="nvml_mig_count")
            self.assertFailed(r, 1, "nvmlDeviceGetMaxMigDeviceCount", "4294967295")
            self.assertNothingResolved(r, args, "driver-broken")

    # ---- 2. an absurd CUDA device count --------------------------------------------------------

    def test_absurd_cuda_device_count_is_refused(self):
        r = self.run_gpusel("bind", fault="cuda_count")
        self.assertFailed(r, 1, "cuDeviceGetCount", "2147483647")
        r = self.run_gpusel("list", "--probe", "--json", fault="cuda_count")
        probe = self.json_of(r)["probe"]
        self.assertFalse(probe["ok"])
        self.assertIn("cuDeviceGetCount", probe["reason"])
        self.assertIn("2147483647", probe["reason"])
        # resolve asks CUDA when NVML is unavailable and --gpu holds indices...
        r = self.run_gpusel("resolve", "--gpu", "0", fault="cuda_count", nvml=os.path.join(self.dir, "none.so"))
        self.assertFailed(r, 1, "cuDeviceGetCount", "2147483647")
        self.assertEqual(r.stdout, "")
        # ...and for an integer preset on a machine of mixed models.
        r = self.run_gpusel("resolve", "--gpu", "0", fault="cuda_count", nvml=SIM_NVML,
                            GPUSEL_SIM_MACHINE="workstation-mixed", CUDA_VISIBLE_DEVICES="0")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("2147483647", r.stderr)
        self.assertEqual(r.stdout, "")

    # ---- 2b. a driver without the optional functions a feature needs ---------------------------

    def test_bench_without_memory_stream_and_event_functions_names_them(self):
        # The fault libcuda.so.1 has what binding needs and none of the memory, stream and event
        # functions cuda.def marks optional: bench bw must say which it lacks, not call through null.
        r = self.run_gpusel("bench", "bw", "--gpu", "0", "--size", "1MiB", "--samples", "1")
        self.assertFailed(r, 1, "measuring copy bandwidth needs", "cuMemAlloc_v2", "cuStreamCreate",
                          "cuEventElapsedTime", FAULT_CUDA, "no figures from 1 of 1 GPUs")
        self.assertNotIn("cuInit", r.stderr)  # required functions are there: only the missing named

    # ---- 3. a CUDA probe that never answers ----------------------------------------------------

    def hung_probe(self, *args, timeout="1", **extra):
        """Runs gpusel with cuInit hanging and a 1 s probe deadline (or `timeout`); checks that the
        child that hung is gone afterwards."""
        pidfile = os.path.join(self.dir, "probe.pid")
        r = self.run_gpusel(*args, fault="cuinit_hang", GPUSEL_PROBE_TIMEOUT=timeout, GPUSEL_FAULT_PIDFILE=pidfile,
                            **extra)
        self.assertLess(r.seconds, 15, r.stderr)
        self.assertTrue(os.path.exists(pidfile), "the probe never reached cuInit")
        with open(pidfile) as f:
            pid = int(f.read())
        with self.assertRaises(ProcessLookupError, msg="the hung probe child is still running"):
            os.kill(pid, 0)
        return r

    def test_hung_cuinit_times_out_for_resolve_on_a_mixed_machine(self):
        r = self.hung_probe("resolve", "--gpu", "0", nvml=SIM_NVML, GPUSEL_SIM_MACHINE="workstation-mixed",
                            CUDA_VISIBLE_DEVICES="0")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("the CUDA probe did not answer within 1 s (cuInit hung?)", r.stderr)
        self.assertEqual(r.stdout, "")

    def test_hung_cuinit_times_out_for_resolve_without_nvml(self):
        r = self.hung_probe("resolve", "--gpu", "0", nvml=os.path.join(self.dir, "none.so"))
        self.assertFailed(r, 1, "the CUDA probe did not answer within 1 s (cuInit hung?)")
        self.assertEqual(r.stdout, "")

    def test_a_short_deadline_is_said_as_given(self):
        # Six significant digits, as printf's %g: not rounded to milliseconds ("0.063").
        r = self.hung_probe("resolve", "--gpu", "0", timeout="0.0625", nvml=os.path.join(self.dir, "none.so"))
        self.assertFailed(r, 1, "the CUDA probe did not answer within 0.0625 s (cuInit hung?)")

    def test_hung_cuinit_times_out_for_list_probe(self):
        r = self.hung_probe("list", "--probe", "--json", nvml=SIM_NVML, GPUSEL_SIM_MACHINE="workstation-mixed")
        probe = self.json_of(r)["probe"]
        self.assertFalse(probe["ok"])
        self.assertEqual(probe["reason"], "the CUDA probe did not answer within 1 s (cuInit hung?)")
        r = self.hung_probe("list", "--probe", nvml=SIM_NVML, GPUSEL_SIM_MACHINE="workstation-mixed")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("did not answer within 1 s (cuInit hung?)", r.stdout)

    def test_probe_timeout_is_validated(self):
        for value in ("abc", "0", "-1", "nan", "inf", "1e9", "2s", " 1"):
            with self.subTest(value=value):
                r = self.run_gpusel("resolve", "--gpu", "0", nvml=os.path.join(self.dir, "none.so"),
                                    GPUSEL_PROBE_TIMEOUT=value)
                self.assertFailed(r, 2, "GPUSEL_PROBE_TIMEOUT")
        r = self.run_gpusel("resolve", "--gpu", "1", nvml=os.path.join(self.dir, "none.so"),
                            GPUSEL_PROBE_TIMEOUT="2.5")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "GPU-fa170000-0000-0000-0000-000000000001\n")

    # ---- 4. strings without a terminating NUL --------------------------------------------------

    def test_strings_filling_their_buffers_are_read_within_them(self):
        j = self.json_of(self.run_gpusel("list", "--json", fault="strings_full"))
        self.assertEqual(j["driver_version"], "999.99.99".ljust(80, "9"))
        gpu = j["gpus"][0]
        self.assertEqual(gpu["uuid"], "GPU-fa170000-0000-0000-0000-000000000000".ljust(96, "u"))
        self.assertEqual(gpu["name"], "Fault GPU".ljust(96, "n"))
        self.assertEqual(gpu["pci_bus_id"], "00000000:01:00.0".ljust(32, "b"))
        b = self.json_of(self.run_gpusel("bind", "--json", fault="strings_full"))
        self.assertEqual(b["pci_bus_id"], "Z" * 32)
        self.assertTrue(b["name"].startswith("Fault GPUnnn"), b["name"])
        self.assertLessEqual(len(b["name"]), 256)
        self.assertEqual(set(b["name"][len("Fault GPU"):]), {"n"})
        r = self.run_gpusel("list", "--probe", fault="strings_full")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("CUDA's own view", r.stdout)

    # ---- 5. bytes that are not UTF-8, escape sequences, an empty UUID ---------------------------

    def test_json_output_replaces_bytes_that_are_not_utf8(self):
        j = self.json_of(self.run_gpusel("list", "--json", "--probe", fault="bad_bytes"))
        gpu = j["gpus"][0]
        self.assertIn("\ufffd", gpu["name"])
        self.assertIn("\x1b[31mred", gpu["name"])  # JSON escapes control characters itself
        self.assertIn("\ufffd", gpu["uuid"])
        self.assertIn("\ufffd", gpu["pci_bus_id"])
        self.assertIn("\ufffd", j["probe"]["devices"][0]["name"])
        b = self.json_of(self.run_gpusel("bind", "--json", fault="bad_bytes"))
        self.assertIn("\ufffd", b["name"])
        self.assertIn("\ufffd", b["pci_bus_id"])

    def test_text_output_escapes_control_bytes(self):
        for args in (("list",), ("list", "--probe"), ("bind",)):
            with self.subTest(args=args):
                r = self.run_gpusel(*args, fault="bad_bytes")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertNoControlBytes(r)
                self.assertIn("\\x1b[31mred\\x1b[0m\\x07\\x7f", r.stdout)

    def test_empty_uuid_is_never_a_resolved_gpu(self):
        for spec in ("0", "0,1", "1,0", "GPU-"):
            for extra in ((), ("--json",)):
                with self.subTest(spec=spec, json=bool(extra)):
                    r = self.run_gpusel("resolve", "--gpu", spec, *extra, fault="empty_uuid")
                    self.assertNotIn("AddressSanitizer", r.stderr)
                    if r.returncode != 0:
                        self.assertTrue(r.stderr.startswith("gpusel: "), r.stderr)
                        self.assertNothingResolved(r, extra)
                        continue
                    if extra:
                        gpus = json.loads(r.stdout)["gpus"]
                    else:
                        self.assertTrue(r.stdout.endswith("\n"), r.stdout)
                        gpus = r.stdout[:-1].split("\n")
                    self.assertEqual(len(gpus), len(spec.split(",")), r.stdout)
                    for uuid in gpus:
                        self.assertTrue(uuid.startswith("GPU-fa17"), r.stdout)
        r = self.run_gpusel("resolve", "--gpu", "0", fault="empty_uuid")
        self.assertFailed(r, 2, "empty UUID")


if __name__ == "__main__":
    unittest.main()
