"""`gpusel sim shell MACHINE -- COMMAND`: the machine's device files and the driver's procfs entries
in a private mount namespace (issue 32), checked against `gpusel list --json`, as root and as an
ordinary user (a user namespace), and with Slurm's own NVML autodetection (`slurmd -G`, gres.conf
`AutoDetect=nvml`), which finds MIG devices only through /proc/driver/nvidia-caps/mig-minors.

Slurm's gpu/nvml plugin is in Debian's contrib component: scripts/fetch-extras fetches it into the
build folder (a private apt configuration); that part is skipped when it cannot be fetched, when
slurmd is not installed, and on sanitizer builds (slurmd cannot load instrumented doubles)."""

import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from support import BIN, INSTRUMENTED, MACHINES, SOURCE, Case, base_env, gpusel, gpusel_json

BUILD = os.environ.get("GPUSEL_BUILD_DIR", "build")
EXTRAS = os.path.join(BUILD, "extras")
SLURM_PLUGINS = "/usr/lib/x86_64-linux-gnu/slurm-wlm"


def cap_minor(gpu, gi, ci=None):
    """The driver's MIG capability minor (/proc/driver/nvidia-caps/mig-minors): 1 config, 2 monitor,
    then per GPU (32) and GPU instance (15): its access file, then compute instances 0-7."""
    base = 3 + (gpu * 15 + gi) * 9
    return base if ci is None else base + 1 + ci


LOOK = r'''
import json, os
out = {"dev": sorted(os.listdir("/dev")), "caps": sorted(os.listdir("/dev/nvidia-caps")),
       "kinds": {}, "info": {}, "env": os.environ.get("GPUSEL_SIM_SHELL")}
for name in out["dev"] + ["nvidia-caps/" + c for c in out["caps"]]:
    if name.startswith("nvidia"):
        st = os.stat("/dev/" + name)
        out["kinds"][name] = [oct(st.st_mode & 0o170000), os.major(st.st_rdev), os.minor(st.st_rdev)]
out["minors"] = open("/proc/driver/nvidia-caps/mig-minors").read()
for bus in os.listdir("/proc/driver/nvidia/gpus"):
    out["info"][bus] = open("/proc/driver/nvidia/gpus/" + bus + "/information").read()
out["version"] = open("/proc/driver/nvidia/version").read()
out["null"] = os.path.exists("/dev/null") and os.path.isdir("/dev/pts")
print(json.dumps(out))
'''


def shell(machine, *command, user=None, **env):
    cmd = [BIN, "sim", "shell", machine, "--", *command]
    if user is not None:
        cmd = ["runuser", "-u", user, "--", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, env=base_env(**env), timeout=120)


class SimShellTest(Case):
    @classmethod
    def setUpClass(cls):
        probe = shell("single-l4", "true")
        if probe.returncode != 0 and "namespace" in probe.stderr:
            raise unittest.SkipTest(f"no private mount namespace here: {probe.stderr.strip()}")

    def look(self, machine, user=None):
        r = shell(machine, "/usr/bin/python3", "-c", LOOK, user=user)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def check_machine(self, name, seen, root):
        listed = gpusel_json("--sim", name, "list", "--json")
        self.assertEqual(seen["env"], name)
        self.assertTrue(seen["null"], "the machine's own /dev entries are kept")
        char = oct(0o020000)
        for g in listed["gpus"]:
            kind = seen["kinds"][f"nvidia{g['index']}"]
            # As root, character devices of the driver's numbers; in a user namespace, links to
            # /dev/null (a character device too, which is what Slurm checks).
            self.assertEqual(kind, [char, 195, g["index"]] if root else [char, 1, 3])
            bus = g["pci_bus_id"][-12:].lower()
            info = seen["info"][bus]
            self.assertIn(f"GPU UUID: \t {g['uuid']}\n", info)
            self.assertIn(f"Model: \t\t {g['name']}\n", info)
            self.assertIn(f"Bus Location: \t {bus}\n", info)
            self.assertIn(f"Device Minor: \t {g['index']}\n", info)
            for m in g["mig_devices"]:
                gi, ci = m["gpu_instance"], m["compute_instance"]
                self.assertIn(f"gpu{g['index']}/gi{gi}/access {cap_minor(g['index'], gi)}\n", seen["minors"])
                self.assertIn(f"gpu{g['index']}/gi{gi}/ci{ci}/access {cap_minor(g['index'], gi, ci)}\n",
                              seen["minors"])
                for minor in (cap_minor(g["index"], gi), cap_minor(g["index"], gi, ci)):
                    self.assertIn(f"nvidia-cap{minor}", seen["caps"])
        self.assertEqual(len(seen["info"]), len(listed["gpus"]))
        self.assertEqual(sorted(n for n in seen["dev"] if re.fullmatch(r"nvidia\d+", n)),
                         sorted(f"nvidia{g['index']}" for g in listed["gpus"]))
        self.assertIn(listed["driver_version"], seen["version"])
        self.assertEqual(seen["minors"].count("\n"), 2 + 32 * 15 * 9)

    def test_mig_machine_as_root(self):
        if os.geteuid() != 0:
            self.skipTest("needs root")
        seen = self.look("mig-a100")
        self.check_machine("mig-a100", seen, root=True)
        # 3 MIG devices: the config and monitor capabilities, and 2 per MIG device.
        self.assertEqual(len(seen["caps"]), 2 + 2 * 3)

    def test_dgx_as_root(self):
        if os.geteuid() != 0:
            self.skipTest("needs root")
        self.check_machine("dgx-h100", self.look("dgx-h100"), root=True)

    def test_as_an_ordinary_user(self):
        if os.geteuid() != 0 or shutil.which("runuser") is None:
            self.skipTest("needs root to become another user")
        probe = shell("single-l4", "true", user="nobody")
        if probe.returncode != 0:
            self.skipTest(f"nobody cannot run the sim shell here: {probe.stderr.strip()[-300:]}")
        self.check_machine("mig-a100", self.look("mig-a100", user="nobody"), root=False)

    def test_the_machine_itself_is_untouched(self):
        before = {p: os.path.exists(p) for p in ("/dev/nvidia0", "/dev/nvidia-caps", "/proc/driver/nvidia-caps")}
        r = shell("mig-a100", "sh", "-c", "test -e /dev/nvidia0 && test -e /proc/driver/nvidia-caps/mig-minors")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual({p: os.path.exists(p) for p in before}, before)

    def test_bad_machine_and_nvml_fault(self):
        r = gpusel("sim", "shell", "no-such-machine", "--", "true")
        self.assertFailsWith(r, 2, "no-such-machine")
        r = gpusel("sim", "shell", "nvml-missing", "--", "true")
        self.assertFailsWith(r, 1, "sim shell nvml-missing", "gpusel sim exec")
        r = gpusel("sim", "shell", "dgx-h100", "--", "/no/such/program")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("/no/such/program", r.stderr)


@unittest.skipIf(INSTRUMENTED, "slurmd cannot load the instrumented doubles")
class SlurmAutodetectTest(Case):
    """slurmd -G with AutoDetect=nvml on mig-a100: the whole GPU and each MIG device, with the
    device files Slurm would fence a job into."""

    @classmethod
    def setUpClass(cls):
        if shutil.which("slurmd") is None:
            raise unittest.SkipTest("slurmd is not installed (scripts/install-deps installs it)")
        if os.geteuid() != 0:
            raise unittest.SkipTest("needs root (slurmd -G reads root's configuration paths)")
        r = subprocess.run([os.path.join(SOURCE, "scripts", "fetch-extras"), EXTRAS, "slurm-wlm-nvml-plugin"],
                           capture_output=True, text=True, timeout=600)
        cls.plugins = os.path.join(EXTRAS, "root", SLURM_PLUGINS.lstrip("/"))
        if r.returncode != 0 or not os.path.isfile(os.path.join(cls.plugins, "gpu_nvml.so")):
            raise unittest.SkipTest(f"Slurm's gpu/nvml plugin could not be fetched: {r.stderr.strip()[-300:]}")
        cls.tmp = tempfile.mkdtemp(prefix="gpusel-slurm-")
        # Slurm drops a GPU whose CPU affinity names CPUs this machine lacks: the machine file's
        # GPUs are given this machine's CPUs (docs/simulator.md says so).
        cpus = sorted(os.sched_getaffinity(0))
        with open(os.path.join(MACHINES, "mig-a100.toml")) as f:
            text = f.read()
        text = re.sub(r'(?m)^cpus = ".*"$', f'cpus = "{cpus[0]}-{cpus[-1]}"', text)
        text = re.sub(r"(?m)^numa_node = .*$", "numa_node = 0", text)
        cls.machine = os.path.join(cls.tmp, "mig-a100-here.toml")
        with open(cls.machine, "w") as f:
            f.write(text)
        with open(os.path.join(cls.tmp, "slurm.conf"), "w") as f:
            f.write(f"""ClusterName=gpuselsim
SlurmctldHost=localhost(127.0.0.1)
GresTypes=gpu
PluginDir={SLURM_PLUGINS}:{os.path.abspath(cls.plugins)}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SlurmdParameters=config_overrides
SlurmdSpoolDir={cls.tmp}/spool
StateSaveLocation={cls.tmp}/state
SlurmdLogFile={cls.tmp}/slurmd.log
NodeName=localhost Gres=gpu:4 CPUs={len(cpus)} State=UNKNOWN
PartitionName=p Nodes=localhost Default=YES
""")
        with open(os.path.join(cls.tmp, "gres.conf"), "w") as f:
            f.write("AutoDetect=nvml\n")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def detect(self, how):
        conf = os.path.join(self.tmp, "slurm.conf")
        r = subprocess.run([BIN, "sim", how, self.machine, "--", "slurmd", "-G", "-f", conf, "-N", "localhost"],
                           capture_output=True, text=True, env=base_env(), timeout=120)
        return r.stdout + r.stderr, re.findall(r"Gres Name=gpu .*? File=(\S+)", r.stdout + r.stderr)

    def test_mig_devices_are_found_in_the_sim_shell(self):
        listed = gpusel_json("--sim", self.machine, "list", "--json")
        want = []
        for g in listed["gpus"]:
            if not g["mig_devices"]:
                want.append(f"/dev/nvidia{g['index']}")
            for m in g["mig_devices"]:
                gi, ci = m["gpu_instance"], m["compute_instance"]
                want.append(f"/dev/nvidia{g['index']},/dev/nvidia-caps/nvidia-cap{cap_minor(g['index'], gi)},"
                            f"/dev/nvidia-caps/nvidia-cap{cap_minor(g['index'], gi, ci)}")
        self.assertEqual(len(want), 4)
        out, files = self.detect("shell")
        self.assertEqual(sorted(files), sorted(want), out[-3000:])
        self.assertNotIn("mig-minors", out)
        self.assertNotIn("stat(/dev/nvidia", out)
        # Without the device files and procfs entries (sim exec), Slurm cannot find the MIG devices:
        # what the sim shell is for.
        out, files = self.detect("exec")
        self.assertIn("Could not open file `/proc/driver/nvidia-caps/mig-minors`", out)
        self.assertFalse(any("nvidia-cap" in f for f in files), out[-3000:])


if __name__ == "__main__":
    unittest.main()
