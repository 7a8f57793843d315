"""`gpusel bench bw` on the simulated machines: the figures must equal the machine file's within 2%."""

import csv
import io
import json
import os
import pty
import shutil
import subprocess
import tempfile
import unittest
import xml.etree.ElementTree as ET

from support import BIN, Case, gpusel, machine, sim_env, uuids

SMALL = ["--size", "16MiB", "--copies", "4", "--samples", "3"]
ALL = "h2d,d2h,d2d,h2d-pageable,d2h-pageable,bidir"


def bench(machine_name, *args, **env):
    r = gpusel("bench", "bw", "--json", *args, env=sim_env(machine_name, **env))
    return r, (json.loads(r.stdout) if r.stdout.strip() else None)


def expected(g, test):
    """What the simulator's model gives, from the machine file alone (docs/simulator.md, 'What the doubles do')."""
    return {
        "h2d": g["pcie_h2d_gbps"],
        "d2h": g["pcie_d2h_gbps"],
        "d2d": g["memory_bandwidth_gbps"] / 2,  # bytes copied; each is read and written
        "h2d-pageable": g["pcie_h2d_gbps"] / 2,
        "d2h-pageable": g["pcie_d2h_gbps"] / 2,
        "bidir": 2 * min(g["pcie_h2d_gbps"], g["pcie_d2h_gbps"]),  # both directions together
    }[test]


class BenchTest(Case):
    def check_machine(self, name, gpu_spec):
        r, out = bench(name, "--gpu", gpu_spec, "--tests", ALL, *SMALL)
        self.assertEqual(r.returncode, 0, r.stderr)
        gpus = machine(name)["gpu"]
        wanted = [int(i) for i in gpu_spec.split(",")]
        self.assertEqual(len(out["results"]), 6 * len(wanted))
        for row in out["results"]:
            g = gpus[row["index"]]
            with self.subTest(gpu=row["index"], test=row["test"]):
                self.assertIn(row["index"], wanted)
                self.assertEqual(row["uuid"], g["uuid"])
                self.assertEqual(row["bytes"], 16 << 20)
                self.assertTrue(row["verified"])
                want = expected(g, row["test"])
                for key in ("gbps", "gbps_min", "gbps_max"):
                    self.assertAlmostEqual(row[key], want, delta=0.02 * want)
                self.assertEqual(len(row["samples"]), 3)
                if row["test"] == "d2d":
                    self.assertAlmostEqual(row["traffic_gbps"], g["memory_bandwidth_gbps"],
                                           delta=0.02 * g["memory_bandwidth_gbps"])
                else:
                    self.assertNotIn("traffic_gbps", row)
        self.assertTrue(any("pageable" in w for w in out["warnings"]))
        return out

    def test_dgx_every_test(self):
        out = self.check_machine("dgx-h100", "0,5")
        self.assertTrue(any("under 4x its L2 cache (50 MiB)" in w for w in out["warnings"]))

    def test_single_l4_every_test(self):
        out = self.check_machine("single-l4", "0")
        self.assertEqual([row["problem"] for row in out["results"]], [None] * len(out["results"]))

    def test_text_table(self):
        r = gpusel("bench", "bw", "--gpu", "0", *SMALL, env=sim_env("single-l4"))
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = [l.split() for l in r.stdout.splitlines() if l.startswith("0 ")]
        self.assertEqual([row[3] for row in rows], ["h2d", "d2h", "d2d"])  # the default tests
        self.assertEqual([row[4] for row in rows], ["25.4", "26.1", "125.0"])
        self.assertTrue(all(row[7] == "ok" for row in rows))
        self.assertIn("traffic 250.0", r.stdout)

    def test_parallel_reports_the_sum(self):
        r, out = bench("dgx-h100", "--gpu", "1,2,3", "--parallel", "--tests", "h2d", *SMALL)
        self.assertEqual(r.returncode, 0, r.stderr)
        per_gpu = [row for row in out["results"] if not row.get("sum")]
        total = [row for row in out["results"] if row.get("sum")]
        self.assertEqual(sorted(row["index"] for row in per_gpu), [1, 2, 3])
        self.assertEqual(len(total), 1)
        self.assertAlmostEqual(total[0]["gbps"], 3 * 55.2, delta=0.02 * 3 * 55.2)

    def test_corrupted_copies_fail_verification(self):
        r, out = bench("corrupt-copies", "--gpu", "0", "--tests", ALL, *SMALL)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(len(out["results"]), 6)
        self.assertTrue(all(not row["verified"] for row in out["results"]))
        self.assertIn("data mismatch", out["results"][0]["failure"])
        # As data too: each row's problem, null where the copies verified.
        self.assertEqual({(row["problem"]["code"], row["problem"]["fields"]["reason"]) for row in out["results"]},
                         {("unspecified", "data-mismatch")})
        self.assertIn("did not verify", r.stderr)
        r = gpusel("bench", "bw", "--gpu", "0", *SMALL, env=sim_env("corrupt-copies"))
        self.assertIn("FAILED: data mismatch", r.stdout)

    def test_bad_input_exit_2(self):
        cases = [
            (["--size", "lots"], ['--size "lots"', "512MiB"]),
            (["--size", "10"], ["multiple of 4"]),
            (["--tests", "h2d,warp"], ['unknown test "warp"', "d2h-pageable"]),
            (["--copies", "0"], ["--copies"]),
            (["--samples", "x"], ["--samples"]),
        ]
        for args, pieces in cases:
            with self.subTest(args=args):
                self.assertFailsWith(gpusel("bench", "bw", "--gpu", "0", *args, env=sim_env("dgx-h100")), 2, *pieces)
        self.assertFailsWith(gpusel("bench", "bw", "--gpu", "9", env=sim_env("dgx-h100")), 2, "out of range")

    def test_out_of_memory(self):
        r = gpusel("bench", "bw", "--gpu", "0", "--size", "60GiB", env=sim_env("dgx-h100"))
        self.assertFailsWith(r, 1, "cannot allocate 2 x 60 GiB of device memory", "smaller --size",
                             "no figures from 1 of 1 GPUs")

    def test_trained_down_link_is_flagged(self):
        r, out = bench("pcie-trained-down", "--gpu", "0", "--tests", "h2d,d2h", "--size", "400MiB", "--copies", "1",
                       "--samples", "1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(any("trained down to Gen4 x4 (it can do Gen4 x16)" in w for w in out["warnings"]),
                        out["warnings"])
        r, out = bench("single-l4", "--gpu", "0", "--tests", "h2d", *SMALL)
        self.assertFalse(any("far below" in w for w in out["warnings"]))

    def test_without_nvml(self):
        r, out = bench("nvml-missing", "--gpu", "1", "--tests", "h2d", *SMALL)
        self.assertEqual(r.returncode, 0, r.stderr)
        # nvidia-smi index 1 is placed through CUDA's own list in PCI order.
        self.assertEqual(out["results"][0]["index"], 1)
        self.assertEqual(out["results"][0]["uuid"], uuids("nvml-missing")[1])
        self.assertIn("NVML is unavailable", r.stderr)


class BenchFilesTest(Case):
    """--plot, --csv, the sampled copies of the simulator, and the progress line."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="gpusel-bench-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_plot_draws_every_gpu_and_test(self):
        svg = os.path.join(self.dir, "bw.svg")
        r, out = bench("dgx-h100", "--gpu", "0,5", "--tests", "h2d,d2h,d2d,bidir", *SMALL, "--plot", svg)
        self.assertEqual(r.returncode, 0, r.stderr)
        root = ET.parse(svg).getroot()  # well-formed XML
        self.assertEqual(root.tag, "{http://www.w3.org/2000/svg}svg")
        ns = {"s": "http://www.w3.org/2000/svg"}
        bars = root.findall(".//s:rect[@class='bar']", ns)
        self.assertEqual(len(bars), len(out["results"]))
        for row in out["results"]:
            with self.subTest(gpu=row["index"], test=row["test"]):
                found = [b for b in bars if b.get("data-index") == str(row["index"]) and b.get("data-test") == row["test"]]
                self.assertEqual(len(found), 1)
                bar = found[0]
                self.assertEqual(bar.get("data-uuid"), row["uuid"])
                self.assertEqual(float(bar.get("data-gbps")), row["gbps"])
                title = bar.find("s:title", ns).text
                self.assertIn(f"GPU {row['index']} ", title)
                self.assertIn(f"{row['test']}: {row['gbps']:.1f} GB/s", title)
                self.assertGreater(float(bar.get("width")), 0)
        # The link's theoretical limit beside the PCIe rates: Gen5 x16 on dgx-h100.
        limits = {float(l.get("data-gbps")) for l in root.findall(".//s:line[@class='limit']", ns)}
        self.assertEqual(limits, {as_written(3.938 * 16), as_written(2 * 3.938 * 16)})
        for row in out["results"]:
            if row["test"] in ("h2d", "d2h"):
                self.assertAlmostEqual(row["link_gbps"], 3.938 * 16)
            elif row["test"] == "bidir":
                self.assertAlmostEqual(row["link_gbps"], 2 * 3.938 * 16)
            else:
                self.assertNotIn("link_gbps", row)

    def test_plot_of_a_trained_down_link_shows_both_limits(self):
        svg = os.path.join(self.dir, "bw.svg")
        r, out = bench("pcie-trained-down", "--gpu", "0", "--tests", "h2d", *SMALL, "--plot", svg)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertAlmostEqual(out["results"][0]["link_gbps"], 1.969 * 4)
        self.assertAlmostEqual(out["results"][0]["link_max_gbps"], 1.969 * 16)
        ns = {"s": "http://www.w3.org/2000/svg"}
        limits = ET.parse(svg).getroot().findall(".//s:line[@class='limit']", ns)
        self.assertEqual(len(limits), 2)

    def test_failed_rows_are_marked_in_the_plot(self):
        svg = os.path.join(self.dir, "bw.svg")
        r, out = bench("corrupt-copies", "--gpu", "0", "--tests", "d2h", *SMALL, "--plot", svg)
        self.assertEqual(r.returncode, 1)
        ns = {"s": "http://www.w3.org/2000/svg"}
        bar = ET.parse(svg).getroot().find(".//s:rect[@class='bar']", ns)
        self.assertIn("FAILED: data mismatch", bar.find("s:title", ns).text)

    def check_csv(self, text, rows):
        table = list(csv.DictReader(io.StringIO(text)))
        self.assertEqual(len(table), len(rows))
        for line, row in zip(table, rows):
            for key, field in line.items():
                want = row.get(key)
                if want is None:
                    self.assertEqual(field, "", key)
                elif isinstance(want, bool):
                    self.assertEqual(field, "true" if want else "false", key)
                elif isinstance(want, (int, float)):
                    self.assertEqual(float(field), want, key)
                else:
                    self.assertEqual(field, want, key)

    def test_csv_rows_match_json(self):
        path = os.path.join(self.dir, "bw.csv")
        r, out = bench("dgx-h100", "--gpu", "2,1", "--tests", "h2d,d2d", "--parallel", *SMALL, "--csv", path)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(path, newline="") as f:
            text = f.read()
        self.assertEqual(text.splitlines()[0].split(",")[:7],
                         ["index", "uuid", "name", "pci_bus_id", "test", "bytes", "gbps"])
        self.check_csv(text, out["results"])
        self.assertEqual(len(out["results"]), 6)  # 2 GPUs x 2 tests + 2 sums

    def test_csv_to_stdout(self):
        env = sim_env("single-l4")
        r = gpusel("bench", "bw", "--gpu", "0", *SMALL, "--csv", "-", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.startswith("index,uuid,"), r.stdout)
        _, out = bench("single-l4", "--gpu", "0", *SMALL)
        self.check_csv(r.stdout, out["results"])

    def test_bad_output_files(self):
        env = sim_env("single-l4")
        cases = [
            (["--plot", os.path.join(self.dir, "bw.png")], ["draws SVG only", "rsvg-convert"]),
            (["--plot", os.path.join(self.dir, "none", "bw.svg")], ["does not exist"]),
            (["--csv", self.dir], ["is a folder"]),
            (["--csv", "-", "--json"], ["both write to stdout"]),
        ]
        for args, pieces in cases:
            with self.subTest(args=args):
                self.assertFailsWith(gpusel("bench", "bw", "--gpu", "0", *SMALL, *args, env=env), 2, *pieces)

    def test_default_size_runs_on_sampled_copies(self):
        # 512 MiB buffers: the double moves a sample of each copy, which the bench writes and checks.
        r, out = bench("single-l4", "--gpu", "0", "--copies", "2", "--samples", "1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual([row["bytes"] for row in out["results"]], [512 << 20] * 3)
        self.assertTrue(all(row["verified"] for row in out["results"]))
        r, out = bench("corrupt-copies", "--gpu", "1", "--tests", "d2h,d2d,bidir", "--copies", "2", "--samples", "1",
                       "--size", "300000004")
        self.assertEqual(r.returncode, 1)
        self.assertTrue(all("data mismatch" in row["failure"] for row in out["results"]), out["results"])

    def test_progress_on_a_terminal(self):
        master, slave = pty.openpty()
        p = subprocess.Popen([BIN, "bench", "bw", "--gpu", "0,1", *SMALL], env=sim_env("dgx-h100"),
                             stdout=subprocess.PIPE, stderr=slave, text=True)
        os.close(slave)
        seen = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        stdout, _ = p.communicate(timeout=60)
        os.close(master)
        self.assertEqual(p.returncode, 0, seen)
        text = seen.decode()
        self.assertIn("gpusel: measuring GPU 1/2 (index 0)", text)
        self.assertIn("% done", text)
        self.assertTrue(text.endswith("\r\x1b[K") or "warning" in text.splitlines()[-1], repr(text[-200:]))
        rows = [l.split()[:4] for l in stdout.splitlines() if l[:1].isdigit()]
        self.assertEqual(rows, [[str(i), uuids("dgx-h100")[i], machine("dgx-h100")["gpu"][i]["pci_bus_id"], t]
                                for i in (0, 1) for t in ("h2d", "d2h", "d2d")])


def as_written(x):
    """A float as the SVG writes it and Python reads it back (shortest round trip)."""
    return float(repr(x))


if __name__ == "__main__":
    unittest.main()
