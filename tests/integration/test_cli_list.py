"""`gpusel list` on the simulated machines."""

import json
import unittest

from support import Case, gpusel, gpusel_json, machine, uuids


class ListTest(Case):
    def test_dgx_text(self):
        r = gpusel("--sim", "dgx-h100", "list")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0], "simulated machine: dgx-h100")
        self.assertIn("driver 570.124.06, CUDA 12.8", lines[1])
        rows = [l.split() for l in lines if l[:1].isdigit()]
        self.assertEqual([row[0] for row in rows], [str(i) for i in range(8)])
        self.assertEqual([row[1] for row in rows], [str(i) for i in range(8)])
        self.assertEqual([row[2] for row in rows], uuids("dgx-h100"))
        self.assertEqual(rows[4][-4:], ["1", "0", "B", "0%"])  # NUMA node of GPU 4, memory used, utilisation
        self.assertIn("USED UTIL", lines[2])

    def test_dgx_json_schema(self):
        j = gpusel_json("--sim", "dgx-h100", "list", "--json")
        self.assertEqual(j["simulated"], "dgx-h100")
        self.assertEqual(j["driver_version"], "570.124.06")
        self.assertIsNone(j["cuda_visible_devices"])
        self.assertEqual(j["cuda_device_order"], "FASTEST_FIRST")
        self.assertEqual((j["notes"], j["note_codes"]), ([], []))
        m = machine("dgx-h100")["gpu"]
        self.assertEqual(len(j["gpus"]), 8)
        for i, g in enumerate(j["gpus"]):
            self.assertEqual(g["index"], i)
            self.assertEqual(g["cuda_ordinal"], i)
            self.assertEqual(g["uuid"], m[i]["uuid"])
            self.assertEqual(g["name"], "NVIDIA H100 80GB HBM3")
            self.assertEqual(g["memory_total_bytes"], 80 << 30)
            self.assertEqual(g["pci_bus_id"], m[i]["pci_bus_id"])
            self.assertEqual(g["numa_node"], 0 if i < 4 else 1)
            self.assertEqual(g["compute_capability"], "9.0")
            self.assertEqual(g["cpus"], "0-55,112-167" if i < 4 else "56-111,168-223")
            self.assertEqual(g["pcie_link"], {"generation": 5, "width": 16, "max_generation": 5, "max_width": 16,
                                              "max_gbps": 63.008})

    def test_preset_hides_and_renumbers(self):
        j = gpusel_json("--sim", "dgx-h100", "list", "--json", CUDA_VISIBLE_DEVICES="5,2")
        self.assertEqual(j["cuda_visible_devices"], "5,2")
        ordinals = [g["cuda_ordinal"] for g in j["gpus"]]
        self.assertEqual(ordinals, [None, None, 1, None, None, 0, None, None])
        self.assertEqual(j["gpus"][0]["cuda_visibility"], "hidden")
        self.assertTrue(any("'-': hidden from CUDA by CUDA_VISIBLE_DEVICES=\"5,2\"" in n for n in j["notes"]))
        self.assertTrue(any("CUDA ordinals differ" in n for n in j["notes"]))
        # Each note by its code too, in the same order: a script decides from the code.
        self.assertEqual(j["note_codes"], ["preset-hides", "ordinals-differ"])
        self.assertIn("hidden from CUDA", j["notes"][j["note_codes"].index("preset-hides")])
        text = gpusel("--sim", "dgx-h100", "list", CUDA_VISIBLE_DEVICES="5,2").stdout
        self.assertIn("note: '-': hidden", text)

    def test_invalid_entry_is_explained(self):
        j = gpusel_json("--sim", "dgx-h100", "list", "--json", CUDA_VISIBLE_DEVICES="0,2,-1,1")
        self.assertEqual([g["cuda_ordinal"] for g in j["gpus"]][:3], [0, None, 1])
        self.assertTrue(any('invalid entry "-1"' in n for n in j["notes"]), j["notes"])

    def test_uuid_preset(self):
        u = uuids("dgx-h100")
        j = gpusel_json("--sim", "dgx-h100", "list", "--json", CUDA_VISIBLE_DEVICES=f"{u[7][:12]},{u[3]}")
        self.assertEqual(j["gpus"][7]["cuda_ordinal"], 0)
        self.assertEqual(j["gpus"][3]["cuda_ordinal"], 1)

    def test_mixed_machine_order_unknown(self):
        j = gpusel_json("--sim", "workstation-mixed", "list", "--json")
        self.assertEqual([g["cuda_visibility"] for g in j["gpus"]], ["unknown"] * 3)
        self.assertEqual([g["cuda_ordinal"] for g in j["gpus"]], [None] * 3)
        self.assertTrue(any("CUDA_DEVICE_ORDER=PCI_BUS_ID" in n for n in j["notes"]))
        r = gpusel("--sim", "workstation-mixed", "list")
        self.assertEqual([l.split()[1] for l in r.stdout.splitlines() if l[:1].isdigit()], ["?", "?", "?"])

    def test_mixed_machine_pci_order(self):
        j = gpusel_json("--sim", "workstation-mixed", "list", "--json", CUDA_DEVICE_ORDER="PCI_BUS_ID")
        self.assertEqual([g["cuda_ordinal"] for g in j["gpus"]], [0, 1, 2])
        self.assertEqual(j["cuda_device_order"], "PCI_BUS_ID")
        self.assertEqual([g["name"] for g in j["gpus"]],
                         ["NVIDIA RTX A4000", "NVIDIA GeForce RTX 4090", "NVIDIA RTX A6000"])

    def test_mig_devices(self):
        j = gpusel_json("--sim", "mig-a100", "list", "--json")
        g0, g1 = j["gpus"]
        self.assertTrue(g0["mig_enabled"])
        self.assertIsNone(g0["cuda_ordinal"])
        self.assertEqual([m["cuda_ordinal"] for m in g0["mig_devices"]], [0, 1, 2])
        self.assertEqual([m["gpu_instance"] for m in g0["mig_devices"]], [3, 4, 5])
        self.assertEqual(g1["cuda_ordinal"], 3)
        self.assertFalse(g1["mig_enabled"])
        self.assertTrue(any("MIG enabled" in n for n in j["notes"]))
        # The reordering note's example names a GPU --gpu accepts: GPU 1, not the MIG-enabled GPU 0
        # (which --gpu 0 refuses).
        reordered = [n for n in j["notes"] if "CUDA ordinals differ" in n]
        self.assertEqual(len(reordered), 1, j["notes"])
        self.assertIn("`--gpu 1` is the GPU with INDEX 1", reordered[0])
        self.assertNotIn("--gpu 0", reordered[0])
        self.assertEqual(gpusel("--sim", "mig-a100", "resolve", "--gpu", "1").returncode, 0)

    def test_nvml_faults_exit_1_with_reason(self):
        cases = {
            "nvml-missing": "cannot load",
            "nvml-no-v2": "lacks nvmlInit_v2",
            "nvml-init-fails": "nvmlInit_v2 failed",
        }
        for name, reason in cases.items():
            with self.subTest(machine=name):
                r = gpusel("--sim", name, "list")
                # Already simulated: the machine's fault is named, and --sim is not suggested.
                self.assertFailsWith(r, 1, "NVML is unavailable", reason, f"the simulated machine {name} models")
                self.assertNotIn("--sim", r.stderr)

    def test_lost_gpu_is_listed_with_its_state(self):
        # One GPU fallen off the bus is not "NVML unavailable": the others keep their indices.
        lost = machine("lost-gpu")["gpu"]
        r = gpusel("--sim", "lost-gpu", "list")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"\n2 +- +FAILED: lost: .*GPU is lost")
        self.assertIn("CUDA's numbering skips it", r.stdout)
        j = gpusel_json("--sim", "lost-gpu", "list", "--json")
        got = [(g["index"], g["state"], g["uuid"], g["cuda_ordinal"]) for g in j["gpus"]]
        self.assertEqual(got, [(0, "ok", lost[0]["uuid"], 0), (1, "ok", lost[1]["uuid"], 1), (2, "lost", None, None),
                               (3, "ok", lost[3]["uuid"], 2)])
        self.assertIn("GPU is lost", j["gpus"][2]["failure"])
        # The failure as data, beside the words: the library's code, the NVML call and its result.
        self.assertEqual(j["gpus"][2]["problem"],
                         {"code": "gpu-lost", "call": "nvmlDeviceGetHandleByIndex_v2", "result": 15,
                          "subject": "gpu", "fields": {"index": "2"}})
        self.assertEqual([g["problem"] for g in j["gpus"] if g["index"] != 2], [None] * 3)

    def test_nvml_faults_under_json_carry_the_code(self):
        # --json: stdout holds one error object (code, call, result, exit status, message), so that a
        # script that parses stdout learns what failed; stderr says it in words, as without --json.
        cases = {
            "nvml-missing": ("library-not-loaded", None, None),
            "nvml-no-v2": ("library-incomplete", None, None),
            "nvml-init-fails": ("driver-call-failed", "nvmlInit_v2", 9),  # NVML_ERROR_DRIVER_NOT_LOADED
        }
        for name, (code, call, result) in cases.items():
            with self.subTest(machine=name):
                r = gpusel("--sim", name, "list", "--json")
                self.assertFailsWith(r, 1, "NVML is unavailable")
                e = json.loads(r.stdout)["error"]
                self.assertEqual((e["code"], e["call"], e["result"], e["exit_code"]), (code, call, result, 1))
                self.assertIn("NVML is unavailable", e["message"])
                self.assertEqual(gpusel("--sim", name, "list").stdout, "")

    def test_without_nvml_at_all(self):
        r = gpusel("list", GPUSEL_NVML_LIBRARY="/nonexistent/libnvidia-ml.so.1")
        self.assertFailsWith(r, 1, "NVML is unavailable", "/nonexistent/libnvidia-ml.so.1", "gpusel sim list")

    def test_not_an_nvml_library(self):
        # A real shared library without NVML's symbols: loaded, then found wanting.
        r = gpusel("list", GPUSEL_NVML_LIBRARY="libm.so.6")
        self.assertFailsWith(r, 1, "lacks nvmlInit_v2")

    def test_unknown_order_value_noted(self):
        j = gpusel_json("--sim", "dgx-h100", "list", "--json", CUDA_DEVICE_ORDER="SLOWEST_FIRST")
        self.assertTrue(any("read as FASTEST_FIRST" in n for n in j["notes"]))
        self.assertEqual(j["note_codes"], ["device-order-unknown"])

    def test_empty_preset(self):
        j = gpusel_json("--sim", "single-l4", "list", "--json", CUDA_VISIBLE_DEVICES="")
        self.assertEqual(j["gpus"][0]["cuda_ordinal"], None)
        self.assertTrue(any("set but empty" in n for n in j["notes"]))
        self.assertIn("preset-empty", j["note_codes"])
        self.assertEqual(len(j["note_codes"]), len(j["notes"]))


class CommandLineTest(Case):
    def test_bad_usage_is_exit_2(self):
        self.assertFailsWith(gpusel("frobnicate"), 2, "gpusel --help")
        self.assertFailsWith(gpusel("list", "--bogus"), 2)
        self.assertFailsWith(gpusel(), 2)

    def test_help_and_version(self):
        r = gpusel("--help")
        self.assertEqual(r.returncode, 0)
        for word in ("list", "resolve", "sim", "--sim"):
            self.assertIn(word, r.stdout)
        r = gpusel("--version")
        self.assertEqual(r.returncode, 0)
        self.assertRegex(r.stdout, r"\d+\.\d+\.\d+")


if __name__ == "__main__":
    unittest.main()
