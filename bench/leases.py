#!/usr/bin/env python3
"""free:N and leases on the simulated dgx-h100: the time from starting `gpusel run` to its first
worker's start, with `--gpu free:2` (usage and topology read through NVML, candidates leased, the
best pair picked) against `--gpu 0,1` (resolved and leased), side by side; and the throughput of
16 jobs contending for GPUs at once with `--gpu free:2 --wait`.

Usage: bench/leases.py [--runs N] [--build DIR]
Target: free:2 within 1.2x of 0,1.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from simenv import sim_environment

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
parser = argparse.ArgumentParser()
parser.add_argument("--runs", type=int, default=50)
parser.add_argument("--build", default=os.path.join(root, "build"))
args = parser.parse_args()

gpusel = os.path.join(args.build, "bin", "gpusel")
tmp = tempfile.mkdtemp(prefix="gpusel-bench-leases-")
env = dict(sim_environment(gpusel, "dgx-h100"), GPUSEL_LEASE_DIR=os.path.join(tmp, "leases"),
           GPUSEL_SIM_STATE_DIR=os.path.join(tmp, "state"))
stamp = os.path.join(tmp, "started")
# The first worker's start, as a wall-clock time written by the worker itself (date +%s.%N).
worker = ["sh", "-c", f'[ "$RANK" = 0 ] && date +%s.%N > {stamp}; true']

def to_first_worker(spec):
    t0 = time.time()
    subprocess.run([gpusel, "run", "--quiet", "--gpu", spec, "--", *worker], env=env, check=True)
    with open(stamp) as f:
        return float(f.read()) - t0

times = {"--gpu 0,1": [], "--gpu free:2": []}
for _ in range(args.runs):
    for name in times:
        times[name].append(to_first_worker(name.split()[1]))
print(f"time from starting gpusel run to its first worker, simulated dgx-h100, {args.runs} runs each")
for name, ts in times.items():
    print(f"  {name:<14} median {statistics.median(ts) * 1e3:7.2f} ms   min {min(ts) * 1e3:7.2f} ms   "
          f"max {max(ts) * 1e3:7.2f} ms")
ratio = statistics.median(times["--gpu free:2"]) / statistics.median(times["--gpu 0,1"])
print(f"  free:2 takes {ratio:.2f}x the time of 0,1 (target: at most 1.2x)")

# 16 jobs at once, each holding two GPUs for 50 ms: at most four run together on 8 GPUs.
jobs = 16
t0 = time.perf_counter()
procs = [subprocess.Popen([gpusel, "run", "--quiet", "--gpu", "free:2", "--wait", "--", "sleep", "0.05"], env=env,
                          stderr=subprocess.DEVNULL) for _ in range(jobs)]
codes = [p.wait() for p in procs]
wall = time.perf_counter() - t0
if any(codes):
    sys.exit(f"a contending job failed: exit codes {codes}")
print(f"{jobs} jobs contending for 2 GPUs each (50 ms of work each): all done in {wall:.2f} s, "
      f"{jobs / wall:.1f} leases per second; the work alone, four jobs at a time, is "
      f"{jobs / 4 * 0.05:.2f} s")
