"""Leases on a machine shared by several ordinary users, at the default paths.

Run as root (CI is): the module re-runs itself in a private mount namespace (`unshare -m`) with a
tmpfs on /var/lib (so the shared store /var/lib/gpusel/leases is this test's own) and, where the
build is not under it, on /tmp; three ordinary users exist only inside the namespace (passwd, group
and shadow bind-mounted from copies there), and gpusel runs as them through `runuser`. The machine
is the simulated dgx-h100. Exit 77 (skipped) when not root or when a namespace cannot be made.
"""

import fcntl
import json
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import support
from support import BIN, Case, SIM_ROOT, base_env, uuids

DGX = uuids("dgx-h100")
STORE = "/var/lib/gpusel/leases"
USERS = {"alice": 4101, "bob": 4102, "carol": 4103}
INSIDE = "GPUSEL_TEST_IN_NAMESPACE"
HOMES = "/var/lib/gpusel-test-homes"
# Each user's XDG_RUNTIME_DIR (as a login gives one), so that the simulator's usage folders are
# made on this test's /var/lib, never in the machine's /tmp (which the test cannot hide when the
# build itself is under /tmp).
RUNTIME = "/var/lib/gpusel-test-run"


def rounds(n):
    """How many times a race is tried: n in the plain build, a quarter (at least 2) in the
    sanitizer builds, whose every process takes about 0.2 s to start against 0.01 s; the plain
    build's run is the one that looks for the rare interleaving."""
    return max(2, n // 4) if support.INSTRUMENTED else n


def set_up_namespace():
    """Inside the namespace: private /var/lib (and /tmp), and the three users."""
    here = os.path.realpath(os.path.dirname(__file__))
    build = os.path.realpath(BIN)
    for path in (here, build, os.path.realpath(SIM_ROOT)):
        if path.startswith("/var/lib/"):
            raise unittest.SkipTest(f"{path} is under /var/lib, which the test hides")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", "/var/lib"], check=True)
    if not any(p.startswith("/tmp/") for p in (here, build, os.path.realpath(SIM_ROOT))):
        # This process's private folder (support) was made in the machine's /tmp, which the tmpfs
        # hides: removed there first, made again on the tmpfs (where its exit removes it).
        private = support.private_root()
        shutil.rmtree(private, ignore_errors=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=1777", "tmpfs", "/tmp"], check=True)
        os.makedirs(private, mode=0o700)
    reachable_build()
    etc = "/var/lib/gpusel-test-etc"
    os.makedirs(etc)
    for name, path in support.account_files(etc, USERS, HOMES).items():
        subprocess.run(["mount", "--bind", path, f"/etc/{name}"], check=True)
    os.makedirs(HOMES)
    os.chmod(HOMES, 0o755)
    for user, uid in USERS.items():
        home = f"{HOMES}/{user}"
        os.makedirs(home)
        os.chown(home, uid, uid)
        os.chmod(home, 0o700)
    for user, uid in [*USERS.items(), ("root", 0)]:
        run = f"{RUNTIME}/{user}"
        os.makedirs(run)
        os.chown(run, uid, uid)
        os.chmod(run, 0o700)


def reachable_build():
    """Makes the build reachable by the test's users. A clone in a folder they cannot enter (/root,
    or a home of mode 0700) is bind-mounted, from the folder below the one that shuts them out,
    under this namespace's /var/lib, and BIN, SIM_ROOT (here and in support) and WORKER_USER point
    there."""
    global BIN, SIM_ROOT, WORKER_USER
    views = {}

    def reachable(path):
        parts = path.split("/")[1:]
        for depth in range(1, len(parts)):
            folder = "/" + "/".join(parts[:depth])
            if not os.stat(folder).st_mode & stat.S_IXOTH:
                top = folder + "/" + parts[depth]
                if top not in views:
                    views[top] = f"/var/lib/gpusel-test-view/{len(views)}"
                    os.makedirs(views[top])
                    subprocess.run(["mount", "--bind", top, views[top]], check=True)
                return views[top] + path[len(top):]
        return path

    BIN = reachable(os.path.realpath(BIN))
    SIM_ROOT = reachable(os.path.realpath(SIM_ROOT))
    WORKER_USER = reachable(WORKER_USER)
    support.BIN, support.SIM_ROOT = BIN, SIM_ROOT
    os.environ.update(GPUSEL_BIN=BIN, GPUSEL_SIM_ROOT=SIM_ROOT)


def user_env(user, **extra):
    """What a user's login would give, plus the test's build locations; no GPUSEL_LEASE_DIR."""
    env = {k: v for k, v in base_env().items() if k.startswith(("LD_", "ASAN", "UBSAN", "TSAN", "LSAN"))}
    env.update(HOME=f"{HOMES}/{user}", USER=user, LOGNAME=user, PATH="/usr/local/bin:/usr/bin:/bin",
               LANG="C.UTF-8", GPUSEL_SIM_DEVICE_HANDLES="distinct", XDG_RUNTIME_DIR=f"{RUNTIME}/{user}")
    env.update({k: v for k, v in extra.items() if v is not None})
    return env


def as_user(user, args, **extra):
    """The command line that runs `gpusel --sim dgx-h100 ARGS` as `user`."""
    env = user_env(user, **extra)
    return ["runuser", "-u", user, "--", "env", "-i", *[f"{k}={v}" for k, v in env.items()],
            os.path.realpath(BIN), "--sim", "dgx-h100", *args]


def run_as(user, *args, timeout=60, **extra):
    return subprocess.run(as_user(user, args, **extra), capture_output=True, text=True, timeout=timeout)


def start_as(user, *args, **extra):
    """Starts gpusel as `user` (setpriv execs it in place, so the pid is gpusel's), in a process
    group of its own within this session, as a shell's job would be."""
    env = user_env(user, **extra)
    cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "env", "-i",
           *[f"{k}={v}" for k, v in env.items()], os.path.realpath(BIN), "--sim", "dgx-h100", *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, process_group=0)


def sh_as(user, script):
    """A shell command as `user` (for file operations an attacker would try)."""
    return subprocess.run(["runuser", "-u", user, "--", "sh", "-c", script], capture_output=True, text=True)


def setup_store():
    r = subprocess.run([BIN, "--sim", "dgx-h100", "setup"], capture_output=True, text=True,
                       env=base_env(GPUSEL_LEASE_DIR=None))
    assert r.returncode == 0, r.stderr
    return r


def list_json(user="alice"):
    r = run_as(user, "list", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def read_file(path):
    try:
        with open(path) as f:
            return f.read()
    except (FileNotFoundError, ProcessLookupError):  # a /proc file of a process reaped meanwhile
        return None


def proc_state(pid):
    """A process's state letter (R, S, T, Z, ...), None when it is gone."""
    text = read_file(f"/proc/{pid}/stat")
    return text.rsplit(")", 1)[1].split()[0] if text else None


def wait_for(predicate, what, seconds=20):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


def stop(proc):
    """Ends a job started by start_as as its user would: SIGTERM, which gpusel passes to every
    worker's process group, and SIGKILL only if it has not ended 30 s later. (SIGKILL alone ends
    gpusel but not what its workers started, which keeps the job's pipes open: a worker
    `sh -c "sleep 120"` held the test for two minutes.)"""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()


def leased_by(gpu, user=None):
    lease = list_json()["gpus"][gpu]["lease"]
    return lease is not None and (user is None or lease.get("user") == user)


class SharedStoreCase(Case):
    def setUp(self):
        subprocess.run(["rm", "-rf", "/var/lib/gpusel"], check=True)
        for user in USERS:
            subprocess.run(["rm", "-rf", f"{HOMES}/{user}/.local"], check=True)
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            stop(p)

    def hold(self, user, gpus, *extra):
        """`user` runs a job holding `gpus` until stopped; returns once the lease is visible."""
        p = start_as(user, "run", "--quiet", "--gpu", gpus, *extra, "--", "sleep", "120")
        self.procs.append(p)
        first = int(gpus.split(",")[0])
        wait_for(lambda: p.poll() is not None or leased_by(first), f"{user}'s lease on {gpus}")
        self.assertIsNone(p.poll(), p.stderr.read() if p.poll() is not None else "")
        return p


class WithoutSetupTest(SharedStoreCase):
    def test_each_user_works_alone_and_is_told_so(self):
        r = run_as("alice", "run", "--gpu", "0", "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("no shared lease store is set up", r.stderr)
        self.assertIn("leases bind only the jobs of user alice", r.stderr)
        self.assertIn("sudo gpusel setup", r.stderr)
        # Kept in alice's own store, which is alice's alone.
        own = f"{HOMES}/alice/.local/state/gpusel/leases"
        st = os.stat(own)
        self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (USERS["alice"], 0o700))
        # Bob is not blocked by anything alice made.
        self.hold("alice", "2")
        r = run_as("bob", "run", "--gpu", "free:8", "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = run_as("bob", "doctor", "--json")
        ids = {f["id"]: f for f in json.loads(r.stdout)["findings"]}
        self.assertIn("leases-per-user", ids)
        self.assertEqual(ids["leases-per-user"]["remedy"], "sudo gpusel setup")

    def test_a_squatted_default_path_denies_nobody(self):
        # Nobody but root can make /var/lib/gpusel; a user's own store lives in their home.
        r = sh_as("bob", "mkdir -p /var/lib/gpusel/leases")
        self.assertNotEqual(r.returncode, 0)
        r = run_as("alice", "run", "--gpu", "free:2", "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)


class SetupTest(SharedStoreCase):
    def test_setup_needs_root_and_makes_a_root_owned_store(self):
        r = run_as("alice", "setup")
        self.assertFailsWith(r, 1, "only root", "sudo gpusel setup")
        self.assertFalse(os.path.exists(STORE))
        out = setup_store().stdout
        self.assertIn("ready for 8 GPUs", out)
        for path, mode in (("/var/lib/gpusel", 0o755), (STORE, 0o755), (STORE + "/queue", 0o1777)):
            st = os.lstat(path)
            self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (0, mode), path)
        for u in DGX:
            st = os.lstat(f"{STORE}/{u}.lock")
            self.assertTrue(stat.S_ISREG(st.st_mode))
            self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode), st.st_nlink), (0, 0o444, 1))
        # Idempotent.
        self.assertIn("nothing needed changing", setup_store().stdout)


class SharedLeaseTest(SharedStoreCase):
    def setUp(self):
        super().setUp()
        setup_store()

    def test_users_share_the_machine(self):
        jobs = [start_as(u, "run", "--gpu", "free:2", "--", "sleep", "2") for u in USERS]
        self.procs += jobs
        wait_for(lambda: sum(g["lease"] is not None for g in list_json()["gpus"]) == 6 or
                 any(j.poll() not in (None, 0) for j in jobs), "three jobs' leases")
        holders = {g["lease"]["user"] for g in list_json()["gpus"] if g["lease"]}
        self.assertEqual(holders, set(USERS))
        for j in jobs:
            out, err = j.communicate(timeout=60)
            self.assertEqual(j.returncode, 0, err)
            self.assertNotIn("bind only", err)

    def test_a_held_lease_cannot_be_removed_renamed_or_replaced(self):
        self.hold("alice", "3")
        lease = f"{STORE}/{DGX[3]}.lock"
        for attack in (f"rm -f {lease}", f"mv {lease} {STORE}/x", f"ln -s /tmp/x {STORE}/{DGX[4]}.lock",
                       f"ln {lease} {STORE}/extra.lock", f"touch {STORE}/new", f"chmod 000 {lease}",
                       f"mv {STORE} /var/lib/gpusel/old"):
            r = sh_as("bob", attack)
            self.assertNotEqual(r.returncode, 0, attack)
        self.assertTrue(os.path.exists(lease))
        r = run_as("bob", "run", "--gpu", "3", "--", "true")
        self.assertFailsWith(r, 1, f"GPU 3 ({DGX[3]}) is leased by pid", "user alice", "sleep 120")
        r = run_as("bob", "run", "--gpu", "free:8", "--", "true")
        self.assertFailsWith(r, 1, "7 of the 8 GPUs here are free", "user alice")

    def test_files_gpusel_did_not_make_block_only_their_gpu(self):
        # Only root can put anything in the store; whatever it is, it costs only that GPU.
        bad = {1: "mode000", 2: "fifo", 4: "folder", 5: "symlink", 6: "dangling", 7: "hardlink"}
        for gpu, kind in bad.items():
            path = f"{STORE}/{DGX[gpu]}.lock"
            os.unlink(path)
            if kind == "mode000":
                open(path, "w").close()
                os.chmod(path, 0)
            elif kind == "fifo":
                os.mkfifo(path, 0o444)
            elif kind == "folder":
                os.mkdir(path)
            elif kind == "symlink":
                os.symlink(f"{STORE}/{DGX[0]}.lock", path)
            elif kind == "dangling":
                os.symlink(f"{HOMES}/alice/victim", path)
            else:
                outside = "/var/lib/gpusel-test-outside"
                open(outside, "w").close()
                os.chmod(outside, 0o444)
                os.link(outside, path)
        r = run_as("alice", "run", "--gpu", "free:2", "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("was skipped", r.stderr)
        r = run_as("alice", "resolve", "--gpu", "free:2", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(json.loads(r.stdout)["gpus"]), sorted([DGX[0], DGX[3]]))
        r = run_as("alice", "run", "--gpu", "free:3", "--", "true")
        self.assertFailsWith(r, 1, "2 of the 8 GPUs here are free", "sudo gpusel setup")
        for gpu, kind in bad.items():
            r = run_as("bob", "run", "--gpu", str(gpu), "--", "true")
            self.assertFailsWith(r, 1, f"GPU {gpu}", "cannot be taken", "sudo gpusel setup")
        self.assertFalse(os.path.exists(f"{HOMES}/alice/victim"))
        listed = list_json("bob")["gpus"]
        for gpu in bad:
            self.assertIsNotNone(listed[gpu]["lease_problem"], gpu)
        self.assertIsNone(listed[0]["lease_problem"])
        r = run_as("bob", "doctor", "--json")
        problems = [f for f in json.loads(r.stdout)["findings"] if f["id"] == "lease-unusable"]
        self.assertEqual(sorted(g for f in problems for g in f["gpus"]), sorted(bad))
        self.assertTrue(all(f["remedy"] == "sudo gpusel setup" for f in problems))
        # setup repairs every one of them.
        out = setup_store().stdout
        self.assertIn("removed", out)
        for gpu in bad:
            st = os.lstat(f"{STORE}/{DGX[gpu]}.lock")
            self.assertEqual((stat.S_ISREG(st.st_mode), st.st_nlink, stat.S_IMODE(st.st_mode)), (True, 1, 0o444))
        r = run_as("bob", "run", "--gpu", "free:8", "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_junk_in_the_queue_never_blocks_a_waiting_job(self):
        queue = f"{STORE}/queue"
        sh_as("bob", f"mkfifo {queue}/fifo; mkdir {queue}/dir; ln -s /etc/passwd {queue}/link; "
                     f"printf 'gpusel-ticket 1\\nneed 1\\nwhat free:1\\n' > {queue}/garbage; "
                     f"echo x > {queue}/closed; chmod 000 {queue}/closed")
        # Bob cannot remove alice's ticket (sticky folder): shown by his attempt on a file of alice's.
        sh_as("alice", f"touch {queue}/alices")
        self.assertNotEqual(sh_as("bob", f"rm -f {queue}/alices").returncode, 0)
        holder = self.hold("carol", "5")
        waiter = start_as("alice", "run", "--gpu", "5", "--wait", "30", "--", "true")
        self.procs.append(waiter)
        wait_for(lambda: list_json()["waiting"], "alice's place in the queue")
        stop(holder)
        out, err = waiter.communicate(timeout=30)
        self.assertEqual(waiter.returncode, 0, err)

    def test_waiting_is_first_come_first_served_and_a_large_request_is_not_starved(self):
        log = "/var/lib/gpusel-test-log"
        with open(log, "w"):
            pass
        os.chmod(log, 0o666)
        a = self.hold("carol", "0,1,2,3,4,5,6")
        b = self.hold("carol", "7")
        note = f"echo $GPUSEL_GPU {{}} $(date +%s.%N) >> {log}"
        big = start_as("alice", "run", "--quiet", "--gpu", "free:8", "--wait", "--", "sh", "-c",
                       note.format("big") + "; sleep 0.5")
        self.procs.append(big)
        wait_for(lambda: len(list_json()["waiting"]) == 1, "the large request to queue")
        # GPU 7 comes free, but the earlier request could use it: a newcomer does not jump it.
        stop(b)
        r = run_as("bob", "run", "--gpu", "7", "--", "true")
        self.assertFailsWith(r, 1, "1 earlier job waits for these GPUs", "user alice", "free:8", "--wait")
        small = [start_as("bob", "run", "--quiet", "--gpu", "free:1", "--wait", "--", "sh", "-c",
                          note.format("small")) for _ in range(3)]
        self.procs += small
        wait_for(lambda: len(list_json()["waiting"]) == 4, "the small requests to queue")
        waiting = list_json()["waiting"]
        self.assertEqual([w["request"] for w in waiting], ["free:8", "free:1", "free:1", "free:1"])
        stop(a)
        for p in [big, *small]:
            out, err = p.communicate(timeout=60)
            self.assertEqual(p.returncode, 0, err)
        with open(log) as f:
            rows = [line.split() for line in f]
        starts = {}
        for gpu, who, t in rows:
            starts.setdefault(who, []).append(float(t))
        self.assertEqual(len(starts["big"]), 8)
        self.assertEqual(len(starts["small"]), 3)
        self.assertLess(max(starts["big"]), min(starts["small"]))

    def test_a_request_for_other_gpus_is_not_held_up_by_a_waiter(self):
        self.hold("carol", "3")
        waiter = start_as("alice", "run", "--gpu", "3", "--wait", "--", "true")
        self.procs.append(waiter)
        wait_for(lambda: list_json()["waiting"], "alice's place in the queue")
        r = run_as("bob", "run", "--gpu", "5", "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_simultaneous_requests_are_never_refused_while_enough_gpus_are_free(self):
        for round_ in range(rounds(20)):
            jobs = [start_as(list(USERS)[k % 3], "run", "--quiet", "--gpu", "free:1", "--", "sleep", "0.3")
                    for k in range(8)]
            results = [(j.communicate(timeout=60), j.returncode) for j in jobs]
            refused = [err for (out, err), rc in results if rc != 0]
            self.assertEqual(refused, [], f"round {round_}")

    def test_waiting_for_a_very_long_time_does_not_give_up_at_once(self):
        self.hold("carol", "2")
        waiter = start_as("alice", "run", "--gpu", "2", "--wait", "1e10", "--", "true")
        self.procs.append(waiter)
        time.sleep(1.5)
        self.assertIsNone(waiter.poll(), waiter.stderr.read() if waiter.poll() is not None else "")
        r = run_as("alice", "run", "--gpu", "2", "--wait", "forever-ish", "--", "true")
        self.assertFailsWith(r, 2, "is not a duration", "forever-ish")

    def test_control_bytes_in_another_users_command_are_escaped(self):
        p = start_as("carol", "run", "--quiet", "--gpu", "6", "--", "sh", "-c", "sleep 120",
                     "\x1b[31mred\x1b[0m\u009b2J")
        self.procs.append(p)
        wait_for(lambda: leased_by(6), "carol's lease")
        r = run_as("bob", "run", "--gpu", "6", "--", "true")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertNotIn("\x1b", r.stderr)
        self.assertNotIn("\u009b", r.stderr)
        self.assertIn("\\x1b[31mred", r.stderr)
        self.assertIn("\\xc2\\x9b2J", r.stderr)
        out = run_as("bob", "list").stdout
        self.assertNotIn("\x1b", out)


class JobLifetimeTest(SharedStoreCase):
    def setUp(self):
        super().setUp()
        setup_store()

    def test_leases_outlive_a_grandchild_that_ignores_sigint(self):
        # The worker starts a process that leaves the worker's session and ignores SIGINT (and
        # SIGTERM): it lives on after Ctrl-C until gpusel kills it after the grace period.
        marker = "/var/lib/gpusel-test-grandchild"
        script = f"setsid sh -c 'trap \"\" INT TERM; echo $$ > {marker}; exec sleep 120' & sleep 120"
        with open(marker, "w"):
            pass
        os.chmod(marker, 0o666)
        job = start_as("alice", "run", "--quiet", "--grace", "2", "--gpu", "4", "--", "sh", "-c", script)
        self.procs.append(job)
        wait_for(lambda: (read_file(marker) or "").strip() != "", "the grandchild")
        grandchild = int(read_file(marker))
        alive = lambda: proc_state(grandchild) not in (None, "Z")
        os.kill(job.pid, signal.SIGINT)
        checked = 0
        while job.poll() is None:
            # Whenever the grandchild lives on both sides of a look at the lease, it was held.
            if alive():
                held = leased_by(4)
                if alive():
                    self.assertTrue(held, "the lease went before the grandchild")
                    checked += 1
            time.sleep(0.05)
        out, err = job.communicate(timeout=30)
        self.assertGreater(checked, 0)
        self.assertEqual(job.returncode, 130, err)
        self.assertFalse(alive(), "the grandchild outlived gpusel")
        self.assertIn("left running", err)
        self.assertIn("stopped with the job", err)
        self.assertFalse(leased_by(4))

    def test_a_daemon_left_by_a_successful_worker_is_stopped(self):
        marker = "/var/lib/gpusel-test-daemon"
        with open(marker, "w"):
            pass
        os.chmod(marker, 0o666)
        script = f"setsid sh -c 'echo $$ > {marker}; exec sleep 120' & sleep 0.3"
        r = run_as("alice", "run", "--gpu", "1", "--grace", "1", "--", "sh", "-c", script)
        self.assertEqual(r.returncode, 0, r.stderr)
        pid = int(read_file(marker))
        self.assertIsNone(proc_state(pid))
        self.assertIn("1 process the workers left running", r.stderr)

    def test_ctrl_z_stops_every_worker_and_fg_resumes_them(self):
        job = start_as("alice", "run", "--quiet", "--gpu", "0,1", "--", "sleep", "120")
        self.procs.append(job)
        wait_for(lambda: leased_by(0) and leased_by(1), "the job")

        def states():
            pids = subprocess.run(["pgrep", "-P", str(job.pid), "-x", "sleep"], capture_output=True,
                                  text=True, timeout=30).stdout.split()
            return [proc_state(p) for p in pids], [proc_state(job.pid)]

        wait_for(lambda: len(states()[0]) == 2, "two workers")
        os.kill(job.pid, signal.SIGTSTP)
        wait_for(lambda: states() == (["T", "T"], ["T"]), "every worker and gpusel to stop")
        os.kill(job.pid, signal.SIGCONT)
        wait_for(lambda: all(s in "SR" for s in states()[0] + states()[1]), "everything to run again")
        self.assertTrue(leased_by(0))


WORKER_USER = os.path.realpath(os.environ.get("GPUSEL_WORKER_USER", "build/bin/worker_user"))


def marker_file(name):
    """A file every test user may write a pid into."""
    path = f"/var/lib/gpusel-test-{name}"
    with open(path, "w"):
        pass
    os.chmod(path, 0o666)
    return path


def locked(path):
    """Whether anyone holds a lock on the file at `path` (an exclusive probe is refused)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def alive(pid):
    return proc_state(pid) not in (None, "Z")


class KernelHoldsTheJobTest(SharedStoreCase):
    """What a job holds lasts as long as any of its processes, however gpusel ends (issue 29)."""

    def setUp(self):
        super().setUp()
        setup_store()

    def start_loop_job(self, user, gpu, *extra):
        """`user`'s run whose worker leaves a loop behind (its output not on the job's pipes, which
        the test reads to the end); returns (job, the loop's pid)."""
        marker = marker_file(f"loop-{gpu}")
        script = f'sh -c "echo \\$\\$ > {marker}; trap \\"\\" TERM INT; while :; do sleep 0.2; done" >/dev/null 2>&1 & wait'
        job = start_as(user, "run", "--quiet", *extra, "--gpu", str(gpu), "--", "bash", "-c", script)
        self.procs.append(job)
        wait_for(lambda: (read_file(marker) or "").strip() != "", "the loop")
        loop = int(read_file(marker))
        self.addCleanup(lambda: alive(loop) and os.kill(loop, signal.SIGKILL))
        return job, loop

    def assert_held_until_the_loop_ends(self, gpu, loop):
        self.assertTrue(alive(loop), "the loop died with gpusel")
        r = run_as("bob", "run", "--gpu", str(gpu), "--", "true")
        self.assertEqual(r.returncode, 1, "bob got the GPU while alice's loop still ran: " + r.stderr)
        self.assertIn("leased", r.stderr)
        # The holder named is a live process of alice's job, not the SIGKILLed gpusel whose pid
        # the kernel's lock table still shows.
        lease = list_json("alice")["gpus"][gpu]["lease"]
        self.assertEqual(lease["user"], "alice", lease)
        self.assertTrue(alive(lease["pid"]), lease)
        os.kill(loop, signal.SIGKILL)
        # The loop's last `sleep 0.2` inherited the lease too: it goes with that sleep.
        wait_for(lambda: not leased_by(gpu), "the lease to go with the loop's last process")
        r = run_as("bob", "run", "--gpu", str(gpu), "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_a_sigkilled_run_keeps_its_gpu_while_its_processes_run(self):
        job, loop = self.start_loop_job("alice", 5)
        os.kill(job.pid, signal.SIGKILL)
        job.communicate(timeout=30)
        self.assert_held_until_the_loop_ends(5, loop)

    def test_a_run_sigkilled_during_its_grace_stop_keeps_its_gpu(self):
        job, loop = self.start_loop_job("alice", 6, "--grace", "30")
        os.kill(job.pid, signal.SIGINT)  # the loop ignores SIGTERM: gpusel waits out the grace
        time.sleep(0.5)
        self.assertIsNone(job.poll())
        os.kill(job.pid, signal.SIGKILL)
        job.communicate(timeout=30)
        self.assert_held_until_the_loop_ends(6, loop)

    def test_the_holder_named_is_a_live_process_of_the_job(self):
        job, loop = self.start_loop_job("alice", 2)
        os.kill(job.pid, signal.SIGKILL)
        job.communicate(timeout=30)
        r = subprocess.run([BIN, "--sim", "dgx-h100", "list", "--json"], capture_output=True, text=True,
                           env=base_env(GPUSEL_LEASE_DIR=None))
        self.assertEqual(r.returncode, 0, r.stderr)
        lease = json.loads(r.stdout)["gpus"][2]["lease"]
        self.assertNotEqual(lease["pid"], job.pid, "names the SIGKILLed gpusel")
        self.assertTrue(alive(lease["pid"]), lease)
        self.assertEqual(lease["user"], "alice")

    def test_another_user_is_told_whose_job_holds_the_gpu(self):
        # bob cannot read alice's descriptors: the record alice's gpusel left in the shared store
        # (its workers' process groups) leads him to the live process of her job, and her name.
        job, loop = self.start_loop_job("alice", 3)
        os.kill(job.pid, signal.SIGKILL)
        job.communicate(timeout=30)
        r = run_as("bob", "run", "--gpu", "3", "--", "true")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f"pid {loop} (user alice", r.stderr)
        self.assertNotIn(f"pid {job.pid}", r.stderr, "names the SIGKILLed gpusel")
        lease = list_json("bob")["gpus"][3]["lease"]
        self.assertEqual((lease["pid"], lease["user"]), (loop, "alice"), lease)
        # A record nobody holds any more is no one's word: once the loop has ended, the GPU is
        # free, and bob's own run leaves no record behind.
        os.kill(loop, signal.SIGKILL)
        wait_for(lambda: not leased_by(3), "the lease to go with the loop's last process")
        r = run_as("bob", "run", "--gpu", "3", "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        left = [n for n in os.listdir("/var/lib/gpusel/leases/queue") if n.startswith(".job-")]
        owners = {pwd.getpwuid(os.stat(f"/var/lib/gpusel/leases/queue/{n}").st_uid).pw_name for n in left}
        self.assertNotIn("bob", owners, left)

    def test_a_record_someone_else_wrote_or_locked_names_no_one(self):
        # carol writes a record under alice's gpusel's pid with her own name (its owner) and locks
        # it from her own process, naming a process group of hers; she also takes a shared lock
        # on alice's record, so that the lock table may list her first for it. The lock table
        # never lists alice's SIGKILLed gpusel for carol's file: bob is still told alice's loop.
        job, loop = self.start_loop_job("alice", 4)
        os.kill(job.pid, signal.SIGKILL)
        job.communicate(timeout=30)
        queue = "/var/lib/gpusel/leases/queue"
        real = f"{queue}/.job-{pwd.getpwnam('alice').pw_uid}-{job.pid}"
        forged = f"{queue}/.job-{pwd.getpwnam('carol').pw_uid}-{job.pid}"
        self.assertTrue(locked(real), os.listdir(queue))
        script = (f"exec 8<{real}; flock -s 8; exec 9>{forged}; "
                  "printf 'gpusel job record 1\\ngroups %s\\ncommand forged\\n' $$ >&9; "
                  "flock -s 9 && exec sleep 120")
        forger = subprocess.Popen(["setpriv", "--reuid=carol", "--regid=carol", "--init-groups",
                                   "sh", "-c", script], start_new_session=True)
        self.addCleanup(lambda: (os.killpg(forger.pid, signal.SIGKILL), forger.wait()))
        wait_for(lambda: "forged" in (read_file(forged) or "") and locked(forged), "carol's record")
        r = run_as("bob", "run", "--gpu", "4", "--", "true")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f"pid {loop} (user alice", r.stderr)
        self.assertNotIn("carol", r.stderr)
        self.assertNotIn("forged", r.stderr)

    def test_a_job_known_only_by_its_record_keeps_its_gpu(self):
        # alice's loop leaves its worker's process group (setsid) before her gpusel is SIGKILLed:
        # no process of the record's groups is left, so bob is told her user and command only,
        # and that GPU is still another job's, for his run and for his program's bind alike.
        marker = marker_file("setsid-loop")
        script = (f'setsid sh -c "echo \\$\\$ > {marker}; while :; do sleep 0.2; done" '
                  ">/dev/null 2>&1 & wait")
        job = start_as("alice", "run", "--quiet", "--gpu", "5", "--", "bash", "-c", script)
        self.procs.append(job)
        wait_for(lambda: (read_file(marker) or "").strip() != "", "the loop")
        loop = int(read_file(marker))
        self.addCleanup(lambda: alive(loop) and os.kill(loop, signal.SIGKILL))
        os.kill(job.pid, signal.SIGKILL)
        job.communicate(timeout=30)
        r = run_as("bob", "run", "--gpu", "5", "--", "true")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("leased by user alice, command `", r.stderr)
        lease = list_json("bob")["gpus"][5]["lease"]
        self.assertEqual((lease["pid"], lease["user"]), (None, "alice"), lease)
        r = run_as("bob", "bind", "--json", GPUSEL_GPU="5")
        self.assertNotEqual(r.returncode, 0, "bob bound the GPU alice's job holds: " + r.stdout + r.stderr)


class OneStoreTest(SharedStoreCase):
    """Claims live in the store leases live in: with a shared store, they bind every user."""

    def setUp(self):
        super().setUp()
        setup_store()

    def start_worker(self, user, gpu, **extra):
        """`user`'s program that binds GPU `gpu` through the library and keeps it."""
        p = start_as(user, "--", WORKER_USER, "bind", "sleep:120000", GPUSEL_GPU=str(gpu), **extra)
        self.procs.append(p)
        line = p.stdout.readline()
        self.assertIn("bind: ok", line, p.stderr.read() if "bind: ok" not in line else "")
        return p

    def test_a_worker_s_claim_excludes_other_users(self):
        self.start_worker("alice", 3)
        r = run_as("bob", "bind", "--json", GPUSEL_GPU="3")
        self.assertEqual(r.returncode, 2, "bob bound the GPU alice's worker holds: " + r.stdout + r.stderr)
        self.assertIn("alice", r.stderr)
        r = run_as("bob", "run", "--gpu", "3", "--", "true")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("alice", r.stderr)
        self.assertTrue(leased_by(3, "alice"))

    def test_a_gpu_missing_from_the_shared_store_is_held_by_nobody(self):
        os.remove(f"{STORE}/{DGX[7]}.lock")  # as if GPU 7 came after `gpusel setup`
        r = run_as("alice", "run", "--gpu", "7", "--", "true")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("sudo gpusel setup", r.stderr)
        r = run_as("alice", "bind", "--json", GPUSEL_GPU="7")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("sudo gpusel setup", r.stderr)
        # As data: about the lease store's file for that GPU, which cannot be used.
        e = json.loads(r.stdout)["error"]
        self.assertEqual((e["subject"], e["fields"]["reason"], e["fields"]["gpu"]), ("lease", "unusable", DGX[7]))
        self.assertEqual(e["fields"]["path"], f"{STORE}/{DGX[7]}.lock")  # the file that is missing
        r = run_as("alice", "resolve", "--gpu", "free:7")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn(DGX[7], r.stdout)
        self.assertIn("sudo gpusel setup", r.stderr)
        # Sharing on purpose still runs, and setup brings the GPU back.
        self.assertEqual(run_as("alice", "run", "--share", "--gpu", "7", "--", "true").returncode, 0)
        setup_store()
        self.assertEqual(run_as("alice", "run", "--gpu", "7", "--", "true").returncode, 0)


class ClaimsWithoutAStoreTest(SharedStoreCase):
    """No shared store and a HOME that cannot hold one: claims still exclude, or say they do not."""

    def test_a_read_only_home_falls_back_to_a_private_store(self):
        p = start_as("alice", "--", WORKER_USER, "bind", "sleep:120000", GPUSEL_GPU="0", HOME="/var/lib")
        self.procs.append(p)
        self.assertIn("bind: ok", p.stdout.readline())
        r = run_as("alice", "--", WORKER_USER, "bind", GPUSEL_GPU="0", HOME="/var/lib")
        self.assertIn("bind: error 2", r.stdout, r.stderr)
        self.assertIn("already bound", r.stdout)

    def test_no_claim_at_all_is_said_on_stderr(self):
        # /tmp/gpusel-UID, the last place left, is another user's: nothing can hold the claim.
        os.makedirs("/tmp/gpusel-4101", exist_ok=True)
        os.chown("/tmp/gpusel-4101", 4102, 4102)
        try:
            r = run_as("alice", "--", WORKER_USER, "bind", GPUSEL_GPU="0", HOME="/var/lib")
        finally:
            subprocess.run(["rm", "-rf", "/tmp/gpusel-4101"], check=True)
        self.assertIn("bind: ok", r.stdout, r.stderr)
        self.assertIn("without a claim", r.stderr)
        self.assertEqual(r.stderr.count("without a claim"), 1)


ROOT_ONLY = "/var/lib/gpusel-test-root-only"

SWAPPER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
exchange = 2  # RENAME_EXCHANGE
at = sys.argv[1].encode()
names = [a.encode() for a in sys.argv[2:]]
while os.getppid() != 1:  # ends with the test, should it be left behind
    for name in names:
        libc.renameat2(-100, at + b"/store", -100, at + b"/" + name, exchange)
"""

FLOODER = r"""
import fcntl, os, resource, sys
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
held = []
for i in range(min(int(sys.argv[2]), hard - 100)):
    fd = os.open(f"{sys.argv[1]}/junk-{i}", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_SH)
    held.append(fd)
print("holding", flush=True)
sys.stdin.read()
"""


USER_PYTHON = "/usr/bin/python3"  # one every user may run (the test's own may be in root's home)


def root_env(**extra):
    """Root's environment: no GPUSEL_LEASE_DIR, and the simulator's state in its default place (the
    test's private folder is under the /tmp this namespace hides)."""
    return base_env(GPUSEL_LEASE_DIR=None, GPUSEL_SIM_STATE_DIR=None,
                    **{"XDG_RUNTIME_DIR": f"{RUNTIME}/root", **extra})


def root_setup(*args):
    return subprocess.run([BIN, "--sim", "dgx-h100", "setup", *args], capture_output=True, text=True,
                          env=root_env(), timeout=120)


def tree(top):
    """Every path under `top` (links not followed) with its owner and mode: what root must not change."""
    found = {}
    for folder, dirs, files in os.walk(top):
        for name in [folder, *[os.path.join(folder, n) for n in dirs + files]]:
            st = os.lstat(name)
            found[name] = (st.st_uid, st.st_mode)
    return found


def make_root_only():
    """A folder only root may enter (0700) holding a file only root may read (0600)."""
    subprocess.run(["rm", "-rf", ROOT_ONLY], check=True)
    os.mkdir(ROOT_ONLY, 0o700)
    with open(f"{ROOT_ONLY}/secret", "w") as f:
        f.write("root's\n")
    os.chmod(f"{ROOT_ONLY}/secret", 0o600)
    return tree(ROOT_ONLY)


class SetupSafetyTest(SharedStoreCase):
    """`gpusel setup` keeps live tickets, runs beside itself, works only on folders of root's,
    refuses a file system that cannot keep a store safe; root keeps its own store in its own home."""

    def test_setup_run_again_and_again_never_removes_a_live_ticket(self):
        setup_store()
        queue = f"{STORE}/queue"
        log = "/var/lib/gpusel-test-served"
        with open(log, "w"):
            pass
        os.chmod(log, 0o666)
        holder = self.hold("carol", "3")
        # Many locked files in the queue make each setup's pass over it long, as a full queue would.
        flood = subprocess.Popen(["runuser", "-u", "bob", "--", USER_PYTHON, "-c", FLOODER, queue, "3000"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.addCleanup(lambda: (flood.stdin.close(), flood.wait(), flood.stdout.close()))
        self.assertEqual(flood.stdout.readline().strip(), "holding")
        runs = []
        done = threading.Event()

        def setups():
            while not done.is_set() or len(runs) < 5:
                runs.append(root_setup())

        looper = threading.Thread(target=setups)
        looper.start()
        waiters = []
        try:
            for k in range(rounds(24)):
                user = ("alice", "bob")[k % 2]
                p = start_as(user, "run", "--quiet", "--gpu", "3", "--wait", "1800", "--", "sh", "-c",
                             f"echo waiter-{k} >> {log}")
                self.procs.append(p)
                waiters.append(p)
                # One at a time, so that the order they are to be served in is known: 0, 1, 2, ...
                wait_for(lambda: len(list_json()["waiting"]) == len(waiters) or
                         any(p.poll() is not None for p in waiters), f"waiter {k} to queue", 60)
        finally:
            done.set()
            looper.join()
        self.assertEqual([r.stderr for r in runs if r.returncode != 0], [])
        # Every waiter is alive, and its own ticket is still in the queue.
        self.assertEqual([p.stderr.read() for p in waiters if p.poll() is not None], [])
        names = os.listdir(queue)
        lost = [p.pid for p in waiters if not any(n.startswith(f"{p.pid}-") for n in names)]
        self.assertEqual(lost, [], f"{len(runs)} setups")
        order = [w["command"].split("echo ")[1].split()[0] for w in list_json()["waiting"]]
        self.assertEqual(order, [f"waiter-{k}" for k in range(len(waiters))])
        # Every one is served, in the queue's order.
        stop(holder)
        for p in waiters:
            out, err = p.communicate(timeout=120)
            self.assertEqual(p.returncode, 0, err)
        with open(log) as f:
            self.assertEqual(f.read().split(), order)

    def test_setups_twenty_at_once_all_succeed_and_a_users_folder_in_the_queue_is_no_failure(self):
        failed = []
        for _ in range(rounds(5)):
            subprocess.run(["rm", "-rf", "/var/lib/gpusel"], check=True)
            jobs = [subprocess.Popen([BIN, "--sim", "dgx-h100", "setup"], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=root_env()) for _ in range(20)]
            for j in jobs:
                out, err = j.communicate(timeout=120)
                if j.returncode != 0:
                    failed.append(err)
        self.assertEqual(failed, [])
        for path, mode in (("/var/lib/gpusel", 0o755), (STORE, 0o755), (STORE + "/queue", 0o1777)):
            st = os.lstat(path)
            self.assertEqual((st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)), (0, 0, mode), path)
        for u in DGX:
            st = os.lstat(f"{STORE}/{u}.lock")
            self.assertEqual((stat.S_ISREG(st.st_mode), st.st_uid, stat.S_IMODE(st.st_mode), st.st_nlink),
                             (True, 0, 0o444, 1))
        self.assertEqual(sorted(os.listdir(f"{STORE}/queue")), [])
        # Bob's folder with a file in it cannot be removed: left alone, said, and setup succeeds.
        self.assertEqual(sh_as("bob", f"mkdir {STORE}/queue/mine && touch {STORE}/queue/mine/x").returncode, 0)
        r = root_setup()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"left {STORE}/queue/mine in place", r.stdout)
        self.assertTrue(os.path.exists(f"{STORE}/queue/mine/x"))
        self.assertEqual(run_as("alice", "run", "--gpu", "free:8", "--", "true").returncode, 0)

    def test_a_folder_an_ordinary_user_made_is_refused_and_left_as_it_was(self):
        self.addCleanup(subprocess.run, ["rm", "-rf", "/tmp/store"])
        r = sh_as("alice", "mkdir -m 0755 /tmp/store && echo hi > /tmp/store/note && chmod 0644 /tmp/store/note")
        self.assertEqual(r.returncode, 0, r.stderr)
        before = tree("/tmp/store")
        r = root_setup("--lease-dir", "/tmp/store")
        self.assertFailsWith(r, 1, "/tmp/store belongs to alice", "remove it", "--lease-dir")
        self.assertEqual(tree("/tmp/store"), before)
        # A user's folder above the store is refused the same way.
        r = root_setup("--lease-dir", "/tmp/store/leases")
        self.assertFailsWith(r, 1, "/tmp/store belongs to alice")
        self.assertEqual(tree("/tmp/store"), before)

    def test_a_folder_swapped_for_a_link_never_leads_root_into_another_folder(self):
        before = make_root_only()
        swap = "/tmp/swap"
        self.addCleanup(subprocess.run, ["rm", "-rf", swap])
        r = sh_as("alice", f"mkdir -m 0755 {swap} {swap}/store && ln -s {ROOT_ONLY} {swap}/to-folder && "
                           f"ln -s {ROOT_ONLY}/secret {swap}/to-file")
        self.assertEqual(r.returncode, 0, r.stderr)
        # setpriv runs the swapper in place (runuser would leave it running when killed).
        swapper = subprocess.Popen(["setpriv", "--reuid=alice", "--regid=alice", "--init-groups", USER_PYTHON,
                                    "-c", SWAPPER, swap, "to-folder", "to-file"], stdin=subprocess.PIPE)
        self.addCleanup(lambda: (swapper.kill(), swapper.wait(), swapper.stdin.close()))
        wait_for(lambda: os.path.islink(f"{swap}/store"), "the first swap")
        codes = {}
        for _ in range(rounds(150)):
            r = root_setup("--lease-dir", f"{swap}/store")
            codes[r.returncode] = codes.get(r.returncode, 0) + 1
        self.assertIsNone(swapper.poll())
        self.assertEqual(tree(ROOT_ONLY), before)
        self.assertEqual(codes, {1: rounds(150)})

    def test_root_with_another_users_home_keeps_its_own_store_in_its_own_home(self):
        for path in (os.path.realpath(BIN), os.path.realpath(SIM_ROOT), os.getcwd()):
            if path.startswith("/root/"):
                self.skipTest(f"{path} is under /root, which this test hides")
        subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0700", "tmpfs", "/root"], check=True)
        self.addCleanup(subprocess.run, ["umount", "/root"])
        before_root_only = make_root_only()
        home = f"{HOMES}/alice"
        r = sh_as("alice", f"mkdir -p {home}/.local && ln -s {ROOT_ONLY} {home}/.local/state")
        self.assertEqual(r.returncode, 0, r.stderr)
        before_home = tree(home)
        r = subprocess.run([BIN, "--sim", "dgx-h100", "run", "--gpu", "0", "--", "true"], capture_output=True,
                           text=True, env=root_env(HOME=home, XDG_STATE_HOME=None))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(tree(ROOT_ONLY), before_root_only)
        self.assertEqual(tree(home), before_home)
        self.assertIn("/root/.local/state/gpusel/leases", r.stderr)
        self.assertEqual(os.lstat("/root/.local/state/gpusel/leases").st_uid, 0)

    def test_a_store_on_bindfs_is_refused_by_setup_and_named_by_doctor(self):
        if shutil.which("bindfs") is None or not os.path.exists("/dev/fuse"):
            self.skipTest("needs bindfs (Debian package bindfs) and /dev/fuse")
        source = "/var/lib/gpusel-test-bindfs"
        subprocess.run(["rm", "-rf", source], check=True)
        os.makedirs(source, mode=0o755)
        self.addCleanup(subprocess.run, ["rm", "-rf", source])
        r = root_setup("--lease-dir", f"{source}/leases")  # a good store, then seen through bindfs
        self.assertEqual(r.returncode, 0, r.stderr)
        os.makedirs("/var/lib/gpusel", mode=0o755)
        subprocess.run(["bindfs", "-o", "perms=a+rwX", source, "/var/lib/gpusel"], check=True)
        self.addCleanup(subprocess.run, ["umount", "/var/lib/gpusel"])
        r = root_setup()
        self.assertFailsWith(r, 1, "the file system under /var/lib/gpusel does not keep the modes",
                             "local file system")
        for user in ("alice", None):
            r = run_as(user, "doctor", "--json") if user else subprocess.run(
                [BIN, "--sim", "dgx-h100", "doctor", "--json"], capture_output=True, text=True, env=root_env())
            found = [f for f in json.loads(r.stdout)["findings"] if f["id"] == "lease-store-unsafe"]
            self.assertTrue(found, r.stdout)
            self.assertIn(STORE, found[0]["message"])
            self.assertIn("local file system", found[0]["remedy"])


def main():
    # Under the sanitizer build the runner is started with the sanitizer runtimes preloaded, for
    # tests that load the doubles through ctypes; this one does not, and its tools (pgrep, mount,
    # runuser) must not run with them: a preloaded pgrep was seen hung on a futex for minutes.
    if "GPUSEL_TEST_PRELOAD" in os.environ:
        os.environ.pop("LD_PRELOAD", None)
        os.environ.pop("ASAN_OPTIONS", None)
    if os.geteuid() != 0:
        print("skipped: the multi-user lease tests need root (to add users inside a mount namespace)")
        sys.exit(77)
    if os.environ.get(INSIDE) != "1":
        env = dict(os.environ, **{INSIDE: "1"})
        r = subprocess.run(["unshare", "-m", "--propagation", "private", sys.executable, *sys.argv], env=env)
        sys.exit(r.returncode)
    try:
        set_up_namespace()
    except unittest.SkipTest as e:
        print("skipped:", e)
        sys.exit(77)
    unittest.main(verbosity=2)


if __name__ == "__main__":
    main()
