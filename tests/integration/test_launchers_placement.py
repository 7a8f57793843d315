"""Placement is verified, not only inferred (issue 20), under real launchers on simulated machines.

Each case is one that put processes on a wrong or shared GPU with exit 0 before: an inherited
GPUSEL_GPU under srun, mpirun and MPICH's mpiexec.hydra; nested launchers (srun or mpiexec.hydra
each starting torchrun); torch.multiprocessing.spawn, which tells no rank; srun with several GPUs
per task; Slurm on a node of mixed GPU models; an unmodified program under a plain `gpusel run`,
also as a grandchild or an orphan of a worker; `gpusel run` itself under srun, mpirun and torchrun.
One throwaway Slurm of one node for the module (a job holds GPUs 0-1, so steps get GPUs from 2 up).
Run through `launchers.py run` (exit 77 when every test was skipped). test_launchers_nvcc.py runs the
unmodified-program cases with a program built by the CUDA toolkit's nvcc.
"""

import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
import unittest

import launchers
from launchers import DGX, LauncherCase, cvd_index, parse_workers, run
from support import BIN, MACHINES, private_dir, recorded_contexts, sim_env

SLURM = launchers.Slurm()
HOLDER = None
WORKER = shlex.join(launchers.worker_cmd())
SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's, with python3-torch
CUDA_LOCAL_RANK = os.environ.get("GPUSEL_CUDA_LOCAL_RANK", "build/bin/cuda_local_rank")


def setUpModule():
    global HOLDER
    try:
        SLURM.start()
    except unittest.SkipTest:
        return  # the Slurm cases skip themselves; the others still run
    HOLDER, _ = SLURM.submit("#!/bin/sh\n" f"while kill -0 {os.getpid()} 2>/dev/null; do sleep 1; done\n",
                             ["-n1", "--gres=gpu:2", "--job-name=hold"])
    SLURM.wait_running(HOLDER)


def tearDownModule():
    SLURM.stop()


def needs_slurm(test):
    def wrapper(self):
        if SLURM.dir is None:
            self.skipTest("no Slurm here (see test_launchers_slurm for why)")
        return test(self)
    wrapper.__name__ = test.__name__
    return wrapper


def torchrun_wrapped(n, port_from, worker=WORKER):
    """A shell line starting torchrun with N workers, its rendezvous port offset by the shell
    variable `port_from` (each outer task its own torchrun)."""
    cmd = launchers.torchrun_cmd(n, "PLACEHOLDER")
    port = next(a for a in cmd if a.startswith("127.0.0.1:"))
    # A port of its own for each outer task (0-7), each found free: an offset from one free port
    # could land on a port in use (seen once: "Address already in use", the job failed).
    ports = " ".join(str(launchers.free_port()) for _ in range(8))
    cmd = [f"127.0.0.1:$(echo {ports} | cut -d' ' -f$((${port_from} + 1)))" if a == port else a for a in cmd]
    text = " ".join(a if a.startswith("127.0.0.1:$") else shlex.quote(a) for a in cmd[:-1])
    return f"{text} {worker}"


class InheritedGpuselGpuTest(LauncherCase):
    def assertAllRefused(self, workers, n, output):
        self.assertEqual(len(workers), n, output)
        for w in workers:
            self.assertEqual(w["rc"], 2, json.dumps(w))
            self.assertIn("names one GPU", w["stderr"])
            self.assertIn("GPUSEL_GPUS", w["stderr"])

    @needs_slurm
    def test_srun_with_an_exported_gpusel_gpu_is_refused(self):
        e = SLURM.env(GPUSEL_GPU=DGX[5])
        r = SLURM.srun(["-n4", *launchers.worker_cmd()], e)
        self.assertAllRefused(parse_workers(r.stdout), 4, r.stdout + r.stderr)
        # doctor, in a task's environment, calls it the same error.
        r = SLURM.srun(["-n2", "gpusel", "doctor", "--json"], e)
        for doc in re.findall(r"^\{.*?^\}", r.stdout, re.S | re.M):
            ids = [f["id"] for f in json.loads(doc)["findings"] if f["severity"] == "error"]
            self.assertIn("gpusel-gpu-shared", ids)

    def test_gpusel_run_around_mpirun(self):
        if launchers.missing("mpirun"):
            self.skipTest(launchers.missing("mpirun"))
        r = run([BIN, "run", "--gpu", "free:1", "--", *launchers.mpirun_cmd(2, *launchers.worker_cmd())],
                launchers.env())
        self.assertNotEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertAllRefused(parse_workers(r.stdout), 2, r.stdout + r.stderr)

    def test_gpusel_run_around_mpiexec_hydra(self):
        if launchers.missing("mpiexec.hydra"):
            self.skipTest(launchers.missing("mpiexec.hydra"))
        r = run([BIN, "run", "--gpu", "free:1", "--", "mpiexec.hydra", "-n", "2", *launchers.worker_cmd()],
                launchers.env())
        self.assertNotEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertAllRefused(parse_workers(r.stdout), 2, r.stdout + r.stderr)

    def test_gpusel_run_s_own_workers_are_fine(self):
        r = run([BIN, "run", "--gpu", "1,4", "--", *launchers.worker_cmd()], launchers.env())
        self.assertEqual(r.returncode, 0, r.stderr)
        w = parse_workers(r.stdout)
        self.assertWorkers(w, 2, lambda x: [1, 4][int(x["env"]["LOCAL_RANK"])], source="GPUSEL_GPU", output=r.stderr)


class NestedLaunchersTest(LauncherCase):
    def nested_workers(self, result):
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        return parse_workers(result.stdout)

    @needs_slurm
    def test_srun_each_starting_torchrun(self):
        if launchers.missing("torchrun"):
            self.skipTest(launchers.missing("torchrun"))
        line = torchrun_wrapped(2, "SLURM_LOCALID")
        r = SLURM.srun(["-n2", "--gres=gpu:4", "sh", "-c", line], timeout=120)
        w = self.nested_workers(r)
        # Four processes, four GPUs: SLURM_LOCALID x 2 + LOCAL_RANK within the step's GPUs.
        self.assertWorkers(w, 4, lambda x: cvd_index(x["env"]["CUDA_VISIBLE_DEVICES"],
                                                     2 * int(x["env"]["SLURM_LOCALID"]) + int(x["env"]["LOCAL_RANK"])),
                           output=r.stdout + r.stderr)

    def test_mpiexec_hydra_each_starting_torchrun(self):
        for program in ("mpiexec.hydra", "torchrun"):
            if launchers.missing(program):
                self.skipTest(launchers.missing(program))
        line = torchrun_wrapped(2, "MPI_LOCALRANKID")
        r = run(["mpiexec.hydra", "-n", "2", "sh", "-c", line], launchers.env(), timeout=120)
        w = self.nested_workers(r)
        self.assertWorkers(w, 4, lambda x: 2 * int(x["env"]["MPI_LOCALRANKID"]) + int(x["env"]["LOCAL_RANK"]),
                           output=r.stdout + r.stderr)


class SpawnTest(LauncherCase):
    SCRIPT = textwrap.dedent("""
        import json, os, sys, time
        import torch.multiprocessing as mp
        import gpusel

        def work(rank, assign, out):
            try:
                if assign:
                    gpusel.assign_gpu(str(rank))
                ordinal = gpusel.bind_assigned_gpu()
                uuid = gpusel.gpu_identity(ordinal)["uuid"]
                time.sleep(1)  # both hold their GPUs at once
                result = {"rank": rank, "uuid": uuid}
            except Exception as e:
                result = {"rank": rank, "error": str(e)}
            with open(f"{out}.{rank}", "w") as f:
                json.dump(result, f)

        if __name__ == "__main__":
            mp.spawn(work, args=(sys.argv[1] == "assign", sys.argv[2]), nprocs=2, join=True)
        """)

    def spawn(self, mode):
        if not os.path.exists(SYSTEM_PYTHON) or subprocess.run([SYSTEM_PYTHON, "-c", "import torch"],
                                                               capture_output=True).returncode != 0:
            self.skipTest("Debian's python3-torch is not installed")
        d = private_dir("gpusel-spawn-")
        script = os.path.join(d, "train.py")
        with open(script, "w") as f:
            f.write(self.SCRIPT)
        r = run([SYSTEM_PYTHON, script, mode, os.path.join(d, "out")], launchers.env(), timeout=120)
        results = []
        for rank in (0, 1):
            with open(os.path.join(d, f"out.{rank}")) as f:
                results.append(json.load(f))
        return r, results

    def test_spawn_without_a_rank_is_refused_not_shared(self):
        r, results = self.spawn("bind")
        errors = [x["error"] for x in results if "error" in x]
        self.assertEqual(len(errors), 1, results)
        self.assertIn("already bound by pid", errors[0])
        self.assertIn("torch.multiprocessing.spawn", errors[0])
        self.assertIn("assign_gpu(rank)", errors[0])

    def test_spawn_with_assign_gpu(self):
        r, results = self.spawn("assign")
        self.assertEqual(sorted(x.get("uuid") for x in results), sorted(DGX[:2]), results)


class LauncherVariablesTest(LauncherCase):
    def test_submitit_local_variables(self):
        out = []
        for rank in (0, 1):
            r = run(launchers.worker_cmd(), launchers.env(SUBMITIT_LOCAL_LOCALID=str(rank), SUBMITIT_LOCAL_NTASKS="2"))
            out += parse_workers(r.stdout)
        got = sorted((w["bind"]["rank_variable"], w["bind"]["rank"], w["bind"]["uuid"]) for w in out)
        self.assertEqual(got, [("SUBMITIT_LOCAL_LOCALID", 0, DGX[0]), ("SUBMITIT_LOCAL_LOCALID", 1, DGX[1])])


class SlurmTasksTest(LauncherCase):
    @needs_slurm
    def test_several_gpus_per_task_bind_the_first_of_their_own(self):
        r = SLURM.srun(["-n3", "--gpus-per-task=2", *launchers.worker_cmd()])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        w = parse_workers(r.stdout)
        self.assertEqual(len({x["env"]["CUDA_VISIBLE_DEVICES"] for x in w}), 3, "each task its own two GPUs")
        self.assertWorkers(w, 3, lambda x: cvd_index(x["env"]["CUDA_VISIBLE_DEVICES"], 0), source="default",
                           output=r.stdout + r.stderr)

    @needs_slurm
    def test_mixed_models_are_refused_unless_pci_bus_order(self):
        # Eight GPUs: 0-5 slow, 6-7 fast. Slurm gives nvidia-smi 2 (0-1 are held) and writes
        # CUDA_VISIBLE_DEVICES=2, which CUDA reads fastest first: nvidia-smi 0.
        machine = mixed_machine()
        e = SLURM.env(**sim_env(machine))
        e["PATH"] = os.path.dirname(os.path.abspath(BIN)) + os.pathsep + e["PATH"]
        e.pop("CUDA_DEVICE_ORDER", None)
        r = SLURM.srun(["-n1", "--gres=gpu:1", *launchers.worker_cmd()], e)
        w = parse_workers(r.stdout)
        self.assertEqual(len(w), 1, r.stdout + r.stderr)
        self.assertEqual(w[0]["env"]["CUDA_VISIBLE_DEVICES"], "2")
        self.assertEqual(w[0]["rc"], 2, json.dumps(w[0]))
        self.assertIn("CUDA_DEVICE_ORDER=PCI_BUS_ID", w[0]["stderr"])
        self.assertIn("nvidia-smi 0", w[0]["stderr"])
        e["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        r = SLURM.srun(["-n1", "--gres=gpu:1", *launchers.worker_cmd()], e)
        w = parse_workers(r.stdout)
        self.assertEqual(w[0]["rc"], 0, json.dumps(w[0]))
        self.assertEqual((w[0]["bind"]["nvidia_smi_index"], w[0]["bind"]["cuda_ordinal"]), (2, 0))


    @needs_slurm
    def test_a_visible_list_an_mpi_wrapper_set_is_blamed_on_the_wrapper(self):
        # Issue 29: inside sbatch (GPUs 2,3 of eight identical H100s), a wrapper sets
        # CUDA_VISIBLE_DEVICES from Open MPI's local rank. Refused, naming what Slurm set; no
        # CUDA_DEVICE_ORDER=PCI_BUS_ID advice, which cannot help on one model.
        if launchers.missing("mpirun"):
            self.skipTest(launchers.missing("mpirun"))
        wrapped = "CUDA_VISIBLE_DEVICES=$OMPI_COMM_WORLD_LOCAL_RANK exec " + shlex.join(launchers.worker_cmd("--api"))
        state, out = SLURM.batch("#!/bin/sh\n" + shlex.join(launchers.mpirun_cmd(2, "sh", "-c", wrapped)) + "\n",
                                 ["-n2", "--gres=gpu:2"])
        w = parse_workers(out)
        self.assertGreaterEqual(len(w), 1, out)  # mpirun stops the other rank when the first fails
        self.assertNotEqual(state, "COMPLETED", out)
        for x in w:
            self.assertEqual(x["env"]["SLURM_JOB_GPUS"], "2,3", "GPUs 0-1 are held")
            self.assertNotEqual(x["rc"], 0, json.dumps(x))
            self.assertFalse(x.get("context"), json.dumps(x))
            self.assertIn('is not what Slurm set ("2,3")', x["stderr"])
            self.assertIn("SLURM_JOB_GPUS", x["stderr"])
            self.assertNotIn("PCI_BUS_ID", x["stderr"])


def mixed_machine():
    """A machine file of eight GPUs: six RTX A4000 and, last in PCI order, two RTX 4090."""
    path = os.path.join(private_dir("gpusel-mixed-"), "mixed8.toml")
    text = ['name = "mixed8"', 'driver_version = "570.133.07"', "cuda_driver_version = 12080"]
    for i in range(8):
        fast = i >= 6
        text += ["", "[[gpu]]", f'uuid = "GPU-{i:08x}-1111-2222-3333-444455556666"',
                 f'name = "{"NVIDIA GeForce RTX 4090" if fast else "NVIDIA RTX A4000"}"',
                 f'pci_bus_id = "00000000:{0x10 + i:02X}:00.0"',
                 f'memory_total = "{"24GiB" if fast else "16GiB"}"',
                 f'compute_capability = "{"8.9" if fast else "8.6"}"', f"sm_count = {128 if fast else 48}",
                 "numa_node = 0", 'cpus = "0-1"', "pcie_h2d_gbps = 25.0", "pcie_d2h_gbps = 25.0",
                 f"memory_bandwidth_gbps = {1000.0 if fast else 400.0}", f"speed = {2.0 if fast else 1.0}"]
    with open(path, "w") as f:
        f.write("\n".join(text) + "\n")
    return path


class RunCheckTest(LauncherCase):
    def test_an_unmodified_program_under_plain_run_is_stopped(self):
        e = launchers.env()
        r = run([BIN, "run", "--gpu", "2,3,5,7", "--", CUDA_LOCAL_RANK, "20"], e, timeout=60)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertRegex(r.stderr, r"rank \d \(GPU GPU-[0-9a-f-]+\) opened a CUDA context on GPU \d")
        self.assertIn("--set-visible job", r.stderr)
        # With --set-visible job, cuda:LOCAL_RANK is each worker's own GPU: nothing to stop.
        r = run([BIN, "run", "--quiet", "--set-visible", "job", "--gpu", "2,3,5,7", "--", CUDA_LOCAL_RANK, "3"], e,
                timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(sorted(re.findall(r"on CUDA device (\d)", r.stdout)), ["0", "1", "2", "3"])
        # Turned off on purpose.
        r = run([BIN, "run", "--quiet", "--no-placement-check", "--gpu", "2,3", "--", CUDA_LOCAL_RANK, "2"], e,
                timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def misplaced(self, line, orphaned):
        """`gpusel run --gpu 4,5 -- sh -c LINE` (an unmodified program somewhere in it takes
        cuda:LOCAL_RANK): the job is stopped as for a worker of its own, the process named, and
        the simulator records that very process's context on the GPU the line names."""
        state = private_dir("gpusel-state-")
        r = run([BIN, "run", "--gpu", "4,5", "--", "sh", "-c", line],
                launchers.env(GPUSEL_SIM_STATE_DIR=state), timeout=120)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        m = re.search(r"rank (\d) \(GPU (\S+)\) opened a CUDA context on GPU (\d) \((\S+)\), not its own "
                      r"\(process pid (\d+) `([^`]*)`(, orphaned)?", r.stderr)
        self.assertTrue(m, r.stderr)
        rank, pid = int(m.group(1)), int(m.group(5))
        self.assertEqual((m.group(2), m.group(3), m.group(4)), (DGX[4 + rank], str(rank), DGX[rank]), r.stderr)
        self.assertRegex(m.group(6), r"cuda_local_rank 30$")
        self.assertEqual(m.group(7) is not None, orphaned, r.stderr)
        self.assertIn("--set-visible job", r.stderr)
        # The program took cuda:LOCAL_RANK: the simulator saw that process's context there.
        self.assertEqual(recorded_contexts(state).get(pid), [DGX[rank]], r.stderr)
        return r

    def test_an_orphan_on_a_wrong_gpu_is_stopped(self):
        # The subshell ends at once: the program is orphaned and comes to gpusel (its subreaper).
        self.misplaced(f"({shlex.quote(CUDA_LOCAL_RANK)} 30 &); sleep 30", orphaned=True)
        # On its own GPU (--set-visible job), an orphan is left alone.
        r = run([BIN, "run", "--quiet", "--set-visible", "job", "--gpu", "4,5", "--", "sh", "-c",
                 f"({shlex.quote(CUDA_LOCAL_RANK)} 1 &); sleep 2"], launchers.env(), timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_an_orphan_no_rank_claims_is_held_to_the_job_s_gpus(self):
        # A session of its own and no LOCAL_RANK or GPUSEL_GPU: nothing says which worker it came
        # from, so it may use any of the job's GPUs and no other (it takes cuda:0, nvidia-smi 0).
        prog = f"setsid env -u LOCAL_RANK -u GPUSEL_GPU {shlex.quote(CUDA_LOCAL_RANK)} 30"
        state = private_dir("gpusel-state-")
        r = run([BIN, "run", "--gpu", "4,5", "--", "sh", "-c", f"({prog} &); sleep 30"],
                launchers.env(GPUSEL_SIM_STATE_DIR=state), timeout=120)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        m = re.search(r"a process the workers left running opened a CUDA context on GPU 0 \((\S+)\), none of the "
                      r"job's \((\S+)\) \(process pid (\d+) `[^`]*cuda_local_rank 30`, orphaned", r.stderr)
        self.assertTrue(m, r.stderr)
        self.assertEqual((m.group(1), m.group(2)), (DGX[0], f"{DGX[4]},{DGX[5]}"))
        self.assertEqual(recorded_contexts(state).get(int(m.group(3))), [DGX[0]], r.stderr)

    def test_a_grandchild_on_a_wrong_gpu_is_stopped(self):
        # A child of the worker's child, still in the worker's tree.
        self.misplaced(f"sh -c {shlex.quote(shlex.quote(CUDA_LOCAL_RANK) + ' 30; true')}; true", orphaned=False)

    def test_ranks_per_gpu(self):
        r = run([BIN, "run", "--quiet", "--gpu", "0,1,2,3,4,5,6,7", "--ranks-per-gpu", "8", "--",
                 *launchers.worker_cmd()], launchers.env(), timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        w = parse_workers(r.stdout)
        self.assertEqual(len(w), 64)
        for x in w:
            rank = int(x["env"]["LOCAL_RANK"])
            self.assertEqual(x["bind"]["uuid"], DGX[rank // 8], x)
            self.assertTrue(x["bind"]["shared"], x)
        r = run([BIN, "run", "--gpu", "0", "--ranks-per-gpu", "0", "--", "true"], launchers.env())
        self.assertEqual(r.returncode, 2, r.stderr)


class RunInsideLaunchersTest(LauncherCase):
    """`gpusel run` under srun, mpirun and torchrun: its workers are its own, not the outer job's
    (issue 29). Each worker binds through the Python package and reports the simulator's record of
    its context, read while it holds it."""

    def run_workers(self, result, n):
        """The N workers of the gpusel runs in `result`, each bound by GPUSEL_GPU (run's own LOCAL_RANK
        its rank) and with its one context on that very GPU; returns them."""
        out = result.stdout + result.stderr
        self.assertEqual(result.returncode, 0, out)
        w = parse_workers(result.stdout)
        self.assertEqual(len(w), n, out)
        for x in w:
            self.assertEqual(x["rc"], 0, json.dumps(x))
            self.assertEqual(x["api"]["source"], ["GPUSEL_GPU", int(x["env"]["LOCAL_RANK"])], json.dumps(x))
            self.assertEqual(x["api"]["contexts"], [x["env"]["GPUSEL_GPU"]], json.dumps(x))
        self.assertEqual(len({x["env"]["GPUSEL_GPU"] for x in w}), n, "two workers on one GPU:\n" + out)
        return w

    @needs_slurm
    def test_srun_tasks_each_running_gpusel_run(self):
        # One task: run's --gpu 0,1 are the first two of the step's GPUs (Slurm's CUDA_VISIBLE_DEVICES).
        r = SLURM.srun(["-n1", "--gres=gpu:2", "gpusel", "run", "--gpu", "0,1", "--", *launchers.worker_cmd("--api")])
        for x in self.run_workers(r, 2):
            cvd = x["env"]["CUDA_VISIBLE_DEVICES"]
            self.assertEqual(x["env"]["GPUSEL_GPU"], DGX[cvd_index(cvd, int(x["env"]["LOCAL_RANK"]))], json.dumps(x))
        # `gpusel bind` as the worker says why srun's SLURM_LOCALID does not count.
        r = SLURM.srun(["-n1", "--gres=gpu:2", "gpusel", "run", "--gpu", "0,1", "--", *launchers.worker_cmd()])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        w = parse_workers(r.stdout)
        self.assertEqual(sorted((x["rc"], x["bind"]["rank_variable"], x["bind"]["rank"]) for x in w),
                         [(0, "LOCAL_RANK", 0), (0, "LOCAL_RANK", 1)], r.stdout + r.stderr)
        for x in w:
            self.assertEqual([i for i in x["bind"]["ignored"] if i.startswith("SLURM_LOCALID=")],
                             ['SLURM_LOCALID="0" (set by a launcher around gpusel run, whose workers are its own; '
                              'GPUSEL_RUN_OUTER names it)'], json.dumps(x))
        # Two tasks on the node (SLURM_LOCALID 0 and 1), each gpusel run taking two free GPUs of the step.
        r = SLURM.srun(["-n2", "--gres=gpu:4", "gpusel", "run", "--gpu", "free:2", "--",
                        *launchers.worker_cmd("--api")], timeout=120)
        w = self.run_workers(r, 4)
        step = {DGX[cvd_index(w[0]["env"]["CUDA_VISIBLE_DEVICES"], k)] for k in range(4)}
        self.assertEqual({x["env"]["GPUSEL_GPU"] for x in w}, step, r.stdout + r.stderr)
        self.assertEqual(sorted(x["env"]["SLURM_LOCALID"] for x in w), ["0", "0", "1", "1"])
        # The step's GPUs stay a quota: a third GPU is refused, naming Slurm's CUDA_VISIBLE_DEVICES.
        r = SLURM.srun(["-n1", "--gres=gpu:2", "gpusel", "run", "--gpu", "2", "--", *launchers.worker_cmd("--api")])
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("CUDA_VISIBLE_DEVICES", r.stderr)
        self.assertEqual(parse_workers(r.stdout), [])

    def test_mpirun_ranks_each_running_gpusel_run(self):
        if launchers.missing("mpirun"):
            self.skipTest(launchers.missing("mpirun"))
        r = run(launchers.mpirun_cmd(1, BIN, "run", "--gpu", "3,6", "--", *launchers.worker_cmd("--api")),
                launchers.env(), timeout=120)
        w = self.run_workers(r, 2)
        self.assertEqual(sorted(x["env"]["GPUSEL_GPU"] for x in w), sorted([DGX[3], DGX[6]]))
        r = run(launchers.mpirun_cmd(2, BIN, "run", "--gpu", "free:2", "--", *launchers.worker_cmd("--api")),
                launchers.env(), timeout=120)
        w = self.run_workers(r, 4)
        self.assertEqual(sorted(x["env"]["OMPI_COMM_WORLD_LOCAL_RANK"] for x in w), ["0", "0", "1", "1"])

    def test_torchrun_workers_each_running_gpusel_run(self):
        if launchers.missing("torchrun"):
            self.skipTest(launchers.missing("torchrun"))
        r = run(launchers.torchrun_cmd(2, BIN, "run", "--gpu", "free:2", "--", *launchers.worker_cmd("--api")),
                launchers.env(), timeout=180)
        self.run_workers(r, 4)


class PresetCaseTest(LauncherCase):
    def test_a_lower_case_gpu_prefix_is_refused_and_exposes_nothing(self):
        e = launchers.env(CUDA_VISIBLE_DEVICES="gpu-" + DGX[3][4:12])
        r = run([BIN, "resolve", "--gpu", "0"], e)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("GPU-" + DGX[3][4:12] + " instead", r.stderr)
        r = run([BIN, "bind"], e)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("not documented", r.stderr)
        r = run([os.environ.get("GPUSEL_CUDA_USER", "build/bin/cuda_user")], e)
        self.assertRegex(r.stdout, r"count 0|init \d+ CUDA_ERROR_NO_DEVICE")


if __name__ == "__main__":
    unittest.main()
