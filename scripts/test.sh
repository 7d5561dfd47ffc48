#!/usr/bin/env bash
# The tests, as the README's first screen runs them: installs what they need and is
# missing (etcd, for the etcd backend's tests, which start real etcd processes), then
# runs `cargo test --workspace` with any extra arguments given. Fails loudly: a test
# that could not run is an error, never a skip.
#
# Usage: scripts/test.sh [extra cargo test arguments, e.g. -- name_filter]
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "test.sh: FAILED: $*" >&2; exit 1; }
command -v cargo >/dev/null 2>&1 || fail "cargo is missing: install Rust with rustup (https://rustup.rs)"
if ! command -v etcd >/dev/null 2>&1; then
  command -v apt-get >/dev/null 2>&1 \
    || fail "the etcd backend's tests need 'etcd' (v3.4+) on PATH and there is no apt-get to install it: install it by hand, or run 'cargo test --workspace --exclude fencepost-etcd' for everything else"
  as_root=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || fail "'etcd' is missing and installing it needs root: run 'apt-get install etcd-server' as root, or 'cargo test --workspace --exclude fencepost-etcd' for everything else"
    as_root=(sudo)
  fi
  echo "test.sh: installing etcd-server (Debian) for the etcd backend's tests" >&2
  "${as_root[@]}" apt-get update -qq || fail "apt-get update failed; cannot install etcd-server"
  DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq etcd-server \
    || fail "apt-get install etcd-server failed"
  command -v etcd >/dev/null 2>&1 || fail "etcd-server was installed but 'etcd' is not on PATH"
fi
exec cargo test --workspace "$@"
