"""torchrun (it sets LOCAL_RANK) puts each rank on its GPU: CUDA device LOCAL_RANK by default, the
LOCAL_RANK-th entry of GPUSEL_GPUS when that is set, within a preset CUDA_VISIBLE_DEVICES.

torchrun is only the launcher here: the workers are `launchers.py worker` (running `gpusel bind
--json`), started with --no_python. Run through `launchers.py run` (exit 77 without torchrun).
"""

import unittest

import launchers
from launchers import DGX, LauncherCase, parse_workers

WORKER = launchers.worker_cmd()


def setUpModule():
    reason = launchers.missing("torchrun")
    if reason:
        raise unittest.SkipTest(reason)


def local_rank(w):
    return int(w["env"]["LOCAL_RANK"])


def resolve(spec):
    r = launchers.run(["gpusel", "resolve", "--gpu", spec], launchers.env())
    assert r.returncode == 0, r.stderr
    return ",".join(r.stdout.split())


class TorchrunTest(LauncherCase):
    def torchrun(self, n, **env):
        r = launchers.run(launchers.torchrun_cmd(n, *WORKER), launchers.env(**env))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return parse_workers(r.stdout), r.stdout + r.stderr

    def test_cuda_device_local_rank(self):
        w, out = self.torchrun(2)
        self.assertWorkers(w, 2, local_rank, source="launcher", rank_variable="LOCAL_RANK", rank=local_rank,
                           output=out)

    def test_gpusel_gpus(self):
        gpus = resolve("4,7")
        self.assertEqual(gpus, f"{DGX[4]},{DGX[7]}")
        w, out = self.torchrun(2, GPUSEL_GPUS=gpus)
        self.assertWorkers(w, 2, lambda x: [4, 7][local_rank(x)], source="GPUSEL_GPUS", rank_variable="LOCAL_RANK",
                           rank=local_rank, output=out)

    def test_a_preset_cuda_visible_devices(self):
        w, out = self.torchrun(4, CUDA_VISIBLE_DEVICES="4,5,6,7")
        self.assertWorkers(w, 4, lambda x: 4 + local_rank(x), source="launcher", rank_variable="LOCAL_RANK",
                           rank=local_rank, output=out)


if __name__ == "__main__":
    unittest.main()
