//! Scenarios for claims covered by a subtree and the resources in their way
//! (docs/design-05-subtrees-and-shared.md §1, §3, §4.3): what a refusal names, a
//! subtree covering its own path, a dead holder in the way, a waiting subtree
//! claimer's intent, the participant index healing itself, and several resources
//! refusing a shared claim.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fencepost::{
    AcquireOptions, Durability, Error, Key, LeaseStore, Liveness, ProcessEvidence, Resource, Store,
    TryAcquire, Verdict,
};

use super::{acquire, fail, opts};
use crate::{Failed, Fixture};

/// The holder that keeps `options` out of `resource`, or an error if admitted.
fn refused_by(
    store: &Store,
    resource: &Resource,
    options: &AcquireOptions,
    what: &str,
) -> Result<fencepost::Holder, Failed> {
    match store.try_acquire(resource, options) {
        Ok(TryAcquire::Held(holder)) => Ok(holder),
        Ok(TryAcquire::Acquired(lease)) => {
            let _ = store.release(&lease);
            Err(format!("{what}: admitted (token {})", lease.token()).into())
        }
        Err(error) => Err(fail(what, error)),
    }
}

/// The resource as a refusal names it: its kind and resolved path.
fn named(resource: &Resource) -> Result<String, Failed> {
    let label = resource.identity().map_err(|e| fail("identity", e))?.label;
    Ok(format!("{} {label}", resource.kind()))
}

fn in_the_way(holder: &fencepost::Holder) -> String {
    holder.in_the_way.as_ref().map_or_else(
        || "nothing".into(),
        |r| format!("{} {}", r.kind(), r.target()),
    )
}

/// A refusal because of another resource names that resource and its holder:
/// a subtree above a file, a file and a subtree below a subtree, a subtree above
/// a subtree; a refusal by the resource itself names nothing else. The error's
/// text names it too, and suggests breaking *it*.
pub(super) fn refusal_names_what_is_in_the_way<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let store = f.store();
    let root = f.scratch().join("repo");
    std::fs::create_dir_all(root.join("src/auth")).map_err(|e| fail("mkdir", e))?;
    let src = Resource::dir(root.join("src"));
    let file = Resource::file(root.join("src/auth/login.rs"));
    let tree = acquire(&store, &src, &opts("tree"))?;
    for (resource, what) in [
        (&file, "a file below a held subtree"),
        (
            &Resource::dir(root.join("src/auth")),
            "a subtree below a held subtree",
        ),
        (&Resource::dir(&root), "a subtree above a held subtree"),
    ] {
        let holder = refused_by(&store, resource, &opts("intruder"), what)?;
        // A subtree above is refused by what lies below it: `src` itself.
        ensure!(
            holder.owner == "tree" && in_the_way(&holder) == named(&src)?,
            "{what}: refused by {:?} naming {}, expected tree naming {}",
            holder.owner,
            in_the_way(&holder),
            named(&src)?
        );
        ensure!(!holder.waiting, "{what}: a holder reported as waiting");
    }
    match store.acquire(&file, &opts("intruder")) {
        Err(error @ Error::Held { .. }) => {
            let text = error.to_string();
            let src_named = named(&src)?;
            ensure!(
                text.contains(&format!("blocked by {src_named}"))
                    && text.contains(&format!("break the lease of {src_named}")),
                "the error does not name the subtree in the way: {text}"
            );
        }
        other => return Err(format!("a file below a held subtree: {other:?}").into()),
    }
    // The subtree itself: refused by its own holder, nothing else named.
    let holder = refused_by(&store, &src, &opts("intruder"), "the held subtree itself")?;
    ensure!(
        holder.in_the_way.is_none(),
        "a claim of the held resource itself names {} in the way",
        in_the_way(&holder)
    );
    store.release(&tree).map_err(|e| fail("release", e))?;
    // A file below a requested subtree.
    let held = acquire(&store, &file, &opts("file"))?;
    let holder = refused_by(
        &store,
        &src,
        &opts("intruder"),
        "a subtree over a held file",
    )?;
    ensure!(
        holder.owner == "file" && in_the_way(&holder) == named(&file)?,
        "a subtree over a held file: refused by {:?} naming {}",
        holder.owner,
        in_the_way(&holder)
    );
    store.release(&held).map_err(|e| fail("release", e))?;
    // A shared holder of a subtree above an exclusive file claim.
    let reader = acquire(&store, &src, &opts("reader").shared(true))?;
    let holder = refused_by(
        &store,
        &file,
        &opts("intruder"),
        "a file below a shared subtree",
    )?;
    ensure!(
        in_the_way(&holder) == named(&src)?,
        "a file below a shared subtree names {}",
        in_the_way(&holder)
    );
    store.release(&reader).map_err(|e| fail("release", e))?;
    Ok(())
}

/// A subtree claim covers its directory itself: `dir:P` and `file:P` (a path that
/// exists as neither yet) are never held at once, either way, exclusive or shared.
pub(super) fn subtree_covers_its_own_path<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let store = f.store();
    let path = f.scratch().join("zz");
    let (dir, file) = (Resource::dir(&path), Resource::file(&path));
    for (first, second) in [(&dir, &file), (&file, &dir)] {
        let held = acquire(&store, first, &opts("first"))?;
        let holder = refused_by(
            &store,
            second,
            &opts("second"),
            &format!("{second} while {first} is held"),
        )?;
        ensure!(
            holder.owner == "first" && in_the_way(&holder) == named(first)?,
            "{second} while {first} is held: refused by {:?} naming {}",
            holder.owner,
            in_the_way(&holder)
        );
        refused_by(
            &store,
            second,
            &opts("reader").shared(true),
            &format!("shared {second} while {first} is held"),
        )?;
        store.release(&held).map_err(|e| fail("release", e))?;
        let reader = acquire(&store, first, &opts("reader").shared(true))?;
        refused_by(
            &store,
            second,
            &opts("second"),
            &format!("{second} while {first} is held shared"),
        )?;
        store.release(&reader).map_err(|e| fail("release", e))?;
        let after = acquire(&store, second, &opts("second"))?;
        store.release(&after).map_err(|e| fail("release", e))?;
    }
    Ok(())
}

/// A subtree claimer waiting for claims it covers is not starved by claims that
/// keep arriving below it: 4 threads claim files below `src` back to back, each
/// held 20 ms, so some file is nearly always held; a subtree claim of `src` started
/// meanwhile holds within a bound (100 uncontended claims, at least 20 s), and while it waits, every new covered claim
/// (exclusive or shared) is refused naming the waiting claimer.
pub(super) fn covered_claims_honour_a_waiting_subtree<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let root = f.scratch().join("repo");
    std::fs::create_dir_all(root.join("src")).map_err(|e| fail("mkdir", e))?;
    let src = Resource::dir(root.join("src"));
    let stop = Arc::new(AtomicBool::new(false));
    let claimed = Arc::new(AtomicUsize::new(0));
    let errors: Arc<Mutex<Vec<String>>> = Arc::default();
    let streams: Vec<_> = (0..4)
        .map(|t| {
            let (store, stop, claimed, errors) =
                (f.store(), stop.clone(), claimed.clone(), errors.clone());
            let file = Resource::file(root.join(format!("src/f{t}.rs")));
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    match store.try_acquire(&file, &opts(&format!("stream-{t}"))) {
                        Ok(TryAcquire::Acquired(lease)) => {
                            claimed.fetch_add(1, Ordering::SeqCst);
                            std::thread::sleep(Duration::from_millis(20));
                            let _ = store.release(&lease);
                        }
                        Ok(TryAcquire::Held(_)) => std::thread::sleep(Duration::from_millis(2)),
                        Err(e) => errors.lock().unwrap().push(e.to_string()),
                    }
                }
            })
        })
        .collect();
    // The stream runs before the subtree claimer arrives.
    let started = Instant::now();
    while claimed.load(Ordering::SeqCst) < 8 && started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(5));
    }
    // The bound: the claims held when it arrived (4 of them, 20 ms each plus a
    // claim's own time), the backoff of its own waiting (capped), and a loaded
    // machine's scheduling: 100 uncontended claims on this backend, at least 20 s;
    // the stream would run on for as long as it is let.
    let unit_ms = {
        let store = f.store();
        let probe = Resource::file(root.join("src/unit.rs"));
        let started = Instant::now();
        let lease = acquire(&store, &probe, &opts("unit"))?;
        store.release(&lease).map_err(|e| fail("release", e))?;
        u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
    };
    let bound_ms = unit_ms.saturating_mul(100).max(20_000);
    // A claim below `src` held until the subtree claimer is seen waiting, so that it
    // does wait (it could arrive in a gap of the stream and hold at once).
    let store = f.store();
    let blocker = acquire(
        &store,
        &Resource::file(root.join("src/blocker.rs")),
        &opts("blocker"),
    )?;
    let writer = {
        let (store, src) = (f.store(), src.clone());
        std::thread::spawn(move || {
            let began = Instant::now();
            let outcome = store.try_acquire(&src, &opts("subtree").wait_ms(bound_ms));
            (outcome, began.elapsed())
        })
    };
    // While it waits, a new covered claim is refused naming it.
    let probe = Resource::file(root.join("src/probe.rs"));
    let mut kept_out = false;
    let waited = Instant::now();
    while !kept_out && !writer.is_finished() && waited.elapsed() < Duration::from_secs(60) {
        let outcome = store
            .try_acquire(&probe, &opts("probe"))
            .map_err(|e| fail("probe", e))?;
        if let TryAcquire::Acquired(lease) = &outcome {
            store.release(lease).map_err(|e| fail("release", e))?;
        }
        if let TryAcquire::Held(holder) = outcome {
            kept_out = holder.waiting;
            if kept_out {
                ensure!(
                    holder.owner.starts_with("subtree") && in_the_way(&holder) == named(&src)?,
                    "kept out by {:?} naming {}",
                    holder.owner,
                    in_the_way(&holder)
                );
                if let TryAcquire::Acquired(lease) = store
                    .try_acquire(&probe, &opts("reader").shared(true))
                    .map_err(|e| fail("shared probe", e))?
                {
                    let _ = store.release(&lease);
                    return Err(
                        "a shared claim below a waiting subtree claimer was admitted".into(),
                    );
                }
            }
        } else {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    store.release(&blocker).map_err(|e| fail("release", e))?;
    let (outcome, took) = writer
        .join()
        .map_err(|_| Failed::from("the subtree thread panicked"))?;
    stop.store(true, Ordering::SeqCst);
    for stream in streams {
        stream
            .join()
            .map_err(|_| Failed::from("a stream thread panicked"))?;
    }
    let errors = errors.lock().unwrap();
    ensure!(errors.is_empty(), "stream errors: {}", errors.join("; "));
    match outcome.map_err(|e| fail("subtree claim", e))? {
        TryAcquire::Acquired(lease) => store.release(&lease).map_err(|e| fail("release", e))?,
        TryAcquire::Held(holder) => {
            return Err(format!(
                "the subtree claimer was starved for {took:?} by the stream (last held by {:?})",
                holder.owner
            )
            .into());
        }
    }
    ensure!(
        kept_out,
        "no covered claim was kept out while the subtree claimer waited"
    );
    Ok(())
}

/// Processes by pid on one host: a probe that answers as the OS would.
#[derive(Debug)]
struct Pids {
    this: ProcessEvidence,
    running: Arc<Mutex<HashSet<u32>>>,
}

impl Liveness for Pids {
    fn this_process(&self) -> Option<ProcessEvidence> {
        Some(self.this.clone())
    }
    fn verdict(&self, evidence: &ProcessEvidence) -> Verdict {
        if self.running.lock().unwrap().contains(&evidence.pid) {
            Verdict::Running
        } else {
            Verdict::Gone
        }
    }
}

fn evidence(pid: u32) -> ProcessEvidence {
    ProcessEvidence {
        host: "host-covered".into(),
        boot: "boot-1".into(),
        pid,
        start: 1,
        group: None,
    }
}

fn keys_starting<S: LeaseStore>(raw: &S, prefix: &str) -> Result<Vec<Key>, Failed> {
    Ok(raw
        .keys()
        .map_err(|e| fail("keys", e))?
        .into_iter()
        .filter(|k| k.as_str().starts_with(prefix))
        .collect())
}

fn entry_generations<S: LeaseStore>(raw: &S, index: &Key) -> Result<Vec<u64>, Failed> {
    let mut g = raw.generations(index).map_err(|e| fail("list", e))?;
    g.sort_unstable();
    Ok(g)
}

/// A dead holder in the way is seen as dead, as a direct takeover sees it: a
/// subtree holder whose process died does not keep the files below it out until
/// its ttl (its token is fenced by the claim that gets in), nor a dead shared
/// holder an exclusive claim; a live one does. And the participant index heals
/// itself: an entry whose participant never wrote its record because its writer
/// died (a crash between the two) is swept, one whose writer runs is kept.
pub(super) fn dead_holders_in_the_way_and_index_healing<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let running = Arc::new(Mutex::new(HashSet::from([10, 11, 20])));
    let probe = |pid| Pids {
        this: evidence(pid),
        running: running.clone(),
    };
    let (holder_store, reader_store, claimer) = (
        f.store().with_liveness(probe(10)),
        f.store().with_liveness(probe(11)),
        f.store().with_liveness(probe(20)),
    );
    let tied = |owner: &str| opts(owner).tied_to_process(true);
    let root = f.scratch().join("repo");
    std::fs::create_dir_all(root.join("src")).map_err(|e| fail("mkdir", e))?;
    let src = Resource::dir(root.join("src"));
    let file = Resource::file(root.join("src/a.rs"));
    let tree = acquire(&holder_store, &src, &tied("tree"))?;
    // Alive: the file waits.
    refused_by(
        &claimer,
        &file,
        &tied("file"),
        "a file below a live subtree holder",
    )?;
    // Dead (SIGKILL: nothing released): the file is claimed at once, and the dead
    // subtree holder's token no longer passes.
    running.lock().unwrap().remove(&10);
    let lease = acquire(&claimer, &file, &tied("file"))?;
    ensure!(
        !claimer
            .check(&src, tree.token())
            .map_err(|e| fail("check", e))?,
        "the dead subtree holder's token {} still passes after a covered claim got in",
        tree.token()
    );
    claimer.release(&lease).map_err(|e| fail("release", e))?;
    // A dead shared holder: an exclusive claim gets in at once.
    let lock = Resource::lock("covered-readers");
    let reader = acquire(&reader_store, &lock, &tied("reader").shared(true))?;
    refused_by(
        &claimer,
        &lock,
        &tied("writer"),
        "a lock with a live reader",
    )?;
    running.lock().unwrap().remove(&11);
    let writer = acquire(&claimer, &lock, &tied("writer"))?;
    claimer.release(&writer).map_err(|e| fail("release", e))?;
    drop(reader);
    // The participant index: entries written by a process that died before its
    // participant's record, and by one that runs (its record may be on its way).
    let raw = f.raw();
    let index = keys_starting(raw, "shares-")?
        .into_iter()
        .next()
        .ok_or("no participant index after a shared claim")?;
    let mut next = entry_generations(raw, &index)?.last().copied().unwrap_or(0);
    let mut plant = |pid: u32, nonce: &str| -> Result<u64, Failed> {
        next += 1;
        let points_to = format!("share-{nonce:0>32}");
        let entry = serde_json::json!({
            "v": 1, "key": index.as_str(), "generation": next, "entry": "share",
            "points_to": points_to, "label": "lock:covered-readers",
            "process": evidence(pid),
        });
        raw.create(
            &index,
            next,
            entry.to_string().as_bytes(),
            Durability::Flushed,
        )
        .map_err(|e| fail("plant an entry", e))?;
        Ok(next)
    };
    let dead_entry = plant(12, "d")?;
    let live_entry = plant(20, "e")?;
    let newest = plant(12, "f")?;
    let writer = acquire(&claimer, &lock, &tied("writer"))?;
    claimer.release(&writer).map_err(|e| fail("release", e))?;
    let left = entry_generations(raw, &index)?;
    ensure!(
        !left.contains(&dead_entry),
        "an entry whose writer died before its record was not swept: {left:?}"
    );
    ensure!(
        left.contains(&live_entry),
        "an entry whose writer runs (its record may still come) was swept: {left:?}"
    );
    ensure!(
        left.contains(&newest),
        "the newest entry was swept (numbering would restart): {left:?}"
    );
    ensure!(
        left.len() == 2,
        "ended participants' entries left behind: {left:?} (expected {live_entry} and {newest})"
    );
    Ok(())
}

/// Several resources at once are claimed exclusively: a shared claim of a set is
/// refused with a one-line error, and nothing is written.
pub(super) fn several_resources_refuse_shared<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let store = f.store();
    let set = [Resource::lock("set-a"), Resource::lock("set-b")];
    let before = f.raw().keys().map_err(|e| fail("keys", e))?.len();
    match store.acquire_all(&set, &opts("reader").shared(true)) {
        Err(Error::InvalidArgument(message)) => ensure!(
            message.contains("--shared") && !message.contains('\n'),
            "unclear refusal: {message}"
        ),
        other => return Err(format!("a shared claim of several resources: {other:?}").into()),
    }
    let after = f.raw().keys().map_err(|e| fail("keys", e))?.len();
    ensure!(
        before == after,
        "a refused shared set wrote {} keys",
        after - before
    );
    let leases = store
        .acquire_all(&set, &opts("writer"))
        .map_err(|e| fail("exclusive set", e))?;
    for lease in &leases {
        store.release(lease).map_err(|e| fail("release", e))?;
    }
    Ok(())
}
