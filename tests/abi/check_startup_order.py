#!/usr/bin/env python3
"""Checks that the gpusel command's start-up code sits together (cmake/startup-order.cmake):
- the executable marks the placed stretch at the head of its .text (__gpusel_startup_start,
  __gpusel_startup_end) and has one .text (valgrind reads no symbols of a program with two);
- every function of cmake/startup-functions.txt that the executable has lies in the stretch,
  main and the quick commands' entry points among them, and enough of the list's names are
  still the build's;
- what the quick commands really run is there: callgrind runs `resolve --gpu 0,...,7` and
  `bind --gpu 3` on the simulated dgx-h100, and nearly every function of gpusel's it sees must
  lie in the stretch (a list that misses new code fails here, though every name it has is
  placed).
A failure that says the list is stale is mended by writing it again: bench/startup_order.py.

Usage: check_startup_order.py GPUSEL_EXECUTABLE STARTUP_FUNCTIONS_TXT
       check_startup_order.py --self-test GPUSEL_EXECUTABLE STARTUP_FUNCTIONS_TXT
(--self-test: the check must fail on a list none of whose names the build has, on a list naming a
function that lies outside the stretch, and, taking the stretch as a tenth of its length, on the
functions the commands run past it.)
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
from simenv import sim_environment  # noqa: E402 (the bench scripts' own helpers)
from startup_order import functions_run  # noqa: E402

STRETCH = "the placed stretch"
# The share of the list's names the build must still have. A change of code renames a few
# (an inlined function, a clone the compiler names anew); a list this far behind needs writing again.
STALE_BELOW = 0.75
# The share of the functions of gpusel's that `resolve` and `bind` run which must lie in the
# stretch (all of them when the list is fresh).
RUN_PLACED_BELOW = 0.95
# Present in every build of the command and run by every quick command: each must be placed.
ENTRY_POINTS = ["main", "_ZN6gpusel3cli11run_resolveERKNS0_14ResolveOptionsE",
                "_ZN6gpusel3cli8run_bindERKNS0_11BindOptionsE"]
RUN = [["resolve", "--gpu", "0,1,2,3,4,5,6,7"], ["bind", "--gpu", "3"]]


def text_sections(executable):
    out = subprocess.run(["readelf", "-SW", executable], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if re.search(r"\]\s+\.text\s", line)]


def symbols(executable):
    """Each defined function's address by its (mangled) name, and the stretch's marks."""
    out = subprocess.run(["nm", "--defined-only", executable], capture_output=True, text=True, check=True).stdout
    functions, marks = {}, {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) != 3:
            continue
        if parts[2] in ("__gpusel_startup_start", "__gpusel_startup_end"):
            marks[parts[2]] = int(parts[0], 16)
        elif parts[1] in "tTwWi":
            functions.setdefault(parts[2], int(parts[0], 16))
    stretch = None
    if len(marks) == 2:
        stretch = marks["__gpusel_startup_start"], marks["__gpusel_startup_end"]
    return functions, stretch


def listed(path):
    with open(path) as f:
        return [line.strip() for line in f if line.strip() and not line.startswith("#")]


def profile(executable, command, tmp):
    """The functions of `executable` callgrind saw `command` run; None without valgrind or when
    valgrind names none of them (it reads symbols from a section named .text alone)."""
    out = os.path.join(tmp, "callgrind." + command[0])
    subprocess.run(["valgrind", "--tool=callgrind", "--demangle=no", "--trace-children=no",
                    f"--callgrind-out-file={out}", executable] + command,
                   env=sim_environment(executable, "dgx-h100", base=dict(
                       os.environ, GPUSEL_LEASE_DIR=os.path.join(tmp, "leases"),
                       GPUSEL_SIM_STATE_DIR=os.path.join(tmp, "sim-state"))),
                   capture_output=True, check=False)
    if not os.path.exists(out):
        return None
    return functions_run(out, os.path.realpath(executable)) or None


def check_run(executable, functions, stretch):
    problems = []
    start, end = stretch
    with tempfile.TemporaryDirectory(prefix="gpusel-startup-") as tmp:
        for command in RUN:
            ran = profile(executable, command, tmp)
            if ran is None:
                problems.append(f"valgrind names none of {executable}'s code in `gpusel "
                                f"{' '.join(command)}` (callgrind calls it ???; a second code section?)")
                continue
            outside = [n for n in ran if n not in functions or not start <= functions[n] < end]
            share = 1 - len(outside) / len(ran)
            if share < RUN_PLACED_BELOW:
                problems.append(f"`gpusel {' '.join(command)}` runs {len(outside)} of its {len(ran)} functions "
                                f"outside {STRETCH} ({share:.0%} placed; {RUN_PLACED_BELOW:.0%} wanted): the "
                                "list is stale, write it again with bench/startup_order.py after a product "
                                "build; among them " + ", ".join(outside[:5]))
    return problems


def check(executable, list_path, run=True):
    """The problems found, as messages (none: the check passes)."""
    functions, stretch = symbols(executable)
    if stretch is None:
        return [f"{executable} has no __gpusel_startup_start and __gpusel_startup_end: the linker script "
                "cmake/startup-order.cmake writes (build folder: gpusel-startup.ld) was not applied; "
                "is GPUSEL_STARTUP_ORDER on?"]
    start, end = stretch
    texts = text_sections(executable)
    if len(texts) != 1:
        return [f"{executable} has {len(texts)} sections named .text, not one"]
    names = listed(list_path)
    if not names:
        return [f"{list_path} lists no function"]
    present = [n for n in names if n in functions]
    problems = []
    share = len(present) / len(names)
    if share < STALE_BELOW:
        problems.append(f"{list_path} is stale: {len(present)} of its {len(names)} functions ({share:.0%}) "
                        f"are in {executable} (at least {STALE_BELOW:.0%} should be); write it again with "
                        "bench/startup_order.py after a product build")
    outside = [n for n in present if not start <= functions[n] < end]
    if outside:
        problems.append(f"{len(outside)} listed functions lie outside {STRETCH} "
                        f"[{start:#x}, {end:#x}): " + ", ".join(outside[:5]))
    for name in ENTRY_POINTS:
        if name not in functions:
            problems.append(f"{executable} has no function {name} (renamed? update ENTRY_POINTS here)")
        elif not start <= functions[name] < end:
            problems.append(f"{name} lies outside {STRETCH}: it is not in {list_path} (stale list?)")
    if run and shutil.which("valgrind"):
        problems += check_run(executable, functions, stretch)
    return problems


def self_test(executable, list_path):
    with tempfile.TemporaryDirectory() as tmp:
        stale = os.path.join(tmp, "stale.txt")
        with open(stale, "w") as f:
            f.write("".join(f"_ZN6gpusel9no_such_function{i}Ev\n" for i in range(20)) + "main\n")
        if not any("stale" in p for p in check(executable, stale, run=False)):
            return "a list of names the build lacks passed as current"
        # A function the build has but the list does not name lies outside the stretch.
        functions, stretch = symbols(executable)
        names = set(listed(list_path))
        stray = next((n for n, a in sorted(functions.items()) if n not in names and n.startswith("_ZN6gpusel")
                      and stretch and not stretch[0] <= a < stretch[1]), None)
        if stray is None:
            return "found no gpusel function outside the stretch to test with"
        extra = os.path.join(tmp, "extra.txt")
        with open(extra, "w") as f:
            f.write("".join(n + "\n" for n in listed(list_path)) + stray + "\n")
        if not any("outside" in p for p in check(executable, extra, run=False)):
            return f"{stray}, outside the stretch, passed as placed"
        # Code the commands run beyond the list's end (a list missing it): taken as a stretch a
        # tenth as long, the functions past it must fail the run check.
        if shutil.which("valgrind"):
            short = (stretch[0], stretch[0] + (stretch[1] - stretch[0]) // 10)
            if not any("functions outside" in p for p in check_run(executable, functions, short)):
                return "the commands' functions past a shortened stretch passed as placed"
    return None


def main():
    args = sys.argv[1:]
    if args and args[0] == "--self-test":
        failure = self_test(*args[1:])
        if failure:
            print(f"check_startup_order.py self-test: {failure}", file=sys.stderr)
            return 1
        print("check_startup_order.py self-test: a stale list, a stray function and run code past the "
              "stretch each fail the check")
        return 0
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    problems = check(*args)
    for p in problems:
        print(f"check_startup_order.py: {p}", file=sys.stderr)
    if problems:
        return 1
    functions, (start, end) = symbols(args[0])
    placed = len([n for n in listed(args[1]) if n in functions])
    print(f"check_startup_order.py: {placed} listed functions in {STRETCH} at the head of .text "
          f"({(end - start) // 1024} KB); what resolve and bind run lies there")
    return 0


if __name__ == "__main__":
    sys.exit(main())
