"""Builds the gpusel package for pip, bundling libgpusel.so.0 beside gpusel/__init__.py.

The library comes from GPUSEL_LIBRARY (its path) when set, else from the source tree's build
folder (../build/lib/libgpusel.so.0). Without either, the package is built without it and looks
for an installed libgpusel at import time (see gpusel/__init__.py).
"""

import ctypes
import os
import re
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def library():
    explicit = os.environ.get("GPUSEL_LIBRARY")
    if explicit:
        if not os.path.isfile(explicit):
            raise SystemExit(f"gpusel: GPUSEL_LIBRARY={explicit!r} is not a file; point it at libgpusel.so.0")
        return explicit
    built = os.path.join(HERE, "..", "build", "lib", "libgpusel.so.0")
    return built if os.path.isfile(built) else None


def version():
    """The version's one definition is project(VERSION) in CMakeLists.txt; a copy of this folder
    without the source tree asks the library it bundles."""
    cmake = os.path.join(HERE, "..", "CMakeLists.txt")
    if os.path.isfile(cmake):
        with open(cmake) as f:
            m = re.search(r"project\(gpusel\s+VERSION\s+([0-9.]+)", f.read())
        if m:
            return m.group(1)
    lib = library()
    if lib is not None:
        try:
            fn = ctypes.CDLL(os.path.realpath(lib)).gpusel_version
            fn.restype = ctypes.c_char_p
            return fn().decode()
        except OSError:
            pass
    raise SystemExit("gpusel: cannot tell the version: no ../CMakeLists.txt and no libgpusel.so.0 "
                     "(set GPUSEL_LIBRARY)")


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        lib = library()
        if lib is None:
            print("gpusel: no libgpusel.so.0 to bundle (set GPUSEL_LIBRARY, or build the project "
                  "first); the package will look for an installed one when imported")
            return
        target = os.path.join(self.build_lib, "gpusel", "libgpusel.so.0")
        shutil.copyfile(os.path.realpath(lib), target)
        os.chmod(target, 0o755)


setup(version=version(), cmdclass={"build_py": BuildWithLibrary})
