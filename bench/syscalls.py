#!/usr/bin/env python3
"""System calls of `gpusel list` and `gpusel resolve --gpu free:4` at 8 and 1,024 simulated GPUs
(issue 34): the total of `strace -f -c` (the command and any child), beside the target (at most
2,000 at 1,024 GPUs, and at most 1.2x of linear growth from 8), with `gpusel resolve --gpu
0,...,7` and the C floor `floor_nvml` (dlopen NVML, enumerate every UUID) as baselines.

Usage: bench/syscalls.py [--sizes 8,1024] [--build DIR] [--keep DIR] [--top N]

The machines are bench/scale.py's (H100s, 8 per NVLink domain). Each size runs in three states,
each command once before it is counted (so that the folders a first run makes are there, as on
a machine in use):
  idle      fresh lease and usage folders (GPUSEL_LEASE_DIR, GPUSEL_SIM_STATE_DIR), nothing run
  leases    after `gpusel run --gpu 0,1,2,3 -- true` and `gpusel run --gpu free:4 -- true`: lease
            files in the store, as after any use
  in use    the same, and a CUDA program (the tests' cuda_hold) holding a context on GPU 0 while
            the commands run: the simulator's usage entries read (skipped when cuda_hold is not
            built)
"linear" is the count at the smallest size times the growth of the machine; "of linear" the
count at the largest size divided by that (the target: at most 1.2x). --top N lists each
command's N most frequent system calls at the largest size. Counts are exact for a given tree,
whatever the machine's load.
"""

import argparse
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import time

from simenv import h100_machine, sim_environment

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
parser = argparse.ArgumentParser()
parser.add_argument("--sizes", default="8,1024")
parser.add_argument("--build", default=os.path.join(root, "build"))
parser.add_argument("--keep", help="write the machine files and folders here and keep them")
parser.add_argument("--top", type=int, default=0, help="list each command's N most frequent calls")
args = parser.parse_args()
sizes = [int(s) for s in args.sizes.split(",")]
TARGET_TOTAL = 2000
TARGET_LINEAR = 1.2


def strace_counts(cmd, env):
    """{syscall: calls} and the total of one run under `strace -f -c`."""
    with tempfile.NamedTemporaryFile(suffix=".strace") as out:
        r = subprocess.run(["strace", "-f", "-c", "-o", out.name, *cmd], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            sys.exit(f"{cmd} failed under strace (exit {r.returncode}): {r.stderr[-800:]}")
        calls, total = {}, None
        with open(out.name) as f:
            for line in f:
                fields = line.split()
                # "% time  seconds  usecs/call  calls  [errors]  syscall", then a "total" row.
                if len(fields) < 5 or not fields[0][0].isdigit():
                    continue
                if fields[-1] == "total":
                    total = int(fields[3])
                else:
                    calls[fields[-1]] = int(fields[3])
        if total is None:
            sys.exit(f"no total in strace's summary of {cmd}")
        return calls, total


def main():
    if shutil.which("strace") is None:
        sys.exit("strace is not installed (scripts/install-deps installs it)")
    gpusel = os.path.join(args.build, "bin", "gpusel")
    floor_nvml = os.path.join(args.build, "bin", "floor_nvml")
    cuda_hold = os.path.join(args.build, "bin", "cuda_hold")
    eight = "0,1,2,3,4,5,6,7"
    folder = args.keep or tempfile.mkdtemp(prefix="gpusel-syscalls-")
    os.makedirs(folder, exist_ok=True)
    measures = [("list", ["list"]), ("resolve free:4", ["resolve", "--gpu", "free:4"]),
                ("resolve 0-7", ["resolve", "--gpu", eight])]
    states = ["idle", "leases"] + (["in use"] if os.path.exists(cuda_hold) else [])
    counts = {}  # (state, measure, size) -> (calls, total)
    print(f"machines and folders in {folder}", flush=True)
    for count in sizes:
        path = os.path.join(folder, f"h100-{count}.toml")
        with open(path, "w") as f:
            f.write(h100_machine(count))
        for state in states:
            where = os.path.join(folder, f"{count}-{state.replace(' ', '-')}")
            shutil.rmtree(where, ignore_errors=True)
            os.makedirs(where)
            base = dict(os.environ, GPUSEL_LEASE_DIR=os.path.join(where, "leases"),
                        GPUSEL_SIM_STATE_DIR=os.path.join(where, "sim-state"))
            for name in ("CUDA_VISIBLE_DEVICES", "GPUSEL_GPUS", "GPUSEL_GPU"):
                base.pop(name, None)
            env = sim_environment(gpusel, path, base)
            holder = None
            if state != "idle":
                for spec in ("0,1,2,3", "free:4"):
                    subprocess.run([gpusel, "run", "--quiet", "--gpu", spec, "--", "true"], env=env,
                                   check=True, stdout=subprocess.DEVNULL)
            if state == "in use":
                go = os.path.join(where, "go")
                open(go, "w").close()
                lock = open(go)
                fcntl.flock(lock, fcntl.LOCK_EX)
                holder = subprocess.Popen([cuda_hold, where], env=dict(env, CUDA_VISIBLE_DEVICES="0"),
                                          stdout=subprocess.DEVNULL)
                while not any(n.startswith("ready.") for n in os.listdir(where)):
                    if holder.poll() is not None:
                        sys.exit("cuda_hold ended before it held its context")
                    time.sleep(0.01)
            try:
                for name, rest in measures:
                    subprocess.run([gpusel, *rest], env=env, check=True, stdout=subprocess.DEVNULL)
                    counts[(state, name, count)] = strace_counts([gpusel, *rest], env)
                if state == "idle":
                    counts[(state, "floor_nvml", count)] = strace_counts([floor_nvml], env)
            finally:
                if holder is not None:
                    lock.close()
                    holder.wait()
            for name in [m[0] for m in measures] + ["floor_nvml"]:
                if (state, name, count) in counts:
                    print(f"  {count} GPUs, {state}: {name}: {counts[(state, name, count)][1]} system calls",
                          flush=True)
    small, large = sizes[0], sizes[-1]
    print()
    print(f"| state | command | {small} GPUs | {large} GPUs | linear from {small} | of linear "
          f"(target {TARGET_LINEAR}x) | at {large} (target {TARGET_TOTAL:,}) | getpid at {large} |")
    print("|---|---|---|---|---|---|---|---|")
    for state in states:
        for name in [m[0] for m in measures] + ["floor_nvml"]:
            if (state, name, large) not in counts:
                continue
            a = counts[(state, name, small)][1]
            calls, b = counts[(state, name, large)]
            linear = a * large / small
            targeted = name in ("list", "resolve free:4")
            verdict = ("met" if b <= TARGET_TOTAL else "missed") if targeted else ""
            print(f"| {state} | {name} | {a:,} | {b:,} | {linear:,.0f} | {b / linear:.2f}x | "
                  f"{b:,}{' ' + verdict if verdict else ''} | {calls.get('getpid', 0)} |")
    if args.top:
        for state in states:
            for name, _ in measures:
                calls, total = counts[(state, name, large)]
                top = sorted(calls.items(), key=lambda kv: -kv[1])[:args.top]
                print(f"{large} GPUs, {state}, {name} ({total}): " +
                      ", ".join(f"{k} {v}" for k, v in top))


if __name__ == "__main__":
    main()
