#!/usr/bin/env python3
"""What every start of the gpusel command would pay for, kept out of it (docs/performance.md, "The
command line read from a table of our own"): no C++ stream set-up (std::ios_base::Init, which any
<iostream> in the command or the library brings: 50,000 instructions and five exit handlers per
run) and no general command-line library (CLI11: the command line is read against table.cpp).

Usage: check_start_cost.py FILE...   (the gpusel command, libgpusel.so)
"""

import subprocess
import sys

FORBIDDEN = {
    "std::ios_base::Init::Init()": "<iostream> is included somewhere: write through C stdio "
                                   "(to_stdout()/to_stderr() in tools/gpusel/common.hpp)",
    "CLI::": "CLI11 is linked into the command: the command line is read by args.cpp",
}

failed = False
for path in sys.argv[1:]:
    out = subprocess.run(["nm", "--demangle", path], capture_output=True, text=True, check=True).stdout
    if not out.strip():
        out = subprocess.run(["nm", "--demangle", "-D", path], capture_output=True, text=True,
                             check=True).stdout
    for needle, why in FORBIDDEN.items():
        hits = sorted({line.split(None, 2)[-1] for line in out.splitlines() if needle in line})
        if hits:
            failed = True
            print(f"{path}: {hits[0]} ({len(hits)} symbols): {why}")
    print(f"{path}: checked")
sys.exit(1 if failed else 0)
