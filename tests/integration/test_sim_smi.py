"""The simulator's nvidia-smi (issue 32): each form launch scripts use, on dgx-h100, mig-a100 and
workstation-mixed, compared with `gpusel list --json` and the machine files; memory a live simulated
process holds; bad options; and NVIDIA's own nvidia-smi (Debian's non-free package, fetched into
the build folder with a private apt configuration) stopping with the simulator's one line."""

import csv
import io
import os
import json
import re
import subprocess
import sys
import unittest

from support import (CUDA_HOLD, INSTRUMENTED, PYTHON_LOADS_LIBRARIES, SOURCE, Case, Holding, base_env, for_python,
                     gpusel, gpusel_json, machine, sim_env)

BUILD = os.environ.get("GPUSEL_BUILD_DIR", "build")
EXTRAS = os.path.join(BUILD, "extras")


def smi(name, *args, env=None):
    """`nvidia-smi ARGS` as a program on machine NAME finds it: through `gpusel sim env`'s PATH."""
    env = env or sim_env(name)
    return subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, env=env, timeout=60)


def ok(name, *args, env=None):
    r = smi(name, *args, env=env)
    if r.returncode != 0:
        raise AssertionError(f"nvidia-smi {' '.join(args)} on {name}: exit {r.returncode}: {r.stderr}")
    return r.stdout


def rows(text):
    return [[c.strip() for c in row] for row in csv.reader(io.StringIO(text))]


# What NVML itself answers for each GPU, read in a child on the machine (libnvidia-ml.so.1 by name,
# as nvidia-smi loads it): the values --query-gpu must show. NOT_SUPPORTED and the like: None.
NVML_PROBE = r'''
import ctypes, json
lib = ctypes.CDLL("libnvidia-ml.so.1")
assert lib.nvmlInit_v2() == 0
def value(fn, h, kind=ctypes.c_uint, *before):
    v = kind()
    return v.value if getattr(lib, fn)(h, *before, ctypes.byref(v)) == 0 else None
class Util(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]
class Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]
class Pci(ctypes.Structure):
    _fields_ = [("legacy", ctypes.c_char * 16), ("domain", ctypes.c_uint), ("bus", ctypes.c_uint),
                ("device", ctypes.c_uint), ("device_id", ctypes.c_uint), ("subsystem", ctypes.c_uint),
                ("bus_id", ctypes.c_char * 32)]
buf = ctypes.create_string_buffer(96)
out = {"driver": lib.nvmlSystemGetDriverVersion(buf, 96) == 0 and buf.value.decode(), "gpus": []}
count = ctypes.c_uint()
lib.nvmlDeviceGetCount_v2(ctypes.byref(count))
for i in range(count.value):
    h = ctypes.c_void_p()
    lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h))
    u, m, pci = Util(), Memory(), Pci()
    cur, pend = ctypes.c_int(), ctypes.c_int()
    ecc = lib.nvmlDeviceGetEccMode(h, ctypes.byref(cur), ctypes.byref(pend)) == 0
    temp = ctypes.c_uint()
    lib.nvmlDeviceGetPciInfo_v3(h, ctypes.byref(pci))
    out["gpus"].append({
        "util": [u.gpu, u.memory] if lib.nvmlDeviceGetUtilizationRates(h, ctypes.byref(u)) == 0 else None,
        "free": m.free if lib.nvmlDeviceGetMemoryInfo(h, ctypes.byref(m)) == 0 else None,
        "temperature": temp.value if lib.nvmlDeviceGetTemperature(h, 0, ctypes.byref(temp)) == 0 else None,
        "power": value("nvmlDeviceGetPowerUsage", h), "limit": value("nvmlDeviceGetEnforcedPowerLimit", h),
        "fan": value("nvmlDeviceGetFanSpeed", h), "pstate": value("nvmlDeviceGetPerformanceState", h, ctypes.c_int),
        "persistence": value("nvmlDeviceGetPersistenceMode", h),
        "gen": value("nvmlDeviceGetCurrPcieLinkGeneration", h), "width": value("nvmlDeviceGetCurrPcieLinkWidth", h),
        "minor": value("nvmlDeviceGetMinorNumber", h), "display": value("nvmlDeviceGetDisplayActive", h, ctypes.c_int),
        "compute_mode": value("nvmlDeviceGetComputeMode", h, ctypes.c_int), "ecc": cur.value if ecc else None,
        "vbios": lib.nvmlDeviceGetVbiosVersion(h, buf, 96) == 0 and buf.value.decode(), "device_id": pci.device_id,
    })
print(json.dumps(out))
'''


def nvml_answers(name):
    r = subprocess.run([sys.executable, "-c", NVML_PROBE], capture_output=True, text=True,
                       env=for_python(sim_env(name)), timeout=60)
    if r.returncode != 0:
        raise AssertionError(f"NVML probe on {name}: {r.stderr}")
    return json.loads(r.stdout)


def expected_row(nvml, g):
    """The --query-gpu row (nounits) of FIELDS below for one GPU of nvml_answers()."""
    na = "[N/A]"
    opt = lambda v, f=str: na if v is None else f(v)
    on = lambda v: na if v is None else ("Enabled" if v else "Disabled")
    return [nvml["driver"], opt(g["util"] and g["util"][0]), opt(g["util"] and g["util"][1]),
            opt(g["temperature"]), opt(g["power"], lambda mw: f"{mw / 1000:.2f}"),
            opt(g["limit"], lambda mw: f"{mw / 1000:.2f}"), opt(g["fan"]), opt(g["pstate"], lambda p: f"P{p}"),
            on(g["persistence"]), opt(g["gen"]), opt(g["width"]), opt(g["minor"]),
            opt(g["free"], lambda b: str(b >> 20)),
            on(g["ecc"]), on(g["display"]),
            opt(g["compute_mode"], lambda m: {0: "Default", 2: "Prohibited", 3: "Exclusive_Process"}[m]),
            g["vbios"] or na, f"0x{g['device_id']:08X}"]


FIELDS = ("driver_version,utilization.gpu,utilization.memory,temperature.gpu,power.draw,power.limit,fan.speed,"
          "pstate,persistence_mode,pcie.link.gen.current,pcie.link.width.current,minor_number,memory.free,"
          "ecc.mode.current,display_active,compute_mode,vbios_version,pci.device_id")


class SimSmiTest(Case):
    def test_it_is_the_simulators(self):
        env = sim_env("dgx-h100")
        found = subprocess.run(["sh", "-c", "command -v nvidia-smi"], capture_output=True, text=True, env=env)
        self.assertTrue(found.stdout.strip().endswith("/lib/gpusel/sim/bin/nvidia-smi"), found.stdout)
        # gpusel --sim MACHINE -- nvidia-smi finds it too.
        r = gpusel("--sim", "single-l4", "--", "nvidia-smi", "-L")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(machine("single-l4")["gpu"][0]["uuid"], r.stdout)

    def test_list(self):
        for name in ("dgx-h100", "mig-a100", "workstation-mixed"):
            listed = gpusel_json("--sim", name, "list", "--json")["gpus"]
            want = []
            for g in listed:
                want.append(f"GPU {g['index']}: {g['name']} (UUID: {g['uuid']})")
                for i, m in enumerate(g["mig_devices"]):
                    profile = m["name"][m["name"].index("MIG "):]
                    want.append(f"  {profile:<15} Device {i:2}: (UUID: {m['uuid']})")
            with self.subTest(machine=name):
                self.assertEqual(ok(name, "-L").splitlines(), want)

    def test_query_gpu_csv(self):
        fields = "index,name,uuid,pci.bus_id,memory.total,memory.used,compute_cap,mig.mode.current,count"
        for name in ("dgx-h100", "mig-a100", "workstation-mixed"):
            listed = gpusel_json("--sim", name, "list", "--json")["gpus"]
            table = rows(ok(name, f"--query-gpu={fields}", "--format=csv"))
            with self.subTest(machine=name):
                self.assertEqual(table[0], ["index", "name", "uuid", "pci.bus_id", "memory.total [MiB]",
                                            "memory.used [MiB]", "compute_cap", "mig.mode.current", "count"])
                self.assertEqual(len(table), len(listed) + 1)
                for g, row in zip(listed, table[1:]):
                    self.assertEqual(row, [str(g["index"]), g["name"], g["uuid"], g["pci_bus_id"],
                                           f"{g['memory_total_bytes'] >> 20} MiB", f"{g['memory_used_bytes'] >> 20} MiB",
                                           g["compute_capability"], "Enabled" if g["mig_enabled"] else "Disabled",
                                           str(len(listed))])
        bare = rows(ok("dgx-h100", "--query-gpu=index,memory.total", "--format=csv,noheader,nounits"))
        self.assertEqual(bare[0], ["0", str(80 << 10)])
        self.assertEqual(len(bare), 8)
        # -i by index, UUID prefix and bus id; several at once.
        dgx = machine("dgx-h100")["gpu"]
        picked = rows(ok("dgx-h100", "--query-gpu=index", "--format=csv,noheader", "-i",
                         f"5,{dgx[2]['uuid'][:12]},{dgx[7]['pci_bus_id']}"))
        self.assertEqual(picked, [["5"], ["2"], ["7"]])
        # count is every GPU of the machine, whatever -i picks.
        self.assertEqual(rows(ok("dgx-h100", "--query-gpu=index,count", "--format=csv,noheader", "-i", "3")),
                         [["3", "8"]])

    @unittest.skipUnless(PYTHON_LOADS_LIBRARIES, "Python cannot load the doubles in this build")
    def test_query_gpu_fields_are_nvmls(self):
        # Every other field, as NVML answers it for each GPU (an argument-order slip or a field read
        # from the wrong getter shows), on three machines.
        for name in ("dgx-h100", "mig-a100", "workstation-mixed"):
            nvml = nvml_answers(name)
            got = rows(ok(name, f"--query-gpu={FIELDS}", "--format=csv,noheader,nounits"))
            with self.subTest(machine=name):
                self.assertEqual(got, [expected_row(nvml, g) for g in nvml["gpus"]])
        # The machines differ where the fields should: GeForce without ECC, MIG without utilisation.
        mixed = {r[0]: r[1] for r in rows(ok("workstation-mixed", "--query-gpu=name,ecc.mode.current",
                                             "--format=csv,noheader"))}
        self.assertEqual(mixed["NVIDIA GeForce RTX 4090"], "[N/A]")
        self.assertEqual(mixed["NVIDIA RTX A4000"], "Disabled")
        mig = rows(ok("mig-a100", "--query-gpu=utilization.gpu,mig.mode.current", "--format=csv,noheader"))
        self.assertEqual(mig, [["[N/A]", "Enabled"], ["0 %", "Disabled"]])

    def test_csv_header_and_units(self):
        fields = "index,memory.total,utilization.gpu,power.draw,temperature.gpu"
        header = ["index", "memory.total [MiB]", "utilization.gpu [%]", "power.draw [W]", "temperature.gpu"]
        for fmt, with_header, units in (("csv", True, True), ("csv,noheader", False, True),
                                        ("csv,nounits", True, False), ("csv,noheader,nounits", False, False),
                                        ("nounits,csv", True, False)):
            with self.subTest(format=fmt):
                got = rows(ok("dgx-h100", f"--query-gpu={fields}", f"--format={fmt}", "-i", "0"))
                self.assertEqual(got[0] if with_header else None, header if with_header else None)
                row = got[1] if with_header else got[0]
                self.assertEqual(len(got), 2 if with_header else 1)
                self.assertEqual(row[:3], ["0", "81920 MiB", "0 %"] if units else ["0", "81920", "0"])
                self.assertRegex(row[3], r"^\d+\.\d\d W$" if units else r"^\d+\.\d\d$")
                self.assertRegex(row[4], r"^\d+$")
        # Spaces after the commas (as scripts write them), and the aliases keep the name asked for.
        got = rows(ok("dgx-h100", "--query-gpu=index, gpu_name, gpu_uuid", "--format=csv", "-i", "1"))
        self.assertEqual(got, [["index", "gpu_name", "gpu_uuid"],
                               ["1", "NVIDIA H100 80GB HBM3", machine("dgx-h100")["gpu"][1]["uuid"]]])
        # Nothing running: a header alone, or nothing at all.
        self.assertEqual(ok("dgx-h100", "--query-compute-apps=pid,used_memory", "--format=csv"),
                         "pid, used_gpu_memory [MiB]\n")
        self.assertEqual(ok("dgx-h100", "--query-compute-apps=pid", "--format=csv,noheader"), "")

    def test_id_selects_in_every_form(self):
        dgx = machine("dgx-h100")["gpu"]
        for args in (["-i", "4"], ["--id=4"], ["--id", "4"], ["-i", dgx[4]["uuid"]], ["-i", dgx[4]["pci_bus_id"]],
                     ["-i", dgx[4]["pci_bus_id"][4:]]):
            with self.subTest(args=args):
                self.assertEqual(ok("dgx-h100", "-L", *args),
                                 f"GPU 4: NVIDIA H100 80GB HBM3 (UUID: {dgx[4]['uuid']})\n")
        table = ok("dgx-h100", "--id=2")
        self.assertIn(dgx[2]["pci_bus_id"], table)
        self.assertNotIn(dgx[3]["pci_bus_id"], table)
        q = ok("dgx-h100", "-q", "--id=6")
        self.assertEqual(re.findall(r"^GPU (\S+)$", q, re.M), [dgx[6]["pci_bus_id"]])
        self.assertRegex(q, rf"GPU UUID +: {dgx[6]['uuid']}\n")
        mig = machine("mig-a100")["gpu"]
        self.assertEqual(ok("mig-a100", "-L", "-i", "1"), f"GPU 1: NVIDIA A100-SXM4-40GB (UUID: {mig[1]['uuid']})\n")
        self.assertIn("No MIG-enabled devices found.", smi("mig-a100", "mig", "-lgi", "-i", "1").stdout)

    def test_help_and_version(self):
        r = smi("dgx-h100", "-h")
        self.assertEqual(r.returncode, 0)
        for form in ("-L", "-q", "--query-gpu=", "--query-compute-apps=", "--format=csv", "topo -m", "mig -lgi",
                     "--version", "-i ID"):
            self.assertIn(form, r.stdout)
        self.assertEqual(smi("dgx-h100", "--help").stdout, r.stdout)
        for name in ("dgx-h100", "workstation-mixed"):
            version = ok(name, "--version")
            self.assertRegex(version, rf"DRIVER version +: {re.escape(machine(name)['driver_version'])}\n")
            self.assertRegex(version, r"CUDA Version +: 12\.8\n")

    def test_a_live_process_shows(self):
        # A simulated process with a context (and its reservation) on GPU 3: memory.used, the process list, the table.
        env = sim_env("dgx-h100", CUDA_VISIBLE_DEVICES="3")
        with Holding([CUDA_HOLD, "{DIR}"], env) as h:
            if len(h.ready) != 1:
                self.fail(f"cuda_hold did not start: {h.finish()}")
            pid = next(iter(h.ready))
            used = rows(ok("dgx-h100", "--query-gpu=index,memory.used", "--format=csv,noheader,nounits"))
            listed = gpusel_json("--sim", "dgx-h100", "list", "--json")["gpus"]
            self.assertEqual([int(r[1]) for r in used], [g["memory_used_bytes"] >> 20 for g in listed])
            self.assertGreater(int(used[3][1]), 0)  # the context's own reservation
            self.assertEqual(sum(int(r[1]) for r in used if r[0] != "3"), 0)
            apps = rows(ok("dgx-h100", "--query-compute-apps=pid,used_memory,gpu_uuid", "--format=csv"))
            self.assertEqual(apps[0], ["pid", "used_gpu_memory [MiB]", "gpu_uuid"])
            self.assertIn([str(pid), f"{int(used[3][1])} MiB", listed[3]["uuid"]], apps[1:])
            # Its name as NVML gives it (the first word of its command line), in the CSV and -q.
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                program = f.read().split(b"\0")[0].decode()
            apps = rows(ok("dgx-h100", "--query-compute-apps=pid,process_name,used_memory,gpu_bus_id",
                           "--format=csv,noheader,nounits"))
            self.assertEqual(apps, [[str(pid), program, used[3][1], listed[3]["pci_bus_id"]]])
            self.assertEqual(rows(ok("dgx-h100", "--query-compute-apps=pid", "--format=csv", "-i", "2")), [["pid"]])
            q = ok("dgx-h100", "-q", "-i", "3")
            self.assertRegex(q, rf"Process ID +: {pid}\n +Type +: C\n +Name +: {re.escape(program)}\n"
                                rf" +Used GPU Memory +: {used[3][1]} MiB\n")
            # Its context counts in GPU 3's utilisation (40% a process, docs/simulator.md) and nowhere else.
            util = rows(ok("dgx-h100", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"))
            self.assertEqual([int(u[0]) for u in util], [40 if i == 3 else 0 for i in range(8)])
            table = ok("dgx-h100")
            self.assertRegex(table, rf"\|\s+3\s+N/A\s+N/A\s+{pid}\s+C\s+")
            self.assertIn(f"{int(used[3][1])}MiB /  81920MiB", table)
            self.assertNotIn("No running processes found", table)
        self.assertIn("No running processes found", ok("dgx-h100"))

    def test_a_process_on_a_mig_device(self):
        # A context on GPU 0's second MIG device (GPU instance 4): booked to that slice, its memory the
        # parent GPU's used memory, listed with the parent's UUID and its instance ids.
        mig = machine("mig-a100")["gpu"][0]
        slice_ = mig["mig"][1]
        env = sim_env("mig-a100", CUDA_VISIBLE_DEVICES=slice_["uuid"])
        with Holding([CUDA_HOLD, "{DIR}"], env) as h:
            if len(h.ready) != 1:
                self.fail(f"cuda_hold did not start: {h.finish()}")
            pid = next(iter(h.ready))
            listed = gpusel_json("--sim", "mig-a100", "list", "--json")["gpus"]
            used = rows(ok("mig-a100", "--query-gpu=index,memory.used", "--format=csv,noheader,nounits"))
            self.assertEqual([int(r[1]) for r in used], [g["memory_used_bytes"] >> 20 for g in listed])
            self.assertGreater(int(used[0][1]), 0)
            self.assertEqual(used[1][1], "0")
            apps = rows(ok("mig-a100", "--query-compute-apps=pid,used_memory,gpu_uuid", "--format=csv,noheader"))
            self.assertEqual(apps, [[str(pid), f"{used[0][1]} MiB", mig["uuid"]]])
            table = ok("mig-a100")
            self.assertRegex(table, rf"\|\s+0\s+4\s+0\s+{pid}\s+C\s+")
            # The MIG devices section: that slice's memory in use, the others' none.
            slices = re.findall(r"^\|\s+0\s+(\d+)\s+0\s+(\d+)\s+\|\s+(\d+)MiB / (\d+)MiB", table, re.M)
            self.assertEqual([(int(gi), int(dev)) for gi, dev, _, _ in slices], [(3, 0), (4, 1), (5, 2)])
            self.assertEqual([int(u) > 0 for _, _, u, _ in slices], [False, True, False])
            self.assertEqual([int(t) for _, _, _, t in slices], [9984] * 3)
            q = ok("mig-a100", "-q", "-i", "0")
            self.assertRegex(q, rf"GPU instance ID +: 4\n +Compute instance ID +: 0\n +Process ID +: {pid}\n")

    def test_table_and_details(self):
        table = ok("workstation-mixed")
        for g in gpusel_json("--sim", "workstation-mixed", "list", "--json")["gpus"]:
            self.assertIn(g["pci_bus_id"], table)
            self.assertIn(f"{g['memory_total_bytes'] >> 20}MiB", table)
        self.assertRegex(table, r"Driver Version: 570\.133\.07 +CUDA Version: 12\.8")
        q = ok("dgx-h100", "-q", "-d", "MEMORY", "-i", "1")
        self.assertIn("GPU " + machine("dgx-h100")["gpu"][1]["pci_bus_id"], q)
        self.assertRegex(q, r"Total +: 81920 MiB")
        self.assertNotIn("Product Name", q)
        full = ok("mig-a100", "-q")
        self.assertRegex(full, r"Attached GPUs +: 2")
        self.assertRegex(full, r"MIG Mode\n +Current +: Enabled")
        self.assertIn(machine("mig-a100")["gpu"][1]["uuid"], full)
        version = ok("dgx-h100", "--version")
        self.assertRegex(version, r"DRIVER version +: 570\.124\.06")
        # Every -d section on every machine: the bus ids, the totals, only the sections asked for.
        for name in ("dgx-h100", "mig-a100", "workstation-mixed"):
            listed = gpusel_json("--sim", name, "list", "--json")["gpus"]
            with self.subTest(machine=name):
                pci = ok(name, "-q", "-d", "PCI,MEMORY")
                self.assertEqual(re.findall(r"Bus Id +: (\S+)", pci), [g["pci_bus_id"] for g in listed])
                self.assertEqual(re.findall(r"FB Memory Usage\n +Total +: (\d+) MiB", pci),
                                 [str(g["memory_total_bytes"] >> 20) for g in listed])
                self.assertNotIn("Utilization", pci)
                other = ok(name, "-q", "-d", "utilization,ECC,TEMPERATURE,POWER,COMPUTE")
                self.assertEqual(other.count("GPU Current Temp"), len(listed))
                self.assertEqual(other.count("Compute Mode"), len(listed))
                self.assertEqual(len(re.findall(r"ECC Mode\n +Current +: (Enabled|Disabled|N/A)", other)), len(listed))
                self.assertNotIn("FB Memory Usage", other)
                self.assertEqual(re.findall(r"Power Draw +: (\S+ W|N/A)", other),
                                 [r[0] + " W" if r[0] != "[N/A]" else "N/A" for r in
                                  rows(ok(name, "--query-gpu=power.draw", "--format=csv,noheader,nounits"))])
        # The table: the ECC column as the boards have it (on: a count; off; none on GeForce), Disp.A.
        ecc = re.findall(r"^\|\s+\d+\s+NVIDIA (.+?)\s+On\s+\|\s+\S+\s+(On|Off)\s+\|\s+(\S+)\s+\|", table, re.M)
        self.assertEqual(ecc, [("RTX A4000", "Off", "Off"), ("GeForce RTX 4090", "Off", "N/A"),
                               ("RTX A6000", "Off", "Off")])
        self.assertRegex(ok("dgx-h100", "-i", "0"), r"00000000:18:00\.0 Off \|\s+0 \|")
        # MIG: the table lists the slices under the GPUs, with GI ids and memory totals; -q too.
        mig_table = ok("mig-a100")
        self.assertIn("| MIG devices:", mig_table)
        self.assertNotIn("| MIG devices:", ok("dgx-h100"))
        self.assertRegex(full, r"MIG Devices\n +MIG Device\n +Index +: 0\n +GPU Instance ID +: 3\n")
        self.assertEqual(re.findall(r"MIG Device UUID +: (\S+)", full),
                         [m["uuid"] for m in machine("mig-a100")["gpu"][0]["mig"]])

    def test_topology_and_mig(self):
        topo = ok("dgx-h100", "topo", "-m").splitlines()
        self.assertEqual(topo[0].split("\t")[1:9], [f"GPU{i}" for i in range(8)])
        for i in range(8):
            cells = topo[1 + i].split("\t")
            self.assertEqual(cells[1 + i], " X ")
            self.assertEqual([c for j, c in enumerate(cells[1:9]) if j != i], ["NV18"] * 7)  # NVSwitch
        self.assertEqual(topo[1].split("\t")[9], "0-55,112-167")
        mixed = ok("workstation-mixed", "topo", "-m").splitlines()
        self.assertNotIn("NV", "".join(mixed[1:4]))
        mig = ok("mig-a100", "mig", "-lgi")
        want = [(m["name"][m["name"].index("MIG ") + 4:], m["gpu_instance"])
                for m in gpusel_json("--sim", "mig-a100", "list", "--json")["gpus"][0]["mig_devices"]]
        got = [(r[2], int(r[4])) for r in (line.replace("|", " ").split() for line in mig.splitlines())
               if len(r) > 4 and r[1] == "MIG"]
        self.assertEqual(got, want)
        r = smi("dgx-h100", "mig", "-lgi")
        self.assertEqual((r.returncode, r.stdout), (6, "No MIG-enabled devices found.\n"))

    def test_bad_input_and_faults(self):
        for args, piece in ((["--frobnicate"], '"--frobnicate"'),
                            (["--query-gpu=index,flux"], "--format=csv"),
                            (["--query-gpu=index,flux", "--format=csv"], '"flux"'),
                            (["--query-gpu=index", "--format=xml"], '"xml"'),
                            (["-d", "MEMORY"], "-d goes with -q"),
                            (["-q", "-d", "CLOCK"], "-d CLOCK"),
                            (["--query-compute-apps=pid,vram", "--format=csv"], '"vram"'),
                            (["--query-gpu=index", "--format=csv,json"], '"json"'),
                            (["topo"], '"topo"'),
                            (["-i"], "-i needs a value"),
                            (["-pm", "1"], '"-pm"')):
            r = smi("dgx-h100", *args)
            with self.subTest(args=args):
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(piece, r.stderr)
                self.assertIn("This stand-in answers: -L, the default table", r.stderr)  # what it supports
                self.assertEqual(r.stdout, "")
        r = smi("dgx-h100", "-L", "-i", "9")
        self.assertEqual(r.returncode, 6)
        self.assertIn("-i 9", r.stderr)
        # A GPU NVML gives no handle for (fallen off the bus): a line on stderr, the others printed,
        # NVML's code (GPU_IS_LOST, 15) as the exit status; -i leaving it out: exit 0.
        lost = gpusel_json("--sim", "lost-gpu", "list", "--json")["gpus"]
        self.assertEqual([g["state"] == "ok" for g in lost], [True, True, False, True])
        r = smi("lost-gpu", "-L")
        self.assertEqual(r.returncode, 15, r.stderr)
        self.assertEqual(r.stdout, "".join(f"GPU {g['index']}: {g['name']} (UUID: {g['uuid']})\n"
                                           for g in lost if g["state"] == "ok"))
        self.assertEqual(r.stderr, "Unable to determine the device handle for GPU 2: GPU is lost (NVML error 15)\n")
        r = smi("lost-gpu", "--query-gpu=index,count", "--format=csv,noheader")
        self.assertEqual((r.returncode, rows(r.stdout)), (15, [["0", "4"], ["1", "4"], ["3", "4"]]))
        self.assertEqual(smi("lost-gpu", "-L", "-i", "0,3").returncode, 0)
        r = smi("nvml-missing", "-L")
        self.assertEqual(r.returncode, 9)
        self.assertIn("cannot talk to the NVIDIA driver", r.stderr)


@unittest.skipIf(INSTRUMENTED, "the doubles are built with a sanitizer; NVIDIA's program cannot load them")
class NvidiasOwnTest(Case):
    def test_nvidias_nvidia_smi_names_the_stand_in(self):
        r = subprocess.run([os.path.join(SOURCE, "scripts", "fetch-extras"), EXTRAS, "nvidia-smi"],
                           capture_output=True, text=True, timeout=600)
        real = os.path.join(EXTRAS, "root", "usr", "lib", "nvidia", "current", "nvidia-smi")
        if r.returncode != 0 or not os.path.isfile(real):
            self.skipTest(f"Debian's nvidia-smi could not be fetched: {r.stderr.strip()[-300:]}")
        r = subprocess.run([real, "-L"], capture_output=True, text=True, env=sim_env("dgx-h100"), timeout=60)
        self.assertNotEqual(r.returncode, 0)
        line = "gpusel-sim (libnvidia-ml.so.1): this program asked for NVML's private tables"
        self.assertEqual(r.stderr.count(line), 1, r.stderr)
        self.assertRegex(r.stderr, r"The simulator's nvidia-smi answers the forms launch scripts use: \S+/lib/gpusel/sim/bin/nvidia-smi")
        self.assertNotIn("GPU 0:", r.stdout)


if __name__ == "__main__":
    unittest.main()
