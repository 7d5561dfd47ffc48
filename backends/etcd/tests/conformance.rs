//! The shared behaviour suite (docs/protocol.md §3–§4) against one real etcd node: every
//! scenario, cross-process ones included. Each scenario gets a fresh key prefix in
//! the one node this binary starts (lazily, on the first scenario); worker
//! processes re-run this binary and reach that node through the locator, so they
//! never start an etcd of their own.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use fencepost_conformance::{Backend, WORKER_ENV, run, trials};
use fencepost_etcd::EtcdStore;
use fencepost_etcd::testing::EtcdCluster;

/// The node, started by the first scenario and killed before the binary exits
/// (statics are never dropped, so `main` stops it explicitly).
static NODE: OnceLock<Mutex<Option<EtcdCluster>>> = OnceLock::new();

fn node_endpoints() -> String {
    let node = NODE.get_or_init(|| Mutex::new(Some(EtcdCluster::single())));
    let guard = node.lock().unwrap_or_else(|e| e.into_inner());
    guard
        .as_ref()
        .expect("the node is stopped only after the run")
        .endpoints()
}

fn main() {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let backend = Backend::shared("etcd", |locator: &str| EtcdStore::open(locator))
        .with_fresh_locator(|_scratch| {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            format!("etcd://{}/conformance/s{n}", node_endpoints())
        });
    if std::env::var_os(WORKER_ENV).is_some() {
        // A worker: opens the locator it was given; never starts etcd.
        run(backend);
    }
    let arguments = libtest_mimic::Arguments::from_args();
    let conclusion = libtest_mimic::run(&arguments, trials(&backend));
    if let Some(node) = NODE.get() {
        drop(node.lock().unwrap_or_else(|e| e.into_inner()).take());
    }
    conclusion.exit()
}
