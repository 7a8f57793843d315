#!/usr/bin/env python3
"""Times `gpusel --sim dgx-h100 bench bw` at its defaults (512 MiB buffers, 16 copies per sample,
3 samples, h2d,d2h,d2d): once for one GPU and once for the example in docs/commands.md (two GPUs,
1 GiB, 4 copies), and checks that the figures still equal the machine file's.

Usage: bench/bench_bw_sim.py [--runs N] [--build DIR]
Target: a default run on one simulated GPU in a few seconds (at most 5 s median): simulated
copies cost simulated time, not real time in proportion to their size. Before the sampled copies
of the CUDA double (GPUSEL_SIM_SAMPLED_COPIES), these took 42 s and 76 s on the 2-core build
machine.
"""

import argparse
import json
import os
import statistics
import subprocess
import time

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
parser = argparse.ArgumentParser()
parser.add_argument("--runs", type=int, default=3)
parser.add_argument("--build", default=os.path.join(root, "build"))
args = parser.parse_args()
gpusel = os.path.join(args.build, "bin", "gpusel")
env = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", "GPUSEL_SIM_MACHINE")}
env["GPUSEL_LEASE_DIR"] = os.path.join("/tmp", f"gpusel-bench-bw-{os.getpid()}")

cases = {
    "one GPU, defaults": ["--gpu", "0"],
    "README example": ["--gpu", "0,1", "--size", "1GiB", "--copies", "4"],
}
worst = 0.0
for name, extra in cases.items():
    times = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        r = subprocess.run([gpusel, "--sim", "dgx-h100", "bench", "bw", "--json", *extra], env=env,
                           capture_output=True, text=True, check=True)
        times.append(time.perf_counter() - t0)
    rows = json.loads(r.stdout)["results"]
    rates = sorted({(row["test"], round(row["gbps"], 1)) for row in rows})
    median = statistics.median(times)
    worst = max(worst, median)
    print(f"{name:20} median {median:6.2f} s (min {min(times):.2f}, max {max(times):.2f}, {args.runs} runs); "
          f"rates {rates}; all verified: {all(row['verified'] for row in rows)}")
print("target: at most 5 s median for one GPU at defaults:",
      "met" if worst <= 5 else "NOT met")
