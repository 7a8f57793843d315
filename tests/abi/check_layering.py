#!/usr/bin/env python3
"""The layering the build enforces (cmake/layers.cmake, docs/design.md), tried the way a reviewer
breaks it:

1. Forbidden calls. For each experiment below, a small file of code placed in a layer (compiled
   with that layer's own compile command, from compile_commands.json) calls a function of a layer
   it may not use, and is linked the way the build links that layer's check library: with the
   objects of the layer and of every layer it may use, --no-undefined. The link must fail, naming
   the function. As a control, the same object linked with the callee's layers as well must link,
   so that the failure is the layering's and not the experiment's.
2. Private headers. A file compiled with the gpusel command's compile command cannot include a
   header of src/core, src/launch, src/driver or src/lease (the command sees include/gpusel/ and
   the platform layer only); a file of the core cannot include a header of the driver, nor one of
   launch a header of the lease layer, nor one of the lease layer a header of resolution.
3. No source reaches another folder's header by a relative path ("../"), which would bypass the
   include paths the edges give.
4. Child processes are the platform layer's (src/platform/process.hpp): no object of another layer
   nor of the gpusel command calls fork, exec*, posix_spawn, wait* or kill (read from each object's
   undefined symbols with nm; no exceptions). As experiments, an object calling fork,
   one calling posix_spawn and one calling waitpid, compiled in the launch layer, are refused by
   the same reading, and the platform layer's own objects do call them (the control).
5. Locks on open files and watches on folders are the platform layer's too (file_lock.hpp,
   dir_watch.hpp): no other object calls flock or inotify_*; experiments: flock and
   inotify_add_watch compiled in the lease layer; control: the platform layer calls them.

Usage: check_layering.py BUILD_DIR SOURCE_DIR CXX [LINK_FLAG...]
BUILD_DIR holds compile_commands.json and layer-checks/layers.txt (written by cmake/layers.cmake:
one line per layer, "NAME|USED;LAYERS|OBJECT;FILES"). LINK_FLAG: extra flags the build links with
(the sanitizers'). Exits 1 naming every experiment that did not turn out as it must.
"""

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

# (layer the code is placed in, layer it calls, what it includes or declares, a call, the symbol the
# link must name). The first three are the review's experiments.
FORBIDDEN_CALLS = [
    ("driver", "worker", '#include "gpusel/worker.hpp"', "return gpusel::bind_assigned_gpu(0);",
     "bind_assigned_gpu"),
    ("core", "driver", '#include "gpusel/nvml.hpp"', "return gpusel::query_nvml().available ? 1 : 0;", "query_nvml"),
    ("core", "worker", '#include "gpusel/worker.hpp"', "return gpusel::bind_assigned_gpu(0);", "bind_assigned_gpu"),
    ("driver", "resolution", '#include "gpusel/probe.hpp"',
     "return static_cast<int>(gpusel::default_probe_helper().size());", "default_probe_helper"),
    ("resolution", "worker", '#include "gpusel/worker.hpp"', "return gpusel::assigned_visible_gpu().value_or(0);",
     "assigned_visible_gpu"),
    ("launch", "worker", '#include "gpusel/worker.hpp"', "return gpusel::bind_assigned_gpu(0);", "bind_assigned_gpu"),
    # The lease layer sits beside resolution, below it: it may use the core and the platform only.
    ("lease", "resolution", '#include "gpusel/probe.hpp"',
     "return static_cast<int>(gpusel::default_probe_helper().size());", "default_probe_helper"),
    ("lease", "launch", '#include "gpusel/launch.hpp"', 'return static_cast<int>(gpusel::find_program("x").size());',
     "find_program"),
    ("lease", "worker", '#include "gpusel/worker.hpp"', "return gpusel::bind_assigned_gpu(0);", "bind_assigned_gpu"),
    ("lease", "driver", '#include "gpusel/nvml.hpp"', "return gpusel::query_nvml().available ? 1 : 0;", "query_nvml"),
    ("launch", "lease", '#include "gpusel/lease.hpp"', "return gpusel::LeaseStore::locate().shared() ? 1 : 0;",
     "LeaseStore::locate"),
    # The platform's header is not on the core's include path (part 2 below); declared by hand.
    ("core", "platform", "#include <optional>\n#include <string>\n"
     "namespace gpusel::detail { std::optional<std::string> env_value(const char* name); }",
     'return gpusel::detail::env_value("X") ? 1 : 0;', "env_value"),
]

# (compile command of: a source file, a header it must not see)
FORBIDDEN_HEADERS = [
    ("tools/gpusel/main.cpp", "text.hpp"),
    ("tools/gpusel/main.cpp", "resolve_detail.hpp"),
    ("tools/gpusel/main.cpp", "launch_detail.hpp"),
    ("tools/gpusel/main.cpp", "cuda_api.hpp"),
    ("tools/gpusel/main.cpp", "nvml_abi.hpp"),
    ("src/core/spec.cpp", "cuda_api.hpp"),
    ("src/core/spec.cpp", "env.hpp"),
    ("src/driver/nvml.cpp", "launch_detail.hpp"),
    ("tools/gpusel/main.cpp", "lease_queue.hpp"),
    ("src/launch/cpus.cpp", "job_record.hpp"),
    ("src/lease/lease.cpp", "probe_child.hpp"),
]


# Starting, waiting for and signalling processes: the platform layer's alone.
PROCESS_CALLS = {
    "fork", "vfork", "clone", "clone3", "execv", "execve", "execvp", "execvpe", "execl", "execle", "execlp",
    "fexecve", "posix_spawn", "posix_spawnp", "system", "popen", "wait", "waitpid", "wait3", "wait4", "waitid",
    "kill", "killpg", "setpgid",
}
# (object file name, call) still allowed outside the platform layer.
PROCESS_CALL_EXCEPTIONS = set()
# (layer, what it includes, a call, the symbol the reading must name)
PROCESS_EXPERIMENTS = [
    ("launch", "#include <unistd.h>", "return static_cast<int>(fork());", "fork"),
    ("launch", "#include <spawn.h>\nextern char** environ;",
     'pid_t p; char* a[] = {nullptr}; return posix_spawn(&p, "/bin/true", nullptr, nullptr, a, environ);',
     "posix_spawn"),
    ("launch", "#include <sys/wait.h>", "return static_cast<int>(waitpid(-1, nullptr, 0));", "waitpid"),
]


# Locks on open files and watches on folders: the platform layer's alone too (file_lock.hpp,
# dir_watch.hpp). (fcntl's OFD locks cannot be told from its other uses by the symbol.)
FILE_CALLS = {"flock", "inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch"}
FILE_EXPERIMENTS = [
    ("lease", "#include <sys/file.h>", "return flock(0, LOCK_EX | LOCK_NB);", "flock"),
    ("lease", "#include <sys/inotify.h>", 'return inotify_add_watch(0, "/", IN_CREATE);', "inotify_add_watch"),
]


def process_calls(obj, calls_of=None):
    """The calls of PROCESS_CALLS (or of `calls_of`) that object file `obj` makes, less the
    exceptions."""
    wanted = PROCESS_CALLS if calls_of is None else calls_of
    out = subprocess.run(["nm", "-u", obj], capture_output=True, text=True).stdout
    calls = set()
    for line in out.splitlines():
        name = line.split()[-1].split("@")[0]
        if name in wanted and (os.path.basename(obj), name) not in PROCESS_CALL_EXCEPTIONS:
            calls.add(name)
    return sorted(calls)


def command_objects(commands):
    """The object files of the gpusel command (its compile commands' -o), unity batches included."""
    objects = []
    for entry in commands:
        args = entry.get("arguments") or shlex.split(entry["command"])
        for flag, value in zip(args, args[1:]):
            if flag == "-o" and "/gpusel_cli.dir/" in "/" + value:
                objects.append(os.path.join(entry["directory"], value))
    return objects


# Parts 4 and 5: (part, calls, what the platform layer does with them, the remedy, experiments).
PLATFORM_ONLY = [
    (4, PROCESS_CALLS, "fork/exec/spawn/wait", "start, wait for and signal processes through "
     "src/platform/process.hpp", PROCESS_EXPERIMENTS),
    (5, FILE_CALLS, "flock/inotify", "lock files and watch folders through src/platform/file_lock.hpp and "
     "dir_watch.hpp", FILE_EXPERIMENTS),
]


def check_platform_calls(layers, commands, source, tmp, problems):
    """Parts 4 and 5: processes, file locks and folder watches only in the platform layer."""
    cli = command_objects(commands)
    if not cli:
        problems.append("no object of the gpusel command in compile_commands.json")
    for part, calls, kind, remedy, experiments in PLATFORM_ONLY:
        for name, (_, objects) in sorted(layers.items()):
            if name == "platform":
                if not any(process_calls(o, calls) for o in objects):
                    problems.append(f"the platform layer calls no {kind}: the reading of part {part} is broken")
                continue
            for obj in objects:
                for call in process_calls(obj, calls):
                    problems.append(f"{os.path.basename(obj)} (layer {name}) calls {call}: {remedy}")
        for obj in cli:
            for call in process_calls(obj, calls):
                problems.append(f"{os.path.basename(obj)} (the gpusel command) calls {call}: {remedy}")
        for i, (layer, prelude, call, symbol) in enumerate(experiments):
            obj, r = compile_experiment(commands, source, tmp, layer, f"part{part}_experiment_{i}", prelude, call)
            if r.returncode != 0:
                problems.append(f"{layer} calling {symbol}: the experiment does not compile:\n{r.stderr}")
            elif symbol not in process_calls(obj, calls):
                problems.append(f"{layer} calling {symbol}: not seen by the reading of part {part}")
            else:
                print(f"{layer} -> {symbol}: refused outside the platform layer, as it must be")


def compile_experiment(commands, source, tmp, layer, name, prelude, call):
    """Compiles `int name() { call }` (after `prelude`) as a source of `layer` would be: the object's
    path and the compiler's result."""
    src = os.path.join(tmp, f"{name}.cpp")
    obj = src[:-4] + ".o"
    with open(src, "w") as f:
        f.write(f"{prelude}\n\nnamespace gpusel::detail {{\nint {name}();\nint {name}() {{ {call} }}\n}}\n")
    args, directory = compile_command(commands, source, layer_source(source, layer))
    return obj, subprocess.run(args + ["-c", src, "-o", obj], capture_output=True, text=True, cwd=directory)


def read_layers(build):
    layers = {}
    with open(os.path.join(build, "layer-checks", "layers.txt")) as f:
        for line in f:
            name, used, objects = line.rstrip("\n").split("|")
            layers[name] = ([u for u in used.split(";") if u], [o for o in objects.split(";") if o])
    return layers


def in_unity_source(unity, path):
    """Whether `unity` is a file CMake generated for a unity build (the asan, tsan and product
    presets compile the command's sources in batches) that includes the source file `path`: its
    compile command is then the one `path` is compiled with."""
    if "/Unity/unity_" not in unity:
        return False
    try:
        with open(unity) as f:
            text = f.read()
    except OSError:
        return False
    return any(f'#include "{p}"' in text for p in (path, os.path.realpath(path)))


def compile_command(commands, source_dir, relative):
    """The compile command of `relative` (a file of the source tree) as a list, without -o/-c/-MF
    and their arguments, and without the file itself."""
    path = os.path.join(source_dir, relative)
    for entry in commands:
        if os.path.realpath(entry["file"]) == os.path.realpath(path) or in_unity_source(entry["file"], path):
            args = entry.get("arguments") or shlex.split(entry["command"])
            out, skip = [], False
            for a in args:
                if skip:
                    skip = False
                elif a in ("-o", "-c", "-MF", "-MT", "-MQ"):
                    skip = a != "-c"
                elif a == "-MD" or os.path.realpath(os.path.join(entry["directory"], a)) in (
                        os.path.realpath(path), os.path.realpath(entry["file"])):
                    pass
                else:
                    out.append(a)
            return out, entry["directory"]
    raise SystemExit(f"{relative} is not in compile_commands.json (set CMAKE_EXPORT_COMPILE_COMMANDS)")


def layer_source(source_dir, layer):
    folder = os.path.join(source_dir, "src", layer)
    for name in sorted(os.listdir(folder)):
        if name.endswith(".cpp") and not name.endswith("_win.cpp"):
            return f"src/{layer}/{name}"
    raise SystemExit(f"no source in src/{layer}")


def closure(layers, name):
    used, _ = layers[name]
    return [name] + used


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    build, source, cxx, link_flags = argv[0], argv[1], argv[2], argv[3:]
    layers = read_layers(build)
    with open(os.path.join(build, "compile_commands.json")) as f:
        commands = json.load(f)
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        # 1. forbidden calls
        for i, (layer, callee, prelude, call, symbol) in enumerate(FORBIDDEN_CALLS):
            what = f"{layer} -> {callee} ({symbol})"
            if callee in layers[layer][0]:
                problems.append(f"{what}: the graph allows it now; update FORBIDDEN_CALLS and docs/design.md")
                continue
            obj, r = compile_experiment(commands, source, tmp, layer, f"layering_experiment_{i}", prelude, call)
            if r.returncode != 0:
                problems.append(f"{what}: the experiment does not compile in {layer}:\n{r.stderr}")
                continue

            def link(names):
                objects = [o for n in names for o in layers[n][1]]
                out = os.path.join(tmp, f"experiment{i}.so")
                return subprocess.run([cxx, "-shared", "-o", out, obj, *objects, "-Wl,--no-undefined", *link_flags,
                                       "-ldl", "-pthread"], capture_output=True, text=True)

            r = link(closure(layers, layer))
            if r.returncode == 0:
                problems.append(f"{what}: links; the layering does not catch it")
            elif symbol not in r.stderr or "undefined reference" not in r.stderr:
                problems.append(f"{what}: the link failed, but not on {symbol}:\n{r.stderr}")
            else:
                control = link(sorted(set(closure(layers, layer)) | set(closure(layers, callee))))
                if control.returncode != 0:
                    problems.append(f"{what}: the control (with {callee}'s layers) does not link either:\n"
                                    f"{control.stderr}")
                else:
                    print(f"{what}: refused by the link of layer {layer}, as it must be")
        # 2. private headers
        for i, (relative, header) in enumerate(FORBIDDEN_HEADERS):
            src = os.path.join(tmp, f"header{i}.cpp")
            with open(src, "w") as f:
                f.write(f'#include "{header}"\n')
            args, directory = compile_command(commands, source, relative)
            r = subprocess.run(args + ["-fsyntax-only", src], capture_output=True, text=True, cwd=directory)
            if r.returncode == 0:
                problems.append(f"{header} can be included where {relative} is compiled")
            elif header not in r.stderr or "No such file" not in r.stderr:
                problems.append(f"{header} in {relative}'s place fails, but not for want of the header:\n{r.stderr}")
            else:
                print(f"{header}: not on the include path of {relative}, as it must be")
        # 4, 5. processes, file locks and folder watches: the platform layer's alone
        check_platform_calls(layers, commands, source, tmp, problems)
    # 3. no relative includes into other folders
    pattern = re.compile(r'^\s*#\s*include\s*"([^"]*\.\./[^"]*)"', re.M)
    for top in ("src", "tools", "sim"):
        for folder, _, files in os.walk(os.path.join(source, top)):
            for name in files:
                if not name.endswith((".cpp", ".hpp", ".h", ".inc", ".c")):
                    continue
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for m in pattern.finditer(f.read()):
                        problems.append(f"{os.path.relpath(path, source)} includes \"{m.group(1)}\": include a "
                                        "header by its name, through the include path its layer's edges give")
    for p in problems:
        print("FAILED: " + p)
    if not problems:
        print(f"{len(FORBIDDEN_CALLS)} forbidden calls and {len(FORBIDDEN_HEADERS)} private headers refused; "
              f"no relative includes; no process, file lock or folder watch calls outside the platform layer "
              f"({len(PROCESS_EXPERIMENTS) + len(FILE_EXPERIMENTS)} experiments refused)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
