"""The simulator's nvidia-smi (issue 32): each form launch scripts use, on dgx-h100, mig-a100 and
workstation-mixed, compared with `gpusel list --json` and the machine files; memory a live simulated
process holds; bad options; and NVIDIA's own nvidia-smi (Debian's non-free package, fetched into
the build folder with a private apt configuration) stopping with the simulator's one line."""

import csv
import io
import os
import re
import subprocess
import unittest

from support import (CUDA_HOLD, INSTRUMENTED, SOURCE, Case, Holding, base_env, gpusel, gpusel_json, machine,
                     sim_env)

BUILD = os.environ.get("GPUSEL_BUILD_DIR", "build")
EXTRAS = os.path.join(BUILD, "extras")


def smi(name, *args, env=None):
    """`nvidia-smi ARGS` as a program on machine NAME finds it: through `gpusel sim env`'s PATH."""
    env = env or sim_env(name)
    return subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, env=env, timeout=60)


def ok(name, *args, env=None):
    r = smi(name, *args, env=env)
    if r.returncode != 0:
        raise AssertionError(f"nvidia-smi {' '.join(args)} on {name}: exit {r.returncode}: {r.stderr}")
    return r.stdout


def rows(text):
    return [[c.strip() for c in row] for row in csv.reader(io.StringIO(text))]


class SimSmiTest(Case):
    def test_it_is_the_simulators(self):
        env = sim_env("dgx-h100")
        found = subprocess.run(["sh", "-c", "command -v nvidia-smi"], capture_output=True, text=True, env=env)
        self.assertTrue(found.stdout.strip().endswith("/lib/gpusel/sim/bin/nvidia-smi"), found.stdout)
        # gpusel --sim MACHINE -- nvidia-smi finds it too.
        r = gpusel("--sim", "single-l4", "--", "nvidia-smi", "-L")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(machine("single-l4")["gpu"][0]["uuid"], r.stdout)

    def test_list(self):
        for name in ("dgx-h100", "mig-a100", "workstation-mixed"):
            listed = gpusel_json("--sim", name, "list", "--json")["gpus"]
            want = []
            for g in listed:
                want.append(f"GPU {g['index']}: {g['name']} (UUID: {g['uuid']})")
                for i, m in enumerate(g["mig_devices"]):
                    profile = m["name"][m["name"].index("MIG "):]
                    want.append(f"  {profile:<15} Device {i:2}: (UUID: {m['uuid']})")
            with self.subTest(machine=name):
                self.assertEqual(ok(name, "-L").splitlines(), want)

    def test_query_gpu_csv(self):
        fields = "index,name,uuid,pci.bus_id,memory.total,memory.used,compute_cap,mig.mode.current,count"
        for name in ("dgx-h100", "mig-a100", "workstation-mixed"):
            listed = gpusel_json("--sim", name, "list", "--json")["gpus"]
            table = rows(ok(name, f"--query-gpu={fields}", "--format=csv"))
            with self.subTest(machine=name):
                self.assertEqual(table[0], ["index", "name", "uuid", "pci.bus_id", "memory.total [MiB]",
                                            "memory.used [MiB]", "compute_cap", "mig.mode.current", "count"])
                self.assertEqual(len(table), len(listed) + 1)
                for g, row in zip(listed, table[1:]):
                    self.assertEqual(row, [str(g["index"]), g["name"], g["uuid"], g["pci_bus_id"],
                                           f"{g['memory_total_bytes'] >> 20} MiB", f"{g['memory_used_bytes'] >> 20} MiB",
                                           g["compute_capability"], "Enabled" if g["mig_enabled"] else "Disabled",
                                           str(len(listed))])
        bare = rows(ok("dgx-h100", "--query-gpu=index,memory.total", "--format=csv,noheader,nounits"))
        self.assertEqual(bare[0], ["0", str(80 << 10)])
        self.assertEqual(len(bare), 8)
        # -i by index, UUID prefix and bus id; several at once.
        dgx = machine("dgx-h100")["gpu"]
        picked = rows(ok("dgx-h100", "--query-gpu=index", "--format=csv,noheader", "-i",
                         f"5,{dgx[2]['uuid'][:12]},{dgx[7]['pci_bus_id']}"))
        self.assertEqual(picked, [["5"], ["2"], ["7"]])

    def test_a_live_process_shows(self):
        # A simulated process with a context (and its reservation) on GPU 3: memory.used, the process list, the table.
        env = sim_env("dgx-h100", CUDA_VISIBLE_DEVICES="3")
        with Holding([CUDA_HOLD, "{DIR}"], env) as h:
            if len(h.ready) != 1:
                self.fail(f"cuda_hold did not start: {h.finish()}")
            pid = next(iter(h.ready))
            used = rows(ok("dgx-h100", "--query-gpu=index,memory.used", "--format=csv,noheader,nounits"))
            listed = gpusel_json("--sim", "dgx-h100", "list", "--json")["gpus"]
            self.assertEqual([int(r[1]) for r in used], [g["memory_used_bytes"] >> 20 for g in listed])
            self.assertGreater(int(used[3][1]), 0)  # the context's own reservation
            self.assertEqual(sum(int(r[1]) for r in used if r[0] != "3"), 0)
            apps = rows(ok("dgx-h100", "--query-compute-apps=pid,used_memory,gpu_uuid", "--format=csv"))
            self.assertEqual(apps[0], ["pid", "used_gpu_memory [MiB]", "gpu_uuid"])
            self.assertIn([str(pid), f"{int(used[3][1])} MiB", listed[3]["uuid"]], apps[1:])
            table = ok("dgx-h100")
            self.assertRegex(table, rf"\|\s+3\s+N/A\s+N/A\s+{pid}\s+C\s+")
            self.assertIn(f"{int(used[3][1])}MiB /  81920MiB", table)
            self.assertNotIn("No running processes found", table)
        self.assertIn("No running processes found", ok("dgx-h100"))

    def test_table_and_details(self):
        table = ok("workstation-mixed")
        for g in gpusel_json("--sim", "workstation-mixed", "list", "--json")["gpus"]:
            self.assertIn(g["pci_bus_id"], table)
            self.assertIn(f"{g['memory_total_bytes'] >> 20}MiB", table)
        self.assertRegex(table, r"Driver Version: 570\.133\.07 +CUDA Version: 12\.8")
        q = ok("dgx-h100", "-q", "-d", "MEMORY", "-i", "1")
        self.assertIn("GPU " + machine("dgx-h100")["gpu"][1]["pci_bus_id"], q)
        self.assertRegex(q, r"Total +: 81920 MiB")
        self.assertNotIn("Product Name", q)
        full = ok("mig-a100", "-q")
        self.assertRegex(full, r"Attached GPUs +: 2")
        self.assertRegex(full, r"MIG Mode\n +Current +: Enabled")
        self.assertIn(machine("mig-a100")["gpu"][1]["uuid"], full)
        version = ok("dgx-h100", "--version")
        self.assertRegex(version, r"DRIVER version +: 570\.124\.06")

    def test_topology_and_mig(self):
        topo = ok("dgx-h100", "topo", "-m").splitlines()
        self.assertEqual(topo[0].split("\t")[1:9], [f"GPU{i}" for i in range(8)])
        for i in range(8):
            cells = topo[1 + i].split("\t")
            self.assertEqual(cells[1 + i], " X ")
            self.assertEqual([c for j, c in enumerate(cells[1:9]) if j != i], ["NV18"] * 7)  # NVSwitch
        self.assertEqual(topo[1].split("\t")[9], "0-55,112-167")
        mixed = ok("workstation-mixed", "topo", "-m").splitlines()
        self.assertNotIn("NV", "".join(mixed[1:4]))
        mig = ok("mig-a100", "mig", "-lgi")
        want = [(m["name"][m["name"].index("MIG ") + 4:], m["gpu_instance"])
                for m in gpusel_json("--sim", "mig-a100", "list", "--json")["gpus"][0]["mig_devices"]]
        got = [(r[2], int(r[4])) for r in (line.replace("|", " ").split() for line in mig.splitlines())
               if len(r) > 4 and r[1] == "MIG"]
        self.assertEqual(got, want)
        r = smi("dgx-h100", "mig", "-lgi")
        self.assertEqual((r.returncode, r.stdout), (6, "No MIG-enabled devices found.\n"))

    def test_bad_input_and_faults(self):
        for args, piece in ((["--frobnicate"], '"--frobnicate"'),
                            (["--query-gpu=index,flux"], "--format=csv"),
                            (["--query-gpu=index,flux", "--format=csv"], '"flux"'),
                            (["--query-gpu=index", "--format=xml"], '"xml"'),
                            (["-d", "MEMORY"], "-d goes with -q")):
            r = smi("dgx-h100", *args)
            with self.subTest(args=args):
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(piece, r.stderr)
                self.assertEqual(r.stdout, "")
        r = smi("dgx-h100", "-L", "-i", "9")
        self.assertEqual(r.returncode, 6)
        self.assertIn("-i 9", r.stderr)
        r = smi("nvml-missing", "-L")
        self.assertEqual(r.returncode, 9)
        self.assertIn("cannot talk to the NVIDIA driver", r.stderr)


@unittest.skipIf(INSTRUMENTED, "the doubles are built with a sanitizer; NVIDIA's program cannot load them")
class NvidiasOwnTest(Case):
    def test_nvidias_nvidia_smi_names_the_stand_in(self):
        r = subprocess.run([os.path.join(SOURCE, "scripts", "fetch-extras"), EXTRAS, "nvidia-smi"],
                           capture_output=True, text=True, timeout=600)
        real = os.path.join(EXTRAS, "root", "usr", "lib", "nvidia", "current", "nvidia-smi")
        if r.returncode != 0 or not os.path.isfile(real):
            self.skipTest(f"Debian's nvidia-smi could not be fetched: {r.stderr.strip()[-300:]}")
        r = subprocess.run([real, "-L"], capture_output=True, text=True, env=sim_env("dgx-h100"), timeout=60)
        self.assertNotEqual(r.returncode, 0)
        line = "gpusel-sim (libnvidia-ml.so.1): this program asked for NVML's private tables"
        self.assertEqual(r.stderr.count(line), 1, r.stderr)
        self.assertRegex(r.stderr, r"The simulator's nvidia-smi answers the forms launch scripts use: \S+/lib/gpusel/sim/bin/nvidia-smi")
        self.assertNotIn("GPU 0:", r.stdout)


if __name__ == "__main__":
    unittest.main()
