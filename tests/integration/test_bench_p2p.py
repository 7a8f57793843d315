"""`gpusel bench bw --tests p2p` on the simulated machines: each GPU's copies to every other selected
GPU take the path the machine file gives them (NVLink, PCIe with peer access, or staged through host
memory), and the rows say which, with the path's theoretical rate.

The expected figures come from the machine files and the simulator's documented model
(docs/simulator.md, 'What the doubles do'); the simulated clock makes them exact."""

import csv
import io
import json
import os
import re
import tempfile
import unittest
import xml.etree.ElementTree as ET

from support import MACHINES, Case, gpusel, machine, private_dir, recorded_contexts, sim_env

SMALL = ["--size", "16MiB", "--copies", "4", "--samples", "3"]

# The simulator's model (docs/simulator.md): NVLink per link and direction by version, PCIe per
# lane and direction after line coding by generation, and the share of a link a peer copy gets.
NVLINK_PER_LINK = {1: 20.0, 2: 25.0, 3: 25.0, 4: 25.0, 5: 50.0}
PCIE_LANE = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
NVLINK_EFFICIENCY = 0.85
PCIE_PEER_EFFICIENCY = 0.80


def bench(machine_name, *args, **env):
    tests = [] if "--tests" in args else ["--tests", "p2p"]
    r = gpusel("bench", "bw", "--json", *tests, *args, env=sim_env(machine_name, **env))
    return r, (json.loads(r.stdout) if r.stdout.strip() else None)


def pcie_gbps(g):
    return PCIE_LANE[g["pcie_generation"]] * g["pcie_width"]


def nvlink(a, b):
    """Links and version of the NVLink path between two GPUs of a machine file."""
    return min(a["nvlinks"], b["nvlinks"]), min(a["nvlink_version"], b["nvlink_version"])


def peers(a, b):
    """cuDeviceCanAccessPeer over PCIe: both boards allow it (GeForce boards do not, unless the
    file says) and one NUMA node holds both."""
    allowed = lambda g: g.get("pcie_p2p", "GeForce" not in g["name"])
    return allowed(a) and allowed(b) and a["numa_node"] == b["numa_node"]


class BenchPeerTest(Case):
    def assert_rate(self, row, want):
        for key in ("gbps", "gbps_min", "gbps_max"):
            self.assertAlmostEqual(row[key] / want, 1.0, delta=1e-4, msg=(key, row))

    def test_nvlink_pairs_of_dgx_h100(self):
        gpus = machine("dgx-h100")["gpu"]
        r, out = bench("dgx-h100", "--gpu", "0,1,5", *SMALL)
        self.assertEqual(r.returncode, 0, r.stderr)
        pairs = [(row["index"], row["peer"]["index"]) for row in out["results"]]
        self.assertEqual(pairs, [(0, 1), (0, 5), (1, 0), (1, 5), (5, 0), (5, 1)])
        for row in out["results"]:
            src, dst = gpus[row["index"]], gpus[row["peer"]["index"]]
            with self.subTest(src=row["index"], dst=row["peer"]["index"]):
                links, version = nvlink(src, dst)
                self.assertEqual(row["test"], "p2p")
                self.assertEqual(row["uuid"], src["uuid"])
                self.assertEqual(row["peer"]["uuid"], dst["uuid"])
                self.assertTrue(row["peer_access"])
                self.assertTrue(row["verified"])
                self.assertEqual(row["path"], "nvlink")
                self.assertEqual((row["nvlinks"], row["nvlink_version"]), (links, version))
                link = links * NVLINK_PER_LINK[version]
                self.assertAlmostEqual(row["link_gbps"], link)
                self.assert_rate(row, link * NVLINK_EFFICIENCY)
                self.assertNotIn("link_max_gbps", row)

    def test_fewer_links_on_one_gpu(self):
        # The same machine with GPU 1 on 12 links of NVLink 3: its pairs run at its links.
        with open(os.path.join(MACHINES, "dgx-h100.toml")) as f:
            text = f.read()
        second = [m.start() for m in re.finditer(r"^\[\[gpu\]\]$", text, flags=re.M)][1:3]
        part = text[second[0]:second[1]].replace("nvlinks = 18", "nvlinks = 12")
        part = part.replace("nvlink_version = 4", "nvlink_version = 3")
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "fewer-links.toml")
            with open(path, "w") as f:
                f.write(text[:second[0]] + part + text[second[1]:])
            gpus = {g["uuid"]: g for g in machine("dgx-h100")["gpu"]}
            r, out = bench(path, "--gpu", "0,1,2", *SMALL)
        self.assertEqual(r.returncode, 0, r.stderr)
        for row in out["results"]:
            with self.subTest(src=row["index"], dst=row["peer"]["index"]):
                touches_1 = 1 in (row["index"], row["peer"]["index"])
                self.assertEqual((row["nvlinks"], row["nvlink_version"]), (12, 3) if touches_1 else (18, 4))
                links, version = (12, 3) if touches_1 else nvlink(gpus[row["uuid"]], gpus[row["peer"]["uuid"]])
                self.assertAlmostEqual(row["link_gbps"], links * NVLINK_PER_LINK[version])
                self.assert_rate(row, links * NVLINK_PER_LINK[version] * NVLINK_EFFICIENCY)

    def test_pcie_and_staged_pairs_of_workstation_mixed(self):
        gpus = machine("workstation-mixed")["gpu"]  # PCI order: RTX A4000, RTX 4090, RTX A6000
        r, out = bench("workstation-mixed", "--gpu", "all", *SMALL)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(out["results"]), 6)
        staged = {}
        for row in out["results"]:
            i, j = row["index"], row["peer"]["index"]
            src, dst = gpus[i], gpus[j]
            with self.subTest(src=i, dst=j):
                self.assertTrue(row["verified"])
                self.assertNotIn("nvlinks", row)
                link = min(pcie_gbps(src), pcie_gbps(dst))
                self.assertAlmostEqual(row["link_gbps"], link)
                if peers(src, dst):
                    self.assertTrue(row["peer_access"])
                    self.assertEqual(row["path"], "pcie")
                    self.assert_rate(row, link * PCIE_PEER_EFFICIENCY)
                else:
                    # The driver stages it: the source's copy to host memory, then the host's
                    # copy to the destination, one after the other.
                    self.assertFalse(row["peer_access"])
                    self.assertEqual(row["path"], "host")
                    self.assert_rate(row, 1 / (1 / src["pcie_d2h_gbps"] + 1 / dst["pcie_h2d_gbps"]))
                    staged[(i, j)] = row["gbps"]
        # The 4090 (GeForce) is nobody's peer; the A4000 and the A6000 are each other's.
        self.assertEqual(sorted(staged), [(0, 1), (1, 0), (1, 2), (2, 1)])
        direct = [row["gbps"] for row in out["results"] if row["peer_access"]]
        self.assertEqual(len(direct), 2)
        self.assertLess(max(staged.values()), 0.6 * min(direct))

    def test_text_table_names_the_peer_and_the_path(self):
        env = sim_env("workstation-mixed")
        r = gpusel("bench", "bw", "--gpu", "0,1,2", "--tests", "p2p", *SMALL, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        uuid = [g["uuid"] for g in machine("workstation-mixed")["gpu"]]
        rows = [l for l in r.stdout.splitlines() if re.match(r"^\d ", l)]
        self.assertEqual([l.split()[3:5] for l in rows],
                         [["p2p", "to"]] * 6)
        self.assertEqual([(l.split()[0], l.split()[5]) for l in rows],
                         [("0", "1"), ("0", "2"), ("1", "0"), ("1", "2"), ("2", "0"), ("2", "1")])
        self.assertIn(f"to {uuid[2]}, PCIe 31.5", rows[1])
        self.assertIn(f"to {uuid[1]}, peer access: no (staged through host memory; PCIe 31.5)", rows[0])
        r = gpusel("bench", "bw", "--gpu", "0,1", "--tests", "p2p", *SMALL, env=sim_env("dgx-h100"))
        self.assertEqual(r.returncode, 0, r.stderr)
        g = machine("dgx-h100")["gpu"]
        links, version = nvlink(g[0], g[1])
        self.assertIn(f"to {g[1]['uuid']}, NVLink {links} x v{version} {links * NVLINK_PER_LINK[version]:.1f}",
                      r.stdout)

    def test_p2p_with_other_tests_and_json_keys(self):
        r, out = bench("dgx-h100", "--gpu", "2,3", *SMALL, "--tests", "h2d,p2p")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual([(row["index"], row["test"]) for row in out["results"]],
                         [(2, "h2d"), (2, "p2p"), (3, "h2d"), (3, "p2p")])
        h2d, p2p = out["results"][0], out["results"][1]
        self.assertNotIn("peer", h2d)
        self.assertNotIn("path", h2d)
        self.assertEqual(set(p2p) - set(h2d),
                         {"peer", "peer_access", "path", "nvlinks", "nvlink_version"})
        self.assertEqual(set(h2d) - set(p2p), {"link_max_gbps"})
        self.assertEqual(set(p2p["peer"]), {"index", "uuid"})

    def test_parallel_has_no_sum_for_p2p(self):
        r, out = bench("dgx-h100", "--gpu", "0,1", "--parallel", *SMALL, "--tests", "h2d,p2p")
        self.assertEqual(r.returncode, 0, r.stderr)
        sums = [row["test"] for row in out["results"] if row.get("sum")]
        self.assertEqual(sums, ["h2d"])
        self.assertEqual(len([row for row in out["results"] if row["test"] == "p2p"]), 2)

    def test_without_nvml(self):
        # CUDA alone still copies and says whether it had peer access; the rate of the path is
        # NVML's to tell, so there is none.
        r, out = bench("nvml-missing", "--gpu", "0,1", *SMALL)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(out["results"]), 2)
        for row in out["results"]:
            self.assertTrue(row["verified"])
            self.assertNotIn("link_gbps", row)
            self.assertIn(row["path"], ("pcie", "host"))
        r = gpusel("bench", "bw", "--gpu", "0,1", "--tests", "p2p", *SMALL, env=sim_env("nvml-missing"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotRegex(r.stdout, r"PCIe\)|; PCIe$")

    def test_one_gpu_is_refused(self):
        r = gpusel("bench", "bw", "--gpu", "0", "--tests", "h2d,p2p", env=sim_env("dgx-h100"))
        self.assertFailsWith(r, 2, "--tests p2p copies from each selected GPU to each other one",
                             "only one GPU", "select two or more")
        self.assertEqual(r.stdout, "")

    def test_the_worker_holds_contexts_on_both_gpus(self):
        # Each worker opens a context on its peers too; bench bw runs no placement check on its
        # own workers (gpusel run's check, which stops such a worker, is test_launchers_placement's).
        state = private_dir("gpusel-state-")
        g = [x["uuid"] for x in machine("dgx-h100")["gpu"]]
        r, out = bench("dgx-h100", "--gpu", "3,4", *SMALL, GPUSEL_SIM_STATE_DIR=state)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(out["results"]), 2)
        # A worker that ended is forgotten once NVML's processes are listed again (by the next
        # worker): the last one at least is on record, with a context on both GPUs.
        held = [sorted(v) for v in recorded_contexts(state).values()]
        self.assertTrue(held)
        self.assertEqual(held, [sorted([g[3], g[4]])] * len(held))

    def test_csv_and_plot(self):
        with tempfile.TemporaryDirectory() as tmp:
            plot, table = os.path.join(tmp, "bw.svg"), os.path.join(tmp, "bw.csv")
            r, out = bench("workstation-mixed", "--gpu", "0,1", *SMALL, "--plot", plot, "--csv", table)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(table) as f:
                rows = list(csv.DictReader(io.StringIO(f.read())))
            tree = ET.parse(plot)
        self.assertEqual(len(rows), 2)
        for row, j in zip(rows, out["results"]):
            self.assertEqual(row["test"], "p2p")
            self.assertEqual(int(row["peer_index"]), j["peer"]["index"])
            self.assertEqual(row["peer_uuid"], j["peer"]["uuid"])
            self.assertEqual(row["peer_access"], "false")
            self.assertEqual(row["path"], "host")
            self.assertAlmostEqual(float(row["gbps"]), j["gbps"])
        ns = {"s": "http://www.w3.org/2000/svg"}
        bars = tree.getroot().findall(".//s:rect[@class='bar']", ns)
        self.assertEqual([b.get("data-test") for b in bars], ["p2p", "p2p"])
        labels = [t.text for t in tree.getroot().iter("{http://www.w3.org/2000/svg}text")]
        self.assertIn("GPU 0 to GPU 1 (staged)", labels)
        self.assertIn("GPU 1 to GPU 0 (staged)", labels)


if __name__ == "__main__":
    unittest.main()
