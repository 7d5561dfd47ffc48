#!/usr/bin/env bash
# The declared MSRV is true: `rust-version` in Cargo.toml is at least what every locked
# dependency declares, and the whole workspace (every target, every feature) builds with
# exactly that toolchain. Run by .ci/run; fails loudly when the toolchain cannot be had.
set -euo pipefail
cd "$(dirname "$0")/.."

declared=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
[ -n "$declared" ] || { echo "msrv: no rust-version in Cargo.toml" >&2; exit 1; }

needed=$(cargo metadata --format-version 1 --locked | python3 -c '
import json, sys
def v(s): return tuple(int(x) for x in s.split("."))
pkgs = json.load(sys.stdin)["packages"]
top = max((p for p in pkgs if p.get("rust_version")), key=lambda p: v(p["rust_version"]))
print(top["rust_version"], top["name"], top["version"])')
read -r needed_version needed_by needed_by_version <<<"$needed"
norm() { awk -F. '{printf "%d.%d.%d\n", $1, $2, ($3 == "" ? 0 : $3)}' <<<"$1"; }
if [ "$(printf '%s\n%s\n' "$(norm "$needed_version")" "$(norm "$declared")" | sort -V | tail -1)" != "$(norm "$declared")" ]; then
  echo "msrv: Cargo.toml declares rust-version $declared, but $needed_by $needed_by_version (in Cargo.lock) needs $needed_version" >&2
  exit 1
fi
echo "msrv: declared $declared; the lockfile needs $needed_version ($needed_by $needed_by_version)"

toolchain=$(norm "$declared")
command -v rustup >/dev/null 2>&1 || { echo "msrv: rustup is required to build with Rust $toolchain" >&2; exit 1; }
if ! rustup run "$toolchain" rustc --version >/dev/null 2>&1; then
  rustup toolchain install "$toolchain" --profile minimal \
    || { echo "msrv: could not install Rust $toolchain; the MSRV check DID NOT RUN" >&2; exit 1; }
fi
cargo +"$toolchain" check --workspace --all-targets --all-features --locked
echo "msrv: the workspace builds with Rust $toolchain"
