#!/usr/bin/env python3
"""What `gpusel run`'s placement check costs: the CPU time of the gpusel process itself while 8
workers hold their GPUs on the simulated dgx-h100, with the check (the default) and without it
(--no-placement-check), side by side.

Each worker is tests/integration/cuda_local_rank.c (built as build/bin/cuda_local_rank): it opens
a context on CUDA device LOCAL_RANK (run with --set-visible job, so that is its own GPU), allocates
and sleeps, so NVML lists one process on each GPU and the check has real lists to walk. The CPU
time is read from /proc/PID/task/*/schedstat (gpusel alone, not its children) twice: once
after the check's fast start (looks at 0.5, 1.5, 3.5 and 7.5 s) and once just before the workers
end; the steady figure is the CPU time between the two over the wall time between them.

Usage: bench/placement_check.py [--seconds S] [--rounds N] [--build DIR]
Target: the check costs under 1% of one core with 8 workers (steady state).
"""

import argparse
import atexit
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from simenv import sim_environment

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
parser = argparse.ArgumentParser()
parser.add_argument("--seconds", type=float, default=40.0, help="how long each worker holds its GPU")
parser.add_argument("--rounds", type=int, default=1, help="runs of each kind")
parser.add_argument("--build", default=os.path.join(root, "build"))
args = parser.parse_args()
if args.seconds < 15:
    sys.exit("bench/placement_check.py: --seconds must be at least 15 (the check's fast start takes 7.5 s)")

gpusel = os.path.join(args.build, "bin", "gpusel")
worker = os.path.join(args.build, "bin", "cuda_local_rank")
for path in (gpusel, worker):
    if not os.access(path, os.X_OK):
        sys.exit(f"bench/placement_check.py: {path} is missing: build the default preset first "
                 "(cmake --preset default && cmake --build --preset default)")
tmp = tempfile.mkdtemp(prefix="gpusel-bench-check-")
atexit.register(shutil.rmtree, tmp, True)
env = dict(sim_environment(gpusel, "dgx-h100"), GPUSEL_LEASE_DIR=os.path.join(tmp, "leases"),
           GPUSEL_SIM_STATE_DIR=os.path.join(tmp, "state"))


def cpu_seconds(pid):
    """The CPU time of the process itself (every thread of it, none of its children), in seconds:
    the scheduler's own count in nanoseconds (/proc/PID/task/TID/schedstat), as utime and stime
    count in clock ticks (10 ms), too coarse for a few milliseconds in half a minute."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:  # the thread ended meanwhile
            pass
    return total / 1e9


def one_run(check):
    cmd = [gpusel, "run", "--quiet", "--gpu", "0,1,2,3,4,5,6,7", "--set-visible", "job"]
    if not check:
        cmd.append("--no-placement-check")
    cmd += ["--", worker, str(int(args.seconds))]
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(9.0)
    c1, w1 = cpu_seconds(p.pid), time.monotonic()
    time.sleep(max(0.0, t0 + args.seconds - 1.0 - time.monotonic()))
    c2, w2 = cpu_seconds(p.pid), time.monotonic()
    out, err = p.communicate(timeout=args.seconds + 60)
    if p.returncode != 0:
        sys.exit(f"bench/placement_check.py: {' '.join(cmd)} exited {p.returncode}:\n{out}{err}")
    if out.count("on CUDA device") != 8:
        sys.exit(f"bench/placement_check.py: expected 8 workers on their GPUs, got:\n{out}{err}")
    return (c2 - c1) / (w2 - w1), c2 / (w2 - t0)


steady = {True: [], False: []}
whole = {True: [], False: []}
for _ in range(args.rounds):
    for check in (True, False):
        s, w = one_run(check)
        steady[check].append(s)
        whole[check].append(w)

print(f"gpusel run's own CPU time, 8 workers of {args.seconds:g} s each on the simulated dgx-h100, "
      f"{args.rounds} run(s) each, load average {os.getloadavg()[0]:.1f}")
for check, name in ((True, "with the check"), (False, "--no-placement-check")):
    print(f"  {name:22s} steady {100 * statistics.median(steady[check]):6.3f}% of one core, "
          f"whole run {100 * statistics.median(whole[check]):6.3f}%")
cost = statistics.median(steady[True]) - statistics.median(steady[False])
print(f"the check's steady cost: {100 * cost:.3f}% of one core (target under 1%)")
