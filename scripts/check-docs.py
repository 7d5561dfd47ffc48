#!/usr/bin/env python3
"""The doc check (run by .ci/run): the project cites only itself, and what it cites exists.

Fails (exit 1, one line per problem) when a tracked file
- cites the product specification that lives outside the repository (by its file name,
  or as "<that name> §N" / "<that name> I5"), or a path outside the repository;
- in README.md files, docs/ or crate docs (`//!` and `///` comments), links or names a
  repository file that does not exist: markdown links, and backticked paths such as
  `cli/tests/run.rs` or `cli/tests/run.rs::a_test_name` (the test must exist too);
- cites a section of docs/protocol.md or docs/format-v1.md that has no heading.

Usage: scripts/check-docs.py [REPO]   (default: the repository containing this script)
"""

import os
import re
import subprocess
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
SELF = os.path.relpath(os.path.abspath(__file__), ROOT)

# Built from parts so this file does not match itself.
SPEC_NAME = "SP" + "EC"
FORBIDDEN = [
    (re.compile(SPEC_NAME + r"\.md"), "cites the specification file outside the repository"),
    (re.compile(r"\b" + SPEC_NAME + r" (§|I\d)"), "cites a specification section outside the repository"),
    (re.compile(r"/work/" + "shared" + r"\b|seed/fencepost-typescript"), "cites a file outside the repository"),
]

files = subprocess.run(["git", "-C", ROOT, "ls-files"], capture_output=True, text=True, check=True).stdout.split()
tracked = set(files)
dirs = {os.path.dirname(f) for f in files}
while True:
    parents = {os.path.dirname(d) for d in dirs} - dirs
    if not parents:
        break
    dirs |= parents
top_level = {f.split("/")[0] for f in files}
problems = []


def exists(rel):
    rel = os.path.normpath(rel)
    return rel in tracked or rel in dirs


def crate_dir(path):
    d = os.path.dirname(path)
    while d and not os.path.exists(os.path.join(ROOT, d, "Cargo.toml")):
        d = os.path.dirname(d)
    return d


def headings(rel):
    """Section numbers (`3`, `3.2`, `1.1`) of a document's headings."""
    out = set()
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        for line in f:
            m = re.match(r"#+\s+(\d+(?:\.\d+)*)\.?\s", line)
            if m:
                out.add(m.group(1))
    return out


SECTIONED = {d: headings(d) for d in ("docs/protocol.md", "docs/format-v1.md") if d in tracked}
SECTION_CITE = re.compile(r"(docs/protocol\.md|docs/format-v1\.md)`?,?\s+§(\d+(?:\.\d+)*)((?:[–,/ ]+§\d+(?:\.\d+)*)*)")
RULE_CITE = re.compile(r"docs/protocol\.md`? (I\d|R\d)\b")
BACKTICK = re.compile(r"`([^`\s]+)`")
MD_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
PATHLIKE = re.compile(r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.*<>-]+)+/?$")
DOC_EXT = (".md", ".rs", ".toml", ".sh", ".py")
rules = set()
if "docs/protocol.md" in tracked:
    with open(os.path.join(ROOT, "docs/protocol.md"), encoding="utf-8") as f:
        rules = set(re.findall(r"\*\*((?:I|R)\d) —", f.read()))


def check_path(path, lineno, token, base_dirs):
    """A backticked or linked repository path must exist (and a `::name` test in it)."""
    item = None
    if "::" in token:
        token, item = token.split("::", 1)
        item = item.split("::")[-1].rstrip("()")
    token = re.sub(r":\d+$", "", token)
    if "*" in token or "<" in token or "…" in token:
        pattern = re.compile("^" + re.escape(token).replace(r"\*", "[^/]*") + "$")
        if token.split("/")[0] in top_level and not any(pattern.match(f) for f in tracked):
            problems.append(f"{path}:{lineno}: `{token}` matches no file in the repository")
        return
    first = token.split("/")[0]
    if first not in top_level and not token.endswith(DOC_EXT):
        return
    candidates = [os.path.normpath(os.path.join(b, token)) for b in base_dirs]
    found = next((c for c in candidates if exists(c)), None)
    if found is None:
        problems.append(f"{path}:{lineno}: names `{token}`, which does not exist in the repository")
        return
    if item and found.endswith(".rs") and re.fullmatch(r"[a-z_][a-z0-9_]*", item):
        text = open(os.path.join(ROOT, found), encoding="utf-8").read()
        if not re.search(r"\b(fn|const|static|mod)\s+" + item + r"\b|\"" + item + r"\"|\b" + item + r"\s*[,(:]", text):
            problems.append(f"{path}:{lineno}: names `{found}::{item}`, which is not in that file")


for path in files:
    if path == SELF:
        continue
    full = os.path.join(ROOT, path)
    try:
        text = open(full, encoding="utf-8").read()
    except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
        continue
    lines = text.splitlines()
    for n, line in enumerate(lines, 1):
        for pattern, what in FORBIDDEN:
            if pattern.search(line):
                problems.append(f"{path}:{n}: {what}: {line.strip()[:100]}")
    is_doc = path.endswith(".md")
    is_rs = path.endswith(".rs")
    if not (is_doc or is_rs):
        continue
    base_dirs = [os.path.dirname(path), crate_dir(path), ""]
    in_fence = False
    for n, line in enumerate(lines, 1):
        if is_rs:
            m = re.match(r"\s*(//!|///)(.*)", line)
            if not m:
                continue
            prose = m.group(2)
        else:
            if line.lstrip().startswith("```"):
                in_fence = not in_fence
                continue
            if in_fence:
                continue
            prose = line
        for target in MD_LINK.findall(prose):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            if is_rs and "/" not in target and not target.endswith(DOC_EXT):
                continue  # an intra-doc link to an item; rustdoc -D warnings checks those
            target = target.split("#")[0]
            if not exists(os.path.join(os.path.dirname(path), target)):
                problems.append(f"{path}:{n}: links `{target}`, which does not exist in the repository")
        for token in BACKTICK.findall(prose):
            token = token.rstrip(".,;:")
            if PATHLIKE.match(token.split("::")[0]):
                check_path(path, n, token, base_dirs)
    # Section and rule citations anywhere in the file (code comments and test names too).
    for n, line in enumerate(lines, 1):
        for m in SECTION_CITE.finditer(line):
            doc = m.group(1)
            cited = [m.group(2)] + re.findall(r"§(\d+(?:\.\d+)*)", m.group(3))
            for sec in cited:
                if doc in SECTIONED and sec not in SECTIONED[doc]:
                    problems.append(f"{path}:{n}: cites {doc} §{sec}, which has no such section")
        for m in RULE_CITE.finditer(line):
            if m.group(1) not in rules:
                problems.append(f"{path}:{n}: cites rule {m.group(1)} of docs/protocol.md, which defines no such rule")

# Install instructions keep Cargo.lock (without --locked, cargo install re-resolves every
# dependency from the registry), and the Rust version the README names is the declared one.
for path in files:
    if not path.endswith(".md"):
        continue
    for n, line in enumerate(open(os.path.join(ROOT, path), encoding="utf-8").read().splitlines(), 1):
        if re.search(r"cargo install\b", line) and "--locked" not in line and "--path" in line:
            problems.append(f"{path}:{n}: `cargo install` without --locked ignores Cargo.lock: {line.strip()[:80]}")
declared = re.search(r'^rust-version = "([^"]+)"', open(os.path.join(ROOT, "Cargo.toml")).read(), re.M)
readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
named = re.findall(r"Rust (\d+\.\d+(?:\.\d+)?) or newer", readme)
if declared and declared.group(1) not in named:
    problems.append(f"README.md: must say \"Rust {declared.group(1)} or newer\" (the workspace's rust-version); it names {named or 'none'}")
for v in named:
    if declared and v != declared.group(1):
        problems.append(f"README.md: names Rust {v}, but Cargo.toml declares rust-version {declared.group(1)}")

if problems:
    for p in problems:
        print(p)
    print(f"doc check: {len(problems)} problem(s)", file=sys.stderr)
    sys.exit(1)
print(f"doc check: {len(files)} files, no citation outside the repository, every named file exists")
