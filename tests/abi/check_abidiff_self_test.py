#!/usr/bin/env python3
"""check_abidiff.py gives each kind of ABI change the outcome docs/versioning.md asks for.

Usage: check_abidiff_self_test.py CXX

In a private temporary folder it builds a tiny shared library, libmini.so.1, with CXX (-g -O2
-fvisibility=hidden, its API marked visibility("default")): a sized C struct gpusel_gpu_info laid
out as gpusel.h's, taken by pointer; a C struct without a size field; a C++ struct with std::string
and std::vector members taken by const reference, as gpusel's LaunchOptions. It records the
library's ABI as the baseline with check_abidiff.py --update, then builds variants and runs
check_abidiff.py on each against that baseline, with the real tests/abi/libgpusel.abignore. Last,
it builds the first library again with its sources named on the other side of /usr/include in the
debug information (-ffile-prefix-map), as a clone elsewhere would be: --update must write the same
baseline, byte for byte. One line a case; it fails (1) unless every case gives its outcome. Exit 77
(skipped) when abidw or abidiff is not installed.
"""

import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import check_abidiff  # noqa: E402 (its abidw options, for case h)
CHECK = os.path.join(HERE, "check_abidiff.py")
SUPPRESSIONS = os.path.join(HERE, "libgpusel.abignore")

HEADER = """\
#ifndef MINI_H
#define MINI_H
#include <stddef.h>
#define MINI_API __attribute__((visibility("default")))
#ifdef __cplusplus
extern "C" {
#endif
typedef struct gpusel_gpu_info {
  size_t size;
  unsigned nvidia_smi_index;
  int cuda_ordinal;
  char uuid[96];
  char name[256];
  char pci_bus_id[32];
  unsigned long long total_bytes;
  int numa_node;
  int cc_major, cc_minor;
  int mig_enabled;
} gpusel_gpu_info;
typedef struct mini_pair {
  int first;
  int second;
} mini_pair;
typedef enum mini_mode { MINI_MODE_PLAIN = 0, MINI_MODE_FAST = 1 } mini_mode;
MINI_API int mini_gpu_info(int index, gpusel_gpu_info* info);
MINI_API int mini_set_mode(mini_mode mode);
MINI_API int mini_pair_get(mini_pair* pair);
MINI_API int mini_version(void);
MINI_API int mini_legacy(void);
#ifdef __cplusplus
}
#endif
#endif
"""

HEADER_HPP = """\
#ifndef MINI_HPP
#define MINI_HPP
#include <string>
#include <vector>
#include "mini.h"
namespace mini {
struct LaunchOptions {
  std::string command;
  std::vector<std::string> args;
  int ranks = 1;
  bool tag_output = false;
};
MINI_API int launch(const LaunchOptions& options);
}  // namespace mini
#endif
"""

SOURCE = """\
#include "mini/mini.hpp"
extern "C" int mini_gpu_info(int index, gpusel_gpu_info* info) {
  info->cuda_ordinal = index;
  info->mig_enabled = 0;
  return 0;
}
extern "C" int mini_pair_get(mini_pair* pair) { pair->first = 1; return 0; }
extern "C" int mini_set_mode(mini_mode mode) { return int(mode); }
extern "C" int mini_version(void) { return 1; }
extern "C" int mini_legacy(void) { return 0; }
namespace mini {
int launch(const LaunchOptions& options) { return options.ranks + int(options.args.size()); }
}  // namespace mini
"""


def edit(text, old, new):
    """text with old replaced by new; old must occur, so that no variant is silently the base."""
    if old not in text:
        raise SystemExit(f"self test out of date: {old!r} not in the library's source")
    return text.replace(old, new)


def variant(header=(), hpp=(), source=(), soversion=1):
    """The library's files with (old, new) replacements applied to each."""
    h, x, s = HEADER, HEADER_HPP, SOURCE
    for old, new in header:
        h = edit(h, old, new)
    for old, new in hpp:
        x = edit(x, old, new)
    for old, new in source:
        s = edit(s, old, new)
    return {"mini.h": h, "mini.hpp": x, "mini.cpp": s, "soversion": soversion}


ADD_FUNCTION = variant(header=[("MINI_API int mini_legacy(void);",
                                "MINI_API int mini_legacy(void);\nMINI_API int mini_added(int x);")],
                       source=[("extern \"C\" int mini_legacy(void) { return 0; }",
                                "extern \"C\" int mini_legacy(void) { return 0; }\n"
                                "extern \"C\" int mini_added(int x) { return x; }")])
REMOVE_FUNCTION = [("MINI_API int mini_legacy(void);\n", "")]
REMOVE_FUNCTION_SOURCE = [("extern \"C\" int mini_legacy(void) { return 0; }\n", "")]

# (name, files, what check_abidiff.py must answer: "pass", "additions", "incompatible", "soname")
CASES = [
    ("a", "identical library", variant(), "pass"),
    ("b", "a function added", ADD_FUNCTION, "additions"),
    ("b2", "an enumerator added to an enum an exported function takes (abidiff counts it harmless)",
     variant(header=[("MINI_MODE_FAST = 1 }", "MINI_MODE_FAST = 1, MINI_MODE_SAFE = 2 }")]), "additions"),
    ("c", "a function removed, same SONAME",
     variant(header=REMOVE_FUNCTION, source=REMOVE_FUNCTION_SOURCE), "incompatible"),
    ("c2", "an enumerator's value changed",
     variant(header=[("MINI_MODE_FAST = 1 }", "MINI_MODE_FAST = 2 }")]), "incompatible"),
    ("d", "a field added to the C++ struct LaunchOptions (std::string, std::vector members; by const reference)",
     variant(hpp=[("bool tag_output = false;\n", "bool tag_output = false;\n  std::string working_dir;\n")]),
     "incompatible"),
    ("e", "fields appended to the sized C struct gpusel_gpu_info",
     variant(header=[("int mig_enabled;\n", "int mig_enabled;\n  int mig_count;\n  unsigned long long free_bytes;\n")]),
     "pass"),
    ("f", "a field inserted in the middle of gpusel_gpu_info",
     variant(header=[("int cuda_ordinal;\n", "int cuda_ordinal;\n  int flags;\n")]), "incompatible"),
    ("f2", "a field inserted before the last member of gpusel_gpu_info (abidiff 2.2 lets it through)",
     variant(header=[("int mig_enabled;\n", "unsigned long long free_bytes;\n  int mig_enabled;\n")]),
     "incompatible"),
    ("f3", "a member of gpusel_gpu_info changes type (int numa_node to unsigned; abidiff 2.2 lets it through)",
     variant(header=[("int numa_node;", "unsigned numa_node;")]), "incompatible"),
    ("f4", "a member removed from gpusel_gpu_info",
     variant(header=[("int numa_node;\n", "")]), "incompatible"),
    ("f5", "a field appended to mini_pair, a C struct without a size field",
     variant(header=[("int second;\n", "int second;\n  int third;\n")]), "incompatible"),
    ("g", "a function removed with the SONAME bumped (libmini.so.2)",
     variant(header=REMOVE_FUNCTION, source=REMOVE_FUNCTION_SOURCE, soversion=2), "soname"),
]

# What check_abidiff.py prints for each outcome.
SAYS = {
    "pass": "no ABI change",
    "additions": "compatible additions; review them and record them with --update",
    "incompatible": "would break",
    "soname": "Record the new SONAME's ABI",
}


def build(cxx, folder, files, prefix_map=None):
    include = os.path.join(folder, "include")
    os.makedirs(os.path.join(include, "mini"))
    for name in ("mini.h", "mini.hpp"):
        with open(os.path.join(include, "mini", name), "w") as f:
            f.write(files[name])
    source = os.path.join(folder, "mini.cpp")
    with open(source, "w") as f:
        f.write(files["mini.cpp"])
    n = files["soversion"]
    library = os.path.join(folder, f"libmini.so.{n}")
    # prefix_map: the folder the debug information names instead of this one.
    remap = [f"-ffile-prefix-map={folder}={prefix_map}"] if prefix_map else []
    subprocess.run([cxx, "-std=c++20", "-g", "-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-I", include,
                    source] + remap + [f"-Wl,-soname,libmini.so.{n}", "-o", library], check=True)
    return library, os.path.join(include, "mini")


def check(library, headers, baseline, update=False):
    command = [sys.executable, CHECK] + (["--update"] if update else []) + [
        "--library", library, "--baseline", baseline, "--suppressions", SUPPRESSIONS, "--headers", headers]
    done = subprocess.run(command, capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


def outcome(rc, out):
    """What check_abidiff.py answered, by its exit status and its last words."""
    if rc == 0 and SAYS["pass"] in out:
        return "pass"
    for kind in ("additions", "soname", "incompatible"):
        if rc == 1 and SAYS[kind] in out:
            return kind
    return f"exit {rc}"


def read(path):
    with open(path, "rb") as f:
        return f.read()


def main(argv):
    if len(argv) != 1:
        sys.exit(__doc__)
    cxx = argv[0]
    missing = [tool for tool in ("abidw", "abidiff") if shutil.which(tool) is None]
    if missing:
        print(f"{' and '.join(missing)} not found on PATH: skipped; install them with scripts/install-deps "
              "(Debian's package abigail-tools)")
        return 77
    failures = []

    def report(name, what, ok, detail, out):
        print(f"{'ok  ' if ok else 'FAIL'} {name}. {what}: {detail}")
        if not ok:
            print("     " + out.rstrip("\n").replace("\n", "\n     "))
            failures.append(name)

    with tempfile.TemporaryDirectory(prefix="check_abidiff_self_test.") as tmp:
        base_library, base_headers = build(cxx, os.path.join(tmp, "base"), variant())
        baseline = os.path.join(tmp, "baseline.abi.xml")
        rc, out = check(base_library, base_headers, baseline)
        report("0", "no baseline yet, without --update", rc == 1 and "no ABI baseline" in out,
               f"exit {rc}, asks for --update", out)
        rc, out = check(base_library, base_headers, baseline, update=True)
        ok = rc == 0 and os.path.isfile(baseline)
        report("0", "no baseline yet, --update", ok, f"exit {rc}, baseline written", out)
        if not ok:
            return 1

        for name, what, files, expected in CASES:
            folder = os.path.join(tmp, name)
            library, headers = build(cxx, folder, files)
            case_baseline = os.path.join(folder, "baseline.abi.xml")
            shutil.copyfile(baseline, case_baseline)
            rc, out = check(library, headers, case_baseline)
            got = outcome(rc, out)
            detail = f"{got} (exit {rc})"
            ok = got == expected
            if ok and expected in ("additions", "soname"):
                # --update records it, and the check passes on the new baseline.
                urc, uout = check(library, headers, case_baseline, update=True)
                rrc, rout = check(library, headers, case_baseline)
                ok = urc == 0 and outcome(rrc, rout) == "pass"
                detail += f"; --update exit {urc}, then {outcome(rrc, rout)}"
                out += "\n--- --update:\n" + uout + "\n--- again:\n" + rout
            elif ok and expected == "incompatible" and name == "c":
                # --update refuses and leaves the baseline as it was.
                urc, uout = check(library, headers, case_baseline, update=True)
                unchanged = read(case_baseline) == read(baseline)
                ok = urc == 1 and "refuses" in uout and unchanged
                detail += f"; --update exit {urc}, baseline {'unchanged' if unchanged else 'CHANGED'}"
                out += "\n--- --update:\n" + uout
            report(name, what, ok, f"expected {expected}, got {detail}", out)

        # The same library from a tree on the other side of /usr/include (abidw orders the types by
        # their files' paths): --update writes the same baseline, byte for byte.
        elsewhere = "/zzz/clone" if os.path.realpath(tmp) < "/usr/include" else "/aaa/clone"
        folder = os.path.join(tmp, "h")
        library, headers = build(cxx, folder, variant(), prefix_map=elsewhere)
        moved = os.path.join(folder, "baseline.abi.xml")
        rc, out = check(library, headers, moved, update=True)
        same = rc == 0 and os.path.isfile(moved) and read(moved) == read(baseline)
        raw = [os.path.join(tmp, "base.raw.xml"), os.path.join(folder, "raw.xml")]
        for lib, hdr, xml in ((base_library, base_headers, raw[0]), (library, headers, raw[1])):
            subprocess.run(["abidw", "--headers-dir", hdr] + check_abidiff.ABIDW_OPTIONS + ["--out-file", xml, lib],
                           check=True, capture_output=True)
        a, b = (open(x).read().splitlines() for x in raw)
        differ = sum(1 for x, y in zip(a, b) if x != y) + abs(len(a) - len(b))
        report("h", f"the same library, its sources named {elsewhere} in the debug information", same,
               f"--update exit {rc}, baseline {'identical' if same else 'DIFFERENT'} byte for byte "
               f"(abidw's own XML differs in {differ} lines)", out)

        # The base library without debug information (a Release build): the check says it cannot
        # read the types (skipped, 77), never that the library is incompatible.
        stripped = os.path.join(tmp, "stripped", os.path.basename(base_library))
        os.makedirs(os.path.dirname(stripped))
        shutil.copyfile(base_library, stripped)
        subprocess.run(["strip", "--strip-debug", stripped], check=True)
        rc, out = check(stripped, base_headers, baseline)
        report("r", "the base library without debug information", rc == 77 and "no debug information" in out,
               f"exit {rc}", out)

    if failures:
        print(f"check_abidiff.py gave the wrong outcome in case(s) {', '.join(failures)} (output above)")
        return 1
    print(f"check_abidiff.py: all {len(CASES) + 4} cases as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
