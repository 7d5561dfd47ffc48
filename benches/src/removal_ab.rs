//! `__ops removal-ab N DIR`: the fs backend's removal thread against the same backend
//! removing in line (the sweep's removals made before the operation returns, as
//! before the removal thread), alternated in one process so both see the same disk
//! weather (docs/design-07-performance.md, "What the floors leave out"). Diagnostic
//! only: the report does not run it.
//!
//! For renew and for acquire + release of a cold resource: N rounds of one in-line
//! operation, one operation with the removal thread (its removals then settled,
//! untimed) and the flushed-create floor, each printed as p50 and mean; then N / 10
//! blocks of 20 back-to-back operations of each (the removal thread's block ends
//! with its settle on the clock) and of the floor, printed as the mean per
//! operation.

use std::time::{Duration, Instant};

use fencepost::{
    AcquireOptions, BackendError, ChangeWatch, CreateOutcome, Durability, Key, LeaseStore,
    Resource, Store,
};
use fencepost_fs::FsStore;

use crate::R;
use crate::floor::FloorKit;
use crate::stats::{fmt, summarize};

/// A store on the fs backend in `dir` with every removal in line (`__ops
/// inline-OP`: the operation with the sweep made before it returns).
pub fn inline_store(dir: &std::path::Path) -> R<Store> {
    Ok(Store::new(InLine(FsStore::open(dir)?)))
}

/// The fs backend with every removal in line: `remove_superseded` is the trait's
/// default, a plain `remove`.
#[derive(Debug)]
struct InLine(FsStore);

impl LeaseStore for InLine {
    fn create(
        &self,
        key: &Key,
        generation: u64,
        bytes: &[u8],
        durability: Durability,
    ) -> Result<CreateOutcome, BackendError> {
        self.0.create(key, generation, bytes, durability)
    }
    fn generations(&self, key: &Key) -> Result<Vec<u64>, BackendError> {
        self.0.generations(key)
    }
    fn read(&self, key: &Key, generation: u64) -> Result<Option<Vec<u8>>, BackendError> {
        self.0.read(key, generation)
    }
    fn remove(&self, key: &Key, generation: u64) -> Result<(), BackendError> {
        self.0.remove(key, generation)
    }
    fn remove_key_if_empty(&self, key: &Key) -> Result<(), BackendError> {
        self.0.remove_key_if_empty(key)
    }
    fn keys(&self) -> Result<Vec<Key>, BackendError> {
        self.0.keys()
    }
    fn watch_changes(&self, key: &Key) -> Option<Box<dyn ChangeWatch>> {
        self.0.watch_changes(key)
    }
    fn locator(&self) -> String {
        self.0.locator()
    }
}

/// Back-to-back operations per block.
const BLOCK: usize = 20;

pub fn run(dir: &std::path::Path, n: usize) -> R<()> {
    let n = n.max(10);
    let threaded_fs = FsStore::open(dir.join("thread"))?;
    let threaded = Store::new(threaded_fs.clone());
    let inline = Store::new(InLine(FsStore::open(dir.join("inline"))?));
    let mut kit = FloorKit::new(&dir.join("floor"), 0)?;
    let options = AcquireOptions::new(600_000).owner("ab");
    let settle = || threaded_fs.settle();

    for what in ["renew", "acquire + release, cold resource"] {
        let res = Resource::lock(format!("ab-{}", what.len()));
        let mut leases = Vec::new();
        for store in [&inline, &threaded] {
            let lease = store.acquire(&res, &options)?;
            if what != "renew" {
                store.release(&lease)?;
            }
            leases.push(lease);
        }
        let mut op = |which: usize| -> R<Duration> {
            let store = [&inline, &threaded][which];
            let start = Instant::now();
            if what == "renew" {
                store.renew(&mut leases[which])?;
            } else {
                store.release(&store.acquire(&res, &options)?)?;
            }
            Ok(start.elapsed())
        };
        let floor = |kit: &mut FloorKit| -> R<Duration> {
            if what == "renew" {
                kit.create(true)
            } else {
                Ok(kit.create(true)? + kit.create(false)? + kit.list_read()?)
            }
        };
        let (mut a, mut b, mut f) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..n {
            a.push(op(0)?);
            b.push(op(1)?);
            settle();
            f.push(floor(&mut kit)?);
        }
        let blocks = (n / 10).max(1);
        let (mut ba, mut bb, mut bf) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
        for _ in 0..blocks {
            let start = Instant::now();
            for _ in 0..BLOCK {
                op(0)?;
            }
            ba += start.elapsed();
            let start = Instant::now();
            for _ in 0..BLOCK {
                op(1)?;
            }
            settle();
            bb += start.elapsed();
            for _ in 0..BLOCK {
                bf += floor(&mut kit)?;
            }
        }
        let per = u32::try_from(blocks * BLOCK)?;
        let (a, b, f) = (summarize(a), summarize(b), summarize(f));
        println!("{what} ({n} alternated rounds; {blocks} blocks of {BLOCK} back to back):");
        for (name, s, mean_b2b) in [
            ("in line (before)", &a, ba / per),
            ("removal thread (after)", &b, bb / per),
            ("floor", &f, bf / per),
        ] {
            println!(
                "  {name:24} p50 {:>9} ({:.2}× floor)  mean {:>9}  back-to-back mean {:>9} ({:.2}× floor)",
                fmt(s.p50),
                s.p50.as_secs_f64() / f.p50.as_secs_f64(),
                fmt(s.mean),
                fmt(mean_b2b),
                mean_b2b.as_secs_f64() / (bf / per).as_secs_f64(),
            );
        }
    }
    Ok(())
}
