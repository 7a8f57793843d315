"""`cmake --install` into a temporary prefix, and projects that use what it installed."""

import glob
import gzip
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from support import BIN, SOURCE, Case, base_env, uuids

BUILD = os.environ.get("GPUSEL_BUILD_DIR", "build")


def project_version():
    """The version's one definition: project(VERSION) in CMakeLists.txt."""
    with open(os.path.join(SOURCE, "CMakeLists.txt")) as f:
        return re.search(r"project\(gpusel\s+VERSION\s+([0-9]+\.[0-9]+\.[0-9]+)", f.read()).group(1)


class InstallTest(Case):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="gpusel-install-")
        cls.prefix = os.path.join(cls.tmp, "prefix")
        env = dict(os.environ)
        env.pop("DESTDIR", None)
        cls.install_log = subprocess.run(["cmake", "--install", BUILD, "--prefix", cls.prefix], check=True,
                                         capture_output=True, text=True, env=env).stdout

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def path(self, *parts):
        return os.path.join(self.prefix, *parts)

    def libdir(self):
        for d in ("lib", "lib64", "lib/x86_64-linux-gnu"):
            if os.path.exists(self.path(d, "libgpusel.so.2")):
                return self.path(d)
        self.fail("libgpusel.so.2 is not installed")

    def python_dir(self):
        """Where the Python package went: lib/python3.X/dist-packages, as docs/install.md documents."""
        found = glob.glob(self.path("lib", "python3*", "dist-packages", "gpusel", "__init__.py"))
        self.assertEqual(len(found), 1, found)
        return os.path.dirname(os.path.dirname(found[0]))

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
                    "libexec/gpusel/gpusel-probe-cuda",
                    "lib/gpusel/sim/libnvidia-ml.so.1", "lib/gpusel/sim/libcuda.so.1",
                    "lib/gpusel/sim/machines/dgx-h100.toml", "lib/gpusel/sim/nvml-no-v2/libnvidia-ml.so.1",
                    "share/bash-completion/completions/gpusel", "share/zsh/site-functions/_gpusel",
                    "share/fish/vendor_completions.d/gpusel.fish", "share/man/man1/gpusel.1.gz"):
            self.assertTrue(os.path.exists(self.path(rel)), rel)
        self.python_dir()
        for rel in ("libgpusel.a", "cmake/gpusel/gpuselConfig.cmake", "cmake/gpusel/gpuselConfigVersion.cmake",
                    "pkgconfig/gpusel.pc"):
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
        # The C++ API comes from libgpusel.a; the C program uses the shared library, the one binary
        # contract (docs/versioning.md).
        self.assertNotIn("libgpusel", needed_libraries(os.path.join(build, "consumer_cmake")))
        c_program = os.path.join(build, "consumer_cmake_c")
        self.assertIn("libgpusel.so.2", needed_libraries(c_program))
        r = subprocess.run([c_program, "5"], capture_output=True, text=True, env=env)
        self.assertEqual(r.stdout.splitlines()[0], f"version={project_version()} resolved=1 gpus={u[5]}", r.stderr)

    def test_cli11_consumer(self):
        # find_package(gpusel COMPONENTS cli11) and gpusel::cli11: CLI11 comes with the target.
        build = os.path.join(self.tmp, "consumer-cli11")
        r = subprocess.run(["cmake", "-S", os.path.join(SOURCE, "tests", "consumer", "cli11"), "-B", build, "-G",
                            "Ninja", f"-DCMAKE_PREFIX_PATH={self.prefix}"], capture_output=True, text=True,
                           env=base_env())
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        r = subprocess.run(["cmake", "--build", build], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        env = base_env()
        env["LD_LIBRARY_PATH"] = self.libdir()
        exe = os.path.join(build, "consumer_cli11")
        r = subprocess.run([exe, "--gpu", " 3, gpu-ab12 "], capture_output=True, text=True, env=env)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("mixes", r.stderr)
        r = subprocess.run([exe, "--gpu", " 3, ,1"], capture_output=True, text=True, env=env)
        self.assertEqual((r.returncode, r.stdout), (0, "gpus=3,1\n"), r.stderr)

    def test_pkg_config_paths_are_clean(self):
        env = base_env(PKG_CONFIG_PATH=os.path.join(self.libdir(), "pkgconfig"))
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "gpusel"], capture_output=True, text=True,
                               env=env, check=True).stdout.split()
        self.assertIn("-L" + self.libdir(), flags)
        self.assertIn("-I" + self.path("include"), flags)
        for f in flags:
            self.assertNotIn("/../", f)
            self.assertNotIn("//", f)

    def test_pkg_config_consumer(self):
        env = base_env(PKG_CONFIG_PATH=os.path.join(self.libdir(), "pkgconfig"))
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "gpusel"], capture_output=True, text=True,
                               env=env, check=True).stdout.split()
        exe = os.path.join(self.tmp, "consumer_pc")
        subprocess.run(["cc", os.path.join(SOURCE, "tests", "consumer", "consumer.c"), "-o", exe, *flags], check=True)
        # No LD_LIBRARY_PATH for libgpusel: the .pc file gives the program a run path.
        env = self.sim("single-l4")
        self.assertNotIn(self.libdir(), env["LD_LIBRARY_PATH"])
        r = subprocess.run([exe, "0"], capture_output=True, text=True, env=env)
        u = uuids("single-l4")[0]
        self.assertEqual(r.stdout.splitlines(), [f"version={project_version()} resolved=1 gpus={u}", f"0 0 {u} NVIDIA L4"], r.stderr)

    def test_version_in_one_place(self):
        version = project_version()
        major, minor, patch = version.split(".")
        with open(self.path("include", "gpusel", "version.h")) as f:
            header = f.read()
        self.assertIn(f'#define GPUSEL_VERSION_STRING "{version}"', header)
        self.assertIn(f"#define GPUSEL_VERSION_MAJOR {major}\n", header)
        self.assertIn(f"#define GPUSEL_VERSION_MINOR {minor}\n", header)
        self.assertIn(f"#define GPUSEL_VERSION_PATCH {patch}\n", header)
        r = subprocess.run([self.path("bin", "gpusel"), "--version"], capture_output=True, text=True, env=base_env())
        self.assertEqual(r.stdout.strip(), version)
        env = base_env(PKG_CONFIG_PATH=os.path.join(self.libdir(), "pkgconfig"))
        r = subprocess.run(["pkg-config", "--modversion", "gpusel"], capture_output=True, text=True, env=env)
        self.assertEqual(r.stdout.strip(), version)
        with open(os.path.join(self.libdir(), "cmake", "gpusel", "gpuselConfigVersion.cmake")) as f:
            self.assertIn(f'set(PACKAGE_VERSION "{version}")', f.read())
        with gzip.open(self.path("share", "man", "man1", "gpusel.1.gz"), "rt") as f:
            self.assertIn(f'"gpusel {version}"', f.readline())

    def test_installed_cli_needs_no_library_path(self):
        env = base_env()
        env.pop("LD_LIBRARY_PATH", None)
        r = subprocess.run([self.path("bin", "gpusel"), "--sim", "single-l4", "list", "--json"], capture_output=True,
                           text=True, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_python_dir_is_where_debian_python_looks(self):
        # The default prefix is /usr/local; Debian's python3 searches /usr/local/lib/python3.X/dist-packages
        # (and /usr/lib/python3.X/dist-packages for --prefix /usr), so `import gpusel` needs no PYTHONPATH.
        if not os.path.exists("/usr/bin/python3"):
            self.skipTest("no /usr/bin/python3 (not Debian's Python)")
        rel = os.path.relpath(self.python_dir(), self.prefix)
        path = subprocess.run(["/usr/bin/python3", "-c", "import sys; print('\\n'.join(sys.path))"], env={},
                              capture_output=True, text=True, check=True).stdout.splitlines()
        self.assertIn(os.path.join("/usr/local", rel), path)
        self.assertIn(os.path.join("/usr", rel), path)

    def test_python_finds_the_package_through_the_path_the_install_names(self):
        # An install to a prefix python3 does not search writes nothing outside it (no gpusel.pth):
        # it names the folder to put on PYTHONPATH (docs/python.md).
        self.assertIn(f"PYTHONPATH={self.python_dir()}", self.install_log)
        env = self.sim("dgx-h100")
        for key in ("GPUSEL_LIBRARY", "LD_LIBRARY_PATH"):
            env.pop(key, None)
        env["PYTHONPATH"] = self.python_dir()
        r = subprocess.run(["/usr/bin/python3", "-c", "import gpusel; print(gpusel.__file__); "
                            "print(gpusel.resolve_gpu_uuids(['3']))"], capture_output=True, text=True, env=env, cwd=self.tmp)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertTrue(lines[0].startswith(self.prefix), lines[0])
        self.assertEqual(lines[1], repr((uuids("dgx-h100")[3],)))

    def test_pkg_config_static_consumer(self):
        # `pkg-config --static` names what libgpusel.a needs (the C++ runtime, libm, libdl, threads):
        # a C program links it statically and runs without libgpusel.so.2.
        env = base_env(PKG_CONFIG_PATH=os.path.join(self.libdir(), "pkgconfig"))
        cflags = subprocess.run(["pkg-config", "--cflags", "gpusel"], capture_output=True, text=True, env=env,
                                check=True).stdout.split()
        libs = subprocess.run(["pkg-config", "--static", "--libs", "gpusel"], capture_output=True, text=True, env=env,
                              check=True).stdout.split()
        exe = os.path.join(self.tmp, "consumer_static")
        r = subprocess.run(["cc", os.path.join(SOURCE, "tests", "consumer", "consumer.c"), "-o", exe, *cflags,
                            "-Wl,-Bstatic", *libs, "-Wl,-Bdynamic"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, f"{libs}: " + r.stderr[-3000:])
        needed = subprocess.run(["readelf", "-d", exe], capture_output=True, text=True, check=True).stdout
        self.assertNotIn("libgpusel", needed)
        r = subprocess.run([exe, "0"], capture_output=True, text=True, env=self.sim("single-l4"))
        u = uuids("single-l4")[0]
        self.assertEqual(r.stdout.splitlines(), [f"version={project_version()} resolved=1 gpus={u}", f"0 0 {u} NVIDIA L4"],
                         r.stderr)

    def test_installed_python_module(self):
        # The documented folder only: the package finds libgpusel from its own install location.
        env = self.sim("dgx-h100")
        env.pop("GPUSEL_LIBRARY", None)
        env["PYTHONPATH"] = self.python_dir()
        r = subprocess.run(["python3", "-c", "import gpusel; print(gpusel.library_path); print(gpusel.resolve_gpu_uuids(['3']))"],
                           capture_output=True, text=True, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertTrue(lines[0].startswith(self.prefix), lines[0])
        self.assertEqual(lines[1], repr((uuids("dgx-h100")[3],)))


def needed_libraries(program):
    """The NEEDED entries of PROGRAM's dynamic section."""
    out = subprocess.run(["readelf", "-d", program], capture_output=True, text=True, check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^]]+)\]", out)


def written_files(root):
    """Every file and link under root (not folders), as absolute paths."""
    found = set()
    for folder, dirs, files in os.walk(root):
        found.update(os.path.join(folder, name) for name in files)
        found.update(os.path.join(folder, name) for name in dirs if os.path.islink(os.path.join(folder, name)))
    return found


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("unshare"), "needs root and unshare (a private mount namespace)")
class ConfinedInstallTest(Case):
    """`cmake --install` as root writes inside its prefix (or DESTDIR) only, and lists every file it
    wrote in install_manifest.txt. Run in a private mount namespace where /usr/local is an empty
    tmpfs, with a throwaway HOME: anything written there is outside the prefix."""

    def install(self, prefix, destdir=None):
        tmp = tempfile.mkdtemp(prefix="gpusel-confined-")
        self.addCleanup(shutil.rmtree, tmp, True)
        home = os.path.join(tmp, "home")
        os.makedirs(home)
        report = os.path.join(tmp, "outside.txt")
        script = ('mount --make-rprivate / && mount -t tmpfs gpusel-test /usr/local && '
                  'cmake --install "$1" --prefix "$2" && find /usr/local "$HOME" -mindepth 1 > "$3"')
        env = dict(os.environ, HOME=home)
        env.pop("DESTDIR", None)
        if destdir:
            env["DESTDIR"] = os.path.join(tmp, destdir)
        prefix = prefix if prefix.startswith("/") else os.path.join(tmp, prefix)
        r = subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", os.path.abspath(BUILD), prefix, report],
                           capture_output=True, text=True, env=env, timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(report) as f:
            outside = f.read().split()
        with open(os.path.join(BUILD, "install_manifest.txt")) as f:
            manifest = set(f.read().split("\n")) - {""}
        stage = env.get("DESTDIR", "")
        manifest = {path[len(stage):] if stage and path.startswith(stage + "/") else path for path in manifest}
        written = {path[len(stage):] for path in written_files(stage + prefix)}
        return prefix, outside, manifest, written

    def test_prefix_install_stays_in_its_prefix(self):
        prefix, outside, manifest, written = self.install("opt-gpusel")
        self.assertEqual(outside, [], "written outside the prefix")
        self.assertEqual(sorted(written - manifest), [], "installed but missing from install_manifest.txt")
        self.assertEqual(sorted(manifest - written), [], "in install_manifest.txt but not installed")
        self.assertTrue(all(path.startswith(prefix + "/") for path in manifest))

    def test_destdir_install_stays_in_destdir(self):
        prefix, outside, manifest, written = self.install("/usr", destdir="stage")
        self.assertEqual(outside, [], "written outside DESTDIR")
        self.assertEqual(sorted(written - manifest), [], "installed but missing from install_manifest.txt")
        self.assertEqual(sorted(manifest - written), [], "in install_manifest.txt but not installed")
        # Under /usr, Debian's folders: the multiarch library folder and python3/dist-packages.
        self.assertIn("/usr/lib/x86_64-linux-gnu/libgpusel.so.2", manifest)
        self.assertIn("/usr/lib/python3/dist-packages/gpusel/__init__.py", manifest)


class WheelTest(Case):
    """The project's wheel (cmake --build BUILD --target wheel), installed offline with pip: it carries the
    library and the probe helper, which the library finds beside itself."""

    def test_wheel(self):
        if not os.path.exists("/usr/bin/python3") or subprocess.run(
                ["/usr/bin/python3", "-c", "import setuptools, wheel, pip"], capture_output=True).returncode != 0:
            self.skipTest("no Debian python3 with pip, setuptools and wheel")
        r = subprocess.run(["cmake", "--build", BUILD, "--target", "wheel"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        wheels = glob.glob(os.path.join(BUILD, "python-dist", "gpusel-*.whl"))
        self.assertEqual(len(wheels), 1, wheels)
        self.assertTrue(os.path.basename(wheels[0]).endswith(f"{project_version()}-py3-none-linux_x86_64.whl"),
                        wheels[0])
        with tempfile.TemporaryDirectory(prefix="gpusel-wheel-") as tmp:
            target = os.path.join(tmp, "site")
            r = subprocess.run(["/usr/bin/python3", "-m", "pip", "install", "--no-index", "--no-deps",
                                "--disable-pip-version-check", "--target", target, wheels[0]],
                               capture_output=True, text=True, env=base_env())
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            for rel in ("gpusel/__init__.py", "gpusel/libgpusel.so.2", "gpusel/gpusel-probe-cuda"):
                self.assertTrue(os.path.isfile(os.path.join(target, rel)), rel)
            # A mixed machine under FASTEST_FIRST with an integer preset: only CUDA can place "0",
            # through the probe helper the wheel carries.
            env = base_env(PYTHONPATH=target, GPUSEL_LIBRARY=None, GPUSEL_PROBE_HELPER=None)
            sim = subprocess.run([BIN, "sim", "env", "workstation-mixed"],
                                 capture_output=True, text=True, env=env, check=True).stdout
            for line in sim.splitlines():
                key, _, value = line[len("export "):].partition("=")
                env[key] = value.strip("'")
            env["CUDA_VISIBLE_DEVICES"] = "0,2"
            r = subprocess.run(["/usr/bin/python3", "-c", "import gpusel; print(gpusel.library_path); "
                                "print(gpusel.resolve_gpu_uuids(['0']))"], capture_output=True, text=True, env=env,
                               cwd=tmp)
            self.assertEqual(r.returncode, 0, r.stderr)
            lines = r.stdout.splitlines()
            self.assertEqual(lines[0], os.path.join(target, "gpusel", "libgpusel.so.2"))
            self.assertEqual(lines[1], repr((uuids("workstation-mixed")[1],)))


class PipInstallTest(Case):
    """`pip install ./python`, offline, with the system's setuptools: the package bundles libgpusel."""

    def pip_python(self):
        for python in ("/usr/bin/python3", sys.executable):
            probe = subprocess.run([python, "-c", "import setuptools, wheel, pip"], capture_output=True)
            if probe.returncode == 0:
                return python
        self.skipTest("no Python with pip, setuptools and wheel (Debian: python3-pip, python3-setuptools, "
                      "python3-wheel)")

    def test_pip_install_offline(self):
        python = self.pip_python()
        lib = os.environ.get("GPUSEL_LIBRARY_FILE", os.path.join(BUILD, "lib", "libgpusel.so"))
        with tempfile.TemporaryDirectory(prefix="gpusel-pip-") as tmp:
            source = os.path.join(tmp, "python")  # a copy: pip's build leaves files beside setup.py
            shutil.copytree(os.path.join(SOURCE, "python"), source,
                            ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
            target = os.path.join(tmp, "site")
            r = subprocess.run([python, "-m", "pip", "install", "--no-build-isolation", "--no-index", "--no-deps",
                                "--disable-pip-version-check", "--target", target, source],
                               capture_output=True, text=True, env=base_env(GPUSEL_LIBRARY=lib))
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertTrue(os.path.exists(os.path.join(target, "gpusel", "libgpusel.so.2")))
            env = base_env(PYTHONPATH=target, GPUSEL_LIBRARY=None, LD_LIBRARY_PATH=None)
            r = subprocess.run([python, "-c", "import gpusel; print(gpusel.library_path); "
                                "print(gpusel.parse_gpu_spec('0, 1')); import importlib.metadata as m; "
                                "print(m.version('gpusel'), gpusel.__version__)"], capture_output=True, text=True,
                               env=env, cwd=tmp)
            self.assertEqual(r.returncode, 0, r.stderr)
            lines = r.stdout.splitlines()
            self.assertEqual(lines[0], os.path.join(target, "gpusel", "libgpusel.so.2"))
            self.assertEqual(lines[1], "('0', '1')")
            # The package's version is the library's, which is project(VERSION)'s.
            self.assertEqual(lines[2], f"{project_version()} {project_version()}")
            self.assertTrue(os.path.exists(os.path.join(target, "gpusel", "gpusel-probe-cuda")))

    def test_unbuilt_tree_is_refused(self):
        python = self.pip_python()
        with tempfile.TemporaryDirectory(prefix="gpusel-pip-") as tmp:
            # A source tree with no build folder beside python/.
            shutil.copytree(os.path.join(SOURCE, "python"), os.path.join(tmp, "src", "python"),
                            ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
            shutil.copy(os.path.join(SOURCE, "CMakeLists.txt"), os.path.join(tmp, "src"))
            target = os.path.join(tmp, "site")
            r = subprocess.run([python, "-m", "pip", "install", "--no-build-isolation", "--no-index", "--no-deps",
                                "--disable-pip-version-check", "--target", target, os.path.join(tmp, "src", "python")],
                               capture_output=True, text=True, env=base_env(GPUSEL_LIBRARY=None, GPUSEL_PROBE_HELPER=None))
            self.assertNotEqual(r.returncode, 0, r.stdout)
            self.assertIn("needs a built libgpusel.so.2", r.stdout + r.stderr)
            self.assertNotIn("Successfully installed", r.stdout)
            self.assertFalse(os.path.exists(os.path.join(target, "gpusel")))


if __name__ == "__main__":
    unittest.main()
