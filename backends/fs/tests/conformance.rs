//! The shared behaviour suite, run against the filesystem backend (docs/protocol.md §3–§4):
//! every scenario, including the cross-process ones (workers re-run this binary
//! and open the same store directory).
use fencepost_conformance::{Backend, run};
use fencepost_fs::FsStore;

fn main() {
    run(Backend::shared("fs", |locator: &str| {
        FsStore::open(locator)
    }));
}
