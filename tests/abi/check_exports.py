#!/usr/bin/env python3
"""libgpusel.so exports exactly the symbols listed in libgpusel.exports, and they are the C ABI
alone: the functions of gpusel.h (gpusel_*) in the version node GPUSEL_N. The C++ API lives in the
static library only, so no C++ symbol may be exported (docs/versioning.md).

Usage: check_exports.py LIBRARY LIST [HEADER]   fails, showing the difference, when they differ
       check_exports.py --update LIBRARY LIST    rewrites LIST from LIBRARY (a deliberate change)
       check_exports.py --self-test COMPILER LIBRARY LIST HEADER

With HEADER (gpusel.h), it also fails when a function the header declares GPUSEL_API is not
exported: a C program would compile against it and fail to link.
"""

import os
import re
import subprocess
import sys

HEADER = """\
# Every symbol libgpusel exports (nm -D --defined-only), one a line, sorted, with the version node
# that names its SONAME (GPUSEL_N: libgpusel.so.N): the C functions of gpusel.h and nothing else.
# tests/abi/check_exports.py fails when the library's exports differ from this list. Change it
# only deliberately, with tests/abi/check_exports.py --update, and review the diff: a symbol
# removed or changed breaks programs built against this SONAME (docs/versioning.md).
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


def declared_functions(header):
    """The names of the functions HEADER declares with GPUSEL_API."""
    with open(header) as f:
        text = re.sub(r"/\*.*?\*/", " ", f.read(), flags=re.S)
    return set(re.findall(r"\bGPUSEL_API\b[^;{(]*?\b(gpusel_\w+)\s*\(", text))


def not_c_abi(symbols):
    """Exported symbols that are not a gpusel_* C function or the version node."""
    return sorted(s for s in symbols if not re.fullmatch(r"(gpusel_\w+@@)?GPUSEL_\d+", s))


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
    foreign = not_c_abi(actual)
    if foreign:
        print(f"{library} exports what is not its C ABI (gpusel_* functions of gpusel.h):")
        for sym in foreign:
            print(f"  {sym}")
        print("The shared library's one binary contract is the C ABI: a C++ function or class belongs in "
              "the static library's API (no export mark) or in gpusel::detail; a C function is named "
              "gpusel_* and declared GPUSEL_API in gpusel.h. src/libgpusel.map.in lets out gpusel_* alone.")
        return 1
    if len(args) == 3:
        versionless = {s.split("@")[0] for s in actual}
        missing = sorted(declared_functions(args[2]) - versionless)
        if missing:
            print(f"{args[2]} declares what {library} does not export:")
            for sym in missing:
                print(f"  {sym}")
            print("Define each function in src/capi (a C program linking the shared library needs it), or "
                  "remove its declaration.")
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
    print("If the change is deliberate (new API, or an ABI change that warrants it), update the list "
          "and review its diff in the commit:\n"
          f"  python3 tests/abi/check_exports.py --update {library} tests/abi/libgpusel.exports\n"
          "Removing or changing a listed symbol breaks programs linked against this SONAME: bump "
          "GPUSEL_SOVERSION (docs/versioning.md).")
    return 1


def self_test(compiler, library, path, header):
    """The checks find what they must: the library as built passes; a library that exports a C++
    function beside a gpusel_* one fails and names the C++ one; a copy of HEADER declaring a
    function the library lacks fails and names it."""
    import io
    import contextlib
    import tempfile
    cases = [("the library as built", [library, path, header], 0, "exported symbols")]
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "leak.cpp"), "w") as f:
            f.write('extern "C" __attribute__((visibility("default"))) int gpusel_fine(void) { return 0; }\n'
                    'namespace gpusel { __attribute__((visibility("default"))) int leaked(int x) { return x; } }\n')
        with open(os.path.join(d, "leak.map"), "w") as f:
            f.write("GPUSEL_9 { global: *; };\n")
        leak = os.path.join(d, "libleak.so")
        subprocess.run([compiler, "-shared", "-fPIC", "-fvisibility=hidden", "leak.cpp", "-o", leak,
                        "-Wl,--version-script=leak.map"], cwd=d, check=True)
        cases.append(("a C++ function exported", [leak, path], 1, "gpusel::leaked(int)"))
        copy = os.path.join(d, "gpusel.h")
        with open(header) as f, open(copy, "w") as out:
            out.write(f.read() + "\nGPUSEL_API int gpusel_never_defined(const char* text);\n")
        cases.append(("a declared function not exported", [library, path, copy], 1, "gpusel_never_defined"))
        for name, args, want_rc, want_text in cases:
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                rc = main(args)
            if rc != want_rc or want_text not in out.getvalue():
                print(f"self test: {name}: exit {rc}, expected {want_rc} with {want_text!r}:\n{out.getvalue()}")
                return 1
            print(f"self test: {name}: exit {rc}, as expected")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--self-test"]:
        if len(sys.argv) != 6:
            sys.exit("usage: check_exports.py --self-test COMPILER LIBRARY LIST HEADER")
        sys.exit(self_test(*sys.argv[2:]))
    sys.exit(main(sys.argv[1:]))
