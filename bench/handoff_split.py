#!/usr/bin/env python3
"""Splits the named hand-off (bench/leases.py) into its steps, on the simulated dgx-h100: a job
holding GPU 3 ends, and a job waiting for GPU 3 (`--wait`) starts its worker. Both `gpusel run`s
are started with bench/handoff_stamps.c preloaded, which stamps (wall clock) when each wakes,
the holder's close of its lease file, the waiter's take of it and the start of its worker; the
holder's worker stamps its last moment, the waiter's worker its first.

  last moment   the holder's worker (sh) writes the time, then it and sh exit
  -> holder wakes        gpusel run (the holder) told that its worker ended
  -> release             it closes its lease file (the lease goes)
  -> waiter wakes        the waiting gpusel run told of the release
  -> take                it locks the lease file
  -> worker start        it starts its worker (clone)
  -> worker's first      that worker (date) reads the clock

Usage: bench/handoff_split.py [--runs N] [--build DIR] [--gpusel BIN]
(--build: where bin/handoff_stamps.so is; --gpusel: the gpusel to time, default BUILD/bin/gpusel.)
flock(1) handing a lock from one program to the next, the floor bench/leases.py times beside,
has only the first and the last two steps of its own.
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
parser.add_argument("--runs", type=int, default=20)
parser.add_argument("--build", default=os.path.join(root, "build"))
parser.add_argument("--gpusel")
args = parser.parse_args()

gpusel = args.gpusel or os.path.join(args.build, "bin", "gpusel")
shim = os.path.join(args.build, "bin", "handoff_stamps.so")
if not os.path.exists(shim):
    sys.exit(f"{shim} is missing: build the default preset (bench/CMakeLists.txt)")
tmp = tempfile.TemporaryDirectory(prefix="gpusel-handoff-")
env = dict(sim_environment(gpusel, "dgx-h100"), GPUSEL_LEASE_DIR=os.path.join(tmp.name, "leases"))
subprocess.run([gpusel, "run", "--quiet", "--gpu", "3", "--", "true"], env=env, check=True)  # the file


def stamps(path, step, after):
    with open(path) as f:
        return [float(line.split()[0]) for line in f if line.split()[2] == step and float(line.split()[0]) > after]


steps = ["holder wakes", "release", "waiter wakes", "take", "worker start", "worker's first"]
rows = []
for i in range(args.runs):
    held, waited, last = (os.path.join(tmp.name, f"{name}{i}") for name in ("holder", "waiter", "last"))
    holder = subprocess.Popen([gpusel, "run", "--quiet", "--gpu", "3", "--", "sh", "-c", f"sleep 0.3; date +%s.%N > {last}"],
                              env=dict(env, LD_PRELOAD=shim, HANDOFF_STAMPS=held))
    time.sleep(0.1)  # the holder has its lease
    waiter = subprocess.Popen([gpusel, "run", "--quiet", "--gpu", "3", "--wait", "--", "date", "+%s.%N"],
                              env=dict(env, LD_PRELOAD=shim, HANDOFF_STAMPS=waited), stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    first = float(waiter.communicate()[0])
    if holder.wait() or waiter.returncode:
        sys.exit("a hand-off job failed")
    with open(last) as f:
        t0 = float(f.read())
    wake = stamps(held, "wake", t0)[0]
    release = stamps(held, "close", wake)[-1]  # its last descriptor of the file
    woken = stamps(waited, "wake", release)[0]
    take = stamps(waited, "take", woken)[0]
    start = stamps(waited, "start", take)[0]
    points = [t0, wake, release, woken, take, start, first]
    rows.append([b - a for a, b in zip(points, points[1:])] + [first - t0])
print(f"the named hand-off on the simulated dgx-h100, step by step, medians of {args.runs}:")
for k, name in enumerate(steps):
    print(f"  -> {name:<16} {statistics.median(r[k] for r in rows) * 1e3:6.3f} ms")
print(f"  whole hand-off      {statistics.median(r[-1] for r in rows) * 1e3:6.3f} ms "
      "(with the stamps' own cost, a few microseconds a step)")
