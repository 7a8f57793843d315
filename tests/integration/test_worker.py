"""Binding by UUID: `gpusel bind`, the environment protocol, and the C++ worker API."""

import json
import os
import subprocess
import sys
import unittest

from support import BIN, Case, gpusel, gpusel_json, machine, private_path, sim_env, uuids

DGX = uuids("dgx-h100")
MIX = uuids("workstation-mixed")  # PCI order: A4000, 4090, A6000; CUDA order: 4090, A6000, A4000
WORKER = os.environ.get("GPUSEL_WORKER_USER", "build/bin/worker_user")
RANK_VARIABLES = ["LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK",
                  "MPI_LOCALRANKID", "PMI_LOCAL_RANK", "PALS_LOCAL_RANKID", "FLUX_TASK_LOCAL_ID"]


def bind(machine_name, *args, **env):
    return gpusel_json("bind", "--json", *args, env=sim_env(machine_name, **env))


def bind_fails(machine_name, *args, **env):
    return gpusel("bind", "--json", *args, env=sim_env(machine_name, **env))


class BindTest(Case):
    def test_index_on_identical_gpus(self):
        for i in (0, 3, 7):
            j = bind("dgx-h100", "--gpu", str(i))
            self.assertEqual((j["uuid"], j["index"], j["cuda_ordinal"]), (DGX[i], i, i))
            self.assertEqual(j["name"], "NVIDIA H100 80GB HBM3")
            self.assertEqual(j["total_bytes"], 80 << 30)
            self.assertEqual(j["compute_capability"], "9.0")
            self.assertEqual(j["pci_bus_id"], machine("dgx-h100")["gpu"][i]["pci_bus_id"])
            self.assertIsNone(j["rank"])
            # The CUDA driver's own version, as the machine file gives the double.
            self.assertEqual(j["cuda_driver_version"], "12.8")

    def test_mixed_machine_binds_by_uuid_not_by_number(self):
        # nvidia-smi index 0 is the A4000, which CUDA numbers 2 under FASTEST_FIRST.
        j = bind("workstation-mixed", "--gpu", "0")
        self.assertEqual((j["uuid"], j["index"], j["cuda_ordinal"], j["name"]), (MIX[0], 0, 2, "NVIDIA RTX A4000"))
        j = bind("workstation-mixed", "--gpu", "1")
        self.assertEqual((j["uuid"], j["cuda_ordinal"]), (MIX[1], 0))
        j = bind("workstation-mixed", "--gpu", "0", CUDA_DEVICE_ORDER="PCI_BUS_ID")
        self.assertEqual((j["uuid"], j["cuda_ordinal"]), (MIX[0], 0))

    def test_preset_quota(self):
        j = bind("dgx-h100", "--gpu", "1", CUDA_VISIBLE_DEVICES="5,2")
        self.assertEqual((j["uuid"], j["index"], j["cuda_ordinal"]), (DGX[2], 2, 1))
        j = bind("dgx-h100", "--gpu", DGX[5][:10], CUDA_VISIBLE_DEVICES=f"{DGX[2]},{DGX[5]}")
        self.assertEqual((j["uuid"], j["cuda_ordinal"]), (DGX[5], 1))

    def test_unknowable_case_asks_cuda(self):
        # Mixed models, FASTEST_FIRST, an integer preset: only CUDA knows that its 0 is the 4090.
        j = bind("workstation-mixed", "--gpu", "0", CUDA_VISIBLE_DEVICES="0,2")
        self.assertEqual((j["uuid"], j["index"], j["cuda_ordinal"]), (MIX[1], 1, 0))
        j = bind("workstation-mixed", "--gpu", "1", CUDA_VISIBLE_DEVICES="0,2")
        self.assertEqual((j["uuid"], j["index"], j["cuda_ordinal"]), (MIX[0], 0, 1))
        r = gpusel("resolve", "--gpu", "1,0", env=sim_env("workstation-mixed", CUDA_VISIBLE_DEVICES="0,2"))
        self.assertEqual(r.stdout.split(), [MIX[0], MIX[1]])

    def test_unknowable_case_without_cuda_keeps_the_remedy(self):
        path = private_path("mixed-nocuda.toml")
        with open(os.path.join(os.path.dirname(__file__), "..", "..", "sim", "machines", "workstation-mixed.toml")) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(text.replace("cuda_driver_version = 12080", 'cuda_driver_version = 12080\n[faults]\ncuda = "init_fails"'))
        try:
            r = gpusel("--sim", path, "resolve", "--gpu", "0", CUDA_VISIBLE_DEVICES="1")
            self.assertFailsWith(r, 2, "CUDA_DEVICE_ORDER=PCI_BUS_ID", "asking CUDA for its order did not help",
                                 "cuInit failed")
        finally:
            os.unlink(path)

    def test_environment_protocol(self):
        gpus = f"{DGX[3]},{DGX[5]}"
        j = bind("dgx-h100", GPUSEL_GPUS=gpus, LOCAL_RANK="1")
        self.assertEqual((j["rank"], j["rank_variable"], j["uuid"], j["cuda_ordinal"]), (1, "LOCAL_RANK", DGX[5], 5))
        for var in RANK_VARIABLES:
            with self.subTest(variable=var):
                j = bind("dgx-h100", GPUSEL_GPUS=gpus, **{var: "0"})
                self.assertEqual((j["rank_variable"], j["uuid"]), (var, DGX[3]))
        self.assertEqual(j["source"], "GPUSEL_GPUS")
        # Variables that agree: no question of which launcher counts.
        j = bind("dgx-h100", GPUSEL_GPUS=gpus, SLURM_LOCALID="1", LOCAL_RANK="1", FLUX_TASK_LOCAL_ID="01")
        self.assertEqual((j["rank"], j["uuid"]), (1, DGX[5]))
        # Variables that disagree, all set by the same process (this test): which launcher started
        # the process cannot be told, so gpusel refuses and names them.
        r = bind_fails("dgx-h100", GPUSEL_GPUS=gpus, OMPI_COMM_WORLD_LOCAL_RANK="1", PMI_LOCAL_RANK="0")
        self.assertFailsWith(r, 2, "local rank is ambiguous", 'OMPI_COMM_WORLD_LOCAL_RANK="1"', 'PMI_LOCAL_RANK="0"',
                             "GPUSEL_GPU")
        # The batch step of sbatch (SLURM_LOCALID=0 with no step id) is not a task launch.
        j = bind("dgx-h100", GPUSEL_GPUS=gpus, SLURM_JOB_ID="7", SLURM_LOCALID="0", OMPI_COMM_WORLD_LOCAL_RANK="1")
        self.assertEqual((j["rank_variable"], j["uuid"]), ("OMPI_COMM_WORLD_LOCAL_RANK", DGX[5]))
        self.assertIn("batch step", j["ignored"][0])

    def test_a_worker_list_names_gpus_not_a_request(self):
        # free:N and all are the parent's to resolve; a worker given one would otherwise count it as
        # one GPU and refuse with a rank count that says nothing of the real mistake.
        for var, value, extra in (("GPUSEL_GPUS", "free:2", {"LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"}),
                                  ("GPUSEL_GPU", "free:1", {})):
            with self.subTest(variable=var):
                r = bind_fails("dgx-h100", **{var: value}, **extra)
                self.assertFailsWith(r, 2, f'{var}="{value}"', "names the GPUs themselves",
                                     f"gpusel run --gpu {value}", f"gpusel resolve --gpu {value} --format env")

    def test_inner_launcher_wins(self):
        # A launcher (here: a shell) sets OMPI_COMM_WORLD_LOCAL_RANK for its child; LOCAL_RANK was
        # set further out, by this test for the shell. The nearer one counts.
        launcher = ("import os, subprocess, sys; sys.exit(subprocess.run([sys.argv[1], 'bind', '--json'], "
                    "env=dict(os.environ, OMPI_COMM_WORLD_LOCAL_RANK='1')).returncode)")
        r = subprocess.run([sys.executable, "-c", launcher, BIN], capture_output=True, text=True, timeout=60,
                           env=sim_env("dgx-h100", LOCAL_RANK="0", GPUSEL_GPUS=f"{DGX[3]},{DGX[5]}"))
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        self.assertEqual((j["rank_variable"], j["rank"], j["uuid"]), ("OMPI_COMM_WORLD_LOCAL_RANK", 1, DGX[5]))
        self.assertIn('LOCAL_RANK="0"', j["ignored"][0])

    def test_a_gpu_given_in_code_is_checked_against_slurms_grant(self):
        # `bind --gpu` assigns in code and skips the rest of the analysis, but not Slurm's grant on
        # this node: the step was given nvidia-smi GPU 2 (SLURM_STEP_GPUS), CUDA sees 2 and 3.
        step = dict(SLURM_JOB_ID="7", SLURM_STEP_ID="0", SLURM_LOCALID="0", SLURM_STEP_GPUS="2",
                    SLURMD_NODENAME="n1")
        j = bind("dgx-h100", "--gpu", "0", CUDA_VISIBLE_DEVICES="2,3", **step)
        self.assertEqual((j["uuid"], j["cuda_ordinal"]), (DGX[2], 0))
        self.assertFailsWith(bind_fails("dgx-h100", "--gpu", "1", CUDA_VISIBLE_DEVICES="2,3", **step), 2,
                             "nvidia-smi 3", "which Slurm did not give it", "SLURM_STEP_GPUS")
        # Without CUDA_VISIBLE_DEVICES there is no grant to read it against (and no model is
        # built): the GPU asked for is bound.
        j = bind("dgx-h100", "--gpu", "3", **step)
        self.assertEqual(j["uuid"], DGX[3])

    def test_launcher_rank_without_gpusel_variables(self):
        # Step 4: visible device k for local rank k, within the scheduler's preset.
        j = bind("dgx-h100", SLURM_LOCALID="1", SLURM_JOB_ID="7", SLURM_STEP_ID="0", CUDA_VISIBLE_DEVICES="2,3")
        self.assertEqual((j["source"], j["rank_variable"], j["uuid"]), ("launcher", "SLURM_LOCALID", DGX[3]))
        j = bind("dgx-h100", LOCAL_RANK="6")
        self.assertEqual((j["source"], j["uuid"], j["cuda_ordinal"]), ("launcher", DGX[6], 6))
        # Step 5: one visible device serves any rank.
        j = bind("dgx-h100", LOCAL_RANK="3", CUDA_VISIBLE_DEVICES="5")
        self.assertEqual((j["source"], j["uuid"]), ("single", DGX[5]))
        # A rank past the visible devices, or more local ranks than devices: refused.
        self.assertFailsWith(bind_fails("dgx-h100", LOCAL_RANK="2", CUDA_VISIBLE_DEVICES="2,3"), 2, "LOCAL_RANK=2",
                             "CUDA sees only 2 devices", 'CUDA_VISIBLE_DEVICES="2,3"')
        self.assertFailsWith(bind_fails("dgx-h100", LOCAL_RANK="0", LOCAL_WORLD_SIZE="4", CUDA_VISIBLE_DEVICES="2,3"),
                             2, "LOCAL_WORLD_SIZE=4", "share")
        # Several ranks and nothing to tell them apart: never device 0 for all.
        self.assertFailsWith(bind_fails("dgx-h100", WORLD_SIZE="4"), 2, 'WORLD_SIZE="4"', "no local-rank variable")

    def test_gpusel_gpu(self):
        # A UUID is taken under any preset: CUDA's own devices decide.
        j = bind("dgx-h100", GPUSEL_GPU=DGX[6], CUDA_VISIBLE_DEVICES="4,5,6,7", LOCAL_RANK="0")
        self.assertEqual((j["source"], j["uuid"], j["cuda_ordinal"]), ("GPUSEL_GPU", DGX[6], 2))
        # An index means what --gpu means: the nvidia-smi index, within a preset.
        j = bind("dgx-h100", GPUSEL_GPU="3")
        self.assertEqual((j["source"], j["uuid"]), ("GPUSEL_GPU", DGX[3]))
        j = bind("dgx-h100", GPUSEL_GPU="1", CUDA_VISIBLE_DEVICES="4,5,6,7")
        self.assertEqual(j["uuid"], DGX[5])
        self.assertFailsWith(bind_fails("dgx-h100", GPUSEL_GPU="0,1"), 2, 'GPUSEL_GPU="0,1"', "exactly one")
        # GPUSEL_GPU wins over GPUSEL_GPUS.
        j = bind("dgx-h100", GPUSEL_GPU=DGX[2], GPUSEL_GPUS=f"{DGX[3]},{DGX[5]}", LOCAL_RANK="1")
        self.assertEqual(j["uuid"], DGX[2])

    def test_local_size_must_match_the_list(self):
        self.assertFailsWith(bind_fails("dgx-h100", GPUSEL_GPUS=f"{DGX[3]},{DGX[5]}", LOCAL_RANK="0",
                                        LOCAL_WORLD_SIZE="3"), 2, "LOCAL_WORLD_SIZE=3", "lists 2 GPUs")
        j = bind("dgx-h100", GPUSEL_GPUS=f"{DGX[3]},{DGX[5]}", OMPI_COMM_WORLD_LOCAL_RANK="1",
                 OMPI_COMM_WORLD_LOCAL_SIZE="2")
        self.assertEqual(j["uuid"], DGX[5])

    def test_environment_errors(self):
        self.assertFailsWith(bind_fails("dgx-h100", GPUSEL_GPUS="0,1", LOCAL_RANK="x1"), 2, 'LOCAL_RANK="x1"',
                             "not a local rank")
        self.assertFailsWith(bind_fails("dgx-h100", GPUSEL_GPUS="0,1", SLURM_LOCALID="-1"), 2, 'SLURM_LOCALID="-1"')
        self.assertFailsWith(bind_fails("dgx-h100", GPUSEL_GPUS="0,1", LOCAL_RANK="2"), 2, "LOCAL_RANK=2",
                             'beyond GPUSEL_GPUS="0,1"', "2 entries")
        self.assertFailsWith(bind_fails("dgx-h100", GPUSEL_GPUS="0,1"), 2, "no local rank", "LOCAL_RANK",
                             "FLUX_TASK_LOCAL_ID")
        self.assertFailsWith(bind_fails("dgx-h100", GPUSEL_GPUS="0,GPU-1", LOCAL_RANK="0"), 2,
                             'GPUSEL_GPUS="0,GPU-1"', "mixes")
        self.assertFailsWith(bind_fails("dgx-h100", "--gpu", "0,1"), 2, "exactly one")

    def test_default_when_nothing_assigned(self):
        j = bind("dgx-h100")
        self.assertEqual((j["cuda_ordinal"], j["uuid"], j["rank"]), (0, DGX[0], None))
        j = bind("dgx-h100", CUDA_VISIBLE_DEVICES="6")
        self.assertEqual((j["cuda_ordinal"], j["uuid"]), (0, DGX[6]))

    def test_not_visible_to_cuda(self):
        r = bind_fails("dgx-h100", GPUSEL_GPUS=DGX[3], LOCAL_RANK="0", CUDA_VISIBLE_DEVICES="0,1")
        self.assertFailsWith(r, 2, f"GPU {DGX[3]} is not visible to CUDA", 'CUDA_VISIBLE_DEVICES="0,1"', DGX[0],
                             DGX[1])
        # An index entry counts within the preset, as --gpu does.
        r = bind_fails("dgx-h100", GPUSEL_GPUS="5", LOCAL_RANK="0", CUDA_VISIBLE_DEVICES="0,1")
        self.assertFailsWith(r, 2, 'GPUSEL_GPUS="5"', "out of range", "exposes 2 devices")

    def test_without_nvml_entries_reach_cuda(self):
        u = uuids("nvml-missing")
        j = bind("nvml-missing", GPUSEL_GPUS="1", LOCAL_RANK="0")
        self.assertEqual((j["cuda_ordinal"], j["uuid"], j["index"]), (1, u[1], None))
        j = bind("nvml-missing", GPUSEL_GPUS=u[1][:10], LOCAL_RANK="0")
        self.assertEqual((j["cuda_ordinal"], j["uuid"]), (1, u[1]))
        j = bind("nvml-init-fails", "--gpu", uuids("nvml-init-fails")[0][:9])
        self.assertEqual(j["cuda_ordinal"], 0)

    def test_cuda_faults_exit_1(self):
        self.assertFailsWith(bind_fails("cuda-missing", "--gpu", "0"), 1, "CUDA is unavailable", "cannot load")
        self.assertFailsWith(bind_fails("cuda-init-fails", "--gpu", "0"), 1, "cuInit failed", "CUDA_ERROR_UNKNOWN")
        r = gpusel("bind", env=sim_env("dgx-h100", CUDA_VISIBLE_DEVICES=""))
        self.assertFailsWith(r, 1, "CUDA sees no device", 'CUDA_VISIBLE_DEVICES=""')
        # With --gpu, the parent-side check refuses first, as bad input.
        r = gpusel("bind", "--gpu", "0", env=sim_env("dgx-h100", CUDA_VISIBLE_DEVICES=""))
        self.assertFailsWith(r, 2, "exposes 0 devices")

    def test_mig_device_by_default(self):
        j = bind("mig-a100")
        mig0 = machine("mig-a100")["gpu"][0]["mig"][0]["uuid"]
        self.assertEqual((j["cuda_ordinal"], j["uuid"], j["index"]), (0, mig0, 0))

    def test_text_output(self):
        r = gpusel("bind", env=sim_env("dgx-h100", GPUSEL_GPUS="4,2", LOCAL_RANK="1"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"[simulated] rank 1 (LOCAL_RANK=1): CUDA ordinal 2 = {DGX[2]}", r.stdout)
        self.assertIn("nvidia-smi index 2", r.stdout)


def worker(machine_name, *steps, **env):
    r = subprocess.run([WORKER, *steps], capture_output=True, text=True, env=sim_env(machine_name, **env), timeout=60)
    if r.returncode != 0:
        raise AssertionError(r.stdout + r.stderr)
    return r.stdout.splitlines()


class WorkerApiTest(Case):
    def test_publish_then_bind(self):
        out = worker("dgx-h100", f"publish:{DGX[3]}", f"publish:{DGX[3].lower().replace('gpu-', 'gpu-')}",
                     "visible", "bind", f"publish:{DGX[3]}", "publish:3", f"publish:{DGX[3][:8]}",
                     f"publish:{DGX[4]}", "publish:4")
        self.assertEqual(out[0], f"publish:{DGX[3]}: ok ")
        self.assertEqual(out[1].split(": ok")[1], " ")
        self.assertEqual(out[2], "visible: ok 3 no-context")  # known before binding, no context made
        self.assertEqual(out[3], f"bind: ok 3 {DGX[3]} current")
        # The same GPU again, in any form, is fine after binding (NOTES.md, 4).
        for line in out[4:7]:
            self.assertIn(": ok", line)
        for line in out[7:9]:
            self.assertIn(": error 2 this process already has GPU " + DGX[3], line)

    def test_different_gpu_before_binding(self):
        out = worker("dgx-h100", "publish:2", "publish:2", "publish:02", "publish:3", f"publish:{DGX[2]}", "bind")
        self.assertEqual([l.split(": ")[1][:2] for l in out[:3]], ["ok"] * 3)
        self.assertIn("error 2 this process already has GPU CUDA ordinal 2 and cannot also take 3", out[3])
        self.assertIn("error 2", out[4])
        self.assertEqual(out[5], f"bind: ok 2 {DGX[2]} current")

    def test_default_is_recorded(self):
        out = worker("dgx-h100", "visible", "bind:4", "visible", f"publish:{DGX[4]}", "publish:5", "bind")
        self.assertEqual(out[0], "visible: ok none no-context")
        self.assertEqual(out[1], f"bind:4: ok 4 {DGX[4]} current")
        self.assertEqual(out[2], "visible: ok 4 context")
        self.assertIn(": ok", out[3])
        self.assertIn("error 2", out[4])
        self.assertEqual(out[5], f"bind: ok 4 {DGX[4]} current")

    def test_assign(self):
        out = worker("dgx-h100", "assign:0,1", "assign:6", "bind")
        self.assertIn("error 2", out[0])
        self.assertIn("exactly one", out[0])
        self.assertEqual(out[2], f"bind: ok 6 {DGX[6]} current")
        out = worker("workstation-mixed", "assign:0", "bind")
        self.assertEqual(out[1], f"bind: ok 2 {MIX[0]} current")
        out = worker("dgx-h100", "assign:abc")
        self.assertIn("error 2", out[0])

    def test_environment(self):
        out = worker("dgx-h100", "env", "bind", GPUSEL_GPUS="7,6", PMI_LOCAL_RANK="1")
        self.assertEqual(out, ["env: ok PMI_LOCAL_RANK=1", f"bind: ok 6 {DGX[6]} current"])
        out = worker("dgx-h100", "env")
        self.assertEqual(out, ["env: ok none"])

    def test_threads(self):
        out = worker("dgx-h100", f"publish:{DGX[5][:12]}", "threads:8")
        self.assertEqual(out[1], "threads:8: ok " + "5c " * 8)


if __name__ == "__main__":
    unittest.main()
