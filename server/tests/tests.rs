//! `fencepost-server` as agents meet it: real child processes over stdio, real
//! JSON-RPC, one store shared through the filesystem (docs/protocol.md §8, issue 4).

mod support;

mod authority;
mod confinement;
mod contention;
mod polish;
mod protocol;
mod sessions;
mod shared;
// Builds repositories with the git CLI, which the Windows run under Wine does not
// have (docs/windows.md).
#[cfg(unix)]
mod store_location;
mod subtree;
#[cfg(target_os = "linux")]
mod takeover;
