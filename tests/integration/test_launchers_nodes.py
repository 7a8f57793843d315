"""Across nodes: a Slurm of two nodes on this machine (two slurmd, n1 and n2, four fake GPUs each),
each node its own simulated machine of four H100s (a task picks its machine by SLURMD_NODENAME).
`srun -N2 -n8` puts every rank on its own node's GPU; a UUID of the other node is refused there.
Run through `launchers.py run` (exit 77 when Slurm cannot come up).
"""

import json
import os
import shlex
import tempfile
import unittest

import launchers
from launchers import LauncherCase, cvd_index, parse_workers

SLURM = launchers.Slurm(nodes=("n1", "n2"), gpus=4)
MACHINES = {}
WRAPPER = None


def machine_file(folder, node):
    """Four H100s whose UUIDs name the node, so that no UUID of one node is the other's."""
    tag = {"n1": "a1", "n2": "b2"}[node]
    uuids = [f"GPU-{tag}{i:06x}-1111-2222-3333-444455556666" for i in range(4)]
    lines = [f'name = "node-{node}"', 'driver_version = "570.124.06"', "cuda_driver_version = 12080"]
    for i, uuid in enumerate(uuids):
        lines += ["", "[[gpu]]", f'uuid = "{uuid}"', 'name = "NVIDIA H100 80GB HBM3"',
                  f'pci_bus_id = "00000000:{0x18 + 0x10 * i:02X}:00.0"', 'memory_total = "80GiB"',
                  'compute_capability = "9.0"', "sm_count = 132", "numa_node = 0", 'cpus = "0-1"',
                  "pcie_h2d_gbps = 55.0", "pcie_d2h_gbps = 55.0", "memory_bandwidth_gbps = 3350.0"]
    path = os.path.join(folder, f"{node}.toml")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path, uuids


def setUpModule():
    global WRAPPER
    SLURM.start()
    folder = tempfile.mkdtemp(prefix="gpusel-nodes-")
    os.chmod(folder, 0o755)
    for node in SLURM.nodes:
        MACHINES[node] = machine_file(folder, node)
    # Each task runs on its own node's simulated machine.
    WRAPPER = os.path.join(folder, "on-node")
    with open(WRAPPER, "w") as f:
        f.write('#!/bin/sh\neval "$(gpusel sim env "' + folder + '/$SLURMD_NODENAME.toml")"\nexec "$@"\n')
    os.chmod(WRAPPER, 0o755)


def tearDownModule():
    SLURM.stop()


class TwoNodesTest(LauncherCase):
    def test_every_rank_on_its_own_node_s_gpu(self):
        r = SLURM.srun(["-N2", "-n8", "--ntasks-per-node=4", "--gres=gpu:4", WRAPPER, *launchers.worker_cmd()],
                       timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        workers = parse_workers(r.stdout)
        self.assertEqual(len(workers), 8, r.stdout + r.stderr)
        got, want = [], []
        for w in workers:
            node = w["env"]["SLURMD_NODENAME"]
            _, uuids = MACHINES[node]
            got.append((node, w["env"]["SLURM_LOCALID"], w["rc"], w["bind"]["uuid"]))
            want.append((node, w["env"]["SLURM_LOCALID"], 0,
                         uuids[cvd_index(w["env"]["CUDA_VISIBLE_DEVICES"], int(w["env"]["SLURM_LOCALID"]))]))
        self.assertEqual(sorted(got), sorted(want))
        self.assertEqual(len({g[3] for g in got}), 8, "two ranks on one GPU")
        self.assertEqual(sorted(g[0] for g in got), ["n1"] * 4 + ["n2"] * 4)

    def test_a_uuid_of_the_other_node_is_refused_there(self):
        theirs = MACHINES["n1"][1][2]
        e = SLURM.env(GPUSEL_GPU=theirs)
        r = SLURM.srun(["-N2", "-n2", "--ntasks-per-node=1", "--gres=gpu:4", WRAPPER, *launchers.worker_cmd()], e,
                       timeout=120)
        workers = {w["env"]["SLURMD_NODENAME"]: w for w in parse_workers(r.stdout)}
        self.assertEqual(set(workers), {"n1", "n2"}, r.stdout + r.stderr)
        self.assertEqual((workers["n1"]["rc"], workers["n1"]["bind"]["uuid"]), (0, theirs), json.dumps(workers["n1"]))
        self.assertEqual(workers["n2"]["rc"], 2, json.dumps(workers["n2"]))
        self.assertIn(f"GPU {theirs} is not visible to CUDA in this process", workers["n2"]["stderr"])

    def test_gpusel_run_on_each_node(self):
        # One task per node, each a gpusel run of its own over its node's four GPUs (issue 29): the
        # workers are run's, whatever srun's SLURM_LOCALID and SLURM_STEP_TASKS_PER_NODE say.
        r = SLURM.srun(["-N2", "-n2", "--ntasks-per-node=1", "--gres=gpu:4", WRAPPER, "gpusel", "run", "--gpu",
                        "free:4", "--", *launchers.worker_cmd("--api")], timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        workers = parse_workers(r.stdout)
        got = {}
        for w in workers:
            node = w["env"]["SLURMD_NODENAME"]
            self.assertEqual(w["rc"], 0, json.dumps(w))
            self.assertEqual(w["api"]["source"], ["GPUSEL_GPU", int(w["env"]["LOCAL_RANK"])], json.dumps(w))
            # The simulator's record: the worker's one context is on the GPU run gave it.
            self.assertEqual(w["api"]["contexts"], [w["env"]["GPUSEL_GPU"]], json.dumps(w))
            got.setdefault(node, set()).add(w["api"]["uuid"])
        self.assertEqual(got, {node: set(MACHINES[node][1]) for node in SLURM.nodes}, r.stdout + r.stderr)
        self.assertEqual(len(workers), 8, r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main()
