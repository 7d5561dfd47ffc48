//! The shared behaviour suite, run against the memory backend (docs/protocol.md §3–§4).
use fencepost_conformance::{Backend, run};
use fencepost_memory::MemoryStore;

fn main() {
    run(Backend::in_process("memory", MemoryStore::new).with_power_cut(MemoryStore::power_cut));
}
