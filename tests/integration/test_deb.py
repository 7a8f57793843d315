"""The Debian packages: cpack makes them from the build folder (libgpusel2, libgpusel-dev, gpusel,
python3-gpusel), lintian finds no error or warning in them, `apt-get install ./*.deb` installs them
into a fresh Debian 12 (a chroot made by debootstrap), where the command, the simulator, the man
page, the completions, the Python module and the pkg-config and CMake files are in place and work,
and `apt-get remove --purge` leaves nothing of them behind.

Needs root (chroot, mount), cpack and debootstrap; skipped otherwise (run through `launchers.py run`,
which exits 77 when every test was skipped). The fresh Debian 12 (minbase, with python3 and
pkg-config) is made once, from deb.debian.org, and kept in the build folder as a tarball
(deb-test/debian12.tar, about 230 MB); later runs unpack it in a few seconds.
"""

import glob
import os
import shutil
import subprocess
import tempfile
import unittest

from support import Case, private_dir, uuids

BUILD = os.environ.get("GPUSEL_BUILD_DIR", "build")
CACHE = os.path.join(BUILD, "deb-test")
BASE = os.path.join(CACHE, "debian12.tar")
MIRROR = os.environ.get("GPUSEL_DEBIAN_MIRROR", "http://deb.debian.org/debian")
SOURCE = os.environ.get("GPUSEL_SOURCE_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
# What making the package and its test need beyond the build: cpack's DEB generator runs
# dpkg-shlibdeps and, before it, `file` (without it cpack stops: "file utility is not available").
PACKAGING_TOOLS = ("cpack", "dpkg-shlibdeps", "file", "debootstrap", "lintian")
# The packages cpack makes (cmake/package.cmake), one per install component.
PACKAGES = ("libgpusel2", "libgpusel-dev", "gpusel", "python3-gpusel")
MULTIARCH = "/usr/lib/x86_64-linux-gnu"


def missing():
    if os.geteuid() != 0:
        return "needs root (chroot and mount)"
    for tool in PACKAGING_TOOLS + ("chroot",):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (scripts/install-deps installs it)"
    if not os.path.exists(os.path.join(BUILD, "CPackConfig.cmake")):
        return f"no CPackConfig.cmake in {BUILD}"
    return None


def base_tarball():
    """The fresh Debian 12, made once and kept in the build folder."""
    if os.path.exists(BASE):
        return BASE
    os.makedirs(CACHE, exist_ok=True)
    work = tempfile.mkdtemp(prefix="debootstrap-", dir=CACHE)
    try:
        r = subprocess.run(["debootstrap", "--variant=minbase", "--include=python3,pkg-config", "bookworm",
                            os.path.join(work, "root"), MIRROR], capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            raise unittest.SkipTest(f"debootstrap could not make a Debian 12 from {MIRROR}: "
                                    f"{(r.stdout + r.stderr)[-500:]}")
        subprocess.run(["tar", "-C", os.path.join(work, "root"), "-cf", BASE + ".part", "."], check=True)
        os.replace(BASE + ".part", BASE)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return BASE


class PackagingToolsTest(Case):
    def test_install_deps_installs_every_packaging_tool(self):
        # A fresh Debian 12 has none of these: scripts/install-deps must name the package of each,
        # or `cpack` fails there although it works on a machine that happens to have the tool.
        r = subprocess.run([os.path.join(SOURCE, "scripts", "install-deps"), "--list"], capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        listed = set(r.stdout.split())
        checked = 0
        for tool in PACKAGING_TOOLS:
            path = shutil.which(tool)
            if path is None:
                continue
            owner = subprocess.run(["dpkg-query", "-S", os.path.realpath(path)], capture_output=True, text=True)
            if owner.returncode != 0:  # usrmerge: the package may list the /bin path
                owner = subprocess.run(["dpkg-query", "-S", path], capture_output=True, text=True)
            if owner.returncode != 0:
                continue  # not from a Debian package here: nothing to compare with
            package = owner.stdout.split(":")[0]
            with self.subTest(tool=tool):
                self.assertIn(package, listed, f"{tool} comes from {package}, which scripts/install-deps does not install")
            checked += 1
        if checked == 0:
            self.skipTest("none of the packaging tools is installed from a Debian package here")


@unittest.skipIf(missing(), missing())
class DebianPackageTest(Case):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="gpusel-deb-")
        cls.root = os.path.join(cls.tmp, "root")
        cls.proc = None
        try:
            r = subprocess.run(["cpack", "-G", "DEB", "-B", os.path.join(cls.tmp, "pkg"), "--config",
                                os.path.join(BUILD, "CPackConfig.cmake")], capture_output=True, text=True, timeout=600)
            if r.returncode != 0:
                raise AssertionError("cpack failed:\n" + r.stdout + r.stderr)
            cls.debs = sorted(glob.glob(os.path.join(cls.tmp, "pkg", "*.deb")))
            made = sorted(os.path.basename(d).split("_")[0] for d in cls.debs)
            if made != sorted(PACKAGES):
                raise AssertionError(f"cpack made {cls.debs}, not one package each of {PACKAGES}")
            base = base_tarball()
            os.makedirs(cls.root)
            subprocess.run(["tar", "-C", cls.root, "-xf", base], check=True)
            for deb in cls.debs:
                shutil.copy(deb, os.path.join(cls.root, "tmp"))
            cls.proc = os.path.join(cls.root, "proc")
            subprocess.run(["mount", "-t", "proc", "proc", cls.proc], check=True)
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.proc:
            subprocess.run(["umount", "-l", cls.proc])
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def chroot(self, *command, check=True):
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root", "LANG": "C.UTF-8",
               "DEBIAN_FRONTEND": "noninteractive"}
        r = subprocess.run(["chroot", self.root, *command], capture_output=True, text=True, env=env, timeout=300)
        if check:
            self.assertEqual(r.returncode, 0, f"{' '.join(command)}:\n{r.stdout}{r.stderr}")
        return r

    def test_lintian_is_clean(self):
        # What a Debian maintainer checks first: no error and no warning (lintian's own profile).
        # (Its temporary files in this test's own folder, not the machine's /tmp, which it left them in.)
        r = subprocess.run(["lintian", "--tag-display-limit", "0", "--fail-on", "error,warning", *self.debs],
                           capture_output=True, text=True, timeout=600,
                           env=dict(os.environ, TMPDIR=private_dir("lintian-")))
        tags = [line for line in r.stdout.splitlines() if line[:2] in ("E:", "W:")]
        self.assertEqual(tags, [], r.stdout + r.stderr)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_package_contents(self):
        # Split as Debian splits a library; the shlibs file and the ldconfig trigger in libgpusel2.
        def contents(package):
            deb = [d for d in self.debs if os.path.basename(d).startswith(package + "_")][0]
            return subprocess.run(["dpkg-deb", "--contents", deb], capture_output=True, text=True,
                                  check=True).stdout
        lib = [d for d in self.debs if os.path.basename(d).startswith("libgpusel2_")][0]
        control = os.path.join(self.tmp, "control")
        subprocess.run(["dpkg-deb", "--control", lib, control], check=True)
        with open(os.path.join(control, "shlibs")) as f:
            self.assertIn("libgpusel 2 libgpusel2", f.read())
        with open(os.path.join(control, "triggers")) as f:
            self.assertIn("ldconfig", f.read())
        self.assertIn("." + MULTIARCH + "/libgpusel.so.2", contents("libgpusel2"))
        self.assertNotIn("libgpusel.so ", contents("libgpusel2"))
        self.assertIn("." + MULTIARCH + "/libgpusel.so ->", contents("libgpusel-dev"))
        self.assertIn("./usr/lib/python3/dist-packages/gpusel/__init__.py", contents("python3-gpusel"))
        self.assertIn("./usr/share/man/man1/gpusel.1.gz", contents("gpusel"))

    def test_install_use_and_remove(self):
        debs = ["/tmp/" + os.path.basename(d) for d in self.debs]
        info = self.chroot("dpkg-deb", "--field", [d for d in debs if "/gpusel_" in d][0], "Package", "Depends").stdout
        self.assertIn("Package: gpusel", info)
        self.assertIn("libc6", info)
        # Installed as a user would: apt resolves the Depends (all in a fresh Debian 12 already).
        r = self.chroot("apt-get", "install", "-y", "--no-install-recommends", *debs)
        # No driver here: the post-install makes no lease store (it would cover no GPU) and says so.
        self.assertIn("no NVIDIA GPU found", r.stderr)
        self.assertIn("gpusel setup", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.root, "var/lib/gpusel")))
        files = []
        for package in PACKAGES:
            files += [f for f in self.chroot("dpkg", "-L", package).stdout.splitlines() if f.strip()]
        for path in ("/usr/bin/gpusel", MULTIARCH + "/libgpusel.so.2", MULTIARCH + "/libgpusel.so",
                     MULTIARCH + "/libgpusel.a", "/usr/include/gpusel/gpusel.h",
                     "/usr/libexec/gpusel/gpusel-probe-cuda",
                     "/usr/lib/gpusel/sim/libcuda.so.1", "/usr/lib/gpusel/sim/machines/dgx-h100.toml",
                     "/usr/lib/gpusel/sim/no-nvml/libcuda.so.1",
                     "/usr/share/man/man1/gpusel.1.gz", "/usr/share/bash-completion/completions/gpusel",
                     "/usr/share/zsh/vendor-completions/_gpusel", "/usr/share/fish/vendor_completions.d/gpusel.fish",
                     MULTIARCH + "/pkgconfig/gpusel.pc", MULTIARCH + "/cmake/gpusel/gpuselConfig.cmake",
                     "/usr/lib/python3/dist-packages/gpusel/__init__.py",
                     "/usr/share/doc/libgpusel2/copyright", "/usr/share/doc/gpusel/changelog.gz"):
            with self.subTest(path=path):
                self.assertIn(path, files)

        # The command and its simulator.
        out = self.chroot("gpusel", "--sim", "dgx-h100", "resolve", "--gpu", "3").stdout
        self.assertEqual(out.split(), [uuids("dgx-h100")[3]])
        self.chroot("gpusel", "--sim", "dgx-h100", "run", "--quiet", "--gpu", "free:2", "--", "gpusel", "bind")
        # The Python module, found without PYTHONPATH, with its library and probe helper.
        code = "import gpusel; print(gpusel.library_path); print(','.join(gpusel.resolve_gpu_uuids(['0'])))"
        r = self.chroot("gpusel", "--sim", "workstation-mixed", "--", "env", "CUDA_VISIBLE_DEVICES=0,2", "python3", "-c",
                        code)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0], MULTIARCH + "/libgpusel.so.2")
        self.assertEqual(lines[1], uuids("workstation-mixed")[1])  # placed by asking CUDA, through the library's helper
        # pkg-config names /usr, with no run path (the library is where the loader looks).
        flags = self.chroot("pkg-config", "--cflags", "--libs", "gpusel").stdout.split()
        self.assertIn("-lgpusel", flags)
        self.assertFalse([f for f in flags if "rpath" in f], flags)
        self.assertEqual(self.chroot("pkg-config", "--variable=prefix", "gpusel").stdout.strip(), "/usr")
        # The CMake files name installed files only.
        targets = glob.glob(os.path.join(self.root, MULTIARCH.lstrip("/"), "cmake/gpusel/gpuselTargets-*.cmake"))
        self.assertTrue(targets)
        for t in targets:
            with open(t) as f:
                for word in f.read().split('"'):
                    if word.startswith("${_IMPORT_PREFIX}/"):
                        self.assertTrue(os.path.exists(os.path.join(self.root, "usr", word[len("${_IMPORT_PREFIX}/"):])),
                                        word)
        # No gpusel.pth anywhere: the package's module is where python3 looks already.
        self.assertEqual(glob.glob(os.path.join(self.root, "usr/local/lib/python3*/dist-packages/gpusel.pth")), [])

        # Removed, nothing is left: no file of the packages, nothing named gpusel outside /tmp and
        # /root (root's own lease store, made by the `run` above where no shared store is set up, is
        # the user's: purging a package never touches home folders).
        self.chroot("apt-get", "remove", "--purge", "-y", *PACKAGES)
        left = [f for f in files if os.path.isfile(os.path.join(self.root, f.lstrip("/")))]
        self.assertEqual(left, [])
        found = self.chroot("find", "/", "-xdev", "-name", "*gpusel*", "-not", "-path", "/tmp/*",
                            "-not", "-path", "/proc/*", "-not", "-path", "/root/.local/state/*").stdout.split()
        self.assertEqual(found, [])


if __name__ == "__main__":
    unittest.main()
