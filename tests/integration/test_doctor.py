"""`gpusel doctor`: what it finds on every bundled simulated machine and in the usual broken
environments, each finding with a severity and a remedy, exit 1 when any is an error."""

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import unittest

from support import BIN, MACHINES, Case, gpusel, machine, sim_env

BUILD = os.environ.get("GPUSEL_BUILD_DIR", "build")
FAULT_CUDA = os.path.join(BUILD, "lib", "gpusel", "fault", "libcuda.so.1")

DGX = [g["uuid"] for g in machine("dgx-h100")["gpu"]]

# Launcher and scheduler variables the environment running the tests may carry.
UNSET = {k: None for k in ("SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_LOCALID", "SLURM_STEP_TASKS_PER_NODE",
                           "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "MV2_COMM_WORLD_LOCAL_RANK",
                           "MPI_LOCALRANKID", "PMI_LOCAL_RANK", "PALS_LOCAL_RANKID", "FLUX_TASK_LOCAL_ID",
                           "LOCAL_RANK", "LOCAL_WORLD_SIZE", "WORLD_SIZE", "GPUSEL_GPU", "GPUSEL_GPUS",
                           "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")}

# What doctor says about each bundled machine in a clean environment: finding ids by severity, and the
# exit status. Every machine of `gpusel sim list` must be here.
BUNDLED = {
    "dgx-h100": ({}, 0),
    "workstation-mixed": ({"warning": ["mixed-models-order"]}, 0),
    "mig-a100": ({"info": ["mig-enabled"]}, 0),
    "single-l4": ({}, 0),
    "nvml-missing": ({"warning": ["nvml-unavailable"]}, 0),
    "nvml-no-v2": ({"warning": ["nvml-unavailable"]}, 0),
    "nvml-init-fails": ({"warning": ["nvml-unavailable"]}, 0),
    "cuda-missing": ({"error": ["cuda-missing"]}, 1),
    "cuda-init-fails": ({"error": ["cuda-unavailable"]}, 1),
    "lost-gpu": ({"error": ["gpu-lost"]}, 1),
    "corrupt-copies": ({}, 0),
    "pcie-trained-down": ({"warning": ["pcie-trained-down"]}, 0),
    # An AMD machine: no NVIDIA driver is a fact there, not a fault (docs/amd.md).
    "amd-mi210": ({"info": ["amd-gpus", "cuda-missing", "nvml-unavailable"]}, 0),
    # NVIDIA's and AMD's GPUs in one machine: the AMD ones said, the NVIDIA findings as ever.
    "workstation-nvidia-amd": ({"info": ["amd-gpus-beside-nvidia"], "warning": ["mixed-models-order"]}, 0),
}


class DoctorTest(Case):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="gpusel-doctor-")
        self.leases = os.path.join(self.dir, "leases")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def env(self, name, **extra):
        return sim_env(name, **{**UNSET, "GPUSEL_LEASE_DIR": self.leases, **extra})

    def doctor(self, name, *args, **extra):
        r = gpusel("doctor", "--json", *args, env=self.env(name, **extra))
        self.assertNotIn("Traceback", r.stderr)
        self.assertIn(r.returncode, (0, 1), r.stderr)
        out = json.loads(r.stdout)
        errors = [f for f in out["findings"] if f["severity"] == "error"]
        self.assertEqual(r.returncode, 1 if errors else 0, out)
        self.assertEqual(out["errors"], len(errors))
        for f in out["findings"]:
            self.assertIn(f["severity"], ("error", "warning", "info"))
            self.assertTrue(f["message"] and f["remedy"], f)
        return r, out

    def ids(self, out, severity=None):
        return sorted(f["id"] for f in out["findings"] if severity is None or f["severity"] == severity)

    def finding(self, out, fid):
        found = [f for f in out["findings"] if f["id"] == fid]
        self.assertEqual(len(found), 1, out["findings"])
        return found[0]

    def test_every_bundled_machine(self):
        listed = gpusel("sim", "list").stdout.split()
        for name in (n for n in listed if os.path.exists(os.path.join(MACHINES, n + ".toml"))):
            with self.subTest(machine=name):
                self.assertIn(name, BUNDLED, f"add {name} to BUNDLED")
                want, code = BUNDLED[name]
                r, out = self.doctor(name)
                self.assertEqual(r.returncode, code, out)
                self.assertEqual(out["simulated"], name)
                for severity in ("error", "warning", "info"):
                    self.assertEqual(self.ids(out, severity), sorted(want.get(severity, [])), out["findings"])

    def test_bundled_details(self):
        _, out = self.doctor("lost-gpu")
        lost = [i for i, g in enumerate(machine("lost-gpu")["gpu"]) if g.get("lost")]
        f = self.finding(out, "gpu-lost")
        self.assertEqual(f["gpus"], lost)
        self.assertIn("nvidia-smi -r", f["remedy"])
        _, out = self.doctor("pcie-trained-down")
        self.assertIn("Gen4 x4", self.finding(out, "pcie-trained-down")["message"])
        self.assertIn("can do Gen4 x16", self.finding(out, "pcie-trained-down")["message"])
        _, out = self.doctor("workstation-mixed")
        self.assertIn("CUDA_DEVICE_ORDER=PCI_BUS_ID", self.finding(out, "mixed-models-order")["remedy"])
        _, out = self.doctor("cuda-missing")
        self.assertIn("container", self.finding(out, "cuda-missing")["remedy"])
        _, out = self.doctor("mig-a100")
        self.assertIn("3 MIG devices", self.finding(out, "mig-enabled")["message"])
        _, out = self.doctor("nvml-missing")
        self.assertIn("--sim", self.finding(out, "nvml-unavailable")["remedy"])

    def test_text_output(self):
        r = gpusel("doctor", env=self.env("lost-gpu"))
        self.assertEqual(r.returncode, 1)
        lines = r.stdout.splitlines()
        self.assertTrue(lines[0].startswith("gpusel doctor: 4 GPUs"), lines[0])
        self.assertIn("simulated machine lost-gpu", lines[0])
        self.assertTrue(any(l.startswith("error: GPU ") for l in lines), r.stdout)
        self.assertTrue(any(l.startswith("  remedy: ") for l in lines), r.stdout)
        self.assertIn("1 error, 0 warnings, 0 notes", lines[-1])
        r = gpusel("doctor", env=self.env("dgx-h100"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines()[-1], "no problems found")
        self.assertIn("8 GPUs (NVIDIA H100 80GB HBM3)", r.stdout)

    def test_mixed_models_with_pci_order_is_fine(self):
        r, out = self.doctor("workstation-mixed", CUDA_DEVICE_ORDER="PCI_BUS_ID")
        self.assertEqual(out["findings"], [])
        _, out = self.doctor("workstation-mixed", CUDA_DEVICE_ORDER="pci")  # not a value CUDA knows
        self.assertIn('"pci"', self.finding(out, "mixed-models-order")["message"])

    def test_visible_devices_presets(self):
        r, out = self.doctor("dgx-h100", CUDA_VISIBLE_DEVICES="0,2,-1,1")
        self.assertEqual(self.ids(out), ["visible-truncated"])
        f = self.finding(out, "visible-truncated")
        self.assertIn('invalid entry "-1"', f["message"])
        self.assertIn('"0,2" (2 devices)', f["message"])
        _, out = self.doctor("dgx-h100", CUDA_VISIBLE_DEVICES="0,9")
        self.assertIn('"9"', self.finding(out, "visible-truncated")["message"])
        _, out = self.doctor("dgx-h100", CUDA_VISIBLE_DEVICES="3,1,3")
        self.assertEqual(self.ids(out), ["visible-duplicate"])
        _, out = self.doctor("dgx-h100", CUDA_VISIBLE_DEVICES="")
        self.assertEqual(self.ids(out), ["visible-empty"])
        r, out = self.doctor("dgx-h100", CUDA_VISIBLE_DEVICES="4,5")
        self.assertEqual(out["findings"], [])
        self.assertEqual(r.returncode, 0)
        _, out = self.doctor("mig-a100", CUDA_VISIBLE_DEVICES=machine("mig-a100")["gpu"][0]["mig"][0]["uuid"])
        self.assertIn("visible-mig", self.ids(out, "info"))

    def test_amd_visibility_compositions(self):
        # Slurm's default on an AMD node sets ROCR_ and CUDA_VISIBLE_DEVICES to the same numbers:
        # HIP counts the second within ROCr's result, so HIP programs find no GPU (docs/amd.md).
        # On a machine without NVIDIA GPUs (an AMD node, as far as gpusel can tell) it is an error...
        r, out = self.doctor("nvml-missing", ROCR_VISIBLE_DEVICES="1", CUDA_VISIBLE_DEVICES="1")
        f = self.finding(out, "amd-composition-hides-all")
        self.assertEqual(f["severity"], "error")
        self.assertIn('ROCR_VISIBLE_DEVICES="1"', f["message"])
        self.assertIn("Slurm sets both", f["message"])
        self.assertIn("unset CUDA_VISIBLE_DEVICES", f["remedy"])
        self.assertEqual(r.returncode, 1)
        _, out = self.doctor("nvml-missing", ROCR_VISIBLE_DEVICES="0,,1")
        self.assertEqual(self.finding(out, "amd-rocr-empty-entry")["severity"], "error")
        _, out = self.doctor("nvml-missing", HIP_VISIBLE_DEVICES="")
        self.assertEqual(self.finding(out, "amd-hip-version-dependent")["severity"], "warning")
        # ...where NVML shows NVIDIA GPUs (Slurm sets ROCR_VISIBLE_DEVICES on NVIDIA nodes too) it is
        # a note, and doctor's verdict does not change.
        r, out = self.doctor("dgx-h100", ROCR_VISIBLE_DEVICES="2", CUDA_VISIBLE_DEVICES="2")
        f = self.finding(out, "amd-composition-hides-all")
        self.assertEqual(f["severity"], "info")
        self.assertIn("CUDA programs here are unaffected", f["message"])
        self.assertEqual(r.returncode, 0)
        # ROCR_VISIBLE_DEVICES alone, or one that HIP's numbers fit, is fine.
        r, out = self.doctor("dgx-h100", ROCR_VISIBLE_DEVICES="2,3", CUDA_VISIBLE_DEVICES="0,1")
        self.assertEqual([i for i in self.ids(out) if i.startswith("amd-")], [])

    def test_slurm_step_without_visible_devices(self):
        _, out = self.doctor("dgx-h100", SLURM_JOB_ID="4242", SLURM_STEP_ID="0")
        f = self.finding(out, "slurm-unfenced")
        self.assertEqual(f["severity"], "warning")
        self.assertIn("4242", f["message"])
        self.assertIn("--gres=gpu", f["remedy"])
        _, out = self.doctor("dgx-h100", SLURM_JOB_ID="4242", CUDA_VISIBLE_DEVICES="0,1")
        self.assertEqual(out["findings"], [])

    def test_gpusel_gpus_and_local_rank(self):
        _, out = self.doctor("dgx-h100", GPUSEL_GPUS="3,1", LOCAL_RANK="1", LOCAL_WORLD_SIZE="2")
        self.assertEqual(out["findings"], [])
        _, out = self.doctor("dgx-h100", GPUSEL_GPUS="3,1", LOCAL_RANK="2")
        self.assertEqual(self.ids(out), ["gpusel-gpus-rank"])
        self.assertIn("LOCAL_RANK=2", self.finding(out, "gpusel-gpus-rank")["message"])
        _, out = self.doctor("dgx-h100", GPUSEL_GPUS="3,1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="4")
        self.assertEqual(self.ids(out), ["gpusel-gpus-count"])
        # No rank: a worker started here would be refused (two listed GPUs visible), so doctor errs too.
        _, out = self.doctor("dgx-h100", GPUSEL_GPUS="3,1")
        self.assertEqual(self.ids(out, "error"), ["gpusel-gpus-no-rank"])
        self.assertIsNone(out["worker"])
        # One listed GPU visible (srun --gpus-per-task=1): that one is the worker's.
        _, out = self.doctor("dgx-h100", GPUSEL_GPUS=f"{DGX[3]},{DGX[1]}", CUDA_VISIBLE_DEVICES="1")
        self.assertEqual(out["findings"], [])
        self.assertEqual((out["worker"]["nvidia_smi_index"], out["worker"]["source"]), (1, "GPUSEL_GPUS"))
        _, out = self.doctor("dgx-h100", GPUSEL_GPUS="3,12", LOCAL_RANK="0")
        self.assertIn("out of range", self.finding(out, "gpusel-gpus")["message"])
        # With its data, as bind --json's error gives it: the entry and the variable it came in.
        found = self.finding(out, "gpusel-gpus")
        self.assertEqual((found["subject"], found["fields"]),
                         ("gpu-entry", {"entry": "12", "reason": "out-of-range", "variable": "GPUSEL_GPUS",
                                        "value": "3,12"}))
        _, out = self.doctor("dgx-h100", GPUSEL_GPUS="3\n1", LOCAL_RANK="0")
        self.assertEqual(self.ids(out, "error"), ["gpusel-gpus"])
        _, out = self.doctor("dgx-h100", GPUSEL_GPU="2", LOCAL_RANK="0", LOCAL_WORLD_SIZE="2")
        self.assertEqual(self.ids(out), ["gpusel-gpu-shared"])
        _, out = self.doctor("dgx-h100", LOCAL_RANK="x")
        self.assertEqual(self.ids(out), ["local-rank"])
        self.assertEqual((out["findings"][0]["subject"], out["findings"][0]["fields"]),
                         ("launch-variable", {"variable": "LOCAL_RANK", "value": "x", "reason": "rank-unreadable"}))

    def write_machine(self, base, gpu_extra):
        with open(os.path.join(MACHINES, base + ".toml")) as f:
            text = f.read()
        text = text.replace('name = "%s"' % base, 'name = "doctor-%s"' % base, 1)
        # Into the first [[gpu]] table, after its uuid.
        head, sep, rest = text.partition("[[gpu]]\n")
        text = head + sep + gpu_extra + "\n" + rest
        path = os.path.join(self.dir, "doctor-%s.toml" % base)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_persistence_mode_off(self):
        path = self.write_machine("single-l4", "persistence_mode = false")
        r = gpusel("doctor", "--json", env=self.env(path))
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        f = self.finding(out, "persistence-off")
        self.assertEqual((f["severity"], f["gpus"]), ("warning", [0]))
        self.assertIn("nvidia-smi -pm 1", f["remedy"])

    def test_foreign_processes(self):
        path = self.write_machine("single-l4", 'processes = [{ pid = 4242, used_memory = "1GiB" }]')
        out = json.loads(gpusel("doctor", "--json", env=self.env(path)).stdout)
        f = self.finding(out, "gpu-busy")
        self.assertIn("pid 4242 (1 GiB)", f["message"])
        self.assertIn("free:", f["remedy"])

    def test_leased_gpu(self):
        os.makedirs(self.leases, mode=0o700)
        uuid = machine("dgx-h100")["gpu"][5]["uuid"]
        with open(os.path.join(self.leases, uuid + ".lock"), "w") as lease:
            fcntl.flock(lease, fcntl.LOCK_EX)
            _, out = self.doctor("dgx-h100")
        f = self.finding(out, "gpu-leased")
        self.assertEqual(f["gpus"], [5])
        self.assertIn(f"pid {os.getpid()}", f["message"])

    def test_one_job_leasing_several_gpus_is_one_finding(self):
        os.makedirs(self.leases, mode=0o700)
        gpus = machine("dgx-h100")["gpu"]
        leases = []
        try:
            for index in (1, 2, 5):
                lease = open(os.path.join(self.leases, gpus[index]["uuid"] + ".lock"), "w")
                leases.append(lease)
                fcntl.flock(lease, fcntl.LOCK_EX)
            _, out = self.doctor("dgx-h100")
        finally:
            for lease in leases:
                lease.close()
        f = self.finding(out, "gpu-leased")  # once, not once per GPU
        self.assertEqual(f["gpus"], [1, 2, 5])
        self.assertIn("GPUs 1,2,5 are", f["message"])
        self.assertIn(f"pid {os.getpid()}", f["message"])

    @unittest.skipIf(os.path.exists("/var/lib/gpusel/leases"), "this machine has a shared lease store")
    def test_without_a_shared_store_root_is_not_told_sudo(self):
        home = os.path.join(self.dir, "home")
        os.mkdir(home, 0o700)
        _, out = self.doctor("dgx-h100", GPUSEL_LEASE_DIR=None, HOME=home, XDG_STATE_HOME=None)
        f = self.finding(out, "leases-per-user")
        self.assertIn("GPUSEL_LEASE_DIR=", f["message"])
        self.assertEqual(f["remedy"], "gpusel setup" if os.geteuid() == 0 else "sudo gpusel setup")

    def test_cuda_link_stub(self):
        # The CUDA double answers cuInit with CUDA_ERROR_STUB_LIBRARY on a machine whose CUDA is
        # "missing", as the toolkit's stub does, when it is loaded all the same.
        sim_cuda = os.path.join(os.environ.get("GPUSEL_SIM_ROOT", os.path.join(BUILD, "lib", "gpusel", "sim")),
                                "libcuda.so.1")
        r, out = self.doctor("cuda-missing", GPUSEL_CUDA_LIBRARY=sim_cuda)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(self.ids(out), ["cuda-stub"])
        self.assertIn("LD_LIBRARY_PATH", self.finding(out, "cuda-stub")["remedy"])

    @unittest.skipUnless(os.path.exists(FAULT_CUDA), "the fault libraries are not built")
    def test_nvml_and_cuda_disagree(self):
        # NVML from the simulated dgx-h100, CUDA from the fault library (other GPUs).
        _, out = self.doctor("dgx-h100", GPUSEL_CUDA_LIBRARY=FAULT_CUDA, GPUSEL_FAULT="")
        f = self.finding(out, "nvml-cuda-disagree")
        self.assertEqual(f["severity"], "error")
        self.assertIn("8 for NVML", f["message"])


if __name__ == "__main__":
    unittest.main()
