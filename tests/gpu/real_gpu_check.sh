#!/usr/bin/env bash
# On a machine with an NVIDIA GPU and driver: gpusel list, bind, run and bench bw for real, with the
# measured copy rates printed beside the PCIe link's theoretical limit. Exits 77 (reported as
# skipped) where there is no GPU, so it can sit in every test run.
#   tests/gpu/real_gpu_check.sh [path/to/gpusel]
# Without an argument or GPUSEL_BIN it uses the build tree's binary, found from this script's own
# folder (so it runs from any working directory), else `gpusel` on PATH. A binary that is missing
# or not executable is a failure (exit 1), never a skip.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
gpusel=${1:-${GPUSEL_BIN:-}}
if [[ -z $gpusel ]]; then
  gpusel=$here/../../build/bin/gpusel
  [[ -x $gpusel ]] || gpusel=$(command -v gpusel || echo "$here/../../build/bin/gpusel")
fi
if [[ ! -f $gpusel || ! -x $gpusel ]]; then
  echo "real_gpu_check: the gpusel binary $gpusel is missing or not executable; build it" \
    "(cmake --build build) or pass its path: tests/gpu/real_gpu_check.sh path/to/gpusel" >&2
  exit 1
fi
unset GPUSEL_SIM_MACHINE GPUSEL_NVML_LIBRARY GPUSEL_CUDA_LIBRARY
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! "$gpusel" list --json >"$work/list.json" 2>"$work/list.err"; then
  echo "no NVIDIA GPU here ($(head -c 200 "$work/list.err")): skipped"
  exit 77
fi
fail=0
step() {
  echo "== $*"
  "$@" || { echo "FAILED: $*"; fail=1; }
}
step "$gpusel" list --probe
step "$gpusel" bind --gpu 0 --json
step "$gpusel" run --tag-output --gpu 0 -- "$gpusel" bind
# A program run through bind sees GPU 0 alone, as its CUDA device 0 (its own bind says so).
step "$gpusel" bind --gpu 0 -- "$gpusel" bind --json
step "$gpusel" bench bw --gpu 0 --tests h2d,d2h,d2d,bidir --json >"$work/bench.json"
python3 - "$work/list.json" "$work/bench.json" <<'PY' || fail=1
import json, sys
gpus = {g["uuid"]: g for g in json.load(open(sys.argv[1]))["gpus"]}
bench = json.load(open(sys.argv[2]))
print(f"{'GPU':<42} {'TEST':<6} {'MEDIAN GB/s':>12} {'LINK LIMIT':>11} {'OF LIMIT':>9}")
for row in bench["results"]:
    link = (gpus.get(row["uuid"]) or {}).get("pcie_link") or {}
    limit = link.get("max_gbps") if row["test"] in ("h2d", "d2h") else None
    share = f"{row['gbps'] / limit:.0%}" if limit else "-"
    print(f"{row['uuid']:<42} {row['test']:<6} {row['gbps']:>12.1f} {limit or '-':>11} {share:>9}"
          + ("" if row["verified"] else "  NOT VERIFIED"))
for w in bench["warnings"]:
    print("warning:", w)
sys.exit(0 if all(r["verified"] for r in bench["results"]) else 1)
PY
exit $fail
