"""Across nodes: a Slurm of four nodes on this machine (n1..n4, eight fake GPUs each), each slurmd in
a network namespace of its own at its own address (launchers.Netns), each node its own simulated
machine of eight H100s. `srun -N4` puts every rank on its own node's GPU; a UUID of another node is
refused there, naming it as another node's (issue 29); a GPU a node has lost is never replaced by
its neighbour; MPICH's Hydra carrying the batch host's CUDA_VISIBLE_DEVICES to another node, and
Open MPI's `mpirun -x CUDA_VISIBLE_DEVICES` doing so, run no rank there. Run through
`launchers.py run` (exit 77 when Slurm or the namespaces cannot come up).

Which machine a process simulates is its node's: the wrapper finds the node from the network
namespace the process runs in (what slurmd of that node, or a launch agent entering it, started),
not from the process's own SLURMD_NODENAME, which a launcher may carry from another node. A test
may pick a variant of the nodes' machines (GPUSEL_TEST_NODE_VARIANT: "-lost", where n2's GPU 2 has
fallen off the bus while gres.conf still lists it).
"""

import contextlib
import json
import os
import shlex
import shutil
import tempfile
import time
import unittest

import launchers
from launchers import LauncherCase, cvd_index, parse_workers

SLURM = launchers.Slurm(nodes=("n1", "n2", "n3", "n4"), gpus=8, netns=True)
MACHINES = {}
WRAPPER = None


def machine_file(folder, node, variant="", lost=()):
    """Eight H100s whose UUIDs name the node, so that no UUID of one node is another's; the GPUs of
    `lost` have fallen off the bus (NVML reports them lost, CUDA does not enumerate them)."""
    tag = {"n1": "a1", "n2": "b2", "n3": "c3", "n4": "d4"}[node]
    uuids = [f"GPU-{tag}{i:06x}-1111-2222-3333-444455556666" for i in range(SLURM.gpus)]
    lines = [f'name = "node-{node}"', 'driver_version = "570.124.06"', "cuda_driver_version = 12080"]
    for i, uuid in enumerate(uuids):
        lines += ["", "[[gpu]]", f'uuid = "{uuid}"', 'name = "NVIDIA H100 80GB HBM3"',
                  f'pci_bus_id = "00000000:{0x18 + 0x10 * i:02X}:00.0"', 'memory_total = "80GiB"',
                  'compute_capability = "9.0"', "sm_count = 132", "numa_node = 0", 'cpus = "0-1"',
                  "pcie_h2d_gbps = 55.0", "pcie_d2h_gbps = 55.0", "memory_bandwidth_gbps = 3350.0",
                  f"lost = {'true' if i in lost else 'false'}"]
    path = os.path.join(folder, f"{node}{variant}.toml")
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
        machine_file(folder, node, "-lost", lost={2} if node == "n2" else ())
    # Each process runs on its own node's simulated machine: the node whose namespace it is in.
    WRAPPER = os.path.join(folder, "on-node")
    with open(WRAPPER, "w") as f:
        f.write(NODE_WRAPPER.replace("FOLDER", shlex.quote(folder))
                .replace("PREFIX", shlex.quote(SLURM.netns.namespace(""))))
    os.chmod(WRAPPER, 0o755)


NODE_WRAPPER = """#!/bin/sh
ns=$(ip netns identify $$)
node=${ns#PREFIX}
if [ -z "$ns" ] || [ "$node" = "$ns" ]; then
  echo "on-node: not in a node's network namespace (ip netns identify: '$ns')" >&2
  exit 3
fi
export GPUSEL_TEST_NODE=$node
eval "$(gpusel sim env FOLDER/$node${GPUSEL_TEST_NODE_VARIANT:-}.toml)"
exec "$@"
"""


@contextlib.contextmanager
def held(*args):
    """A job holding GPUs (sbatch ARGS) while the block runs, cancelled after, its GPUs free again."""
    job, _ = SLURM.submit("#!/bin/sh\nsleep 600\n", [*args, "--job-name=hold"])
    SLURM.wait_running(job)
    try:
        yield job
    finally:
        SLURM.client(["scancel", job])
        deadline = time.monotonic() + 30
        while SLURM.state(job) not in (None, "CANCELLED", "COMPLETED") and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)


def tearDownModule():
    SLURM.stop()
    if WRAPPER:
        shutil.rmtree(os.path.dirname(WRAPPER), ignore_errors=True)


class NodesTest(LauncherCase):
    def test_every_rank_on_its_own_node_s_gpu(self):
        r = SLURM.srun(["-N4", "-n8", "--ntasks-per-node=2", "--gres=gpu:2", WRAPPER, *launchers.worker_cmd()],
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
        self.assertEqual(sorted(g[0] for g in got), ["n1", "n1", "n2", "n2", "n3", "n3", "n4", "n4"])
        # Where each rank really ran: the node whose namespace it was in is the one Slurm named.
        self.assertEqual([w["env"]["GPUSEL_TEST_NODE"] for w in workers],
                         [w["env"]["SLURMD_NODENAME"] for w in workers])

    def test_a_uuid_of_the_other_node_is_refused_there(self):
        theirs = MACHINES["n1"][1][2]
        for variable, value in (("GPUSEL_GPU", theirs), ("GPUSEL_GPUS", ",".join(MACHINES["n1"][1][2:4]))):
            with self.subTest(variable):
                e = SLURM.env(**{variable: value})
                r = SLURM.srun(["-N4", "--ntasks-per-node=" + ("1" if variable == "GPUSEL_GPU" else "2"),
                                WRAPPER, *launchers.worker_cmd("--api")], e, timeout=120)
                workers = parse_workers(r.stdout)
                self.assertEqual(len(workers), 4 if variable == "GPUSEL_GPU" else 8, r.stdout + r.stderr)
                for w in workers:
                    node = w["env"]["GPUSEL_TEST_NODE"]
                    if node == "n1":
                        self.assertEqual(w["rc"], 0, json.dumps(w))
                        self.assertEqual(len(w["context"]), 1, json.dumps(w))
                        self.assertIn(w["context"][0], value.split(","))
                        continue
                    self.assertNotEqual(w["rc"], 0, json.dumps(w))
                    self.assertFalse(w.get("context"), json.dumps(w))
                    self.assertIn("is not a GPU of this machine", w["stderr"])
                    self.assertIn("resolve GPUSEL_GPUS on each node", w["stderr"])
                    self.assertNotIn("CUDA_VISIBLE_DEVICES", w["stderr"])

    def test_a_lost_gpu_is_never_replaced_by_its_neighbour(self):
        # GPU 0 held on both nodes, so that the step gets GPUs 1 and 2 on each; n2's GPU 2 has fallen
        # off the bus, and CUDA there reads CUDA_VISIBLE_DEVICES=1,2 over 0,1,3,...: "2" is nvidia-smi 3.
        with held("-N2", "--ntasks-per-node=1", "--gres=gpu:1"):
            for order in (None, "PCI_BUS_ID"):
                with self.subTest(CUDA_DEVICE_ORDER=order):
                    e = SLURM.env(GPUSEL_TEST_NODE_VARIANT="-lost", CUDA_DEVICE_ORDER=order)
                    r = SLURM.srun(["-w", "n1,n2", "-N2", "--ntasks-per-node=2", "--gres=gpu:2", WRAPPER,
                                    *launchers.worker_cmd("--api")], e, timeout=120)
                    workers = {(w["env"]["GPUSEL_TEST_NODE"], w["env"]["SLURM_LOCALID"]): w
                               for w in parse_workers(r.stdout)}
                    self.assertEqual(len(workers), 4, r.stdout + r.stderr)
                    self.assertEqual({w["env"]["SLURM_STEP_GPUS"] for w in workers.values()}, {"1,2"})
                    n1, n2 = MACHINES["n1"][1], MACHINES["n2"][1]
                    got = {k: (w["rc"], w.get("context")) for k, w in workers.items()}
                    self.assertEqual(got, {("n1", "0"): (0, [n1[1]]), ("n1", "1"): (0, [n1[2]]),
                                           ("n2", "0"): (0, [n2[1]]), ("n2", "1"): (1, None)},
                                     json.dumps(workers[("n2", "1")]))
                    why = workers[("n2", "1")]["stderr"]
                    self.assertIn("GPU 2 (", why)
                    self.assertIn("has failed", why)
                    self.assertIn(f"nvidia-smi 3 ({n2[3]})", why)
            # One GPU, the lost one (GPU 1 held too): "2" would be nvidia-smi 3 for the only task.
            with held("-w", "n2", "-N1", "--gres=gpu:1"):
                e = SLURM.env(GPUSEL_TEST_NODE_VARIANT="-lost")
                r = SLURM.srun(["-w", "n2", "-N1", "-n1", "--gres=gpu:1", WRAPPER, *launchers.worker_cmd("--api")], e,
                               timeout=120)
                w, = parse_workers(r.stdout)
                self.assertEqual((w["env"]["SLURM_STEP_GPUS"], w["rc"], w.get("context")), ("2", 1, None), json.dumps(w))
                self.assertIn("has failed", w["stderr"])

    def test_gpusel_run_on_each_node(self):
        # One task per node, each a gpusel run of its own over its step's two GPUs (issue 29): the
        # workers are run's, whatever srun's SLURM_LOCALID and SLURM_STEP_TASKS_PER_NODE say.
        r = SLURM.srun(["-N4", "-n4", "--ntasks-per-node=1", "--gres=gpu:2", WRAPPER, "gpusel", "run", "--gpu",
                        "free:2", "--", *launchers.worker_cmd("--api")], timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        workers = parse_workers(r.stdout)
        got, want = {}, {}
        for w in workers:
            node = w["env"]["SLURMD_NODENAME"]
            self.assertEqual(w["rc"], 0, json.dumps(w))
            self.assertEqual(w["api"]["source"], ["GPUSEL_GPU", int(w["env"]["LOCAL_RANK"])], json.dumps(w))
            # The simulator's record: the worker's one context is on the GPU run gave it.
            self.assertEqual(w["api"]["contexts"], [w["env"]["GPUSEL_GPU"]], json.dumps(w))
            got.setdefault(node, set()).add(w["api"]["uuid"])
            # free:2 picks within the step's two GPUs (its CUDA_VISIBLE_DEVICES, a quota): both.
            step = {MACHINES[node][1][int(i)] for i in w["env"]["CUDA_VISIBLE_DEVICES"].split(",")}
            want.setdefault(node, step)
            self.assertEqual(want[node], step, json.dumps(w))
        self.assertEqual(got, want, r.stdout + r.stderr)
        self.assertEqual(set(got), set(SLURM.nodes), r.stdout + r.stderr)
        self.assertEqual(len(workers), 8, r.stdout + r.stderr)


class CarryingTest(LauncherCase):
    """A launcher passing the batch host's CUDA_VISIBLE_DEVICES on to the other nodes, whose job
    GPUs are other numbers: n1 keeps GPUs 0-1 busy, n2 and n3 GPU 0, for the whole class."""

    @classmethod
    def setUpClass(cls):
        with contextlib.ExitStack() as stack:
            stack.enter_context(held("-w", "n1", "-N1", "--gres=gpu:2"))
            stack.enter_context(held("-w", "n2,n3", "-N2", "--ntasks-per-node=1", "--gres=gpu:1"))
            cls.holds = stack.pop_all()

    @classmethod
    def tearDownClass(cls):
        cls.holds.close()

    def test_hydra_carrying_the_batch_host_s_gpus_runs_no_rank_outside_the_job(self):
        if launchers.missing("mpiexec.hydra"):
            self.skipTest(launchers.missing("mpiexec.hydra"))
        # The job gets GPUs 2-5 on n1 and 1-4 on n2. `-iface eth0`: the proxies reach mpiexec at n1's
        # address (the machine's name is loopback, in every node).
        for export in ("export CUDA_DEVICE_ORDER=PCI_BUS_ID", ":"):
            with self.subTest(export):
                hydra = ["mpiexec.hydra", "-iface", "eth0", "-n", "8", "-ppn", "4", WRAPPER,
                         *launchers.worker_cmd("--api")]
                state, out = SLURM.batch(
                    "#!/bin/sh\n" + export + "\n" + shlex.join(hydra) + "\n",
                    ["-w", "n1,n2", "-N2", "--ntasks-per-node=4", "--gres=gpu:4"], timeout=120)
                workers = parse_workers(out)
                self.assertEqual(len(workers), 8, out)
                n1 = sorted((w["rc"], tuple(w.get("context") or ())) for w in workers
                            if w["env"]["GPUSEL_TEST_NODE"] == "n1")
                self.assertEqual(n1, [(0, (MACHINES["n1"][1][i],)) for i in range(2, 6)], out)
                on_n2 = [w for w in workers if w["env"]["GPUSEL_TEST_NODE"] == "n2"]
                self.assertEqual(len(on_n2), 4, out)
                for w in on_n2:
                    self.assertEqual({w["env"]["CUDA_VISIBLE_DEVICES"], w["env"]["SLURMD_NODENAME"]},
                                     {"2,3,4,5", "n1"}, "carried from the batch host")
                    self.assertNotEqual(w["rc"], 0, json.dumps(w))
                    self.assertFalse(w.get("context"), json.dumps(w))
                    self.assertIn('from node "n1"', w["stderr"])
                    self.assertIn('to node "n2"', w["stderr"])
                    self.assertNotIn("PCI_BUS_ID", w["stderr"])
                    self.assertNotIn("mixed", w["stderr"])

    def test_open_mpi_carrying_the_batch_host_s_gpus_runs_no_rank_outside_the_job(self):
        if launchers.missing("mpirun"):
            self.skipTest(launchers.missing("mpirun"))
        # The job gets GPUs 2-5 on n1 and 1-4 on n3. Inside the job mpirun starts its daemon on each
        # node with srun, so in that node's namespace, and the daemons reach it over the nodes'
        # network; `-x CUDA_VISIBLE_DEVICES` gives every rank the batch host's list, while
        # SLURMD_NODENAME stays each daemon's own. A rank that fails exits 0 (its WORKER line says
        # how it ended): mpirun would kill the others at the first failure.
        e = SLURM.env(OMPI_MCA_oob_tcp_if_include=SLURM.netns.subnet + ".0/24")
        state, out = SLURM.batch(
            "#!/bin/sh\n" + shlex.join(["mpirun", "-np", "8", "--map-by", "ppr:4:node",
                                        "-x", "CUDA_VISIBLE_DEVICES", WRAPPER, "sh", "-c", '"$@" || true', "sh",
                                        *launchers.worker_cmd("--api")]) + "\n",
            ["-w", "n1,n3", "-N2", "--ntasks-per-node=4", "--gres=gpu:4"], e=e, timeout=120)
        workers = parse_workers(out)
        self.assertEqual(len(workers), 8, out)
        self.assertEqual(state, "COMPLETED", out)
        # Where each rank ran (its namespace) and the GPU its context is on (the simulator's record).
        n1 = sorted((w["rc"], tuple(w.get("context") or ())) for w in workers if w["env"]["GPUSEL_TEST_NODE"] == "n1")
        self.assertEqual(n1, [(0, (MACHINES["n1"][1][i],)) for i in range(2, 6)], out)
        # On n3 the carried list's entry k is nvidia-smi 2+k: local ranks 0-2 land on GPUs 2-4, which
        # are n3's own (distinct, within the job); local rank 3 would run on GPU 5, outside it.
        n3 = MACHINES["n3"][1]
        on_n3 = {int(w["env"]["OMPI_COMM_WORLD_LOCAL_RANK"]): w for w in workers
                 if w["env"]["GPUSEL_TEST_NODE"] == "n3"}
        self.assertEqual(sorted(on_n3), [0, 1, 2, 3], out)
        for w in on_n3.values():
            self.assertEqual((w["env"]["CUDA_VISIBLE_DEVICES"], w["env"]["SLURMD_NODENAME"]), ("2,3,4,5", "n3"),
                             "the batch host's list, carried by -x, in a daemon of n3")
        got = {k: (w["rc"], w.get("context")) for k, w in on_n3.items()}
        self.assertEqual(got, {0: (0, [n3[2]]), 1: (0, [n3[3]]), 2: (0, [n3[4]]), 3: (1, None)}, out)
        why = on_n3[3]["stderr"]
        self.assertIn('on node "n3" nvidia-smi GPU(s) 1,2,3,4', why)
        self.assertIn('is not what Slurm set ("1,2,3,4")', why)
        self.assertIn(f"would run on nvidia-smi 5 ({n3[5]})", why)
        self.assertIn("mpirun -x CUDA_VISIBLE_DEVICES", why)


if __name__ == "__main__":
    unittest.main()
