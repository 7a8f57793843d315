#!/usr/bin/env python3
"""Times `gpusel run --gpu 0,...,7 -- true` on the simulated dgx-h100 against a plain shell that
starts the same eight `true` processes and waits for them, side by side, and prints the ratio.
Beside them, bench/floor_spawn (a C program that posix_spawns the eight and waits: the least a
launcher that starts workers from one process takes), and the same three with one worker, which
splits each one's time into a fixed part (gpusel's: start, NVML, leases) and a part per worker.

Usage: bench/run_vs_shell.py [--runs N] [--build DIR] [--gpusel BIN]
The simulated machine is set through the environment, as after `eval "$(gpusel sim env dgx-h100)"`.
Both commands are started the same way, alternately, N times each; medians are compared.
Targets: gpusel within 1.5x of the shell (issue 14), within 1.15x (issue 34).
"""

import argparse
import os
import shutil
import statistics
import subprocess

from simenv import sim_environment
import time

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
parser = argparse.ArgumentParser()
parser.add_argument("--runs", type=int, default=100)
parser.add_argument("--build", default=os.path.join(root, "build"))
parser.add_argument("--gpusel", help="the gpusel to time (default: BUILD/bin/gpusel); e.g. the product "
                    "preset's, build-product/bin/gpusel, as the quick start installs it")
args = parser.parse_args()

gpusel = args.gpusel or os.path.join(args.build, "bin", "gpusel")
env = sim_environment(gpusel, "dgx-h100")

# The same executable for both (not the shell's builtin `true`, which would skip the exec).
true = shutil.which("true")
floor = os.path.join(args.build, "bin", "floor_spawn")
commands = {
    "gpusel run": [gpusel, "run", "--gpu", "0,1,2,3,4,5,6,7", "--", true],
    "sh: 8x true & wait": ["sh", "-c", " ".join([f"{true} &"] * 8) + " wait"],
    "floor_spawn 8": [floor, "8", true],
    "gpusel run, 1 GPU": [gpusel, "run", "--gpu", "0", "--", true],
    "sh: 1x true & wait": ["sh", "-c", f"{true} & wait"],
    "floor_spawn 1": [floor, "1", true],
}
times = {name: [] for name in commands}
for _ in range(args.runs):
    for name, cmd in commands.items():
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, stderr=subprocess.DEVNULL)
        times[name].append(time.perf_counter() - t0)

print(f"8 workers running {true} on the simulated dgx-h100, {args.runs} runs each")
for name, ts in times.items():
    print(f"  {name:<20} median {statistics.median(ts) * 1e3:7.2f} ms   "
          f"min {min(ts) * 1e3:7.2f} ms   max {max(ts) * 1e3:7.2f} ms")
med = {name: statistics.median(ts) * 1e3 for name, ts in times.items()}
for name, one in (("gpusel run", "gpusel run, 1 GPU"), ("sh: 8x true & wait", "sh: 1x true & wait"),
                  ("floor_spawn 8", "floor_spawn 1")):
    per = (med[name] - med[one]) / 7
    print(f"  {name:<20} fixed {med[one] - per:6.2f} ms, then {per:5.2f} ms a worker")
print(f"  floor_spawn 8 takes {med['floor_spawn 8'] / med['sh: 8x true & wait']:.2f}x the shell's time; gpusel run "
      f"{med['gpusel run'] / med['floor_spawn 8']:.2f}x floor_spawn's")
ratio = statistics.median(times["gpusel run"]) / statistics.median(times["sh: 8x true & wait"])
print(f"  gpusel run takes {ratio:.2f}x the shell's time (targets: at most 1.5x, issue 14: {'met' if ratio <= 1.5 else 'missed'}; "
      f"at most 1.15x, issue 34: {'met' if ratio <= 1.15 else 'missed'})")
