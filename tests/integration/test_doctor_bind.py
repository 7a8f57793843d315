"""doctor = bind (issue 29): `gpusel doctor` reports an error exactly where `gpusel bind` refuses, and
where bind binds, doctor names the same GPU. Environments are generated (a seeded, deterministic mix of
launchers' variables, CUDA_VISIBLE_DEVICES presets, Slurm's variables and GPUSEL_* variables) and both
commands run in each, on simulated machines of one model, of mixed models and with a lost GPU.

GPUSEL_PROPERTY_CASES sets how many environments per machine (default 100; 8 under the sanitizers); GPUSEL_PROPERTY_SEED the seed.
"""

import concurrent.futures
import json
import os
import random
import shutil
import tempfile
import unittest

from support import Case, gpusel, sim_env, uuids

# Under the sanitizer builds every doctor and bind runs several times slower: fewer environments
# there, so that the test stays well inside its time limit on 2 cores (the plain build runs all).
SANITIZED = "GPUSEL_TEST_PRELOAD" in os.environ or "GPUSEL_TEST_TSAN" in os.environ
CASES = int(os.environ.get("GPUSEL_PROPERTY_CASES", "8" if SANITIZED else "100"))
SEED = int(os.environ.get("GPUSEL_PROPERTY_SEED", "29"))
MACHINES = ("dgx-h100", "workstation-mixed", "lost-gpu")

# Findings about the machine itself, whatever a worker's environment: not a worker's placement.
MACHINE_FINDINGS = {"gpu-lost"}

# Every variable the generator may set, unset first so that the runner's own never leak in.
VARIABLES = ("LOCAL_RANK", "LOCAL_WORLD_SIZE", "WORLD_SIZE", "SLURM_LOCALID", "SLURM_STEP_TASKS_PER_NODE",
             "SLURM_NODEID", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALRANKID",
             "MPI_LOCALNRANKS", "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_STEPID", "SLURM_STEP_GPUS",
             "SLURM_JOB_GPUS", "SLURM_GPUS_PER_TASK", "SLURM_GPUS_ON_NODE", "SLURM_NTASKS_PER_GPU",
             "SLURM_NTASKS_PER_TRES", "SLURMD_NODENAME", "GPUSEL_GPU", "GPUSEL_GPUS", "GPUSEL_SHARE",
             "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")


def launcher(rng, env):
    kind = rng.choice(["none", "none", "torchrun", "torchrun", "srun", "ompi", "hydra", "world", "two", "bad"])
    size = rng.choice([1, 2, 2, 3, 4, 4, 8])
    rank = rng.randrange(size + 1)  # now and then past the size
    if kind == "torchrun":
        env["LOCAL_RANK"] = str(rank)
        if rng.random() < 0.8:
            env["LOCAL_WORLD_SIZE"] = str(size)
    elif kind == "srun":
        env["SLURM_LOCALID"] = str(rank)
        env["SLURM_STEP_TASKS_PER_NODE"] = str(size)
        env["SLURM_NODEID"] = "0"
    elif kind == "ompi":
        env["OMPI_COMM_WORLD_LOCAL_RANK"] = str(rank)
        env["OMPI_COMM_WORLD_LOCAL_SIZE"] = str(size)
    elif kind == "hydra":
        env["MPI_LOCALRANKID"] = str(rank)
        env["MPI_LOCALNRANKS"] = str(size)
    elif kind == "world":
        env["WORLD_SIZE"] = str(size)
    elif kind == "two":
        env["LOCAL_RANK"] = str(rank)
        env["OMPI_COMM_WORLD_LOCAL_RANK"] = str(rng.randrange(size))
        env["OMPI_COMM_WORLD_LOCAL_SIZE"] = str(size)
    elif kind == "bad":
        env["LOCAL_RANK"] = rng.choice(["x", "-1", "1.5"])


def indices(rng, count, extra=0):
    """A few distinct indices of the machine (now and then one past it)."""
    n = rng.choice([1, 1, 2, 2, 3, 4])
    pool = list(range(count + extra))
    rng.shuffle(pool)
    return pool[:min(n, len(pool))]


def preset(rng, env, ids, count):
    kind = rng.choice(["unset", "unset", "ints", "ints", "ints", "uuids", "bad"])
    if kind == "ints":
        picked = indices(rng, count)
        env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, picked))
    elif kind == "uuids":
        picked = indices(rng, count)
        env["CUDA_VISIBLE_DEVICES"] = ",".join(ids[i] for i in picked)
    elif kind == "bad":
        env["CUDA_VISIBLE_DEVICES"] = rng.choice(["0,9", "1,1", "", f"{count - 1},{count + 3}"])
    if rng.random() < 0.3:
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"


def slurm(rng, env, count):
    kind = rng.choice(["none", "none", "batch", "step", "step", "per-task"])
    if kind == "none":
        return
    env["SLURM_JOB_ID"] = "4242"
    env["SLURMD_NODENAME"] = "n1"
    # Slurm writes its numbers into CUDA_VISIBLE_DEVICES; now and then something changed it after.
    given = env.get("CUDA_VISIBLE_DEVICES")
    if given is None or not all(p.isdigit() for p in given.split(",")) or rng.random() < 0.25:
        given = ",".join(map(str, indices(rng, count)))
    if kind == "batch":
        env["SLURM_JOB_GPUS"] = given
        env.setdefault("SLURM_LOCALID", "0")
    else:
        env["SLURM_STEP_ID"] = "0"
        env["SLURM_STEP_GPUS"] = given
        if kind == "per-task":
            env["SLURM_GPUS_PER_TASK"] = "1"
            env.setdefault("SLURM_LOCALID", str(rng.randrange(4)))
    if rng.random() < 0.8:
        env["CUDA_VISIBLE_DEVICES"] = given
    if rng.random() < 0.1:
        env["SLURM_NTASKS_PER_TRES"] = "2"


def gpusel_vars(rng, env, ids, count):
    kind = rng.choice(["none", "none", "none", "list-uuids", "list-uuids", "list-indices", "one", "one-index"])
    picked = indices(rng, count)
    if kind == "list-uuids":
        env["GPUSEL_GPUS"] = ",".join(ids[i] for i in picked)
    elif kind == "list-indices":
        env["GPUSEL_GPUS"] = ",".join(map(str, indices(rng, count, extra=1)))
    elif kind == "one":
        env["GPUSEL_GPU"] = ids[picked[0]]
    elif kind == "one-index":
        env["GPUSEL_GPU"] = str(picked[0])
    if rng.random() < 0.1:
        env["GPUSEL_SHARE"] = rng.choice(["1", "0", "yes"])


def environments(machine, n, seed):
    ids = [u for u in uuids(machine)]
    count = len(ids)
    rng = random.Random(f"{seed}-{machine}")
    out = []
    for _ in range(n):
        env = {}
        launcher(rng, env)
        preset(rng, env, ids, count)
        slurm(rng, env, count)
        gpusel_vars(rng, env, ids, count)
        out.append(env)
    return out


class DoctorEqualsBind(Case):
    maxDiff = None

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="gpusel-doctor-bind-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def env(self, machine, generated):
        return sim_env(machine, **{**{k: None for k in VARIABLES},
                                   "GPUSEL_LEASE_DIR": os.path.join(self.dir, "leases"), **generated})

    def judge(self, machine, generated):
        e = self.env(machine, generated)
        doctor = gpusel("doctor", "--json", env=e)
        bind = gpusel("bind", "--json", env=e)
        out = json.loads(doctor.stdout)
        errors = sorted(f["id"] for f in out["findings"]
                        if f["severity"] == "error" and f["id"] not in MACHINE_FINDINGS)
        refused = bind.returncode != 0
        where = None if refused else json.loads(bind.stdout)["uuid"]
        said = out.get("worker", {}) or {}
        problem = None
        if bool(errors) != refused:
            problem = f"doctor errors {errors or 'none'}, bind exit {bind.returncode}: {bind.stderr.strip()}"
        elif not refused and said.get("uuid") != where:
            problem = f"bind binds {where}, doctor says a worker binds {said.get('uuid')}"
        return problem

    def test_doctor_errs_exactly_where_bind_refuses(self):
        seen = {"refused": 0, "bound": 0}
        disagreements = []
        for machine in MACHINES:
            envs = environments(machine, CASES, SEED)
            with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
                verdicts = list(pool.map(lambda g: self.judge(machine, g), envs))
            for generated, problem in zip(envs, verdicts):
                if problem:
                    disagreements.append(f"{machine} {json.dumps(generated, sort_keys=True)}:\n  {problem}")
        self.assertEqual(disagreements, [], f"{len(disagreements)} of {CASES * len(MACHINES)} environments:\n"
                         + "\n".join(disagreements[:40]))

    def test_the_generator_covers_both_outcomes(self):
        # The property says little if every environment is refused, or none is: a sample of each machine.
        for machine in MACHINES:
            outcomes = set()
            for generated in environments(machine, 30, SEED):
                e = self.env(machine, generated)
                outcomes.add(gpusel("bind", "--json", env=e).returncode)
            self.assertIn(0, outcomes, machine)
            self.assertTrue(outcomes - {0}, machine)


if __name__ == "__main__":
    unittest.main()
