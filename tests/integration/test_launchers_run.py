"""`gpusel run` and Python workers: each rank on its GPU.

- Python workers (`import gpusel; gpusel.bind_assigned_gpu()`) under `gpusel run`, mpirun and
  torchrun. The worker's interpreter is the test's own, which has no torch: with torch installed
  bind_assigned_gpu also calls torch.cuda.set_device, which a CPU-only torch cannot do.
- `gpusel run --set-visible own|job` for programs that do not use gpusel: CUDA_VISIBLE_DEVICES
  alone must put them on their GPU (the worker unsets GPUSEL_GPU and GPUSEL_GPUS first).

Run through `launchers.py run`.
"""

import unittest

import launchers
from launchers import DGX, LauncherCase, parse_workers

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


if __name__ == "__main__":
    unittest.main()
