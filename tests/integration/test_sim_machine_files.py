"""The simulator's machine files and machine arguments, hostile ones included: `sim env` output is
safe to eval, and a machine file that is not a small regular file, nests absurdly deep or holds
absurd values is refused with a message (exit 2) by the CLI, and with a message and a failed init by
the simulated libraries, never with a hang or a crash. Machine files are generated here."""

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest

from support import (BIN, CUDA_USER, MACHINES, PYTHON_LOADS_LIBRARIES, SIM_ROOT, Case, base_env, for_python,
                     gpusel)

with open(os.path.join(MACHINES, "single-l4.toml"), encoding="utf-8") as f:
    SINGLE_L4 = f.read()


def with_name(toml_name):
    """single-l4's text with `name = "<toml_name>"` (toml_name is TOML basic-string contents)."""
    return SINGLE_L4.replace('name = "single-l4"', f'name = "{toml_name}"', 1)


class HostileSimTest(Case):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="gpusel-hostile-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self.marker = os.path.join(self.dir, "MARKER")

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def eval_in_sh(self, machine_arg, show="GPUSEL_SIM_MACHINE", **env):
        """Runs `eval "$(gpusel sim env ARG)"` in sh, then prints $show; returns the CompletedProcess."""
        script = 'out=$("$GPUSEL" sim env "$ARG") || exit $?; eval "$out"; printf "%s" "${' + show + '}"'
        return subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60, cwd=self.dir,
                              env=base_env(GPUSEL=BIN, ARG=machine_arg, **env))

    def assertNoMarker(self):
        self.assertFalse(os.path.exists(self.marker), "a command from the machine file or path ran")

    # ---- sim env output is safe to eval -------------------------------------------------------

    def test_name_with_newline_is_refused_and_runs_nothing(self):
        path = self.write("m.toml", with_name(f"x\\ntouch {self.marker}\\n"))
        r = self.eval_in_sh(path)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertNoMarker()
        self.assertFailsWith(gpusel("sim", "env", path), 2, path, "key 'name'", "control character",
                             "one line")
        self.assertFailsWith(gpusel("--sim", path, "list"), 2, path, "key 'name'")

    def test_name_with_shell_syntax_is_printed_inertly(self):
        name = f"it's $(touch {self.marker}) `touch {self.marker}` \\\"q\\\"; touch {self.marker}"
        path = self.write("m.toml", with_name(name))
        r = self.eval_in_sh(path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNoMarker()
        self.assertEqual(r.stdout, os.path.realpath(path))

    def test_hostile_machine_path_round_trips(self):
        # A folder name holding quotes, a command substitution and line breaks.
        folder = f"d'q $(touch {self.marker})\n touch {self.marker} #\n'"
        path = self.write(os.path.join(folder, "m.toml"), SINGLE_L4)
        r = self.eval_in_sh(path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNoMarker()
        self.assertEqual(r.stdout, os.path.realpath(path))
        out = gpusel("sim", "env", path).stdout
        for line in out.splitlines():
            if line.startswith("#"):
                self.assertNotIn("touch", line)  # never a line break inside the comment

    def test_argument_with_command_substitution_runs_nothing(self):
        r = self.eval_in_sh(f"$(touch {self.marker})")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertNoMarker()
        r = self.eval_in_sh(f"x';touch {self.marker};'.toml")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertNoMarker()

    def test_inherited_library_path_round_trips(self):
        old = f"/opt/it's $(touch {self.marker})\n`touch {self.marker}`"
        r = self.eval_in_sh("single-l4", show="LD_LIBRARY_PATH", LD_LIBRARY_PATH=old)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNoMarker()
        self.assertTrue(r.stdout.endswith(":" + old), r.stdout)

    # ---- machine files that are not small regular files ----------------------------------------

    def check_refused_everywhere(self, path, *pieces):
        """The CLI exits 2 naming the file; the CUDA double (cuda_user) and the NVML double (through
        `gpusel list` without --sim) report it and fail to initialise, promptly."""
        self.assertFailsWith(gpusel("--sim", path, "list"), 2, path, *pieces)
        self.assertFailsWith(gpusel("sim", "env", path), 2, path, *pieces)
        env = base_env(GPUSEL_SIM_MACHINE=path)
        r = subprocess.run([CUDA_USER], capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split()[:1], ["init"], r.stdout)
        self.assertIn("gpusel-sim (libcuda.so.1)", r.stderr)
        for piece in (path, *pieces):
            self.assertIn(piece, r.stderr)
        r = gpusel("list", env=base_env(GPUSEL_SIM_MACHINE=path,
                                        GPUSEL_NVML_LIBRARY=os.path.join(SIM_ROOT, "libnvidia-ml.so.1"),
                                        GPUSEL_CUDA_LIBRARY=os.path.join(SIM_ROOT, "libcuda.so.1")))
        self.assertGreater(r.returncode, 0, r.stdout)  # a status, not a signal
        self.assertIn("gpusel-sim (libnvidia-ml.so.1)", r.stderr)
        for piece in (path, *pieces):
            self.assertIn(piece, r.stderr)

    def test_dev_zero_is_refused(self):
        self.check_refused_everywhere("/dev/zero", "character device", "at most 1 MiB")

    def test_fifo_is_refused_without_blocking(self):
        fifo = os.path.join(self.dir, "machine.toml")
        os.mkfifo(fifo)
        self.assertTrue(stat.S_ISFIFO(os.stat(fifo).st_mode))
        self.check_refused_everywhere(fifo, "FIFO", "at most 1 MiB")

    def test_oversized_file_is_refused(self):
        path = self.write("big.toml", SINGLE_L4 + "#" + "x" * (1 << 20) + "\n")
        self.check_refused_everywhere(path, "bytes", "at most 1 MiB")

    def test_folder_is_refused(self):
        self.check_refused_everywhere(self.dir, "folder", "at most 1 MiB")

    # ---- nesting and absurd values --------------------------------------------------------------

    def test_deep_dotted_key_is_refused_without_crashing(self):
        path = self.write("deep.toml", SINGLE_L4 + "a" + ".a" * 300000 + " = 1\n")
        self.check_refused_everywhere(path, "nest more than 64 levels")

    def test_deep_arrays_and_inline_tables_are_refused(self):
        for text in ("x = " + "[" * 100000 + "]" * 100000, "x = " + "{a = " * 100000 + "1" + "}" * 100000):
            with self.subTest(text=text[:12]):
                path = self.write("deep.toml", text + "\n" + SINGLE_L4)
                self.assertFailsWith(gpusel("--sim", path, "list"), 2, path, "nest more than 64 levels")

    def test_absurd_compute_capability_is_refused(self):
        for cc in ("2147483647.0", "9.99999999999", "100.0", "0.9"):
            with self.subTest(cc=cc):
                path = self.write("cc.toml", SINGLE_L4.replace('"8.9"', f'"{cc}"'))
                self.assertFailsWith(gpusel("--sim", path, "list"), 2, path, "'compute_capability'",
                                     "major 1-99")
        path = self.write("cc.toml", SINGLE_L4.replace('"8.9"', '"99.99"'))
        r = gpusel("--sim", path, "list")
        self.assertEqual(r.returncode, 0, r.stderr)


# A program that uses NVML and then the CUDA driver, each loaded by its path as a program loads
# them by name, and that may rewrite its machine file in between (REWRITE: the new text).
BOTH_DOUBLES = r'''
import ctypes, json, os
folder = os.environ["SIM_FOLDER"]
nvml = ctypes.CDLL(os.path.join(folder, "libnvidia-ml.so.1"))
n, c = ctypes.c_uint(), ctypes.c_int()
out = {"nvml_init": nvml.nvmlInit_v2()}
nvml.nvmlDeviceGetCount_v2(ctypes.byref(n))
out["nvml"] = n.value
if "REWRITE" in os.environ:
    with open(os.environ["GPUSEL_SIM_MACHINE"], "w") as f:
        f.write(os.environ["REWRITE"])
cuda = ctypes.CDLL(os.path.join(folder, "libcuda.so.1"))
out["cuda_init"] = cuda.cuInit(0)
cuda.cuDeviceGetCount(ctypes.byref(c))
out["cuda"] = c.value
nvml.nvmlDeviceGetCount_v2(ctypes.byref(n))
out["nvml_after"] = n.value
print(json.dumps(out))
'''

READ_LINE = re.compile(r'libgpusel-sim-machines\.so: READ "([^"]*)" \((\d+) GPUs\)')
READ_AGAIN_LINE = re.compile(r'libgpusel-sim-machines\.so: READ "([^"]*)" \(the file "([^"]*)", read before\)')


class SharedMachineTest(Case):
    """The simulator's libraries in one process parse each machine file once, through
    libgpusel-sim-machines.so; a changed file is read again; without that library a double says
    so and its driver does not start."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="gpusel-shared-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self.trace = os.path.join(self.dir, "trace")

    def reads(self):
        with open(self.trace, encoding="utf-8") as f:
            text = f.read()
        return READ_LINE.findall(text), READ_AGAIN_LINE.findall(text)

    def machine_copy(self, name="dgx-h100"):
        path = os.path.join(self.dir, name + ".toml")
        shutil.copy(os.path.join(MACHINES, name + ".toml"), path)
        return path

    def test_gpusel_parses_once_for_its_reader_and_both_doubles(self):
        # --sim's reader takes the bundled machine by its folder's path, the doubles by the file's
        # real path: one parse, and the second path gets a copy of the same machine.
        r = gpusel("--sim", "dgx-h100", "bind", "--gpu", "3", GPUSEL_SIM_TRACE=self.trace)
        self.assertEqual(r.returncode, 0, r.stderr)
        parsed, again = self.reads()
        self.assertEqual(len(parsed), 1, parsed)
        self.assertEqual(parsed[0][1], "8")
        self.assertLessEqual(len(again), 1, again)
        real = os.path.realpath(os.path.join(MACHINES, "dgx-h100.toml"))
        self.assertIn(real, [p for p, _ in parsed] + [p for p, _ in again])
        # Both doubles were used: NVML named the index, CUDA bound the GPU.
        self.assertIn("nvidia-smi index 3", r.stdout)

    def test_the_same_machine_for_every_double_of_a_program(self):
        if not PYTHON_LOADS_LIBRARIES:
            self.skipTest("ThreadSanitizer build: Python cannot load the doubles")
        path = self.machine_copy()
        out = self.run_both(path)
        self.assertEqual(out, {"nvml_init": 0, "nvml": 8, "cuda_init": 0, "cuda": 8, "nvml_after": 8})
        parsed, again = self.reads()
        self.assertEqual(parsed, [(path, "8")])
        self.assertEqual(again, [])

    def test_a_changed_file_is_read_again(self):
        if not PYTHON_LOADS_LIBRARIES:
            self.skipTest("ThreadSanitizer build: Python cannot load the doubles")
        path = self.machine_copy("single-l4")
        with open(os.path.join(MACHINES, "workstation-mixed.toml"), encoding="utf-8") as f:
            three = f.read()
        out = self.run_both(path, REWRITE=three)
        # NVML keeps the machine it started with; CUDA, started after the change, has the new one.
        self.assertEqual(out, {"nvml_init": 0, "nvml": 1, "cuda_init": 0, "cuda": 3, "nvml_after": 1})
        parsed, _ = self.reads()
        self.assertEqual(parsed, [(path, "1"), (path, "3")])

    def test_a_double_without_the_reader_says_so(self):
        if not PYTHON_LOADS_LIBRARIES:
            self.skipTest("ThreadSanitizer build: Python cannot load the doubles")
        alone = os.path.join(self.dir, "alone")
        os.makedirs(alone)
        for lib in ("libnvidia-ml.so.1", "libcuda.so.1"):
            shutil.copy(os.path.join(SIM_ROOT, lib), alone)
        path = self.machine_copy()
        r = self.run_both(path, folder=alone, check=False)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual(out["nvml_init"], 9)  # NVML_ERROR_DRIVER_NOT_LOADED
        self.assertEqual(out["cuda_init"], 100)  # CUDA_ERROR_NO_DEVICE
        for lib in ("libnvidia-ml.so.1", "libcuda.so.1"):
            self.assertIn(f"gpusel-sim ({lib}): GPUSEL_SIM_MACHINE=\"{path}\": {lib} reads machine files "
                          "through libgpusel-sim-machines.so, which is not beside it", r.stderr)
        self.assertIn(os.path.join(alone, "libgpusel-sim-machines.so"), r.stderr)
        self.assertIn("lib/gpusel/sim", r.stderr)  # the remedy

    def test_a_bad_file_is_reported_by_each_double(self):
        if not PYTHON_LOADS_LIBRARIES:
            self.skipTest("ThreadSanitizer build: Python cannot load the doubles")
        path = os.path.join(self.dir, "bad.toml")
        with open(path, "w", encoding="utf-8") as f:
            f.write(SINGLE_L4.replace("sm_count = ", "sm_count = \"many\" # "))
        r = self.run_both(path, check=False)
        out = json.loads(r.stdout)
        self.assertEqual((out["nvml_init"], out["cuda_init"]), (9, 100))
        for lib in ("libnvidia-ml.so.1", "libcuda.so.1"):
            self.assertRegex(r.stderr, rf"gpusel-sim \({re.escape(lib)}\): GPUSEL_SIM_MACHINE=\"{re.escape(path)}\": "
                                       rf"{re.escape(path)}:\d+: key 'sm_count' must be an integer")

    def run_both(self, path, folder=SIM_ROOT, check=True, **extra):
        env = base_env(GPUSEL_SIM_MACHINE=path, SIM_FOLDER=os.path.abspath(folder), GPUSEL_SIM_TRACE=self.trace,
                       **extra)
        r = subprocess.run([sys.executable, "-c", BOTH_DOUBLES], capture_output=True, text=True,
                           env=for_python(env), timeout=60)
        if not check:
            return r
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "")
        return json.loads(r.stdout)


if __name__ == "__main__":
    unittest.main()
