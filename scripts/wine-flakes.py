#!/usr/bin/env python3
"""Which failed tests of a `cargo test` log failed only by Wine's process-creation
defects: CreateProcess returning ERROR_INTERNAL_ERROR (1359), or the started
process ending with STATUS_DLL_INIT_FAILED (0xC0000142) before any of its code ran
(docs/windows.md, "Process creation").

Usage: wine-flakes.py LOG

Prints one line per test binary with failures, `ARGS<TAB>TEST…` (ARGS as cargo's
"to rerun pass" names them), and exits 0 when every failed test's output names
code 1359 (`code: 1359` or `os error 1359`); exits 1, printing nothing, when any
failure is something else (or the log cannot be read as expected), so that a real
failure is never rerun away. A binary that failed no test but whose connection to
the Wine server broke ("wine client error", Wine's other defect) is printed with
no test names: it runs once more whole.
"""
import re
import sys

# 1359 as io::Error prints it; 0xC0000142 as ExitStatus prints it (3221225794) and
# as its code (-1073741502).
WINE_SPAWN_FAILED = r"(code: |os error )1359\b|ExitStatus\(3221225794\)|Some\(-1073741502\)"


def main(path):
    failed = []  # (test, output) of the binary being read
    current = None
    broke = False  # the binary's Wine server connection broke
    flaky = []  # (rerun args, [tests])
    for line in open(path, encoding="utf-8", errors="replace"):
        line = line.rstrip("\n")
        # libtest's "---- NAME stdout ----", or a custom harness's "---- NAME ----".
        start = re.match(r"^---- (\S+) (?:stdout )?----$", line)
        if start:
            current = [start.group(1), []]
            failed.append(current)
            continue
        rerun = re.search(r"to rerun pass `([^`]*)`", line)
        if rerun:
            if not failed:
                if not broke:
                    return 1
                flaky.append((rerun.group(1), []))
                broke, current = False, None
                continue
            if not all(re.search(WINE_SPAWN_FAILED, "\n".join(out)) for _, out in failed):
                return 1
            flaky.append((rerun.group(1), [test for test, _ in failed]))
            failed, current, broke = [], None, False
            continue
        if line.startswith("wine client error"):
            broke = True
            continue
        if line.startswith("failures:") or line.startswith("test result:"):
            current = None
        elif current is not None:
            current[1].append(line)
    if failed or not flaky:
        return 1
    for args, tests in flaky:
        # A whole binary to run again has no names after its tab.
        print(args + "\t" + " ".join(tests))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
