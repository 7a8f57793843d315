#!/usr/bin/env python3
"""The simulator's own costs as machines grow (issue 24): how many times a process parses its
machine file, what that parsing costs, and what pairwise topology costs the simulated NVML, at 8,
64, 256 and 1,024 simulated H100s (bench/scale.py's machine files), for this build's simulator and,
with --before DIR, another simulator folder beside it (e.g. a copy of an older build's
lib/gpusel/sim; the same gpusel runs over both).

Usage: bench/sim_scale.py [--sizes 8,64,256,1024] [--build DIR] [--before DIR] [--peers N]
                          [--keep DIR]

Every figure is counted under valgrind's callgrind (whole process, children not followed), so a
loaded machine does not move it:
  parses        calls of gpusel::sim::parse_machine in the process, whichever library made them
  instructions  the whole process's
  parsing       the share of them spent in those calls
  per pair      for bench/sim_topology.c (each GPU's topology level and NVLink P2P status against
                its next N GPUs through NVML, N = --peers, default 63): its instructions less those
                of the same program asking no pairs, divided by the pairs asked. Flat as the
                machine grows when a look-up is O(1) (all-pairs topology quadratic), growing with
                it when a look-up is linear (all-pairs topology cubic).
"""

import argparse
import atexit
import os
import shutil
import subprocess
import sys
import tempfile

from simenv import h100_machine, sim_environment

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
parser = argparse.ArgumentParser()
parser.add_argument("--sizes", default="8,64,256,1024")
parser.add_argument("--build", default=os.path.join(root, "build"))
parser.add_argument("--before", help="another simulator folder (holding libnvidia-ml.so.1) to count beside")
parser.add_argument("--peers", type=int, default=63, help="pairs per GPU for the topology measure")
parser.add_argument("--keep", help="write the machine files here and keep them")
args = parser.parse_args()
sizes = [int(s) for s in args.sizes.split(",")]
PARSE = "gpusel::sim::parse_machine("


def count(cmd, env):
    """(instructions, parses, instructions in parses) of one run under callgrind."""
    with tempfile.NamedTemporaryFile(suffix=".callgrind") as out:
        r = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out.name}", *cmd],
                           capture_output=True, text=True, env=env)
        if r.returncode != 0:
            sys.exit(f"{cmd} failed under callgrind (exit {r.returncode}): {r.stderr[-800:]}")
        total = None
        for text in r.stderr.splitlines():
            if "Collected :" in text:
                total = int(text.split("Collected :")[1].split()[0])
        names, callee, calls, parses, parse_ins = {}, "", None, 0, 0
        with open(out.name) as f:
            for line in f:
                if line.startswith(("fn=", "cfn=")):
                    # "(id) name" the first time a function is named, "(id)" after.
                    ident, _, name = line.split("=", 1)[1].strip().partition(" ")
                    if name:
                        names[ident] = name
                    if line.startswith("cfn="):
                        callee = names.get(ident, ident)
                elif line.startswith("calls="):
                    calls = int(line.split("=", 1)[1].split()[0])
                elif calls is not None and (line[:1].isdigit() or line[:1] in "+-*"):
                    # The cost line after calls=: the call's inclusive cost.
                    if callee.startswith(PARSE) and "::{" not in callee:  # not a lambda in it
                        parses += calls
                        parse_ins += int(line.split()[1])
                    calls = None
        if total is None:
            sys.exit(f"callgrind gave no count for {cmd}")
        return total, parses, parse_ins


def environment(path, sim_root):
    base = dict(os.environ)
    if sim_root:
        base["GPUSEL_SIM_ROOT"] = os.path.abspath(sim_root)
    return sim_environment(gpusel, path, base)


gpusel = os.path.join(args.build, "bin", "gpusel")
floor_nvml = os.path.join(args.build, "bin", "floor_nvml")
floor_bind = os.path.join(args.build, "bin", "floor_bind")
topology = os.path.join(args.build, "bin", "sim_topology")
folder = args.keep or tempfile.mkdtemp(prefix="gpusel-sim-scale-")
if not args.keep:
    atexit.register(shutil.rmtree, folder, True)
os.makedirs(folder, exist_ok=True)
eight = "0,1,2,3,4,5,6,7"
sims = [("this build", None)] + ([("before", args.before)] if args.before else [])

print("| GPUs | command | simulator | parses | instructions | parsing | per pair |")
print("|---|---|---|---|---|---|---|")
for size in sizes:
    path = os.path.join(folder, f"h100-{size}.toml")
    with open(path, "w") as f:
        f.write(h100_machine(size))
    for label, sim_root in sims:
        env = environment(path, sim_root)
        uuid = subprocess.run([gpusel, "resolve", "--gpu", "3"], env=env, capture_output=True, text=True,
                              check=True).stdout.split()[0]
        commands = [("gpusel list", [gpusel, "list"]),
                    ("gpusel --sim FILE list", [gpusel, "--sim", path, "list"]),
                    ("gpusel resolve --gpu 0-7", [gpusel, "resolve", "--gpu", eight]),
                    ("gpusel bind --gpu 3", [gpusel, "bind", "--gpu", "3"]),
                    ("gpusel run --gpu 0-7 -- true", [gpusel, "run", "--gpu", eight, "--", "true"]),
                    ("floor_nvml", [floor_nvml]),
                    ("floor_bind UUID", [floor_bind, uuid])]
        for name, cmd in commands:
            total, parses, parse_ins = count(cmd, env)
            print(f"| {size} | `{name}` | {label} | {parses} | {total / 1e6:.2f} M | {parse_ins / total:.0%} | |",
                  flush=True)
        base, _, _ = count([topology, "0"], env)
        total, _, _ = count([topology, str(args.peers)], env)
        pairs = size * min(args.peers, size - 1)
        print(f"| {size} | `sim_topology {args.peers}` ({pairs} pairs) | {label} | | {total / 1e6:.2f} M | | "
              f"{(total - base) / max(pairs, 1):.0f} |", flush=True)
