#!/usr/bin/env python3
"""Per test binary: passed / failed / ignored, from `cargo test` logs, side by side.

Usage: test-counts.py NAME=LOG:ARTIFACTS [NAME=LOG:ARTIFACTS ...]

LOG is the output of a `cargo test` run; ARTIFACTS the JSON lines of the same
`cargo test ... --no-run --message-format=json`, which name the package and target
of every test executable (the log names only the file, and two packages may both
have a `tests/conformance.rs`). Prints one row per test binary, one column group per
NAME, and a total; a binary that started but printed no result (it crashed, or the
run was killed) shows `no result`, and one a run does not build shows `-`.
scripts/test-windows.sh prints it for Wine next to Linux (docs/windows.md).
"""

import json
import os
import re
import sys

RUNNING = re.compile(r"^\s*Running (?:unittests )?(\S+) \((.+)\)\s*$")
DOCTESTS = re.compile(r"^\s*Doc-tests (\S+)\s*$")
RESULT = re.compile(r"^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored")


def package_name(package_id):
    """The name in a package id, old (`name 0.1.0 (path+file://...)`) or new
    (`path+file:///dir/name#0.1.0`, `path+file:///dir#name@0.1.0`) style."""
    if "#" not in package_id:
        return package_id.split(" ")[0]
    url, fragment = package_id.rsplit("#", 1)
    if "@" in fragment:
        return fragment.split("@")[0]
    return url.rstrip("/").rsplit("/", 1)[-1]


def artifacts(path):
    """Executable file name -> label, and library crate name -> package."""
    executables, libraries = {}, {}
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if message.get("reason") != "compiler-artifact":
                continue
            package = package_name(message["package_id"])
            target = message["target"]
            kinds = target["kind"]
            if "lib" in kinds or "rlib" in kinds or "proc-macro" in kinds:
                libraries[target["name"]] = package
            if message.get("executable"):
                kind = kinds[0]
                label = f"{package} {kind}" if kind == "lib" else f"{package} {kind} {target['name']}"
                executables[os.path.basename(message["executable"])] = label
    return executables, libraries


def counts(log, executables, libraries):
    """Label -> (passed, failed, ignored), or None for a binary with no result line.
    A binary run again later (test-windows.sh reruns one whose Wine connection broke)
    counts as its last run."""
    found, current = {}, None
    with open(log, encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if m := RUNNING.match(line):
                exe = os.path.basename(m.group(2))
                current = executables.get(exe, f"? {exe}")
                found[current] = None
            elif m := DOCTESTS.match(line):
                current = f"{libraries.get(m.group(1), m.group(1))} doc-tests"
                found[current] = None
            elif (m := RESULT.match(line)) and current is not None:
                found[current] = tuple(int(n) for n in m.groups())
                current = None
    return found


def main(args):
    if not args:
        sys.exit(__doc__)
    runs = []
    for arg in args:
        name, _, paths = arg.partition("=")
        log, _, exes = paths.partition(":")
        if not (name and log and exes):
            sys.exit(f"test-counts: expected NAME=LOG:ARTIFACTS, got {arg!r}")
        runs.append((name, counts(log, *artifacts(exes))))
    labels = sorted({label for _, found in runs for label in found})
    width = max([len("test binary"), len("total")] + [len(label) for label in labels])
    cell = 20
    print(f"  {'test binary':<{width}}" + "".join(f" | {name:^{cell}}" for name, _ in runs))
    print(f"  {'':<{width}}" + f" | {'pass fail ignored':^{cell}}" * len(runs))
    totals = [[0, 0, 0] for _ in runs]
    for label in labels:
        row = f"  {label:<{width}}"
        for i, (_, found) in enumerate(runs):
            if label not in found:
                text = "-"
            elif found[label] is None:
                text = "no result"
            else:
                text = "{:4d} {:4d} {:7d}".format(*found[label])
                for j in range(3):
                    totals[i][j] += found[label][j]
            row += f" | {text:^{cell}}"
        print(row)
    print(f"  {'total':<{width}}" + "".join(" | {:^20}".format("{:4d} {:4d} {:7d}".format(*t)) for t in totals))


if __name__ == "__main__":
    main(sys.argv[1:])
