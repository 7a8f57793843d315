"""Shared by the bench scripts: the environment `gpusel sim env MACHINE` prints, as a dict."""

import os
import subprocess


def sim_environment(gpusel, machine, base=None):
    out = subprocess.run([gpusel, "sim", "env", machine], capture_output=True, text=True, check=True).stdout
    env = dict(os.environ if base is None else base)
    for line in out.splitlines():
        if line.startswith("export "):
            key, _, value = line[len("export "):].partition("=")
            env[key] = value.strip("'")
    return env
