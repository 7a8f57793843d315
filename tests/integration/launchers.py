"""Real launchers for gpusel's integration tests: a one-node Slurm on loopback, Open MPI and torchrun.

Standard library only. Three entry points:

- imported by the test_launchers_* modules: `Slurm` (a throwaway cluster of one node with 8 fake
  GPUs), `mpirun_cmd()`, `torchrun_cmd()`, `worker_cmd()` and `parse_workers()`;
- `python3 launchers.py worker [--api] [--unset A,B] [-- CMD...]`: what each rank runs. It runs CMD
  (default `gpusel bind --json`), or binds through the Python package with `--api`, and prints one
  line, `WORKER {json}`, holding the launcher's variables it saw and the result, so a test can work
  out the GPU it expects from the very environment the rank had. With `--api`, `context` is the
  GPU whose (simulated) NVML process list holds the worker while its context lives: where the
  worker really runs, whatever gpusel reported;
- `python3 launchers.py run MODULE`: runs one test module for ctest and exits 77 when every test in
  it was skipped (a launcher or privilege missing), 1 on a failure, 0 otherwise. unittest alone
  exits 0 on skips, which would report a module that never ran as passed.
"""

import atexit
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

from support import BIN, SOURCE, Case, sim_env, uuids

HERE = os.path.dirname(os.path.abspath(__file__))
LIBRARY = os.environ.get("GPUSEL_LIBRARY_FILE", "build/lib/libgpusel.so.2")
MACHINE = "dgx-h100"
DGX = uuids(MACHINE)  # nvidia-smi order; all H100, so CUDA order and PCI order agree
SKIP = 77

# What a worker reports of its environment besides the result.
REPORTED = ("CUDA_VISIBLE_DEVICES", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "RANK", "WORLD_SIZE", "GPUSEL_GPU",
            "GPUSEL_GPUS", "SLURM_LOCALID", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_STEP_ID", "SLURM_STEPID",
            "SLURM_JOB_ID", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "SLURM_STEP_TASKS_PER_NODE",
            "SLURM_TASKS_PER_NODE", "SLURM_GPUS_PER_TASK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
            "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_NODE_RANK",
            "PMIX_RANK", "TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT", "MPI_LOCALRANKID", "MPI_LOCALNRANKS",
            "PMI_RANK", "SUBMITIT_LOCAL_LOCALID", "SUBMITIT_LOCAL_NTASKS", "GPUSEL_SHARE", "SLURM_GPUS_ON_NODE",
            "SLURM_NTASKS_PER_TRES", "SLURMD_NODENAME", "GPUSEL_TEST_NODE")

# Open MPI on loopback, as root, in a container (docs/launchers.md, "Testing under real launchers").
OMPI_ENV = {
    "OMPI_MCA_oob_tcp_if_include": "lo",
    "OMPI_MCA_btl": "self,vader",
    "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
}


def missing(*programs):
    """The programs of `programs` that are not on PATH, as a skip reason (None when all are there)."""
    absent = [p for p in programs if shutil.which(p) is None]
    return f"not installed: {', '.join(absent)} (scripts/install-deps installs them)" if absent else None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# A launcher's variables in the caller's environment (a test suite run inside a Slurm job, say)
# would reach the ranks, or make srun join that job: none of them is passed on.
_LAUNCHER_PREFIXES = ("SLURM_", "SLURMD_", "OMPI_", "PMIX_", "PMI_", "TORCHELASTIC_")
_LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK")


def _scrubbed(e):
    return {k: v for k, v in e.items() if not k.startswith(_LAUNCHER_PREFIXES) and k not in _LAUNCHER_VARS}


def env(**extra):
    """A rank's environment on the simulated dgx-h100: gpusel on PATH, Open MPI on loopback, the
    Python package importable, nothing inherited from whoever runs the tests (support.base_env)."""
    e = _scrubbed(sim_env(MACHINE))
    e["PATH"] = os.path.dirname(os.path.abspath(BIN)) + os.pathsep + e.get("PATH", "/usr/bin:/bin")
    e["PYTHONPATH"] = os.path.join(os.path.abspath(SOURCE), "python")
    e["GPUSEL_LIBRARY"] = os.path.abspath(LIBRARY)
    e.update(OMPI_ENV)
    for key, value in extra.items():
        if value is None:
            e.pop(key, None)
        else:
            e[key] = value
    return e


def worker_cmd(*args):
    """The command each rank runs: this file's `worker` entry point, under the test's own Python
    (which has no torch: see `--api`)."""
    return [sys.executable, os.path.join(HERE, "launchers.py"), "worker", *args]


def parse_workers(text):
    """The WORKER lines of `text`, as dicts, in the order printed."""
    out = []
    for line in text.splitlines():
        if "WORKER " in line:
            out.append(json.loads(line[line.index("WORKER ") + len("WORKER "):]))
    return out


def cuda_ordinal(cvd, index):
    """The CUDA ordinal of nvidia-smi GPU `index` under CUDA_VISIBLE_DEVICES `cvd` on the dgx-h100
    (None: unset). Integers there are nvidia-smi indices: the machine's GPUs are all one model."""
    if cvd is None:
        return index
    entries = cvd.split(",")
    return entries.index(DGX[index] if entries[0].startswith("GPU-") else str(index))


def cvd_index(cvd, k):
    """The nvidia-smi index of entry k of an integer or UUID CUDA_VISIBLE_DEVICES."""
    entry = cvd.split(",")[k]
    return DGX.index(entry) if entry.startswith("GPU-") else int(entry)


class LauncherCase(Case):
    maxDiff = None

    def assertWorkers(self, workers, n, expect, source=None, rank_variable=None, rank=None, output=""):
        """N workers, each exiting 0 and bound to nvidia-smi GPU expect(w) under the CUDA ordinal its
        CUDA_VISIBLE_DEVICES gives that GPU, every GPU distinct; `source` and `rank_variable` as
        given, and `rank` (a function of the worker) the rank it reports. One comparison of the
        whole table, so a failure shows every rank."""
        self.assertEqual(len(workers), n, f"expected {n} workers; output:\n{output}")
        failed = [w for w in workers if w["rc"] != 0]
        self.assertFalse(failed, "workers failed:\n" + "\n".join(json.dumps(w) for w in failed))
        got, want = [], []
        for w in workers:
            b, cvd = w["bind"] if "bind" in w else w["api"], w["env"].get("CUDA_VISIBLE_DEVICES")
            index = expect(w)
            key = w["env"].get("RANK") or w["env"].get("OMPI_COMM_WORLD_RANK") or w["env"].get("SLURM_PROCID")
            if "api" in w:  # the Python package: the ordinal it bound and that device's UUID
                got.append((key, b["uuid"], b["ordinal"]))
                want.append((key, DGX[index], cuda_ordinal(cvd, index)))
                continue
            got.append((key, b["uuid"], b["index"], b["cuda_ordinal"], b.get("source") if source else None,
                        b["rank_variable"] if rank_variable else None, b["rank"] if rank else None))
            want.append((key, DGX[index], index, cuda_ordinal(cvd, index), source, rank_variable,
                         rank(w) if rank else None))
        self.assertEqual(sorted(got, key=str), sorted(want, key=str),
                         "(rank, uuid, index, cuda_ordinal, source, rank_variable, rank) per worker; workers:\n"
                         + "\n".join(json.dumps(w) for w in workers))
        self.assertEqual(len({g[1] for g in got}), n, "two ranks bound the same GPU")


def sections(text):
    """Output split at lines `== NAME` (a batch script's markers) -> {NAME: text}."""
    out, name = {}, ""
    for line in text.splitlines(keepends=True):
        if line.startswith("== "):
            name = line[3:].strip()
            out[name] = ""
        else:
            out[name] = out.get(name, "") + line
    return out


def run(cmd, e, timeout=60):
    return subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=timeout, stdin=subprocess.DEVNULL)


def mpirun_cmd(n, *cmd, oversubscribe=True):
    """`mpirun -np N [--oversubscribe] CMD`; the loopback settings travel in OMPI_* variables."""
    return ["mpirun", "-np", str(n), *(["--oversubscribe"] if oversubscribe else []), *cmd]


_TORCH_LOGS = []


def torchrun_cmd(n, *cmd):
    """torchrun on one node with N workers, each running CMD (no Python added), its rendezvous on a
    free loopback port. What Debian 12's torch 1.13 under Python 3.11 needs:
    - options spelled with underscores (--nproc_per_node; the dashed forms came with torch 2.x);
    - `--rdzv_backend c10d --rdzv_endpoint 127.0.0.1:PORT` rather than --standalone, which is the
      same thing on the fixed port 29400 that two test runs at once would share;
    - `--redirects 2 --tee 2 --log_dir DIR`: the default "0" (no redirection) is turned into None by
      torch 1.13's Std.from_str on Python 3.11 (iterating an IntFlag no longer yields the 0
      member), and torchrun dies with "'NoneType' object has no attribute 'get'"; redirecting
      stderr to a log and teeing it back leaves stdout alone;
    - `--monitor_interval 0.1`: the agent looks at its workers every 5 s by default, which is how
      long a run of quick workers takes without it."""
    logs = tempfile.mkdtemp(prefix="gpusel-torchrun-")
    _TORCH_LOGS.append(logs)
    return ["torchrun", "--nnodes", "1", "--nproc_per_node", str(n), "--rdzv_backend", "c10d",
            "--rdzv_endpoint", f"127.0.0.1:{free_port()}", "--monitor_interval", "0.1",
            "--redirects", "2", "--tee", "2", "--log_dir", logs, "--no_python", *cmd]


atexit.register(lambda: [shutil.rmtree(d, ignore_errors=True) for d in _TORCH_LOGS])


# ---------------------------------------------------------------------------------------------
# A one-node Slurm on loopback.

SLURM_CONF = """\
ClusterName=gpusel
SlurmctldHost=localhost({ctld_addr})
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={munge_socket}
CredType=cred/munge
{communication}StateSaveLocation={dir}/ctld
SlurmdSpoolDir={dir}/slurmd/%n
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd-%n.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/builtin
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=2
MinJobAge=2
InactiveLimit=0
GresTypes=gpu
{nodes}PartitionName=main Nodes={node_names} Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
"""
# One node: the one slurmd listens on SlurmdPort. Several on loopback: each its own port. Several
# in network namespaces: each its own address, all on SlurmdPort.
NODE_LINE = ("NodeName={name} NodeAddr={addr} NodeHostname={host}{port} CPUs=16 Boards=1 SocketsPerBoard=1 "
             "CoresPerSocket=16 ThreadsPerCore=1 RealMemory=1000 Gres=gpu:{gpus} State=UNKNOWN\n")

_RUNNING = []  # every daemon this process started and has not stopped yet


def _stop(proc, wait=3.0):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc in _RUNNING:
        _RUNNING.remove(proc)


_CLUSTERS = []  # every Slurm started and not stopped: stopped in full at exit


def _stop_all():
    for cluster in reversed(list(_CLUSTERS)):
        cluster.stop()
    for proc in reversed(list(_RUNNING)):
        _stop(proc)


atexit.register(_stop_all)


_LIBC = ctypes.CDLL(None, use_errno=True)


def _die_with_parent():
    """In a daemon's child before exec: SIGKILL when the test process dies, even by SIGKILL (ctest's
    timeout), where atexit cannot run."""
    _LIBC.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG


class Netns:
    """A network namespace per node on one bridge in this (the host's) namespace: node k of
    `nodes` is namespace NAME-NODE (NAME = gpusel-PID), address 10.77.S.k+1/24 behind its own veth
    pair, and the host is 10.77.S.254 on the bridge, where S is the first subnet no interface
    here uses. Names carry this process's pid, so that a run never meets another's; whatever a
    run killed before it could clean up (its pid gone) is removed by the next one.
    start() raises unittest.SkipTest with the reason when namespaces cannot be made."""

    PREFIX = "gpusel-"

    def __init__(self, nodes):
        self.nodes = list(nodes)
        self.name = f"{self.PREFIX}{os.getpid()}"
        self.link = f"gs{os.getpid()}"  # interface names: at most 15 characters
        self.made = []  # ("netns", name) and ("link", name), to remove in reverse order
        self.subnet = None

    def namespace(self, node):
        return f"{self.name}-{node}"

    def address(self, node):
        return f"{self.subnet}.{self.nodes.index(node) + 1}"

    @property
    def host(self):
        return f"{self.subnet}.254"

    def enter(self, node):
        """The command prefix that runs a program in `node`'s namespace (its network only: the
        files, processes and users stay the machine's)."""
        return ["nsenter", f"--net=/run/netns/{self.namespace(node)}", "--"]

    def start(self):
        reason = missing("ip", "nsenter")
        if reason:
            raise unittest.SkipTest(reason)
        self._remove_stale()
        try:
            self._make()
        except BaseException:
            self.stop()
            raise

    def _ip(self, *args):
        r = subprocess.run(["ip", *args], capture_output=True, text=True)
        if r.returncode != 0:
            raise unittest.SkipTest(f"cannot make the nodes' network namespaces (needs root with CAP_NET_ADMIN): "
                                    f"ip {' '.join(args)}: {r.stderr.strip()}")
        return r.stdout

    def _make(self):
        used = {a.split(".")[2] for a in self._ip("-o", "-4", "addr").split() if a.startswith("10.77.")}
        free = [str(n) for n in range(256) if str(n) not in used]
        if not free:
            raise unittest.SkipTest("no free subnet 10.77.S.0/24 for the nodes' network namespaces")
        self.subnet = f"10.77.{free[0]}"
        bridge = self.link + "b"
        self._ip("link", "add", bridge, "type", "bridge")
        self.made.append(("link", bridge))
        self._ip("addr", "add", f"{self.host}/24", "dev", bridge)
        self._ip("link", "set", bridge, "up")
        for k, node in enumerate(self.nodes):
            ns, outside, inside = self.namespace(node), f"{self.link}v{k}", f"{self.link}p{k}"
            self._ip("netns", "add", ns)
            self.made.append(("netns", ns))
            self._ip("link", "add", outside, "type", "veth", "peer", "name", inside)
            self.made.append(("link", outside))  # its peer goes with it
            self._ip("link", "set", inside, "netns", ns)
            self._ip("link", "set", outside, "master", bridge, "up")
            self._ip("-n", ns, "link", "set", inside, "name", "eth0")
            self._ip("-n", ns, "addr", "add", f"{self.address(node)}/24", "dev", "eth0")
            self._ip("-n", ns, "link", "set", "eth0", "up")
            self._ip("-n", ns, "link", "set", "lo", "up")
            self._ip("-n", ns, "route", "add", "default", "via", self.host)

    def stop(self):
        """Removes the namespaces (their veth ends go with them), then the links here; call it once
        no process runs in them."""
        for kind, name in reversed(self.made):
            cmd = ["ip", "netns", "del", name] if kind == "netns" else ["ip", "link", "del", name]
            subprocess.run(cmd, capture_output=True)
        self.made = []

    def _remove_stale(self):
        """Namespaces and links of runs whose process is gone (or that had this pid before)."""
        def stale(pid):
            return pid == str(os.getpid()) or not os.path.exists(f"/proc/{pid}")
        r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
        for line in r.stdout.splitlines():
            ns = line.split()[0] if line.split() else ""
            parts = ns[len(self.PREFIX):].split("-", 1)
            if ns.startswith(self.PREFIX) and len(parts) == 2 and parts[0].isdigit() and stale(parts[0]):
                subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        r = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True)
        for line in r.stdout.splitlines():
            fields = line.split(":")
            name = fields[1].strip().split("@")[0] if len(fields) > 1 else ""
            if name.startswith("gs") and name.endswith("b") and name[2:-1].isdigit() and stale(name[2:-1]):
                subprocess.run(["ip", "link", "del", name], capture_output=True)


class Slurm:
    """munged, slurmctld and slurmd of a one-node cluster named localhost with 8 GPUs whose
    CUDA_VISIBLE_DEVICES numbers are 0..7; everything lives in one temporary folder.
    start() raises unittest.SkipTest with the reason when anything cannot come up."""

    GPUS = 8

    def __init__(self, nodes=("localhost",), gpus=None, netns=False):
        """`nodes`: the node names, each a slurmd of its own on loopback (two or more make a
        cluster of several nodes on this one machine; inside a task SLURMD_NODENAME says which);
        `gpus`: fake GPUs per node, numbered from 0 on each; `netns`: each slurmd in a network
        namespace of its own (Netns), reached at its own address, so that what a node starts runs
        in that node's network (`self.netns.namespace(node)`) while slurmctld and the clients
        stay in this one."""
        self.dir = None
        self.daemons = []
        self.nodes = list(nodes)
        self.gpus = gpus or self.GPUS
        self.netns = Netns(self.nodes) if netns else None

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self, timeout=20.0):
        reason = missing("munged", "slurmctld", "slurmd", "srun", "sbatch", "scontrol", "sinfo", "squeue")
        if reason:
            raise unittest.SkipTest(reason)
        if os.geteuid() != 0:
            raise unittest.SkipTest("a Slurm of one's own needs root (slurmd runs jobs as their user)")
        if self.netns:
            reason = missing("ip", "nsenter")
            if reason:
                raise unittest.SkipTest(reason)
        try:
            import pwd
            munge_user = pwd.getpwnam("munge")
        except KeyError:
            raise unittest.SkipTest("no user 'munge' (the munge package creates it)")
        t0 = time.monotonic()
        self.dir = tempfile.mkdtemp(prefix="gpusel-slurm-")
        _CLUSTERS.append(self)
        os.chmod(self.dir, 0o755)  # munged (as user munge) reaches its folder through this one
        try:
            self._start(munge_user, timeout)
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.monotonic() - t0

    def _start(self, munge_user, timeout):
        d = self.dir
        # Fake GPUs: character devices (slurmd ignores plain files); the number at the end of the
        # name is the number Slurm puts in CUDA_VISIBLE_DEVICES.
        for node in self.nodes:
            os.mkdir(os.path.join(d, "dev-" + node))
            for n in range(self.gpus):
                r = subprocess.run(["mknod", os.path.join(d, "dev-" + node, f"nvidia{n}"), "c", "195", str(n)],
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    raise unittest.SkipTest(f"mknod refused to make fake GPU device files: {r.stderr.strip()}")
        # munge: its own key, socket and logs, run as user munge.
        m = os.path.join(d, "munge")
        os.mkdir(m, 0o700)
        key = os.path.join(m, "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        for path in (m, key):
            os.chown(path, munge_user.pw_uid, munge_user.pw_gid)
        os.makedirs("/run/munge", exist_ok=True)  # Slurm's and munge's default folder; ours are below
        self.munge_socket = os.path.join(m, "munge.socket")
        self._daemon(["munged", "--foreground", "--force",
                      f"--socket={self.munge_socket}", f"--key-file={key}", f"--log-file={m}/munged.log",
                      f"--pid-file={m}/munged.pid", f"--seed-file={m}/munged.seed"], "munged", user=munge_user)
        self._wait(lambda: os.path.exists(self.munge_socket), timeout, "munged", os.path.join(m, "munged.log"))
        # Slurm.
        for sub in ("ctld", "slurmd"):
            os.mkdir(os.path.join(d, sub))
        with open(os.path.join(d, "slurm.conf"), "w") as f:
            f.write(self._conf())
        with open(os.path.join(d, "gres.conf"), "w") as f:
            for n in self.nodes:
                f.write(f"NodeName={n} Name=gpu File={d}/dev-{n}/nvidia[0-{self.gpus - 1}]\n")
        self.conf = os.path.join(d, "slurm.conf")
        self._daemon(["slurmctld", "-D", "-c", "-i", "-f", self.conf], "slurmctld")
        self._wait(lambda: "UP" in self.client(["scontrol", "ping"]).stdout, timeout, "slurmctld",
                   os.path.join(d, "slurmctld.log"))
        for n in self.nodes:
            os.makedirs(os.path.join(d, "slurmd", n), exist_ok=True)
            self._daemon([*(self.netns.enter(n) if self.netns else []), "slurmd", "-D", "-N", n, "-f", self.conf],
                         "slurmd-" + n)
        self._wait(lambda: self.client(["sinfo", "-h", "-N", "-o", "%T"]).stdout.split() == ["idle"] * len(self.nodes),
                   timeout, "slurmd", os.path.join(d, f"slurmd-{self.nodes[0]}.log"))

    def _conf(self):
        """slurm.conf. On loopback, every daemon and srun bound to 127.0.0.1 (NoInAddrAny and
        NoCtldInAddrAny bind them to the address of this machine's name, which is loopback here,
        out of a namespace's reach); in network namespaces, each bound to every address of its
        own namespace, slurmctld reached at the host's address on the bridge."""
        several, ns = len(self.nodes) > 1, self.netns
        if ns:
            ns.start()
            nodes = "".join(NODE_LINE.format(name=n, addr=ns.address(n), host=n, gpus=self.gpus, port="")
                            for n in self.nodes)
        else:
            nodes = "".join(NODE_LINE.format(name=n, addr="127.0.0.1", host="localhost", gpus=self.gpus,
                                             port=f" Port={free_port()}" if several else "") for n in self.nodes)
        return SLURM_CONF.format(dir=self.dir, ctld_port=free_port(), slurmd_port=free_port(),
                                 ctld_addr=ns.host if ns else "127.0.0.1",
                                 communication="" if ns else "CommunicationParameters=NoInAddrAny,NoCtldInAddrAny\n",
                                 munge_socket=self.munge_socket, nodes=nodes, node_names=",".join(self.nodes))

    def stop(self):
        """Cancels every job, stops slurmd, slurmctld and munged, then kills whatever the cluster
        started that outlived them: a job's slurmstepd outlives slurmd, with its tasks."""
        if self.daemons and all(p.poll() is None for p in self.daemons):
            try:
                jobs = self.client(["squeue", "-h", "-o", "%i"]).stdout.split()
                if jobs:
                    self.client(["scancel", *jobs])
                    deadline = time.monotonic() + 5
                    while self.client(["squeue", "-h", "-o", "%i"]).stdout.strip() and time.monotonic() < deadline:
                        time.sleep(0.1)
            except (OSError, subprocess.SubprocessError):
                pass
        for proc in reversed(self.daemons):  # slurmd, slurmctld, then munged
            _stop(proc)
        self.daemons = []
        if self.dir:
            for pid in self._leftovers():
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
        if self.netns:
            self.netns.stop()
        if self in _CLUSTERS:
            _CLUSTERS.remove(self)

    def _leftovers(self):
        """Processes this cluster started: slurmstepd and job tasks carry its SLURM_CONF."""
        mark = f"SLURM_CONF={os.path.join(self.dir, 'slurm.conf')}".encode()
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if mark in f.read().split(b"\0"):
                        found.append(int(entry))
            except OSError:
                pass
        return found

    def _daemon(self, cmd, name, user=None):
        """Starts a daemon in the foreground, so that its pid is the one to stop; `user` (a pwd
        entry) runs it as that user."""
        log = open(os.path.join(self.dir, name + ".out"), "wb")
        ids = dict(user=user.pw_uid, group=user.pw_gid, extra_groups=[]) if user else {}
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=self._client_env(), start_new_session=True, preexec_fn=_die_with_parent,
                                **ids)
        log.close()
        proc.name = name
        self.daemons.append(proc)
        _RUNNING.append(proc)

    def _wait(self, ready, timeout, name, log):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for proc in self.daemons:
                if proc.poll() is not None:
                    raise unittest.SkipTest(f"{proc.name} exited with status {proc.returncode}: {self._tail(proc.name, log)}")
            try:
                if ready():
                    return
            except subprocess.TimeoutExpired:
                pass
            time.sleep(0.1)
        raise unittest.SkipTest(f"{name} did not come up within {timeout:.0f} s: {self._tail(name, log)}")

    def _tail(self, name, log):
        text = ""
        for path in (log, os.path.join(self.dir, name + ".out")):
            try:
                with open(path, errors="replace") as f:
                    text += f.read()[-1500:]
            except OSError:
                pass
        return text.strip() or "(no log)"

    # -- clients -----------------------------------------------------------------------------
    def _client_env(self, base=None):
        e = dict(base if base is not None else _scrubbed(os.environ))
        if self.dir:
            e["SLURM_CONF"] = os.path.join(self.dir, "slurm.conf")
        return e

    def env(self, **extra):
        """A rank's environment (launchers.env) that also reaches this cluster."""
        return self._client_env(env(**extra))

    def client(self, cmd, timeout=10):
        return run(cmd, self._client_env(), timeout)

    def srun(self, args, e=None, timeout=60):
        """srun ARGS (a job of its own, or a step of the job named by --jobid)."""
        return run(["srun", *args], e or self.env(), timeout)

    def submit(self, script, args=(), e=None):
        """sbatch a script; returns (job id, output file). The script's output goes to a file in the
        cluster's folder."""
        path = os.path.join(self.dir, f"job-{time.monotonic_ns()}.sh")
        with open(path, "w") as f:
            f.write(script)
        out = path + ".out"
        r = run(["sbatch", "--parsable", f"--output={out}", *args, path], e or self.env(), 30)
        if r.returncode != 0:
            raise AssertionError(f"sbatch {' '.join(args)} exited {r.returncode}: {r.stderr}")
        return r.stdout.strip().split(";")[0], out

    def state(self, job):
        """The job's state (PENDING, RUNNING, COMPLETED, FAILED...), or None once slurmctld forgot it."""
        r = self.client(["squeue", "-h", "-t", "all", "-j", job, "-o", "%T"])
        return r.stdout.strip() or None

    def wait(self, job, timeout=60):
        """Polls every 0.1 s (sbatch --wait polls every 10 s) until the job has ended; its state."""
        deadline = time.monotonic() + timeout
        state = None
        while time.monotonic() < deadline:
            state = self.state(job)
            if state not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED"):
                return state
            time.sleep(0.1)
        self.client(["scancel", job])
        raise AssertionError(f"job {job} still {state} after {timeout} s")

    def batch(self, script, args=(), e=None, timeout=60):
        """sbatch a script, wait for it; (final state, its output)."""
        job, out = self.submit(script, args, e)
        state = self.wait(job, timeout)
        with open(out, errors="replace") as f:
            return state, f.read()

    def wait_running(self, job, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.state(job)
            if state == "RUNNING":
                return
            if state not in ("PENDING", "CONFIGURING"):
                raise AssertionError(f"job {job} is {state}, not running")
            time.sleep(0.1)
        raise AssertionError(f"job {job} did not start within {timeout} s")


# ---------------------------------------------------------------------------------------------
# The worker each rank runs.

def _worker(argv):
    unset, api, cmd = [], False, []
    while argv:
        arg = argv.pop(0)
        if arg == "--unset":
            unset = argv.pop(0).split(",")
        elif arg == "--api":
            api = True
        elif arg == "--":
            cmd = argv
            break
        else:
            raise SystemExit(f"launchers.py worker: unknown argument {arg!r}")
    for key in unset:
        os.environ.pop(key, None)
    report = {"env": {k: os.environ[k] for k in REPORTED if k in os.environ}, "pid": os.getpid()}
    if api:
        # The package over libgpusel's C ABI, as a training script uses it. This interpreter has no
        # torch, so bind_assigned_gpu returns the CUDA ordinal.
        try:
            import gpusel
            ordinal = gpusel.bind_assigned_gpu()
            report["api"] = {"ordinal": ordinal, "uuid": gpusel.gpu_identity(ordinal)["uuid"],
                             "source": list(gpusel.assignment_source() or ()),
                             "contexts": sim_contexts(os.getpid())}
            report["context"] = _context_gpus()
            report["rc"] = 0
        except Exception as exc:  # reported, and the rank fails
            report["rc"] = 1
            report["stderr"] = f"{type(exc).__name__}: {exc}"
    else:
        r = subprocess.run(cmd or ["gpusel", "bind", "--json"], capture_output=True, text=True)
        report["rc"] = r.returncode
        report["stderr"] = r.stderr
        try:
            report["bind"] = json.loads(r.stdout)
        except ValueError:
            report["stdout"] = r.stdout
    sys.stdout.write("WORKER " + json.dumps(report) + "\n")
    sys.stdout.flush()
    return report["rc"]


def _context_gpus():
    """The UUIDs of the GPUs whose NVML process list holds this process (the simulator books a
    context there when it is made): where this worker really runs."""
    r = subprocess.run(["gpusel", "list", "--json"], capture_output=True, text=True)
    try:
        gpus = json.loads(r.stdout)["gpus"]
    except ValueError:
        return None
    return [g["uuid"] for g in gpus if any(p.get("pid") == os.getpid() for p in g.get("processes") or [])]


def sim_contexts(pid):
    """The GPUs on which the simulator records a CUDA context of process `pid` (its usage folder,
    GPUSEL_SIM_STATE_DIR, holds per GPU an entry named by each pid with a context there, kept while
    that process lives), sorted; None without such a folder."""
    state = os.environ.get("GPUSEL_SIM_STATE_DIR")
    if not state or not os.path.isdir(state):
        return None
    return sorted(d for d in os.listdir(state) if os.path.exists(os.path.join(state, d, str(pid))))


def _terminated(signum, frame):
    signal.signal(signum, signal.SIG_IGN)
    _stop_all()
    os._exit(128 + signum)


def _run_module(name):
    sys.path.insert(0, HERE)
    # A SIGTERM (ctest, a CI runner) stops the cluster and exits at once (SystemExit raised in a
    # test would be caught by unittest as that test's error, and the module would carry on).
    signal.signal(signal.SIGTERM, _terminated)
    t0 = time.monotonic()
    suite = unittest.defaultTestLoader.loadTestsFromName(name)
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    print(f"{name}: {time.monotonic() - t0:.1f} s", file=sys.stderr)
    if result.failures or result.errors or result.unexpectedSuccesses:
        return 1
    passed = result.testsRun - len(result.skipped) - len(result.expectedFailures)
    if result.skipped and passed <= 0:
        return SKIP
    return 0 if result.testsRun else 1


def main(argv):
    if argv[:1] == ["worker"]:
        return _worker(argv[1:])
    if len(argv) == 2 and argv[0] == "run":
        # Through the module the tests import (not this __main__ copy), so that the cluster they
        # start is the one a SIGTERM stops.
        import launchers
        return launchers._run_module(argv[1])
    print("usage: launchers.py worker [--api] [--unset VAR,...] [-- CMD...] | launchers.py run MODULE",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
