"""Open MPI's mpirun on its own (no Slurm) puts each rank on its GPU, even when the caller's
environment holds a LOCAL_RANK that mpirun hands to every rank unchanged.

Run through `launchers.py run` (exit 77 when mpirun is not installed).
"""

import unittest

import launchers
from launchers import DGX, LauncherCase, parse_workers

WORKER = launchers.worker_cmd()


def setUpModule():
    reason = launchers.missing("mpirun")
    if reason:
        raise unittest.SkipTest(reason)


def local_rank(w):
    return int(w["env"]["OMPI_COMM_WORLD_LOCAL_RANK"])


def resolve(spec, **env):
    r = launchers.run(["gpusel", "resolve", "--gpu", spec], launchers.env(**env))
    assert r.returncode == 0, r.stderr
    return ",".join(r.stdout.split())


class MpirunTest(LauncherCase):
    def mpirun(self, n, **env):
        r = launchers.run(launchers.mpirun_cmd(n, *WORKER), launchers.env(**env))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        w = parse_workers(r.stdout)
        self.assertEqual({x["env"].get("LOCAL_RANK") for x in w}, {env.get("LOCAL_RANK")})
        return w, r.stdout + r.stderr

    def test_an_inherited_local_rank_does_not_put_every_rank_on_one_gpu(self):
        w, out = self.mpirun(2, LOCAL_RANK="0")
        self.assertWorkers(w, 2, local_rank, source="launcher", rank_variable="OMPI_COMM_WORLD_LOCAL_RANK",
                           rank=local_rank, output=out)

    def test_gpusel_gpus_with_an_inherited_local_rank(self):
        gpus = resolve("3,6")
        self.assertEqual(gpus, f"{DGX[3]},{DGX[6]}")
        w, out = self.mpirun(2, LOCAL_RANK="0", GPUSEL_GPUS=gpus)
        self.assertWorkers(w, 2, lambda x: [3, 6][local_rank(x)], source="GPUSEL_GPUS",
                           rank_variable="OMPI_COMM_WORLD_LOCAL_RANK", rank=local_rank, output=out)

    def test_a_preset_cuda_visible_devices(self):
        w, out = self.mpirun(4, CUDA_VISIBLE_DEVICES="4,5,6,7")
        self.assertWorkers(w, 4, lambda x: 4 + local_rank(x), source="launcher",
                           rank_variable="OMPI_COMM_WORLD_LOCAL_RANK", rank=local_rank, output=out)


if __name__ == "__main__":
    unittest.main()
