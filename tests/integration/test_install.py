"""`cmake --install` into a temporary prefix, and projects that use what it installed."""

import os
import shutil
import subprocess
import tempfile
import unittest

from support import SOURCE, Case, base_env, uuids

BUILD = os.environ.get("GPUSEL_BUILD_DIR", "build")


class InstallTest(Case):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="gpusel-install-")
        cls.prefix = os.path.join(cls.tmp, "prefix")
        subprocess.run(["cmake", "--install", BUILD, "--prefix", cls.prefix], check=True, capture_output=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def path(self, *parts):
        return os.path.join(self.prefix, *parts)

    def libdir(self):
        for d in ("lib", "lib64", "lib/x86_64-linux-gnu"):
            if os.path.exists(self.path(d, "libgpusel.so.0")):
                return self.path(d)
        self.fail("libgpusel.so.0 is not installed")

    def sim(self, machine_name):
        out = subprocess.run([self.path("bin", "gpusel"), "sim", "env", machine_name], capture_output=True, text=True,
                             env=base_env(), check=True).stdout
        env = base_env()
        for line in out.splitlines():
            if line.startswith("export "):
                key, _, value = line[7:].partition("=")
                env[key] = value.strip("'")
        return env

    def test_layout(self):
        lib = self.libdir()
        for rel in ("include/gpusel/gpusel.h", "include/gpusel/worker.hpp", "bin/gpusel",
                    "lib/gpusel/sim/libnvidia-ml.so.1", "lib/gpusel/sim/libcuda.so.1",
                    "lib/gpusel/sim/machines/dgx-h100.toml", "lib/gpusel/sim/nvml-no-v2/libnvidia-ml.so.1",
                    "share/bash-completion/completions/gpusel", "share/zsh/site-functions/_gpusel",
                    "share/man/man1/gpusel.1"):
            self.assertTrue(os.path.exists(self.path(rel)), rel)
        for rel in ("libgpusel.a", "cmake/gpusel/gpuselConfig.cmake", "cmake/gpusel/gpuselConfigVersion.cmake",
                    "pkgconfig/gpusel.pc", "python3/dist-packages/gpusel/__init__.py"):
            self.assertTrue(os.path.exists(os.path.join(lib, rel)), rel)
        # The simulator is never where the loader looks by default.
        self.assertFalse(os.path.exists(os.path.join(lib, "libcuda.so.1")))

    def test_installed_cli_finds_its_simulator(self):
        r = subprocess.run([self.path("bin", "gpusel"), "--sim", "dgx-h100", "resolve", "--gpu", "2"],
                           capture_output=True, text=True, env=base_env())
        self.assertEqual(r.stdout.split(), [uuids("dgx-h100")[2]], r.stderr)
        r = subprocess.run(["bash", "-n", self.path("share/bash-completion/completions/gpusel")])
        self.assertEqual(r.returncode, 0)

    def test_find_package_consumer(self):
        build = os.path.join(self.tmp, "consumer-cmake")
        subprocess.run(["cmake", "-S", os.path.join(SOURCE, "tests", "consumer"), "-B", build, "-G", "Ninja",
                        f"-DCMAKE_PREFIX_PATH={self.prefix}"], check=True, capture_output=True, env=base_env())
        subprocess.run(["cmake", "--build", build], check=True, capture_output=True)
        env = self.sim("dgx-h100")
        env["LD_LIBRARY_PATH"] = self.libdir() + ":" + env["LD_LIBRARY_PATH"]
        r = subprocess.run([os.path.join(build, "consumer_cmake"), "5,1"], capture_output=True, text=True, env=env)
        u = uuids("dgx-h100")
        self.assertEqual(r.stdout.splitlines(), [f"resolved=1 gpus={u[5]},{u[1]}", "nvml gpus=8"], r.stderr)

    def test_pkg_config_consumer(self):
        env = base_env(PKG_CONFIG_PATH=os.path.join(self.libdir(), "pkgconfig"))
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "gpusel"], capture_output=True, text=True,
                               env=env, check=True).stdout.split()
        exe = os.path.join(self.tmp, "consumer_pc")
        subprocess.run(["cc", os.path.join(SOURCE, "tests", "consumer", "consumer.c"), "-o", exe, *flags], check=True)
        env = self.sim("single-l4")
        env["LD_LIBRARY_PATH"] = self.libdir() + ":" + env["LD_LIBRARY_PATH"]
        r = subprocess.run([exe, "0"], capture_output=True, text=True, env=env)
        u = uuids("single-l4")[0]
        self.assertEqual(r.stdout.splitlines(), [f"version=0.1.0 resolved=1 gpus={u}", f"0 0 {u} NVIDIA L4"], r.stderr)

    def test_installed_python_module(self):
        env = self.sim("dgx-h100")
        env["PYTHONPATH"] = os.path.join(self.libdir(), "python3", "dist-packages")
        r = subprocess.run(["python3", "-c", "import gpusel; print(gpusel.library_path); print(gpusel.resolve_gpu_uuids(['3']))"],
                           capture_output=True, text=True, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertTrue(lines[0].startswith(self.prefix), lines[0])
        self.assertEqual(lines[1], repr((uuids("dgx-h100")[3],)))


if __name__ == "__main__":
    unittest.main()
