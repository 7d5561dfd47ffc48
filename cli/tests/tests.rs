//! Integration tests of the `fencepost` binary (docs/protocol.md §7), run as real processes.
//!
//! One test target pulls in the topic files (the ripgrep layout). Every test has its
//! own scratch directory and store, and cleans FENCEPOST_* from the environment.

// Helpers are shared by topics compiled on different platforms; not every helper is
// used on every one.
#![allow(dead_code)]

mod util;

mod authority;
mod bad_input;
mod basics;
mod identity;
mod polish;
mod sessions;
mod several;
mod slots;
mod status;
// Real git repositories and POSIX shells (not available to the Windows test
// executables under Wine; the rule itself is tested there by backends/fs/tests/fs.rs).
#[cfg(unix)]
mod store_location;

// Issue 15: agent hooks, the git guard, hooks install (real git repositories).
#[cfg(unix)]
mod agent_hooks;
#[cfg(unix)]
mod git_guard;

// Their children are `fencepost-test-child` steps (tests/child/main.rs), so they
// run on Windows too (under Wine in CI: docs/windows.md); the few tests inside that
// still need `sh` are `cfg(unix)` with the reason.
mod contention;
mod hard_kill;
mod run;
mod shared;
mod subtree;
// Turns: waiters queue where they sleep on inotify (Linux).
#[cfg(target_os = "linux")]
mod turns;
#[cfg(windows)]
mod windows;

// Issue 16: lease loss, dead-holder takeover, waiting, exit codes, hold. Linux only
// where they read /proc or mount a tmpfs (and Windows records no process evidence,
// so it has no dead-holder takeover to test).
#[cfg(target_os = "linux")]
mod loss;
#[cfg(target_os = "linux")]
mod takeover;
mod waiting;
// Adversarial regressions (reads /proc).
#[cfg(target_os = "linux")]
mod breaker;
