#!/usr/bin/env bash
# Proves the artifact, not the source (issue 6): packages every publishable crate,
# builds a consumer outside the workspace against the *packaged* core + fs backend,
# installs the packaged CLI and server and runs them, and checks the dependency budget.
# Usage: scripts/verify-package.sh            (needs only cargo; works offline once
#        the workspace's dependencies are in the cargo cache)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
work=$(mktemp -d)
trap '[ -n "${FENCEPOST_KEEP_WORK:-}" ] || rm -rf "$work"' EXIT
fail() { echo "verify-package: $*" >&2; exit 1; }
# Builds go to the workspace's own target directory: the packaged crates build as
# crates of their own (their sources are the unpacked packages, so their artifacts
# are apart from the workspace's), while the registry dependencies a stranger would
# compile from the same sources are reused instead of compiled a second time.
# (A packaged binary overwrites the workspace's copy of the same name in
# target/<profile>/; the next workspace build links its own back.)
build_dir=$(cargo metadata --format-version 1 --no-deps \
  | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])') \
  || fail "cargo metadata could not name the target directory"
# Each phase prints how long the one before took, so CI's log shows where the time goes.
phase_started=$SECONDS
phase() {
  [ "$phase_started" -lt "$SECONDS" ] && echo "   ($(( SECONDS - phase_started ))s)"
  phase_started=$SECONDS
  echo "== $1"
}

publishable=(fencepost fencepost-fs fencepost-memory fencepost-conformance fencepost-etcd fencepost-cli fencepost-server)

phase "1. dependency budget (docs/protocol.md §9)"
# The core may use std plus these crates and their own dependencies; anything else is a
# new dependency that must be argued for here. getrandom: the per-tenure secret (proof of
# holding) must come from the operating system's random source, not from std's hash keys.
core_allowed='^(fencepost|thiserror|thiserror-impl|serde|serde_core|serde_derive|serde_json|sha2|getrandom|r-efi|unicode-normalization|caseless|tinyvec|tinyvec_macros|digest|block-buffer|crypto-common|generic-array|hybrid-array|typenum|cpufeatures|libc|version_check|itoa|memchr|ryu|zmij|proc-macro2|quote|syn|unicode-ident|const-oid|cfg-if)$'
core_tree=$(cargo tree -p fencepost -e normal --prefix none --format '{p}' | awk '{print $1}' | sort -u)
echo "fencepost (core): $(echo "$core_tree" | wc -l) crates in its normal dependency tree"
unexpected=$(echo "$core_tree" | grep -Ev "$core_allowed" || true)
[ -z "$unexpected" ] || fail "the core gained dependencies outside its budget: $(echo $unexpected)"
heavy='^(tokio|rmcp|clap|clap_builder|hyper|reqwest|ureq|mio|async-std|h2|tonic|axum|rustls|openssl)$'
for crate in fencepost-fs fencepost-cli; do
  tree=$(cargo tree -p "$crate" -e normal --prefix none --format '{p}' | awk '{print $1}' | sort -u)
  echo "$crate: $(echo "$tree" | wc -l) crates in its normal dependency tree"
  bad=$(echo "$tree" | grep -E "$heavy" || true)
  if [ "$crate" = fencepost-cli ]; then bad=$(echo "$bad" | grep -Ev '^(clap|clap_builder)$' || true); fi
  [ -z "$bad" ] || fail "$crate depends on heavy or network crates: $(echo $bad)"
done

phase "2. cargo package (with verification builds, metadata warnings are errors)"
packages=()
for crate in "${publishable[@]}"; do packages+=(-p "$crate"); done
# The verification builds take our crates from a temporary registry, and cargo
# takes registry sources as immutable: it reuses the sources it unpacked from that
# registry on an earlier run (kept in CARGO_HOME, under the registry's path) and
# what it built from them, so a changed crate would be verified against the last
# run's copy of its dependency. Our crates come from no other registry: remove
# those copies and builds first.
cargo_home="${CARGO_HOME:-$HOME/.cargo}"
for crate in "${publishable[@]}"; do
  rm -rf "$cargo_home"/registry/src/*/"$crate-0.1.0" "$cargo_home"/registry/cache/*/"$crate-0.1.0.crate"
done
cargo clean --quiet --target-dir "$build_dir" "${packages[@]}"
cargo package "${packages[@]}" --allow-dirty --target-dir "$build_dir" 2> "$work/package.log" \
  || { cat "$work/package.log" >&2; fail "cargo package failed"; }
if grep -E '^warning' "$work/package.log"; then fail "cargo package warned (above)"; fi
mkdir -p "$work/crates"
for crate in "${publishable[@]}"; do
  tar -xzf "$build_dir/package/$crate-0.1.0.crate" -C "$work/crates"
done

patches=()
for crate in "${publishable[@]}"; do
  patches+=(--config "patch.crates-io.$crate.path=\"$work/crates/$crate-0.1.0\"")
done

phase "3. a consumer outside the workspace, against the packaged core + fs backend"
mkdir -p "$work/consumer/src"
cat > "$work/consumer/Cargo.toml" <<TOML
[package]
name = "fencepost-consumer"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
fencepost = "0.1.0"
fencepost-fs = "0.1.0"

[workspace]
TOML
cat > "$work/consumer/src/main.rs" <<'RS'
use fencepost::{AcquireOptions, Resource, Store};
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args().nth(1).expect("store directory");
    let store = Store::new(fencepost_fs::FsStore::open(&dir)?);
    let lock = Resource::lock("consumer");
    let lease = store.acquire(&lock, &AcquireOptions::new(30_000).owner("consumer"))?;
    assert!(store.check(&lock, lease.token())?, "the holder's token must pass");
    store.release(&lease)?;
    assert!(!store.check(&lock, lease.token())?, "a released token must not pass");
    let next = store.acquire(&lock, &AcquireOptions::new(30_000).owner("consumer"))?;
    assert!(next.token() > lease.token());
    println!("consumer: acquired {} then {}", lease.token(), next.token());
    Ok(())
}
RS
(cd "$work/consumer" && cargo run --quiet --offline --target-dir "$build_dir" "${patches[@]}" -- "$work/consumer-store") \
  || fail "the consumer of the packaged crates failed"
if (cd "$work/consumer" && cargo metadata --offline --format-version 1 "${patches[@]}") | grep -q "\"manifest_path\":\"$repo/"; then
  fail "the consumer resolved a crate from the workspace instead of the package"
fi

phase "3b. a backend author outside the workspace runs the packaged conformance suite in a few lines"
mkdir -p "$work/author/src" "$work/author/tests"
cat > "$work/author/Cargo.toml" <<TOML
[package]
name = "fencepost-backend-author"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
fencepost-fs = "0.1.0"

[dev-dependencies]
fencepost-conformance = "0.1.0"

[[test]]
name = "conformance"
harness = false

[workspace]
TOML
echo '//! the author re-exports a backend' > "$work/author/src/lib.rs"
cat > "$work/author/tests/conformance.rs" <<'RS'
fn main() {
    fencepost_conformance::run(fencepost_conformance::Backend::shared("mine", |l: &str| fencepost_fs::FsStore::open(l)));
}
RS
(cd "$work/author" && cargo test --quiet --offline --target-dir "$build_dir" "${patches[@]}" --test conformance) \
  > "$work/author.log" 2>&1 || { cat "$work/author.log" >&2; fail "the outside author's conformance run failed"; }
grep -q "mine::contention_processes" "$work/author.log" || { cat "$work/author.log" >&2; fail "the author's run did not list the scenarios"; }
grep "test result" "$work/author.log"

phase "4. cargo install the packaged CLI and server, then use them"
# Installed as debug builds: phase 2's verification builds compiled every dependency
# of the packaged CLI and server, with the features each alone selects, in the dev
# profile, and those are reused; a stranger's release install compiles the same
# sources with optimizations (and, as the workspace's release profile is not in a
# published manifest, without its overflow checks).
install_profile=(--debug)
for crate in fencepost-cli fencepost-server; do
  cargo install --quiet --offline --locked --path "$work/crates/$crate-0.1.0" --root "$work/install" \
    --target-dir "$build_dir" "${install_profile[@]}" "${patches[@]}" 2>"$work/install.log" \
    || cargo install --quiet --offline --path "$work/crates/$crate-0.1.0" --root "$work/install" \
      --target-dir "$build_dir" "${install_profile[@]}" "${patches[@]}" \
    || { cat "$work/install.log" >&2; fail "cargo install $crate from its package failed"; }
done
fp="$work/install/bin/fencepost"
"$fp" --version
store="$work/cli-store"
token=$("$fp" --store "$store" claim --lock packaged --ttl 30000)
"$fp" --store "$store" check --lock packaged "$token" || fail "installed CLI: check of a live token"
set +e; "$fp" --store "$store" claim --lock packaged; held=$?; set -e
[ "$held" -eq 3 ] || fail "installed CLI: a second claim exited $held, expected 3"
"$fp" --store "$store" release --lock packaged "$token" || fail "installed CLI: release"
echo "installed CLI: claim $token, held → 3, check, release: ok"

mkdir -p "$work/root"
responses=$( { printf '%s\n' \
  '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"verify-package","version":"0"}}}' \
  '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
  '{"jsonrpc":"2.0","id":2,"method":"tools/list"}'; sleep 2; } | "$work/install/bin/fencepost-server" --root "$work/root" 2>/dev/null )
for tool in claim claim_all assert renew release write status; do
  echo "$responses" | grep -q "\"name\":\"$tool\"" || fail "installed server: tools/list lacks $tool"
done
echo "installed server: initialize + tools/list shows every tool: ok"
phase "done"
echo "verify-package: all checks passed"
