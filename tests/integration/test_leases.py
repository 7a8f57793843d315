"""free:N, leases and the simulator's usage model (issue 11), on the simulated dgx-h100: eight H100s
on two NUMA nodes, all connected by NVSwitch, two GPUs per PCIe switch."""

import json
import fcntl
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import unittest

from support import BIN, INSTRUMENTED, PYTHON_LOADS_LIBRARIES, SOURCE, Case, for_python, sim_env, uuids

NEEDS_PYTHON_LOADER = unittest.skipUnless(PYTHON_LOADS_LIBRARIES, "a Python process cannot load the TSan-instrumented libraries")

DGX = uuids("dgx-h100")


class LeaseCase(Case):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.lease_dir = os.path.join(self.tmp.name, "leases")
        self.state_dir = os.path.join(self.tmp.name, "state")

    def tearDown(self):
        self.tmp.cleanup()

    def env(self, name="dgx-h100", **extra):
        return sim_env(name, **{"GPUSEL_LEASE_DIR": self.lease_dir, "GPUSEL_SIM_STATE_DIR": self.state_dir, **extra})

    def py_env(self, **extra):
        # A Python worker loads the simulated libcuda itself: under the sanitizer build it needs the
        # sanitizer runtime preloaded (gpusel, itself instrumented, runs fine with it too).
        return for_python(self.env(**extra))

    def run_gpusel(self, *args, env=None, timeout=60):
        return subprocess.run([BIN, *args], capture_output=True, text=True, env=env or self.env(), timeout=timeout)

    def start(self, *args, env=None):
        return subprocess.Popen([BIN, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env or self.env())

    def held(self, holder):
        if holder.poll() is not None:
            self.fail(f"the lease holder exited with {holder.returncode}: {holder.stderr.read()}")
        return True

    def need_strace(self):
        probe = subprocess.run(["strace", "-f", "-o", os.devnull, "true"], capture_output=True)
        if probe.returncode != 0:
            self.skipTest("strace cannot trace here: " + probe.stderr.decode()[-200:])

    def wait_for(self, predicate, what, seconds=20):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.05)
        self.fail("timed out waiting for " + what)


class PickTest(LeaseCase):
    def test_free_picks_gpus_that_sit_together(self):
        r = self.run_gpusel("resolve", "--gpu", "free:2", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        self.assertEqual(j["gpus"], DGX[:2])
        self.assertIn("NVLink", j["picked"])
        # resolve leases nothing: the same answer again.
        r = self.run_gpusel("resolve", "--gpu", "free:2")
        self.assertEqual(r.stdout.split(), DGX[:2])
        # Within a preset, only what it exposes.
        r = self.run_gpusel("resolve", "--gpu", "free:2", env=self.env(CUDA_VISIBLE_DEVICES="5,3,6"))
        self.assertEqual(r.returncode, 0, r.stderr)
        # All three share NVLink; 5 and 6 also share a NUMA node.
        self.assertEqual(sorted(r.stdout.split()), sorted([DGX[5], DGX[6]]))

    @NEEDS_PYTHON_LOADER
    def test_free_through_the_c_abi_and_python(self):
        code = ("import gpusel, json; print(json.dumps([gpusel.gpu_arg('free:2'), "
                "gpusel.resolve_gpu_uuids(['free:3'])]))")
        env = self.env(PYTHONPATH=os.path.join(SOURCE, "python"),
                       GPUSEL_LIBRARY=os.environ.get("GPUSEL_LIBRARY_FILE", "build/lib/libgpusel.so.2"))
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=for_python(env),
                           timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout), [["free:2"], DGX[:3]])
        # bind --gpu free:1 picks one (leasing nothing: bind runs inside someone's job).
        r = self.run_gpusel("bind", "--gpu", "free:1", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["uuid"], DGX[0])

    def test_pcie_switch_then_numa_without_nvlink(self):
        # Without NVLink, a PCIe switch pair beats two GPUs of one NUMA node.
        with open(os.path.join(os.path.dirname(__file__), "..", "..", "sim", "machines", "dgx-h100.toml")) as f:
            text = f.read()
        path = os.path.join(self.tmp.name, "pcie-only.toml")
        with open(path, "w") as f:
            f.write(text.replace("nvlink_domain = 0", "nvlink_domain = -1"))
        env = sim_env("dgx-h100", GPUSEL_LEASE_DIR=self.lease_dir, GPUSEL_SIM_STATE_DIR=self.state_dir)
        env = {**env, **self.sim_vars(path)}
        # GPU 0 busy (a process declared nowhere: lease it), so 1's switch partner is gone.
        holder = self.start("run", "--quiet", "--gpu", "0", "--", "sleep", "30", env=env)
        try:
            self.wait_for(lambda: self.run_gpusel("resolve", "--gpu", "free:8", env=env).returncode != 0,
                          "the lease on GPU 0")
            r = self.run_gpusel("resolve", "--gpu", "free:2", "--json", env=env)
            j = json.loads(r.stdout)
            self.assertEqual(j["gpus"], DGX[2:4])
            self.assertIn("one PCIe switch", j["picked"])
            r = self.run_gpusel("resolve", "--gpu", "free:3", "--json", env=env)
            self.assertEqual(json.loads(r.stdout)["gpus"], [DGX[1], DGX[2], DGX[3]])
            self.assertIn("one NUMA node", json.loads(r.stdout)["picked"])
        finally:
            holder.kill()
            holder.wait()

    def sim_vars(self, path):
        out = subprocess.run([BIN, "sim", "env", path], capture_output=True, text=True, check=True,
                             env=self.env()).stdout  # (the test's own usage folder, not /tmp's)
        exports = {}
        for line in out.splitlines():
            if line.startswith("export "):
                key, _, value = line[len("export "):].partition("=")
                exports[key] = value.strip("'")
        return exports

    def test_bad_requests(self):
        for spec, pieces in [("free:0", ["asks for no GPU"]), ("free:-1", ["is not one"]),
                             ("free:", ["number of GPUs"]), ("free:two", ['"two"']),
                             ("free:2,3", ["stands alone"]), ("free:9", ["asks for 9 GPUs", "only 8"])]:
            with self.subTest(spec=spec):
                self.assertFailsWith(self.run_gpusel("resolve", "--gpu", spec), 2, *pieces)
                self.assertFalse(os.path.exists(os.path.join(self.lease_dir, DGX[0] + ".lock")))
        self.assertFailsWith(self.run_gpusel("run", "--gpu", "free:3", "--", "true",
                                             env=self.env(CUDA_VISIBLE_DEVICES="1,2")), 2, "only 2 can be used")
        self.assertFailsWith(self.run_gpusel("run", "--gpu", "free:1", "--wait", "soon", "--", "true"), 2, "--wait",
                             '"soon"')

    @NEEDS_PYTHON_LOADER
    def test_busy_gpus_are_not_free(self):
        # A process with a context on GPU 0 (a simulated worker) shows in NVML and makes it busy.
        busy = subprocess.Popen(["sh", "-c", f"{BIN} bind --gpu 0 >/dev/null && exec sleep 30"],
                                env=self.env(), start_new_session=True)
        try:
            self.wait_for(lambda: os.path.isdir(os.path.join(self.state_dir, DGX[0])) and
                          os.listdir(os.path.join(self.state_dir, DGX[0])), "the worker's context")
            # bind exits at once; its process entry goes with it.
            self.wait_for(lambda: self.run_gpusel("resolve", "--gpu", "free:8").returncode == 0, "the exited worker")
        finally:
            os.killpg(busy.pid, signal.SIGKILL)
            busy.wait()
        # A worker that keeps its context: GPU 0 is busy while it lives.
        worker = self.start("run", "--quiet", "--share", "--gpu", "0", "--", sys.executable, "-c",
                            "import ctypes, os, time; c = ctypes.CDLL(os.environ['GPUSEL_CUDA_LIBRARY']); "
                            "c.cuInit(0); x = ctypes.c_void_p(); d = ctypes.c_int(); c.cuDeviceGet(ctypes.byref(d), 0); "
                            "c.cuDevicePrimaryCtxRetain(ctypes.byref(x), d); "
                            "print('ready', flush=True); time.sleep(30)", env=self.py_env())
        try:
            self.assertEqual(worker.stdout.readline().strip(), "ready")
            r = self.run_gpusel("resolve", "--gpu", "free:8")
            self.assertFailsWith(r, 1, "7 of the 8 GPUs here are free", f"GPU 0 ({DGX[0]}): 1 compute process on it")
            # As data: the request, and why it cannot be met now.
            r = self.run_gpusel("resolve", "--gpu", "free:8", "--json")
            e = json.loads(r.stdout)["error"]
            self.assertEqual((e["subject"], e["fields"]), ("gpu-request", {"request": "free:8", "reason": "taken"}))
            r = self.run_gpusel("resolve", "--gpu", "free:7")
            self.assertEqual(r.stdout.split(), DGX[1:])
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait()


class ListTest(LeaseCase):
    @NEEDS_PYTHON_LOADER
    def test_list_shows_usage_processes_and_leases(self):
        worker = self.start("run", "--quiet", "--gpu", "2", "--", sys.executable, "-c",
                            "import ctypes, os, time; c = ctypes.CDLL(os.environ['GPUSEL_CUDA_LIBRARY']); "
                            "c.cuInit(0); x = ctypes.c_void_p(); d = ctypes.c_int(); c.cuDeviceGet(ctypes.byref(d), 2); "
                            "c.cuDevicePrimaryCtxRetain(ctypes.byref(x), d); "
                            "p = ctypes.c_ulonglong(); c.cuCtxSetCurrent(x); c.cuMemAlloc_v2(ctypes.byref(p), 1 << 30); "
                            "print(os.getpid(), flush=True); time.sleep(30)", env=self.py_env())
        try:
            pid = int(worker.stdout.readline())
            r = self.run_gpusel("list", "--json")
            self.assertEqual(r.returncode, 0, r.stderr)
            gpus = json.loads(r.stdout)["gpus"]
            g = gpus[2]
            self.assertEqual(g["memory_used_bytes"], (512 << 20) + (1 << 30))
            self.assertEqual(g["utilization_percent"], 40)
            self.assertEqual([(p["pid"], p["used_memory_bytes"]) for p in g["processes"]], [(pid, (512 << 20) + (1 << 30))])
            self.assertIn("python", g["processes"][0]["command"])
            self.assertEqual(g["lease"]["pid"], worker.pid)
            self.assertIn("gpusel", g["lease"]["command"])
            self.assertTrue(g["lease"]["user"])
            self.assertEqual((gpus[0]["processes"], gpus[0]["lease"], gpus[0]["memory_used_bytes"]), ([], None, 0))
            text = self.run_gpusel("list").stdout
            self.assertRegex(text, r"\n2 .* 1\.5 GiB +40%\n")
            self.assertIn(f"      process {pid} of ", text)
            self.assertIn(f"      leased by pid {worker.pid} (user ", text)
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait()
        # Gone with the worker: no process, no lease.
        g = json.loads(self.run_gpusel("list", "--json").stdout)["gpus"][2]
        self.assertEqual((g["processes"], g["lease"], g["memory_used_bytes"]), ([], None, 0))


def lease_inode(lease_dir, uuid):
    return os.stat(os.path.join(lease_dir, uuid + ".lock")).st_ino


class LockTableTest(LeaseCase):
    """Issue 34: picking GPUs never reads the kernel's whole lock table (/proc/locks, a read that
    waits milliseconds on a loaded machine and grows with every lock on it) when the GPUs it looks
    at are free: each lease carries an OFD read lock beside its flock, asked of the kernel per file
    (F_OFD_GETLK)."""

    def hold(self, gpu):
        holder = self.start("run", "--quiet", "--gpu", str(gpu), "--", "sleep", "60")
        self.wait_for(lambda: self.held(holder) and
                      self.run_gpusel("resolve", "--gpu", "free:8").returncode == 1, "the lease")
        return holder

    def test_a_lease_carries_a_mark_the_kernel_reports_per_file(self):
        holder = self.hold(4)
        try:
            inode = lease_inode(self.lease_dir, DGX[4])
            with open("/proc/locks") as f:
                kinds = {tuple(line.split()[1:4]) for line in f
                         if len(line.split()) > 5 and line.split()[5].endswith(f":{inode}")}
            self.assertEqual(kinds, {("FLOCK", "ADVISORY", "WRITE"), ("OFDLCK", "ADVISORY", "READ")})
        finally:
            holder.kill()
            holder.communicate()

    def test_a_mark_without_a_lock_holds_nothing(self):
        # Anyone who may read a lease file can add a read lock to it: that makes no GPU leased.
        r = self.run_gpusel("run", "--quiet", "--gpu", "2", "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        fd = os.open(os.path.join(self.lease_dir, DGX[2] + ".lock"), os.O_RDONLY)
        try:
            fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack("hhqqi", fcntl.F_RDLCK, os.SEEK_SET, 0, 0, 0))
            r = self.run_gpusel("resolve", "--gpu", "free:8")
            self.assertEqual(r.returncode, 0, r.stderr)
            r = self.run_gpusel("run", "--quiet", "--gpu", "2", "--", "true")
            self.assertEqual(r.returncode, 0, r.stderr)
        finally:
            os.close(fd)

    def test_an_unlocked_descriptor_of_a_lease_file_is_no_lease(self):
        # A process that only has another job's lease file open (looking at it, as waiters and
        # `exec 3<` in a shell do) does not hold that lease: its bind is refused.
        # Nor does one that put a lock of another kind on it (anyone who may read it can: a read
        # lock of the open file, as gpusel's mark, or a POSIX one).
        holder = self.hold(3)
        path = os.path.join(self.lease_dir, DGX[3] + ".lock")
        try:
            for lock in (None, fcntl.F_OFD_SETLK, fcntl.F_SETLK):
                fd = os.open(path, os.O_RDONLY)
                try:
                    if lock is not None:
                        fcntl.fcntl(fd, lock, struct.pack("hhqqi", fcntl.F_RDLCK, os.SEEK_SET, 0, 0, 0))
                    r = subprocess.run([BIN, "bind", "--json"], capture_output=True, text=True, timeout=60,
                                       env=self.env(GPUSEL_GPU="3"), pass_fds=(fd,))
                    self.assertNotEqual(r.returncode, 0,
                                        f"with lock {lock}, bound the GPU another job holds: {r.stdout}{r.stderr}")
                    self.assertIn(f"pid {holder.pid}", r.stderr)
                finally:
                    os.close(fd)
        finally:
            holder.kill()
            holder.communicate()

    @unittest.skipUnless(shutil.which("strace"), "needs strace")
    @unittest.skipIf(INSTRUMENTED, "LeakSanitizer stops under ptrace")
    def test_a_waiter_behind_an_unmarked_lock_does_not_spin(self):
        # A flock without gpusel's mark (another program's, or a gpusel from before the marks):
        # the waiter finds it at its first try and looks through the lock table from then on,
        # rather than taking the GPU for free at every look and trying it again (80 tries in 4 s
        # when it did).
        r = self.run_gpusel("run", "--quiet", "--gpu", "2", "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        path = os.path.join(self.lease_dir, DGX[2] + ".lock")
        out = os.path.join(self.tmp.name, "waiter.strace")
        fd = os.open(path, os.O_RDONLY)
        fcntl.flock(fd, fcntl.LOCK_SH)
        waiter = subprocess.Popen(["strace", "-f", "-e", "trace=open,openat", "-o", out, BIN, "run", "--quiet",
                                   "--gpu", "2", "--wait", "60", "--", "true"], env=self.env(),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(3)
            self.assertIsNone(waiter.poll(), waiter.stderr.read() if waiter.poll() is not None else "")
        finally:
            os.close(fd)  # released: the waiter goes
        _, err = waiter.communicate(timeout=60)
        self.assertEqual(waiter.returncode, 0, err)
        with open(out) as f:
            opens = sum(1 for line in f if path in line)
        self.assertLess(opens, 15, f"the waiter opened {path} {opens} times in about 3 s")

    @unittest.skipUnless(shutil.which("strace"), "needs strace")
    @unittest.skipIf(INSTRUMENTED, "LeakSanitizer stops under ptrace")
    def test_picking_free_gpus_reads_no_lock_table(self):
        self.need_strace()
        # Every GPU has a lease file (the normal state after first use), GPU 6 is held.
        r = self.run_gpusel("run", "--quiet", "--gpu", "0,1,2,3,4,5,6,7", "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len([n for n in os.listdir(self.lease_dir) if n.endswith(".lock")]), 8)
        out = os.path.join(self.tmp.name, "strace.txt")

        def opens_lock_table(*args):
            r = subprocess.run(["strace", "-f", "-e", "trace=open,openat", "-o", out, BIN, *args],
                               capture_output=True, text=True, env=self.env(), timeout=120)
            self.assertEqual(r.returncode, 0, f"{args}: {r.stderr}")
            with open(out) as f:
                return '"/proc/locks"' in f.read()

        for args in (["run", "--quiet", "--gpu", "free:2", "--", "true"],
                     ["resolve", "--gpu", "free:3"], ["list", "--json"],
                     ["run", "--quiet", "--gpu", "1,2", "--", "true"]):
            self.assertFalse(opens_lock_table(*args), args)
        holder = self.hold(6)
        try:
            # A named request for free GPUs looks at them alone; a worker's bind asks nothing.
            self.assertFalse(opens_lock_table("run", "--quiet", "--gpu", "5", "--", "true"))
            self.assertFalse(opens_lock_table("run", "--quiet", "--gpu", "3", "--", BIN, "bind", "--",
                                              "true"))
            # Naming the holder of a held GPU needs the table (list shows who).
            self.assertTrue(opens_lock_table("list"))
            # Picking free GPUs beside a held one asks the marks alone while enough are free;
            # too few, and the marks are checked against the table (a mark anyone may add keeps
            # no GPU from a job), which names the holder.
            self.assertFalse(opens_lock_table("run", "--quiet", "--gpu", "free:2", "--", "true"))
            self.assertFalse(opens_lock_table("resolve", "--gpu", "free:7"))
            r = subprocess.run(["strace", "-f", "-e", "trace=open,openat", "-o", out, BIN, "resolve", "--gpu",
                                "free:8"], capture_output=True, text=True, env=self.env(), timeout=120)
            self.assertFailsWith(r, 1, "7 of the 8 GPUs here are free", f"leased by pid {holder.pid}")
            with open(out) as f:
                self.assertIn('"/proc/locks"', f.read())
        finally:
            holder.kill()
            holder.communicate()

    def test_marks_on_every_gpu_without_locks_keep_no_gpu_from_free_n(self):
        # Another user marks every lease file (an OFD read lock, which reading the file allows)
        # and locks none: free:N finds too few GPUs by the marks, checks them against the lock
        # table and takes its GPUs.
        r = self.run_gpusel("run", "--quiet", "--gpu", "0,1,2,3,4,5,6,7", "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        fds = [os.open(os.path.join(self.lease_dir, u + ".lock"), os.O_RDONLY) for u in DGX]
        try:
            # A mark on GPU 0 alone steers nothing: free:1 still picks it, of 8 free GPUs.
            fcntl.fcntl(fds[0], fcntl.F_OFD_SETLK, struct.pack("hhqqi", fcntl.F_RDLCK, os.SEEK_SET, 0, 0, 0))
            r = self.run_gpusel("resolve", "--gpu", "free:1")
            self.assertEqual((r.returncode, r.stdout.split()), (0, DGX[:1]), r.stderr)
            self.assertIn("of 8 free GPUs", r.stderr)
            for fd in fds:
                fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack("hhqqi", fcntl.F_RDLCK, os.SEEK_SET, 0, 0, 0))
            r = self.run_gpusel("run", "--quiet", "--gpu", "free:2", "--", "true")
            self.assertEqual(r.returncode, 0, r.stderr)
            r = self.run_gpusel("resolve", "--gpu", "free:8")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.split(), DGX)
        finally:
            for fd in fds:
                os.close(fd)

    @unittest.skipUnless(shutil.which("strace"), "needs strace")
    @unittest.skipIf(INSTRUMENTED, "LeakSanitizer stops under ptrace")
    def test_a_woken_free_waiter_takes_its_gpu_without_reading_the_lock_table(self):
        # Issue 34's free:1 hand-off: every other GPU is held; woken by GPU 3's release, the
        # waiter finds it free by its mark and takes it, with no read of the table between the
        # wake and the take (that read waits a grace period: 15 ms here, more under load).
        self.need_strace()
        others = self.start("run", "--quiet", "--gpu", "0,1,2,4,5,6,7", "--", "sleep", "60")
        last = None
        try:
            self.wait_for(lambda: self.held(others) and
                          self.run_gpusel("resolve", "--gpu", "free:2").returncode == 1, "the leases")
            last = self.start("run", "--quiet", "--gpu", "3", "--", "sleep", "2")
            self.wait_for(lambda: self.run_gpusel("resolve", "--gpu", "free:1").returncode == 1, "GPU 3's lease")
            out = os.path.join(self.tmp.name, "waiter.strace")
            r = subprocess.run(["strace", "-f", "-e", "trace=openat,flock,poll,ppoll", "-o", out, BIN, "run",
                                "--quiet", "--gpu", "free:1", "--wait", "60", "--", "true"],
                               capture_output=True, text=True, env=self.env(), timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out) as f:
                lines = f.read().splitlines()
            path = os.path.join(self.lease_dir, DGX[3] + ".lock")
            # The take: GPU 3's file opened, then locked at once; the wake: the last wait before it.
            take = max(i for i, line in enumerate(lines) if re.search(r"LOCK_EX\|LOCK_NB\)\s*= 0", line))
            self.assertTrue(any(path in line for line in lines[take - 3:take]), lines[take - 3:take + 1])
            wake = max(i for i, line in enumerate(lines[:take]) if "poll(" in line)
            self.assertFalse([line for line in lines[wake:take] if '"/proc/locks"' in line],
                             "\n".join(lines[wake:take + 1]))
        finally:
            for p in (others, last):
                if p is not None:
                    p.kill()
                    p.communicate()

    @unittest.skipIf(INSTRUMENTED, "LeakSanitizer stops under ptrace")
    def test_a_run_lets_its_lease_go_when_the_kernel_says_no_child_is_left(self):
        # Issue 34's named hand-off: once its worker has ended, gpusel run (the workers' subreaper,
        # with no other child) learns from the kernel's wait that nothing of the job is left, and
        # closes its lease file then, with no look at /proc/self/task/*/children in between.
        self.need_strace()
        out = os.path.join(self.tmp.name, "holder.strace")
        r = subprocess.run(["strace", "-f", "-e", "trace=openat,close,wait4", "-o", out, BIN, "run", "--quiet",
                            "--gpu", "3", "--", "true"], capture_output=True, text=True, env=self.env(), timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out) as f:
            lines = f.read().splitlines()
        gpusel = lines[0].split()[0]
        own = [line for line in lines if line.split()[0] == gpusel]
        path = os.path.join(self.lease_dir, DGX[3] + ".lock")
        opened = [i for i, line in enumerate(own) if path in line and "openat(" in line and "= -1" not in line]
        self.assertTrue(opened, "\n".join(own))
        fd = own[opened[-1]].rsplit("= ", 1)[1].strip()
        # The worker's end: the first wait after the take that returned a pid; the release: the
        # close of the lease file after it.
        reaped = [i for i, line in enumerate(own) if i > opened[-1] and re.search(r"wait4\(.*\) = [1-9]", line)]
        self.assertTrue(reaped, "\n".join(own))
        release = [i for i, line in enumerate(own) if i > reaped[0] and re.search(rf"close\({fd}\)\s*= 0", line)]
        self.assertTrue(release, "\n".join(own[reaped[0]:]))
        between = own[reaped[0]:release[0] + 1]
        self.assertFalse([line for line in between if "/proc/self/task" in line], "\n".join(between))
        # Everything of the job was reaped before the release: the kernel said no child was left.
        self.assertTrue(any("ECHILD" in line for line in between), "\n".join(between))


class LeaseTest(LeaseCase):
    def test_a_leased_gpu_is_refused_unless_shared(self):
        holder = self.start("run", "--quiet", "--gpu", "3", "--", "sleep", "30")
        try:
            # Watch with resolve, which takes no lease: a probing `run` could win the race for GPU 3
            # before the holder starts, and the holder would then exit instead of holding it.
            self.wait_for(lambda: self.held(holder) and
                          self.run_gpusel("resolve", "--gpu", "free:8").returncode == 1, "the lease")
            r = self.run_gpusel("run", "--gpu", "3", "--", "true")
            self.assertFailsWith(r, 1, f"GPU 3 ({DGX[3]}) is leased by pid {holder.pid}", "user ",
                                 "command `", "sleep 30", "since ", "--share")
            r = self.run_gpusel("run", "--quiet", "--share", "--gpu", "3", "--", "true")
            self.assertEqual(r.returncode, 0, r.stderr)
            # Other GPUs are free, and free:N goes around the leased one.
            r = self.run_gpusel("run", "--gpu", "free:8", "--", "true")
            self.assertFailsWith(r, 1, "7 of the 8 GPUs here are free", f"leased by pid {holder.pid}")
            r = self.run_gpusel("run", "--gpu", "free:7", "--", "true")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertNotIn(DGX[3], r.stderr.split("rank 0")[1] if "rank 0" in r.stderr else r.stderr)
        finally:
            holder.kill()  # SIGKILL: the kernel drops the lease with it
            holder.wait()
        r = self.run_gpusel("run", "--quiet", "--gpu", "3", "--wait", "10", "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_a_killed_holder_frees_its_gpus_for_a_waiting_job(self):
        holder = self.start("run", "--quiet", "--gpu", "0,1", "--", "sleep", "60")
        try:
            self.wait_for(lambda: self.run_gpusel("resolve", "--gpu", "free:8").returncode == 1, "the leases")
            waiter = self.start("run", "--gpu", "1", "--wait", "--", "true")
            self.wait_for(lambda: "waiting for GPUs" in self.peek(waiter), "the waiter's notice", 20)
            self.assertIsNone(waiter.poll())
            holder.send_signal(signal.SIGKILL)
            holder.wait()
            out, err = waiter.communicate(timeout=30)
            self.assertEqual(waiter.returncode, 0, err)
            self.assertIn(f"rank 0: pid", err)
        finally:
            if holder.poll() is None:
                holder.kill()
                holder.wait()

    def peek(self, proc):
        # stderr so far, without blocking (the notice is printed before waiting starts)
        os.set_blocking(proc.stderr.fileno(), False)
        try:
            chunk = proc.stderr.read() or ""
        except TypeError:  # nothing to read yet
            chunk = ""
        self.__dict__.setdefault("_seen", {}).setdefault(proc.pid, "")
        self._seen[proc.pid] += chunk
        return self._seen[proc.pid]

    def test_unsafe_lease_folders_and_files(self):
        os.makedirs(self.lease_dir)
        link = os.path.join(self.tmp.name, "link")
        os.symlink(self.lease_dir, link)
        self.assertFailsWith(self.run_gpusel("run", "--gpu", "0", "--", "true", env=self.env(GPUSEL_LEASE_DIR=link)),
                             1, "is a symbolic link", "GPUSEL_LEASE_DIR")
        # A folder others may write, sticky or not: they could remove or replace leases in it.
        for mode in (0o777, 0o1777, 0o775):
            open_dir = os.path.join(self.tmp.name, f"open{mode:o}")
            os.makedirs(open_dir)
            os.chmod(open_dir, mode)
            self.assertFailsWith(self.run_gpusel("run", "--gpu", "0", "--", "true",
                                                 env=self.env(GPUSEL_LEASE_DIR=open_dir)), 1,
                                 "can be written by other users", f"mode {mode:04o}", "gpusel setup --lease-dir",
                                 "GPUSEL_LEASE_DIR")
        not_dir = os.path.join(self.tmp.name, "file")
        open(not_dir, "w").close()
        self.assertFailsWith(self.run_gpusel("run", "--gpu", "0", "--", "true",
                                             env=self.env(GPUSEL_LEASE_DIR=not_dir)), 1, "is not a folder")
        # A lease file replaced by a symbolic link is never followed; that GPU alone is refused.
        target = os.path.join(self.tmp.name, "elsewhere")
        os.symlink(target, os.path.join(self.lease_dir, DGX[2] + ".lock"))
        r = self.run_gpusel("run", "--gpu", "1,2", "--", "true")
        self.assertFailsWith(r, 1, f"GPU 2 ({DGX[2]}) is", "is a symbolic link, which gpusel never follows",
                             "gpusel setup" if os.geteuid() == 0 else "remove it")
        self.assertFalse(os.path.exists(target))
        # free:N goes around it, and says so.
        r = self.run_gpusel("run", "--gpu", "free:8", "--", "true")
        self.assertFailsWith(r, 1, "7 of the 8 GPUs here are free", "is a symbolic link")
        r = self.run_gpusel("run", "--gpu", "free:7", "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"GPU 2 ({DGX[2]}) was skipped", r.stderr)
        # A file with a second name (a hard link) would make one lock stand for two GPUs.
        os.link(os.path.join(self.lease_dir, DGX[1] + ".lock"), os.path.join(self.lease_dir, "other.lock"))
        r = self.run_gpusel("run", "--gpu", "1", "--", "true")
        self.assertFailsWith(r, 1, "has 2 names (hard links)")
        # A folder gpusel cannot write (as root everything is writable, so only when not root).
        if os.geteuid() != 0:
            locked = os.path.join(self.tmp.name, "ro")
            os.makedirs(locked, mode=0o555)
            self.assertFailsWith(self.run_gpusel("run", "--gpu", "0", "--", "true",
                                                 env=self.env(GPUSEL_LEASE_DIR=locked)), 1, "cannot")

    def test_lease_files_are_read_only_and_never_written(self):
        r = self.run_gpusel("run", "--quiet", "--gpu", "4", "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        st = os.stat(os.path.join(self.lease_dir, DGX[4] + ".lock"))
        root = os.geteuid() == 0
        # Root's folder is a store other users may lease in; a user's own is theirs alone.
        self.assertEqual(st.st_mode & 0o777, 0o444 if root else 0o400)
        self.assertEqual(st.st_size, 0)
        self.assertEqual(os.stat(self.lease_dir).st_mode & 0o7777, 0o755 if root else 0o700)

    def test_a_wait_longer_than_any_deadline_waits(self):
        holder = self.start("run", "--quiet", "--gpu", "2", "--", "sleep", "30")
        try:
            self.wait_for(lambda: self.held(holder) and
                          self.run_gpusel("resolve", "--gpu", "free:8").returncode == 1, "the lease")
            for value in ("1e10", "1e300", "inf", "forever"):
                waiter = self.start("run", "--quiet", "--gpu", "2", "--wait", value, "--", "true")
                time.sleep(0.5)
                self.assertIsNone(waiter.poll(), f"--wait {value}: {waiter.stderr.read() if waiter.poll() is not None else ''}")
                waiter.kill()
                waiter.wait()
            r = self.run_gpusel("run", "--gpu", "2", "--wait", "0.2", "--", "true")
            self.assertFailsWith(r, 1, "still waiting after 0.2 s", f"leased by pid {holder.pid}")
            for bad in ("-1", "nan", "soon", "1x"):
                r = self.run_gpusel("run", "--gpu", "2", f"--wait={bad}", "--", "true")
                self.assertFailsWith(r, 2, "is not a duration", bad)
        finally:
            holder.kill()
            holder.wait()


WORKER = r'''
import json, os, sys, time
start = time.time()
time.sleep(0.3)
with open(sys.argv[1], "a") as f:
    f.write(json.dumps({"job": sys.argv[2], "gpu": os.environ["GPUSEL_GPU"], "start": start, "end": time.time()}) + "\n")
'''


class ConcurrencyTest(LeaseCase):
    def test_many_waiting_jobs_never_share_a_gpu(self):
        log = os.path.join(self.tmp.name, "log.jsonl")
        jobs = [self.start("run", "--quiet", "--gpu", "free:2", "--wait", "120", "--", sys.executable, "-c", WORKER,
                           log, str(j)) for j in range(8)]
        for j in jobs:
            out, err = j.communicate(timeout=180)
            self.assertEqual(j.returncode, 0, err)
        with open(log) as f:
            records = [json.loads(line) for line in f]
        self.assertEqual(len(records), 16)
        for a in records:
            for b in records:
                if a["job"] != b["job"] and a["gpu"] == b["gpu"]:
                    overlap = min(a["end"], b["end"]) - max(a["start"], b["start"])
                    self.assertLessEqual(overlap, 0, f"jobs {a['job']} and {b['job']} both held {a['gpu']}")
        self.assertEqual(len({r["job"] for r in records}), 8)


if __name__ == "__main__":
    unittest.main()
