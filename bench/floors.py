#!/usr/bin/env python3
"""Times gpusel's fast paths against their floors, side by side in one run on the simulated
dgx-h100, and prints the ratios (targets in wall time, issues 14, 24 and 34: resolve within 1.15x
of its floor, bind within 1.2x, the worker API's bind within 1.1x; in instructions, issue 34:
resolve within 1.05x, bind within 1.10x).

  floor_nvml                        dlopen NVML, init, enumerate the 8 UUIDs, exit (bench/floor_nvml.c)
  gpusel resolve --gpu 0,...,7      against floor_nvml
  floor_bind UUID                   cuInit, enumerate UUIDs, retain the primary context, make it
                                    current (bench/floor_bind.c)
  gpusel bind --gpu 3               against floor_bind
  floor_bind --index 3              floor_bind handed the nvidia-smi index as gpusel bind is: NVML init,
                                    the handle of index 3 and its UUID first (shown beside, no target)
  bind_inprocess                    the worker API as a worker under `gpusel run` uses it
                                    (GPUSEL_GPU=UUID, bind_assigned_gpu) in a program of its own,
                                    against floor_bind

  gpusel run --gpu 3 -- bind_inprocess, less gpusel run --gpu 3 -- /bin/true
                                    a worker's bind under gpusel run (its lease inherited), against
                                    floor_bind less /bin/true (issue 34: at most 1.5x)

Usage: bench/floors.py [--runs N] [--build DIR] [--gpusel BIN] [--instructions] [--leases] [--load N]
--leases: every GPU has a lease file in a lease folder of the run's own (as on a machine in use;
without it the folder is empty). --load N: N busy processes run beside the timed commands (issue
34 asks for the ratios "with lease files present and another process loading the machine").
Every command is started the same way (fork+exec from this script), round-robin, N times each;
medians and fastest runs are compared. /bin/true gives the cost of starting any process. On a
loaded machine the medians swing; --instructions also counts each command's instructions under
valgrind's callgrind (whole process, repeatable whatever the load) and compares those. Each
command's minor page faults (with what it waited for) are printed beside its time, with what one
fault costs on this machine: on a virtual machine a fault can take 10-20 us, and then faults
rather than instructions decide the wall-time ratios.
"""

import argparse
import mmap
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from simenv import sim_environment

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
parser = argparse.ArgumentParser()
parser.add_argument("--runs", type=int, default=300)
parser.add_argument("--build", default=os.path.join(root, "build"))
parser.add_argument("--gpusel", help="the gpusel to time (default: BUILD/bin/gpusel); e.g. the product "
                    "preset's, build-product/bin/gpusel, as the quick start installs it")
parser.add_argument("--instructions", action="store_true", help="also count instructions with callgrind")
parser.add_argument("--leases", action="store_true", help="every GPU has a lease file")
parser.add_argument("--load", type=int, default=0, help="busy processes beside the timed commands")
args = parser.parse_args()

gpusel = args.gpusel or os.path.join(args.build, "bin", "gpusel")
lease_dir = tempfile.TemporaryDirectory(prefix="gpusel-floors-")
env = dict(sim_environment(gpusel, "dgx-h100"), GPUSEL_LEASE_DIR=lease_dir.name)
if args.leases:
    subprocess.run([gpusel, "run", "--quiet", "--gpu", "0,1,2,3,4,5,6,7", "--", "true"], env=env, check=True)
    if len([n for n in os.listdir(lease_dir.name) if n.endswith(".lock")]) < 8:
        sys.exit(f"--leases: no lease file for every GPU in {lease_dir.name}: {os.listdir(lease_dir.name)}")
uuids = subprocess.run([gpusel, "resolve", "--gpu", "0,1,2,3,4,5,6,7"], capture_output=True, text=True, env=env,
                       check=True).stdout.split()
commands = {
    "/bin/true": ["/bin/true"],
    "floor_nvml": [os.path.join(args.build, "bin", "floor_nvml")],
    "gpusel resolve": [gpusel, "resolve", "--gpu", "0,1,2,3,4,5,6,7"],
    "floor_bind": [os.path.join(args.build, "bin", "floor_bind"), uuids[3]],
    "gpusel bind": [gpusel, "bind", "--gpu", "3"],
    "floor_bind index": [os.path.join(args.build, "bin", "floor_bind"), "--index", "3"],
    # A worker under gpusel run gets its GPU's UUID in GPUSEL_GPU; the floor gets it as argument.
    "bind_inprocess": [os.path.join(args.build, "bin", "bind_inprocess")],
    "run 3 -- true": [gpusel, "run", "--quiet", "--gpu", "3", "--", "/bin/true"],
    "run 3 -- bind": [gpusel, "run", "--quiet", "--gpu", "3", "--", os.path.join(args.build, "bin", "bind_inprocess")],
}
envs = {name: env for name in commands}
envs["bind_inprocess"] = dict(env, GPUSEL_GPU=uuids[3])
# The same answers: the floors do the same work.
out = {name: subprocess.run(cmd, capture_output=True, text=True, env=envs[name], check=True).stdout
       for name, cmd in commands.items()}
if out["floor_nvml"].split() != uuids:
    sys.exit(f"floor_nvml disagrees: {out['floor_nvml']!r} vs {uuids}")
if (out["floor_bind"].strip() != "3" or out["floor_bind index"].strip() != "3"
        or out["bind_inprocess"].strip() != "3" or out["run 3 -- bind"].strip() != "3"
        or uuids[3] not in out["gpusel bind"]):
    sys.exit(f"the binds disagree: {out}")

load = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.load)]
times = {name: [] for name in commands}
faults = {name: [] for name in commands}  # minor page faults of the command and what it waited for
for _ in range(args.runs):
    for name, cmd in commands.items():
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
        t0 = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=envs[name], check=True)
        times[name].append(time.perf_counter() - t0)
        faults[name].append(resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt - before)


def fault_cost(pages=256):
    """Microseconds one minor page fault takes here: fresh anonymous pages, one byte written to each
    (on a virtual machine a fault can cost tens of times what it does on bare metal, and wall-time
    ratios between programs that fault differently swing with it)."""
    costs = []
    for _ in range(5):
        m = mmap.mmap(-1, pages * mmap.PAGESIZE)
        t0 = time.perf_counter()
        for i in range(0, pages * mmap.PAGESIZE, mmap.PAGESIZE):
            m[i] = 1
        costs.append((time.perf_counter() - t0) / pages * 1e6)
        m.close()
    return statistics.median(costs)

for p in load:
    p.kill()
    p.wait()
med = {name: statistics.median(ts) for name, ts in times.items()}
print(f"simulated dgx-h100, {args.runs} runs each, round-robin; whole processes, medians; "
      f"{'a lease file for every GPU' if args.leases else 'no lease files'}; {args.load} busy processes beside")
for name, ts in times.items():
    print(f"  {name:<16} median {med[name] * 1e3:6.2f} ms   min {min(ts) * 1e3:6.2f} ms   "
          f"{statistics.median(faults[name]):5.0f} page faults")
print(f"  one minor page fault here: {fault_cost():.1f} us (fresh anonymous pages; a few tenths of a microsecond "
      f"on bare metal)")
true = med["/bin/true"]
fast = {name: min(ts) for name, ts in times.items()}
# Targets in wall time (issue 14's for resolve; issue 34's for bind, with lease files and a loaded machine;
# issue 24's for the worker API) and in instructions (issue 34's for resolve and bind).
pairs = (("gpusel resolve", "floor_nvml", 1.15), ("gpusel bind", "floor_bind", 1.2), ("bind_inprocess", "floor_bind", 1.1))
instruction_targets = {"gpusel resolve": 1.05, "gpusel bind": 1.10, "bind_inprocess": 1.1}
for ours, floor, target in pairs:
    ratio = med[ours] / med[floor]
    line = (f"  {ours} / {floor}: {ratio:.2f}x on medians (target {target}x{', met' if ratio <= target else ', missed'}), "
            f"{fast[ours] / fast[floor]:.2f}x on fastest runs")
    if med[floor] > true:
        line += f"; {(med[ours] - true) / (med[floor] - true):.2f}x counting only the time above /bin/true"
    else:
        line += "; the floor's median is not above /bin/true's: the machine is too loaded for that figure"
    print(line)
print(f"  gpusel bind / floor_bind index: {med['gpusel bind'] / med['floor_bind index']:.2f}x on medians (no target: "
      f"the floor handed the same index, which it turns into a UUID through NVML)")
worker = med["run 3 -- bind"] - med["run 3 -- true"]
if med["floor_bind"] > true:
    ratio = worker / (med["floor_bind"] - true)
    print(f"  a worker's bind under gpusel run (run 3 -- bind_inprocess less run 3 -- true, {worker * 1e3:.2f} ms) / "
          f"floor_bind less /bin/true: {ratio:.2f}x on medians (target 1.5x{', met' if ratio <= 1.5 else ', missed'})")


def instructions(name):
    r = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *commands[name]],
                       capture_output=True, text=True, env=envs[name])
    for text in r.stderr.splitlines():
        if "Collected :" in text:
            return int(text.split("Collected :")[1].split()[0])
    sys.exit(f"callgrind gave no count for {name}: {r.stderr[-500:]}")


if args.instructions:
    counts = {name: instructions(name) for name in commands if name != "/bin/true" and not name.startswith("run ")}
    print("instructions per whole process (valgrind --tool=callgrind)")
    for name, n in counts.items():
        print(f"  {name:<16} {n / 1e6:6.3f} M")
    for ours, floor, _ in pairs:
        target = instruction_targets[ours]
        ratio = counts[ours] / counts[floor]
        print(f"  {ours} / {floor}: {ratio:.3f}x in instructions (target {target}x{', met' if ratio <= target else ', missed'})")
    # What an index costs to turn into a UUID, which the floor is spared: gpusel bind against a floor
    # handed the same index (no target of the issue's; shown so the two costs can be told apart).
    print(f"  gpusel bind / floor_bind index: {counts['gpusel bind'] / counts['floor_bind index']:.3f}x in "
          f"instructions ({(counts['floor_bind index'] - counts['floor_bind']) / 1e6:.2f} M of NVML to turn "
          f"index 3 into its UUID, at the least)")
