#!/usr/bin/env bash
# The main job, end to end: two real processes take turns on one lock through
# `fencepost run`, over the default fs store of a scratch git repository: one agent in
# the main checkout, the other in a linked worktree (as agent tools set them up), both
# landing in the repository's store, .git/fencepost. Each critical
# section appends its FENCEPOST_TOKEN to a log; the script then checks that the
# sections never overlapped and that the tokens strictly increase.
set -euo pipefail
repo_root=$(cd "$(dirname "$0")/.." && pwd)
echo "building the fencepost binary (release; the first build takes the longest, more while cargo downloads the crates)..."
cargo build --release --quiet --manifest-path "$repo_root/Cargo.toml" -p fencepost-cli
target_dir=${CARGO_TARGET_DIR:-$repo_root/target}   # cargo puts the binary under CARGO_TARGET_DIR when set
case "$target_dir" in /*) ;; *) target_dir="$PWD/$target_dir" ;; esac
fencepost="$target_dir/release/fencepost"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
command -v git >/dev/null || { echo "demo: git is required (apt-get install git)" >&2; exit 1; }
quiet_git() { git -c user.name=demo -c user.email=demo@fencepost.invalid -c init.defaultBranch=main "$@" >/dev/null; }
mkdir -p "$scratch/tree"
cd "$scratch/tree"
quiet_git init -q && quiet_git commit -q --allow-empty -m demo
quiet_git worktree add -q "$scratch/tree-b" -b agent-b   # a second checkout, one repository
mkdir -p "$scratch/tree-b/sub"
unset FENCEPOST_STORE FENCEPOST_OWNER

worker() { # $1 = name, $2 = directory to run from
  for round in 1 2 3; do
    (cd "$2" && "$fencepost" run --lock demo:migrations --ttl 2000 --wait 20000 --owner "$1" -- \
      sh -c 'set -C; : > "$0/busy" || { echo OVERLAP >> "$0/log"; exit 1; }
             echo "$1 (in $(basename "$PWD")) holds demo:migrations with token $FENCEPOST_TOKEN (store $FENCEPOST_STORE)"
             echo "$FENCEPOST_TOKEN" >> "$0/log"; sleep 0.2; rm -f "$0/busy"' "$scratch" "$1")
    sleep 0.1   # outside the lease: gives the other agent its turn
  done
}
worker agent-a "$scratch/tree" & a=$!
worker agent-b "$scratch/tree-b/sub" & b=$!   # the worktree finds the same store
wait "$a"; wait "$b"

echo
"$fencepost" status
tokens=$(tr '\n' ' ' < "$scratch/log")
echo "tokens in order: $tokens"
if grep -q OVERLAP "$scratch/log"; then echo "FAIL: critical sections overlapped"; exit 1; fi
sort -n -c "$scratch/log" && [ "$(sort -un "$scratch/log" | wc -l)" -eq 6 ] \
  || { echo "FAIL: tokens are not 6 strictly increasing numbers"; exit 1; }
echo "OK: 6 critical sections, never overlapping, tokens strictly increasing"
