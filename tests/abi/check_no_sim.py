#!/usr/bin/env python3
"""The production gpusel command links no simulator code: no gpusel::sim symbol and no TOML parser
in the executable (--sim reads machine files through the simulator's own libgpusel-sim-machines.so,
opened at run time).

Usage: check_no_sim.py EXECUTABLE
"""

import subprocess
import sys

exe = sys.argv[1]
out = subprocess.run(["nm", "--demangle", exe], capture_output=True, text=True, check=True).stdout
found = sorted({line.split(None, 2)[-1] for line in out.splitlines()
                if "gpusel::sim::" in line or "toml::" in line})
if found:
    print(f"{exe} holds simulator code ({len(found)} symbols), for example:")
    for name in found[:10]:
        print("  " + name)
    sys.exit(1)
print(f"{exe}: no simulator code")
