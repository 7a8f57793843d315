"""System calls at 1,024 simulated GPUs (issue 34): `gpusel list` and `resolve --gpu free:4` make
fewer than 2,000 (`strace -f -c`; they made 70,000 and 95,000 when the simulator opened every
GPU's usage folder per query and gpusel asked the kernel its own pid per NVML call), and do not
call getpid per GPU. Counted, never timed; skipped without strace. bench/syscalls.py prints the
same counts beside 8 GPUs'."""

import os
import re
import shutil
import subprocess
import unittest

from support import BIN, CUDA_HOLD, INSTRUMENTED, Case, Holding, base_env, contexts, private_path, sim_env

GPUS = 1024
LIMIT = 2000


def h100_machine(count):
    """bench/simenv.py's generated machine: `count` H100s, 8 per NVLink domain."""
    lines = [f'name = "h100-{count}"', 'driver_version = "570.124.06"', "cuda_driver_version = 12080", ""]
    for i in range(count):
        node = i // 4
        lines += ["[[gpu]]",
                  f'uuid = "GPU-{0x5ca1e000 + i:08x}-{i % 65536:04x}-4000-8000-{i * 7919:012x}"',
                  'name = "NVIDIA H100 80GB HBM3"',
                  f'pci_bus_id = "{i // 128:08X}:{0x10 + i % 128:02X}:00.0"',
                  'memory_total = "80GiB"', 'compute_capability = "9.0"', "sm_count = 132",
                  f"numa_node = {node}", f'cpus = "{node * 4}-{node * 4 + 3}"',
                  "pcie_h2d_gbps = 55.2", "pcie_d2h_gbps = 55.6", "memory_bandwidth_gbps = 2950.0",
                  f"nvlink_domain = {i // 8}", f"pcie_switch = {i // 2}", ""]
    return "\n".join(lines)


def strace_calls(cmd, env):
    """{syscall: calls} of one run under `strace -f -c`, and the total."""
    out = private_path("strace.txt")
    r = subprocess.run(["strace", "-f", "-c", "-o", out, *cmd], env=env, capture_output=True, text=True,
                       timeout=300)
    if r.returncode != 0:
        raise AssertionError(f"{cmd} exited {r.returncode} under strace: {r.stderr[-2000:]}")
    calls, total = {}, None
    with open(out) as f:
        for line in f:
            fields = line.split()
            if len(fields) < 5 or not fields[0][0].isdigit():
                continue
            if fields[-1] == "total":
                total = int(fields[3])
            else:
                calls[fields[-1]] = int(fields[3])
    return calls, total


@unittest.skipUnless(shutil.which("strace"), "needs strace")
@unittest.skipIf(INSTRUMENTED, "a sanitizer runtime makes system calls of its own, and LeakSanitizer stops "
                 "under ptrace: the counts are for plain builds")
class SyscallsTest(Case):
    @classmethod
    def setUpClass(cls):
        # strace needs ptrace, which a container may refuse.
        probe = subprocess.run(["strace", "-f", "-c", "-o", os.devnull, "true"], capture_output=True)
        if probe.returncode != 0:
            raise unittest.SkipTest("strace cannot trace here: " + probe.stderr.decode()[-200:])
        cls.machine = private_path(f"h100-{GPUS}.toml")
        with open(cls.machine, "w") as f:
            f.write(h100_machine(GPUS))

    def env(self):
        out = subprocess.run([BIN, "sim", "env", self.machine], capture_output=True, text=True, check=True,
                             env=base_env()).stdout
        extra = {"GPUSEL_LEASE_DIR": private_path("leases"), "GPUSEL_SIM_STATE_DIR": private_path("sim-state")}
        for line in out.splitlines():
            if line.startswith("export "):
                key, _, value = line[len("export "):].partition("=")
                extra[key] = value.strip("'")
        return base_env(**extra)

    def check(self, env, what):
        for args in (["list"], ["resolve", "--gpu", "free:4"]):
            with self.subTest(command=args, state=what):
                subprocess.run([BIN, *args], env=env, check=True, capture_output=True, timeout=300)  # folders made
                calls, total = strace_calls([BIN, *args], env)
                self.assertIsNotNone(total)
                top = sorted(calls.items(), key=lambda kv: -kv[1])[:8]
                self.assertLess(total, LIMIT, f"{' '.join(args)} at {GPUS} GPUs ({what}): {top}")
                self.assertLess(calls.get("getpid", 0), 8, f"getpid per call is back: {top}")

    def test_idle_machine(self):
        self.check(self.env(), "idle")

    @unittest.skipUnless(os.path.exists(CUDA_HOLD), "needs the tests' cuda_hold")
    def test_a_gpu_in_use(self):
        env = self.env()
        with Holding([CUDA_HOLD, "{DIR}"], dict(env, CUDA_VISIBLE_DEVICES="0")) as h:
            self.assertEqual(len(h.ready), 1, "cuda_hold did not take its context")
            self.assertEqual(contexts(env), {next(iter(h.ready)): [0]})  # the usage entry is read
            self.check(env, "a context on GPU 0")


def files_touched(cmd, env):
    """The file system calls of one run (`strace -f -e trace=file`), one per line."""
    out = private_path("strace-files.txt")
    r = subprocess.run(["strace", "-f", "-e", "trace=file", "-o", out, *cmd], env=env, capture_output=True,
                       text=True, timeout=300)
    if r.returncode != 0:
        raise AssertionError(f"{cmd} exited {r.returncode} under strace: {r.stderr[-2000:]}")
    with open(out) as f:
        return f.read()


@unittest.skipUnless(shutil.which("strace"), "needs strace")
@unittest.skipIf(INSTRUMENTED, "LeakSanitizer stops under ptrace")
class ProbeHelperLookTest(Case):
    """The CUDA probe's helper is looked for (its path found, beside the library or in libexec) only
    when a probe runs: a resolution that NVML answers alone is spared the look (issue 34)."""

    def setUp(self):
        probe = subprocess.run(["strace", "-f", "-o", os.devnull, "true"], capture_output=True)
        if probe.returncode != 0:
            self.skipTest("strace cannot trace here: " + probe.stderr.decode()[-200:])

    def test_not_looked_for_where_nvml_answers(self):
        env = sim_env("dgx-h100", GPUSEL_LEASE_DIR=private_path("leases"))
        for args in (["resolve", "--gpu", "0,1"], ["resolve", "--gpu", "free:2"], ["bind", "--gpu", "3"]):
            with self.subTest(args=args):
                touched = files_touched([BIN, *args], env)
                self.assertEqual([line for line in touched.splitlines() if "gpusel-probe-cuda" in line], [])

    def test_looked_for_and_run_where_only_cuda_can_tell(self):
        # The mixed workstation under FASTEST_FIRST: "0" of CUDA_VISIBLE_DEVICES=0,2 is placed by asking CUDA.
        env = sim_env("workstation-mixed", CUDA_VISIBLE_DEVICES="0,2", GPUSEL_LEASE_DIR=private_path("leases"))
        touched = files_touched([BIN, "resolve", "--gpu", "0"], env)
        self.assertRegex(touched, r'execve\("[^"]*gpusel-probe-cuda"')



def first_looked_in(cmd, env):
    """{symbol: the file the dynamic loader searched first for it} over one run (LD_DEBUG=symbols):
    a relocation's search starts at the program, a dlsym on a library's handle at that library."""
    folder = private_path("ld-debug")
    os.makedirs(folder, exist_ok=True)
    r = subprocess.run(cmd, env=dict(env, LD_DEBUG="symbols", LD_DEBUG_OUTPUT=os.path.join(folder, "ld")),
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise AssertionError(f"{cmd} exited {r.returncode}: {r.stderr[-2000:]}")
    looked = {}
    for name in os.listdir(folder):
        previous = None
        with open(os.path.join(folder, name)) as f:
            for line in f:
                m = re.search(r"symbol=(\S+);\s+lookup in file=(\S+)", line)
                if m and m.group(1) != previous:
                    looked.setdefault(m.group(1), set()).add(os.path.basename(m.group(2)))
                previous = m.group(1) if m else None
        os.unlink(os.path.join(folder, name))
    return looked


def looked_up_by_handle(looked, library, prefix):
    return {symbol for symbol, first in looked.items() if library in first and symbol.startswith(prefix)}


@unittest.skipIf(INSTRUMENTED, "the sanitizers' runtimes are linked in and looked through")
class StartUpWorkTest(Case):
    """What every start of gpusel costs the dynamic loader (issue 34): the command loads only libc
    (the C++ runtime is linked in, and nothing pulls libm in: 36,000 instructions of every `bind`
    went to searching it), and of the driver libraries' functions (src/driver/*.def) a command
    looks up the required ones and those it calls, not the bandwidth benchmark's."""

    def test_the_command_needs_only_libc(self):
        for program in (BIN, os.path.join(os.path.dirname(os.path.dirname(BIN)), "libexec", "gpusel",
                                          "gpusel-probe-cuda")):
            with self.subTest(program=program):
                out = subprocess.run(["readelf", "-d", program], capture_output=True, text=True, check=True).stdout
                needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^]]+)\]", out))
                self.assertEqual(needed - {"libc.so.6", "ld-linux-x86-64.so.2"}, set(), out)

    def test_the_command_carries_no_cpp_locale_machinery(self):
        # Any C++ file or string stream, or fmt with std::locale, links in the C++ runtime's locale
        # set-up, whose ~1,400 vtable and typeinfo pointers the loader relocates at every start
        # (docs/performance.md). Read from the symbol table, which the build keeps.
        for program in (BIN, os.path.join(os.path.dirname(os.path.dirname(BIN)), "libexec", "gpusel",
                                          "gpusel-probe-cuda")):
            with self.subTest(program=program):
                out = subprocess.run(["nm", "--defined-only", program], capture_output=True, text=True,
                                     check=True).stdout
                if not out.strip():
                    self.skipTest(f"{program} has no symbol table")
                names = [line.split()[-1] for line in out.splitlines() if line.strip()]
                found = [n for n in names if n.startswith(("_ZNSt6locale", "_ZNSt8ios_base"))]
                self.assertEqual(found, [], "the program links the C++ locale machinery")

    def test_optional_driver_functions_are_looked_up_when_first_called(self):
        env = sim_env("dgx-h100", GPUSEL_LEASE_DIR=private_path("leases"))
        looked = first_looked_in([BIN, "bind", "--gpu", "3"], env)
        cuda = looked_up_by_handle(looked, "libcuda.so.1", "cu")
        self.assertLessEqual({"cuInit", "cuDeviceGetUuid_v2", "cuDevicePrimaryCtxRetain"}, cuda)
        self.assertEqual(cuda & {"cuMemAlloc_v2", "cuStreamCreate", "cuEventCreate", "cuLaunchKernel",
                                 "cuGetProcAddress_v2", "cuModuleLoadData"}, set(), sorted(cuda))
        self.assertLessEqual(len(cuda), 16, sorted(cuda))
        nvml = looked_up_by_handle(first_looked_in([BIN, "resolve", "--gpu", "0,1"], env), "libnvidia-ml.so.1", "nvml")
        self.assertIn("nvmlDeviceGetUUID", nvml)
        self.assertLessEqual(len(nvml), 10, sorted(nvml))


if __name__ == "__main__":
    unittest.main()
