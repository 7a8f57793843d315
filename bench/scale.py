#!/usr/bin/env python3
"""How gpusel's commands grow with the machine: simulated machines of 8, 64, 256 and 1,024 H100s
(8 per NVLink domain, 2 per PCIe switch, 4 per NUMA node), every measure beside its baseline, one
table.

  measure                              baseline
  gpusel list                          floor_nvml (dlopen NVML, enumerate every UUID)
  gpusel resolve --gpu 0,...,7         floor_nvml
  gpusel resolve --gpu all             floor_nvml
  gpusel resolve --gpu free:4          floor_nvml
  gpusel bind --gpu 3                  floor_bind UUID (cuInit, enumerate UUIDs, retain, current)
  gpusel run --gpu 0,...,7 -- true     sh -c 'true & (8 times) wait'
  python: gpusel.resolve_gpu_uuids     the reference module's resolve_gpu_uuids, same process,
          (['0,...,7']), per call      same calls (wall time only)
  python3 -c 'resolve_gpu_uuids(...)'  gpusel resolve --gpu 0,...,7, whole processes (the
          through the reference       reference module's own start-up included)

Usage: bench/scale.py [--sizes 8,64,256,1024] [--runs N] [--build DIR] [--before DIR]
                      [--sim-root DIR] [--no-instructions] [--keep DIR] [--only MEASURE,...]

Columns: the median wall time of N runs (each command started the same way, round-robin), the
instructions of one run under valgrind's callgrind (whole process, the command itself: children
are not followed; steady whatever the machine's load), the ratio of each to the baseline's,
"growth": how much the instructions grew from the size before, divided by how much the machine
grew (1.00 is linear; the target is at most 1.5 at each step), the same two for the instructions
in gpusel's own executable alone (the simulated driver's and the C library's left out), and the
maximum resident set size (GNU time; target under 32 MB at 1,024 GPUs). With --before DIR, the
instructions of the same command built in DIR (another build folder, an older tree) are shown
beside. With --sim-root DIR, every command runs on the simulator's libraries in DIR (a copy of
another build's lib/gpusel/sim, say) instead of this build's: the same gpusel over another
simulator. A second table splits the instructions at the largest size by where they run. The
machine files are written to a temporary folder (--keep DIR keeps them there).
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

from simenv import h100_machine, sim_environment

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
parser = argparse.ArgumentParser()
parser.add_argument("--sizes", default="8,64,256,1024")
parser.add_argument("--runs", type=int, default=20)
parser.add_argument("--build", default=os.path.join(root, "build"))
parser.add_argument("--before", help="another build folder whose gpusel is counted beside")
parser.add_argument("--sim-root", help="the simulator's folder to run on (default: the build's own)")
parser.add_argument("--shared", default=os.path.join(root, "..", "shared"),
                    help="the folder holding seed/gpu_select.py (the reference module)")
parser.add_argument("--no-instructions", action="store_true", help="skip callgrind")
parser.add_argument("--keep", help="write the machine files here and keep them")
parser.add_argument("--only", help="comma-separated measure names to run (default: all)")
args = parser.parse_args()
sizes = [int(s) for s in args.sizes.split(",")]


GNU_TIME = "/usr/bin/time"


def run_once(cmd, env):
    """Wall seconds of one run."""
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"{cmd} failed (exit {r.returncode}); run it by hand to see why")
    return wall


def max_rss(cmd, env):
    """The command's maximum resident set size in bytes, through GNU time (a process forked from
    this script would start with Python's own), or None without it."""
    if not os.path.exists(GNU_TIME):
        return None
    r = subprocess.run([GNU_TIME, "-f", "%M", *cmd], env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    return int(r.stderr.strip().splitlines()[-1]) * 1024


def instructions(cmd, env):
    """One run under callgrind: (instructions of the whole process, {object file: instructions in
    its own functions})."""
    with tempfile.NamedTemporaryFile(suffix=".callgrind") as out:
        r = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out.name}", *cmd],
                           capture_output=True, text=True, env=env)
        total = None
        for text in r.stderr.splitlines():
            if "Collected :" in text:
                total = int(text.split("Collected :")[1].split()[0])
        if total is None:
            sys.exit(f"callgrind gave no count for {cmd}: {r.stderr[-500:]}")
        names, current, totals, skip = {}, "?", {}, False
        with open(out.name) as f:
            for line in f:
                if line.startswith(("ob=", "cob=")):
                    # "(id) name" the first time an object is named (in either), "(id)" after.
                    ident, _, name = line.split("=", 1)[1].strip().partition(" ")
                    if name:
                        names[ident] = name
                    if line.startswith("ob="):
                        current = ident
                elif line.startswith("calls="):
                    skip = True  # the next cost line is the call's, counted at the callee
                elif line[:1].isdigit() or line[:1] in "+-*":
                    if skip:
                        skip = False
                        continue
                    parts = line.split()
                    if len(parts) >= 2:
                        totals[current] = totals.get(current, 0) + int(parts[1])
        return total, {names.get(ident, ident): n for ident, n in totals.items()}


def short_object(path):
    base = os.path.basename(path)
    if base == "gpusel" or base.startswith("floor_"):
        return base
    if "/sim/" in path and base.startswith("libnvidia-ml"):
        return "simulated NVML"
    if "/sim/" in path and base.startswith("libcuda"):
        return "simulated CUDA"
    if base.startswith("libgpusel-sim-machines"):
        return "machine files"
    if base.startswith("ld-linux"):
        return "loader"
    if base.startswith("libc.so") or base.startswith("libm.so"):
        return "libc"
    return base


def python_per_call(env, count, calls):
    """Microseconds per resolve_gpu_uuids call: (stand-in, reference)."""
    code = f"""
import sys, time, statistics
sys.path.insert(0, {os.path.join(args.shared, 'seed')!r})
import gpu_select, gpusel
spec = ["0,1,2,3,4,5,6,7"]
assert gpu_select.resolve_gpu_uuids(spec) == gpusel.resolve_gpu_uuids(spec)
out = []
for mod in (gpusel, gpu_select):
    rounds = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range({calls}):
            mod.resolve_gpu_uuids(spec)
        rounds.append((time.perf_counter() - t0) / {calls})
    out.append(statistics.median(rounds))
print(out[0] * 1e6, out[1] * 1e6)
"""
    penv = dict(env, PYTHONPATH=os.path.join(root, "python"),
                GPUSEL_LIBRARY=os.path.join(args.build, "lib", "libgpusel.so.2"))
    out = subprocess.run([sys.executable, "-c", code], env=penv, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"the Python measure failed: {out.stderr[-800:]}")
    ours, ref = (float(x) for x in out.stdout.split())
    return ours, ref


def main():
    gpusel = os.path.join(args.build, "bin", "gpusel")
    before = os.path.join(args.before, "bin", "gpusel") if args.before else None
    floor_nvml = os.path.join(args.build, "bin", "floor_nvml")
    floor_bind = os.path.join(args.build, "bin", "floor_bind")
    true = shutil.which("true")
    eight = "0,1,2,3,4,5,6,7"
    folder = args.keep or tempfile.mkdtemp(prefix="gpusel-scale-")
    if not args.keep:
        atexit.register(shutil.rmtree, folder, True)
    os.makedirs(folder, exist_ok=True)
    rows = []
    prev = {}
    print(f"machines in {folder}; {args.runs} runs each, round-robin; wall: medians", flush=True)
    for count in sizes:
        path = os.path.join(folder, f"h100-{count}.toml")
        with open(path, "w") as f:
            f.write(h100_machine(count))
        env = sim_environment(gpusel, path, os.environ if not args.sim_root else
                              dict(os.environ, GPUSEL_SIM_ROOT=os.path.abspath(args.sim_root)))
        uuids = subprocess.run([gpusel, "resolve", "--gpu", eight], env=env, capture_output=True,
                               text=True, check=True).stdout.split()
        reference = [sys.executable, "-c",
                     f"import sys; sys.path.insert(0, {os.path.join(args.shared, 'seed')!r}); "
                     f"import gpu_select; print(gpu_select.resolve_gpu_uuids([{eight!r}]))"]
        measures = [
            ("list", [gpusel, "list"], "floor_nvml", [floor_nvml]),
            ("resolve 0-7", [gpusel, "resolve", "--gpu", eight], "floor_nvml", [floor_nvml]),
            ("resolve all", [gpusel, "resolve", "--gpu", "all"], "floor_nvml", [floor_nvml]),
            ("resolve free:4", [gpusel, "resolve", "--gpu", "free:4"], "floor_nvml", [floor_nvml]),
            ("bind 3", [gpusel, "bind", "--gpu", "3"], "floor_bind", [floor_bind, uuids[3]]),
            ("run 0-7", [gpusel, "run", "--gpu", eight, "--", true], "sh 8x true",
             ["sh", "-c", " ".join([f"{true} &"] * 8) + " wait"]),
            ("reference process", reference, "resolve 0-7", [gpusel, "resolve", "--gpu", eight]),
        ]
        if args.only:
            wanted = set(args.only.split(","))
            measures = [m for m in measures if m[0] in wanted or m[0].split()[0] in wanted]
        walls = {}
        for _ in range(args.runs):
            for name, cmd, base_name, base in measures:
                for key, c in ((name, cmd), (name + "|base", base)):
                    walls.setdefault(key, []).append(run_once(c, env))
        for name, cmd, base_name, base in measures:
            row = {"size": count, "measure": name, "baseline": base_name,
                   "wall": statistics.median(walls[name]), "base_wall": statistics.median(walls[name + "|base"]),
                   "rss": max_rss(cmd, env)}
            if not args.no_instructions and name != "reference process":
                row["ins"], row["objects"] = instructions(cmd, env)
                row["own"] = sum(n for obj, n in row["objects"].items() if os.path.basename(obj) == "gpusel")
                row["base_ins"], _ = instructions(base, env)
                if before and cmd[0] == gpusel:
                    row["before_ins"], _ = instructions([before, *cmd[1:]], env)
                if name in prev and "ins" in prev[name]:
                    grew = count / prev[name]["size"]
                    row["growth"] = (row["ins"] / prev[name]["ins"]) / grew
                    row["own_growth"] = (row["own"] / prev[name]["own"]) / grew
            prev[name] = row
            rows.append(row)
            print_row(row, flush=True)
        if not args.only or "python" in args.only:
            calls = max(20, 20000 // count)
            ours, ref = python_per_call(env, count, calls)
            row = {"size": count, "measure": "python resolve", "baseline": "reference module",
                   "wall": ours / 1e6, "base_wall": ref / 1e6}
            rows.append(row)
            print_row(row, flush=True)
    print()
    print_table(rows)
    if not args.no_instructions:
        print()
        print(f"where the instructions go at {sizes[-1]} GPUs (callgrind, each object's own functions; "
              "gpusel's C++ runtime is linked into it):")
        print("| measure | total | " + " | ".join(PROFILE_COLUMNS) + " | other |")
        print("|---|---|" + "---|" * (len(PROFILE_COLUMNS) + 1))
        for row in rows:
            if row["size"] != sizes[-1] or "objects" not in row:
                continue
            parts = {}
            for obj, n in row["objects"].items():
                key = short_object(obj)
                key = key if key in PROFILE_COLUMNS else "other"
                parts[key] = parts.get(key, 0) + n
            total = sum(parts.values())
            print(f"| {row['measure']} | {total / 1e6:.2f} M | " +
                  " | ".join(f"{parts.get(c, 0) / total:.0%}" for c in PROFILE_COLUMNS + ["other"]) + " |")


PROFILE_COLUMNS = ["gpusel", "simulated NVML", "simulated CUDA", "machine files", "loader", "libc"]

HEADER = ("| GPUs | measure | baseline | wall | baseline's | ratio | instructions | baseline's | ratio "
          "| growth | gpusel's own | its growth | max RSS |" + (" before |" if args.before else ""))


def fmt_wall(s):
    return f"{s * 1e3:.2f} ms" if s >= 1e-3 else f"{s * 1e6:.1f} us"


def cells(row):
    ins = row.get("ins")
    base = row.get("base_ins")
    out = [str(row["size"]), row["measure"], row["baseline"], fmt_wall(row["wall"]), fmt_wall(row["base_wall"]),
           f"{row['wall'] / row['base_wall']:.2f}x",
           f"{ins / 1e6:.2f} M" if ins else "", f"{base / 1e6:.2f} M" if base else "",
           f"{ins / base:.2f}x" if ins and base else "",
           f"{row['growth']:.2f}" if "growth" in row else "",
           f"{row['own'] / 1e6:.2f} M" if "own" in row else "",
           f"{row['own_growth']:.2f}" if "own_growth" in row else "",
           f"{row['rss'] / 2**20:.1f} MB" if row.get("rss") else ""]
    if args.before:
        out.append(f"{row['before_ins'] / 1e6:.2f} M" if row.get("before_ins") else "")
    return out


def print_row(row, flush=False):
    print("  " + "  ".join(cells(row)), flush=flush)


def print_table(rows):
    print(HEADER)
    print("|" + "---|" * (HEADER.count("|") - 1))
    for row in rows:
        print("| " + " | ".join(cells(row)) + " |")


main()
