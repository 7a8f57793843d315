#!/usr/bin/env python3
"""Times a CUDA runtime program's start-up on the simulator: tests/integration/cuda_runtime_user.cu
built with the CUDA toolkit's nvcc (`nvcc -cudart shared`), run with `--devices` (it loads the
simulator's libcudart.so.13, which loads the simulated libcuda.so.1 and its machine file, then asks
for every device's properties and prints them) on a dgx-h100 whose driver supports CUDA 13. The
program is started directly with the variables `gpusel sim env` prints, so gpusel's own start-up is
not counted; `/bin/true` under the same variables is the floor of starting any process.

Usage: bench/sim_runtime_startup.py [--runs N] [--build DIR] [--nvcc PATH]
Reports the median, min and max wall time of each, and the runtime program's figure above the floor.
"""

import argparse
import atexit
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
parser = argparse.ArgumentParser()
parser.add_argument("--runs", type=int, default=20)
parser.add_argument("--build", default=os.path.join(root, "build"))
parser.add_argument("--nvcc", default="/usr/local/cuda/bin/nvcc")
args = parser.parse_args()
if not os.path.exists(args.nvcc):
    sys.exit(f"no CUDA toolkit: {args.nvcc} is absent")

gpusel = os.path.join(args.build, "bin", "gpusel")
out = os.path.join(args.build, "sim-cuda-programs")
os.makedirs(out, exist_ok=True)
program = os.path.join(out, "cuda_runtime_user_shared")
source = os.path.join(root, "tests", "integration", "cuda_runtime_user.cu")
if not os.path.exists(program) or os.path.getmtime(program) < os.path.getmtime(source):
    subprocess.run([args.nvcc, "-cudart", "shared", source, "-o", program], check=True)

tmp = tempfile.mkdtemp(prefix="gpusel-bench-runtime-")
atexit.register(shutil.rmtree, tmp, True)
with open(os.path.join(root, "sim", "machines", "dgx-h100.toml")) as f:
    text = f.read()
text = re.sub(r'^driver_version = ".*"$', 'driver_version = "580.65.06"', text, flags=re.M)
text = re.sub(r"^cuda_driver_version = \d+$", "cuda_driver_version = 13000", text, flags=re.M)
machine = os.path.join(tmp, "dgx-h100-580.toml")
with open(machine, "w") as f:
    f.write(text)

env = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")}
env["GPUSEL_SIM_STATE_DIR"] = os.path.join(tmp, "state")
exports = subprocess.run([gpusel, "sim", "env", machine], capture_output=True, text=True, env=env,
                         check=True).stdout
for line in exports.splitlines():
    if line.startswith("export "):
        key, _, value = line[len("export "):].partition("=")
        env[key] = value.strip("'")


def timed(cmd):
    times = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t0)
    return times


timed([program, "--devices"])  # warm the page cache once
floor = timed(["/bin/true"])
runtime = timed([program, "--devices"])
for name, times in (("/bin/true (floor)", floor), ("runtime program --devices", runtime)):
    print(f"{name:28} median {statistics.median(times) * 1e3:7.1f} ms "
          f"(min {min(times) * 1e3:.1f}, max {max(times) * 1e3:.1f}, {args.runs} runs)")
print(f"start-up of a CUDA runtime program on the simulated dgx-h100 (8 GPUs, every property read): "
      f"{(statistics.median(runtime) - statistics.median(floor)) * 1e3:.1f} ms above the floor")
