//! The whole suite against both backends of this repository, so
//! `cargo test -p fencepost-conformance` lists every scenario by name for fs and
//! memory (the backends' own test runs do the same, each for itself).

use fencepost_conformance::{Backend, WORKER_ENV, run, run_trials, trials};
use fencepost_fs::FsStore;
use fencepost_memory::MemoryStore;

fn main() {
    let fs = Backend::shared("fs", |locator: &str| FsStore::open(locator));
    if std::env::var_os(WORKER_ENV).is_some() {
        run(fs); // a worker process of an fs scenario
    }
    let memory =
        Backend::in_process("memory", MemoryStore::new).with_power_cut(MemoryStore::power_cut);
    let mut all = trials(&memory);
    all.extend(trials(&fs));
    run_trials(all)
}
