#!/usr/bin/env python3
"""Times gpusel's fast paths against their floors, side by side in one run on the simulated
dgx-h100, and prints the ratios (issue 14's targets: resolve within 1.15x of its floor, bind
within 1.1x).

  floor_nvml                        dlopen NVML, init, enumerate the 8 UUIDs, exit (bench/floor_nvml.c)
  gpusel resolve --gpu 0,...,7      against floor_nvml
  floor_bind UUID                   cuInit, enumerate UUIDs, retain the primary context, make it
                                    current (bench/floor_bind.c)
  gpusel bind --gpu 3               against floor_bind
  bind_inprocess UUID               the worker API (assign_gpu + bind_assigned_gpu) in a program of
                                    its own, against floor_bind

Usage: bench/floors.py [--runs N] [--build DIR]
Every command is started the same way (fork+exec from this script), round-robin, N times each;
medians are compared. /bin/true gives the cost of starting any process.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

from simenv import sim_environment

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
parser = argparse.ArgumentParser()
parser.add_argument("--runs", type=int, default=300)
parser.add_argument("--build", default=os.path.join(root, "build"))
args = parser.parse_args()

gpusel = os.path.join(args.build, "bin", "gpusel")
env = sim_environment(gpusel, "dgx-h100")
uuids = subprocess.run([gpusel, "resolve", "--gpu", "0,1,2,3,4,5,6,7"], capture_output=True, text=True, env=env,
                       check=True).stdout.split()
commands = {
    "/bin/true": ["/bin/true"],
    "floor_nvml": [os.path.join(args.build, "bin", "floor_nvml")],
    "gpusel resolve": [gpusel, "resolve", "--gpu", "0,1,2,3,4,5,6,7"],
    "floor_bind": [os.path.join(args.build, "bin", "floor_bind"), uuids[3]],
    "gpusel bind": [gpusel, "bind", "--gpu", "3"],
    # A worker under gpusel run gets its GPU's UUID (GPUSEL_GPU); so does the floor.
    "bind_inprocess": [os.path.join(args.build, "bin", "bind_inprocess"), uuids[3]],
}
# The same answers: the floors do the same work.
out = {name: subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
       for name, cmd in commands.items()}
if out["floor_nvml"].split() != uuids:
    sys.exit(f"floor_nvml disagrees: {out['floor_nvml']!r} vs {uuids}")
if out["floor_bind"].strip() != "3" or out["bind_inprocess"].strip() != "3" or uuids[3] not in out["gpusel bind"]:
    sys.exit(f"the binds disagree: {out}")

times = {name: [] for name in commands}
for _ in range(args.runs):
    for name, cmd in commands.items():
        t0 = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=True)
        times[name].append(time.perf_counter() - t0)

med = {name: statistics.median(ts) for name, ts in times.items()}
print(f"simulated dgx-h100, {args.runs} runs each, round-robin; whole processes, medians")
for name, ts in times.items():
    print(f"  {name:<16} median {med[name] * 1e3:6.2f} ms   min {min(ts) * 1e3:6.2f} ms")
true = med["/bin/true"]
for ours, floor, target in (("gpusel resolve", "floor_nvml", 1.15), ("gpusel bind", "floor_bind", 1.1),
                            ("bind_inprocess", "floor_bind", 1.1)):
    ratio = med[ours] / med[floor]
    above = (med[ours] - true) / (med[floor] - true)
    print(f"  {ours} / {floor}: {ratio:.2f}x (target {target}x{', met' if ratio <= target else ', missed'}); "
          f"{above:.2f}x counting only the time above /bin/true")
