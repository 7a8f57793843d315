"""Builds the gpusel package for pip, bundling libgpusel.so.0 beside gpusel/__init__.py.

The library comes from GPUSEL_LIBRARY (its path) when set, else from the source tree's build
folder (../build/lib/libgpusel.so.0). Without either, the package is built without it and looks
for an installed libgpusel at import time (see gpusel/__init__.py).
"""

import os
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


setup(cmdclass={"build_py": BuildWithLibrary})
