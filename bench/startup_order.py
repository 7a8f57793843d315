#!/usr/bin/env python3
"""Writes cmake/startup-functions.txt: the functions of the gpusel command that its quick commands
run, most urgent first, for the linker to place side by side at the start of the program's code
(cmake/startup-order.cmake; docs/performance.md, "One run's code in one place").

A command that starts touches a few hundred of gpusel's 4,700 functions; spread over 2.4 MB of code,
each 64 KB the kernel maps at a time costs a page fault (30 for `resolve`, 35 for `bind`), where
a fault costs 1-15 us on a virtual machine. Placed together they need 7 and 10.

The list is what valgrind's callgrind saw each command run, on the simulated dgx-h100 with a
lease file for every GPU (as after a first job), in this order (the first ones decide the layout's front): resolve --gpu 0,...,7, bind --gpu 3, run --gpu 3
(gpusel's side; its worker is /bin/true), --version, resolve --gpu free:2, list, and --sim dgx-h100
resolve --gpu 0,1; each command's functions in the order callgrind's output names them. Names are
the linker's (mangled). A name missing from a later build is left out by the linker, never an error;
tests/abi/check_startup_order.py fails when too few of them are left (the list is then stale:
run this again).

Usage: bench/startup_order.py [--gpusel BIN] [--out FILE]
  --gpusel   the gpusel to profile (default build-product/bin/gpusel: the product preset's, as
             installed; profile a build of the same sources and compiler)
  --out      where to write (default cmake/startup-functions.txt); `-` for standard output
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

from simenv import sim_environment

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)

COMMANDS = [
    ["resolve", "--gpu", "0,1,2,3,4,5,6,7"],
    ["bind", "--gpu", "3"],
    ["run", "--quiet", "--gpu", "3", "--", "/bin/true"],
    ["--version"],
    ["resolve", "--gpu", "free:2"],
    ["list"],
    ["--sim", "dgx-h100", "resolve", "--gpu", "0,1"],  # a machine file named on the command line
]

HEADER = """\
# The functions gpusel's quick commands run, command by command, the most urgent command first:
# the linker places them together at the head of the gpusel command's .text
# (cmake/startup-order.cmake), so that a command's start touches a few 64 KB stretches of it
# rather than 30 across 2.4 MB (docs/performance.md). Written by bench/startup_order.py
# (callgrind over the simulator, a lease file for every GPU: {commands}); write it again
# with `bench/startup_order.py` after a product build when tests/abi/check_startup_order.py
# says the list is stale. A name the build lacks is skipped.
"""


def functions_run(profile, program):
    """The functions of `program` that a callgrind output file (--demangle=no, name compression
    on, as valgrind writes it by default) records, in the order they first appear in it."""
    objects = {}  # id -> path
    functions = []
    seen = set()
    current = None  # the object of the lines' function (ob=)
    callee = None  # the object of the next called function (cob=), for one cfn= only
    with open(profile, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            m = re.match(r"^(c?)ob=\((\d+)\)(?: (.*))?$", line)
            if m:
                if m.group(3):
                    objects[m.group(2)] = m.group(3)
                if m.group(1):
                    callee = objects.get(m.group(2))
                else:
                    current = callee = objects.get(m.group(2))
                continue
            m = re.match(r"^(c?)fn=\((\d+)\)(?: (.*))?$", line)
            if not m:
                continue
            owner = callee if m.group(1) else current
            callee = current
            name = m.group(3)
            if not name or owner is None or os.path.realpath(owner) != program:
                continue
            name = name.split(" ")[0].split("'")[0]  # "f'2": callgrind's recursion depth
            # A symbol's name only: not "0x..." (no symbol) nor "(below main)"; "@" is a
            # versioned name from the C library (a stub callgrind saw in gpusel's PLT).
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.$]*", name) or name in seen:
                continue
            seen.add(name)
            functions.append(name)
    return functions


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpusel", default=os.path.join(root, "build-product", "bin", "gpusel"))
    parser.add_argument("--out", default=os.path.join(root, "cmake", "startup-functions.txt"))
    args = parser.parse_args()
    gpusel = os.path.realpath(args.gpusel)
    if not os.access(gpusel, os.X_OK):
        sys.exit(f"startup_order.py: no gpusel at {args.gpusel}: build the product preset first "
                 "(cmake --preset product && cmake --build --preset product) or give --gpusel")
    if subprocess.run(["valgrind", "--version"], capture_output=True).returncode != 0:
        sys.exit("startup_order.py: valgrind is not installed (scripts/install-deps installs it)")
    env = sim_environment(gpusel, "dgx-h100")
    # Every GPU with a lease file, as on a machine after its first job (a command takes other
    # paths on the first use of a lease folder: the files are made).
    subprocess.run([gpusel, "run", "--quiet", "--gpu", "0,1,2,3,4,5,6,7", "--", "true"], env=env, check=True)
    names, seen = [], set()
    with tempfile.TemporaryDirectory(prefix="gpusel-startup-order-") as tmp:
        for i, command in enumerate(COMMANDS):
            profile = os.path.join(tmp, f"callgrind.{i}")
            subprocess.run(["valgrind", "--tool=callgrind", "--demangle=no", "--trace-children=no",
                            f"--callgrind-out-file={profile}", gpusel] + command, env=env, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            found = functions_run(profile, gpusel)
            if not found:
                sys.exit(f"startup_order.py: callgrind saw no function of {gpusel} in "
                         f"`gpusel {' '.join(command)}`")
            for name in found:
                if name not in seen:
                    seen.add(name)
                    names.append(name)
    text = HEADER.format(commands="; ".join("gpusel " + " ".join(c) for c in COMMANDS))
    text += "".join(n + "\n" for n in names)
    if args.out == "-":
        sys.stdout.write(text)
    else:
        with open(args.out, "w") as f:
            f.write(text)
        print(f"startup_order.py: {len(names)} functions written to {args.out}")


if __name__ == "__main__":
    main()
