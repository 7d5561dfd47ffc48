//! Scenarios for shared claims (docs/design-05-subtrees-and-shared.md §4).

use std::sync::{Arc, Barrier};
use std::time::Duration;

use fencepost::{AcquireOptions, LeaseStore, Resource, Store, TryAcquire};

use super::{TTL_MS, acquire, fail, opts};
use crate::{Failed, Fixture};

fn shared(owner: &str) -> AcquireOptions {
    opts(owner).shared(true)
}

/// The owner of whoever keeps `options` out of `resource` right now, or an error
/// if it was admitted.
fn refused(
    store: &Store,
    resource: &Resource,
    options: &AcquireOptions,
    what: &str,
) -> Result<String, Failed> {
    match store.try_acquire(resource, options) {
        Ok(TryAcquire::Held(holder)) => Ok(holder.owner),
        Ok(TryAcquire::Acquired(lease)) => {
            let _ = store.release(&lease);
            Err(format!(
                "{what}: admitted (token {}, shared {})",
                lease.token(),
                lease.shared()
            )
            .into())
        }
        Err(error) => Err(fail(what, error)),
    }
}

/// 8 shared holders at once; an exclusive claim is refused while any is live and
/// gets a token at least theirs once all released; a shared claim is refused while
/// the exclusive holder is live; tokens never go down. For a lock, a file and a
/// subtree (both ways: a shared subtree against an exclusive file below it, a
/// shared file against an exclusive subtree above it).
pub(super) fn shared_claims_exclude_writers<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let store = f.store();
    let path = f.scratch_file("shared.txt");
    std::fs::write(&path, b"x").map_err(|e| fail("write", e))?;
    for resource in [Resource::lock("docs"), Resource::file(&path)] {
        let mut readers = Vec::new();
        for i in 0..8 {
            let lease = acquire(&store, &resource, &shared(&format!("reader-{i}")))?;
            ensure!(lease.shared(), "a shared claim returned an exclusive lease");
            store
                .check_lease(&lease)
                .map_err(|e| fail("check a shared lease", e))?;
            readers.push(lease);
        }
        let owner = refused(
            &store,
            &resource,
            &opts("writer"),
            "an exclusive claim over 8 readers",
        )?;
        ensure!(
            owner.starts_with("reader-") && owner.ends_with("(shared)"),
            "the writer was held by {owner:?}"
        );
        let first = readers[0].token();
        ensure!(
            readers.iter().all(|r| r.token() >= first),
            "reader tokens went down"
        );
        for lease in readers.drain(..7) {
            store
                .release(&lease)
                .map_err(|e| fail("release a shared lease", e))?;
        }
        refused(
            &store,
            &resource,
            &opts("writer"),
            "an exclusive claim over 1 reader",
        )?;
        store.release(&readers[0]).map_err(|e| fail("release", e))?;
        let writer = acquire(&store, &resource, &opts("writer"))?;
        ensure!(
            !writer.shared() && writer.token() >= first,
            "writer token {} below reader token {first}",
            writer.token()
        );
        let owner = refused(
            &store,
            &resource,
            &shared("late-reader"),
            "a shared claim over a writer",
        )?;
        ensure!(owner == "writer", "the late reader was held by {owner:?}");
        store.release(&writer).map_err(|e| fail("release", e))?;
        let after = acquire(&store, &resource, &shared("late-reader"))?;
        ensure!(
            after.token() > writer.token(),
            "a reader after the writer got token {} not above the writer's {}",
            after.token(),
            writer.token()
        );
        store.release(&after).map_err(|e| fail("release", e))?;
    }
    // Subtrees, both ways.
    let root = f.scratch().join("shared-repo");
    std::fs::create_dir_all(root.join("src")).map_err(|e| fail("mkdir", e))?;
    let src = Resource::dir(root.join("src"));
    let file = Resource::file(root.join("src/lib.rs"));
    let tree_reader = acquire(&store, &src, &shared("tree-reader"))?;
    let file_reader = acquire(&store, &file, &shared("file-reader"))?;
    let owner = refused(
        &store,
        &file,
        &opts("file-writer"),
        "an exclusive file below a shared subtree",
    )?;
    ensure!(owner.contains("reader"), "held by {owner:?}");
    store
        .release(&file_reader)
        .map_err(|e| fail("release", e))?;
    let owner = refused(
        &store,
        &file,
        &opts("file-writer"),
        "an exclusive file below a shared subtree",
    )?;
    ensure!(owner.starts_with("tree-reader"), "held by {owner:?}");
    store
        .release(&tree_reader)
        .map_err(|e| fail("release", e))?;
    let file_reader = acquire(&store, &file, &shared("file-reader"))?;
    let owner = refused(
        &store,
        &src,
        &opts("tree-writer"),
        "an exclusive subtree over a shared file",
    )?;
    ensure!(owner.starts_with("file-reader"), "held by {owner:?}");
    store
        .release(&file_reader)
        .map_err(|e| fail("release", e))?;
    let tree_writer = acquire(&store, &src, &opts("tree-writer"))?;
    let owner = refused(
        &store,
        &file,
        &shared("file-reader"),
        "a shared file below an exclusive subtree",
    )?;
    ensure!(owner == "tree-writer", "held by {owner:?}");
    store
        .release(&tree_writer)
        .map_err(|e| fail("release", e))?;
    Ok(())
}

/// A waiting writer is not starved: once it waits, readers that keep arriving are
/// refused (naming the waiting writer), and it gets the resource as soon as the
/// readers that held when it arrived released.
pub(super) fn waiting_writer_is_not_starved<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let store = f.store();
    let lock = Resource::lock("not-starved");
    let early: Vec<_> = (0..3)
        .map(|i| acquire(&store, &lock, &shared(&format!("early-{i}"))))
        .collect::<Result<_, _>>()?;
    let started = Arc::new(Barrier::new(2));
    let writer = {
        let store = f.store();
        let lock = lock.clone();
        let started = started.clone();
        std::thread::spawn(move || {
            started.wait();
            store.acquire(
                &lock,
                &AcquireOptions::new(TTL_MS).owner("writer").wait_ms(60_000),
            )
        })
    };
    started.wait();
    // Readers keep arriving; once the writer waits, every one is refused.
    let mut refused_by_intent = false;
    for _ in 0..400 {
        match store
            .try_acquire(&lock, &shared("late"))
            .map_err(|e| fail("shared claim", e))?
        {
            TryAcquire::Acquired(lease) => {
                store.release(&lease).map_err(|e| fail("release", e))?;
                ensure!(
                    !refused_by_intent,
                    "a reader was admitted after the writer started waiting"
                );
            }
            TryAcquire::Held(holder) => {
                ensure!(
                    holder.owner.starts_with("writer"),
                    "a late reader was held by {:?}",
                    holder.owner
                );
                refused_by_intent = true;
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    ensure!(refused_by_intent, "the writer never registered its intent");
    for _ in 0..5 {
        let owner = refused(
            &store,
            &lock,
            &shared("late"),
            "a reader while a writer waits",
        )?;
        ensure!(owner.starts_with("writer"), "held by {owner:?}");
    }
    for lease in &early {
        store.release(lease).map_err(|e| fail("release", e))?;
    }
    let lease = writer
        .join()
        .map_err(|_| Failed::from("writer thread panicked"))?
        .map_err(|e| fail("the waiting writer", e))?;
    ensure!(
        lease.token() >= early[0].token(),
        "the writer's token {} is below the readers' {}",
        lease.token(),
        early[0].token()
    );
    let owner = refused(
        &store,
        &lock,
        &shared("late"),
        "a reader while the writer holds",
    )?;
    ensure!(owner == "writer", "held by {owner:?}");
    store.release(&lease).map_err(|e| fail("release", e))?;
    // The intent went with the writer: readers are admitted again.
    let again = acquire(&store, &lock, &shared("again"))?;
    store.release(&again).map_err(|e| fail("release", e))?;
    Ok(())
}

/// A break of a resource held by readers ends every one of them: each reader's
/// `check_lease` and renewal fail as broken, and an exclusive claim then holds
/// (design-05 §4).
pub(super) fn break_ends_every_reader<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let store = f.store();
    let lock = Resource::lock("broken-readers");
    let mut readers: Vec<_> = (0..3)
        .map(|i| acquire(&store, &lock, &shared(&format!("reader-{i}"))))
        .collect::<Result<_, _>>()?;
    let broken = store
        .break_lease(&lock, "operator", "readers stuck")
        .map_err(|e| fail("break", e))?;
    ensure!(
        broken.owner.contains("and 2 other readers (shared)"),
        "the break did not say it broke all three readers: {:?}",
        broken.owner
    );
    for lease in &mut readers {
        ensure!(
            matches!(
                store.check_lease(lease),
                Err(fencepost::Error::Broken { .. })
            ),
            "a reader's lease still checks after the break"
        );
        ensure!(
            matches!(store.renew(lease), Err(fencepost::Error::Broken { .. })),
            "a reader's lease still renews after the break"
        );
    }
    let writer = store
        .try_acquire(&lock, &opts("writer"))
        .map_err(|e| fail("exclusive claim", e))?;
    ensure!(
        matches!(writer, TryAcquire::Acquired(_)),
        "the writer was refused after the readers were broken: {writer:?}"
    );
    Ok(())
}

/// Ended participants are cleaned away (design-05 §4.2): two readers release, an
/// exclusive claim looks at them, and the first reader's series (its entry is not
/// the index's newest) is gone from `keys` and empty; its stale lease cannot renew
/// (an error, not a revived shared lease no writer could see) nor release, and
/// leaves no record and no key behind. The second reader's entry, the newest, is
/// kept with its series.
pub(super) fn ended_participants_are_removed<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let store = f.store();
    let lock = Resource::lock("cleaned-readers");
    let mut first = acquire(&store, &lock, &shared("reader-1"))?;
    let second = acquire(&store, &lock, &shared("reader-2"))?;
    let series = first.key().clone();
    store.release(&first).map_err(|e| fail("release", e))?;
    store.release(&second).map_err(|e| fail("release", e))?;
    let gone = |what: &str| -> Result<(), Failed> {
        let listed = f.raw().generations(&series).map_err(|e| fail("list", e))?;
        ensure!(
            listed.is_empty(),
            "{what}: the ended participant's series still holds generations {listed:?}"
        );
        let keys = f.raw().keys().map_err(|e| fail("keys", e))?;
        ensure!(
            !keys.contains(&series),
            "{what}: the ended participant's key is still listed by keys()"
        );
        Ok(())
    };
    ensure!(
        !f.raw()
            .generations(&series)
            .map_err(|e| fail("list", e))?
            .is_empty(),
        "the released reader's series was removed before any claimer looked"
    );
    let writer = acquire(&store, &lock, &opts("writer"))?;
    gone("after the writer's look")?;
    ensure!(
        !f.raw()
            .generations(second.key())
            .map_err(|e| fail("list", e))?
            .is_empty(),
        "the newest entry's series was removed (the index's newest entry is kept)"
    );
    let renewed = store.renew(&mut first);
    ensure!(
        renewed.is_err(),
        "a stale handle of the removed participant renewed: a shared lease revived beside the writer"
    );
    gone("after the stale renewal")?;
    ensure!(
        store.release(&first).is_err(),
        "a stale handle of the removed participant released"
    );
    gone("after the stale release")?;
    store.release(&writer).map_err(|e| fail("release", e))?;
    Ok(())
}
