"""The simulator's shared usage folder is per user and checked (issues 19 and 21).

Another user who creates the default folder first (/tmp/gpusel-sim-UID), or puts a symbolic link
in it, must never make a victim's plain `gpusel list` follow the link or remove anything outside
it. Run as root: everything happens inside `unshare -m`, with two ordinary users that exist only
there (copies of the account files bind-mounted over /etc's) and a fresh tmpfs on /tmp, so the
machine's real accounts and /tmp are untouched; the victim's commands run with `runuser -u`.
Skipped when not root or without those tools.
"""

import os
import shlex
import shutil
import subprocess
import tempfile
import unittest

import support
from support import BIN, MACHINES, SIM_ROOT, Case, base_env

VICTIM, ATTACKER = "gpuselsimvictim", "gpuselsimattacker"
USERS = {VICTIM: 4201, ATTACKER: 4202}  # in the namespace only
UUID = "GPU-4ba71ab7-ac05-04a5-6cc6-be1805fdf179"  # dgx-h100's nvidia-smi 0


def fnv1a(text):
    h = 1469598103934665603
    for c in text.encode():
        h = ((h ^ c) * 1099511628211) % (1 << 64)
    return f"{h:016x}"


def readable_by_others(path):
    """Every folder above `path` can be passed by other users, and `path` read."""
    path = os.path.abspath(path)
    while path != "/":
        if not os.stat(path).st_mode & 0o001:
            return False
        path = os.path.dirname(path)
    return True


@unittest.skipUnless(hasattr(os, "geteuid") and os.geteuid() == 0, "needs root (runuser, unshare, mount)")
@unittest.skipUnless(all(shutil.which(t) for t in ("runuser", "unshare", "mount")),
                     "needs runuser, unshare and mount")
class StateDirTest(Case):
    @classmethod
    def setUpClass(cls):
        if not readable_by_others(BIN):
            raise unittest.SkipTest(f"{BIN} cannot be run by another user (a folder above it is private)")
        cls.victim, cls.attacker = USERS[VICTIM], USERS[ATTACKER]
        cls.accounts = tempfile.mkdtemp(prefix="gpusel-accounts-")
        cls.account_files = support.account_files(cls.accounts, USERS, "/nonexistent")
        cls.machine = os.path.abspath(os.path.join(MACHINES, "dgx-h100.toml"))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.accounts, ignore_errors=True)

    def run_isolated(self, script, **env):
        """`script` (sh) inside a private mount namespace with a fresh tmpfs on /tmp. A build or
        source tree under /tmp (a clone in /tmp/fresh) is carried over onto the fresh /tmp: bound
        to a holding place on a tmpfs of the namespace's own /mnt first, then back to its path."""
        trees = sorted({"/tmp/" + p.split("/")[2] for p in
                        (os.path.realpath(q) for q in (BIN, SIM_ROOT, MACHINES)) if p.startswith("/tmp/")})
        keep = "".join(f"mkdir /mnt/keep{i}; mount --bind {shlex.quote(t)} /mnt/keep{i}\n"
                       for i, t in enumerate(trees))
        back = "".join(f"mkdir -p {shlex.quote(t)}; mount --bind /mnt/keep{i} {shlex.quote(t)}\n"
                       for i, t in enumerate(trees))
        accounts = "".join(f"mount --bind {shlex.quote(path)} /etc/{name}\n"
                           for name, path in self.account_files.items())
        full = ("set -e\n" + accounts + ("mount -t tmpfs tmpfs /mnt\n" + keep if trees else "") +
                "mount -t tmpfs -o mode=1777 tmpfs /tmp\n" + back + script)
        environment = base_env(GPUSEL_SIM_STATE_DIR=None, XDG_RUNTIME_DIR=None, **env)
        environment.update(VICTIM=VICTIM, ATTACKER=ATTACKER, BIN=os.path.abspath(BIN), MACHINE=self.machine,
                           VUID=str(self.victim), KEY=fnv1a(self.machine), UUID=UUID)
        return subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", full],
                              capture_output=True, text=True, env=environment, timeout=120)

    # The victim's files: /tmp/victim/<key>/<uuid>/4242, a name the simulator's usage entries use,
    # that nobody holds a lock on (the kind of entry a stale-entry sweep removes).
    PLANT = """
mkdir -p /tmp/victim/$KEY/$UUID
echo precious > /tmp/victim/$KEY/$UUID/4242
chown -R $VICTIM /tmp/victim
chmod -R go-w /tmp/victim
"""
    VICTIM_LIST = """
runuser -u $VICTIM -- env -u GPUSEL_SIM_STATE_DIR -u XDG_RUNTIME_DIR $BIN --sim $MACHINE list > /tmp/out 2> /tmp/err && rc=0 || rc=$?
echo "rc=$rc"
echo "--- stderr"; cat /tmp/err
echo "--- left"; cat /tmp/victim/$KEY/$UUID/4242 2>&1 || true
"""

    def check(self, result, folder):
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("rc=0", result.stdout, result.stdout)
        left = result.stdout.split("--- left\n", 1)[1]
        self.assertEqual(left.strip(), "precious", "the victim's file was removed:\n" + result.stdout)
        err = result.stdout.split("--- stderr\n", 1)[1].split("--- left")[0]
        self.assertIn(folder, err)
        self.assertIn("GPUSEL_SIM_STATE_DIR", err)
        self.assertEqual(err.count("gpusel-sim ("), 1, err)  # said once, not per call

    def test_default_folder_made_a_link_by_another_user(self):
        result = self.run_isolated(self.PLANT + """
runuser -u $ATTACKER -- ln -s /tmp/victim /tmp/gpusel-sim-$VUID
""" + self.VICTIM_LIST)
        self.check(result, f"/tmp/gpusel-sim-{self.victim}")
        self.assertIn("symbolic link", result.stdout)

    def test_default_folder_made_by_another_user_holding_a_link(self):
        result = self.run_isolated(self.PLANT + """
runuser -u $ATTACKER -- mkdir -m 777 /tmp/gpusel-sim-$VUID
runuser -u $ATTACKER -- chmod 777 /tmp/gpusel-sim-$VUID
runuser -u $ATTACKER -- ln -s /tmp/victim/$KEY /tmp/gpusel-sim-$VUID/$KEY
""" + self.VICTIM_LIST)
        self.check(result, f"/tmp/gpusel-sim-{self.victim}")
        self.assertIn(f"belongs to user id {self.attacker}", result.stdout)

    def test_a_link_inside_the_users_own_folder(self):
        # The victim's own folder, but the machine's level inside it is a link (planted while it
        # was writable, say): refused, not followed.
        result = self.run_isolated(self.PLANT + """
mkdir -m 700 /tmp/gpusel-sim-$VUID
ln -s /tmp/victim/$KEY /tmp/gpusel-sim-$VUID/$KEY
chown -h $VICTIM /tmp/gpusel-sim-$VUID /tmp/gpusel-sim-$VUID/$KEY
""" + self.VICTIM_LIST)
        self.check(result, f"/tmp/gpusel-sim-{self.victim}/{fnv1a(self.machine)}")

    def test_a_sound_default_folder_is_made_private_and_used(self):
        result = self.run_isolated("""
runuser -u $VICTIM -- env -u GPUSEL_SIM_STATE_DIR -u XDG_RUNTIME_DIR $BIN --sim $MACHINE list > /tmp/out 2> /tmp/err && rc=0 || rc=$?
echo "rc=$rc"; cat /tmp/err
# A GPU's folder is made by the first process with a context there (bind's), not by a look.
runuser -u $VICTIM -- env -u GPUSEL_SIM_STATE_DIR -u XDG_RUNTIME_DIR $BIN --sim $MACHINE bind --gpu 0 > /tmp/out 2> /tmp/err && rc=0 || rc=$?
echo "rc=$rc"; cat /tmp/err
stat -c '%U %a' /tmp/gpusel-sim-$VUID /tmp/gpusel-sim-$VUID/$KEY /tmp/gpusel-sim-$VUID/$KEY/$UUID
""")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertEqual(result.stdout.count("rc=0"), 2, result.stdout)
        self.assertEqual(result.stdout.count(f"{VICTIM} 700"), 3, result.stdout)
        self.assertNotIn("gpusel-sim (", result.stdout)

if __name__ == "__main__":
    unittest.main()
