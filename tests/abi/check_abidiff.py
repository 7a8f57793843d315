#!/usr/bin/env python3
"""The ABI of libgpusel.so against a baseline kept in the repository (tests/abi/libgpusel.abi.xml),
with libabigail's abidw and abidiff (Debian's abigail-tools). The policy it enforces is
docs/versioning.md: within one SONAME no symbol is removed or changed and no type the exported API
uses changes its layout, except that the sized C structs named in the suppression file grow by
members appended at their end.

Usage: check_abidiff.py [--update] --library LIB --baseline XML --suppressions FILE
                        --headers DIR [--headers DIR ...]

abidw writes LIB's ABI (the types the public headers in the DIRs define; no source locations or
build paths) into a private temporary folder, in a form that depends on the ABI alone, not on where
the tree is (canonical_form); abidiff compares BASELINE with it under FILE.
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
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

SKIP = 77
# abidiff's exit status is a bit field (man abidiff, RETURN VALUES): 1 an error, 2 a usage error
# (with 1), 4 an ABI change, 8 an incompatible one (with 4). abidiff 2.2 sets 8 only for a removed
# symbol, a changed vtable offset and a changed SONAME: a struct's layout change sets 4 alone, as an
# added function does. So the script tells additions from the rest by asking again with
# --no-added-syms, not by bit 8.
ABIDIFF_ERROR = 1

# How abidw writes the ABI (abidw 2.2):
# --headers-dir (per DIR) and --drop-private-types: only the types the public headers define, and
#   what they are made of (the standard library's types the C++ API holds);
# --exported-interfaces-only: only the functions and variables the library exports and what they
#   reach. The default also describes the member functions of every standard library class the
#   sources instantiate; abidiff finds the same ABI either way, and the XML is a fifth of the size;
# --no-show-locs, --no-comp-dir-path, --no-corpus-path: no file names, lines or build folders.
# That is not enough for an XML that does not depend on where the tree was cloned: the paths of the
# translation units are made relative below (relative_unit_paths), and the order of the
# declarations and the type ids are rewritten from the ABI alone (canonical_form).
ABIDW_OPTIONS = ["--drop-private-types", "--exported-interfaces-only", "--no-show-locs",
                 "--no-comp-dir-path", "--no-corpus-path"]

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
    raw = out + ".abidw"
    shutil.copyfile(out, raw)
    try:
        canonical_form(out)
    except (IndexError, ValueError) as e:
        print(f"cannot read abidw's XML {raw} line by line ({e!r}): has its format changed? "
              "check_abidiff.py's canonical_form knows that of libabigail 2.2")
        return False
    # The rewrite must not change the ABI: abidiff compares the two forms.
    rc, report, command = run_abidiff(raw, out, None, "--harmless")
    if rc != 0:
        print(report)
        print(f"abidiff finds a difference (exit {rc}) between abidw's XML and check_abidiff.py's rewrite of "
              f"it, which must describe the same ABI: canonical_form is wrong for this abidw ({shlex.join(command)})")
        return False
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


# The elements whose children canonical_form puts in order, and the attributes that name a type.
SORTED_SCOPES = ("abi-instr", "namespace-decl")
TYPE_REFERENCE = re.compile(r"\b(type-id|naming-typedef-id)='([^']*)'")
OWN_ID = re.compile(r"(?<![\w-])id='([^']*)'")
# Types whose children are part of what they are (a function type's parameters, an array's
# dimensions); a class, union or enum is known by its scope and name.
DEFINED_BY_CHILDREN = ("function-type", "array-type-def")


class Node:
    """One element of abidw's XML: its first line, its children, its closing line ('' if none)."""

    def __init__(self, header, children, closing, scope):
        self.header, self.children, self.closing, self.scope = header, children, closing, scope
        self.tag = header.strip()[1:].split(None, 1)[0].rstrip("/>")
        m = OWN_ID.search(header)
        self.id = m.group(1) if m else None


def parse_abixml(lines):
    """abidw writes one element a line, each closing tag at its opening tag's indentation."""

    def element(i, scope):
        line = lines[i]
        if line.strip().endswith("/>"):
            return Node(line, [], "", scope), i + 1
        node = Node(line, [], "", scope)
        closing = line[:len(line) - len(line.lstrip())] + f"</{node.tag}>"
        name = re.search(r"\bname='([^']*)'", line)
        inner = scope + (f"{node.tag}:{name.group(1) if name else ''}",)
        i += 1
        while lines[i].rstrip("\n") != closing:
            child, i = element(i, inner)
            node.children.append(child)
        node.closing = lines[i]
        return node, i + 1

    roots, i = [], 0
    while i < len(lines):
        root, i = element(i, ())
        roots.append(root)
    return roots


def canonical_form(xml):
    """Rewrites abidw's XML in an order and with type ids that depend on the ABI alone.

    abidw 2.2 orders the declarations of a translation unit by where they come from, the files'
    paths included, even with --no-show-locs: the same sources built under /tmp and under /work
    (either side of /usr/include) list gpusel's types and the standard library's in different
    orders, and abidw numbers the types in that order (its hash-style ids too: `int` and `long int`
    hash alike, and the first one met gets the lower id). The same ABI, a diff of 1500 lines. Here
    each type is named by a digest of what it is (its scope, and its element with the types it
    refers to named the same way), and the children of each translation unit and namespace are
    sorted by their text in those terms. abidiff reads types by id in any order and compares them
    by content: it finds no difference between abidw's form and this one."""
    with open(xml) as f:
        roots = parse_abixml(f.read().splitlines(keepends=True))
    by_id = {}

    def index(node):
        if node.id is not None:
            by_id.setdefault(node.id, node)
        for child in node.children:
            index(child)

    for root in roots:
        index(root)
    keys, in_progress, texts = {}, set(), {}

    def key(type_id):
        """A digest of the type with this id: its scope, its element, what it refers to."""
        if type_id in keys:
            return keys[type_id]
        node = by_id.get(type_id)
        if node is None:
            return "?" + type_id
        if type_id in in_progress:  # a cycle: the type's scope, kind and name break it
            return "cycle:" + "/".join(node.scope) + OWN_ID.sub("", node.header).strip()
        in_progress.add(type_id)
        what = text(node) if node.tag in DEFINED_BY_CHILDREN else refer(node.header)
        in_progress.discard(type_id)
        keys[type_id] = hashlib.sha1(("/".join(node.scope) + "\n" + what).encode()).hexdigest()
        return keys[type_id]

    def shallow(type_id):
        """A type by its scope, kind and name: for a struct's naming typedef, which refers back to
        the struct (following it would make the key depend on which of the two is met first)."""
        node = by_id.get(type_id)
        if node is None:
            return "?" + type_id
        name = re.search(r"\bname='([^']*)'", node.header)
        return "/".join(node.scope) + f"/{node.tag}:{name.group(1) if name else ''}"

    def refer(line):
        """A line with its own id left out and the types it refers to as their keys."""
        line = OWN_ID.sub("id=''", line)
        return TYPE_REFERENCE.sub(lambda m: f"{m.group(1)}='" + (
            shallow(m.group(2)) if m.group(1) == "naming-typedef-id" else key(m.group(2))) + "'", line)

    def text(node):
        """A node's whole text in the terms of refer(), its scopes' children in order."""
        if id(node) not in texts:
            children = [text(c) for c in node.children]
            if node.tag in SORTED_SCOPES:
                children.sort()
            texts[id(node)] = refer(node.header) + "".join(children) + node.closing
        return texts[id(node)]

    def order(node):
        if node.tag in SORTED_SCOPES:
            node.children.sort(key=text)
        for child in node.children:
            order(child)

    for root in roots:
        order(root)
    # The new ids, in the new order: twelve digits of each type's key, told apart where two
    # types' keys agree.
    new_ids, taken = {}, set()

    def name(node):
        if node.id is not None and node.id not in new_ids:
            candidate, n = key(node.id)[:12], 1
            while candidate in taken:
                n += 1
                candidate = f"{key(node.id)[:12]}-{n}"
            taken.add(candidate)
            new_ids[node.id] = candidate
        for child in node.children:
            name(child)

    for root in roots:
        name(root)

    def rename(line):
        line = OWN_ID.sub(lambda m: f"id='{new_ids.get(m.group(1), m.group(1))}'", line)
        return TYPE_REFERENCE.sub(lambda m: f"{m.group(1)}='{new_ids.get(m.group(2), m.group(2))}'", line)

    out = []

    def write(node):
        out.append(rename(node.header))
        for child in node.children:
            write(child)
        out.append(node.closing)

    for root in roots:
        write(root)
    with open(xml, "w") as f:
        f.write("".join(out))


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

def has_debug_info(library):
    """Whether the ELF file has a .debug_info section (read from its section headers)."""
    import struct
    try:
        with open(library, "rb") as f:
            data = f.read()
    except OSError:
        return False
    if data[:4] != b"\x7fELF" or data[4] != 2:  # 64-bit ELF only (the native build)
        return True  # not ours to judge: abidw says what it can
    endian = "<" if data[5] == 1 else ">"
    shoff, = struct.unpack_from(endian + "Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from(endian + "HHH", data, 0x3A)
    def section(i):
        return struct.unpack_from(endian + "IIQQQQ", data, shoff + i * shentsize)
    names_at = section(shstrndx)[4]
    for i in range(shnum):
        name_off = section(i)[0]
        end = data.index(b"\0", names_at + name_off)
        if data[names_at + name_off:end] == b".debug_info":
            return True
    return False


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
    # Without DWARF, abidw sees symbols but no types: every type of the baseline would look
    # removed, and a compatible library would be called incompatible. Say so instead.
    if not has_debug_info(args.library):
        print(f"cannot check the ABI: {args.library} has no debug information (.debug_info), so "
              "the layout of the public types cannot be read from it (a Release build?); "
              "configure with -DCMAKE_BUILD_TYPE=RelWithDebInfo (or Debug) to run this check: "
              "skipped")
        return SKIP

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
