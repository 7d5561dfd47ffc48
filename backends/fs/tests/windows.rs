//! Windows semantics the fs backend meets (run under Wine in CI; docs/windows.md):
//! a third party holding a record or a staging file open without sharing (what an
//! indexer, a backup tool or an editor does), names taken in another case, and the
//! reserved device names as lock names. On other platforms this target is empty.
#![cfg(windows)]

use std::fs::{self, File, OpenOptions};
use std::os::windows::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use fencepost::{AcquireOptions, Error, Key, Resource, Store, TryAcquire};
use fencepost_fs::FsStore;

/// `ERROR_SHARING_VIOLATION`.
const ERROR_SHARING_VIOLATION: i32 = 32;

fn fresh() -> (tempfile::TempDir, FsStore) {
    let tmp = tempfile::tempdir().unwrap();
    let store = FsStore::open(tmp.path().join("store")).unwrap();
    (tmp, store)
}

fn key(name: &str) -> Key {
    Resource::lock(name).identity().unwrap().key
}

fn key_dir(store: &FsStore, name: &str) -> PathBuf {
    store.root().join("claims").join(key(name).as_str())
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// Creates a file that must not exist yet (the crate's clippy.toml forbids the
/// overwriting helpers, in tests too).
fn write_new(path: &Path, bytes: &[u8]) {
    use std::io::Write;
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .unwrap()
        .write_all(bytes)
        .unwrap();
}

fn options(owner: &str) -> AcquireOptions {
    AcquireOptions::new(60_000).owner(owner)
}

/// Opens `path` the way a third party that shares nothing does: no other process
/// may read, write or delete it while the handle lives.
fn hold_unshared(path: &Path) -> File {
    OpenOptions::new()
        .read(true)
        .share_mode(0)
        .open(path)
        .unwrap_or_else(|e| panic!("opening {} unshared: {e}", path.display()))
}

fn is_sharing_violation(error: &Error) -> bool {
    matches!(error, Error::Backend(e) if e.source.raw_os_error() == Some(ERROR_SHARING_VIOLATION))
}

#[test]
fn a_superseded_record_held_open_is_left_by_the_sweep_and_removed_later() {
    // Sweep is best effort: a record it cannot delete stays behind, harmlessly,
    // and the claim that swept is granted all the same.
    let (_tmp, backend) = fresh();
    let dir = key_dir(&backend, "k");
    let store = Store::new(backend);
    let lock = Resource::lock("k");
    let first = store.acquire(&lock, &options("a")).unwrap();
    store.release(&first).unwrap();
    let held = hold_unshared(&dir.join("g00000001.json"));
    let mut second = store.acquire(&lock, &options("b")).unwrap();
    assert_eq!(second.token(), 3);
    assert!(store.check(&lock, 3).unwrap());
    assert!(
        names_in(&dir).contains(&"g00000001.json".to_string()),
        "the held record could not have been deleted: {:?}",
        names_in(&dir)
    );
    drop(held);
    // The next durable claim of ours (a renewal) sweeps what is below it.
    store.renew(&mut second).unwrap();
    assert_eq!(names_in(&dir), ["g00000004.json"]);
    assert!(store.check(&lock, 3).unwrap());
}

#[test]
fn the_newest_record_held_open_is_an_error_never_a_vacancy() {
    // While the newest record cannot be read, nobody can tell whether it is live:
    // every operation reports the I/O error, nothing is written, and the holder's
    // lease survives it (docs/protocol.md I4).
    let (_tmp, backend) = fresh();
    let dir = key_dir(&backend, "k");
    let store = Store::new(backend);
    let lock = Resource::lock("k");
    let lease = store.acquire(&lock, &options("holder")).unwrap();
    let held = hold_unshared(&dir.join("g00000001.json"));

    let rival = store.try_acquire(&lock, &options("rival"));
    assert!(
        matches!(&rival, Err(e) if is_sharing_violation(e)),
        "a rival must get the sharing violation, not the lease: {rival:?}"
    );
    let check = store.check(&lock, lease.token());
    assert!(
        matches!(&check, Err(e) if is_sharing_violation(e)),
        "{check:?}"
    );
    let release = store.release(&lease);
    assert!(
        matches!(&release, Err(e) if is_sharing_violation(e)),
        "{release:?}"
    );
    assert_eq!(names_in(&dir), ["g00000001.json"], "nothing may be written");

    drop(held);
    assert!(store.check(&lock, lease.token()).unwrap());
    match store.try_acquire(&lock, &options("rival")).unwrap() {
        TryAcquire::Held(holder) => assert_eq!(holder.owner, "holder"),
        TryAcquire::Acquired(_) => panic!("the rival took a live lease"),
    }
    store.release(&lease).unwrap();
    let next = store.acquire(&lock, &options("rival")).unwrap();
    assert!(next.token() > lease.token());
}

#[test]
fn a_stale_staging_file_held_open_does_not_stop_claims_or_releases() {
    // A crashed writer's staging file, now held open by a third party: the listing's
    // clean-up cannot delete it, and neither claim nor release may fail because of it.
    let (_tmp, backend) = fresh();
    let dir = key_dir(&backend, "k");
    let store = Store::new(backend);
    let lock = Resource::lock("k");
    let first = store.acquire(&lock, &options("a")).unwrap();
    let stale = dir.join(".stage-1-00000000000000ff.tmp");
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .share_mode(0)
        .open(&stale)
        .unwrap();
    let eleven_minutes_ago = SystemTime::now() - Duration::from_secs(11 * 60);
    file.set_modified(eleven_minutes_ago).unwrap();
    assert!(
        fs::remove_file(&stale).is_err(),
        "the stale staging file must be undeletable while held"
    );

    store.release(&first).unwrap();
    let second = store.acquire(&lock, &options("b")).unwrap();
    assert_eq!(second.token(), 3);
    store.release(&second).unwrap();
    assert!(stale.exists());

    drop(file);
    // The next listing removes it.
    let third = store.acquire(&lock, &options("c")).unwrap();
    assert!(!stale.exists(), "{:?}", names_in(&dir));
    assert!(store.check(&lock, third.token()).unwrap());
}

#[test]
fn exclusive_creates_refuse_a_name_taken_in_another_case() {
    // The two create primitives the backend relies on (docs/format-v1.md §2): a
    // CREATE_NEW open and CreateHardLinkW both refuse `g00000002.json` once
    // `G00000002.JSON` exists.
    let tmp = tempfile::tempdir().unwrap();
    write_new(&tmp.path().join("G00000002.JSON"), b"foreign");
    let created = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(tmp.path().join("g00000002.json"));
    assert_eq!(
        created.unwrap_err().kind(),
        std::io::ErrorKind::AlreadyExists
    );
    write_new(&tmp.path().join("staged"), b"record");
    let linked = fs::hard_link(tmp.path().join("staged"), tmp.path().join("g00000002.json"));
    assert_eq!(
        linked.unwrap_err().kind(),
        std::io::ErrorKind::AlreadyExists
    );
    assert_eq!(
        fs::read(tmp.path().join("G00000002.JSON")).unwrap(),
        b"foreign"
    );
}

#[test]
fn a_record_name_taken_in_another_case_is_a_taken_generation() {
    // Found under Wine: the listing skipped `G00000002.JSON`, so every claim of the
    // key retried the create of generation 2, which Windows refuses, until it gave
    // up ("the backend keeps refusing a generation it never lists").
    let (_tmp, backend) = fresh();
    let dir = key_dir(&backend, "k");
    let store = Store::new(backend);
    let lock = Resource::lock("k");
    let first = store.acquire(&lock, &options("a")).unwrap();
    store.release(&first).unwrap();
    write_new(&dir.join("G00000003.JSON"), b"written by another tool");
    let lease = store.acquire(&lock, &options("b")).unwrap();
    assert_eq!(lease.token(), 4, "generation 3's name is taken");
    assert!(store.check(&lock, 4).unwrap());
}

#[test]
fn reserved_device_names_are_ordinary_lock_names() {
    // A lock's directory is named by its key (a hash), never by the name, so
    // `CON` or `NUL.json` never reaches the filesystem as a name.
    let (_tmp, backend) = fresh();
    let store = Store::new(backend);
    for name in ["CON", "NUL.json", "aux", "COM1", "lpt1.txt", "CONIN$"] {
        let lock = Resource::lock(name);
        let lease = store.acquire(&lock, &options("a")).unwrap();
        assert!(store.check(&lock, lease.token()).unwrap(), "{name}");
        assert!(
            matches!(
                store.try_acquire(&lock, &options("b")).unwrap(),
                TryAcquire::Held(_)
            ),
            "{name}"
        );
        store.release(&lease).unwrap();
    }
    let labels: Vec<String> = store
        .status()
        .unwrap()
        .into_iter()
        .map(|e| e.label)
        .collect();
    for name in ["CON", "NUL.json", "aux", "COM1", "lpt1.txt", "CONIN$"] {
        assert!(labels.iter().any(|l| l == name), "{name}: {labels:?}");
    }
}
