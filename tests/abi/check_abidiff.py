#!/usr/bin/env python3
"""The ABI of libgpusel.so against a baseline kept in the repository (tests/abi/libgpusel.abi.xml),
with libabigail's abidw and abidiff (Debian's abigail-tools). The policy it enforces is
docs/versioning.md: within one SONAME no symbol is removed or changed and no type the exported API
uses changes its layout, except that the sized C structs named in the suppression file grow by
members appended at their end.

Usage: check_abidiff.py [--update] --library LIB --baseline XML --suppressions FILE
                        --headers DIR [--headers DIR ...]

abidw writes LIB's ABI (the types the public headers in the DIRs define; no source locations or
build paths) into a private temporary folder; abidiff compares BASELINE with it under FILE.
- No difference: passes (0).
- Only additions (new functions or variables; changes abidiff counts as harmless, such as an
  enumerator added, which it shows with --harmless only): fails (1) until they are recorded with
  --update, so that every addition is reviewed in the baseline's diff.
- Anything else (a symbol removed or changed, a layout change of a type the API uses) is
  incompatible. With the SONAME unchanged it fails (1), and --update refuses to record it: undo the
  change, or bump GPUSEL_SOVERSION in CMakeLists.txt. With a new SONAME it fails (1) until the new
  SONAME's ABI is recorded with --update.
--update writes LIB's ABI to BASELINE in every case but an incompatible change under the same
SONAME; it also writes a baseline that does not exist yet (without --update a missing baseline
fails). Exit 77 (skipped) when abidw or abidiff is not installed; 2 on a usage error.

A [suppress_type] of FILE with `has_data_member_inserted_at = end` marks a sized struct. abidiff 2.2
suppresses every change of such a struct that neither removes a member nor shrinks it (a member
inserted before the end, a member's type changed), so this script checks those structs itself:
the baseline's members must be the first members of the library's struct, each with its name,
offset and type.
"""

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

SKIP = 77
# abidiff's exit status is a bit field (man abidiff, RETURN VALUES).
ABIDIFF_ERROR = 1
ABIDIFF_USAGE_ERROR = 2
ABIDIFF_ABI_CHANGE = 4
ABIDIFF_ABI_INCOMPATIBLE_CHANGE = 8

# How abidw writes the ABI (abidw 2.2):
# --headers-dir (per DIR) and --drop-private-types: only the types the public headers define, and
#   what they are made of (the standard library's types the C++ API holds);
# --exported-interfaces-only: only the functions and variables the library exports and what they
#   reach. The default also describes the member functions of every standard library class the
#   sources instantiate; abidiff finds the same ABI either way, and the XML is a fifth of the size;
# --no-show-locs, --no-comp-dir-path, --no-corpus-path: no file names, lines or build folders, so
#   the XML does not depend on where the tree was cloned or built (the paths of the translation
#   units that remain are made relative below);
# --type-id-style hash: type ids from the types' names instead of a running count, so that one
#   change to the ABI is one change in the baseline's diff, not a renumbering of every type.
ABIDW_OPTIONS = ["--drop-private-types", "--exported-interfaces-only", "--no-show-locs",
                 "--no-comp-dir-path", "--no-corpus-path", "--type-id-style", "hash"]

INSTALL_HINT = ("install them with scripts/install-deps (Debian's package abigail-tools: "
                "apt-get install abigail-tools)")
BUMP_HINT = ("Undo the change, or bump GPUSEL_SOVERSION in the top-level CMakeLists.txt (the "
             "policy: docs/versioning.md) so that the library gets a new SONAME, then record its "
             "ABI with --update:")


def fail(message):
    print(message)
    return 1


def run_abidw(library, headers, out):
    command = ["abidw"]
    for d in headers:
        command += ["--headers-dir", d]
    command += ABIDW_OPTIONS + ["--out-file", out, library]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0 or not os.path.isfile(out):
        sys.stdout.write(done.stdout + done.stderr)
        print(f"abidw failed (exit {done.returncode}) on {library}: {shlex.join(command)}")
        return False
    relative_unit_paths(out)
    return True


UNIT_PATH = re.compile(r"(<abi-instr [^>]*?\bpath=')([^']*)(')")


def relative_unit_paths(xml):
    """Rewrites the paths of the translation units (<abi-instr path=...>), which abidw takes from
    the debug information as the compiler saw them (absolute, under the clone), relative to the
    folder they all share: src/core/text.cpp becomes core/text.cpp wherever the tree is. abidiff
    does not compare them."""
    with open(xml) as f:
        text = f.read()
    paths = [m.group(2) for m in UNIT_PATH.finditer(text) if m.group(2).startswith("/")]
    if not paths:
        return
    common = os.path.commonpath([os.path.dirname(p) for p in paths])

    def relative(m):
        path = m.group(2)
        if path.startswith("/"):
            path = os.path.relpath(path, common)
        return m.group(1) + path + m.group(3)

    with open(xml, "w") as f:
        f.write(UNIT_PATH.sub(relative, text))


def run_abidiff(baseline, current, suppressions, *options):
    command = ["abidiff"] + list(options)
    if suppressions:
        command += ["--suppressions", suppressions]
    command += [baseline, current]
    done = subprocess.run(command, capture_output=True, text=True)
    return done.returncode, (done.stdout + done.stderr).rstrip("\n"), command


def soname(xml):
    """The SONAME an abidw XML records (its abi-corpus element), '' when it has none."""
    for _, element in ET.iterparse(xml, events=("start",)):
        if element.tag == "abi-corpus":
            return element.get("soname", "")
        break
    return ""


# ---- the sized structs ---------------------------------------------------------------------------

def sized_structs(suppressions):
    """The names of the structs the suppression file lets grow at the end: each [suppress_type]
    section with `has_data_member_inserted_at = end` and a `name`."""
    names, section = [], None

    def close():
        if section is not None and section.get("has_data_member_inserted_at") == "end" and "name" in section:
            names.append(section["name"])

    with open(suppressions) as f:
        for line in f:
            line = line.strip()
            if not line or line[0] in "#;":
                continue
            if line.startswith("["):
                close()
                section = {} if line == "[suppress_type]" else None
            elif section is not None and "=" in line:
                key, value = line.split("=", 1)
                section[key.strip()] = value.strip()
    close()
    return names


class Corpus:
    """The types of an abidw XML, enough to describe a struct's members."""

    def __init__(self, xml):
        self.types = {}  # id -> element
        self.names = {}  # id -> qualified name of a class, union or enum
        self.structs = {}  # qualified name -> the first definition
        self._walk(ET.parse(xml).getroot(), [])

    def _walk(self, element, scope):
        for child in element:
            inner = scope
            name = child.get("name")
            if child.get("id"):
                self.types.setdefault(child.get("id"), child)
            if child.tag in ("class-decl", "union-decl", "enum-decl") and name:
                qualified = "::".join(scope + [name])
                self.names.setdefault(child.get("id"), qualified)
                if child.tag == "class-decl" and child.get("is-declaration-only") != "yes":
                    self.structs.setdefault(qualified, child)
                inner = scope + [name]
            elif child.tag == "namespace-decl" and name:
                inner = scope + [name]
            self._walk(child, inner)

    def describe(self, type_id, depth=0):
        """A type as the ABI sees it: typedefs peeled, classes by qualified name."""
        t = self.types.get(type_id)
        if t is None or depth > 20:
            return f"<type {type_id}>"
        below = t.get("type-id")
        if t.tag == "typedef-decl":
            return self.describe(below, depth + 1)
        if t.tag == "pointer-type-def":
            return self.describe(below, depth + 1) + "*"
        if t.tag == "reference-type-def":
            return self.describe(below, depth + 1) + ("&&" if t.get("kind") == "rvalue" else "&")
        if t.tag == "qualified-type-def":
            qualifiers = [q for q in ("const", "volatile", "restrict") if t.get(q) == "yes"]
            return " ".join(qualifiers + [self.describe(below, depth + 1)])
        if t.tag == "array-type-def":
            lengths = "".join(f"[{s.get('length', '')}]" for s in t.findall("subrange"))
            return self.describe(below, depth + 1) + lengths
        if t.tag in ("class-decl", "union-decl", "enum-decl"):
            return self.names.get(type_id, t.get("name", "?"))
        if t.tag == "function-type":
            params = ", ".join(self.describe(p.get("type-id"), depth + 1) for p in t.findall("parameter"))
            ret = t.find("return")
            return f"{self.describe(ret.get('type-id'), depth + 1) if ret is not None else 'void'}({params})"
        return t.get("name") or t.tag

    def members(self, struct):
        """(size in bits, [(name, offset in bits, type)]) of a struct's non-static data members."""
        s = self.structs[struct]
        members = []
        for m in s.findall("data-member"):
            if m.get("static") == "yes":
                continue
            var = m.find("var-decl")
            if var is not None:
                members.append((var.get("name"), m.get("layout-offset-in-bits"), self.describe(var.get("type-id"))))
        return int(s.get("size-in-bits", "0")), members


def grown_only_at_end(names, baseline, current):
    """Messages for each sized struct that changed other than by members appended at its end."""
    if not names:
        return []
    old, new = Corpus(baseline), Corpus(current)
    problems = []
    for name in names:
        if name not in old.structs:
            continue  # not in the baseline's ABI: nothing to keep compatible with
        if name not in new.structs:
            problems.append(f"{name} is in the baseline's ABI and no longer in the library's")
            continue
        (old_size, old_members), (new_size, new_members) = old.members(name), new.members(name)
        for i, before in enumerate(old_members):
            after = new_members[i] if i < len(new_members) else None
            if after != before:
                was = f"{before[2]} {before[0]} at bit {before[1]}"
                now = f"{after[2]} {after[0]} at bit {after[1]}" if after else "gone"
                problems.append(f"{name}: member {i + 1} was {was}, is now {now}")
        if new_size < old_size:
            problems.append(f"{name}: shrank from {old_size} to {new_size} bits")
    return problems


# ---- the check -----------------------------------------------------------------------------------

def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--update", action="store_true", help="record the library's ABI as the baseline")
    parser.add_argument("--library", required=True)
    parser.add_argument("--baseline", required=True)
    parser.add_argument("--suppressions", required=True)
    parser.add_argument("--headers", action="append", required=True)
    args = parser.parse_args(argv)

    missing = [tool for tool in ("abidw", "abidiff") if shutil.which(tool) is None]
    if missing:
        print(f"{' and '.join(missing)} not found on PATH: skipped; {INSTALL_HINT}")
        return SKIP
    for path, what in [(args.library, "the library"), (args.suppressions, "the suppression file")]:
        if not os.path.isfile(path):
            return fail(f"{what} {path} does not exist" +
                        (": build it first (cmake --build --preset default --target gpusel_shared)"
                         if what == "the library" else ""))
    for d in args.headers:
        if not os.path.isdir(d):
            return fail(f"the headers folder {d} does not exist")

    update = shlex.join(["python3", sys.argv[0], "--update", "--library", args.library, "--baseline",
                         args.baseline, "--suppressions", args.suppressions] +
                        [a for d in args.headers for a in ("--headers", d)])

    with tempfile.TemporaryDirectory(prefix="check_abidiff.") as tmp:
        current = os.path.join(tmp, "current.abi.xml")
        if not run_abidw(args.library, args.headers, current):
            return 1
        new_soname = soname(current)

        def record(what):
            shutil.copyfile(current, args.baseline)
            print(f"wrote the ABI of {args.library} ({new_soname or 'no SONAME'}) to {args.baseline}: {what}; "
                  "commit it with the change, so the review sees the diff")
            return 0

        if not os.path.isfile(args.baseline):
            if args.update:
                return record("a new baseline")
            return fail(f"no ABI baseline {args.baseline}: record the library's ABI as the baseline with\n  {update}")

        old_soname = soname(args.baseline)
        rc, report, command = run_abidiff(args.baseline, current, args.suppressions)
        if rc & ABIDIFF_ERROR:
            print(report)
            return fail(f"abidiff failed (exit {rc}): {shlex.join(command)}")
        problems = grown_only_at_end(sized_structs(args.suppressions), args.baseline, current)

        harmless = ""
        if rc == 0 and not problems:
            # abidiff counts some compatible changes (an enumerator added, say) as harmless and
            # reports them only when asked; they are additions to record like any other.
            rc_harmless, harmless, command = run_abidiff(args.baseline, current, args.suppressions, "--harmless")
            if rc_harmless & ABIDIFF_ERROR:
                print(harmless)
                return fail(f"abidiff failed (exit {rc_harmless}): {shlex.join(command)}")
            if rc_harmless == 0:
                harmless = ""
        if rc == 0 and not problems and not harmless:
            if args.update:
                with open(current) as a, open(args.baseline) as b:
                    same = a.read() == b.read()
                if not same:
                    return record("no ABI change, the XML's text differs")
            print(f"{args.library}: no ABI change against {args.baseline} ({new_soname})")
            return 0

        if rc:
            print(report)
        if harmless:
            print(f"abidiff --harmless:\n{harmless}")
        if problems:
            # The suppressions hid these (abidiff 2.2): show abidiff's account of them without.
            _, unsuppressed, _ = run_abidiff(args.baseline, current, None)
            print(f"abidiff without the suppressions of {args.suppressions}, which hide changes of the sized "
                  f"structs:\n{unsuppressed}\n")
            print(f"The sized structs of {args.suppressions} may grow only by members appended at their end; "
                  "these changes are not that:")
            for p in problems:
                print("  " + p)
        print()

        if old_soname != new_soname:
            print(f"The baseline {args.baseline} is the ABI of {old_soname or 'a library without SONAME'}; "
                  f"the library is now {new_soname or 'without SONAME'}.")
            if args.update:
                return record(f"the first ABI of {new_soname}")
            return fail(f"Record the new SONAME's ABI as the baseline with\n  {update}")

        if harmless:
            if args.update:
                return record("compatible changes")
            return fail(f"{args.library} changes the ABI of {new_soname} in ways abidiff counts as harmless "
                        f"(above): compatible additions; review them and record them with --update:\n  {update}")
        if not problems:
            rc_no_added, report_no_added, command = run_abidiff(args.baseline, current, args.suppressions,
                                                                "--no-added-syms")
            if rc_no_added & ABIDIFF_ERROR:
                print(report_no_added)
                return fail(f"abidiff failed (exit {rc_no_added}): {shlex.join(command)}")
            if rc_no_added == 0:
                if args.update:
                    return record("compatible additions")
                return fail(f"{args.library} adds to the ABI of {new_soname} (above): compatible additions; "
                            f"review them and record them with --update:\n  {update}")

        message = (f"{args.library} changes the ABI of {new_soname} incompatibly (above): programs built "
                   f"against {new_soname} would break with it.")
        if args.update:
            return fail(f"{message}\n--update refuses to record it under the same SONAME; {args.baseline} is "
                        f"unchanged. {BUMP_HINT}\n  {update}")
        return fail(f"{message}\n{BUMP_HINT}\n  {update}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
