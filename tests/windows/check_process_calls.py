#!/usr/bin/env python3
"""Part 4 of the layering (tests/abi/check_layering.py) on the Windows build: starting, ending and
signalling processes is the platform layer's (src/platform/process.hpp, process_win.cpp). No
object of another layer of libgpusel nor of the gpusel command imports CreateProcess*,
ShellExecute*, TerminateProcess, TerminateJobObject, AssignProcessToJobObject, ResumeThread or
GenerateConsoleCtrlEvent, nor the C runtime's spawn/system/popen (read from each object's undefined
symbols with the cross nm; no exceptions). As experiments, objects calling CreateProcessW and
GenerateConsoleCtrlEvent, compiled with the launch layer's own compile command, are refused by the
same reading; the platform layer's own objects do import them (the control).

Usage: check_process_calls.py SOURCE_DIR BUILD_DIR NM
BUILD_DIR holds the mingw build's compile_commands.json. Exits 1 naming each object that calls
one, or each experiment that did not turn out as it must.
"""

import json
import os
import shlex
import subprocess
import sys
import tempfile

PROCESS_CALLS = {
    "CreateProcessW", "CreateProcessA", "CreateProcessAsUserW", "CreateProcessAsUserA", "CreateProcessWithTokenW",
    "CreateProcessWithLogonW", "ShellExecuteW", "ShellExecuteA", "ShellExecuteExW", "ShellExecuteExA",
    "TerminateProcess", "TerminateJobObject", "AssignProcessToJobObject", "ResumeThread",
    "GenerateConsoleCtrlEvent", "system", "_wsystem", "popen", "_popen", "_wpopen", "_spawnv", "_spawnvp",
    "_spawnve", "_spawnvpe", "_wspawnv", "_wspawnvp", "_wspawnve", "_wspawnvpe", "_execv", "_execvp", "_wexecv",
    "_wexecvp",
}
EXPERIMENTS = [
    ("CreateProcessW", "STARTUPINFOW si{}; si.cb = sizeof si; PROCESS_INFORMATION pi{};\n"
     "  return CreateProcessW(nullptr, nullptr, nullptr, nullptr, FALSE, 0, nullptr, nullptr, &si, &pi);"),
    ("GenerateConsoleCtrlEvent", "return GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, 0);"),
]


def process_calls(nm, obj):
    out = subprocess.run([nm, "-u", obj], capture_output=True, text=True, check=True).stdout
    names = {line.split()[-1] for line in out.splitlines() if line.strip()}
    return sorted({n[len("__imp_"):] if n.startswith("__imp_") else n for n in names} & PROCESS_CALLS)


def objects(build):
    """(source relative to the tree, object path, compile arguments) of every compiled file."""
    with open(os.path.join(build, "compile_commands.json")) as f:
        commands = json.load(f)
    found = []
    for entry in commands:
        args = entry.get("arguments") or shlex.split(entry["command"])
        obj = args[args.index("-o") + 1]
        found.append((entry["file"], os.path.join(entry["directory"], obj), args, entry["directory"]))
    return found


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    root, build, nm = argv
    root = os.path.realpath(root)
    problems = []
    checked = 0
    platform_calls = set()
    launch_command = None
    for source, obj, args, directory in objects(build):
        parts = os.path.relpath(os.path.realpath(source), root).split(os.sep)
        if parts[0] == "src":
            layer = parts[1]
        elif parts[:2] == ["tools", "gpusel"]:
            layer = "the gpusel command"
        else:
            continue  # the simulator, tests and code from outside the tree
        if not os.path.exists(obj):
            problems.append(f"{obj} ({source}) is not built")
            continue
        calls = process_calls(nm, obj)
        if layer == "platform":
            platform_calls.update(calls)
            continue
        if source.endswith("launch_win.cpp"):
            launch_command = (args, directory)
        checked += 1
        for call in calls:
            problems.append(f"{os.path.basename(obj)} ({layer}) calls {call}: start, end and signal processes "
                            "through src/platform/process.hpp")
    if "CreateProcessW" not in platform_calls:
        problems.append("the platform layer imports no CreateProcessW: the reading is broken")
    if launch_command is None:
        problems.append("src/launch/launch_win.cpp is not in compile_commands.json")
    else:
        args, directory = launch_command
        with tempfile.TemporaryDirectory() as tmp:
            for i, (symbol, body) in enumerate(EXPERIMENTS):
                src = os.path.join(tmp, f"experiment{i}.cpp")
                obj = os.path.join(tmp, f"experiment{i}.obj")
                with open(src, "w") as f:
                    f.write(f"#include <windows.h>\n\nint experiment{i}();\nint experiment{i}() {{\n  {body}\n}}\n")
                cmd = list(args)
                at = cmd.index("-o")
                del cmd[at:at + 2]
                at = cmd.index("-c")
                del cmd[at:at + 2]
                r = subprocess.run(cmd + ["-c", src, "-o", obj], capture_output=True, text=True, cwd=directory)
                if r.returncode != 0:
                    problems.append(f"launch calling {symbol}: the experiment does not compile:\n{r.stderr}")
                elif symbol not in process_calls(nm, obj):
                    problems.append(f"launch calling {symbol}: not seen by the reading")
                else:
                    print(f"launch -> {symbol}: refused outside the platform layer, as it must be")
    for p in problems:
        print("FAILED: " + p)
    if not problems:
        print(f"{checked} objects of libgpusel's other layers and the gpusel command import no process calls; "
              f"{len(EXPERIMENTS)} experiments refused")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
