"""The queue of waiting jobs under attack by an ordinary user (issue 30): forged, sniped, revived
and planted tickets, stopped and impossible waiters, a store that cannot hold a ticket, and a
waiter in another pid namespace. Each attack must deny, delay past a moment, or reorder nobody.

Runs as root in the private mount namespace of test_leases_users (its users, its /var/lib); the
attacker is bob, the victims alice and carol. Exit 77 (skipped) when not root.
"""

import json
import os
import signal
import subprocess
import sys
import time

import test_leases_users as lu
from test_leases_users import DGX, STORE, SharedStoreCase, list_json, run_as, setup_store, start_as, stop, wait_for

QUEUE = f"{STORE}/queue"
PYTHON = "/usr/bin/python3"

# Run as the attacker: makes ticket files (argv: count, request text, name prefix), locks each with
# an exclusive flock, says "ready" and holds them until killed.
FORGER = r"""
import fcntl, os, resource, sys, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
count, text, prefix = int(sys.argv[1]), sys.argv[2].encode(), sys.argv[3]
held = []
for k in range(count):
    fd = os.open(f"%s/{prefix}{k}", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, text)
    fcntl.flock(fd, fcntl.LOCK_EX)
    held.append(fd)
print("ready", flush=True)
time.sleep(600)
""" % QUEUE

# Run as the attacker: takes an exclusive flock on an existing file (argv: path) and holds it.
SNIPER = r"""
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.flock(fd, fcntl.LOCK_EX)
print("ready", flush=True)
time.sleep(600)
"""

# Run as the attacker: the same, but the lock is left to a child and the process that took it
# ends, so that the kernel's lock table names a process that no longer exists.
SNIPER_FORKED = r"""
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.flock(fd, fcntl.LOCK_EX)
if os.fork() == 0:
    time.sleep(600)
    os._exit(0)
print("ready", flush=True)
os._exit(0)
"""

# Run as the attacker: holds a locked ticket (argv: text) and renames it to a new name every
# half second, so that each look sees a ticket it has not seen before.
RENAMER = r"""
import fcntl, os, sys, time
path = "%s/moving-0"
fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
os.write(fd, sys.argv[1].encode())
fcntl.flock(fd, fcntl.LOCK_EX)
print("ready", flush=True)
k = 0
while True:
    time.sleep(0.5)
    new = "%s/moving-%%d" %% (k + 1)
    os.rename(path, new)
    path, k = new, k + 1
""" % (QUEUE, QUEUE)

# Run as the attacker: watches the queue with inotify and takes a shared flock on every new file
# at once, holding them all (what another user's watcher could do before a ticket is locked).
WATCHER = r"""
import ctypes, fcntl, os, struct, sys, time
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(0)
assert libc.inotify_add_watch(fd, sys.argv[1].encode(), 0x100 | 0x80) >= 0  # IN_CREATE|IN_MOVED_TO
print("ready", flush=True)
held = []
while True:
    buf = os.read(fd, 65536)
    at = 0
    while at < len(buf):
        wd, mask, cookie, length = struct.unpack_from("iIII", buf, at)
        name = buf[at + 16:at + 16 + length].rstrip(b"\0").decode()
        at += 16 + length
        try:
            f = os.open(os.path.join(sys.argv[1], name), os.O_RDONLY | os.O_NONBLOCK)
            fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
            held.append(f)
        except OSError:
            pass
"""


def ticket_text(need, gpus, what):
    return f"gpusel-ticket 1\nneed {need}\nwhat {what}\n" + "".join(f"gpu {DGX[g]}\n" for g in gpus)


class QueueAttackCase(SharedStoreCase):
    def setUp(self):
        super().setUp()
        setup_store()

    def as_bob(self, script, *args):
        """Starts a Python script as bob and returns once it says it is ready."""
        p = subprocess.Popen(["runuser", "-u", "bob", "--", PYTHON, "-c", script, *args],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, process_group=0)
        self.procs.append(p)
        line = p.stdout.readline()
        if line.strip() != "ready":
            p.wait(timeout=30)
            self.fail(f"{line!r} {p.stderr.read()}")
        return p

    def forge(self, count, need, gpus, what="free:1", prefix="forged"):
        return self.as_bob(FORGER, str(count), ticket_text(need, gpus, what), prefix)

    def queue_as(self, user, *args):
        """Starts `gpusel run ARGS` as `user`; returns once it has a place in the queue."""
        before = len(self.waiting())
        p = start_as(user, "run", *args)
        self.procs.append(p)
        wait_for(lambda: len(self.waiting()) > before, f"{user}'s place in the queue")
        return p

    def assert_keeps_gpus_then_served(self, alice, carol, bob_asks="5"):
        """alice's waiting free:8 keeps the free GPUs from bob while carol holds GPU 0; served
        once carol's job ends."""
        r = run_as("bob", "run", "--gpu", bob_asks, "--", "true")
        self.assertFailsWith(r, 1, "1 earlier job waits", "free:8")
        stop(carol)
        out, err = alice.communicate(timeout=30)
        self.assertEqual(alice.returncode, 0, err)

    def waiting(self):
        return list_json()["waiting"]

    def queue_names(self):
        return sorted(n for n in os.listdir(QUEUE) if not n.startswith("."))


class ForgedTicketsTest(QueueAttackCase):
    def test_a_forged_locked_ticket_denies_nobody(self):
        # A hand-written ticket for every GPU, held locked: it never takes what it asks for.
        self.forge(1, 1, range(8))
        for gpus in ("free:1", "5"):
            r = run_as("alice", "run", "--gpu", gpus, "--", "true")
            self.assertEqual(r.returncode, 0, r.stderr)

    def test_two_thousand_forged_tickets_deny_nobody_and_make_no_flood_of_text(self):
        self.forge(2000, 1, range(8))
        r = run_as("alice", "run", "--gpu", "free:2", "--", "true", timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertLess(len(r.stderr.splitlines()), 20, r.stderr[:2000])

    def test_a_ticket_naming_a_gpu_that_does_not_exist_keeps_nothing(self):
        # It needs 9 GPUs of 8 real ones and one made up: it can never go.
        self.as_bob(FORGER, "1", ticket_text(9, range(8), "free:9") + "gpu GPU-nowhere\n", "fake")
        r = run_as("alice", "run", "--gpu", "free:1", "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_a_ticket_renamed_again_and_again_denies_nobody(self):
        self.as_bob(RENAMER, ticket_text(8, range(8), "free:8"))
        for gpus in ("0", "free:1"):
            r = run_as("alice", "run", "--gpu", gpus, "--", "true", timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)

    def test_a_refusal_behind_thousands_of_tickets_stays_short(self):
        # Tickets that cannot go now (GPU 4 is held): each keeps what it could use, as a real
        # waiter would, so the first keeps GPU 5 and the rest keep nothing and are not listed.
        carol = self.hold("carol", "4")
        self.forge(2000, 2, [4, 5], what="GPUs 4,5")
        r = run_as("alice", "run", "--gpu", "5", "--", "true", timeout=120)
        self.assertFailsWith(r, 1, "1 earlier job waits", "GPUs 4,5")
        self.assertLess(len(r.stderr.splitlines()), 5, r.stderr)
        stop(carol)

    def test_a_sniped_leftover_ticket_keeps_no_place(self):
        # alice waits for GPUs 3 and 4 while carol holds 4; her waiter is killed, leaving its ticket.
        carol = self.hold("carol", "4")
        waiter = self.queue_as("alice", "--gpu", "3,4", "--wait", "--", "true")
        [name] = self.queue_names()
        os.killpg(waiter.pid, signal.SIGKILL)
        waiter.communicate()
        # bob locks the dead ticket, so that it looks alive and keeps GPU 3 for "alice"; then
        # again through a child left holding the lock of a process that has ended.
        for sniper in (SNIPER, SNIPER_FORKED):
            p = self.as_bob(sniper, f"{QUEUE}/{name}")
            self.assertEqual(self.waiting(), [])
            r = run_as("carol", "run", "--gpu", "3", "--", "true")
            self.assertEqual(r.returncode, 0, r.stderr)
            subprocess.run(["pkill", "-KILL", "-u", "bob", "-f", "import fcntl"])
            p.wait()
        stop(carol)

    def test_an_empty_file_planted_early_and_armed_later_queues_from_its_arming(self):
        carol = self.hold("carol", "3")
        lu.sh_as("bob", f"touch {QUEUE}/early")
        time.sleep(0.05)
        alice = start_as("alice", "run", "--gpu", "3", "--wait", "30", "--", "true")
        self.procs.append(alice)
        wait_for(lambda: len(self.waiting()) == 1, "alice's place in the queue")
        # Armed: written and locked, after alice joined.
        self.as_bob(SNIPER.replace("os.O_RDONLY)", "os.O_WRONLY); os.write(fd, sys.argv[2].encode())"),
                    f"{QUEUE}/early", ticket_text(1, [3], "GPUs 3"))
        wait_for(lambda: len(self.waiting()) == 2, "bob's armed ticket to be seen")
        self.assertEqual([w["user"] for w in self.waiting()][0], "alice")
        stop(carol)
        out, err = alice.communicate(timeout=30)
        self.assertEqual(alice.returncode, 0, err)

    def test_another_users_watcher_cannot_lock_a_ticket_before_its_owner(self):
        carol = self.hold("carol", "3")
        self.as_bob(WATCHER, QUEUE)
        for k in range(40):
            r = run_as("alice", "run", "--gpu", "3", "--wait", "0.2", "--", "true")
            self.assertFailsWith(r, 1, "still waiting after")
            self.assertNotIn("without a place in the queue", r.stderr, f"try {k}")
        stop(carol)


class WaitersThatCannotGoTest(QueueAttackCase):
    def test_a_stopped_waiter_holds_nobody_back(self):
        carol = self.hold("carol", "3")
        alice = self.queue_as("alice", "--gpu", "3", "--wait", "--", "true")
        os.killpg(alice.pid, signal.SIGSTOP)
        wait_for(lambda: lu.proc_state(alice.pid) == "T", "alice's waiter to stop")
        stop(carol)
        r = run_as("bob", "run", "--gpu", "3", "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        os.killpg(alice.pid, signal.SIGCONT)
        out, err = alice.communicate(timeout=30)
        self.assertEqual(alice.returncode, 0, err)

    def test_an_impossible_memory_request_is_refused_not_queued(self):
        r = run_as("alice", "run", "--gpu", "free:1", "--min-free-memory", "81GiB", "--wait", "--", "true")
        self.assertFailsWith(r, 2, "can never be met", "81")
        self.assertEqual(self.queue_names(), [])

    def test_waiting_for_a_gpu_one_holds_oneself_blocks_no_one_else(self):
        alice_holds = self.hold("alice", "3")
        alice_waits = self.queue_as("alice", "--gpu", "3", "--wait", "--", "true")
        r = run_as("bob", "run", "--gpu", "free:1", "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = run_as("bob", "run", "--gpu", "free:2", "--wait", "4", "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        stop(alice_holds)

    def test_a_large_waiter_behind_another_users_gpu_still_keeps_the_free_ones(self):
        # The reservation that protects a large request is kept: only self-made waits lose it.
        carol = self.hold("carol", "0")
        alice = self.queue_as("alice", "--gpu", "free:8", "--wait", "--", "true")
        self.assert_keeps_gpus_then_served(alice, carol, bob_asks="free:1")

    def test_a_ticket_written_under_umask_077_is_still_read_by_others(self):
        carol = self.hold("carol", "0")
        env = lu.user_env("alice")
        alice = subprocess.Popen(
            ["setpriv", "--reuid=alice", "--regid=alice", "--init-groups", "sh", "-c",
             "umask 077; exec env -i " + " ".join(f"'{k}={v}'" for k, v in env.items()) +
             f" {os.path.realpath(lu.BIN)} --sim dgx-h100 run --gpu free:8 --wait -- true"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, process_group=0)
        self.procs.append(alice)
        wait_for(lambda: self.queue_names(), "alice's ticket")
        [name] = self.queue_names()
        self.assertEqual(os.stat(f"{QUEUE}/{name}").st_mode & 0o777, 0o644)
        self.assert_keeps_gpus_then_served(alice, carol)


class StoreStateTest(QueueAttackCase):
    def small_store(self, size):
        """The shared store on a tmpfs of its own of `size` (mount options), set up afresh."""
        os.makedirs(STORE, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"{size},mode=0755", "tmpfs", STORE], check=True)
        self.addCleanup(subprocess.run, ["umount", "-l", STORE])
        setup_store()

    def wait_through(self, expected):
        carol = self.hold("carol", "3")
        alice = start_as("alice", "run", "--gpu", "3", "--wait", "60", "--", "true")
        self.procs.append(alice)
        said = alice.stderr.readline()  # the one line a waiter says when it starts waiting
        self.assertIn("without a place in the queue", said)
        self.assertIn(expected, said)
        stop(carol)
        out, err = alice.communicate(timeout=60)
        self.assertEqual(alice.returncode, 0, said + err)
        self.assertNotIn("without a place in the queue", err)

    def test_a_full_store_does_not_end_a_wait(self):
        self.small_store("size=64k,nr_inodes=64")
        # bob fills the world-writable queue: its blocks, then its inodes.
        lu.sh_as("bob", f"dd if=/dev/zero of={QUEUE}/fill bs=4k 2>/dev/null; "
                        f"for k in $(seq 1 100); do : > {QUEUE}/f$k || break; done")
        self.wait_through("No space left on device")

    def test_a_read_only_store_does_not_end_a_wait(self):
        self.small_store("size=1m")
        subprocess.run(["mount", "-o", "remount,ro", STORE], check=True)
        self.wait_through("Read-only file system")


    def test_a_store_on_an_overlay_over_another_file_system_keeps_the_order(self):
        # The lower layer on a file system of its own: the overlay's files report another device
        # than the one the kernel's lock table names.
        base = "/var/lib/gpusel-test-overlay"
        os.makedirs(f"{base}/lower", exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "tmpfs", f"{base}/lower"], check=True)
        self.addCleanup(subprocess.run, ["umount", "-l", f"{base}/lower"])
        for d in ("upper", "work"):
            os.makedirs(f"{base}/{d}", exist_ok=True)
        os.makedirs(STORE, exist_ok=True)
        subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                        f"lowerdir={base}/lower,upperdir={base}/upper,workdir={base}/work", STORE],
                       check=True)
        self.addCleanup(subprocess.run, ["umount", "-l", STORE])
        setup_store()
        carol = self.hold("carol", "0")
        alice = self.queue_as("alice", "--gpu", "free:8", "--wait", "--", "true")
        self.assert_keeps_gpus_then_served(alice, carol)


class PidNamespaceTest(QueueAttackCase):
    def test_a_look_from_another_pid_namespace_keeps_a_live_ticket(self):
        carol = self.hold("carol", "3")
        alice = self.queue_as("alice", "--gpu", "3", "--wait", "--", "true")
        before = self.queue_names()
        env = lu.user_env("alice")
        r = subprocess.run(
            ["unshare", "-p", "-f", "--mount-proc", "setpriv", "--reuid=alice", "--regid=alice",
             "--init-groups", "env", "-i", *[f"{k}={v}" for k, v in env.items()],
             os.path.realpath(lu.BIN), "--sim", "dgx-h100", "run", "--gpu", "3", "--", "true"],
            capture_output=True, text=True, timeout=60)
        # Inside, the waiter is not visible, but its ticket is still alive and ahead.
        self.assertFailsWith(r, 1, "GPU 3")
        self.assertEqual(self.queue_names(), before)
        # And listed there, by its owner: its process cannot be named from inside.
        env = lu.user_env("bob")
        r = subprocess.run(
            ["unshare", "-p", "-f", "--mount-proc", "setpriv", "--reuid=bob", "--regid=bob",
             "--init-groups", "env", "-i", *[f"{k}={v}" for k, v in env.items()],
             os.path.realpath(lu.BIN), "--sim", "dgx-h100", "list", "--json"],
            capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        waiting = json.loads(r.stdout)["waiting"]
        self.assertEqual([(w["user"], w["pid"], w["request"]) for w in waiting], [("alice", None, f"GPUs {DGX[3]}")])
        stop(carol)
        out, err = alice.communicate(timeout=30)
        self.assertEqual(alice.returncode, 0, err)


if __name__ == "__main__":
    lu.main()
