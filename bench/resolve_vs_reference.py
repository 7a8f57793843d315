#!/usr/bin/env python3
"""Times `gpusel resolve` as a whole process against python3 running the reference module's
resolve_gpu_uuids, on the same simulated NVML (dgx-h100), side by side, and prints the ratio.

Usage: bench/resolve_vs_reference.py [--runs N] [--build DIR]
Both commands are started the same way (fork+exec from this script), alternately, N times each;
the medians are compared. Target: gpusel at least 20x faster.
"""

import argparse
import os
import statistics
import subprocess

from simenv import sim_environment
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
parser = argparse.ArgumentParser()
parser.add_argument("--runs", type=int, default=200)
parser.add_argument("--build", default=os.path.join(root, "build"))
parser.add_argument("--shared", default=os.path.join(root, "..", "shared"))
parser.add_argument("--spec", default="0,1,2,3,4,5,6,7")
args = parser.parse_args()

gpusel = os.path.join(args.build, "bin", "gpusel")
env = sim_environment(gpusel, "dgx-h100")

seed = os.path.join(args.shared, "seed")
commands = {
    "/bin/true (floor)": ["/bin/true"],
    "gpusel resolve": [gpusel, "resolve", "--gpu", args.spec],
    "python3 gpu_select": [sys.executable, "-c",
                           f"import sys; sys.path.insert(0, {seed!r}); import gpu_select; "
                           f"print('\\n'.join(gpu_select.resolve_gpu_uuids([{args.spec!r}])))"],
}
outputs = {name: subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout.split()
           for name, cmd in commands.items() if "floor" not in name}
if outputs["gpusel resolve"] != outputs["python3 gpu_select"]:
    sys.exit(f"the two disagree: {outputs}")

times = {name: [] for name in commands}
for _ in range(args.runs):
    for name, cmd in commands.items():
        t0 = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=True)
        times[name].append(time.perf_counter() - t0)

print(f"resolve --gpu {args.spec} on the simulated dgx-h100, {args.runs} runs each (same UUIDs from both)")
for name, ts in times.items():
    print(f"  {name:<20} median {statistics.median(ts) * 1e3:7.2f} ms   "
          f"min {min(ts) * 1e3:7.2f} ms   max {max(ts) * 1e3:7.2f} ms")
ours = statistics.median(times["gpusel resolve"])
theirs = statistics.median(times["python3 gpu_select"])
floor = statistics.median(times["/bin/true (floor)"])
print(f"  gpusel is {theirs / ours:.1f}x faster (target: 20x); "
      f"{(theirs - floor) / (ours - floor):.1f}x counting only the time above the process floor")
