"""`gpusel run` and Python workers: each rank on its GPU.

- Python workers (`import gpusel; gpusel.bind_assigned_gpu()`) under `gpusel run`, mpirun and
  torchrun. The worker's interpreter is the test's own, which has no torch: with torch installed
  bind_assigned_gpu also calls torch.cuda.set_device, which a CPU-only torch cannot do.
- `gpusel run --set-visible own|job` for programs that do not use gpusel: CUDA_VISIBLE_DEVICES
  alone must put them on their GPU (the worker unsets GPUSEL_GPU and GPUSEL_GPUS first).
- A shell wrapper under mpirun (issue 29): `exec gpusel bind -- PROGRAM` puts each rank's unmodified
  CUDA program (cuda_hold, which takes CUDA device 0) on the rank's GPU, judged by the simulated
  NVML's process lists; bare `gpusel bind` in the wrapper says it bound nothing beyond itself.

test_launchers_nvcc.py runs these cases with a program built by the CUDA toolkit's nvcc.

Run through `launchers.py run`.
"""

import os
import unittest

import launchers
from launchers import DGX, LauncherCase, parse_workers
from support import CUDA_HOLD, Holding, contexts, shell_script

API = launchers.worker_cmd("--api")


def rank(w):
    return int(w["env"]["RANK"])


def local_rank(w):
    return int(w["env"]["LOCAL_RANK"])


def resolve(spec):
    r = launchers.run(["gpusel", "resolve", "--gpu", spec], launchers.env())
    assert r.returncode == 0, r.stderr
    return ",".join(r.stdout.split())


class LaunchCase(LauncherCase):
    def launch(self, cmd, n, **env):
        r = launchers.run(cmd, launchers.env(**env))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        w = parse_workers(r.stdout)
        self.assertEqual(len(w), n, r.stdout + r.stderr)
        return w, r.stdout + r.stderr


class PythonWorkerTest(LaunchCase):
    def test_under_gpusel_run(self):
        w, out = self.launch(["gpusel", "run", "--gpu", "2,5", "--", *API], 2)
        self.assertWorkers(w, 2, lambda x: [2, 5][local_rank(x)], output=out)

    def test_under_gpusel_run_within_a_preset_cuda_visible_devices(self):
        w, out = self.launch(["gpusel", "run", "--gpu", "2,3", "--", *API], 2, CUDA_VISIBLE_DEVICES="4,5,6,7")
        self.assertWorkers(w, 2, lambda x: [6, 7][local_rank(x)], output=out)

    @unittest.skipIf(launchers.missing("mpirun"), launchers.missing("mpirun"))
    def test_under_mpirun_with_gpusel_gpus(self):
        w, out = self.launch(launchers.mpirun_cmd(2, *API), 2, GPUSEL_GPUS=resolve("2,5"))
        self.assertWorkers(w, 2, lambda x: [2, 5][int(x["env"]["OMPI_COMM_WORLD_LOCAL_RANK"])], output=out)

    @unittest.skipIf(launchers.missing("torchrun"), launchers.missing("torchrun"))
    def test_under_torchrun(self):
        w, out = self.launch(launchers.torchrun_cmd(2, *API), 2)
        self.assertWorkers(w, 2, local_rank, output=out)


class SetVisibleTest(LaunchCase):
    UNSET = ("--unset", "GPUSEL_GPU,GPUSEL_GPUS,LOCAL_RANK")

    def test_own_makes_cuda_device_0_each_worker_s_gpu(self):
        w, out = self.launch(["gpusel", "run", "--gpu", "2,5", "--set-visible", "own", "--",
                              *launchers.worker_cmd(*self.UNSET)], 2)
        self.assertEqual(sorted(x["env"]["CUDA_VISIBLE_DEVICES"] for x in w), sorted([DGX[2], DGX[5]]))
        self.assertWorkers(w, 2, lambda x: [2, 5][rank(x)], output=out)
        self.assertEqual({x["bind"]["cuda_ordinal"] for x in w}, {0})

    def test_own_within_a_preset_cuda_visible_devices(self):
        w, out = self.launch(["gpusel", "run", "--gpu", "2,3", "--set-visible", "own", "--",
                              *launchers.worker_cmd(*self.UNSET)], 2, CUDA_VISIBLE_DEVICES="4,5,6,7")
        self.assertEqual(sorted(x["env"]["CUDA_VISIBLE_DEVICES"] for x in w), sorted([DGX[6], DGX[7]]))
        self.assertWorkers(w, 2, lambda x: [6, 7][rank(x)], output=out)

    def test_job_makes_cuda_device_local_rank_each_worker_s_gpu(self):
        w, out = self.launch(["gpusel", "run", "--gpu", "2,5", "--set-visible", "job", "--",
                              *launchers.worker_cmd("--unset", "GPUSEL_GPU,GPUSEL_GPUS")], 2)
        self.assertEqual({x["env"]["CUDA_VISIBLE_DEVICES"] for x in w}, {f"{DGX[2]},{DGX[5]}"})
        self.assertWorkers(w, 2, lambda x: [2, 5][local_rank(x)], source="launcher", rank_variable="LOCAL_RANK",
                           rank=local_rank, output=out)


@unittest.skipIf(launchers.missing("mpirun"), launchers.missing("mpirun"))
class ShellWrapperTest(LauncherCase):
    HOLD = os.path.abspath(CUDA_HOLD)

    def hold_under_mpirun(self, job, look=None):
        """`GPUSEL_GPUS=<GPUs 3,6> mpirun -np 2 job {DIR}`, each rank's cuda_hold held while the test
        looks: ({pid: CUDA_VISIBLE_DEVICES}, {pid: GPUs its contexts are on}, look(), mpirun's
        (status, stdout + stderr))."""
        e = launchers.env(GPUSEL_GPUS=resolve("3,6"))
        with Holding(launchers.mpirun_cmd(2, job, "{DIR}"), e, n=2) as h:
            ready, seen = h.ready, contexts(e)
            looked = look() if look else None
            rc, out, err = h.finish()
        return ready, {p: seen.get(p) for p in ready}, looked, (rc, out + err)

    def test_exec_gpusel_bind_puts_each_rank_s_program_on_its_gpu(self):
        ready, on, _, (rc, out) = self.hold_under_mpirun(shell_script(f'exec gpusel bind -- {self.HOLD} "$1"\n'))
        self.assertEqual(rc, 0, out)
        self.assertEqual(len(ready), 2, out)
        self.assertEqual(sorted(on.values()), [[3], [6]], f"GPUs of each program's contexts: {on}\n{out}")
        self.assertEqual(sorted(ready.values()), sorted([DGX[3], DGX[6]]))
        for pid, cvd in ready.items():  # each told its own GPU
            self.assertEqual(on[pid], [DGX.index(cvd)])

    def test_claims_are_held_while_the_programs_run(self):
        """The claim's descriptor passes through the exec (no FD_CLOEXEC): a second bind of the GPU
        is refused while the program runs on it."""
        def second_bind():
            return launchers.run(["gpusel", "bind"], launchers.env(GPUSEL_GPU=DGX[6]))
        _, on, second, (rc, out) = self.hold_under_mpirun(
            shell_script(f'exec gpusel bind -- {self.HOLD} "$1"\n'), second_bind)
        self.assertEqual(rc, 0, out)
        self.assertEqual(sorted(on.values()), [[3], [6]], out)
        self.assertEqual(second.returncode, 2, second.stdout + second.stderr)
        self.assertIn("already bound by pid", second.stderr)

    def test_bare_gpusel_bind_in_the_wrapper_says_what_to_run(self):
        # The wrapper the docs used to teach: bind binds itself, then the program takes device 0.
        ready, on, _, (rc, out) = self.hold_under_mpirun(shell_script(f'gpusel bind\nexec {self.HOLD} "$1"\n'))
        self.assertEqual(rc, 0, out)
        self.assertEqual(sorted(on.values()), [[0], [0]], out)
        self.assertEqual(out.count("`gpusel bind` bound only its own process"), 2, out)
        self.assertEqual(out.count("exec gpusel bind -- PROGRAM"), 2, out)


if __name__ == "__main__":
    unittest.main()
