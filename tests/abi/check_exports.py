#!/usr/bin/env python3
"""libgpusel.so exports exactly the symbols listed in libgpusel.exports: the C ABI (gpusel_*), the
C++ API (gpusel::vN::..., each symbol marked GPUSEL_CXX_API) and nothing internal (gpusel::detail,
helpers, inline functions).

Usage: check_exports.py LIBRARY LIST [ARCHIVE]   fails, showing the difference, when they differ
       check_exports.py --update LIBRARY LIST     rewrites LIST from LIBRARY (a deliberate change)

With ARCHIVE (libgpusel.a, the same objects), it also fails when a function or variable the
objects define with global binding in the C++ API's namespace is not exported: a public function
whose declaration lacks GPUSEL_CXX_API (programs linking the shared library would not find it),
or a helper that belongs in gpusel::detail or an anonymous namespace.
"""

import os
import re
import subprocess
import sys

HEADER = """\
# Every symbol libgpusel exports (nm -D --defined-only, demangled), one a line, sorted, with the
# version node that names its SONAME (GPUSEL_1: libgpusel.so.1). tests/abi/check_exports.py fails
# when the library's exports differ from this list. Change it only deliberately, with
# tests/abi/check_exports.py --update, and review the diff: a symbol removed or changed breaks
# programs built against this SONAME (docs/versioning.md).
"""


def exported(library):
    out = subprocess.run(["nm", "-D", "--defined-only", "--demangle", library], capture_output=True, text=True,
                         check=True).stdout
    symbols = set()
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3:
            symbols.add(parts[2])
    return symbols


def api_namespace_definitions(archive):
    """Strong global definitions (functions, data) of gpusel::vN in the archive's objects."""
    out = subprocess.run(["nm", "--defined-only", "--demangle", archive], capture_output=True, text=True,
                         check=True).stdout
    symbols = set()
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3 and parts[1] in ("T", "D", "B", "R") and re.match(r"gpusel::v\d+::", parts[2]):
            symbols.add(parts[2])
    return symbols


def listed(path):
    with open(path) as f:
        return {line.rstrip("\n") for line in f if line.strip() and not line.startswith("#")}


def main(argv):
    update = "--update" in argv
    args = [a for a in argv if a != "--update"]
    if len(args) not in (2, 3) or (update and len(args) != 2):
        sys.exit(__doc__)
    library, path = args[:2]
    actual = exported(library)
    if len(args) == 3:
        versionless = {s.split("@")[0] for s in actual}
        hidden = sorted(api_namespace_definitions(args[2]) - versionless)
        if hidden:
            print(f"{args[2]} defines in the C++ API's namespace what {library} does not export:")
            for s in hidden:
                print(f"  {s}")
            print("Mark the API's declaration GPUSEL_CXX_API (gpusel/export.h), or move a helper into "
                  "gpusel::detail (src/detail/gpusel_detail.hpp) or an anonymous namespace.")
            return 1
    if update:
        with open(path, "w") as f:
            f.write(HEADER + "".join(s + "\n" for s in sorted(actual)))
        print(f"wrote {len(actual)} symbols to {path}")
        return 0
    expected = listed(path)
    if actual == expected:
        print(f"{library}: {len(actual)} exported symbols, as listed in {path}")
        return 0
    print(f"{library} does not export what {path} lists.")
    for s in sorted(actual - expected):
        print(f"  + {s}   (exported, not listed)")
    for s in sorted(expected - actual):
        print(f"  - {s}   (listed, not exported)")
    print("An internal symbol leaking out belongs in namespace gpusel::detail, declared in "
          "src/detail/gpusel_detail.hpp (hidden); a public one in GPUSEL_BEGIN_NAMESPACE, marked "
          "GPUSEL_CXX_API (C++) or GPUSEL_API (C) (gpusel/export.h).\n"
          "If the change is deliberate (new API, or an ABI change that warrants it), update the list "
          "and review its diff in the commit:\n"
          f"  python3 tests/abi/check_exports.py --update {library} tests/abi/libgpusel.exports\n"
          "Removing or changing a listed symbol breaks programs linked against this SONAME: bump "
          "GPUSEL_SOVERSION (docs/versioning.md).")
    return 1


def self_test(compiler, library, path, archive):
    """The archive check finds what it must: a copy of ARCHIVE with one object more, defining an
    unmarked gpusel::vN function, fails and names it; the archive as it is passes."""
    import io
    import contextlib
    import shutil
    import tempfile
    namespace = re.search(r"gpusel::(v\d+)::", "\n".join(exported(library))).group(1)
    with tempfile.TemporaryDirectory() as d:
        copy = os.path.join(d, "copy.a")
        shutil.copy(archive, copy)
        with open(os.path.join(d, "leak.cpp"), "w") as f:
            f.write(f"namespace gpusel {{ inline namespace {namespace} {{ int leaked_helper(int x) {{ return x + 1; }} }} }}\n")
        subprocess.run([compiler, "-c", "-O2", "-fvisibility=hidden", "leak.cpp", "-o", "leak.o"], cwd=d, check=True)
        subprocess.run(["ar", "rcs", copy, os.path.join(d, "leak.o")], check=True)
        for name, lib, want_rc, want_text in (("the archive as built", archive, 0, "exported symbols"),
                                             ("an unmarked function added", copy, 1,
                                              f"gpusel::{namespace}::leaked_helper(int)")):
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                rc = main([library, path, lib])
            if rc != want_rc or want_text not in out.getvalue():
                print(f"self test: {name}: exit {rc}, expected {want_rc} with {want_text!r}:\n{out.getvalue()}")
                return 1
            print(f"self test: {name}: exit {rc}, as expected")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--self-test"]:
        if len(sys.argv) != 6:
            sys.exit("usage: check_exports.py --self-test COMPILER LIBRARY LIST ARCHIVE")
        sys.exit(self_test(*sys.argv[2:]))
    sys.exit(main(sys.argv[1:]))
