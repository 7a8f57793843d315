#!/usr/bin/env python3
"""Checks that the gpusel command's start-up code sits together (cmake/startup-order.cmake): the
executable marks the placed stretch at the head of its .text (__gpusel_startup_start and
__gpusel_startup_end), every function of cmake/startup-functions.txt that the executable has
lies in it, main and the quick commands' entry points among them, the program has one .text
(valgrind reads no symbols of a program with two), and
enough of the list's names are still the build's (else the list is stale: bench/startup_order.py
writes it again).

Usage: check_startup_order.py GPUSEL_EXECUTABLE STARTUP_FUNCTIONS_TXT
       check_startup_order.py --self-test GPUSEL_EXECUTABLE STARTUP_FUNCTIONS_TXT
(--self-test: the check must fail on a list none of whose names the build has, and on a list
naming a function that lies outside the section.)
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

SECTION = "the placed stretch"
# The share of the list's names the build must still have. A change of code renames a few
# (an inlined function, a clone the compiler names anew); a list this far behind needs writing again.
STALE_BELOW = 0.75
# Present in every build of the command and run by every quick command: each must be placed.
ENTRY_POINTS = ["main", "_ZN6gpusel3cli11run_resolveERKNS0_14ResolveOptionsE",
                "_ZN6gpusel3cli8run_bindERKNS0_11BindOptionsE"]


def text_sections(executable):
    out = subprocess.run(["readelf", "-SW", executable], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if re.search(r"\]\s+\.text\s", line)]


def section_range(executable):
    """[start, end) of the placed stretch, from its two marks; None without them."""
    out = subprocess.run(["nm", executable], capture_output=True, text=True, check=True).stdout
    marks = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] in ("__gpusel_startup_start", "__gpusel_startup_end"):
            marks[parts[2]] = int(parts[0], 16)
    if len(marks) != 2:
        return None
    return marks["__gpusel_startup_start"], marks["__gpusel_startup_end"]


def functions(executable):
    """Each defined function's address, by its (mangled) name."""
    out = subprocess.run(["nm", "--defined-only", executable], capture_output=True, text=True, check=True).stdout
    found = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tTwWi":
            found.setdefault(parts[2], int(parts[0], 16))
    return found


def valgrind_names(executable):
    """Whether valgrind finds the program's symbols: it reads them from a section named .text
    alone, and names a program with its code elsewhere ??? (callgrind, `gpusel --version`)."""
    with tempfile.TemporaryDirectory() as tmp:
        profile = os.path.join(tmp, "callgrind.out")
        subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={profile}", executable,
                        "--version"], capture_output=True, check=False)
        if not os.path.exists(profile):
            return False
        with open(profile, errors="replace") as f:
            for line in f:
                m = re.match(r"^c?ob=\(\d+\) (.*)$", line.rstrip("\n"))
                if m and os.path.realpath(m.group(1)) == os.path.realpath(executable):
                    return True
    return False


def listed(path):
    with open(path) as f:
        return [line.strip() for line in f if line.strip() and not line.startswith("#")]


def check(executable, list_path):
    """The problems found, as messages (none: the check passes)."""
    where = section_range(executable)
    if where is None:
        return [f"{executable} has no __gpusel_startup_start and __gpusel_startup_end: the linker script "
                "cmake/startup-order.cmake writes (build folder: gpusel-startup.ld) was not applied; "
                "is GPUSEL_STARTUP_ORDER on?"]
    start, end = where
    if len(text_sections(executable)) != 1:
        return [f"{executable} has {len(text_sections(executable))} sections named .text, not one"]
    have = functions(executable)
    names = listed(list_path)
    if not names:
        return [f"{list_path} lists no function"]
    present = [n for n in names if n in have]
    problems = []
    share = len(present) / len(names)
    if share < STALE_BELOW:
        problems.append(f"{list_path} is stale: {len(present)} of its {len(names)} functions ({share:.0%}) "
                        f"are in {executable} (at least {STALE_BELOW:.0%} should be); write it again with "
                        "bench/startup_order.py after a product build")
    outside = [n for n in present if not start <= have[n] < end]
    if outside:
        problems.append(f"{len(outside)} listed functions lie outside {SECTION} "
                        f"[{start:#x}, {end:#x}): " + ", ".join(outside[:5]))
    if shutil.which("valgrind") and not valgrind_names(executable):
        problems.append(f"valgrind cannot name {executable}'s code (callgrind calls it ???)")
    for name in ENTRY_POINTS:
        if name not in have:
            problems.append(f"{executable} has no function {name} (renamed? update ENTRY_POINTS here)")
        elif not start <= have[name] < end:
            problems.append(f"{name} lies outside {SECTION}: it is not in {list_path} (stale list?)")
    return problems


def self_test(executable, list_path):
    with tempfile.TemporaryDirectory() as tmp:
        stale = os.path.join(tmp, "stale.txt")
        with open(stale, "w") as f:
            f.write("".join(f"_ZN6gpusel9no_such_function{i}Ev\n" for i in range(20)) + "main\n")
        if not any("stale" in p for p in check(executable, stale)):
            return "a list of names the build lacks passed as current"
        # A function the build has but the list does not name lies outside the section.
        have = functions(executable)
        names = set(listed(list_path))
        where = section_range(executable)
        stray = next((n for n, a in sorted(have.items()) if n not in names and n.startswith("_ZN6gpusel")
                      and where and not where[0] <= a < where[1]), None)
        if stray is None:
            return "found no gpusel function outside the section to test with"
        extra = os.path.join(tmp, "extra.txt")
        with open(extra, "w") as f:
            f.write("".join(n + "\n" for n in listed(list_path)) + stray + "\n")
        if not any("outside" in p for p in check(executable, extra)):
            return f"{stray}, outside the section, passed as placed"
    return None


def main():
    args = sys.argv[1:]
    if args and args[0] == "--self-test":
        failure = self_test(*args[1:])
        if failure:
            print(f"check_startup_order.py self-test: {failure}", file=sys.stderr)
            return 1
        print("check_startup_order.py self-test: a stale list and a stray function both fail the check")
        return 0
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    problems = check(*args)
    for p in problems:
        print(f"check_startup_order.py: {p}", file=sys.stderr)
    if problems:
        return 1
    start, end = section_range(args[0])
    print(f"check_startup_order.py: {len([n for n in listed(args[1]) if n in functions(args[0])])} "
          f"listed functions in {SECTION} at the head of .text ({(end - start) // 1024} KB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
