"""`gpusel bench bw` on the simulated machines: the figures must equal the machine file's within 2%."""

import json
import unittest

from support import Case, gpusel, machine, sim_env, uuids

SMALL = ["--size", "16MiB", "--copies", "4", "--samples", "3"]
ALL = "h2d,d2h,d2d,h2d-pageable,d2h-pageable,bidir"


def bench(machine_name, *args, **env):
    r = gpusel("bench", "bw", "--json", *args, env=sim_env(machine_name, **env))
    return r, (json.loads(r.stdout) if r.stdout.strip() else None)


def expected(g, test):
    """What the simulator's model gives, from the machine file alone (README, 'What the doubles do')."""
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
        self.check_machine("single-l4", "0")

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


if __name__ == "__main__":
    unittest.main()
