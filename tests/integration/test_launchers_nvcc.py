"""An unmodified CUDA program built by NVIDIA's nvcc, placed by gpusel (issue 29).

The placement cases of test_bind_exec, test_launchers_run and test_launchers_placement, run with a
program built from tests/integration/cuda_runtime_pick.cu by the CUDA 13 toolkit's nvcc (`nvcc
-cudart shared`, against the simulator's libcudart.so.13, on a dgx-h100 whose driver supports CUDA
13) instead of one built by CMake against the CUDA double. The program knows nothing of gpusel: it
takes CUDA device LOCAL_RANK (`cudaSetDevice(atoi(getenv("LOCAL_RANK")))`) or, without
cudaSetDevice, device 0, uses memory there and prints its device's PCI bus id:

- `gpusel bind -- PROGRAM` under a rank puts it on the rank's GPU;
- `exec gpusel bind -- PROGRAM` in a shell wrapper under `gpusel run` and under mpirun;
- `gpusel run --set-visible own` (device 0) and `--set-visible job` (device LOCAL_RANK);
- under a plain `gpusel run`, device LOCAL_RANK is not the worker's own GPU: the run-time check
  stops the job, for the worker itself, a grandchild and an orphan.

Where the program runs is judged by the simulator's record of its CUDA context (the NVML process
lists while it holds it, the usage folder once it was stopped), and by the bus id it printed, never
by gpusel's report. The program is built once per build folder (support.build_cuda_program, as
test_sim_runtime builds its own). Every test is skipped only without the toolkit (no
/usr/local/cuda/bin/nvcc, or GPUSEL_NVCC pointing elsewhere) or under an instrumented build; run
through `launchers.py run` (exit 77 when every test was skipped).
"""

import os
import re
import shlex
import shutil
import tempfile
import unittest

import launchers
from launchers import DGX, LauncherCase, run
from support import (BIN, INSTRUMENTED, NVCC, Holding, build_cuda_program, contexts, machine, machine_with_driver,
                     recorded_contexts, shell_script)

PROGRAM = None  # the program, built by setUpModule
MACHINE_FILE = None  # dgx-h100 with a CUDA 13 driver
TMP = None
# Each GPU's PCI bus id as cudaDeviceGetPCIBusId writes it (a 4-digit domain), by nvidia-smi index.
BUS = [g["pci_bus_id"][4:].lower() for g in machine("dgx-h100")["gpu"]]
NOT_HERE = (f"the CUDA toolkit's nvcc is absent ({NVCC})" if not os.path.exists(NVCC) else
            "the doubles are built with a sanitizer; a foreign program cannot load them" if INSTRUMENTED else None)


def setUpModule():
    global PROGRAM, MACHINE_FILE, TMP
    if NOT_HERE:
        return  # every test skips itself
    PROGRAM = build_cuda_program("cuda_runtime_pick")[0]
    TMP = tempfile.mkdtemp(prefix="gpusel-nvcc-")
    MACHINE_FILE = machine_with_driver(TMP, "dgx-h100")


def tearDownModule():
    if TMP:
        shutil.rmtree(TMP, ignore_errors=True)


def env(**extra):
    """A rank's environment (launchers.env) on the dgx-h100 with a CUDA 13 driver."""
    return launchers.env(GPUSEL_SIM_MACHINE=MACHINE_FILE, **extra)


def printed_buses(out):
    """{pid: PCI bus id} from the program's lines `cuda_runtime_pick PID on BUS`."""
    return {int(pid): bus.lower() for pid, bus in re.findall(r"^cuda_runtime_pick (\d+) on (\S+)$", out, re.M)}


@unittest.skipIf(NOT_HERE, NOT_HERE)
class NvccCase(LauncherCase):
    def held(self, cmd, e, n):
        """Runs cmd ("{DIR}" its holding folder), in which N copies of the program hold their
        contexts while the test looks: ({pid: CUDA_VISIBLE_DEVICES}, {pid: nvidia-smi indices of its
        contexts}, (exit status, stdout, stderr), cmd's pid). Each program printed the bus id of the GPU it is
        on, and printed `done` once let go."""
        with Holding(cmd, e, n=n) as h:
            ready, seen = h.ready, contexts(e)
            rc, out, err = h.finish()
        self.assertEqual(len(ready), n, f"{n} programs did not all start: {ready}\n{out}{err}")
        on = {pid: seen.get(pid) for pid in ready}
        for pid in ready:
            self.assertIsNotNone(on[pid], f"pid {pid} has no context: {seen}\n{out}{err}")
            self.assertEqual(printed_buses(out).get(pid), BUS[on[pid][0]], f"{on}\n{out}{err}")
            self.assertIn(f"cuda_runtime_pick {pid} done", out, err)
        return ready, on, (rc, out, err), h.proc.pid


class BindTest(NvccCase):
    def test_bind_puts_the_program_on_the_rank_s_gpu(self):
        # Device 0 (no cudaSetDevice) and device LOCAL_RANK (rank 0): the rank's GPU, in gpusel's process.
        for mode, rank, index in (("default", "1", 6), ("local-rank", "0", 2)):
            e = env(GPUSEL_GPUS=f"{DGX[2]},{DGX[6]}", LOCAL_RANK=rank, LOCAL_WORLD_SIZE="2")
            with self.subTest(mode=mode, rank=rank):
                ready, on, (rc, out, err), pid = self.held([BIN, "bind", "--", PROGRAM, mode, "{DIR}"], e, 1)
                self.assertEqual(rc, 0, out + err)
                self.assertEqual(on, {pid: [index]}, f"not gpusel's own process (exec), or not its GPU\n{out}{err}")
                self.assertEqual(list(ready.values()), [DGX[index]])
                self.assertIn(f"rank {rank} (LOCAL_RANK={rank})", err)

    def test_device_local_rank_beyond_the_one_gpu_bind_leaves_fails_on_no_gpu(self):
        # Rank 1 under bind sees one device: cudaSetDevice(1) fails; the program reaches no GPU
        # (the machine's GPU 1 least of all).
        state = tempfile.mkdtemp(dir=TMP)
        e = env(GPUSEL_GPUS=f"{DGX[2]},{DGX[6]}", LOCAL_RANK="1", LOCAL_WORLD_SIZE="2", GPUSEL_SIM_STATE_DIR=state)
        r = run([BIN, "bind", "--", PROGRAM, "local-rank", "1"], e)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("cudaSetDevice(LOCAL_RANK): cudaErrorInvalidDevice", r.stderr)
        self.assertEqual(recorded_contexts(state), {}, r.stdout + r.stderr)


class ShellWrapperTest(NvccCase):
    JOB = 'exec gpusel bind -- {program} default "$1"\n'

    def test_exec_gpusel_bind_in_a_wrapper_under_gpusel_run(self):
        job = shell_script(self.JOB.format(program=shlex.quote(PROGRAM)))
        ready, on, (rc, out, err), _ = self.held([BIN, "run", "--gpu", "3,6", "--", job, "{DIR}"], env(), 2)
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(sorted(on.values()), [[3], [6]], f"{on}\n{out}{err}")
        for pid, cvd in ready.items():  # each told its own GPU, and on it
            self.assertEqual(on[pid], [DGX.index(cvd)])

    @unittest.skipIf(launchers.missing("mpirun"), launchers.missing("mpirun"))
    def test_exec_gpusel_bind_in_a_wrapper_under_mpirun(self):
        job = shell_script(self.JOB.format(program=shlex.quote(PROGRAM)))
        e = env(GPUSEL_GPUS=f"{DGX[3]},{DGX[6]}")
        ready, on, (rc, out, err), _ = self.held(launchers.mpirun_cmd(2, job, "{DIR}"), e, 2)
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(sorted(on.values()), [[3], [6]], f"{on}\n{out}{err}")
        for pid, cvd in ready.items():
            self.assertEqual(on[pid], [DGX.index(cvd)])


class SetVisibleTest(NvccCase):
    def test_own_puts_device_0_on_each_worker_s_gpu(self):
        ready, on, (rc, out, err), _ = self.held([BIN, "run", "--gpu", "2,5", "--set-visible", "own", "--", PROGRAM,
                                               "default", "{DIR}"], env(), 2)
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(sorted(on.values()), [[2], [5]], f"{on}\n{out}{err}")
        for pid, cvd in ready.items():
            self.assertEqual(on[pid], [DGX.index(cvd)])

    def test_job_puts_device_local_rank_on_each_worker_s_gpu(self):
        ready, on, (rc, out, err), _ = self.held([BIN, "run", "--gpu", "2,5", "--set-visible", "job", "--", PROGRAM,
                                               "local-rank", "{DIR}"], env(), 2)
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(sorted(on.values()), [[2], [5]], f"{on}\n{out}{err}")
        self.assertEqual(set(ready.values()), {f"{DGX[2]},{DGX[5]}"})


class RunCheckTest(NvccCase):
    STOPPED = (r"rank (\d) \(GPU (\S+)\) opened a CUDA context on GPU (\d) \((\S+)\), not its own "
               r"\(process pid (\d+) `([^`]*)`(, orphaned)?")

    def assertStopped(self, line, orphaned):
        """`gpusel run --gpu 4,5 -- sh -c LINE`, the program in LINE taking device LOCAL_RANK (not
        the worker's GPU without --set-visible): exit 1, naming that process, whose context the
        simulator recorded on the machine's GPU LOCAL_RANK."""
        state = tempfile.mkdtemp(dir=TMP)
        r = run([BIN, "run", "--gpu", "4,5", "--", "sh", "-c", line], env(GPUSEL_SIM_STATE_DIR=state), timeout=120)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        m = re.search(self.STOPPED, r.stderr)
        self.assertTrue(m, r.stderr)
        rank, pid = int(m.group(1)), int(m.group(5))
        self.assertEqual((m.group(2), m.group(3), m.group(4)), (DGX[4 + rank], str(rank), DGX[rank]), r.stderr)
        self.assertRegex(m.group(6), r"cuda_runtime_pick_shared local-rank 30$")
        self.assertEqual(m.group(7) is not None, orphaned, r.stderr)
        self.assertIn("--set-visible job", r.stderr)
        self.assertEqual(recorded_contexts(state).get(pid), [DGX[rank]], r.stderr)
        # The program prints its device's bus just after making its context; the check may stop
        # it in between (seen once in CI, a loaded machine): what the simulator recorded is the
        # judge, the printed line only has to agree when there is one.
        if pid in printed_buses(r.stdout):
            self.assertEqual(printed_buses(r.stdout)[pid], BUS[rank], r.stdout)
        self.assertNotIn(f"cuda_runtime_pick {pid} done", r.stdout)

    def test_a_worker_on_a_wrong_gpu_is_stopped(self):
        self.assertStopped(f"exec {shlex.quote(PROGRAM)} local-rank 30", orphaned=False)

    def test_a_grandchild_on_a_wrong_gpu_is_stopped(self):
        self.assertStopped(f"sh -c {shlex.quote(shlex.quote(PROGRAM) + ' local-rank 30; true')}; true",
                           orphaned=False)

    def test_an_orphan_on_a_wrong_gpu_is_stopped(self):
        # The subshell ends at once: the program is orphaned and comes to gpusel (its subreaper).
        self.assertStopped(f"({shlex.quote(PROGRAM)} local-rank 30 &); sleep 30", orphaned=True)


if __name__ == "__main__":
    unittest.main()
