"""`gpusel setup` where no GPU is found (no NVIDIA driver yet, as when the Debian package's
post-install runs before the driver is installed): it makes no store, which would cover no GPU,
and says how to run it later (issue 33)."""

import os
import subprocess
import tempfile
import unittest

from support import BIN, Case, sim_env


class SetupWithoutGpuTest(Case):
    def setup_on(self, machine):
        with tempfile.TemporaryDirectory(prefix="gpusel-setup-") as tmp:
            store = os.path.join(tmp, "var", "gpusel", "leases")
            r = subprocess.run([BIN, "--sim", machine, "setup", "--lease-dir", store], capture_output=True,
                               text=True, env=sim_env(machine), timeout=60)
            return r, os.listdir(tmp)

    def test_no_store_without_nvml(self):
        r, made = self.setup_on("nvml-missing")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertEqual(made, [], "a store covering no GPU was made")
        self.assertIn("no NVIDIA GPU found", r.stderr)
        self.assertIn("NVML is unavailable", r.stderr)
        self.assertIn("was not set up", r.stderr)
        self.assertIn("sudo gpusel setup", r.stderr)
        self.assertNotIn("is ready", r.stdout)

    def test_store_for_the_gpus_found(self):
        # The same command on a machine with GPUs sets the store up (as root: the test runs as root).
        if os.geteuid() != 0:
            self.skipTest("gpusel setup needs root")
        r, made = self.setup_on("single-l4")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("ready for 1 GPU", r.stdout)
        self.assertEqual(made, ["var"])


if __name__ == "__main__":
    unittest.main()
