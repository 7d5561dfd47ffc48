//! Heap allocations on the memory backend's hot path, counted with a counting global
//! allocator (docs/design-07-performance.md, "The memory backend"): the protocol's
//! own CPU cost is mostly allocation and JSON, so a change that adds allocations to
//! acquire + release or check shows up here before it shows up in the benchmark.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use fencepost::{AcquireOptions, Resource, Store};
use fencepost_memory::MemoryStore;

struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller's layout, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: as for `alloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations per call of `op`, averaged over `n` calls (one test thread only: the
/// counter is global, so this file holds one test).
fn per_call(n: usize, mut op: impl FnMut()) -> f64 {
    op();
    ALLOCATIONS.store(0, Ordering::Relaxed);
    COUNTING.store(true, Ordering::Relaxed);
    for _ in 0..n {
        op();
    }
    COUNTING.store(false, Ordering::Relaxed);
    ALLOCATIONS.load(Ordering::Relaxed) as f64 / n as f64
}

#[test]
fn the_hot_path_allocates_at_most_its_budget() {
    let store = Store::new(MemoryStore::new());
    let resource = Resource::lock("alloc-count");
    let options = AcquireOptions::new(600_000).owner("alloc");
    let cycle = per_call(200, || {
        let lease = store.acquire(&resource, &options).unwrap();
        store.release(&lease).unwrap();
    });
    let lease = store.acquire(&resource, &options).unwrap();
    let check = per_call(200, || {
        assert!(store.check(&resource, lease.token()).unwrap())
    });
    eprintln!("allocations: acquire + release {cycle:.1}, check {check:.1}");
    // The budgets: what the code needs (64 and 15 in a debug build, which also
    // parses every cached record to compare; a record's strings are shared, so a
    // cache hit or a tombstone built from its claim copies none; records are
    // written into a buffer sized for one, and the shares index of a key is
    // derived once), with less headroom than one record's strings or one growing
    // encode, so a regression that copies a record or grows a buffer fails here.
    assert!(
        cycle <= ACQUIRE_RELEASE_BUDGET,
        "acquire + release made {cycle:.1} allocations"
    );
    assert!(check <= CHECK_BUDGET, "check made {check:.1} allocations");
}

const ACQUIRE_RELEASE_BUDGET: f64 = 66.0;
const CHECK_BUDGET: f64 = 17.0;
