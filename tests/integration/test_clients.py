"""Real third-party GPU software from Debian on the simulated machines (issue 10): Blender's Cycles
device enumeration, numba's cuda.detect() and a program on the Rust nvml-wrapper crate (built offline
from Debian's vendored crates). Each compares what the client sees with `gpusel list --json --probe`
and the machine file. A client that is not installed is skipped (scripts/install-deps installs them);
run through `launchers.py run test_clients`, a module whose every test was skipped exits 77.

Each client starts a few times at most: Blender takes about 2 s, numba 0.5 s, the Rust program
milliseconds (its first build about 20 s, cached in the build folder).
"""

import json
import os
import shutil
import subprocess
import tempfile
import unittest

from support import BIN, SIM_ROOT, Case, base_env, machine, sim_env

BUILD = os.environ.get("GPUSEL_BUILD_DIR", "build")
DEBIAN_PYTHON = "/usr/bin/python3"  # numba is Debian's python3-numba, not in another interpreter
CARGO_REGISTRY = "/usr/share/cargo/registry"
INSTRUMENTED = "GPUSEL_TEST_PRELOAD" in os.environ  # the doubles carry a sanitizer runtime


def expected(name, **env):
    """CUDA's devices as gpusel sees them under `env`: [(uuid, name, pci_bus_id, memory)] in ordinal order."""
    r = subprocess.run([BIN, "--sim", name, "list", "--json", "--probe"], capture_output=True, text=True,
                       env=base_env(**env), timeout=60)
    if r.returncode != 0:
        raise AssertionError(r.stdout + r.stderr)
    data = json.loads(r.stdout)
    by_index = {g["index"]: g for g in data["gpus"]}
    out = []
    for d in sorted(data["probe"]["devices"], key=lambda d: d["cuda_ordinal"]):
        g = by_index[d["index"]]
        out.append((d["uuid"], d["name"], g["pci_bus_id"], g["memory_total_bytes"]))
    return out


def short_bus(bus_id):
    """00000000:2A:00.0 -> 0000:2a:00 (the form Cycles puts in its device ids)."""
    domain, bus, rest = bus_id.split(":")
    return f"{int(domain, 16):04x}:{bus.lower()}:{rest.split('.')[0].lower()}"


def run_client(cmd, name, timeout=120, **env):
    # As on NVIDIA's drivers, CUdevice handles equal the ordinals: numba checks it.
    env.setdefault("GPUSEL_SIM_DEVICE_HANDLES", None)
    r = subprocess.run(cmd, capture_output=True, text=True, env=sim_env(name, **env), timeout=timeout)
    if r.returncode != 0 or r.returncode < 0:
        raise AssertionError(f"{cmd[0]} on {name} {env}: exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r


def skip_reason(program):
    if INSTRUMENTED:
        return "the doubles are built with a sanitizer; a foreign program cannot load them"
    if shutil.which(program) is None and not os.path.exists(program):
        return f"not installed: {program} (scripts/install-deps installs it)"
    return None


CYCLES = r'''
import bpy, json, sys
prefs = bpy.context.preferences.addons["cycles"].preferences
prefs.compute_device_type = "CUDA"
devices = [{"name": d.name, "id": d.id} for d in prefs.get_devices_for_type("CUDA") if d.type == "CUDA"]
print("CYCLES " + json.dumps(devices))
sys.stdout.flush()
'''


class BlenderTest(Case):
    """Cycles lists CUDA devices by name and PCI address, in CUDA's order."""

    @classmethod
    def setUpClass(cls):
        reason = skip_reason("blender")
        if reason:
            raise unittest.SkipTest(reason)
        cls.tmp = tempfile.mkdtemp(prefix="gpusel-clients-")
        cls.script = os.path.join(cls.tmp, "cycles.py")
        with open(cls.script, "w") as f:
            f.write(CYCLES)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def cycles(self, name, **env):
        # Its home and its temporary files (its sound library's runtime folder among them) in the
        # test's own folder, never the machine's /tmp.
        r = run_client(["blender", "-b", "--factory-startup", "--python", self.script], name,
                       HOME=self.tmp, TMPDIR=self.tmp, **env)
        lines = [l for l in r.stdout.splitlines() if l.startswith("CYCLES ")]
        self.assertEqual(len(lines), 1, r.stdout + r.stderr)
        return json.loads(lines[0][len("CYCLES "):])

    def check(self, name, **env):
        want = expected(name, **env)
        got = self.cycles(name, **env)
        self.assertEqual([(d["name"], d["id"]) for d in got],
                         [(n, f"CUDA_{n}_{short_bus(bus)}") for _, n, bus, _ in want], (name, env))

    def test_dgx_all_eight(self):
        self.check("dgx-h100")  # 8 GPUs: Cycles asks cuDeviceCanAccessPeer for every pair

    def test_mixed_default_order(self):
        self.check("workstation-mixed")

    def test_mixed_visible_devices(self):
        self.check("workstation-mixed", CUDA_VISIBLE_DEVICES="2,0")
        self.check("workstation-mixed", CUDA_DEVICE_ORDER="PCI_BUS_ID", CUDA_VISIBLE_DEVICES="GPU-3ce1,1")


NUMBA = r'''
import json
from numba import cuda
cuda.detect()
out = []
for g in cuda.gpus:
    with g:
        d = cuda.current_context().device
        free, total = cuda.current_context().get_memory_info()
        out.append({"name": d.name.decode() if isinstance(d.name, bytes) else d.name, "uuid": d.uuid,
                    "bus": d.PCI_BUS_ID, "domain": d.PCI_DOMAIN_ID, "cc": list(d.compute_capability),
                    "total": total, "free": free})
print("NUMBA " + json.dumps(out))
'''


class NumbaTest(Case):
    """numba's cuda.detect() runs through, and its devices are CUDA's, in order."""

    @classmethod
    def setUpClass(cls):
        reason = skip_reason(DEBIAN_PYTHON)
        if not reason and subprocess.run([DEBIAN_PYTHON, "-c", "import numba.cuda"], capture_output=True).returncode:
            reason = "not installed: python3-numba (scripts/install-deps installs it)"
        if reason:
            raise unittest.SkipTest(reason)

    def numba(self, name, **env):
        r = run_client([DEBIAN_PYTHON, "-c", NUMBA], name, **env)
        self.assertIn("devices are supported", r.stdout)
        line = [l for l in r.stdout.splitlines() if l.startswith("NUMBA ")][0]
        return json.loads(line[len("NUMBA "):])

    def check(self, name, **env):
        want = expected(name, **env)
        got = self.numba(name, **env)
        self.assertEqual([(d["uuid"], d["name"], d["bus"], d["total"]) for d in got],
                         [(u, n, int(bus.split(":")[1], 16), mem) for u, n, bus, mem in want], (name, env))
        for d in got:
            self.assertLess(d["free"], d["total"])

    def test_machines(self):
        self.check("dgx-h100")
        self.check("workstation-mixed")
        self.check("workstation-mixed", CUDA_VISIBLE_DEVICES="1,2")
        self.check("lost-gpu", CUDA_VISIBLE_DEVICES="2,0")


RUST_MAIN = r'''
// What a monitoring tool reads through nvml-wrapper, one JSON object per line.
use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor, TemperatureThreshold};
use nvml_wrapper::Nvml;
use std::ffi::OsStr;

fn q(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}
fn r<T: std::fmt::Debug, E: std::fmt::Display>(v: Result<T, E>) -> String {
    match v {
        Ok(x) => q(&format!("{:?}", x)),
        Err(e) => q(&format!("error: {}", e)),
    }
}

fn main() {
    let path = std::env::var("GPUSEL_NVML_LIBRARY").unwrap_or_else(|_| "libnvidia-ml.so.1".into());
    let nvml = Nvml::builder().lib_path(OsStr::new(&path)).init().expect("nvmlInit_v2");
    println!("{{\"driver\": {}, \"nvml\": {}, \"cuda\": {}}}", r(nvml.sys_driver_version()),
             r(nvml.sys_nvml_version()), r(nvml.sys_cuda_driver_version()));
    let count = nvml.device_count().expect("device_count");
    for i in 0..count {
        let d = match nvml.device_by_index(i) {
            Ok(d) => d,
            Err(e) => { println!("{{\"index\": {}, \"error\": {}}}", i, q(&e.to_string())); continue; }
        };
        let pci = d.pci_info().expect("pci_info");
        let by_bus = nvml.device_by_pci_bus_id(pci.bus_id.as_str()).and_then(|b| b.uuid());
        let mem = d.memory_info().expect("memory_info");
        let mut links = Vec::new();
        for l in 0..18 {
            let link = d.link_wrapper_for(l);
            match link.is_active() {
                Ok(true) => links.push(match link.remote_pci_info() { Ok(p) => q(&p.bus_id), Err(e) => q(&format!("error: {}", e)) }),
                Ok(false) => links.push(q("inactive")),
                Err(_) => break,
            }
        }
        let mut ancestors = Vec::new();
        for j in 0..count {
            ancestors.push(match nvml.device_by_index(j) {
                Ok(o) => r(d.topology_common_ancestor(o)),
                Err(e) => q(&format!("error: {}", e)),
            });
        }
        println!(
            "{{\"index\": {}, \"uuid\": {}, \"name\": {}, \"bus_id\": {}, \"by_bus_id\": {}, \"memory_total\": {}, \
             \"architecture\": {}, \"brand\": {}, \"serial\": {}, \"cores\": {}, \"bus_width\": {}, \
             \"temperature\": {}, \"slowdown\": {}, \"power\": {}, \"power_limit\": {}, \"sm_clock\": {}, \
             \"max_sm_clock\": {}, \"mem_clock\": {}, \"pstate\": {}, \"fan\": {}, \"throttle\": {}, \
             \"nvlinks\": [{}], \"ancestors\": [{}]}}",
            i, q(&d.uuid().expect("uuid")), q(&d.name().expect("name")), q(&pci.bus_id), r(by_bus),
            mem.total, r(d.architecture()), r(d.brand()), r(d.serial()), r(d.num_cores()),
            r(d.memory_bus_width()), r(d.temperature(TemperatureSensor::Gpu)),
            r(d.temperature_threshold(TemperatureThreshold::Slowdown)), r(d.power_usage()),
            r(d.enforced_power_limit()), r(d.clock_info(Clock::SM)), r(d.max_clock_info(Clock::SM)),
            r(d.clock_info(Clock::Memory)), r(d.performance_state()), r(d.fan_speed(0)),
            r(d.current_throttle_reasons()), links.join(", "), ancestors.join(", "));
    }
}
'''

CARGO_TOML = '''[package]
name = "nvml-client"
version = "0.1.0"
edition = "2018"

[dependencies]
nvml-wrapper = "0.9"
'''

CARGO_CONFIG = f'''[source.crates-io]
replace-with = "debian"
[source.debian]
directory = "{CARGO_REGISTRY}"
[net]
offline = true
'''


def find_cargo():
    # Debian's cargo first: it matches Debian's vendored crates.
    for c in ("/usr/bin/cargo", shutil.which("cargo"), os.path.expanduser("~/.cargo/bin/cargo")):
        if c and os.access(c, os.X_OK):
            return c
    return None


class NvmlWrapperTest(Case):
    """A Rust program on Debian's nvml-wrapper 0.9 reads identity, sensors and topology."""

    @classmethod
    def setUpClass(cls):
        cargo = find_cargo()
        if INSTRUMENTED:
            raise unittest.SkipTest("the doubles are built with a sanitizer")
        if cargo is None:
            raise unittest.SkipTest("not installed: cargo (scripts/install-deps installs it)")
        if not os.path.isdir(os.path.join(CARGO_REGISTRY, "nvml-wrapper-0.9.0")):
            raise unittest.SkipTest("not installed: librust-nvml-wrapper-dev (scripts/install-deps installs it)")
        project = os.path.join(os.path.abspath(BUILD), "clients", "nvml-client")
        os.makedirs(os.path.join(project, "src"), exist_ok=True)
        os.makedirs(os.path.join(project, ".cargo"), exist_ok=True)
        for path, text in (("Cargo.toml", CARGO_TOML), (".cargo/config.toml", CARGO_CONFIG), ("src/main.rs", RUST_MAIN)):
            full = os.path.join(project, path)
            if not os.path.exists(full) or open(full).read() != text:
                with open(full, "w") as f:
                    f.write(text)
        if os.path.exists(os.path.join(project, "Cargo.lock")):
            os.remove(os.path.join(project, "Cargo.lock"))  # another cargo's lock format; offline it resolves alike
        r = subprocess.run([cargo, "build", "--offline", "--release", "-q"], cwd=project, capture_output=True,
                           text=True, env=base_env(), timeout=600)
        if r.returncode != 0:
            raise AssertionError("cargo build of the nvml-wrapper program failed:\n" + r.stderr[-4000:])
        cls.program = os.path.join(project, "target", "release", "nvml-client")

    def read(self, name):
        with tempfile.NamedTemporaryFile(prefix="gpusel-trace-") as trace:
            r = run_client([self.program], name, GPUSEL_SIM_TRACE=trace.name)
            log = open(trace.name).read()
        self.assertNotIn("MISSING", log)
        lines = [json.loads(l) for l in r.stdout.splitlines()]
        return lines[0], lines[1:], log

    def test_identity_against_gpusel(self):
        for name in ("dgx-h100", "workstation-mixed", "lost-gpu"):
            with self.subTest(machine=name):
                system, devices, _ = self.read(name)
                m = machine(name)
                self.assertEqual(system["driver"], f'"{m["driver_version"]}"')
                self.assertEqual(system["nvml"], f'"{m["cuda_driver_version"] // 1000}.{m["driver_version"]}"')
                listing = json.loads(subprocess.run([BIN, "--sim", name, "list", "--json"], capture_output=True,
                                                    text=True, env=base_env(), check=True).stdout)["gpus"]
                self.assertEqual(len(devices), len(listing))
                for d, g in zip(devices, listing):
                    if g["failure"]:
                        self.assertIn("fell off the bus", d["error"])  # NVML_ERROR_GPU_IS_LOST
                        continue
                    self.assertEqual((d["index"], d["uuid"], d["name"], d["bus_id"], d["memory_total"]),
                                     (g["index"], g["uuid"], g["name"], g["pci_bus_id"], g["memory_total_bytes"]))
                    self.assertEqual(d["by_bus_id"], f'"{g["uuid"]}"')  # the CUDA-to-NVML mapping

    def test_sensors_and_identity_per_model(self):
        _, mixed, _ = self.read("workstation-mixed")
        a4000, rtx4090, a6000 = mixed
        # Numbers and enums as Rust's Debug prints them; strings quoted.
        self.assertEqual((a4000["bus_width"], rtx4090["bus_width"], a6000["bus_width"]), ("256", "384", "384"))
        self.assertEqual((a4000["max_sm_clock"], rtx4090["max_sm_clock"]), ("1560", "2520"))
        self.assertEqual(rtx4090["brand"], "GeForce")
        self.assertEqual(a6000["brand"], "NvidiaRTX")
        self.assertIn("not available", rtx4090["serial"])  # GeForce boards report no serial
        self.assertRegex(a4000["serial"], r'^"\d{13}"$')
        self.assertEqual(a4000["architecture"], "Ampere")
        self.assertEqual(a4000["cores"], "6144")  # 48 SMs x 128
        self.assertEqual(a4000["fan"], "30")
        self.assertEqual(a4000["throttle"], "GPU_IDLE")
        self.assertEqual(a4000["pstate"], "Zero")
        self.assertEqual(a4000["slowdown"], "89")
        _, dgx, _ = self.read("dgx-h100")
        h100 = dgx[0]
        self.assertEqual((h100["bus_width"], h100["max_sm_clock"], h100["mem_clock"]), ("5120", "1980", "2619"))
        self.assertIn("9", h100["architecture"])  # Hopper: newer than the crate's enum, which reports the value
        self.assertIn("not available", h100["fan"])  # passively cooled
        self.assertEqual(h100["power_limit"], "700000")
        for d in dgx + mixed:
            self.assertRegex(d["temperature"], r"^\d+$")
            self.assertRegex(d["power"], r"^\d+$")

    def test_topology_from_the_machine_file(self):
        _, dgx, _ = self.read("dgx-h100")
        gpus = machine("dgx-h100")["gpu"]
        for i, d in enumerate(dgx):
            self.assertEqual(len(d["nvlinks"]), 18)  # H100 SXM: 18 links, all to NVSwitches
            for j, level in enumerate(d["ancestors"]):
                a, b = gpus[i], gpus[j]
                want = ("Internal" if i == j else "Single" if a["pcie_switch"] == b["pcie_switch"]
                        else "Node" if a["numa_node"] == b["numa_node"] else "System")
                self.assertEqual(level, want, (i, j))
        _, mixed, _ = self.read("workstation-mixed")
        self.assertEqual([d["ancestors"] for d in mixed],
                         [["Internal", "HostBridge", "Node"], ["HostBridge", "Internal", "Node"],
                          ["Node", "Node", "Internal"]])
        self.assertEqual([d["nvlinks"] for d in mixed], [[], [], []])


if __name__ == "__main__":
    unittest.main()
