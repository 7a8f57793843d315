"""`gpusel resolve` on the simulated machines, including every NVML fault."""

import collections
import json
import os
import re
import tempfile
import unittest

from support import SOURCE, Case, gpusel, gpusel_json, machine, private_path, uuids

DGX = uuids("dgx-h100")
MIXED = uuids("workstation-mixed")


class ResolveTest(Case):
    def resolve(self, spec, machine="dgx-h100", **env):
        r = gpusel("--sim", machine, "resolve", "--gpu", spec, **env)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout.split()

    def test_indices_and_prefixes(self):
        self.assertEqual(self.resolve("0,3"), [DGX[0], DGX[3]])
        self.assertEqual(self.resolve("7, 1"), [DGX[7], DGX[1]])
        self.assertEqual(self.resolve(DGX[5][:10].lower()), [DGX[5]])
        self.assertEqual(self.resolve(f"{DGX[2]},{DGX[6][:8]}"), [DGX[2], DGX[6]])

    def test_simulated_is_said(self):
        r = gpusel("--sim", "dgx-h100", "resolve", "--gpu", "0")
        self.assertIn("simulated machine: dgx-h100", r.stderr)

    def test_json(self):
        j = gpusel_json("--sim", "dgx-h100", "resolve", "--gpu", "1,2", "--json")
        self.assertEqual(j, {"resolved": True, "through_cuda": False, "notes": [], "note_codes": [],
                             "gpus": [DGX[1], DGX[2]], "nvml_problem": None})
        # A note in words and by its code, in the same order.
        j = gpusel_json("--sim", "dgx-h100", "resolve", "--gpu", "1", "--json", CUDA_VISIBLE_DEVICES="4,5")
        self.assertEqual(j["note_codes"], ["preset-renumbers"])
        self.assertIn("nvidia-smi 5", j["notes"][0])

    def test_json_failure_carries_the_code(self):
        # Bad input under --json: exit 2, the message on stderr, and on stdout an error object with
        # the code a script can test; without --json, stdout stays empty.
        r = gpusel("--sim", "dgx-h100", "resolve", "--gpu", "9", "--json")
        self.assertFailsWith(r, 2, '--gpu entry "9" is out of range')
        e = json.loads(r.stdout)["error"]
        self.assertEqual((e["code"], e["call"], e["result"], e["exit_code"]), ("bad-input", None, None, 2))
        self.assertIn('--gpu entry "9" is out of range', e["message"])
        # What it is about and the values it names, as data.
        self.assertEqual((e["subject"], e["fields"]), ("gpu-entry", {"entry": "9", "reason": "out-of-range"}))
        self.assertEqual(gpusel("--sim", "dgx-h100", "resolve", "--gpu", "9").stdout, "")
        # The same through the whole parser (--sim after the command).
        r = gpusel("resolve", "--sim", "dgx-h100", "--json", "--gpu", "GPU-zz")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(json.loads(r.stdout)["error"]["code"], "bad-input")

    def test_json_failure_data_of_each_kind_of_refusal(self):
        # Refusals found past the command line, each with what it is about and its values, as
        # gpusel_last_error_subject/_field give them (docs/c-api.md's table).
        mixed_order = {"CUDA_VISIBLE_DEVICES": "0,1", "GPUSEL_PROBE_HELPER": "/nonexistent"}
        cases = (
            ("dgx-h100", {}, ["resolve", "--gpu", "free:20"], "gpu-request",
             {"request": "free:20", "reason": "too-few-gpus", "usable": "8"}),
            ("workstation-mixed", mixed_order, ["resolve", "--gpu", "5"], "gpu-entry",
             {"entry": "5", "reason": "order-unknown"}),
            ("dgx-h100", {"CUDA_VISIBLE_DEVICES": "0,1"}, ["resolve", "--gpu", "GPU-zz"], "gpu-entry",
             {"entry": "GPU-zz", "reason": "no-match"}),
            ("lost-gpu", {}, ["resolve", "--gpu", "2"], "gpu-entry",
             {"entry": "2", "index": "2", "reason": "gpu-failed"}),  # a lost GPU has no UUID to name
            ("dgx-h100", {"GPUSEL_GPUS": "0,9", "LOCAL_RANK": "1"}, ["bind"], "gpu-entry",
             {"entry": "9", "reason": "out-of-range", "variable": "GPUSEL_GPUS", "value": "0,9",
              "check": "gpusel-gpus"}),
            ("dgx-h100", {"GPUSEL_GPU": "free:2"}, ["bind"], "gpu-request",
             {"request": "free:2", "reason": "not-a-list", "variable": "GPUSEL_GPU", "value": "free:2",
              "check": "gpusel-gpu"}),
            ("dgx-h100", {"LOCAL_RANK": "x"}, ["bind"], "launch-variable",
             {"variable": "LOCAL_RANK", "value": "x", "reason": "rank-unreadable", "check": "local-rank"}),
            ("dgx-h100", {"CUDA_VISIBLE_DEVICES": "gpu-4ba7"}, ["bind"], "cuda-visible-devices",
             {"variable": "CUDA_VISIBLE_DEVICES", "value": "gpu-4ba7", "reason": "uuid-case",
              "check": "cuda-visible-case"}),
            ("dgx-h100", {"GPUSEL_GPU": "GPU-ffff"}, ["bind"], "gpu",
             {"gpu": "GPU-ffff", "reason": "not-on-this-machine", "check": "gpu-on-another-node"}),
            ("dgx-h100", {"GPUSEL_GPU": DGX[1][:12], "CUDA_VISIBLE_DEVICES": DGX[0]}, ["bind"], "gpu",
             {"gpu": DGX[1][:12], "reason": "not-visible-to-cuda", "check": "gpu-not-visible"}),
            ("dgx-h100", {"GPUSEL_SHARE": "maybe"}, ["bind", "--gpu", "1"], "launch-variable",
             {"variable": "GPUSEL_SHARE", "value": "maybe", "reason": "not-0-or-1"}),
        )
        for name, env, words, subject, fields in cases:
            with self.subTest(words=words, env=env):
                r = gpusel("--sim", name, *words, "--json", **env)
                self.assertEqual(r.returncode, 2, r.stderr)
                e = json.loads(r.stdout)["error"]
                self.assertEqual((e["subject"], e["fields"]), (subject, fields))
        # --json=false asks for no JSON, also when the command line is refused.
        for words in (["--gpu", "abc", "--json=false"], ["--gpu", "9", "--json=false"]):
            r = gpusel("--sim", "dgx-h100", "resolve", *words)
            self.assertEqual((r.returncode, r.stdout), (2, ""), r.stderr)

    def test_json_failure_while_reading_the_command_line(self):
        # A value refused while the command line is read (CLI11 runs --gpu's check then), a slip
        # the explainer words, an unknown option: each still answers --json with its data, before
        # or after --json on the line; without --json stdout stays empty.
        cases = (
            (["--gpu", "0,0", "--json"], "gpu-request", {"request": "0,0", "reason": "same-gpu-twice"}),
            (["--json", "--gpu", "free:x"], "gpu-request", {"request": "free:x", "reason": "free-count-unreadable"}),
            (["--gpu", "0,x", "--json"], "gpu-entry", {"entry": "x", "reason": "unreadable"}),
            (["--json", "--gpu", "CUDA_VISIBLE_DEVICES=1"], "gpu-request",
             {"request": "CUDA_VISIBLE_DEVICES=1", "reason": "assignment", "variable": "CUDA_VISIBLE_DEVICES"}),
            (["--json", "--gpu", "0", "1"], "gpu-request", {"request": "0 1", "reason": "split-by-shell"}),
            (["--json", "--gpu", "0", "--colour"], None, {}),
        )
        for words, subject, fields in cases:
            with self.subTest(words=words):
                r = gpusel("--sim", "dgx-h100", "resolve", *words)
                self.assertEqual(r.returncode, 2, r.stderr)
                e = json.loads(r.stdout)["error"]
                self.assertEqual((e["code"], e["exit_code"], e["subject"], e["fields"]),
                                 ("bad-input", 2, subject, fields))
                self.assertIn(e["message"], r.stderr)
                quiet = gpusel("--sim", "dgx-h100", "resolve", *[w for w in words if w != "--json"])
                self.assertEqual((quiet.returncode, quiet.stdout), (2, ""))

    def test_preset_renumbering_is_said_once(self):
        r = gpusel("--sim", "dgx-h100", "resolve", "--gpu", "2,3", CUDA_VISIBLE_DEVICES="4,5,6,7")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), [DGX[6], DGX[7]])
        self.assertEqual(r.stderr.count('--gpu 2,3 counts within CUDA_VISIBLE_DEVICES="4,5,6,7": nvidia-smi 6,7'), 1,
                         r.stderr)
        # No renumbering, no note.
        r = gpusel("--sim", "dgx-h100", "resolve", "--gpu", "0,1", CUDA_VISIBLE_DEVICES="0,1,2")
        self.assertNotIn("counts within", r.stderr)
        # Past the preset: how many it exposes, and which GPUs those are.
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "resolve", "--gpu", "4", CUDA_VISIBLE_DEVICES="4,5,6,7"),
                             2, "exposes 4 devices", "nvidia-smi 4,5,6,7")

    def test_uuid_under_a_preset_of_indices(self):
        # The reference module refuses this; gpusel places the preset's entries (one GPU model).
        self.assertEqual(self.resolve(DGX[5][:12], CUDA_VISIBLE_DEVICES="4,5,6,7"), [DGX[5]])
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "resolve", "--gpu", DGX[1][:12],
                                    CUDA_VISIBLE_DEVICES="4,5,6,7"), 2, "not one of the GPUs", "GPU 1 exists")
        # A mixed machine under FASTEST_FIRST: CUDA is asked for its order.
        self.assertEqual(self.resolve(MIXED[0][:12], "workstation-mixed", CUDA_VISIBLE_DEVICES="2"), [MIXED[0]])

    def test_lost_gpu_keeps_indices(self):
        lost = [g["uuid"] for g in machine("lost-gpu")["gpu"]]
        r = gpusel("--sim", "lost-gpu", "resolve", "--gpu", "3,0")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), [lost[3], lost[0]])
        self.assertFailsWith(gpusel("--sim", "lost-gpu", "resolve", "--gpu", "2"), 2, '"2"', "GPU 2", "lost",
                             "pick another GPU")

    def test_preset_quota(self):
        self.assertEqual(self.resolve("0,1", CUDA_VISIBLE_DEVICES="6,4"), [DGX[6], DGX[4]])
        self.assertEqual(self.resolve("1", CUDA_VISIBLE_DEVICES="0,2,-1,1"), [DGX[2]])
        self.assertEqual(self.resolve(DGX[4][:9], CUDA_VISIBLE_DEVICES=f"{DGX[4]},{DGX[1]}"), [DGX[4]])
        self.assertEqual(self.resolve("1", CUDA_VISIBLE_DEVICES=f"{DGX[4][:12]},{DGX[1][:12]}"), [DGX[1]])

    def test_mixed_machine(self):
        self.assertEqual(self.resolve("0", "workstation-mixed"), [MIXED[0]])
        self.assertEqual(self.resolve("0", "workstation-mixed", CUDA_VISIBLE_DEVICES="2",
                                      CUDA_DEVICE_ORDER="PCI_BUS_ID"), [MIXED[2]])
        # NVML alone cannot place an integer preset here; gpusel asks CUDA in a child process: under
        # FASTEST_FIRST (4090, A6000, A4000), CUDA's device 2 is the A4000, nvidia-smi index 0.
        self.assertEqual(self.resolve("0", "workstation-mixed", CUDA_VISIBLE_DEVICES="2"), [MIXED[0]])
        self.assertEqual(self.resolve("1,0", "workstation-mixed", CUDA_VISIBLE_DEVICES="0,1"), [MIXED[2], MIXED[1]])

    def test_a_mistyped_uuid_gets_the_nearest_as_a_suggestion(self):
        typo = DGX[0][:-1] + ("0" if DGX[0][-1] != "0" else "1")  # the last character wrong
        for entry in (typo, DGX[0][:6] + "x" + DGX[0][7:12], DGX[0][:17] + DGX[0][18:]):
            with self.subTest(entry=entry):
                r = gpusel("--sim", "dgx-h100", "resolve", "--gpu", entry)
                self.assertFailsWith(r, 2, f'"{entry}"', "matches no GPU", f"did you mean {DGX[0]} (GPU 0)?")
                self.assertEqual(r.stdout, "")  # suggested, never picked
        # Nothing near: no suggestion.
        r = gpusel("--sim", "dgx-h100", "resolve", "--gpu", "GPU-zzzzzzzz")
        self.assertFailsWith(r, 2, "matches no GPU", "check for a typo")
        self.assertNotIn("did you mean", r.stderr)

    def test_bad_entries_exit_2(self):
        cases = [
            ("8", {}, ['"8"', "out of range", "8 GPUs", "gpusel list"]),
            ("GPU-ffff", {}, ['"GPU-ffff"', "matches no GPU"]),
            ("GPU-", {}, ["prefix of 8 GPUs"]),
            ("0,GPU-1", {}, ["mixes"]),
            ("1,01", {}, ["same GPU twice"]),
            ("", {}, ["names no GPU"]),
            ("cuda:0", {}, ['"cuda:0"', "neither"]),
            ("2", {"CUDA_VISIBLE_DEVICES": "3,5"}, ['CUDA_VISIBLE_DEVICES="3,5"', "exposes 2 devices"]),
            ("2", {"CUDA_VISIBLE_DEVICES": "0,1,-1,2"}, ['invalid entry "-1"']),
            (DGX[0][:10], {"CUDA_VISIBLE_DEVICES": "1,2"}, ["not one of the GPUs", "GPU 0 exists"]),
            (DGX[0][:10], {"CUDA_VISIBLE_DEVICES": DGX[1]}, ["not one of the GPUs", "GPU 0 exists"]),
            ("0", {"CUDA_VISIBLE_DEVICES": "MIG-aaaa"}, ["selects MIG devices"]),
            ("0", {"CUDA_VISIBLE_DEVICES": "1,1"}, ["names one GPU twice"]),
        ]
        for spec, env, pieces in cases:
            with self.subTest(spec=spec, env=env):
                self.assertFailsWith(gpusel("--sim", "dgx-h100", "resolve", "--gpu", spec, **env), 2, *pieces)

    def test_mig_gpu_refused(self):
        r = gpusel("--sim", "mig-a100", "resolve", "--gpu", "0")
        self.assertFailsWith(r, 2, "MIG enabled")
        self.assertEqual(self.resolve("1", "mig-a100"), [uuids("mig-a100")[1]])

    def test_missing_gpu_option(self):
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "resolve"), 2, "--gpu")

    def test_without_nvml_passes_entries_on(self):
        for name in ("nvml-missing", "nvml-no-v2", "nvml-init-fails"):
            with self.subTest(machine=name):
                r = gpusel("--sim", name, "resolve", "--gpu", "gpu-ab12, GPU-cd")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(r.stdout.split(), ["GPU-ab12", "GPU-cd"])
                self.assertIn("NVML is unavailable", r.stderr)
                self.assertIn("CUDA's own devices", r.stderr)

    def test_without_nvml_indices_go_through_cuda(self):
        for name in ("nvml-missing", "nvml-no-v2", "nvml-init-fails"):
            with self.subTest(machine=name):
                u = uuids(name)  # PCI order: nvidia-smi's
                j = gpusel_json("--sim", name, "resolve", "--gpu", "1,0", "--json")
                self.assertEqual((j["resolved"], j["through_cuda"], j["gpus"]), (True, True, [u[1], u[0]]))
                self.assertIn("PCI bus order", j["notes"][0])
                self.assertEqual(j["note_codes"], ["nvml-unavailable"])
                # Why NVML is unavailable, as data beside the note's words.
                want = {"nvml-missing": ("library-not-loaded", None), "nvml-no-v2": ("library-incomplete", None),
                        "nvml-init-fails": ("driver-call-failed", "nvmlInit_v2")}[name]
                self.assertEqual((j["nvml_problem"]["code"], j["nvml_problem"]["call"]), want)
        # Without NVML and without CUDA, indices cannot be placed: refused, never guessed.
        path = private_path("nothing.toml")
        with open(os.path.join(SOURCE, "sim", "machines", "nvml-init-fails.toml")) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(text.replace("[faults]", '[faults]\ncuda = "init_fails"'))
        try:
            self.assertFailsWith(gpusel("--sim", path, "resolve", "--gpu", "0"), 1, "cannot be placed",
                                 "NVML is unavailable", "asking CUDA failed too", "GPU UUIDs")
        finally:
            os.unlink(path)
        # Bad input is still bad without NVML.
        self.assertFailsWith(gpusel("--sim", "nvml-missing", "resolve", "--gpu", "1,001"), 2, "same GPU twice")


class SimOptionTest(Case):
    def test_unknown_machine(self):
        self.assertFailsWith(gpusel("--sim", "dgx-h1000", "list"), 2, "did you mean 'dgx-h100'?", "gpusel sim list")
        self.assertFailsWith(gpusel("--sim", "no-such-machine", "list"), 2, "no bundled machine named 'no-such-machine'",
                             "gpusel sim list")

    def test_broken_machine_file_names_file_line_key(self):
        import os
        import tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
            f.write('name = "x"\ndriver_version = "1"\ncuda_driver_version = 12000\n\n[[gpu]]\nuuid = "GPU-1"\n')
        try:
            r = gpusel("--sim", f.name, "list")
            self.assertFailsWith(r, 2, f.name + ":6:", "'uuid'")
        finally:
            os.unlink(f.name)

    def test_sim_list(self):
        r = gpusel("sim", "list")
        self.assertEqual(r.returncode, 0, r.stderr)
        names = [l.split()[0] for l in r.stdout.splitlines()]
        for want in ("dgx-h100", "workstation-mixed", "mig-a100", "single-l4", "nvml-missing", "nvml-no-v2",
                     "nvml-init-fails", "cuda-missing", "cuda-init-fails", "lost-gpu"):
            self.assertIn(want, names)
        self.assertTrue(all(len(l.split()) > 2 for l in r.stdout.splitlines()), "every line has a description")

    def test_sim_env(self):
        r = gpusel("sim", "env", "single-l4")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"export LD_LIBRARY_PATH='[^']*/lib/gpusel/sim")
        self.assertRegex(r.stdout, r"export GPUSEL_SIM_MACHINE='[^']*/single-l4\.toml'")
        self.assertFailsWith(gpusel("sim", "env"), 2)
        self.assertFailsWith(gpusel("sim", "env", "nope"), 2, "no bundled machine")


class NvmlSessionTest(Case):
    """One NVML session per command, and no enumeration of every GPU to name one."""

    def nvml_calls(self, *args):
        with tempfile.NamedTemporaryFile(mode="r", suffix=".trace") as trace:
            r = gpusel("--sim", "dgx-h100", *args, GPUSEL_SIM_TRACE=trace.name)
            self.assertEqual(r.returncode, 0, r.stderr)
            calls = re.findall(r"libnvidia-ml\.so\.1: (\w+)\(", trace.read())
        return r, collections.Counter(calls)

    def test_bind_initialises_nvml_once_and_finds_its_gpu_by_uuid(self):
        # Resolving the index enumerates the 8 GPUs once; naming the bound GPU's nvidia-smi index
        # asks NVML for that one GPU by its UUID.
        r, calls = self.nvml_calls("bind", "--gpu", "3", "--json")
        self.assertEqual(calls["nvmlInit_v2"], 1, calls)
        self.assertEqual(calls["nvmlShutdown"], 1, calls)
        self.assertEqual(calls["nvmlDeviceGetHandleByIndex_v2"], 8, calls)
        self.assertEqual(calls["nvmlDeviceGetHandleByUUID"], 1, calls)
        self.assertIn('"index": 3', r.stdout.replace('"index":3', '"index": 3'))

    def test_resolve_initialises_nvml_once(self):
        r, calls = self.nvml_calls("resolve", "--gpu", "0,1,2,3,4,5,6,7")
        self.assertEqual(r.stdout.split(), DGX)
        self.assertEqual((calls["nvmlInit_v2"], calls["nvmlShutdown"], calls["nvmlDeviceGetCount_v2"]),
                         (1, 1, 1), calls)


if __name__ == "__main__":
    unittest.main()
