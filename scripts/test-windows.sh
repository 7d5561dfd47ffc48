#!/usr/bin/env bash
# Runs the tests of the core, fs, memory, conformance, CLI and server crates as Windows
# executables (x86_64-pc-windows-gnu) under Wine, so Windows semantics (sharing modes,
# CreateProcessW, path spelling, exclusive creates on NTFS-like rules) are exercised,
# not only type-checked. What Wine does and does not model: docs/windows.md.
#
# Installs what is missing (the Rust target, Debian's MinGW cross compiler, Debian's
# Wine), makes a fresh Wine prefix, builds the bcryptprimitives.dll shim from
# scripts/windows/ when that Wine lacks the DLL, runs the tests through a cargo runner,
# and stops Wine. Fails loudly: a Windows run that could not happen is an error, never
# a skip.
#
# Usage: scripts/test-windows.sh [extra cargo test arguments, e.g. -- name_filter]
# Env:   FENCEPOST_WINDOWS_TIMEOUT  seconds before the test run is killed (default 1500)
#        FENCEPOST_WINDOWS_LOG      where the full test log goes (default test-windows.log in cargo's target directory)
#        FENCEPOST_LINUX_COUNTS     LOG:ARTIFACTS of a Linux `cargo test` run (its log, and
#                                   the JSON of the same command with --no-run
#                                   --message-format=json): its counts are printed next
#                                   to Wine's, per test binary (.ci/run sets it)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
target=x86_64-pc-windows-gnu
crates=(fencepost fencepost-fs fencepost-memory fencepost-conformance fencepost-cli fencepost-server)
started=$(date +%s)

fail() { echo "test-windows: FAILED: $*" >&2; exit 1; }
command -v python3 >/dev/null 2>&1 || fail "python3 is needed for the per-binary counts (apt-get install python3)"
# Cargo's target directory (CARGO_TARGET_DIR, a config's build.target-dir, or
# target/), for the log and the artifact list.
target_dir=$(cargo metadata --format-version 1 --no-deps \
  | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])') \
  || fail "cargo metadata could not name the target directory"
log=${FENCEPOST_WINDOWS_LOG:-$target_dir/test-windows.log}
mkdir -p "$target_dir" "$(dirname "$log")"
if [ -n "${FENCEPOST_LINUX_COUNTS:-}" ]; then
  for file in ${FENCEPOST_LINUX_COUNTS/:/ }; do
    [ -s "$file" ] || fail "FENCEPOST_LINUX_COUNTS names $file, which is missing or empty"
  done
fi

apt_updated=
apt_install() { # installs Debian packages, without the recommended extras (~200 MB in all)
  command -v apt-get >/dev/null 2>&1 \
    || fail "'$1' is missing and there is no apt-get to install it: install $* (Debian names) by hand"
  if [ -z "$apt_updated" ]; then
    apt-get update -qq || fail "apt-get update failed; cannot install $*"
    apt_updated=1
  fi
  echo "test-windows: installing $* (Debian, --no-install-recommends)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" \
    || fail "apt-get install $* failed"
}

echo "== 1. the cross toolchain: Rust target $target and MinGW-w64"
if ! rustup target list --installed 2>/dev/null | grep -qx "$target"; then
  command -v rustup >/dev/null 2>&1 || fail "rustup is needed to add the $target target"
  rustup target add "$target" || fail "rustup target add $target failed"
fi
command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1 || apt_install gcc-mingw-w64-x86-64
command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1 || fail "x86_64-w64-mingw32-gcc still missing after the install"

echo "== 2. Wine"
if ! command -v wine >/dev/null 2>&1 || ! command -v wineserver >/dev/null 2>&1; then
  apt_install wine wine64
fi
for tool in wine wineboot wineserver; do
  command -v "$tool" >/dev/null 2>&1 || fail "$tool still missing after installing Wine"
done
# -all: Wine's diagnostics would otherwise land on the stderr of every process the
# tests start (and the CLI tests assert exactly what stderr says).
export WINEDEBUG=-all
echo "wine: $(wine --version)"

echo "== 3. a fresh Wine prefix"
scratch=$(mktemp -d)
export WINEPREFIX="$scratch/prefix"
# No Mono or Gecko download prompts: nothing here needs .NET or a browser engine.
export WINEDLLOVERRIDES="mscoree,mshtml="
stop_wine() {
  # Wine leaves its server and services running after the last program ends.
  wineserver -k 2>/dev/null || true
  wineserver -w 2>/dev/null || true
  rm -rf "$scratch"
}
trap stop_wine EXIT
wineboot -i >/dev/null 2>&1 || fail "wineboot -i could not create the prefix $WINEPREFIX"
wineserver -w
system32="$WINEPREFIX/drive_c/windows/system32"
[ -d "$system32" ] || fail "the new prefix has no $system32"

echo "== 4. bcryptprimitives.dll (Rust's std imports ProcessPrng from it)"
# Wine places a stub of every DLL it implements in system32; Debian 12's Wine 8.0 has
# no bcryptprimitives.dll, and then every Rust .exe fails to load (exit 53).
if [ -e "$system32/bcryptprimitives.dll" ]; then
  echo "this Wine provides bcryptprimitives.dll; no shim"
else
  x86_64-w64-mingw32-gcc -shared -O2 -Wall -Wextra -Werror \
    -o "$scratch/bcryptprimitives.dll" \
    scripts/windows/bcryptprimitives.c scripts/windows/bcryptprimitives.def -ladvapi32 \
    || fail "building the bcryptprimitives.dll shim failed"
  cp "$scratch/bcryptprimitives.dll" "$system32/bcryptprimitives.dll"
  echo "built the shim from scripts/windows/bcryptprimitives.c into the prefix's system32"
fi

echo "== 5. build the Windows test executables"
packages=()
for crate in "${crates[@]}"; do packages+=(-p "$crate"); done
# The JSON names each test executable's package and target, for the counts below.
artifacts=$target_dir/test-windows-artifacts.json
cargo test --target "$target" "${packages[@]}" --no-run --message-format=json-render-diagnostics >"$artifacts" \
  || fail "cross-building the tests for $target failed"

echo "== 6. run them under Wine"
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER=wine
# Our own variables must not leak from the caller into the Windows processes.
unset FENCEPOST_STORE FENCEPOST_OWNER FENCEPOST_TOKEN FENCEPOST_RESOURCE FENCEPOST_LOCK FENCEPOST_FILE
status=0
timeout --kill-after=30 "${FENCEPOST_WINDOWS_TIMEOUT:-1500}" \
  cargo test --target "$target" "${packages[@]}" --no-fail-fast "$@" >"$log" 2>&1 || status=$?
wineserver -k 2>/dev/null || true

# A test binary whose connection to the Wine server broke ("wine client error") did
# not fail a test: Wine did. Those binaries, and only when no test failed, run once
# more, loudly; a second break is a failure.
if [ "$status" -ne 0 ] && grep -q '^wine client error' "$log" && ! grep -q '^test result: FAILED' "$log"; then
  rerun=$(grep -o 'to rerun pass `[^`]*`' "$log" | sed 's/.*`\(.*\)`/\1/' | sort -u)
  echo "test-windows: the Wine server connection broke under: $(echo $rerun); running those once more" >&2
  status=0
  while read -r target_args; do
    [ -n "$target_args" ] || continue
    # shellcheck disable=SC2086 # "-p CRATE --test NAME" splits into its words
    # (built alone, the crate may get other features and so other executables:
    # their names join the artifacts)
    cargo test --target "$target" $target_args --no-run --message-format=json-render-diagnostics \
      >>"$artifacts" 2>>"$log" || status=$?
    # shellcheck disable=SC2086
    timeout --kill-after=30 600 cargo test --target "$target" $target_args >>"$log" 2>&1 || status=$?
  done <<<"$rerun"
  wineserver -k 2>/dev/null || true
fi

# A test that failed only because Wine's CreateProcess returned ERROR_INTERNAL_ERROR
# (1359), or its process died of STATUS_DLL_INIT_FAILED before running (docs/windows.md
# "Process creation"), did not fail: Wine did. When that is
# every failure in the log (scripts/wine-flakes.py decides, and refuses anything
# else), those tests run once more, by name and loudly, into their own log; a
# second failure is a failure. A binary whose Wine server connection broke in the
# same run (the handler above declines when a test failed) runs once more whole.
if [ "$status" -ne 0 ] && [ "$status" -ne 124 ] && flaky=$(python3 scripts/wine-flakes.py "$log"); then
  rerun_log="${log%.log}-rerun.log"
  echo "test-windows: Wine failed to start a process (1359 or 0xC0000142) under: $(echo "$flaky" | tr '\t\n' ' ;'); running those tests once more (log: $rerun_log)" >&2
  status=0
  while IFS=$'\t' read -r target_args tests; do
    [ -n "$target_args" ] || continue
    # shellcheck disable=SC2086 # "-p CRATE --test NAME" and the test names split into words
    timeout --kill-after=30 600 cargo test --target "$target" $target_args -- --exact $tests \
      >>"$rerun_log" 2>&1 || status=$?
  done <<<"$flaky"
  wineserver -k 2>/dev/null || true
  grep -E '^test result:' "$rerun_log" >&2 || true
fi

# Per test binary: passed / failed / ignored, next to Linux's when given.
echo "== per test binary: passed, failed, ignored"
runs=("Wine=$log:$artifacts")
[ -n "${FENCEPOST_LINUX_COUNTS:-}" ] && runs+=("Linux=$FENCEPOST_LINUX_COUNTS")
python3 scripts/test-counts.py "${runs[@]}" || fail "counting the tests failed (log: $log)"
elapsed=$(( $(date +%s) - started ))
if [ "$status" -ne 0 ]; then
  grep -E '^(test .* FAILED|error)' "$log" >&2 || true
  # What each failed test printed (libtest's "failures:" block up to its result
  # line), so that CI's own output says why, not only which.
  awk '/^failures:$/ { shown = 1 } shown { print } /^test result:/ { shown = 0 }' "$log" \
    | head -n 400 >&2 || true
  [ "$status" -eq 124 ] && fail "the Windows tests timed out (log: $log)"
  fail "the Windows tests failed with status $status (full log: $log)"
fi
passed=$(awk '/^test result:/{p+=$4} END{print p+0}' "$log")
[ "$passed" -gt 0 ] || fail "no Windows test ran (log: $log)"
echo "test-windows: $passed tests passed under Wine in ${elapsed}s (log: $log)"
