#!/usr/bin/env python3
"""No function in src/ or tools/ longer than 120 lines, none in sim/ longer than 200 (issue 31).

Usage: check_function_length.py SOURCE_DIR [--self-test]

A function is found by its braces: a '{' at namespace level (not a namespace, a type or an
initialiser) whose line, or the lines before it since the last statement, hold a ')'; its length
counts from that line to its closing '}', lambdas and blocks inside included. Strings, character
literals, comments and preprocessor lines are skipped.

The functions that were longer when the check came are listed in DEBTS with the length they had:
each may shrink (lower its figure here when it does), never grow; every other function keeps to the
limit. Exit 0 when all do, 1 with one line per function that does not.
"""

import glob
import os
import re
import sys

LIMITS = {"src": 120, "tools": 120, "sim": 200}

# (file, function name): its length when the check came, which it may not pass. Empty since the
# last three (acquire_gpus, measure_bandwidth, model_present) were split.
DEBTS = {}


def code_of(line):
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])*'", "''", line)
    return line.split("//")[0]


def functions(text):
    """(name, first line, length) of each function defined in C/C++ source `text`."""
    stack = []  # (kind, first line, signature)
    in_comment = False
    in_macro = False  # a #define continued on this line ('\\' at the end of the last)
    signature = ""
    resume = None  # (first line, signature) of a function whose `} catch (...) {` follows
    for number, raw in enumerate(text.split("\n"), 1):
        if in_macro or raw.strip().startswith("#"):
            in_macro = raw.rstrip().endswith("\\")
            continue
        line = code_of(raw)
        if in_comment:
            if "*/" not in line:
                continue
            line, in_comment = line.split("*/", 1)[1], False
        line = re.sub(r"/\*.*?\*/", "", line)
        if "/*" in line:
            line, in_comment = line.split("/*")[0], True
        for at, ch in enumerate(line):
            if ch == "{":
                head = signature + line[:at + 1]
                inside = any(kind == "fn" for kind, _, _ in stack)
                if resume is not None and not inside:
                    stack.append(("fn", resume[0], resume[1]))
                    resume = None
                    continue
                if inside:
                    kind = "block"
                elif re.search(r'\bnamespace\b|GPUSEL_BEGIN_NAMESPACE|extern ""', head):
                    kind = "ns"
                elif re.search(r"\b(struct|class|enum|union)\b[^()]*$", re.sub(r"alignas\([^)]*\)", "", head)):
                    kind = "type"
                elif re.search(r"=\s*\{?\s*$", head.split("{")[0]) and ")" not in head.split("=")[-1]:
                    kind = "init"
                elif ")" in head:
                    kind = "fn"
                else:
                    kind = "block"
                stack.append((kind, number, head.strip()))
            elif ch == "}" and stack:
                kind, first, head = stack.pop()
                if kind != "fn":
                    continue
                if re.match(r"\s*catch\b", line[at + 1:]):
                    resume = (first, head)  # a function-try-block: its handlers are the function's
                    continue
                found = re.findall(r"([A-Za-z_~][\w:~]*)\s*\(", head)
                name = found[0].split("::")[-1] if found else "?"
                yield name, first, number - first + 1
        stripped = line.strip()
        # A comment or a blank line between a signature and its brace keeps the signature.
        if stripped.endswith((";", "{", "}")):
            signature = ""
        elif stripped:
            signature += line + " "


def check(source):
    problems = []
    for top, limit in LIMITS.items():
        paths = []
        for pattern in ("**/*.cpp", "**/*.hpp", "**/*.c", "**/*.h", "**/*.inc"):
            paths += glob.glob(os.path.join(source, top, pattern), recursive=True)
        for path in sorted(set(paths)):
            rel = os.path.relpath(path, source)
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            for name, first, length in functions(text):
                allowed = DEBTS.get((rel, name), limit)
                if length > allowed:
                    why = (f"it was {allowed} lines when the check came and may only shrink"
                           if (rel, name) in DEBTS else f"the limit under {top}/ is {limit}")
                    problems.append(f"{rel}:{first}: {name} is {length} lines long; {why}: split it "
                                    "into functions that each do one thing")
    return problems


def self_test():
    text = "\n".join([
        "namespace a {", "struct S {", "  int f() const {", "    return 1;", "  }", "};",
        "int g(int x,", "      int y) {", '  const char* s = "{";', "  if (x) {", "    return y;", "  }",
        "  auto l = [] { return 2; };", "  return 0;", "}", "const int table[] = {", "  1, 2};", "}"])
    got = list(functions(text))
    want = [("f", 3, 3), ("g", 8, 8)]  # from the line of its brace
    # A comment between the signature and the brace; a function-try-block, handlers included; a
    # macro's continued lines are not code.
    text = "\n".join([
        "void h()", "// why", "{", "  x();", "}",
        "int k() try {", "  return 1;", "} catch (...) {", "  return 2;", "}",
        "#define M(x) \\", "  do { x; } while (0)", "struct alignas(64) T {", "  int t;", "};"])
    got += list(functions(text))
    want += [("h", 3, 3), ("k", 6, 5)]
    if got != want:
        print(f"self-test: functions() found {got}, want {want}")
        return 1
    print("self-test: ok")
    return 0


def main(argv):
    if len(argv) == 2 and argv[1] == "--self-test":
        return self_test()
    if len(argv) != 1:
        sys.exit(__doc__)
    problems = check(argv[0])
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"every function within its limit (src/ and tools/ {LIMITS['src']} lines, sim/ "
          f"{LIMITS['sim']}; {len(DEBTS)} older ones at most their length when the check came)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
