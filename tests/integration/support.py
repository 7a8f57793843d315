"""Shared helpers for gpusel's integration tests (standard library only).

Paths come from the environment ctest sets: GPUSEL_BIN (the gpusel executable), GPUSEL_SIM_ROOT
(the simulator's folder), GPUSEL_SOURCE_DIR, GPUSEL_CUDA_USER (tests/integration/cuda_user.c built
against the CUDA double) and GPUSEL_SHARED_DIR (the project's reference folder beside the repository: the reference module and
the ABI tables some tests compare against; docs/design.md).
"""

import atexit
import fcntl
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import tomllib
import unittest

BIN = os.environ.get("GPUSEL_BIN", "build/bin/gpusel")
SIM_ROOT = os.environ.get("GPUSEL_SIM_ROOT", "build/lib/gpusel/sim")
SOURCE = os.environ.get("GPUSEL_SOURCE_DIR", ".")
CUDA_USER = os.environ.get("GPUSEL_CUDA_USER", "build/bin/cuda_user")
CUDA_HOLD = os.environ.get("GPUSEL_CUDA_HOLD", "build/bin/cuda_hold")
SHARED = os.environ.get("GPUSEL_SHARED_DIR", os.path.join(SOURCE, "..", "shared"))
MACHINES = os.path.join(SOURCE, "sim", "machines")

# Variables a test must not inherit from whoever runs it.
_SCRUB = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "GPUSEL_SIM_MACHINE", "GPUSEL_NVML_LIBRARY",
          "GPUSEL_CUDA_LIBRARY", "GPUSEL_ROCM_SMI_LIBRARY", "LOCAL_RANK", "SLURM_LOCALID", "GPUSEL_GPUS", "GPUSEL_GPU", "GPUSEL_LEASE_DIR",
          "GPUSEL_SIM_STATE_DIR", "GPUSEL_SIM_SAVED")


# False under the ThreadSanitizer build: a Python process cannot load the instrumented libgpusel or
# doubles there (libtsan must be there from the start), so tests skip those parts.
PYTHON_LOADS_LIBRARIES = "GPUSEL_TEST_TSAN" not in os.environ

# Each test process gets lease and simulator-usage folders of its own, so test modules running at
# once (ctest -j) neither see each other's leases nor each other's simulated processes.
_PRIVATE = tempfile.mkdtemp(prefix="gpusel-test-")
atexit.register(shutil.rmtree, _PRIVATE, True)
_PRIVATE_ENV = {"GPUSEL_LEASE_DIR": os.path.join(_PRIVATE, "leases"),
                "GPUSEL_SIM_STATE_DIR": os.path.join(_PRIVATE, "sim-state"),
                # The CUDA double's CUdevice handles differ from the ordinals (they are equal on
                # NVIDIA's drivers): gpusel passing an ordinal where a handle belongs fails here.
                # test_clients unsets it: real programs rely on equal ones.
                "GPUSEL_SIM_DEVICE_HANDLES": "distinct"}


def private_path(name):
    """A path named `name` in a fresh folder of this test process's own (removed at exit): never a
    fixed name in the shared $TMPDIR, so two runs of a test at once do not meet."""
    return os.path.join(private_dir("tmp"), name)


def private_root():
    """This test process's own folder (removed at its exit), which private_dir and private_path
    make their folders in."""
    return _PRIVATE


def private_dir(prefix):
    """A fresh folder in this test process's own (removed with it at exit)."""
    return tempfile.mkdtemp(prefix=prefix, dir=_PRIVATE)


def shell_script(text):
    """An executable /bin/sh script of `text` (job.sh) in a private folder; its path."""
    path = private_path("job.sh")
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + text)
    os.chmod(path, 0o755)
    return path


def account_files(folder, users, homes):
    """Copies of /etc/passwd, group and shadow in `folder`, with `users` (name: id) added and the
    machine's own accounts of those names or ids left out, for a test to bind-mount over /etc in a
    private mount namespace: its users exist there only, and the machine's account files are never
    written (useradd would). Returns {name: path of its copy}."""
    ids = {str(uid) for uid in users.values()}
    paths = {}
    for name in ("passwd", "group", "shadow"):
        with open(f"/etc/{name}") as f:
            lines = f.read().splitlines(keepends=True)
        text = "".join(line for line in lines
                       if line.split(":")[0] not in users
                       and not (name != "shadow" and line.count(":") >= 3 and line.split(":")[2] in ids))
        for user, uid in users.items():
            text += {"passwd": f"{user}:x:{uid}:{uid}:gpusel test:{homes}/{user}:/bin/sh\n",
                     "group": f"{user}:x:{uid}:\n",
                     "shadow": f"{user}:!:19000:0:99999:7:::\n"}[name]
        paths[name] = os.path.join(folder, name)
        with open(paths[name], "w") as f:
            f.write(text)
        os.chmod(paths[name], 0o644 if name != "shadow" else 0o640)
    return paths


def base_env(**extra):
    """The environment for a child process: the test's own, scrubbed, plus `extra` (None unsets).

    Under the sanitizer build the test runner itself runs with the sanitizer runtimes preloaded
    (it loads the instrumented doubles through ctypes); children are instrumented programs of
    their own, so the preload and its relaxed options are dropped for them.
    """
    env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
    env.update(_PRIVATE_ENV)
    if "GPUSEL_TEST_PRELOAD" in env:
        env.pop("LD_PRELOAD", None)
        env.pop("ASAN_OPTIONS", None)
    for key, value in extra.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def machine(name):
    """A bundled machine file, read with Python's own TOML parser, GPUs in PCI order."""
    with open(os.path.join(MACHINES, name + ".toml"), "rb") as f:
        data = tomllib.load(f)
    data["gpu"].sort(key=lambda g: g["pci_bus_id"].upper())
    return data


def uuids(name):
    return [g["uuid"] for g in machine(name)["gpu"]]


def sim_env(name, **extra):
    """The variables `gpusel sim env NAME` prints, as a dict, merged over base_env()."""
    out = subprocess.run([BIN, "sim", "env", name], capture_output=True, text=True, env=base_env(), check=True).stdout
    exports = {}
    for line in out.splitlines():
        if line.startswith("export "):
            key, _, value = line[len("export "):].partition("=")
            exports[key] = value.strip("'")
    return base_env(**{**exports, **extra})


def for_python(env):
    """`env` for a Python child that loads the doubles itself: under the sanitizer build it needs the
    runtimes the test runner was given."""
    env = dict(env)
    for key in ("LD_PRELOAD", "ASAN_OPTIONS"):
        if "GPUSEL_TEST_PRELOAD" in os.environ and key in os.environ:
            env[key] = os.environ[key]
    return env


def gpusel(*args, env=None, **extra):
    """Runs gpusel; returns the CompletedProcess (text mode)."""
    return subprocess.run([BIN, *args], capture_output=True, text=True, env=env or base_env(**extra), timeout=60)


def gpusel_json(*args, **kw):
    r = gpusel(*args, **kw)
    if r.returncode != 0:
        raise AssertionError(f"gpusel {' '.join(args)} exited {r.returncode}: {r.stderr}")
    return json.loads(r.stdout)


def contexts(env):
    """{pid: [nvidia-smi index, ...]}: the GPUs each process has a CUDA context on, as the simulated
    NVML lists them (`gpusel list --json`) under `env` (its machine and GPUSEL_SIM_STATE_DIR)."""
    r = subprocess.run([BIN, "list", "--json"], capture_output=True, text=True, env=env, timeout=60)
    if r.returncode != 0:
        raise AssertionError(f"gpusel list --json exited {r.returncode}: {r.stderr}")
    out = {}
    for g in json.loads(r.stdout)["gpus"]:
        for p in g["processes"]:
            out.setdefault(p["pid"], []).append(g["index"])
    return out


# CUDA runtime programs built here with the CUDA toolkit's nvcc (tests/integration/*.cu), run on the
# simulator against its libcudart.so.13: test_sim_runtime, test_launchers_nvcc.
BUILD = os.environ.get("GPUSEL_BUILD_DIR", "build")
NVCC = os.environ.get("GPUSEL_NVCC", "/usr/local/cuda/bin/nvcc")
NVCC_OUT = os.path.join(BUILD, "sim-cuda-programs")
# The sanitizer builds' doubles are instrumented: a foreign program cannot load them.
INSTRUMENTED = "GPUSEL_TEST_PRELOAD" in os.environ or "GPUSEL_TEST_TSAN" in os.environ


def build_cuda_program(name, runtimes=("shared",), libs=()):
    """tests/integration/NAME.cu compiled by nvcc and linked with each CUDA runtime in `runtimes`
    ("shared": `nvcc -cudart shared`, what the simulator runs; "static": nvcc's default) into
    NVCC_OUT/NAME_RUNTIME; their paths, in that order. `libs`: more to link (e.g. "-lcublas"). Built
    once per build folder and rebuilt only when the source is newer (about 3 s of CPU)."""
    source = os.path.join(SOURCE, "tests", "integration", name + ".cu")
    os.makedirs(NVCC_OUT, exist_ok=True)
    obj = os.path.join(NVCC_OUT, name + ".o")
    programs = [os.path.join(NVCC_OUT, f"{name}_{runtime}") for runtime in runtimes]
    newest = os.path.getmtime(source)
    if not all(os.path.exists(p) and os.path.getmtime(p) >= newest for p in (obj, *programs)):
        # Built under names of this process's own, then renamed into place: two runs at once never
        # see a half-written program.
        # (nvcc goes by the file's extension: the object's own name keeps ".o" at its end.)
        tag = f".{os.getpid()}"
        obj_tmp = obj[:-2] + tag + ".o"
        cmds = [[NVCC, "-c", source, "-o", obj_tmp]]
        cmds += [[NVCC, "-cudart", runtime, obj_tmp, *libs, "-o", program + tag]
                 for runtime, program in zip(runtimes, programs)]
        for cmd in cmds:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            if r.returncode != 0:
                raise AssertionError(f"{' '.join(cmd)}: {r.stdout}{r.stderr}")
        for path in (obj, *programs):
            os.replace(obj_tmp if path == obj else path + tag, path)
    return programs


def machine_with_driver(tmp, name, driver="580.65.06", cuda=13000):
    """A copy of a bundled machine whose driver supports CUDA 13 (the toolkit's runtime needs it)."""
    with open(os.path.join(MACHINES, name + ".toml")) as f:
        text = f.read()
    text = re.sub(r'^driver_version = ".*"$', f'driver_version = "{driver}"', text, flags=re.M)
    text = re.sub(r"^cuda_driver_version = \d+$", f"cuda_driver_version = {cuda}", text, flags=re.M)
    path = os.path.join(tmp, name + ".toml")
    with open(path, "w") as f:
        f.write(text)
    return path


def recorded_contexts(state):
    """The simulator's own record of the CUDA contexts made under usage folder `state` (the
    GPUSEL_SIM_STATE_DIR they ran with): {pid: [GPU UUID, ...]}. Each GPU's folder holds an entry
    named by the pid of each process with a context there; an entry stays after its process ends
    until NVML's processes are listed again, so this shows where a process that was stopped had
    its context (the placement check lists no more once it has stopped the job)."""
    out = {}
    for uuid in sorted(os.listdir(state)):
        folder = os.path.join(state, uuid)
        for name in os.listdir(folder) if os.path.isdir(folder) else ():
            if name.isdigit():
                out.setdefault(int(name), []).append(uuid)
    return out


class Holding:
    """Runs `cmd` (each "{DIR}" in it replaced by a folder of its own), in which `n` processes run
    cuda_hold: each takes CUDA device 0, writes DIR/ready.<pid> and then waits on a lock on DIR/go
    that this object holds until finish(). While they hold their contexts, the test looks.

        with Holding(cmd, env, n=2) as h:
            h.ready       # {pid: CUDA_VISIBLE_DEVICES as the program saw it}
            rc, out, err = h.finish()

    Waiting for the programs is for a condition (n ready files, or cmd ended), with a deadline only
    against a hang."""

    def __init__(self, cmd, env, n=1, deadline=60):
        self.dir = os.path.dirname(private_path("hold"))
        os.makedirs(self.dir, exist_ok=True)
        self.cmd = [w.replace("{DIR}", self.dir) for w in cmd]
        self.env, self.n, self.deadline = env, n, deadline
        self.result = None

    def __enter__(self):
        go = os.path.join(self.dir, "go")
        open(go, "w").close()
        self.lock = os.open(go, os.O_RDONLY)  # not inherited (PEP 446)
        fcntl.flock(self.lock, fcntl.LOCK_EX)
        self.proc = subprocess.Popen(self.cmd, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, text=True)
        end = time.monotonic() + self.deadline
        while len(self.ready) < self.n and self.proc.poll() is None and time.monotonic() < end:
            time.sleep(0.02)
        return self

    @property
    def ready(self):
        out = {}
        for name in os.listdir(self.dir):
            if name.startswith("ready."):
                with open(os.path.join(self.dir, name)) as f:
                    pid, cvd = f.read().split()
                out[int(pid)] = cvd
        return out

    def finish(self):
        """Lets the programs go; (exit status, stdout, stderr) of cmd."""
        if self.result is None:
            os.close(self.lock)
            try:
                out, err = self.proc.communicate(timeout=self.deadline)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                out, err = self.proc.communicate()
            self.result = (self.proc.returncode, out, err)
        return self.result

    def __exit__(self, *exc):
        self.finish()
        return False


class Case(unittest.TestCase):
    def assertFailsWith(self, result, code, *pieces):
        """The command exited `code` with every piece in its stderr, which starts with 'gpusel: '."""
        self.assertEqual(result.returncode, code, f"stdout={result.stdout!r} stderr={result.stderr!r}")
        self.assertTrue(result.stderr.startswith("gpusel: "), result.stderr)
        for piece in pieces:
            self.assertIn(piece, result.stderr)
        self.assertNotIn("Traceback", result.stderr)
        self.assertNotIn("terminate called", result.stderr)
