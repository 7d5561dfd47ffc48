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
mod contention;
#[cfg(unix)]
mod git_guard;
#[cfg(unix)]
mod hard_kill;
#[cfg(unix)]
mod run;
#[cfg(unix)]
mod subtree;

// Issue 16: lease loss, dead-holder takeover, waiting, exit codes, hold. Linux only
// where they read /proc or mount a tmpfs.
#[cfg(target_os = "linux")]
mod loss;
#[cfg(target_os = "linux")]
mod takeover;
#[cfg(unix)]
mod waiting;
// Adversarial regressions (reads /proc).
#[cfg(target_os = "linux")]
mod breaker;
