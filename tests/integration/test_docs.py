"""Every command example in README.md and docs/*.md runs, on the simulated dgx-h100.

Blocks are found by their fence:
- ```sh (or ```bash): the block runs in `bash -e -o pipefail`, and must exit 0;
- ```console: each `$ COMMAND` line (a trailing backslash continues it) runs, and what it prints
  (stdout and stderr together) must match the lines below it, where `...` inside a line stands for
  any text and a line of `...` alone for any number of lines; workers run at once, so lines tagged
  `[rank N] ` are compared after the untagged ones, rank by rank (each rank's lines in order),
  and `gpusel run`'s notes of each rank's pid, written while the workers may already be writing,
  may stand anywhere among the other lines (in their own order);
- anything else (python, toml, json, text, plain ```) is not run.

An HTML comment on the line before a fence changes that (it does not show on a rendered page):
- `<!-- doctest: skip (WHY) -->`: not run; WHY is required (a real cluster, an installation...);
- `<!-- doctest: needs PROGRAM -->`: skipped, saying so, when PROGRAM is not on PATH;
- `<!-- doctest: status N -->`: an sh block must exit N instead of 0;
- `<!-- doctest: machine NAME -->`: the block runs on another bundled simulated machine;
- `<!-- doctest: file NAME -->` (any block): the block's text is saved as NAME in the scratch
  folder, for the blocks after it (a machine file, a script).

The blocks of one page run in order, in one scratch folder holding the stand-in programs the pages
name (doc_fixtures/: train.py, plain_train.py, worker, my_launcher.py) and, as links, the source
tree's python/, examples/ and sim/ and the build folder as build/, with gpusel on PATH, the
Python package importable, the shell on the simulated machine (`gpusel sim env`), leases and the
simulator's usage in private folders, and Open MPI and torchrun set up for loopback.
"""

import os
import re
import shutil
import subprocess
import tempfile
import unittest

import launchers
from support import BIN, PYTHON_LOADS_LIBRARIES, SOURCE, for_python, sim_env

BUILD = os.environ.get("GPUSEL_BUILD_DIR", os.path.join(SOURCE, "build"))
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "doc_fixtures")
RUNNABLE = ("sh", "bash", "console")
ANNOTATION = re.compile(r"^<!--\s*doctest:\s*(.*?)\s*-->$")
TIMEOUT = 120


def pages():
    """README.md, docs/*.md, python/README.md and sim/README.md, as paths relative to the source tree."""
    found = ["README.md"]
    docs = os.path.join(SOURCE, "docs")
    if os.path.isdir(docs):
        found += sorted(os.path.join("docs", n) for n in os.listdir(docs) if n.endswith(".md"))
    found.append(os.path.join("python", "README.md"))
    found.append(os.path.join("sim", "README.md"))
    return [p for p in found if os.path.isfile(os.path.join(SOURCE, p))]


class Block:
    def __init__(self, page, line, kind, text, annotation):
        self.page, self.line, self.kind, self.text = page, line, kind, text
        self.skip = self.needs = self.file = None
        self.status = 0
        self.machine = launchers.MACHINE
        if annotation is None:
            return
        m = re.fullmatch(r"skip\s*\((.+)\)", annotation)
        if m:
            self.skip = m.group(1)
            return
        m = re.fullmatch(r"needs\s+(\S+)", annotation)
        if m:
            self.needs = m.group(1)
            return
        m = re.fullmatch(r"status\s+(\d+)", annotation)
        if m:
            self.status = int(m.group(1))
            return
        m = re.fullmatch(r"file\s+([A-Za-z0-9_.-]+)", annotation)
        if m:
            self.file = m.group(1)
            return
        m = re.fullmatch(r"machine\s+([a-z0-9-]+)", annotation)
        if m:
            self.machine = m.group(1)
            return
        raise ValueError(f"{page}:{line}: doctest annotation {annotation!r} is not understood "
                         "(skip (WHY), needs PROGRAM, status N, machine NAME, file NAME)")

    def where(self):
        return f"{self.page}:{self.line}"


def blocks(page):
    """The fenced blocks of `page` in order, with the annotation before each."""
    with open(os.path.join(SOURCE, page)) as f:
        lines = f.read().split("\n")
    found = []
    i = 0
    while i < len(lines):
        m = re.match(r"^(`{3,})\s*([A-Za-z0-9_+-]*)", lines[i])
        if not m:
            i += 1
            continue
        fence, kind, start = m.group(1), m.group(2).lower(), i
        j = i + 1
        while j < len(lines) and not lines[j].startswith(fence):
            j += 1
        k = start - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        a = ANNOTATION.match(lines[k].strip()) if k >= 0 else None
        if kind in RUNNABLE or a:
            found.append(Block(page, start + 1, kind, "\n".join(lines[start + 1:j]), a.group(1) if a else None))
        i = j + 1
    return found


def transcript(text):
    """A console block as [(command, [expected lines])]."""
    steps = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("$ "):
            if steps:
                steps[-1][1].append(line)
            elif line.strip():
                raise ValueError(f"output before the first command: {line!r}")
            i += 1
            continue
        command = line[2:]
        while command.endswith("\\") and i + 1 < len(lines):
            i += 1
            command = command[:-1] + "\n" + lines[i]
        steps.append((command, []))
        i += 1
    for _, expected in steps:
        while expected and not expected[-1].strip():
            expected.pop()
    return steps


def by_rank(lines):
    """Untagged lines first, as printed, then each rank's `[rank N] ` lines in rank order."""
    def rank(line):
        m = re.match(r"\[rank (\d+)\] ", line)
        return int(m.group(1)) if m else -1
    return sorted(lines, key=rank)  # stable: each rank's own lines keep their order


def line_pattern(expected):
    return re.compile(".*".join(re.escape(part) for part in expected.rstrip().split("...")) + r"\Z")


def matches(expected, actual):
    """Whether the lines `actual` fit `expected` (`...` wildcards); a ValueError-free boolean."""
    memo = {}

    def fit(i, j):
        if (i, j) in memo:
            return memo[(i, j)]
        if i == len(expected):
            r = j == len(actual)
        elif expected[i].strip() == "...":
            r = any(fit(i + 1, k) for k in range(j, len(actual) + 1))
        else:
            r = j < len(actual) and bool(line_pattern(expected[i]).match(actual[j].rstrip())) and fit(i + 1, j + 1)
        memo[(i, j)] = r
        return r

    return fit(0, 0)


# `gpusel run`'s note of each rank's pid is written once the workers have started, while they may
# already be writing: where it stands among their output is not defined.
RANK_NOTE = re.compile(r"^gpusel: note: rank \d+: pid ")


def transcript_matches(expected, actual):
    """matches(), with `gpusel run`'s rank notes free to stand anywhere among the workers' lines
    (in their own order, all of them)."""
    if matches(expected, actual):
        return True
    notes = [[line for line in lines if RANK_NOTE.match(line)] for lines in (expected, actual)]
    rest = [[line for line in lines if not RANK_NOTE.match(line)] for lines in (expected, actual)]
    return bool(notes[0]) and len(notes[0]) == len(notes[1]) and matches(*notes) and matches(*rest)


def block_env(machine, scratch):
    env = launchers._scrubbed(sim_env(machine))
    env["PATH"] = os.path.dirname(os.path.abspath(BIN)) + os.pathsep + env.get("PATH", "/usr/bin:/bin")
    env["PYTHONPATH"] = os.path.join(os.path.abspath(SOURCE), "python")
    env["GPUSEL_LIBRARY"] = os.path.abspath(launchers.LIBRARY)
    env.update(launchers.OMPI_ENV)
    # torchrun's options from the environment (PET_<OPTION>): a free rendezvous port, and a quick
    # look at its workers (every 5 s by default). The pages give every option Debian's torchrun
    # needs on its command line.
    env["PET_MASTER_PORT"] = str(launchers.free_port())
    env["PET_MONITOR_INTERVAL"] = "0.1"
    env["HOME"] = scratch
    return for_python(env)


class DocExamples(unittest.TestCase):
    maxDiff = None

    def run_page(self, page):
        found = blocks(page)
        scratch = tempfile.mkdtemp(prefix="gpusel-docs-")
        self.addCleanup(shutil.rmtree, scratch, True)
        for name in os.listdir(FIXTURES):
            shutil.copy2(os.path.join(FIXTURES, name), scratch)
        for name in ("python", "examples", "sim"):
            os.symlink(os.path.join(os.path.abspath(SOURCE), name), os.path.join(scratch, name))
        os.symlink(os.path.abspath(BUILD), os.path.join(scratch, "build"))
        for b in found:
            with self.subTest(block=b.where()):
                if b.file is not None:
                    with open(os.path.join(scratch, b.file), "w") as f:
                        f.write(b.text + "\n")
                    continue
                if b.kind not in RUNNABLE and b.skip is None:
                    self.fail(f"{b.where()}: a doctest annotation on a ```{b.kind} block, which is never run")
                if b.skip is not None:
                    continue
                if b.needs and shutil.which(b.needs) is None:
                    self.skipTest(f"{b.where()}: needs {b.needs}, which is not installed")
                # torchrun starts Python workers, which load the library too.
                if not PYTHON_LOADS_LIBRARIES and ("python3" in b.text or "torchrun" in b.text):
                    self.skipTest(f"{b.where()}: runs Python over the instrumented library (ThreadSanitizer build)")
                env = block_env(b.machine, scratch)
                if b.kind == "console":
                    self.run_transcript(b, env, scratch)
                else:
                    self.run_script(b, env, scratch)

    def run_script(self, b, env, scratch):
        r = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", b.text], cwd=scratch, env=env,
                           capture_output=True, text=True, timeout=TIMEOUT, start_new_session=True)
        self.assertEqual(r.returncode, b.status,
                         f"{b.where()}: the block exited {r.returncode}, not {b.status}\n"
                         f"--- block\n{b.text}\n--- stdout\n{r.stdout}--- stderr\n{r.stderr}")

    def run_transcript(self, b, env, scratch):
        for command, expected in transcript(b.text):
            r = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=scratch, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=TIMEOUT, start_new_session=True)
            actual = by_rank(r.stdout.rstrip("\n").split("\n")) if r.stdout.strip() else []
            self.assertTrue(transcript_matches(expected, actual),
                            f"{b.where()}: `{command}` printed what the page does not show\n"
                            f"--- page\n" + "\n".join(expected) + "\n--- printed (exit "
                            f"{r.returncode})\n{r.stdout}")


class Parsing(unittest.TestCase):
    """The test's own reading of pages: wildcards and annotations."""

    def test_rank_notes_may_stand_anywhere_among_the_workers_lines(self):
        page = ["gpusel: note: picked", "gpusel: note: rank 0: pid ..., GPU 0", "out 1", "out 2"]
        self.assertTrue(transcript_matches(page, ["gpusel: note: picked", "out 1",
                                                  "gpusel: note: rank 0: pid 7, GPU 0", "out 2"]))
        # Any other line out of place, a rank note missing or another GPU's: still a mismatch.
        self.assertFalse(transcript_matches(page, ["out 1", "gpusel: note: picked",
                                                   "gpusel: note: rank 0: pid 7, GPU 0", "out 2"]))
        self.assertFalse(transcript_matches(page, ["gpusel: note: picked", "out 1", "out 2"]))
        self.assertFalse(transcript_matches(page, ["gpusel: note: picked", "out 1",
                                                   "gpusel: note: rank 0: pid 7, GPU 1", "out 2"]))

    def test_wildcards(self):
        self.assertTrue(matches(["a ... c"], ["a b c"]))
        self.assertFalse(matches(["a ... c"], ["a b d"]))
        self.assertTrue(matches(["x", "...", "z"], ["x", "z"]))
        self.assertTrue(matches(["x", "...", "z"], ["x", "1", "2", "z"]))
        self.assertFalse(matches(["x", "z"], ["x", "1", "z"]))
        self.assertFalse(matches(["x"], ["x", "extra"]))

    def test_by_rank(self):
        self.assertEqual(by_rank(["[rank 1] b", "note", "[rank 0] a", "[rank 1] c"]),
                         ["note", "[rank 0] a", "[rank 1] b", "[rank 1] c"])

    def test_transcript(self):
        steps = transcript("$ echo a \\\n  b\na b\n$ true\n")
        self.assertEqual(steps, [("echo a \n  b", ["a b"]), ("true", [])])

    def test_bad_annotation(self):
        with self.assertRaises(ValueError):
            Block("x.md", 1, "sh", "", "skip")  # a skip must say why


def _add(page):
    name = "test_" + re.sub(r"[^A-Za-z0-9]+", "_", page.removesuffix(".md")).strip("_")
    setattr(DocExamples, name, lambda self: self.run_page(page))


for _page in pages():
    _add(_page)

if __name__ == "__main__":
    unittest.main()
