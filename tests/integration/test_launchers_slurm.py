"""Slurm (srun, sbatch; mpirun and `gpusel run` inside a batch job) puts each rank on its GPU.

One throwaway Slurm of one node with 8 fake GPUs for the whole module (launchers.Slurm). A job
holds GPUs 0-1 all along, so that every other job and step gets GPUs from 2 up (Slurm allocates
first-fit) and an index that forgot CUDA_VISIBLE_DEVICES lands on the wrong GPU. Each worker
reports its CUDA_VISIBLE_DEVICES and launcher variables beside `gpusel bind --json`; the expected
GPU is worked out from those. Run through `launchers.py run` (exit 77 when Slurm cannot come up).
"""

import json
import os
import shlex
import unittest

import launchers
from launchers import DGX, LauncherCase, cvd_index, parse_workers, sections

SLURM = launchers.Slurm()
HOLDER = None
WORKER = shlex.join(launchers.worker_cmd())
WORKER_API = shlex.join(launchers.worker_cmd("--api"))  # reports where its CUDA context really is


def setUpModule():
    global HOLDER
    SLURM.start()
    # Holds GPUs 0-1 while this process lives (tearDownModule cancels it; a killed run ends it too).
    HOLDER, _ = SLURM.submit(script(f"while kill -0 {os.getpid()} 2>/dev/null; do sleep 1; done"),
                             ["-n1", "--gres=gpu:2", "--job-name=hold"])
    SLURM.wait_running(HOLDER)


def tearDownModule():
    SLURM.stop()


def script(*lines):
    return "#!/bin/sh\n" + "\n".join(lines) + "\n"


def local(var):
    return lambda w: int(w["env"][var])


class SrunTest(LauncherCase):
    def test_srun_gres_binds_the_local_rank_th_entry_of_the_step_s_gpus(self):
        r = SLURM.srun(["-n2", "--gres=gpu:2", *launchers.worker_cmd()])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        w = parse_workers(r.stdout)
        self.assertEqual({x["env"]["CUDA_VISIBLE_DEVICES"] for x in w}, {"2,3"}, "GPUs 0-1 are held")
        self.assertWorkers(w, 2, lambda x: cvd_index(x["env"]["CUDA_VISIBLE_DEVICES"], int(x["env"]["SLURM_LOCALID"])),
                           source="launcher", rank_variable="SLURM_LOCALID", rank=local("SLURM_LOCALID"),
                           output=r.stdout + r.stderr)

    def test_srun_gpus_per_task_binds_the_one_gpu_each_task_sees(self):
        r = SLURM.srun(["-n2", "--gpus-per-task=1", *launchers.worker_cmd()])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        w = parse_workers(r.stdout)
        self.assertEqual(sorted(x["env"]["CUDA_VISIBLE_DEVICES"] for x in w), ["2", "3"])
        self.assertWorkers(w, 2, lambda x: int(x["env"]["CUDA_VISIBLE_DEVICES"]), source="single",
                           output=r.stdout + r.stderr)


    def test_doctor_in_a_step_names_the_gpu_bind_takes(self):
        # Issue 29: doctor in a one-GPU step read CUDA's eight devices, not the step's one, and
        # called Slurm's GPU a wrong one (exit 1) where bind was right.
        r = SLURM.srun(["-n1", "--gres=gpu:1", "gpusel", "doctor", "--json"])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual([f["id"] for f in out["findings"] if f["severity"] == "error"], [])
        r = SLURM.srun(["-n1", "--gres=gpu:1", *launchers.worker_cmd("--api")])
        w, = parse_workers(r.stdout)
        self.assertEqual((w["rc"], w["env"]["CUDA_VISIBLE_DEVICES"]), (0, "2"), "GPUs 0-1 are held")
        self.assertEqual(w["context"], [DGX[2]])
        self.assertEqual((out["worker"]["uuid"], out["worker"]["nvidia_smi_index"]), (DGX[2], 2))


class BatchTest(LauncherCase):
    def test_sbatch_then_srun_with_gpusel_gpus(self):
        state, out = SLURM.batch(script(
            "echo \"== batch CVD=$CUDA_VISIBLE_DEVICES\"",
            "export GPUSEL_GPUS=$(gpusel resolve --gpu 0,1 | paste -sd,)",
            f"srun -n 2 {WORKER}"), ["-n2", "--gres=gpu:2"])
        self.assertEqual(state, "COMPLETED", out)
        (cvd_line, body), = sections(out).items()
        job_cvd = cvd_line.split("CVD=")[1]
        self.assertEqual(job_cvd, "2,3", "GPUs 0-1 are held")
        w = parse_workers(body)
        self.assertEqual({x["env"]["GPUSEL_GPUS"] for x in w}, {f"{DGX[2]},{DGX[3]}"})
        self.assertWorkers(w, 2, lambda x: cvd_index(job_cvd, int(x["env"]["SLURM_LOCALID"])), source="GPUSEL_GPUS",
                           rank_variable="SLURM_LOCALID", rank=local("SLURM_LOCALID"), output=out)

    def test_sbatch_gpusel_gpus_then_srun_gpus_per_task(self):
        # Issue 29: each task sees exactly one of the listed GPUs, its own, and binds that one
        # (SLURM_LOCALID, which --gpus-per-task keeps from counting, is not needed).
        state, out = SLURM.batch(script(
            "echo \"== batch CVD=$CUDA_VISIBLE_DEVICES\"",
            "export GPUSEL_GPUS=$(gpusel resolve --gpu 0,1,2,3 | paste -sd,)",
            f"srun -n 4 --gpus-per-task=1 {WORKER_API}"), ["-n4", "--gpus-per-task=1"])
        self.assertEqual(state, "COMPLETED", out)
        (cvd_line, body), = sections(out).items()
        self.assertEqual(cvd_line.split("CVD=")[1], "2,3,4,5", "GPUs 0-1 are held")
        w = parse_workers(body)
        self.assertEqual(len(w), 4, out)
        got = sorted((x["rc"], x["env"]["CUDA_VISIBLE_DEVICES"], tuple(x.get("context") or ())) for x in w)
        want = sorted((0, str(i), (DGX[i],)) for i in range(2, 6))
        self.assertEqual(got, want, out)

    def test_per_task_gpus_outside_the_list_are_refused_naming_why(self):
        # The list names the job's first two GPUs; tasks 2 and 3 get the other two.
        state, out = SLURM.batch(script(
            "export GPUSEL_GPUS=$(gpusel resolve --gpu 0,1 | paste -sd,)",
            f"srun -n 4 --gpus-per-task=1 {WORKER_API}"), ["-n4", "--gpus-per-task=1"])
        w = sorted(parse_workers(out), key=lambda x: x["env"]["CUDA_VISIBLE_DEVICES"])
        self.assertEqual([x["env"]["CUDA_VISIBLE_DEVICES"] for x in w], ["2", "3", "4", "5"], out)
        self.assertEqual([x["rc"] for x in w], [0, 0, 1, 1], out)
        self.assertEqual([x.get("context") for x in w[:2]], [[DGX[2]], [DGX[3]]])
        for x in w[2:]:
            self.assertIn("--gpus-per-task", x["stderr"])
            self.assertIn("none of them is among the devices CUDA shows this process", x["stderr"])
            self.assertNotIn("no local rank", x["stderr"])

    def test_sbatch_then_mpirun_uses_open_mpi_s_local_rank_not_the_batch_step_s(self):
        # The batch script is the batch step: SLURM_LOCALID=0 there, and mpirun passes it to every rank.
        state, out = SLURM.batch(script(
            "echo \"== plain $CUDA_VISIBLE_DEVICES\"",
            f"mpirun -np 4 {WORKER}",
            "export GPUSEL_GPUS=$(gpusel resolve --gpu 0,1,2,3 | paste -sd,)",
            "echo \"== gpusel_gpus $CUDA_VISIBLE_DEVICES\"",
            f"mpirun -np 4 {WORKER}"), ["-n4", "--gres=gpu:4"])
        self.assertEqual(state, "COMPLETED", out)
        parts = {name.split()[0]: (name.split()[1], text) for name, text in sections(out).items() if name}
        self.assertEqual(set(parts), {"plain", "gpusel_gpus"}, out)
        for name, source in (("plain", "launcher"), ("gpusel_gpus", "GPUSEL_GPUS")):
            with self.subTest(name):
                job_cvd, text = parts[name]
                self.assertEqual(job_cvd, "2,3,4,5", "GPUs 0-1 are held")
                w = parse_workers(text)
                self.assertEqual({x["env"].get("SLURM_LOCALID") for x in w}, {"0"}, "the batch step's, inherited")
                self.assertWorkers(w, 4, lambda x: cvd_index(job_cvd, int(x["env"]["OMPI_COMM_WORLD_LOCAL_RANK"])),
                                   source=source, rank_variable="OMPI_COMM_WORLD_LOCAL_RANK",
                                   rank=local("OMPI_COMM_WORLD_LOCAL_RANK"), output=out)

    def test_sbatch_then_gpusel_run_indexes_within_the_job_s_gpus(self):
        state, out = SLURM.batch(script(
            "echo \"== batch CVD=$CUDA_VISIBLE_DEVICES\"",
            f"gpusel run --gpu 1,3 -- {WORKER}"), ["-n2", "--gres=gpu:4"])
        self.assertEqual(state, "COMPLETED", out)
        (cvd_line, body), = sections(out).items()
        job_cvd = cvd_line.split("CVD=")[1]
        self.assertEqual(job_cvd, "2,3,4,5", "GPUs 0-1 are held")
        w = parse_workers(body)
        # Each worker's GPUSEL_GPU names its GPU: no rank is needed to find it.
        self.assertWorkers(w, 2, lambda x: cvd_index(job_cvd, [1, 3][int(x["env"]["LOCAL_RANK"])]),
                           source="GPUSEL_GPU", output=out)


if __name__ == "__main__":
    unittest.main()
