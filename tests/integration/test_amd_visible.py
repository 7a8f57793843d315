"""ROCr's and HIP's own reading of the visibility variables, held against gpusel's model (issue 35).

Debian's real ROCr and HIP 5.2.3 (libhsa-runtime64-1, libamdhip64-5, fetched with
scripts/fetch-extras into the build folder's extras/, never installed) run over a stand-in for
their thunk (the simulator's libhsakmt.so.1, sim/hsakmt_sim.c, built against Debian's hsakmt.h), so they start
without an AMD GPU and enumerate the GPUs the stand-in describes, applying ROCR_VISIBLE_DEVICES,
then HIP_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES, with AMD's own parsers. For generated values,
on machines whose unique ids share prefixes, what they keep (the GPU agents' or HIP devices' ids,
in order; or ROCr's refusal to start) must be what gpusel's model says (src/core/amd_visible.cpp,
through tests/amd/amd_model.cpp, with HIP 5.2's rules).

Skipped when the packages cannot be fetched (no network) or the C compiler is missing, except
under CI (CI set in the environment, as .ci/run's callers set it), where a missing oracle fails.
"""

import contextlib
import json
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import unittest

import tomllib

import test_amd_list
from support import (BIN, BUILD, PYTHON_LOADS_LIBRARIES, SIM_ROOT, SOURCE, Case, base_env, contexts, for_python, gpusel,
                     gpusel_json, private_dir, sim_env)
from support import MACHINES as MACHINE_FILES

# The ROCm libraries the HIP programs load leave folders in $TMPDIR (comgr-*, hip_kernel-*): this
# test process's own, removed at its exit, for every program it starts.
os.environ["TMPDIR"] = private_dir("rocm-tmp-")

EXTRAS = os.path.join(BUILD, "extras")
PACKAGES = ("libhsa-runtime64-1", "libhsa-runtime-dev", "libhsakmt-dev", "libamdhip64-5", "libamd-comgr2",
            "libamdhip64-dev", "rocminfo")
HIP_VERSION = [5, 2]  # Debian 12's libamdhip64-5 (5.2.3)
OUT = os.path.join(BUILD, "amd-visible")
MODEL = os.environ.get("GPUSEL_AMD_MODEL", os.path.join(BUILD, "bin", "amd_model"))
AMD = os.path.join(SOURCE, "tests", "amd")

# Machines: each GPU's unique id (16 hex digits; 0 for a GPU without one, which ROCr calls
# "GPU-XX"), in KFD order.
MACHINES = {
    "three, one without an id": ["1111222233334444", "aaaabbbbccccdddd", "0"],
    "four, prefixes shared": ["1111222233334444", "1111222299990000", "abcdef0123456789", "abcdef0123450000"],
}


def shown(uid):
    return "GPU-XX" if int(uid, 16) == 0 else "GPU-" + uid


def plain_env():
    """The environment without the sanitizer runtimes the sanitizer presets preload into the test
    runner: apt, the compiler and ROCr's client are not instrumented."""
    return {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "ASAN_OPTIONS")}


def newer(target, *sources):
    return os.path.exists(target) and all(os.path.getmtime(target) >= os.path.getmtime(s) for s in sources)


def build_clients():
    """The HSA client and the HIP clients, built once per build folder, over the simulator's thunk
    (sim/hsakmt_sim.c, built with the simulator against Debian's hsakmt.h); and the loader path
    that finds both ROCm's libraries and that thunk."""
    thunk_dir = os.path.join(SIM_ROOT, "amd")
    if not os.path.exists(os.path.join(thunk_dir, "libhsakmt.so.1")):
        why = "the simulator was built without its ROCm thunk (no hsakmt.h: install libhsakmt-dev)"
        if os.environ.get("CI"):
            raise AssertionError(why)
        raise unittest.SkipTest(why)
    include = os.path.join(EXTRAS, "root", "usr", "include")
    lib = os.path.join(EXTRAS, "root", "usr", "lib", "x86_64-linux-gnu")
    os.makedirs(OUT, exist_ok=True)
    client = os.path.join(OUT, "hsa_agents")
    if not newer(client, os.path.join(AMD, "hsa_agents.c")):
        subprocess.run(["cc", "-O1", "-Wall", "-Wextra", "-Werror", "-I", include, "-o", client,
                        os.path.join(AMD, "hsa_agents.c"), "-L", lib, "-l:libhsa-runtime64.so.1",
                        "-Wl,-rpath-link," + thunk_dir], check=True, env=plain_env())
    hip = os.path.join(OUT, "hip_devices")
    if not newer(hip, os.path.join(AMD, "hip_devices.c")):
        subprocess.run(["cc", "-O1", "-Wall", "-Wextra", "-Werror", "-o", hip, os.path.join(AMD, "hip_devices.c"),
                        "-L", lib, "-l:libamdhip64.so.5", "-Wl,-rpath-link," + thunk_dir + ":" + lib],
                       check=True, env=plain_env())
    queue = os.path.join(OUT, "hip_queue")
    if not newer(queue, os.path.join(AMD, "hip_queue.c")):
        subprocess.run(["cc", "-O1", "-Wall", "-Wextra", "-Werror", "-o", queue, os.path.join(AMD, "hip_queue.c"),
                        "-L", lib, "-l:libamdhip64.so.5", "-Wl,-rpath-link," + thunk_dir + ":" + lib],
                       check=True, env=plain_env())
    return client, hip, thunk_dir + ":" + lib


def build_bind_client():
    """tests/amd/hip_bind.c linked with HIP and this build's libgpusel (instrumented as the library
    is under the AddressSanitizer build); None under ThreadSanitizer, whose runtime cannot follow
    HIP's uninstrumented threads."""
    if "GPUSEL_TEST_TSAN" in os.environ:
        return None
    library = os.path.abspath(os.environ.get("GPUSEL_LIBRARY_FILE", os.path.join(BUILD, "lib", "libgpusel.so.2")))
    lib = os.path.join(EXTRAS, "root", "usr", "lib", "x86_64-linux-gnu")
    source = os.path.join(AMD, "hip_bind.c")
    out = os.path.join(OUT, "hip_bind")
    if not newer(out, source, library):
        sanitize = ["-fsanitize=address,undefined"] if "GPUSEL_TEST_PRELOAD" in os.environ else []
        subprocess.run(["cc", "-O1", "-Wall", "-Wextra", "-Werror", *sanitize, "-I", os.path.join(SOURCE, "include"),
                        "-o", out, source, library, "-Wl,-rpath," + os.path.dirname(library), "-L", lib,
                        "-l:libamdhip64.so.5", "-Wl,-rpath-link," + os.path.join(SIM_ROOT, "amd") + ":" + lib],
                       check=True, env=plain_env())
    return out


INDEX_TOKENS = ["0", "1", "2", "3", "4", "9", "-1", "+1", " 1", "1 ", "01", "010", "0x2", "0X1", "00", "1a", "a", ""]


def values_for(uids, count, seed):
    """ROCR_VISIBLE_DEVICES values: the forms users and launchers write, and lists of 1 to 4
    entries drawn from indices (in range, out of it, signed, octal, hex, with spaces or junk),
    unique-id prefixes of every length (ambiguous ones included), empty entries."""
    ids = [u for u in uids if int(u, 16) != 0]
    tokens = INDEX_TOKENS + ["GPU-XX", "gpu-" + ids[0][:6], "GPU-" + ids[0] + "0", "GPU", "GPU-"]
    for uid in ids:
        tokens += ["GPU-" + uid[:n] for n in (1, 2, 4, 5, 8, 12, 15, 16)]
    rng = random.Random(seed)
    values = [None, "", ",", "0,", ",0", "0,,1", "all", " "]
    values += [",".join(rng.choice(tokens) for _ in range(rng.randint(1, 4))) for _ in range(count)]
    return values


def hip_cases_for(uids, count, seed):
    """Compositions of the three variables: ROCR_VISIBLE_DEVICES unset or one of a few that keep
    some GPUs in another order, and HIP_VISIBLE_DEVICES and/or CUDA_VISIBLE_DEVICES (unset, empty,
    or 1 to 3 entries as above, ids included, which HIP 5.2 does not take)."""
    rng = random.Random(seed)
    rocr = [None, None, "", "2,0", "1", "GPU-" + uids[1][:8] + ",0", "0,1,2"]
    tokens = INDEX_TOKENS + ["GPU-" + uids[0][:8], "GPU-XX"]

    def entry():  # an index in range more often than not, so that most compositions keep GPUs
        return str(rng.randrange(len(uids))) if rng.random() < 0.6 else rng.choice(tokens)

    def entries():
        if rng.random() < 0.3:
            return rng.choice([None, ""])
        return ",".join(entry() for _ in range(rng.randint(1, 3)))

    cases = [{"rocr": None, "hip": "", "cuda": "1"}, {"rocr": None, "hip": "1", "cuda": "0"},
             {"rocr": "1", "hip": None, "cuda": "1"}, {"rocr": "2,0", "hip": "1,0", "cuda": None}]
    cases += [{"rocr": rng.choice(rocr), "hip": entries(), "cuda": entries()} for _ in range(count)]
    return cases


class AmdVisibilityTest(Case):
    @classmethod
    def setUpClass(cls):
        if shutil.which("cc") is None:
            raise unittest.SkipTest("no C compiler (cc) to build the thunk stand-in")
        fetched = subprocess.run([os.path.join(SOURCE, "scripts", "fetch-extras"), EXTRAS, *PACKAGES],
                                 capture_output=True, text=True, env=plain_env())
        if fetched.returncode != 0:
            why = "Debian's ROCm packages could not be fetched: " + fetched.stderr.strip()[-500:]
            if os.environ.get("CI"):  # the oracle must not go missing silently where CI runs
                raise AssertionError(why)
            raise unittest.SkipTest(why)
        cls.client, cls.hip, cls.library_path = build_clients()

    def run_client(self, program, uids, rocr=None, hip=None, cuda=None):
        """The ids the program prints, in order; "refused" when the runtime does not start."""
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LD_LIBRARY_PATH": self.library_path,
               "GPUSEL_TEST_AMD_GPUS": ",".join(uids), "TMPDIR": os.environ["TMPDIR"]}
        for name, value in (("ROCR", rocr), ("HIP", hip), ("CUDA", cuda)):
            if value is not None:
                env[name + "_VISIBLE_DEVICES"] = value
        r = subprocess.run([program], capture_output=True, text=True, env=env, timeout=60)
        lines = r.stdout.split("\n")[:-1]
        if r.returncode != 0 or (lines[:1] and lines[0].startswith("init ")):
            return "refused"
        return lines

    def rocr(self, uids, value):
        """The ids of the GPU agents ROCr keeps, in its order; "refused" when it does not start."""
        return self.run_client(self.client, uids, rocr=value)

    def model(self, uids, cases):
        r = subprocess.run([MODEL], capture_output=True, text=True, timeout=60, check=True,
                           input=json.dumps({"ids": [shown(u) for u in uids], "hip_version": HIP_VERSION,
                                             "cases": cases}))
        return json.loads(r.stdout)

    def test_the_stand_in_gives_rocr_the_machine(self):
        # Unset, ROCr keeps every GPU in KFD order with the ids the stand-in gave it.
        uids = MACHINES["three, one without an id"]
        self.assertEqual(self.rocr(uids, None), [shown(u) for u in uids])
        # ROCr's own parser is what runs: an empty entry stops it from starting.
        self.assertEqual(self.rocr(uids, "0,,1"), "refused")

    def test_gpusel_reads_the_variable_as_rocr_does(self):
        for n, (name, uids) in enumerate(MACHINES.items()):
            values = values_for(uids, 120, seed=n)
            expected = self.model(uids, [{"rocr": v} for v in values])
            wrong = []
            for value, m in zip(values, expected):
                model = "refused" if m["aborts"] else m["rocr"]
                real = self.rocr(uids, value)
                if real != model:
                    wrong.append(f"ROCR_VISIBLE_DEVICES={value!r}: ROCr {real}, gpusel {model}")
            with self.subTest(machine=name):
                self.assertEqual(wrong, [], f"{len(wrong)} of {len(values)} values read differently")

    def test_gpusel_reads_the_three_variables_as_hip_does(self):
        # HIP's devices, in ordinal order, from HIP_VISIBLE_DEVICES (or CUDA_VISIBLE_DEVICES when
        # that is unset or, before HIP 5.6, empty) counted within what ROCr kept.
        for n, (name, uids) in enumerate(MACHINES.items()):
            cases = hip_cases_for(uids, 70, seed=10 + n)
            expected = self.model(uids, cases)
            wrong = []
            for case, m in zip(cases, expected):
                model = "refused" if m["aborts"] else m["hip"]
                real = self.run_client(self.hip, uids, **case)
                if real != model:
                    wrong.append(f"{case}: HIP {real}, gpusel {model}")
            with self.subTest(machine=name):
                self.assertEqual(wrong, [], f"{len(wrong)} of {len(cases)} compositions read differently")


class AmdRunTest(Case):
    """`gpusel run` on the simulated AMD machine amd-mi210, judged by the device the real HIP 5.2.3
    in each worker holds: the thunk stand-in describes the same machine (its GPUs in KFD order,
    the order of the machine file's [[gpu]] tables), so HIP numbers them as it would there."""

    @classmethod
    def setUpClass(cls):
        AmdVisibilityTest.setUpClass.__func__(cls)
        with open(os.path.join(MACHINE_FILES, "amd-mi210.toml"), "rb") as f:
            cls.kfd = [g["uuid"][4:] for g in tomllib.load(f)["gpu"]]
        listing = gpusel_json("--sim", "amd-mi210", "list", "--json")
        cls.by_index = {g["rocm_smi_index"]: g["uuid"] for g in listing["gpus"]}

    def workers(self, *args, **extra):
        """Each worker's LOCAL_RANK and the ids of the HIP devices it sees, in ordinal order."""
        env = base_env(LD_LIBRARY_PATH=self.library_path, GPUSEL_TEST_AMD_GPUS=",".join(self.kfd), **extra)
        r = gpusel("--sim", "amd-mi210", "run", "--quiet", *args, "--", "sh", "-c",
                   'echo "$LOCAL_RANK $(' + os.path.abspath(self.hip) + ' | tr "\\n" " ")"', env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        return sorted(tuple(line.split()) for line in r.stdout.splitlines())

    def test_each_worker_holds_the_gpu_it_was_given(self):
        # rocm-smi indices 2 and 0 are KFD nodes 1 and 2 (HIP ordinals 0 and 1 on the whole
        # machine): each worker's only HIP device must be the GPU `gpusel list` shows at its index.
        self.assertNotEqual(self.kfd[0], self.by_index[0][4:], "the machine's orders must differ")
        self.assertEqual(self.workers("--gpu", "2,0"),
                         [("0", self.by_index[2]), ("1", self.by_index[0])])
        self.assertEqual(self.workers("--gpu", "GPU-1a2b"), [("0", "GPU-1a2b3c4d5e6f7081")])
        # Presets that leave HIP no GPU: refused, no worker started.
        env = base_env(LD_LIBRARY_PATH=self.library_path, GPUSEL_TEST_AMD_GPUS=",".join(self.kfd),
                       ROCR_VISIBLE_DEVICES="1", CUDA_VISIBLE_DEVICES="1")
        r = gpusel("--sim", "amd-mi210", "run", "--gpu", "0", "--", "sh", "-c", "echo started", env=env)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("ROCR_VISIBLE_DEVICES", r.stderr)
        self.assertNotIn("started", r.stdout)

    def test_a_preset_is_the_quota_as_hip_reads_it(self):
        # What HIP itself sees under the presets, outside gpusel, is the job's GPUs in ordinal
        # order; `--gpu k` must put worker k on HIP's ordinal k of that view, and on nothing else.
        for preset in ({"ROCR_VISIBLE_DEVICES": "2,0"},
                       {"ROCR_VISIBLE_DEVICES": "2,0", "HIP_VISIBLE_DEVICES": "1,0"},
                       {"CUDA_VISIBLE_DEVICES": "2,1"},
                       {"ROCR_VISIBLE_DEVICES": "0x1,GPU-1A2B3C4D", "HIP_VISIBLE_DEVICES": "1"}):
            with self.subTest(preset=preset):
                env = base_env(LD_LIBRARY_PATH=self.library_path,
                               GPUSEL_TEST_AMD_GPUS=",".join(self.kfd), **preset)
                seen = subprocess.run([self.hip], capture_output=True, text=True, env=env,
                                      check=True).stdout.split()
                self.assertTrue(seen)
                listing = gpusel_json("--sim", "amd-mi210", "list", "--json", env=env)
                ordinals = {g["hip_ordinal"]: g["uuid"] for g in listing["gpus"]
                            if g["hip_ordinal"] is not None}
                self.assertEqual([ordinals.get(k) for k in range(len(ordinals))], seen)
                request = ",".join(str(k) for k in range(len(seen)))
                self.assertEqual(self.workers("--gpu", request, **preset),
                                 [(str(k), uid) for k, uid in enumerate(seen)])

    def test_bind_gives_the_wrapped_program_the_gpu_hip_would_number_so(self):
        # `gpusel bind -- PROGRAM` with a launcher's rank k: the program's only HIP device must be
        # the one HIP itself numbers k in the same environment (under presets too).
        for preset in ({}, {"ROCR_VISIBLE_DEVICES": "2,0"}, {"HIP_VISIBLE_DEVICES": "2,1"}):
            env = base_env(LD_LIBRARY_PATH=self.library_path, GPUSEL_TEST_AMD_GPUS=",".join(self.kfd),
                           **preset)
            seen = subprocess.run([self.hip], capture_output=True, text=True, env=env,
                                  check=True).stdout.split()
            for k, uid in enumerate(seen):
                with self.subTest(preset=preset, rank=k):
                    r = gpusel("--sim", "amd-mi210", "bind", "--quiet", "--", os.path.abspath(self.hip),
                               env=dict(env, LOCAL_RANK=str(k)))
                    self.assertEqual(r.returncode, 0, r.stderr)
                    self.assertEqual(r.stdout.split(), [uid])

    def test_job_mode_shows_every_workers_gpu_in_rank_order(self):
        # --set-visible job: every worker sees the job's GPUs, its own at HIP ordinal LOCAL_RANK.
        got = self.workers("--set-visible", "job", "--gpu", "1,2")
        self.assertEqual(got, [("0", self.by_index[1], self.by_index[2]),
                               ("1", self.by_index[1], self.by_index[2])])


    def queue_job(self, *args, worker):
        """`gpusel run ARGS -- sh -c WORKER` on amd-mi210, WORKER's $QUEUE the HIP program that makes a
        queue on its device ORDINAL and stays SECONDS (tests/amd/hip_queue.c)."""
        # The thunk stand-in loads the simulator's (instrumented, under the sanitizer build) machine
        # reader into the uninstrumented HIP program: the sanitizer's runtime goes first (for_python).
        env = for_python(base_env(LD_LIBRARY_PATH=self.library_path, GPUSEL_TEST_AMD_GPUS=",".join(self.kfd),
                                  QUEUE=os.path.join(OUT, "hip_queue")))
        return gpusel("--sim", "amd-mi210", "run", *args, "--", "sh", "-c", worker, env=env)

    def test_the_run_time_check_stops_a_worker_that_makes_a_queue_on_another_gpu(self):
        if "GPUSEL_TEST_TSAN" in os.environ:
            self.skipTest("the thunk stand-in loads the simulator's machine reader into HIP's process, "
                          "which the ThreadSanitizer build's library cannot be loaded into")
        # Judged by what ROCm SMI lists (the simulated one lists each process on the GPUs where
        # ROCr made it a queue over the thunk stand-in, as the kernel lists a process's queues).
        # Each worker on its own GPU: the job runs to its end.
        r = self.queue_job("--quiet", "--gpu", "2,0", worker='exec "$QUEUE" 0 2')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(r.stdout.split()), sorted(["queue", self.by_index[2], "queue", self.by_index[0]]))
        self.assertNotIn("placement check", r.stderr)
        # Rank 1 drops the variable gpusel gave it and takes HIP's device 0 of the whole machine
        # (KFD node 1: rocm-smi index 2, rank 0's GPU): stopped, exit 1, the line naming both.
        escape = ('if [ "$LOCAL_RANK" = 1 ]; then exec env -u ROCR_VISIBLE_DEVICES "$QUEUE" 0 30; '
                  'else exec "$QUEUE" 0 30; fi')
        self.assertEqual(self.kfd[0], self.by_index[2][4:])
        r = self.queue_job("--quiet", "--gpu", "2,0", worker=escape)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f"rank 1 (GPU {self.by_index[0]}) made a HIP queue on rocm-smi's GPU 2 "
                      f"({self.by_index[2]}), not its own", r.stderr)
        self.assertIn("Leave ROCR_VISIBLE_DEVICES as gpusel sets it", r.stderr)
        self.assertNotIn("CUDA context", r.stderr)
        # A process a worker left behind (rank 0 ends at once; its child takes HIP's device 2 of
        # the whole machine, rocm-smi index 1, no GPU of the job's) is checked with the job.
        left = ('if [ "$LOCAL_RANK" = 0 ]; then env -u ROCR_VISIBLE_DEVICES "$QUEUE" 2 30 & exit 0; fi; '
                'exec "$QUEUE" 0 30')
        r = self.queue_job("--quiet", "--gpu", "2,0", worker=left)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f"made a HIP queue on rocm-smi's GPU 1 ({self.by_index[1]})", r.stderr)
        self.assertIn("orphaned", r.stderr)
        # --set-visible job: each worker sees the job's GPUs, its own at HIP device LOCAL_RANK; one
        # that takes device 0 whatever its rank is stopped, in words for that mode.
        r = self.queue_job("--quiet", "--set-visible", "job", "--gpu", "2,0", worker='exec "$QUEUE" 0 30')
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f"rank 1 (GPU {self.by_index[0]}) made a HIP queue on rocm-smi's GPU 2", r.stderr)
        self.assertIn("--set-visible job", r.stderr)
        self.assertNotIn("its GPU alone in ROCR_VISIBLE_DEVICES, and", r.stderr)
        r = self.queue_job("--quiet", "--set-visible", "job", "--gpu", "2,0", worker='exec "$QUEUE" "$LOCAL_RANK" 2')
        self.assertEqual(r.returncode, 0, r.stderr)
        # --no-placement-check: the same escape runs to its end.
        r = self.queue_job("--quiet", "--no-placement-check", "--gpu", "2,0",
                           worker=escape.replace(" 30", " 2"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split().count(self.by_index[2]), 2)

    def test_the_stand_in_completes_what_hip_submits(self):
        # 5,000 packets on one queue (its ring wraps) and 300 streams made and destroyed in turn
        # (more queues than the stand-in has at once): each waited for, none left hanging.
        env = for_python(base_env(LD_LIBRARY_PATH=self.library_path, GPUSEL_TEST_AMD_GPUS=",".join(self.kfd)))
        r = subprocess.run([os.path.join(OUT, "hip_queue"), "0", "0", "5000"], capture_output=True, text=True,
                           env=env, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), ["queue", "GPU-" + self.kfd[0]])
        self.assertNotIn("time stamps", r.stderr)

    def test_rocminfo_in_each_worker_lists_its_gpu_alone(self):
        """Debian's rocminfo (ROCm 5.2.3, over Debian's ROCr and the thunk stand-in, which takes the
        machine from the machine file) in each worker of `gpusel run --gpu 2,0`: one CPU agent and one
        GPU agent, the worker's own. rocminfo asks `lsmod` whether amdgpu is loaded (a stand-in says
        it is) and opens /dev/kfd read and write: in `sim shell`'s private /dev, a plain file."""
        if "GPUSEL_TEST_TSAN" in os.environ:
            self.skipTest("the thunk stand-in loads the simulator's machine reader into rocminfo's process, "
                          "which the ThreadSanitizer build's library cannot be loaded into")
        rocminfo = os.path.join(EXTRAS, "root", "usr", "bin", "rocminfo")
        with tempfile.TemporaryDirectory() as tmp:
            os.makedirs(os.path.join(tmp, "bin"))
            with open(os.path.join(tmp, "bin", "lsmod"), "w") as f:
                f.write("#!/bin/sh\necho 'Module Size Used by'\necho 'amdgpu 1 0'\n")
            os.chmod(os.path.join(tmp, "bin", "lsmod"), 0o755)
            env = for_python(base_env(LD_LIBRARY_PATH=self.library_path, GPUSEL_TEST_AMD_GPUS=None,
                                      PATH=os.path.join(tmp, "bin") + ":" + os.environ.get("PATH", "/usr/bin:/bin")))
            worker = f'{rocminfo} > {tmp}/rocminfo.$LOCAL_RANK 2>&1'
            script = (f"rm -f /dev/kfd && : > /dev/kfd && {shlex.quote(BIN)} run --quiet --gpu 2,0 -- "
                      f"sh -c {shlex.quote(worker)}")
            r = subprocess.run([BIN, "sim", "shell", "amd-mi210", "--", "sh", "-c", script], capture_output=True,
                               text=True, timeout=120, env=env)
            if r.returncode != 0 and "namespace" in r.stderr:
                self.skipTest("no private mount namespace here: " + r.stderr.strip()[-300:])
            self.assertEqual(r.returncode, 0, r.stderr)
            for rank, index in ((0, 2), (1, 0)):
                with open(os.path.join(tmp, f"rocminfo.{rank}")) as f:
                    out = f.read()
                agents = re.findall(r"^\s*Uuid:\s+(\S+)", out, re.M)
                types = re.findall(r"^\s*Device Type:\s+(\S+)", out, re.M)
                self.assertEqual(list(zip(agents, types)), [("CPU-XX", "CPU"), (self.by_index[index], "GPU")], out)

    def test_list_shows_the_processes_that_made_queues(self):
        if "GPUSEL_TEST_TSAN" in os.environ:
            self.skipTest("the thunk stand-in loads the simulator's machine reader into HIP's process, "
                          "which the ThreadSanitizer build's library cannot be loaded into")
        # HIP's device 1 (KFD node 2) started on the simulated machine, as `gpusel sim env` sets it up:
        # the thunk stand-in takes the machine's GPUs from the machine file (no GPUSEL_TEST_AMD_GPUS).
        env = sim_env("amd-mi210", GPUSEL_TEST_AMD_GPUS=None)
        env["LD_LIBRARY_PATH"] += ":" + self.library_path
        seen = subprocess.run([self.hip], capture_output=True, text=True, env=for_python(env), check=True)
        self.assertEqual(seen.stdout.split(), ["GPU-" + k for k in self.kfd])
        worker = subprocess.Popen([os.path.join(OUT, "hip_queue"), "1", "30"], stdout=subprocess.PIPE,
                                  text=True, env=for_python(env))
        try:
            self.assertEqual(worker.stdout.readline().split(), ["queue", "GPU-" + self.kfd[1]])
            listing = gpusel_json("--sim", "amd-mi210", "list", "--json")
            holding = [g["uuid"] for g in listing["gpus"]
                       if any(p["pid"] == worker.pid for p in g.get("processes") or [])]
            self.assertEqual(holding, ["GPU-" + self.kfd[1]])
            # Debian's rocm-smi over the simulated library says the same, by rocm-smi index.
            if PYTHON_LOADS_LIBRARIES and test_amd_list.fetch() is None:
                index = [g["rocm_smi_index"] for g in listing["gpus"] if g["uuid"] == "GPU-" + self.kfd[1]]
                with tempfile.TemporaryDirectory() as tmp:
                    r = test_amd_list.run_rocm_smi(tmp, os.path.join(MACHINE_FILES, "amd-mi210.toml"),
                                                   "--showpidgpus")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertRegex(r.stdout, rf"PID {worker.pid} is using 1 DRM device\(s\):\s*\n\s*{index[0]}\s")
        finally:
            worker.kill()
            worker.wait()


# Debian's HIP compiler and what it needs to build for gfx90a (hipcc, a Perl driver over clang 15;
# clang-offload-bundler; lld for the device code; the ROCm device libraries), fetched into the
# build folder's extras as the runtime is, never installed.
HIPCC_PACKAGES = ("hipcc", "clang-15", "clang-tools-15", "lld-15", "libllvm15", "libclang-cpp15",
                  "libclang-common-15-dev", "rocm-device-libs")


def build_with_hipcc(source, out):
    """`source` built by Debian's hipcc (unpacked under EXTRAS, so its paths are given to it) for
    gfx90a into `out`, once per build folder; its link resolves ROCr's thunk against the stand-in."""
    if newer(out, source):
        return
    root = os.path.join(EXTRAS, "root")
    lib = os.path.join(root, "usr", "lib", "x86_64-linux-gnu")
    env = dict(plain_env(), HIP_PATH=os.path.join(root, "usr"), ROCM_PATH=os.path.join(root, "usr"),
               HIP_PLATFORM="amd", HIP_CLANG_PATH=os.path.join(root, "usr", "lib", "llvm-15", "bin"),
               HIP_LIB_PATH=lib, HIPCC_LINK_FLAGS_APPEND="-Wl,-rpath-link," + os.path.join(SIM_ROOT, "amd"),
               LD_LIBRARY_PATH=lib + ":" + os.path.join(root, "usr", "lib", "llvm-15", "lib"))
    r = subprocess.run(["perl", os.path.join(root, "usr", "bin", "hipcc.pl"), "--offload-arch=gfx90a", "-Wall",
                        "-Werror", "-o", out, source], capture_output=True, text=True, env=env, timeout=300)
    if r.returncode != 0:
        raise AssertionError("Debian's hipcc could not build " + source + ": " + r.stderr[-2000:])


class HipccProgramTest(Case):
    """A HIP program with a kernel, built by Debian's hipcc (tests/amd/hip_kernel.hip), under `gpusel
    run` on amd-mi210: each worker's HIP runtime loads its gfx90a code object, launches the kernel and
    waits for it over the thunk stand-in (which completes the packet; no kernel's work is done), on
    the GPU it was given. Only in the plain build: the program is not instrumented, and the
    compiler (360 MB unpacked) is fetched once per build folder."""

    @classmethod
    def setUpClass(cls):
        if "GPUSEL_TEST_PRELOAD" in os.environ or "GPUSEL_TEST_TSAN" in os.environ:
            raise unittest.SkipTest("the hipcc-built program is tested in the plain build")
        AmdRunTest.setUpClass.__func__(cls)
        fetched = subprocess.run([os.path.join(SOURCE, "scripts", "fetch-extras"), EXTRAS, *HIPCC_PACKAGES],
                                 capture_output=True, text=True, env=plain_env())
        if fetched.returncode != 0:
            why = "Debian's hipcc could not be fetched: " + fetched.stderr.strip()[-500:]
            if os.environ.get("CI"):
                raise AssertionError(why)
            raise unittest.SkipTest(why)
        cls.program = os.path.join(OUT, "hip_kernel")
        build_with_hipcc(os.path.join(AMD, "hip_kernel.hip"), cls.program)

    def job(self, *args, worker):
        env = base_env(LD_LIBRARY_PATH=self.library_path, GPUSEL_TEST_AMD_GPUS=None, KERNEL=self.program)
        return gpusel("--sim", "amd-mi210", "run", "--quiet", *args, "--", "sh", "-c", worker, env=env)

    def test_each_worker_runs_its_kernel_on_its_gpu(self):
        r = self.job("--gpu", "2,0", worker='echo "$LOCAL_RANK $("$KERNEL")"')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(tuple(line.split()) for line in r.stdout.splitlines()),
                         [("0", self.by_index[2], "hipSuccess"), ("1", self.by_index[0], "hipSuccess")])
        self.assertNotIn("placement check", r.stderr)
        # Rank 1 dropping ROCR_VISIBLE_DEVICES runs its kernel on HIP's device 0 of the whole machine
        # (rocm-smi index 2, rank 0's GPU): the run-time check stops the job.
        escape = ('if [ "$LOCAL_RANK" = 1 ]; then exec env -u ROCR_VISIBLE_DEVICES "$KERNEL" 30; '
                  'else exec "$KERNEL" 30; fi')
        r = self.job("--gpu", "2,0", worker=escape)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f"rank 1 (GPU {self.by_index[0]}) made a HIP queue on rocm-smi's GPU 2 "
                      f"({self.by_index[2]}), not its own", r.stderr)


class MixedMachineHipTest(Case):
    """`gpusel run` on workstation-nvidia-amd (NVIDIA's GPUs and AMD's in one machine), its AMD GPUs
    named by id, judged by the device the real HIP 5.2.3 in each worker holds: the thunk stand-in
    takes the machine's AMD GPUs from its file (GPUSEL_TEST_AMD_GPUS unset), in KFD order."""

    @classmethod
    def setUpClass(cls):
        AmdVisibilityTest.setUpClass.__func__(cls)
        listing = gpusel_json("--sim", "workstation-nvidia-amd", "list", "--json")
        cls.amd = {g["rocm_smi_index"]: g["uuid"] for g in listing["gpus"] if g["vendor"] == "amd"}

    def job(self, *args, worker):
        env = for_python(base_env(LD_LIBRARY_PATH=self.library_path, GPUSEL_TEST_AMD_GPUS=None,
                                  QUEUE=os.path.join(OUT, "hip_queue"), HIP=os.path.abspath(self.hip)))
        return gpusel("--sim", "workstation-nvidia-amd", "run", "--quiet", *args, "--", "sh", "-c", worker,
                      env=env)

    def test_sim_exec_gives_hip_programs_the_simulators_thunk(self):
        if "GPUSEL_TEST_TSAN" in os.environ:
            self.skipTest("the thunk loads the simulator's machine reader into HIP's process, which the "
                          "ThreadSanitizer build's library cannot be loaded into")
        # Only ROCm's own libraries on the loader's path (and this machine's real thunk, libhsakmt1,
        # installed with libhsakmt-dev, which finds no /dev/kfd): `gpusel sim exec` puts the
        # simulator's libhsakmt.so.1 first, and HIP sees the machine's AMD GPUs, in KFD order.
        lib = os.path.join(EXTRAS, "root", "usr", "lib", "x86_64-linux-gnu")
        env = for_python(base_env(LD_LIBRARY_PATH=lib, GPUSEL_TEST_AMD_GPUS=None))
        for machine in ("amd-mi210", "workstation-nvidia-amd"):
            with self.subTest(machine=machine):
                with open(os.path.join(MACHINE_FILES, machine + ".toml"), "rb") as f:
                    kfd = [g["uuid"] for g in tomllib.load(f)["gpu"] if g.get("vendor") == "amd"
                           or machine == "amd-mi210"]
                r = subprocess.run([BIN, "sim", "exec", machine, "--", self.hip], capture_output=True, text=True,
                                   env=env, timeout=60)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(r.stdout.split(), kfd)
                # What HIP says of each device is the machine's: PCI address, memory, name (as
                # `gpusel list` and rocm-smi say them).
                r = subprocess.run([BIN, "sim", "exec", machine, "--", self.hip, "--pci"], capture_output=True,
                                   text=True, env=env, timeout=60)
                self.assertEqual(r.returncode, 0, r.stderr)
                listing = {g["uuid"]: g for g in gpusel_json("--sim", machine, "list", "--json")["gpus"]}
                for line in r.stdout.splitlines():
                    uid, bus, gib, name = line.split(" ", 3)
                    self.assertEqual(bus.split(":", 1)[1].upper(), listing[uid]["pci_bus_id"].split(":", 1)[1].upper(),
                                     line)
                    self.assertEqual(int(gib) << 30, listing[uid]["memory_total_bytes"], line)
                    self.assertEqual(name, listing[uid]["name"], line)

    def test_a_program_with_both_runtimes_binds_where_its_gpu_is(self):
        bind = build_bind_client()
        if bind is None:
            self.skipTest("HIP's threads are not instrumented for ThreadSanitizer")
        env = for_python(base_env(LD_LIBRARY_PATH=self.library_path, GPUSEL_TEST_AMD_GPUS=None))
        # hip_bind loads HIP (which has the AMD GPUs) and binds through libgpusel: handed an NVIDIA
        # GPU it binds in CUDA (the simulator's libcuda), handed an AMD GPU in HIP.
        r = gpusel("--sim", "workstation-nvidia-amd", "run", "--quiet", "--gpu", "1", "--", bind, "identity",
                   env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("identity GPU-3ddab6b5-edb6-ce2f-0d8e-b596c8965f78", r.stdout)
        r = gpusel("--sim", "workstation-nvidia-amd", "run", "--quiet", "--gpu", self.amd[1], "--", bind, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split()[1:], ["0", self.amd[1]])
        # A short prefix both makers' GPUs start with, handed in GPUSEL_GPU: refused by the wrapper
        # and by the in-process bind alike (exit 2).
        with tempfile.TemporaryDirectory() as tmp:
            clash = os.path.join(tmp, "clash.toml")
            with open(os.path.join(MACHINE_FILES, "workstation-nvidia-amd.toml")) as f:
                text = f.read().replace("GPU-5d6e7f8091a2b3c4", "GPU-3ce2a0b1c2d3e4f5")
            with open(clash, "w") as f:
                f.write(text)
            for cmd in ([BIN, "--sim", clash, "bind", "--", "true"], [BIN, "sim", "exec", clash, "--", bind]):
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=dict(env, GPUSEL_GPU="GPU-3c"))
                self.assertEqual(r.returncode, 2, (cmd, r.stderr))
                self.assertIn("starts the UUID of an NVIDIA GPU", r.stderr)

    def test_hip_workers_hold_the_amd_gpus_named_and_are_checked(self):
        if "GPUSEL_TEST_TSAN" in os.environ:
            self.skipTest("the thunk stand-in loads the simulator's machine reader into HIP's process, "
                          "which the ThreadSanitizer build's library cannot be loaded into")
        request = f"{self.amd[1]},{self.amd[0]}"
        r = self.job("--gpu", request, worker='echo "$LOCAL_RANK $("$HIP" | tr "\\n" " ")"')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(tuple(line.split()) for line in r.stdout.splitlines()),
                         [("0", self.amd[1]), ("1", self.amd[0])])
        # The run-time check asks ROCm SMI: rank 0 dropping its variable and taking HIP's device 0
        # of the whole machine (KFD first: rocm-smi 0, rank 1's GPU) is stopped.
        escape = ('if [ "$LOCAL_RANK" = 0 ]; then exec env -u ROCR_VISIBLE_DEVICES "$QUEUE" 0 30; '
                  'else exec "$QUEUE" 0 30; fi')
        r = self.job("--gpu", request, worker=escape)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f"rank 0 (GPU {self.amd[1]}) made a HIP queue on rocm-smi's GPU 0 ({self.amd[0]}), "
                      "not its own", r.stderr)
        r = self.job("--gpu", request, worker='exec "$QUEUE" 0 1')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(r.stdout.split()), sorted(["queue", self.amd[0], "queue", self.amd[1]]))
        # A HIP program in a job of NVIDIA GPUs sees every AMD GPU (CUDA_VISIBLE_DEVICES unset):
        # its queue on HIP's device 0 (rocm-smi 0) stops the job.
        r = self.job("--gpu", "1", worker='exec "$QUEUE" 0 30')
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f"made a HIP queue on rocm-smi's GPU 0 ({self.amd[0]}), not its own", r.stderr)
        self.assertIn("the program uses HIP, and the job's GPUs are NVIDIA's", r.stderr)


class HipBindTest(Case):
    """gpusel_bind_assigned_gpu in a HIP program (tests/amd/hip_bind.c over Debian's real HIP 5.2.3
    and the thunk stand-in describing amd-mi210): judged by the device HIP itself then calls
    current, and its id."""

    @classmethod
    def setUpClass(cls):
        AmdRunTest.setUpClass.__func__(cls)
        cls.bind = build_bind_client()
        if cls.bind is None:
            raise unittest.SkipTest("HIP's threads are not instrumented for ThreadSanitizer")

    def env(self, **extra):
        env = base_env(LD_LIBRARY_PATH=self.library_path, GPUSEL_TEST_AMD_GPUS=",".join(self.kfd), **extra)
        if "GPUSEL_TEST_PRELOAD" in os.environ:
            # ROCm's own libraries leave allocations behind at exit; gpusel's leaks are still reported.
            suppressions = os.path.join(OUT, "rocm.lsan")
            with open(suppressions, "w") as f:
                f.write("".join("leak:" + lib + "\n" for lib in
                                ("libamdhip64", "libhsa-runtime64", "libamd_comgr", "libLLVM", "libhsakmt")))
            env["LSAN_OPTIONS"] = "suppressions=" + suppressions
        return env

    def seen(self, env):
        """The ids of the HIP devices a program sees under `env`, in ordinal order."""
        return subprocess.run([self.hip], capture_output=True, text=True, env=env, check=True).stdout.split()

    @contextlib.contextmanager
    def holding(self, env):
        """hip_bind started with "hold": yields the process and its first line (what it bound), then
        lets it end and checks it ended well."""
        holder = subprocess.Popen([self.bind, "hold"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=env)
        try:
            line = holder.stdout.readline()
            if not line:
                holder.stdin.close()
                self.fail("the holder printed nothing: " + holder.stderr.read())
            yield holder, line.split()
        finally:
            if not holder.stdin.closed:
                holder.stdin.close()
            holder.wait(timeout=60)
            holder.stdout.close()
            holder.stderr.close()
        self.assertEqual(holder.returncode, 0)

    def bound(self, env, *args):
        r = subprocess.run([self.bind, *args], capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        ordinal, current, uid = r.stdout.split()
        self.assertEqual(ordinal, current, "the ordinal gpusel returned must be HIP's current device")
        return int(ordinal), uid

    def test_each_worker_of_a_run_binds_the_gpu_it_was_given(self):
        # Each worker sees its own GPU alone (run's default on AMD GPUs), and binds it.
        got = self.workers_bind("--gpu", "2,0")
        self.assertEqual(got, [("0", "0", self.by_index[2]), ("1", "0", self.by_index[0])])
        # Job mode: every worker sees the job's GPUs; its own is HIP ordinal LOCAL_RANK.
        got = self.workers_bind("--set-visible", "job", "--gpu", "1,2")
        self.assertEqual(got, [("0", "0", self.by_index[1]), ("1", "1", self.by_index[2])])

    def workers_bind(self, *args):
        """(LOCAL_RANK, bound ordinal, bound id) of each worker of `gpusel run ARGS -- hip_bind`."""
        r = gpusel("--sim", "amd-mi210", "run", "--quiet", *args, "--", "sh", "-c",
                   'echo "$LOCAL_RANK $(' + self.bind + ')"', env=self.env())
        self.assertEqual(r.returncode, 0, r.stderr)
        out = []
        for line in r.stdout.splitlines():
            rank, ordinal, current, uid = line.split()
            self.assertEqual(ordinal, current, line)
            out.append((rank, ordinal, uid))
        return sorted(out)

    def test_a_published_gpu_is_found_among_hips_devices_under_presets(self):
        for preset in ({}, {"ROCR_VISIBLE_DEVICES": "2,0"}, {"HIP_VISIBLE_DEVICES": "2,1"},
                       {"ROCR_VISIBLE_DEVICES": "0,1", "CUDA_VISIBLE_DEVICES": "1"}):
            seen = self.seen(self.env(**preset))
            for k, uid in enumerate(seen):
                with self.subTest(preset=preset, gpu=uid):
                    # By id (a unique prefix), and by a launcher's local rank.
                    self.assertEqual(self.bound(self.env(GPUSEL_GPU=uid[:9], **preset)), (k, uid))
                    self.assertEqual(self.bound(self.env(LOCAL_RANK=str(k), **preset)), (k, uid))
        # A GPU the presets hide from HIP: refused as bad input, naming the variables as set.
        hidden = [g for g in self.kfd if "GPU-" + g not in self.seen(self.env(ROCR_VISIBLE_DEVICES="2,0"))]
        r = subprocess.run([self.bind], capture_output=True, text=True, timeout=60,
                           env=self.env(ROCR_VISIBLE_DEVICES="2,0", GPUSEL_GPU="GPU-" + hidden[0]))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("GPU-" + hidden[0], r.stderr)
        self.assertIn('ROCR_VISIBLE_DEVICES="2,0"', r.stderr)
        self.assertIn("is not visible to HIP in this process", r.stderr)
        self.assertEqual(r.stdout, "")

    def test_hip_reads_cuda_visible_devices_only_without_hip_visible_devices(self):
        # Slurm may set HIP_ and CUDA_VISIBLE_DEVICES both; HIP then reads HIP_VISIBLE_DEVICES
        # alone, so a longer CUDA_VISIBLE_DEVICES cuts nothing short and the bind goes ahead.
        preset = {"HIP_VISIBLE_DEVICES": "1", "CUDA_VISIBLE_DEVICES": "0,1,2"}
        seen = self.seen(self.env(**preset))
        self.assertEqual(len(seen), 1)
        self.assertEqual(self.bound(self.env(**preset)), (0, seen[0]))
        self.assertEqual(self.bound(self.env(LOCAL_RANK="0", **preset)), (0, seen[0]))

    def test_a_comma_last_cuts_nothing(self):
        # "0,1," is two entries to ROCr and HIP alike: nothing was dropped, so the bind goes ahead.
        for name in ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
            with self.subTest(variable=name):
                seen = self.seen(self.env(**{name: "0,1,"}))
                self.assertEqual(len(seen), 2)
                self.assertEqual(self.bound(self.env(LOCAL_RANK="1", **{name: "0,1,"})), (1, seen[1]))

    def test_variables_that_leave_hip_no_device_are_named(self):
        # Slurm's two variables on an AMD node (the same GPU number in both) leave HIP nothing; the
        # bind says so, naming them, instead of that CUDA is missing.
        env = self.env(ROCR_VISIBLE_DEVICES="1", CUDA_VISIBLE_DEVICES="1")
        self.assertEqual(self.seen(env), [])
        r = subprocess.run([self.bind], capture_output=True, text=True, timeout=60, env=env)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn('HIP shows this process no device (ROCR_VISIBLE_DEVICES="1", HIP_VISIBLE_DEVICES=unset, '
                      'CUDA_VISIBLE_DEVICES="1")', r.stderr)
        self.assertIn("gpusel doctor", r.stderr)
        self.assertNotIn("CUDA is unavailable", r.stderr)

    def test_refusals_speak_of_hips_devices_and_rocms_variables(self):
        seen = self.seen(self.env())
        cases = [
            ({"GPUSEL_GPU": "GPU-"}, 2, ["is a prefix of 3 devices HIP sees here", *seen]),
            ({"LOCAL_RANK": "3"}, 2, ["LOCAL_RANK=3 but HIP sees only 3 devices here",
                                      "ROCR_VISIBLE_DEVICES=unset, HIP_VISIBLE_DEVICES=unset"]),
            ({"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4"}, 2, ["but HIP sees 3 devices here",
                                                              "ranks would share GPUs"]),
            ({"GPUSEL_GPU": "bogus"}, 2, ['"bogus" is neither a GPU index', "rocm-smi"]),
            # A preset cut short, told by the variable HIP or ROCr reads it from.
            ({"ROCR_VISIBLE_DEVICES": "0,5"}, 2,
             ['ROCR_VISIBLE_DEVICES="0,5" names 2 devices, but HIP shows this process only 1',
              "ROCr stops reading"]),
            ({"ROCR_VISIBLE_DEVICES": "0,1", "CUDA_VISIBLE_DEVICES": "0,1,2"}, 2,
             ['CUDA_VISIBLE_DEVICES="0,1,2" names 3 devices, but HIP shows this process only 2',
              'ROCR_VISIBLE_DEVICES="0,1"', "HIP stops reading"]),
            ({"HIP_VISIBLE_DEVICES": "1,1"}, 2, ['HIP_VISIBLE_DEVICES="1,1" names 2 devices']),
            # An index is rocm-smi's: without ROCm SMI it cannot be placed (a failure, as `gpusel
            # resolve` calls it), and NVML is not what is missing.
            ({"GPUSEL_GPU": "1"}, 1, ["is a rocm-smi index", "ROCm SMI", "librocm_smi64",
                                      "give the GPU by its id"]),
        ]
        for extra, code, words in cases:
            with self.subTest(env=extra):
                r = subprocess.run([self.bind], capture_output=True, text=True, timeout=60,
                                   env=self.env(**extra))
                self.assertEqual(r.returncode, code, r.stderr)
                self.assertEqual(r.stdout, "")
                for w in words:
                    self.assertIn(w, r.stderr)
                for w in ("CUDA sees", "visible to CUDA", "CUDA device", "CUDA shows", "NVML"):
                    self.assertNotIn(w, r.stderr)
        # `gpusel bind -- PROGRAM` on AMD GPUs refuses in the same words.
        r = gpusel("--sim", "amd-mi210", "bind", "--", os.path.abspath(self.hip),
                   env=base_env(LD_LIBRARY_PATH=self.library_path, GPUSEL_TEST_AMD_GPUS=",".join(self.kfd),
                                LOCAL_RANK="3"))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("LOCAL_RANK=3 but HIP sees only 3 devices here", r.stderr)

    def test_an_index_is_rocm_smis_placed_through_rocm_smi(self):
        # With ROCm SMI (the simulator's, describing the same machine), GPUSEL_GPU=1 is the GPU
        # `gpusel list` shows at index 1, bound at the ordinal HIP gives it; under a preset, an
        # index is a position among HIP's devices, as `gpusel resolve` reads it.
        smi = dict(sim_env("amd-mi210"))
        extra = {k: smi[k] for k in ("GPUSEL_ROCM_SMI_LIBRARY", "GPUSEL_SIM_MACHINE")}
        seen = self.seen(self.env())
        self.assertEqual(self.bound(self.env(GPUSEL_GPU="1", **extra)),
                         (seen.index(self.by_index[1]), self.by_index[1]))
        seen = self.seen(self.env(ROCR_VISIBLE_DEVICES="2,0"))
        self.assertEqual(self.bound(self.env(GPUSEL_GPU="1", ROCR_VISIBLE_DEVICES="2,0", **extra)), (1, seen[1]))
        # A ROCm SMI that lists no GPU (the simulated one on an NVIDIA machine file) while HIP has
        # three: the libraries disagree, so the index is not placed (a failure, exit 1).
        nvidia = dict(extra, GPUSEL_SIM_MACHINE=os.path.join(MACHINE_FILES, "dgx-h100.toml"))
        r = subprocess.run([self.bind], capture_output=True, text=True, timeout=60,
                           env=self.env(GPUSEL_GPU="1", **nvidia))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("ROCm SMI lists no GPU here; give the GPU by its id instead", r.stderr)

    def test_the_hip_abi_compiles_against_debians_header(self):
        """Each function of src/driver/hip.def has hip_runtime_api.h's type (HIP 5.2.3), and the
        types and result codes hip_api.hpp and hip.cpp declare by hand are the header's."""
        if shutil.which("c++") is None:
            self.skipTest("no C++ compiler (c++)")
        driver = os.path.join(SOURCE, "src", "driver")
        with open(os.path.join(driver, "hip.cpp")) as f:
            code = f.read()
        self.assertIn("kHipSuccess = 0;", code)
        self.assertIn("kHipErrorNoDevice = 100;", code)
        lines = ["#include <hip/hip_runtime_api.h>", "#include <type_traits>",
                 "#define GPUSEL_HIP(name, params) static_assert(std::is_same_v<decltype(&name), "
                 "hipError_t(*) params>, #name);", '#include "hip.def"',
                 'static_assert(hipSuccess == 0 && hipErrorNoDevice == 100, "result codes");',
                 'static_assert(sizeof(hipError_t) == sizeof(int) && std::is_same_v<hipDevice_t, int>, "types");',
                 'static_assert(sizeof(hipUUID) == 16 && sizeof(hipUUID::bytes) == 16, "hipUUID");',
                 "static_assert(std::is_same_v<decltype(&hipGetErrorName), const char* (*)(hipError_t)>, "
                 '"hipGetErrorName");']
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "hip_abi.cpp")
            with open(src, "w") as f:
                f.write("\n".join(lines) + "\n")
            r = subprocess.run(["c++", "-std=c++17", "-Wall", "-Werror", "-fsyntax-only", "-D__HIP_PLATFORM_AMD__",
                                "-I", os.path.join(EXTRAS, "root", "usr", "include"), "-I", driver, src],
                               capture_output=True, text=True, env=plain_env(), timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_a_second_process_cannot_bind_a_claimed_gpu(self):
        uid = self.seen(self.env())[1]
        with self.holding(self.env(GPUSEL_GPU=uid)) as (holder, line):
            self.assertEqual(line, ["1", "1", uid])
            r = subprocess.run([self.bind], capture_output=True, text=True, timeout=60,
                               env=self.env(GPUSEL_GPU=uid))
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn(uid, r.stderr)
            self.assertIn(str(holder.pid), r.stderr)
        self.assertEqual(self.bound(self.env(GPUSEL_GPU=uid)), (1, uid))

    def test_an_assignment_made_in_code_is_found_among_hips_devices(self):
        env = self.env(ROCR_VISIBLE_DEVICES="2,0")
        seen = self.seen(env)
        r = subprocess.run([self.bind, "publish=" + seen[1][:10], "visible", "identity"], capture_output=True,
                           text=True, env=env, timeout=60)
        # Published by id: HIP's ordinal of it, before the bind and after.
        self.assertEqual(r.stdout.split("\n")[:2], ["visible 1", "1 1 " + seen[1]], r.stderr)
        # gpu_identity speaks of CUDA devices: refused after a HIP bind, not answered from CUDA.
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("bound in HIP, to " + seen[1] + " (HIP device 1)", r.stderr)
        # Published as an ordinal: HIP's ordinal, range-checked against HIP's devices.
        self.assertEqual(self.bound(env, "publish=0"), (0, seen[0]))
        r = subprocess.run([self.bind, "publish=2"], capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("cannot use HIP device 2: 2 in this process", r.stderr)

    def test_a_cuda_program_with_hip_loaded_binds_in_cuda(self):
        # On an NVIDIA machine HIP lists no device: the bind is CUDA's, at the GPU's CUDA ordinal.
        env = sim_env("dgx-h100")
        listing = gpusel_json("list", "--json", env=env)
        gpu = next(g for g in listing["gpus"] if g["index"] == 5)
        env = dict(env, LD_LIBRARY_PATH=env.get("LD_LIBRARY_PATH", "") + ":" + self.library_path,
                   GPUSEL_TEST_AMD_GPUS="", GPUSEL_GPU=gpu["uuid"])
        if "LSAN_OPTIONS" in self.env():
            env["LSAN_OPTIONS"] = self.env()["LSAN_OPTIONS"]
        with self.holding(env) as (holder, line):
            self.assertEqual(line, [str(gpu["cuda_ordinal"]), "none"])
            # Judged by where its context is: on nvidia-smi index 5, and nowhere else.
            self.assertEqual(contexts(env).get(holder.pid), [5])

    def test_two_copies_of_hip_are_refused(self):
        # Each copy has its own current device: gpusel cannot know which the program uses.
        lib = os.path.join(EXTRAS, "root", "usr", "lib", "x86_64-linux-gnu", "libamdhip64.so.5")
        copy = os.path.join(OUT, "libamdhip64-0123abcd.so")
        shutil.copyfile(os.path.realpath(lib), copy)
        r = subprocess.run([self.bind, "copy=" + copy], capture_output=True, text=True, env=self.env(), timeout=60)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("2 copies of the HIP runtime", r.stderr)
        self.assertIn(copy, r.stderr)
        self.assertEqual(r.stdout, "")

    def test_python_binds_in_the_hip_runtime_it_loaded(self):
        # As a PyTorch ROCm program does: HIP loaded first (here through ctypes), then
        # gpusel.bind_assigned_gpu(); HIP's current device must be the rank's GPU.
        script = ("import ctypes, sys\n"
                  "hip = ctypes.CDLL(sys.argv[1])\n"
                  "n = ctypes.c_int(0)\n"
                  "hip.hipGetDeviceCount(ctypes.byref(n))\n"
                  "import gpusel\n"
                  "ordinal = gpusel.bind_assigned_gpu()\n"
                  "current = ctypes.c_int(-1)\n"
                  "hip.hipGetDevice(ctypes.byref(current))\n"
                  "uuid = ctypes.create_string_buffer(16)\n"
                  "hip.hipDeviceGetUuid(uuid, current)\n"
                  "print(ordinal, current.value, 'GPU-' + uuid.raw.decode())\n")
        hip = os.path.join(EXTRAS, "root", "usr", "lib", "x86_64-linux-gnu", "libamdhip64.so.5")
        library = os.path.abspath(os.environ.get("GPUSEL_LIBRARY_FILE", os.path.join(BUILD, "lib", "libgpusel.so.2")))
        seen = self.seen(self.env(ROCR_VISIBLE_DEVICES="2,0"))
        for rank, uid in enumerate(seen):
            with self.subTest(rank=rank):
                env = for_python(self.env(ROCR_VISIBLE_DEVICES="2,0", LOCAL_RANK=str(rank), GPUSEL_LIBRARY=library,
                                          PYTHONPATH=os.path.abspath(os.path.join(SOURCE, "python"))))
                r = subprocess.run([sys.executable, "-c", script, hip], capture_output=True, text=True, env=env,
                                   timeout=60)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(r.stdout.split(), [str(rank), str(rank), uid])

    def test_a_bind_before_hip_is_loaded_says_so_on_an_amd_machine(self):
        # In `sim shell` the AMD machine has /dev/kfd and no NVIDIA driver: a program that binds
        # before loading HIP is told to bind after its first HIP call, not only that CUDA is missing.
        script = ("import gpusel\ntry:\n    gpusel.bind_assigned_gpu()\nexcept RuntimeError as e:\n"
                  "    print(e)\n")
        env = for_python(base_env(GPUSEL_GPU="GPU-1a2b", PYTHONPATH=os.path.abspath(os.path.join(SOURCE, "python")),
                                  GPUSEL_LIBRARY=os.path.abspath(os.environ.get(
                                      "GPUSEL_LIBRARY_FILE", os.path.join(BUILD, "lib", "libgpusel.so.2")))))
        r = subprocess.run([BIN, "sim", "shell", "amd-mi210", "--", sys.executable, "-c", script],
                           capture_output=True, text=True, env=env, timeout=60)
        if r.returncode != 0 and "namespace" in r.stderr:
            self.skipTest("no private mount namespace here: " + r.stderr.strip()[-300:])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("this machine has AMD's GPU driver (/dev/kfd)", r.stdout)
        self.assertIn("bind after the program's first HIP call", r.stdout)
        # `sim exec` makes no /dev/kfd: ROCm SMI's GPUs tell the machine is AMD's.
        r = subprocess.run([BIN, "sim", "exec", "amd-mi210", "--", sys.executable, "-c", script],
                           capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("this machine has 3 AMD GPUs (ROCm SMI lists them)", r.stdout)
        self.assertIn("bind after the program's first HIP call", r.stdout)


if __name__ == "__main__":
    unittest.main()
