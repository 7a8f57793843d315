#!/usr/bin/env python3
"""resolve_gpu_uuids called in a loop, in one process, through gpusel's Python stand-in and through
the reference module, on the same simulated NVML (dgx-h100). Target: the stand-in is not slower.

Usage: bench/python_resolve.py [--calls N] [--build DIR]
Each call of either enumerates NVML afresh (init, 8 GPUs, shutdown), as the reference module does.
"""

import argparse
import os
import subprocess

from simenv import sim_environment
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
parser = argparse.ArgumentParser()
parser.add_argument("--calls", type=int, default=2000)
parser.add_argument("--build", default=os.path.join(root, "build"))
parser.add_argument("--shared", default=os.path.join(root, "..", "shared"))
args = parser.parse_args()

gpusel = os.path.join(args.build, "bin", "gpusel")
env = sim_environment(gpusel, "dgx-h100", dict(os.environ, PYTHONPATH=os.path.join(root, "python"),
                                                 GPUSEL_LIBRARY=os.path.join(args.build, "lib", "libgpusel.so.2")))

code = f"""
import sys, time, statistics
sys.path.insert(0, {os.path.join(args.shared, 'seed')!r})
import gpu_select, gpusel
spec = ["0,1,2,3,4,5,6,7"]
assert gpu_select.resolve_gpu_uuids(spec) == gpusel.resolve_gpu_uuids(spec)
for name, mod in (("gpusel (stand-in)", gpusel), ("gpu_select (reference)", gpu_select)):
    rounds = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range({args.calls}):
            mod.resolve_gpu_uuids(spec)
        rounds.append((time.perf_counter() - t0) / {args.calls})
    print(f"  {{name:<24}} median {{statistics.median(rounds) * 1e6:8.1f}} us per call "
          f"(5 rounds of {args.calls} calls; min {{min(rounds) * 1e6:.1f}}, max {{max(rounds) * 1e6:.1f}})")
"""
print("resolve_gpu_uuids(['0,1,2,3,4,5,6,7']) in-process, simulated dgx-h100")
subprocess.run([sys.executable, "-c", code], env=env, check=True)
