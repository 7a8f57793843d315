"""ROCr's own reading of ROCR_VISIBLE_DEVICES, held against gpusel's model of it (issue 35).

Debian's real ROCr 5.2.3 (libhsa-runtime64-1, fetched with scripts/fetch-extras into the build
folder's extras/, never installed) runs over a stand-in for its thunk (tests/amd/hsakmt_double.c,
compiled here against Debian's hsakmt.h), so it starts without an AMD GPU and enumerates the GPUs
the stand-in describes, applying ROCR_VISIBLE_DEVICES with AMD's own parser. For generated values
of the variable, on machines whose unique ids share prefixes, what ROCr keeps (its GPU agents'
ids, in order; or its refusal to start) must be what gpusel's model says
(src/core/amd_visible.cpp, through tests/amd/rocr_model.cpp).

Skipped (77 from the runner) when the packages cannot be fetched (no network) or the C compiler is
missing; never when they are there.
"""

import json
import os
import random
import shutil
import subprocess
import unittest

from support import BUILD, SOURCE, Case

EXTRAS = os.path.join(BUILD, "extras")
PACKAGES = ("libhsa-runtime64-1", "libhsa-runtime-dev", "libhsakmt-dev")
OUT = os.path.join(BUILD, "amd-rocr")
MODEL = os.environ.get("GPUSEL_ROCR_MODEL", os.path.join(BUILD, "bin", "rocr_model"))
AMD = os.path.join(SOURCE, "tests", "amd")

# Machines: each GPU's unique id (16 hex digits; 0 for a GPU without one, which ROCr calls
# "GPU-XX"), in KFD order.
MACHINES = {
    "three, one without an id": ["1111222233334444", "aaaabbbbccccdddd", "0"],
    "four, prefixes shared": ["1111222233334444", "1111222299990000", "abcdef0123456789", "abcdef0123450000"],
}


def shown(uid):
    return "GPU-XX" if int(uid, 16) == 0 else "GPU-" + uid


def plain_env():
    """The environment without the sanitizer runtimes the sanitizer presets preload into the test
    runner: apt, the compiler and ROCr's client are not instrumented."""
    return {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "ASAN_OPTIONS")}


def newer(target, *sources):
    return os.path.exists(target) and all(os.path.getmtime(target) >= os.path.getmtime(s) for s in sources)


def build_rocr_client():
    """The thunk stand-in and the HSA client, built once per build folder."""
    include = os.path.join(EXTRAS, "root", "usr", "include")
    lib = os.path.join(EXTRAS, "root", "usr", "lib", "x86_64-linux-gnu")
    os.makedirs(OUT, exist_ok=True)
    double = os.path.join(OUT, "libhsakmt.so.1")
    client = os.path.join(OUT, "hsa_agents")
    sources = [os.path.join(AMD, n) for n in ("hsakmt_double.c", "hsakmt.map")]
    if not newer(double, *sources):
        subprocess.run(["cc", "-O1", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared", "-I", include,
                        "-Wl,--version-script=" + sources[1], "-Wl,-soname,libhsakmt.so.1", "-o", double,
                        sources[0]], check=True, env=plain_env())
    if not newer(client, os.path.join(AMD, "hsa_agents.c")):
        subprocess.run(["cc", "-O1", "-Wall", "-Wextra", "-Werror", "-I", include, "-o", client,
                        os.path.join(AMD, "hsa_agents.c"), "-L", lib, "-l:libhsa-runtime64.so.1",
                        "-Wl,-rpath-link," + OUT], check=True, env=plain_env())
    return client, OUT + ":" + lib


def values_for(uids, count, seed):
    """ROCR_VISIBLE_DEVICES values: the forms users and launchers write, and lists of 1 to 4
    entries drawn from indices (in range, out of it, signed, octal, hex, with spaces or junk),
    unique-id prefixes of every length (ambiguous ones included), empty entries."""
    ids = [u for u in uids if int(u, 16) != 0]
    tokens = ["0", "1", "2", "3", "4", "9", "-1", "+1", " 1", "1 ", "01", "010", "0x2", "0X1", "00", "1a", "a",
              "", "GPU-XX", "gpu-" + ids[0][:6], "GPU-" + ids[0] + "0", "GPU", "GPU-"]
    for uid in ids:
        tokens += ["GPU-" + uid[:n] for n in (1, 2, 4, 5, 8, 12, 15, 16)]
    rng = random.Random(seed)
    values = [None, "", ",", "0,", ",0", "0,,1", "all", " "]
    values += [",".join(rng.choice(tokens) for _ in range(rng.randint(1, 4))) for _ in range(count)]
    return values


class RocrVisibleDevicesTest(Case):
    @classmethod
    def setUpClass(cls):
        if shutil.which("cc") is None:
            raise unittest.SkipTest("no C compiler (cc) to build the thunk stand-in")
        fetched = subprocess.run([os.path.join(SOURCE, "scripts", "fetch-extras"), EXTRAS, *PACKAGES],
                                 capture_output=True, text=True, env=plain_env())
        if fetched.returncode != 0:
            raise unittest.SkipTest("Debian's ROCr packages could not be fetched: " + fetched.stderr.strip())
        cls.client, cls.library_path = build_rocr_client()

    def rocr(self, uids, value):
        """The ids of the GPU agents ROCr keeps, in its order; "refused" when it does not start."""
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LD_LIBRARY_PATH": self.library_path,
               "GPUSEL_TEST_AMD_GPUS": ",".join(uids)}
        if value is not None:
            env["ROCR_VISIBLE_DEVICES"] = value
        r = subprocess.run([self.client], capture_output=True, text=True, env=env, timeout=60)
        lines = r.stdout.split()
        if r.returncode != 0 or (lines[:1] == ["init"]):
            return "refused"
        return lines

    def model(self, uids, values):
        r = subprocess.run([MODEL], input=json.dumps({"ids": [shown(u) for u in uids], "values": values}),
                           capture_output=True, text=True, timeout=60, check=True)
        return ["refused" if m["aborts"] else m["devices"] for m in json.loads(r.stdout)]

    def test_the_stand_in_gives_rocr_the_machine(self):
        # Unset, ROCr keeps every GPU in KFD order with the ids the stand-in gave it.
        uids = MACHINES["three, one without an id"]
        self.assertEqual(self.rocr(uids, None), [shown(u) for u in uids])
        # ROCr's own parser is what runs: an empty entry stops it from starting.
        self.assertEqual(self.rocr(uids, "0,,1"), "refused")

    def test_gpusel_reads_the_variable_as_rocr_does(self):
        for n, (name, uids) in enumerate(MACHINES.items()):
            values = values_for(uids, 150, seed=n)
            expected = self.model(uids, values)
            wrong = []
            for value, model in zip(values, expected):
                real = self.rocr(uids, value)
                if real != model:
                    wrong.append(f"ROCR_VISIBLE_DEVICES={value!r}: ROCr {real}, gpusel {model}")
            with self.subTest(machine=name):
                self.assertEqual(wrong, [], f"{len(wrong)} of {len(values)} values read differently")


if __name__ == "__main__":
    unittest.main()
