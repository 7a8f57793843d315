"""The CUDA probe's helper program, gpusel-probe-cuda: libgpusel runs it (where NVML cannot tell
CUDA's device order) and finds it relative to itself, beside the library or in the installation's
libexec/gpusel/, without the gpusel command anywhere; GPUSEL_PROBE_HELPER overrides that."""

import json
import os
import shutil
import subprocess
import sys
import unittest

from support import BIN, PYTHON_LOADS_LIBRARIES, SOURCE, Case, for_python, gpusel, private_path, sim_env, uuids

BUILD = os.environ.get("GPUSEL_BUILD_DIR", "build")
LIBRARY = os.environ.get("GPUSEL_LIBRARY_FILE", os.path.join(BUILD, "lib", "libgpusel.so.2"))
HELPER = os.path.join(BUILD, "libexec", "gpusel", "gpusel-probe-cuda")
MIX = uuids("workstation-mixed")

# Under FASTEST_FIRST on the mixed workstation, an integer preset can be placed only by asking
# CUDA: "0" of CUDA_VISIBLE_DEVICES=0,2 is CUDA's 0, the 4090 (nvidia-smi index 1).
RESOLVE = "import gpusel, json; print(json.dumps(gpusel.resolve_gpu_uuids(['0'])))"


def layout(files):
    """A folder holding copies of the build's files: {relative path: source}."""
    root = os.path.dirname(private_path("x"))
    for rel, src in files.items():
        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
        shutil.copy2(src, os.path.join(root, rel))
    return root


def resolve_with(library, **env):
    """Runs RESOLVE in a Python that loads `library`; (returncode, stdout, stderr)."""
    e = sim_env("workstation-mixed", CUDA_VISIBLE_DEVICES="0,2", PYTHONPATH=os.path.join(SOURCE, "python"),
                GPUSEL_LIBRARY=library, PATH="/usr/bin:/bin", **env)
    r = subprocess.run([sys.executable, "-c", RESOLVE], capture_output=True, text=True, env=for_python(e),
                       timeout=60)
    return r.returncode, r.stdout, r.stderr


@unittest.skipUnless(PYTHON_LOADS_LIBRARIES, "a Python process cannot load the ThreadSanitizer build's library")
class LibraryFindsItsHelperTest(Case):
    def test_in_the_installations_libexec(self):
        root = layout({"lib/libgpusel.so.2": LIBRARY, "libexec/gpusel/gpusel-probe-cuda": HELPER})
        rc, out, err = resolve_with(os.path.join(root, "lib", "libgpusel.so.2"))
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out), [MIX[1]])

    def test_beside_the_library(self):  # a Python package's folder
        root = layout({"libgpusel.so.2": LIBRARY, "gpusel-probe-cuda": HELPER})
        rc, out, err = resolve_with(os.path.join(root, "libgpusel.so.2"))
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out), [MIX[1]])

    def test_without_a_helper_the_message_says_what_to_install(self):
        root = layout({"lib/libgpusel.so.2": LIBRARY})
        rc, out, err = resolve_with(os.path.join(root, "lib", "libgpusel.so.2"))
        self.assertNotEqual(rc, 0, out)
        self.assertIn("gpusel-probe-cuda", err)
        self.assertIn("GPUSEL_PROBE_HELPER", err)
        # Never a guess: nothing was printed as the answer.
        self.assertEqual(out, "")

    def test_probe_helper_variable_names_it(self):
        root = layout({"lib/libgpusel.so.2": LIBRARY})
        rc, out, err = resolve_with(os.path.join(root, "lib", "libgpusel.so.2"),
                                    GPUSEL_PROBE_HELPER=os.path.abspath(HELPER))
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out), [MIX[1]])


class HelperProgramTest(Case):
    def test_prints_what_cuda_enumerates(self):
        r = subprocess.run([HELPER], capture_output=True, text=True, timeout=60,
                           env=sim_env("workstation-mixed", CUDA_VISIBLE_DEVICES="2,0"))
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = [line.split("\t") for line in r.stdout.splitlines()]
        self.assertEqual([f[0] for f in lines], ["0", "1"])  # CUDA's ordinals, one a line
        self.assertTrue(all(len(f) == 9 for f in lines), lines)
        # FASTEST_FIRST: CUDA's 2 is the A4000 (index 0), its 0 the 4090 (index 1).
        self.assertEqual([f[2] for f in lines], [MIX[0], MIX[1]])

    def test_reports_a_cuda_failure_on_one_line(self):
        r = subprocess.run([HELPER], capture_output=True, text=True, timeout=60, env=sim_env("cuda-init-fails"))
        self.assertEqual(r.returncode, 1)
        self.assertTrue(r.stdout.startswith("error\t"), r.stdout)
        self.assertEqual(len(r.stdout.splitlines()), 1)

    def test_the_command_through_the_helper(self):
        # gpusel itself (statically linked) finds the same helper from its bin folder.
        r = gpusel("resolve", "--gpu", "0", env=sim_env("workstation-mixed", CUDA_VISIBLE_DEVICES="0,2"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), [MIX[1]])

    def test_the_command_has_no_probe_subcommand(self):
        r = subprocess.run([BIN, "internal-probe-cuda"], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2, r.stdout)


if __name__ == "__main__":
    unittest.main()
