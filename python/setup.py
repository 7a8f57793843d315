"""Builds the gpusel package for pip: gpusel/__init__.py with libgpusel.so.2 and its probe helper
beside it (gpusel-probe-cuda, the program libgpusel runs to ask CUDA for its device order where
NVML cannot tell it; the library finds it there by its own location).

Where the built files come from:
- GPUSEL_LIBRARY: the path of libgpusel.so.2 (or libgpusel.so), and GPUSEL_PROBE_HELPER the path of
  the helper (default: libexec/gpusel/gpusel-probe-cuda beside the library's lib/ folder);
- else the source tree's build folders, the first of ../build, ../build-product that holds both.

An unbuilt tree is refused with a message: a package without its library would install and then
fail on import.
"""

import ctypes
import os
import re
import shutil
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:  # no wheel package: pip then installs without building a wheel
    bdist_wheel = None

HERE = os.path.dirname(os.path.abspath(__file__))
HELPER = "gpusel-probe-cuda"
BUILDS = ("build", "build-product")


def refuse(message):
    sys.stderr.write("gpusel: " + message + "\n")
    raise SystemExit(1)


def built_files():
    """(library, helper) paths, or refuse with what to do."""
    explicit = os.environ.get("GPUSEL_LIBRARY")
    if explicit:
        if not os.path.isfile(explicit):
            refuse(f"GPUSEL_LIBRARY={explicit!r} is not a file; point it at the libgpusel.so.2 a build made")
        helper = os.environ.get("GPUSEL_PROBE_HELPER") or os.path.join(
            os.path.dirname(os.path.dirname(os.path.abspath(explicit))), "libexec", "gpusel", HELPER)
        if not os.path.isfile(helper):
            refuse(f"no probe helper at {helper!r} to bundle; set GPUSEL_PROBE_HELPER to the {HELPER} a "
                   "build made")
        return explicit, helper
    for build in BUILDS:
        root = os.path.join(HERE, "..", build)
        lib = os.path.join(root, "lib", "libgpusel.so.2")
        helper = os.path.join(root, "libexec", "gpusel", HELPER)
        if os.path.isfile(lib) and os.path.isfile(helper):
            return lib, helper
    refuse(f"the package needs a built libgpusel.so.2 and {HELPER}, and this source tree has neither "
           f"({', '.join('../' + b for b in BUILDS)} hold no build). Build gpusel first "
           "(scripts/quickstart, or cmake --preset product && cmake --build --preset product), "
           "or set GPUSEL_LIBRARY and GPUSEL_PROBE_HELPER to the files of a build")


def version():
    """The version's one definition is project(VERSION) in CMakeLists.txt; a copy of this folder
    without the source tree asks the library it bundles."""
    cmake = os.path.join(HERE, "..", "CMakeLists.txt")
    if os.path.isfile(cmake):
        with open(cmake) as f:
            m = re.search(r"project\(gpusel\s+VERSION\s+([0-9.]+)", f.read())
        if m:
            return m.group(1)
    lib, _ = built_files()
    try:
        fn = ctypes.CDLL(os.path.realpath(lib)).gpusel_version
        fn.restype = ctypes.c_char_p
        return fn().decode()
    except OSError as exc:
        refuse(f"cannot read the version from {lib}: {exc}")


class BuildWithLibrary(build_py):
    """Copies the library and the probe helper into the package."""

    def run(self):
        lib, helper = built_files()
        super().run()
        package = os.path.join(self.build_lib, "gpusel")
        target = os.path.join(package, "libgpusel.so.2")
        shutil.copyfile(os.path.realpath(lib), target)
        os.chmod(target, 0o755)
        target = os.path.join(package, HELPER)
        shutil.copyfile(os.path.realpath(helper), target)
        os.chmod(target, 0o755)


commands = {"build_py": BuildWithLibrary}
if bdist_wheel is not None:
    class PlatformWheel(bdist_wheel):
        """The package holds native files (for this platform) but no extension module: any Python 3
        on linux_x86_64, not one CPython version."""

        def finalize_options(self):
            super().finalize_options()
            self.root_is_pure = False

        def get_tag(self):
            _, _, platform = super().get_tag()
            return "py3", "none", platform

    commands["bdist_wheel"] = PlatformWheel

setup(version=version(), cmdclass=commands)
