//! Behaviour of the filesystem backend: the `LeaseStore` contract (docs/protocol.md §4) as the
//! fs format (docs/protocol.md §5) implements it, store location, and the protocol on top.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::{Duration, SystemTime};

use fencepost::{AcquireOptions, CreateOutcome, Durability, Key, LeaseStore, Resource, Store};
use fencepost_fs::{FsStore, LocateError, StoreLocation, StoreScope, locate_store, locate_with};

fn key(name: &str) -> Key {
    Resource::lock(name).identity().unwrap().key
}

fn fresh() -> (tempfile::TempDir, FsStore) {
    let tmp = tempfile::tempdir().unwrap();
    let store = FsStore::open(tmp.path().join("store")).unwrap();
    (tmp, store)
}

fn key_dir(store: &FsStore, key: &Key) -> PathBuf {
    store.root().join("claims").join(key.as_str())
}

/// Every name in the key's directory, sorted.
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
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .unwrap()
        .write_all(bytes)
        .unwrap();
}

fn sorted(mut generations: Vec<u64>) -> Vec<u64> {
    generations.sort_unstable();
    generations
}

// ---------------------------------------------------------------------------------
// create

#[test]
fn create_is_exclusive_and_keeps_the_first_bytes() {
    // docs/protocol.md §4: create only if absent; the loser writes nothing.
    let (_tmp, store) = fresh();
    let k = key("exclusive");
    assert_eq!(
        store.create(&k, 1, b"first", Durability::Flushed).unwrap(),
        CreateOutcome::Created
    );
    assert_eq!(
        store.create(&k, 1, b"second", Durability::Flushed).unwrap(),
        CreateOutcome::AlreadyExists
    );
    assert_eq!(
        store
            .create(&k, 1, b"third", Durability::Unflushed)
            .unwrap(),
        CreateOutcome::AlreadyExists
    );
    assert_eq!(store.read(&k, 1).unwrap().as_deref(), Some(&b"first"[..]));
    assert_eq!(
        store.create(&k, 2, b"next", Durability::Unflushed).unwrap(),
        CreateOutcome::Created
    );
    assert_eq!(sorted(store.generations(&k).unwrap()), [1, 2]);
}

#[test]
fn concurrent_creates_of_one_generation_have_exactly_one_winner() {
    // docs/protocol.md §4 atomic exclusive create: N workers × M rounds, then the exact count.
    const WORKERS: usize = 8;
    const ROUNDS: u64 = 24;
    let (tmp, _store) = fresh();
    let root = tmp.path().join("store");
    let k = key("contended");
    let barrier = Arc::new(Barrier::new(WORKERS));
    let outcomes: Vec<Vec<(u64, CreateOutcome, Vec<u8>)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..WORKERS)
            .map(|worker| {
                // One FsStore per worker, as separate processes would have.
                let store = FsStore::open(&root).unwrap();
                let (k, barrier) = (k.clone(), Arc::clone(&barrier));
                scope.spawn(move || {
                    (1..=ROUNDS)
                        .map(|generation| {
                            let bytes = format!("worker {worker} generation {generation}");
                            // Every third round flushed: both paths are exercised.
                            let durability = if generation % 3 == 0 {
                                Durability::Flushed
                            } else {
                                Durability::Unflushed
                            };
                            barrier.wait();
                            let outcome = store
                                .create(&k, generation, bytes.as_bytes(), durability)
                                .unwrap();
                            (generation, outcome, bytes.into_bytes())
                        })
                        .collect()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let store = FsStore::open(&root).unwrap();
    for generation in 1..=ROUNDS {
        let winners: Vec<&Vec<u8>> = outcomes
            .iter()
            .flatten()
            .filter(|(g, outcome, _)| *g == generation && *outcome == CreateOutcome::Created)
            .map(|(_, _, bytes)| bytes)
            .collect();
        assert_eq!(
            winners.len(),
            1,
            "generation {generation}: {} winners",
            winners.len()
        );
        assert_eq!(
            store.read(&k, generation).unwrap().as_ref(),
            Some(winners[0]),
            "generation {generation} does not hold the winner's bytes"
        );
    }
    // And no staging file of any worker is left behind.
    assert_eq!(names_in(&key_dir(&store, &k)).len(), ROUNDS as usize);
}

#[test]
fn no_staging_files_are_left_behind() {
    // Staging files are removed after the link, whether it won or lost.
    let (_tmp, store) = fresh();
    let k = key("tidy");
    store.create(&k, 1, b"a", Durability::Flushed).unwrap();
    assert_eq!(names_in(&key_dir(&store, &k)), ["g00000001.json"]);
    assert_eq!(
        store.create(&k, 1, b"b", Durability::Flushed).unwrap(),
        CreateOutcome::AlreadyExists
    );
    store.create(&k, 2, b"c", Durability::Unflushed).unwrap();
    store.create(&k, 2, b"d", Durability::Unflushed).unwrap();
    assert_eq!(
        names_in(&key_dir(&store, &k)),
        ["g00000001.json", "g00000002.json"]
    );
}

#[test]
fn creates_make_the_claims_and_key_directories() {
    let (_tmp, store) = fresh();
    assert!(!store.root().join("claims").exists(), "open must not write");
    let k = key("dirs");
    store.create(&k, 1, b"x", Durability::Flushed).unwrap();
    assert!(key_dir(&store, &k).is_dir());
}

// ---------------------------------------------------------------------------------
// naming

#[test]
fn records_are_named_g_plus_at_least_eight_digits() {
    // docs/protocol.md §5 names; the number is parsed, so 9 digits sort after 8.
    let (_tmp, store) = fresh();
    let k = key("names");
    store.create(&k, 1, b"1", Durability::Unflushed).unwrap();
    store
        .create(&k, 123_456_789, b"big", Durability::Unflushed)
        .unwrap();
    assert_eq!(
        names_in(&key_dir(&store, &k)),
        ["g00000001.json", "g123456789.json"]
    );
    assert_eq!(sorted(store.generations(&k).unwrap()), [1, 123_456_789]);
    assert_eq!(
        store.read(&k, 123_456_789).unwrap().as_deref(),
        Some(&b"big"[..])
    );
    // A 9-digit name written by hand (another implementation) is read too.
    write_new(&key_dir(&store, &k).join("g200000000.json"), b"hand");
    assert_eq!(
        sorted(store.generations(&k).unwrap()),
        [1, 123_456_789, 200_000_000]
    );
}

#[test]
fn foreign_files_never_break_a_listing() {
    // docs/protocol.md §5: readers ignore names that do not match, never fail the whole read.
    let (_tmp, store) = fresh();
    let k = key("foreign");
    store.create(&k, 1, b"1", Durability::Unflushed).unwrap();
    let dir = key_dir(&store, &k);
    for name in [
        "notes.txt",
        "g12.json.bak",
        "g00000002.json.bak",
        "gabc.json",
        "g1.json",
        "g000000003.json", // a second spelling of generation 3: not a record name
        "g00000000.json",  // generation 0 does not exist
        ".stage-1-0123456789abcdef.tmp",
        ".DS_Store",
    ] {
        write_new(&dir.join(name), b"{}");
    }
    fs::create_dir(dir.join("subdir")).unwrap();
    assert_eq!(store.generations(&k).unwrap(), [1]);
}

#[test]
fn keys_lists_key_directories_only() {
    let (tmp, store) = fresh();
    let (a, b) = (key("a"), key("b"));
    store.create(&a, 1, b"a", Durability::Unflushed).unwrap();
    store.create(&b, 1, b"b", Durability::Unflushed).unwrap();
    let claims = store.root().join("claims");
    fs::create_dir(claims.join("notes")).unwrap();
    fs::create_dir(claims.join("lock-XYZ")).unwrap();
    fs::create_dir(claims.join("lock-0123456789ABCDEF0123456789ABCDEF")).unwrap();
    write_new(&claims.join("README"), b"hello");
    // A regular file named like a key is not a series.
    write_new(&claims.join(key("a file").as_str()), b"");
    #[cfg(unix)]
    {
        // A symbolic link named like a key is listed (so `status` can say it is
        // unreadable) but never followed out of the store.
        let outside = tmp.path().join("outside");
        fs::create_dir(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, claims.join(key("a link").as_str())).unwrap();
    }
    let _ = tmp;
    let mut keys = store.keys().unwrap();
    keys.sort();
    #[cfg(unix)]
    let mut expected = vec![a, b, key("a link")];
    #[cfg(not(unix))]
    let mut expected = vec![a, b];
    expected.sort();
    assert_eq!(keys, expected);
}

#[test]
fn an_empty_store_has_no_keys_and_no_generations() {
    let (_tmp, store) = fresh();
    assert!(store.keys().unwrap().is_empty());
    assert!(store.generations(&key("nothing")).unwrap().is_empty());
}

// ---------------------------------------------------------------------------------
// read and remove

#[test]
fn missing_records_read_as_none_and_remove_as_success() {
    // docs/protocol.md §4: read of a missing record is None; removing a missing record succeeds.
    let (_tmp, store) = fresh();
    let k = key("missing");
    assert_eq!(store.read(&k, 1).unwrap(), None, "no claims/ at all");
    assert!(store.remove(&k, 1).is_ok());
    store.create(&k, 1, b"1", Durability::Unflushed).unwrap();
    store.create(&k, 2, b"2", Durability::Unflushed).unwrap();
    assert_eq!(store.read(&k, 3).unwrap(), None, "never created");
    store.remove(&k, 1).unwrap();
    assert_eq!(store.read(&k, 1).unwrap(), None, "removed");
    assert!(store.remove(&k, 1).is_ok(), "removed twice");
    assert_eq!(store.generations(&k).unwrap(), [2]);
    assert_eq!(store.read(&k, 2).unwrap().as_deref(), Some(&b"2"[..]));
}

#[test]
fn a_directory_named_like_a_record_reads_as_torn_and_is_superseded() {
    // Breaker trial: a directory under a record name blocked its key for good and made
    // `status` fail for the whole store. Now it reads as a torn record.
    let (_tmp, store) = fresh();
    let k = key("dir-record");
    store.create(&k, 1, b"1", Durability::Unflushed).unwrap();
    fs::create_dir(key_dir(&store, &k).join("g00000002.json")).unwrap();
    // It occupies generation 2: listed, and nobody can create over it.
    assert_eq!(sorted(store.generations(&k).unwrap()), [1, 2]);
    assert_eq!(
        store.create(&k, 2, b"x", Durability::Unflushed).unwrap(),
        CreateOutcome::AlreadyExists
    );
    assert_eq!(
        store.read(&k, 2).unwrap(),
        Some(Vec::new()),
        "reads as torn"
    );
    let fenced = Store::new(store.clone());
    let resource = Resource::lock("dir-record");
    let lease = fenced
        .acquire(&resource, &AcquireOptions::new(1_000))
        .unwrap();
    assert_eq!(
        lease.token(),
        3,
        "superseded at generation 3, never restarted"
    );
    assert!(
        fenced.status().is_ok(),
        "status works with the entry present"
    );
}

// ---------------------------------------------------------------------------------
// stale staging files

fn set_age(path: &Path, age: Duration) {
    OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(SystemTime::now() - age)
        .unwrap();
}

#[test]
fn stale_staging_files_are_removed_and_nothing_else() {
    let (_tmp, store) = fresh();
    let k = key("stale");
    store.create(&k, 1, b"1", Durability::Unflushed).unwrap();
    let dir = key_dir(&store, &k);
    let old = Duration::from_secs(60 * 60);
    let stale = dir.join(".stage-99999-00000000deadbeef.tmp");
    let fresh_stage = dir.join(".stage-99999-00000000cafebabe.tmp");
    let old_foreign = dir.join("notes.txt");
    write_new(&stale, b"half a rec");
    write_new(&fresh_stage, b"in progress");
    write_new(&old_foreign, b"mine");
    set_age(&stale, old);
    set_age(&old_foreign, old);
    set_age(&dir.join("g00000001.json"), old);
    assert_eq!(store.generations(&k).unwrap(), [1]);
    assert_eq!(
        names_in(&dir),
        [
            ".stage-99999-00000000cafebabe.tmp",
            "g00000001.json",
            "notes.txt"
        ],
        "only the stale staging file goes"
    );
}

// ---------------------------------------------------------------------------------
// symbolic links (docs/protocol.md §5: do not follow symlinks inside the store)

#[cfg(unix)]
fn valid_record_bytes(key: &Key, generation: u64) -> Vec<u8> {
    fencepost::record::Record {
        v: 1,
        key: key.to_string().into(),
        label: "outside".into(),
        token: generation,
        generation,
        holder: "intruder-1-0".into(),
        owner: "intruder".into(),
        pid: 1,
        host: "".into(),
        granted_at_ms: 0,
        expires_at_ms: u64::MAX,
        ttl_ms: u64::MAX,
        released: false,
        secret_sha256: None,
        broken: None,
        next: None,
        process: None,
        session: None,
    }
    .encode()
}

#[cfg(unix)]
#[test]
fn a_symlinked_record_is_never_followed() {
    // Decision: a record name that is a symbolic link reads as a torn (empty) record;
    // its target's bytes are never returned, and the protocol supersedes it.
    let (tmp, store) = fresh();
    let k = key("symlinked-record");
    store.create(&k, 1, b"1", Durability::Unflushed).unwrap();
    let outside = tmp.path().join("outside.json");
    let bytes = valid_record_bytes(&k, 2);
    write_new(&outside, &bytes);
    let link = key_dir(&store, &k).join("g00000002.json");
    std::os::unix::fs::symlink(&outside, &link).unwrap();

    // The name occupies generation 2.
    assert_eq!(sorted(store.generations(&k).unwrap()), [1, 2]);
    assert_eq!(
        store.create(&k, 2, b"mine", Durability::Unflushed).unwrap(),
        CreateOutcome::AlreadyExists
    );
    assert_eq!(
        store.read(&k, 2).unwrap(),
        Some(Vec::new()),
        "the link was followed"
    );

    // The protocol never treats the outside record as the holder: token 2 does not
    // pass, and the next claim supersedes the link's generation.
    let fenced = Store::new(store.clone());
    let resource = Resource::lock("symlinked-record");
    assert!(!fenced.check(&resource, 2).unwrap());
    let lease = fenced
        .acquire(&resource, &AcquireOptions::new(1_000))
        .unwrap();
    assert_eq!(lease.token(), 3);
    fenced.release(&lease).unwrap();

    // The sweep after that claim removed the link, not its target.
    assert!(
        fs::symlink_metadata(&link).is_err(),
        "the link survived the sweep"
    );
    assert_eq!(fs::read(&outside).unwrap(), bytes);
    assert_eq!(sorted(store.generations(&k).unwrap()), [3, 4]);
}

#[cfg(unix)]
#[test]
fn a_symlinked_key_directory_is_never_followed() {
    // Decision: every operation on the key is an error; keys() lists it, so status
    // shows it unreadable instead of hiding it (issue 19).
    let (tmp, store) = fresh();
    let k = key("symlinked-dir");
    let outside = tmp.path().join("outside");
    fs::create_dir(&outside).unwrap();
    write_new(&outside.join("g00000001.json"), &valid_record_bytes(&k, 1));
    store
        .create(&key("other"), 1, b"x", Durability::Unflushed)
        .unwrap();
    std::os::unix::fs::symlink(&outside, key_dir(&store, &k)).unwrap();

    for (operation, error) in [
        ("read", store.read(&k, 1).map(|_| ()).unwrap_err()),
        ("list", store.generations(&k).map(|_| ()).unwrap_err()),
        (
            "create",
            store
                .create(&k, 2, b"in", Durability::Flushed)
                .map(|_| ())
                .unwrap_err(),
        ),
        ("remove", store.remove(&k, 1).unwrap_err()),
    ] {
        assert!(
            error.to_string().contains("symbolic link"),
            "{operation}: {error}"
        );
        assert_eq!(error.operation, operation);
    }
    let mut keys = store.keys().unwrap();
    keys.sort();
    let mut expected = vec![key("other"), k.clone()];
    expected.sort();
    assert_eq!(keys, expected);
    assert_eq!(
        names_in(&outside),
        ["g00000001.json"],
        "outside was written"
    );
}

/// docs/format-v1.md §2: a record name in another case (`G00000002.JSON`) is listed
/// exactly where it takes the record name (a filesystem that ignores case, such as
/// NTFS under the Windows run), so an exclusive create refused there is never
/// retried forever; where case matters the generation stays free.
#[test]
fn a_record_name_in_another_case_is_listed_where_it_takes_the_name() {
    let (_tmp, store) = fresh();
    let k = key("case");
    store.create(&k, 1, b"x", Durability::Flushed).unwrap();
    let dir = key_dir(&store, &k);
    write_new(&dir.join("G00000002.JSON"), b"foreign");
    let takes_the_name = dir.join("g00000002.json").exists();
    assert_eq!(
        takes_the_name,
        cfg!(windows),
        "a filesystem of an unexpected kind"
    );
    let created = store.create(&k, 2, b"y", Durability::Flushed).unwrap();
    if takes_the_name {
        assert_eq!(sorted(store.generations(&k).unwrap()), [1, 2]);
        assert_eq!(created, CreateOutcome::AlreadyExists);
    } else {
        assert_eq!(created, CreateOutcome::Created);
        assert_eq!(sorted(store.generations(&k).unwrap()), [1, 2]);
        assert_eq!(store.read(&k, 2).unwrap().unwrap(), b"y");
    }
}

// ---------------------------------------------------------------------------------
// errors are errors, never "already exists" (docs/protocol.md §5)

#[test]
fn open_under_a_regular_file_fails_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("file.txt");
    write_new(&file, b"not a directory");
    // The error names the separator-normalized absolute path: on Windows
    // `…\file.txt\a\b\store` for `a/b/store` as typed (issue 18, found under Wine).
    let nested = file.join("a").join("b").join("store");
    for (given, named) in [
        (file.join("store"), file.join("store")),
        (file.join("a/b/store"), nested),
    ] {
        let error = FsStore::open(&given).unwrap_err();
        assert_eq!(error.operation, "open store");
        assert_eq!(error.location, named.display().to_string());
        assert!(error.to_string().contains("file.txt"), "{error}");
        assert_eq!(error.kind(), std::io::ErrorKind::NotADirectory);
    }
    let error = FsStore::open(&file).unwrap_err();
    assert!(error.to_string().contains("not a directory"), "{error}");
    assert!(FsStore::open("").is_err());
}

#[test]
fn open_creates_missing_parents_and_reports_an_absolute_root() {
    let tmp = tempfile::tempdir().unwrap();
    // Opened by a spelling with `/`, reported in the platform's own spelling: the
    // separator-normalized absolute path (on Windows every separator is `\`;
    // issue 18, found under Wine).
    let store = FsStore::open(tmp.path().join("a/b/.fencepost")).unwrap();
    let root = tmp.path().join("a").join("b").join(".fencepost");
    assert!(root.is_dir());
    assert_eq!(store.root(), root);
    assert_eq!(store.locator(), root.display().to_string());
    assert!(Path::new(&store.locator()).is_absolute());
    // Opening again (another process) is fine, and sees the same records.
    let k = key("reopen");
    store.create(&k, 1, b"x", Durability::Flushed).unwrap();
    let again = FsStore::open(store.locator()).unwrap();
    assert_eq!(again.read(&k, 1).unwrap().as_deref(), Some(&b"x"[..]));
}

#[test]
fn a_key_path_that_is_a_file_is_an_error_not_already_exists() {
    // Works as root too: an error that is not EEXIST on the record name must not
    // become AlreadyExists.
    let (_tmp, store) = fresh();
    let k = key("file-in-the-way");
    store
        .create(&key("other"), 1, b"x", Durability::Unflushed)
        .unwrap();
    write_new(&key_dir(&store, &k), b"");
    let error = store.create(&k, 1, b"x", Durability::Flushed).unwrap_err();
    assert_eq!(error.operation, "create");
    assert!(error.location.contains(k.as_str()), "{error}");
    assert!(store.generations(&k).is_err());
    assert_eq!(store.keys().unwrap(), [key("other")]);
}

#[cfg(unix)]
const READ_ONLY_STORE_VAR: &str = "FENCEPOST_FS_TEST_READ_ONLY_STORE";

/// Create, create in a new key, and read against a store this process may not
/// write: errors (permission denied) for the creates, never `AlreadyExists`.
#[cfg(unix)]
fn assert_read_only_store_behaviour(root: &Path) {
    let store = FsStore::open(root).unwrap();
    let k = key("read-only");
    assert_eq!(store.read(&k, 1).unwrap().as_deref(), Some(&b"one"[..]));
    for (k, generation) in [(k.clone(), 2), (key("read-only new key"), 1)] {
        for durability in [Durability::Flushed, Durability::Unflushed] {
            match store.create(&k, generation, b"two", durability) {
                Err(error) => {
                    assert_eq!(
                        error.kind(),
                        std::io::ErrorKind::PermissionDenied,
                        "{error}"
                    );
                    assert!(error.location.contains("claims"), "{error}");
                }
                Ok(outcome) => panic!("create in a read-only store returned {outcome:?}"),
            }
        }
    }
    assert_eq!(store.generations(&k).unwrap(), [1]);
    assert!(store.remove(&k, 1).is_err());
}

/// Runs only when spawned by `a_read_only_store_is_an_error_not_already_exists`.
#[cfg(unix)]
#[test]
#[ignore = "spawned unprivileged by a_read_only_store_is_an_error_not_already_exists"]
fn read_only_store_child() {
    if let Some(root) = std::env::var_os(READ_ONLY_STORE_VAR) {
        assert_read_only_store_behaviour(Path::new(&root));
    }
}

#[cfg(unix)]
#[test]
fn a_read_only_store_is_an_error_not_already_exists() {
    // docs/protocol.md §5: permission denied / read-only store is an I/O error, never "held".
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let tmp = tempfile::tempdir().unwrap();
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let root = tmp.path().join("store");
    let store = FsStore::open(&root).unwrap();
    let k = key("read-only");
    store.create(&k, 1, b"one", Durability::Flushed).unwrap();

    let privileged = fs::metadata(&root).unwrap().uid() == 0;
    if !privileged {
        let claims = root.join("claims");
        let dirs = [claims.join(k.as_str()), claims];
        for dir in &dirs {
            fs::set_permissions(dir, fs::Permissions::from_mode(0o555)).unwrap();
        }
        let result = std::panic::catch_unwind(|| assert_read_only_store_behaviour(&root));
        for dir in &dirs {
            fs::set_permissions(dir, fs::Permissions::from_mode(0o755)).unwrap();
        }
        if let Err(panic) = result {
            std::panic::resume_unwind(panic);
        }
        return;
    }
    // Root ignores permission bits: run the assertions as `nobody`, for whom the
    // root-owned store is read-only. Make everything it needs world-readable (the
    // umask may be strict) and run a copy of this binary from the temp dir (the
    // target dir may not be reachable by others).
    use std::os::unix::process::CommandExt;
    let unreachable = tmp
        .path()
        .ancestors()
        .skip(1)
        .find(|dir| fs::metadata(dir).is_ok_and(|m| m.mode() & 0o001 == 0));
    if let Some(dir) = unreachable {
        eprintln!(
            "skipped the unprivileged run: {} is not searchable by others",
            dir.display()
        );
        return;
    }
    let claims = root.join("claims");
    for (path, mode) in [
        (root.clone(), 0o755),
        (claims.clone(), 0o755),
        (claims.join(k.as_str()), 0o755),
        (claims.join(k.as_str()).join("g00000001.json"), 0o644),
    ] {
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
    }
    let child = tmp.path().join("child-test-binary");
    write_new(&child, &fs::read(std::env::current_exe().unwrap()).unwrap());
    fs::set_permissions(&child, fs::Permissions::from_mode(0o755)).unwrap();
    let output = std::process::Command::new(&child)
        .args([
            "--exact",
            "read_only_store_child",
            "--ignored",
            "--nocapture",
        ])
        .env(READ_ONLY_STORE_VAR, &root)
        .uid(65534)
        .gid(65534)
        .output()
        .expect("spawn the test binary as nobody");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "unprivileged child failed: {}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

// ---------------------------------------------------------------------------------
// store location (docs/format-v1.md, "Store location"): one resource, one store

/// The test directories live under the system temp dir: make sure nothing above it
/// would be found first. Canonical, because the rule resolves anchors (on Windows the
/// temp dir is taken as given: `canonicalize` would add a `\\?\` prefix that the rule
/// strips again).
fn isolated() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let top = if cfg!(windows) {
        tmp.path().to_path_buf()
    } else {
        fs::canonicalize(tmp.path()).unwrap()
    };
    for dir in top.ancestors() {
        assert!(
            !dir.join(".fencepost").is_dir() && fs::symlink_metadata(dir.join(".git")).is_err(),
            "{} holds a .fencepost or .git; these tests need a clean temp dir",
            dir.display()
        );
    }
    (tmp, top)
}

/// An environment with only the user's directory set: `HOME` (to `home`), and on
/// Windows `LOCALAPPDATA` (to `home/AppData/Local`).
fn home_env(home: &Path) -> impl Fn(&str) -> Option<std::ffi::OsString> + '_ {
    move |name| match name {
        "HOME" => Some(home.as_os_str().to_owned()),
        "LOCALAPPDATA" => Some(home.join("AppData/Local").into_os_string()),
        _ => None,
    }
}

/// The per-user store for [`home_env`].
fn user_store(home: &Path) -> PathBuf {
    if cfg!(windows) {
        home.join("AppData/Local/fencepost")
    } else {
        home.join(".local/state/fencepost")
    }
}

fn locate(resource: Option<&Resource>, cwd: &Path, home: &Path) -> StoreLocation {
    locate_with(None, resource, cwd, &home_env(home)).unwrap()
}

#[test]
fn locate_explicit_wins_and_is_made_absolute() {
    let (_tmp, top) = isolated();
    let cwd = top.join("work");
    fs::create_dir_all(cwd.join(".fencepost")).unwrap();
    fs::create_dir(cwd.join(".git")).unwrap();
    let explicit = top.join("elsewhere");
    let lock = Resource::lock("x");
    let found = locate_store(Some(&explicit), Some(&lock), &cwd).unwrap();
    assert_eq!(found.path, explicit);
    assert_eq!(found.scope, StoreScope::Explicit);
    assert_eq!(
        locate_store(Some(Path::new("rel/store")), None, &cwd)
            .unwrap()
            .path,
        cwd.join("rel/store")
    );
    // An empty explicit path counts as not given.
    assert_eq!(
        locate_store(Some(Path::new("")), None, &cwd).unwrap().scope,
        StoreScope::Marker
    );
}

#[test]
fn locate_finds_the_nearest_marker_from_the_anchor() {
    let (_tmp, top) = isolated();
    let cwd = top.join("a/b/c");
    fs::create_dir_all(&cwd).unwrap();
    fs::create_dir_all(top.join("other")).unwrap();
    fs::create_dir(top.join(".fencepost")).unwrap();
    fs::create_dir(top.join("a/.fencepost")).unwrap();
    // A file named .fencepost is not a store.
    write_new(&top.join("a/b/.fencepost"), b"");
    let home = top.join("home");
    let found = locate(None, &cwd, &home);
    assert_eq!(found.path, top.join("a/.fencepost"));
    assert_eq!(found.scope, StoreScope::Marker);
    assert_eq!(locate(None, &top, &home).path, top.join(".fencepost"));
    // A file's anchor is its own parent, not the caller's working directory.
    let file = Resource::file(top.join("a/b/c/f.txt"));
    assert_eq!(
        locate(Some(&file), &top.join("other"), &home).path,
        top.join("a/.fencepost")
    );
    // ... resolved: `..` and relative spellings from anywhere land on one anchor.
    let relative = Resource::file("../a/b/c/../c/f.txt");
    assert_eq!(
        locate(Some(&relative), &top.join("other"), &home).path,
        top.join("a/.fencepost")
    );
}

/// Rule 5: a `.fencepost` made below a claimed file does not move its claims; a
/// file the old store never saw, a lock, and a store named explicitly follow the
/// new layout. `other_stores` lists the rest of the path's stores.
#[test]
fn locate_keeps_a_file_in_the_store_its_claims_were_made_in() {
    let (_tmp, top) = isolated();
    let home = top.join("home");
    let sub = top.join("sub");
    fs::create_dir_all(&sub).unwrap();
    fs::create_dir(top.join(".fencepost")).unwrap();
    let a = Resource::file(sub.join("a.txt"));
    let b = Resource::file(sub.join("b.txt"));
    let old = Store::new(FsStore::open(top.join(".fencepost")).unwrap());
    let lease = old.acquire(&a, &AcquireOptions::new(60_000)).unwrap();
    old.release(&lease).unwrap();
    fs::create_dir(sub.join(".fencepost")).unwrap();
    let found = locate(Some(&a), &top, &home);
    assert_eq!(found.path, top.join(".fencepost"));
    assert_eq!(found.scope, StoreScope::Earlier);
    assert_eq!(locate(Some(&b), &top, &home).path, sub.join(".fencepost"));
    assert_eq!(locate(Some(&b), &top, &home).scope, StoreScope::Marker);
    let lock = Resource::lock("x");
    assert_eq!(
        locate(Some(&lock), &sub, &home).path,
        sub.join(".fencepost")
    );
    // A subtree claim of the directory: its index there records a's claim.
    let dir = Resource::dir(&sub);
    assert_eq!(locate(Some(&dir), &top, &home).path, top.join(".fencepost"));
    let others = fencepost_fs::other_stores(None, &b, &top, &sub.join(".fencepost")).unwrap();
    let paths: Vec<_> = others.into_iter().map(|s| s.path).collect();
    // Nearest first (the per-user store of this environment may follow).
    assert_eq!(paths.first(), Some(&top.join(".fencepost")), "{paths:?}");
    assert!(!paths.contains(&sub.join(".fencepost")), "{paths:?}");
    assert!(
        fencepost_fs::other_stores(Some(Path::new("s")), &b, &top, &top)
            .unwrap()
            .is_empty()
    );
    assert!(
        fencepost_fs::other_stores(None, &lock, &top, &top)
            .unwrap()
            .is_empty()
    );
    // Once the new store holds a record of a file, it is that file's store.
    let new = Store::new(FsStore::open(sub.join(".fencepost")).unwrap());
    let lease = new.acquire(&a, &AcquireOptions::new(60_000)).unwrap();
    new.release(&lease).unwrap();
    assert_eq!(locate(Some(&a), &top, &home).path, sub.join(".fencepost"));
}

#[test]
fn locate_uses_the_common_git_directory() {
    let (_tmp, top) = isolated();
    let home = top.join("home");
    let repo = top.join("repo");
    // Git directories as git makes them (a `.git` file must name one): a HEAD
    // file, objects/ and refs/ (a linked worktree's: HEAD, and a commondir).
    let git_dir = |dir: &Path| {
        fs::create_dir_all(dir.join("objects")).unwrap();
        fs::create_dir_all(dir.join("refs")).unwrap();
        write_new(&dir.join("HEAD"), b"ref: refs/heads/main\n");
    };
    git_dir(&repo.join(".git"));
    fs::create_dir_all(repo.join(".git/worktrees/w")).unwrap();
    write_new(&repo.join(".git/worktrees/w/HEAD"), b"ref: refs/heads/w\n");
    fs::create_dir_all(repo.join("src/deep")).unwrap();
    let expected = repo.join(".git/fencepost");
    let found = locate(None, &repo.join("src/deep"), &home);
    assert_eq!(found.path, expected);
    assert_eq!(found.scope, StoreScope::Repository);
    assert_eq!(locate(None, &repo, &home).path, expected);

    // A linked worktree: its `.git` file names its git directory, whose
    // `commondir` names the main repository's `.git`.
    let worktree = top.join("worktree");
    fs::create_dir_all(worktree.join("sub")).unwrap();
    write_new(
        &worktree.join(".git"),
        format!("gitdir: {}\n", repo.join(".git/worktrees/w").display()).as_bytes(),
    );
    write_new(&repo.join(".git/worktrees/w/commondir"), b"../..\n");
    assert_eq!(locate(None, &worktree.join("sub"), &home).path, expected);
    let file = Resource::file(worktree.join("sub/f.txt"));
    assert_eq!(locate(Some(&file), &top, &home).path, expected);

    // A submodule: a relative `gitdir:` and no `commondir`; its own store.
    let sub = repo.join("sub");
    git_dir(&repo.join(".git/modules/sub"));
    fs::create_dir_all(&sub).unwrap();
    write_new(&sub.join(".git"), b"gitdir: ../.git/modules/sub\n");
    let inner = repo.join(".git/modules/sub/fencepost");
    // The file's repository decides, whatever the working directory.
    let shared = Resource::file(sub.join("shared.txt"));
    assert_eq!(locate(Some(&shared), &repo, &home).path, inner);
    assert_eq!(locate(Some(&shared), &sub, &home).path, inner);
    assert_eq!(
        locate(Some(&Resource::file("sub/shared.txt")), &repo, &home).path,
        inner
    );
    assert_eq!(locate(None, &sub, &home).path, inner);

    // A marker above the repository wins over it.
    fs::create_dir(top.join(".fencepost")).unwrap();
    assert_eq!(
        locate(Some(&shared), &repo, &home).path,
        top.join(".fencepost")
    );
}

#[test]
fn locate_refuses_a_git_file_that_leads_nowhere() {
    let (_tmp, top) = isolated();
    let home = top.join("home");
    let cases: [(&str, &[u8], &str); 5] = [
        ("garbage", b"not a link\n", "does not start with `gitdir:`"),
        ("missing", b"gitdir: ../gone/.git\n", "is not a directory"),
        ("empty", b"", "does not start with `gitdir:`"),
        // A directory, but no git directory: the work tree itself, its parent.
        ("itself", b"gitdir: .\n", "is not a git directory"),
        ("parent", b"gitdir: ..\n", "is not a git directory"),
    ];
    for (name, contents, says) in cases {
        let tree = top.join(name);
        fs::create_dir_all(&tree).unwrap();
        write_new(&tree.join(".git"), contents);
        let error = locate_with(None, None, &tree, &home_env(&home)).unwrap_err();
        let message = error.to_string();
        assert!(
            matches!(error, LocateError::Repository { .. }),
            "{name}: {message}"
        );
        assert!(message.contains(says), "{name}: {message}");
        assert!(message.contains("--store"), "{name}: {message}");
    }
}

#[test]
fn locate_outside_any_repository_is_the_per_user_store() {
    let (_tmp, top) = isolated();
    let home = top.join("home");
    let one = top.join("one");
    let two = top.join("two/deep");
    fs::create_dir_all(&one).unwrap();
    fs::create_dir_all(&two).unwrap();
    let expected = user_store(&home);
    let found = locate(None, &one, &home);
    assert_eq!(found.path, expected);
    assert_eq!(found.scope, StoreScope::User);
    assert_eq!(
        locate(Some(&Resource::lock("x")), &two, &home).path,
        expected
    );
    // XDG_STATE_HOME wins when set (POSIX).
    #[cfg(unix)]
    {
        let state = top.join("state");
        let env = |name: &str| match name {
            "HOME" => Some(home.clone().into_os_string()),
            "XDG_STATE_HOME" => Some(state.clone().into_os_string()),
            _ => None,
        };
        assert_eq!(
            locate_with(None, None, &one, &env).unwrap().path,
            state.join("fencepost")
        );
    }
    // Neither set: a clear error, never a store in `/` or the working directory.
    let error = locate_with(None, None, &one, &|_| None).unwrap_err();
    assert!(matches!(error, LocateError::NoUserStore { .. }), "{error}");
    let variable = if cfg!(windows) {
        "LOCALAPPDATA"
    } else {
        "HOME"
    };
    assert!(error.to_string().contains(variable), "{error}");
    assert!(!one.join(".fencepost").exists());
}

#[cfg(unix)]
#[test]
fn locate_refuses_a_store_path_that_is_not_utf8() {
    use std::os::unix::ffi::OsStrExt;
    let (_tmp, top) = isolated();
    let bad = top.join(std::ffi::OsStr::from_bytes(b"st\xffre"));
    let error = locate_store(Some(&bad), None, &top).unwrap_err();
    assert!(matches!(error, LocateError::NotUtf8 { .. }), "{error}");
    assert!(error.to_string().contains("not valid UTF-8"), "{error}");
    // Discovered, too: a marker in a directory whose name is not UTF-8.
    fs::create_dir_all(bad.join(".fencepost")).unwrap();
    let error = locate_store(None, None, &bad).unwrap_err();
    assert!(matches!(error, LocateError::NotUtf8 { .. }), "{error}");
    // And the backend itself never opens such a root (its locator would be lossy).
    let error = FsStore::open(bad.join(".fencepost")).unwrap_err();
    assert!(error.to_string().contains("not valid UTF-8"), "{error}");
}

#[test]
fn open_existing_creates_nothing_and_reads_empty() {
    let (_tmp, top) = isolated();
    let root = top.join("missing/store");
    let store = FsStore::open_existing(&root).unwrap();
    assert!(store.keys().unwrap().is_empty());
    assert!(store.generations(&key("k")).unwrap().is_empty());
    assert_eq!(store.read(&key("k"), 1).unwrap(), None);
    assert!(
        store
            .create(&key("k"), 1, b"x", Durability::Flushed)
            .is_err()
    );
    assert!(!top.join("missing").exists());
}

#[test]
fn a_store_created_in_a_work_tree_ignores_itself() {
    let (_tmp, top) = isolated();
    let repo = top.join("repo");
    fs::create_dir_all(repo.join(".git")).unwrap();
    let explicit = repo.join("tmp/leases");
    FsStore::open(&explicit).unwrap();
    assert_eq!(fs::read(explicit.join(".gitignore")).unwrap(), b"*\n");
    // A hand-made .fencepost marker gets one at its first writing open; an
    // existing .gitignore is the user's and is kept.
    let marker = repo.join(".fencepost");
    fs::create_dir(&marker).unwrap();
    FsStore::open_existing(&marker).unwrap();
    assert!(!marker.join(".gitignore").exists(), "a reading open wrote");
    FsStore::open(&marker).unwrap();
    assert_eq!(fs::read(marker.join(".gitignore")).unwrap(), b"*\n");
    // Inside .git, and outside any work tree: nothing to ignore.
    FsStore::open(repo.join(".git/fencepost")).unwrap();
    assert!(!repo.join(".git/fencepost/.gitignore").exists());
    FsStore::open(top.join("plain")).unwrap();
    assert!(!top.join("plain/.gitignore").exists());
}

// ---------------------------------------------------------------------------------
// the protocol on top

#[test]
fn protocol_smoke_acquire_check_release_acquire_again() {
    let (tmp, store) = fresh();
    let store = Store::new(store);
    let resource = Resource::lock("db:migrations");
    let options = AcquireOptions::new(30_000).owner("test");
    let first = store.acquire(&resource, &options).unwrap();
    assert!(store.check(&resource, first.token()).unwrap());

    // Another "process" over the same directory sees it held.
    let rival = Store::new(FsStore::open(tmp.path().join("store")).unwrap());
    match rival.acquire(&resource, &options) {
        Err(fencepost::Error::Held { holder, .. }) => assert_eq!(holder.token, first.token()),
        other => panic!("expected Held, got {other:?}"),
    }
    let status = rival.status().unwrap();
    assert_eq!(status.len(), 1);
    assert!(status[0].live);

    store.release(&first).unwrap();
    assert!(!store.check(&resource, first.token()).unwrap());
    let second = rival.acquire(&resource, &options).unwrap();
    assert!(second.token() > first.token(), "tokens only grow");
    assert!(rival.check(&resource, second.token()).unwrap());
    assert!(!rival.check(&resource, first.token()).unwrap());
}

#[test]
fn protocol_supersedes_a_torn_newest_record() {
    // docs/protocol.md §3.5: an undecodable newest record is not live and is superseded by
    // newest+1, never treated as absent.
    let (_tmp, fs_store) = fresh();
    let k = key("torn");
    fs_store.create(&k, 1, b"", Durability::Unflushed).unwrap();
    let store = Store::new(fs_store);
    let lease = store
        .acquire(&Resource::lock("torn"), &AcquireOptions::new(30_000))
        .unwrap();
    assert_eq!(lease.token(), 2);
}

#[test]
fn protocol_mutual_exclusion_across_store_instances() {
    // Four "processes" (one FsStore each) take turns; never two holders at once.
    use std::sync::atomic::{AtomicUsize, Ordering};
    const WORKERS: usize = 4;
    const TURNS: usize = 8;
    let (tmp, _store) = fresh();
    let root = tmp.path().join("store");
    let inside = AtomicUsize::new(0);
    let resource = Resource::lock("turns");
    let mut tokens: Vec<u64> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..WORKERS)
            .map(|_| {
                let store = Store::new(FsStore::open(&root).unwrap());
                let (inside, resource) = (&inside, &resource);
                scope.spawn(move || {
                    let options = AcquireOptions::new(60_000).wait_ms(60_000);
                    (0..TURNS)
                        .map(|_| {
                            let lease = store.acquire(resource, &options).unwrap();
                            assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                            assert!(store.check(resource, lease.token()).unwrap());
                            std::thread::sleep(Duration::from_millis(1));
                            inside.fetch_sub(1, Ordering::SeqCst);
                            store.release(&lease).unwrap();
                            lease.token()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    tokens.sort_unstable();
    tokens.dedup();
    assert_eq!(
        tokens.len(),
        WORKERS * TURNS,
        "a token was handed out twice"
    );
}

/// A directory that git would take for a repository's work tree: a `.git`
/// directory is all the location rule looks for.
fn fake_repository(dir: &Path) {
    fs::create_dir_all(dir.join(".git")).unwrap();
}

#[test]
fn subtree_split_finds_a_store_below_the_directory() {
    let (_tmp, top) = isolated();
    let outer = top.join("outer");
    fake_repository(&outer);
    fake_repository(&outer.join("src/vendor/inner"));
    // The directory's own repository is its store, not a split; the nested one is.
    let split = fencepost_fs::subtree_split(&Resource::dir(&outer), &top).unwrap();
    assert_eq!(
        split,
        Some(fencepost_fs::SubtreeSplit::StoreBelow {
            dir: outer.clone(),
            boundary: outer.join("src/vendor/inner/.git"),
        })
    );
    let message = split.unwrap().to_string();
    assert!(
        message.contains("nested repository") && message.contains("--store"),
        "{message}"
    );
    // Inside the nested repository, and beside it, nothing splits.
    for dir in [outer.join("src/vendor/inner"), outer.join("src/other")] {
        fs::create_dir_all(&dir).unwrap();
        assert_eq!(
            fencepost_fs::subtree_split(&Resource::dir(&dir), &top).unwrap(),
            None
        );
    }
    // A .fencepost directory below splits too.
    fs::create_dir_all(outer.join("src/other/part/.fencepost")).unwrap();
    let split = fencepost_fs::subtree_split(&Resource::dir(outer.join("src/other")), &top);
    assert!(
        matches!(split, Ok(Some(fencepost_fs::SubtreeSplit::StoreBelow { ref boundary, .. }))
            if boundary.ends_with("part/.fencepost")),
        "{split:?}"
    );
    // Not a directory resource, or a directory that does not exist: nothing to split.
    assert_eq!(
        fencepost_fs::subtree_split(&Resource::file(outer.join("a.txt")), &top).unwrap(),
        None
    );
    assert_eq!(
        fencepost_fs::subtree_split(&Resource::dir(outer.join("not-yet")), &top).unwrap(),
        None
    );
}

#[test]
fn subtree_split_in_a_marker_store_is_only_another_marker() {
    let (_tmp, top) = isolated();
    fs::create_dir_all(top.join(".fencepost")).unwrap();
    // Under a marker, a nested repository's files use the marker's store too.
    fake_repository(&top.join("work/inner"));
    assert_eq!(
        fencepost_fs::subtree_split(&Resource::dir(top.join("work")), &top).unwrap(),
        None
    );
    fs::create_dir_all(top.join("work/inner/.fencepost")).unwrap();
    assert!(matches!(
        fencepost_fs::subtree_split(&Resource::dir(top.join("work")), &top).unwrap(),
        Some(fencepost_fs::SubtreeSplit::StoreBelow { .. })
    ));
}

/// The advice for a bare repository below a subtree names the repository itself:
/// its parent, claimed as advised, would hold it again (a breaker's advice loop).
#[test]
fn subtree_split_advice_for_a_bare_repository_names_the_repository() {
    let (_tmp, top) = isolated();
    let outer = top.join("outer");
    fake_repository(&outer);
    // Joined one component at a time: Windows spells the advice with `\`.
    let bare = outer.join("mirrors").join("lib.git");
    for dir in ["objects", "refs"] {
        fs::create_dir_all(bare.join(dir)).unwrap();
    }
    write_new(&bare.join("HEAD"), b"ref: refs/heads/main\n");
    let split = fencepost_fs::subtree_split(&Resource::dir(&outer), &top)
        .unwrap()
        .expect("the bare repository splits the subtree");
    let message = split.to_string();
    let advice = format!("claim dir {} and the other directories", bare.display());
    assert!(message.contains(&advice), "{message}");
    // Following the advice ends the loop: the repository itself does not split.
    assert_eq!(
        fencepost_fs::subtree_split(&Resource::dir(&bare), &top).unwrap(),
        None
    );
}

/// A `.fencepost` link below a subtree to the subtree's own store is that store,
/// not a store of its own (a breaker: it was taken for a boundary); a link to
/// another store still splits.
#[cfg(unix)]
#[test]
fn subtree_split_ignores_a_link_to_its_own_store() {
    let (_tmp, top) = isolated();
    fs::create_dir_all(top.join(".fencepost")).unwrap();
    let part = top.join("work/part");
    fs::create_dir_all(&part).unwrap();
    std::os::unix::fs::symlink(top.join(".fencepost"), part.join(".fencepost")).unwrap();
    assert_eq!(
        fencepost_fs::subtree_split(&Resource::dir(top.join("work")), &top).unwrap(),
        None
    );
    let other = top.join("other-store");
    fs::create_dir_all(&other).unwrap();
    fs::remove_file(part.join(".fencepost")).unwrap();
    std::os::unix::fs::symlink(&other, part.join(".fencepost")).unwrap();
    assert!(matches!(
        fencepost_fs::subtree_split(&Resource::dir(top.join("work")), &top).unwrap(),
        Some(fencepost_fs::SubtreeSplit::StoreBelow { .. })
    ));
}

#[test]
fn subtree_split_stops_at_its_limit_and_follows_no_link() {
    let (_tmp, top) = isolated();
    let tree = top.join("tree");
    for name in ["a", "b", "c", "d"] {
        fs::create_dir_all(tree.join(name)).unwrap();
    }
    let dir = Resource::dir(&tree);
    assert_eq!(
        fencepost_fs::subtree_split_within(&dir, &top, 3).unwrap(),
        Some(fencepost_fs::SubtreeSplit::TooLarge { dir: tree.clone() })
    );
    assert_eq!(
        fencepost_fs::subtree_split_within(&dir, &top, 4).unwrap(),
        None
    );
    // A link to a repository is not walked into: a file reached through it is
    // the file it resolves to, outside the subtree.
    #[cfg(unix)]
    {
        let elsewhere = top.join("elsewhere");
        fake_repository(&elsewhere);
        std::os::unix::fs::symlink(&elsewhere, tree.join("a/link")).unwrap();
        assert_eq!(fencepost_fs::subtree_split(&dir, &top).unwrap(), None);
    }
}

/// A session's tenure notes (docs/format-v1.md §1.3): per session and key, beside
/// its store notes without being taken for one, forgotten at the session's end
/// while the store notes stay.
#[test]
fn tenure_notes_are_kept_per_key_and_forgotten() {
    let (dir, store) = fresh();
    let session = fencepost::SessionTag::of("claude-code:s1");
    let other = fencepost::SessionTag::of("claude-code:s2");
    let a = Resource::lock("a").identity().unwrap().key;
    let b = Resource::lock("b").identity().unwrap().key;
    assert_eq!(store.session_tenure(&session, &a), None);
    store.note_session_tenure(&session, &a, 7).unwrap();
    assert_eq!(store.session_tenure(&session, &a), Some(Some(7)));
    store.note_session_tenure(&session, &a, 12).unwrap();
    assert_eq!(
        store.session_tenure(&session, &a),
        Some(Some(12)),
        "replaced"
    );
    assert_eq!(store.session_tenure(&session, &b), None);
    assert_eq!(store.session_tenure(&other, &a), None);
    let elsewhere = dir.path().join("b/.fencepost");
    store.note_session_store(&session, &elsewhere).unwrap();
    assert_eq!(
        store.session_stores(&session).unwrap(),
        vec![elsewhere.clone()],
        "a tenure note names no store"
    );
    // A note that cannot be read is a note of an unknown token.
    let notes = store.root().join("sessions").join(session.as_str());
    write_new(&notes.join(format!("tenure-{}", b.as_str())), b"x");
    assert_eq!(store.session_tenure(&session, &b), Some(None));
    store.forget_session_tenures(&session);
    assert_eq!(store.session_tenure(&session, &a), None);
    assert_eq!(store.session_tenure(&session, &b), None);
    assert_eq!(store.session_stores(&session).unwrap(), vec![elsewhere]);
}

/// A session's notes of the other stores it claimed in (docs/format-v1.md §1.3):
/// each store once, read back as written, forgotten on request; a planted note
/// that does not match its own name, or a link, names nothing.
#[test]
fn session_notes_name_each_other_store_once() {
    let (dir, store) = fresh();
    let session = fencepost::SessionTag::of("claude-code:s1");
    let other = fencepost::SessionTag::of("claude-code:s2");
    let a = dir.path().join("a/.git/fencepost");
    let b = dir.path().join("b/.fencepost");
    assert_eq!(
        store.session_stores(&session).unwrap(),
        Vec::<PathBuf>::new()
    );
    store.note_session_store(&session, &a).unwrap();
    store.note_session_store(&session, &b).unwrap();
    store.note_session_store(&session, &a).unwrap();
    store.note_session_store(&other, &b).unwrap();
    let mut expected = vec![a.clone(), b.clone()];
    expected.sort();
    assert_eq!(store.session_stores(&session).unwrap(), expected);
    assert_eq!(store.session_stores(&other).unwrap(), vec![b.clone()]);
    let notes = store.root().join("sessions").join(session.as_str());
    assert_eq!(names_in(&notes).len(), 2, "one note per store");

    // Planted: a note whose name is not its path's digest, and a link.
    write_new(&notes.join("0123456789abcdef0123456789abcdef"), b"/etc");
    #[cfg(unix)]
    std::os::unix::fs::symlink(notes.join(names_in(&notes)[0].clone()), notes.join("link"))
        .unwrap();
    assert_eq!(store.session_stores(&session).unwrap(), expected);

    assert!(
        store
            .note_session_store(&session, Path::new("relative/store"))
            .is_err(),
        "a relative path is no store to note"
    );
    store.forget_session_stores(&session);
    assert_eq!(
        store.session_stores(&session).unwrap(),
        Vec::<PathBuf>::new()
    );
    assert!(!notes.exists());
    assert_eq!(store.session_stores(&other).unwrap(), vec![b]);
}

/// A `sessions` directory planted as a link: noting refuses it, and nothing is
/// made through it (a breaker: the session's directory was made at the link's
/// target before the link was refused).
#[cfg(unix)]
#[test]
fn session_notes_make_nothing_through_a_planted_link() {
    let (dir, store) = fresh();
    let elsewhere = dir.path().join("elsewhere");
    fs::create_dir_all(&elsewhere).unwrap();
    fs::create_dir_all(store.root()).unwrap();
    std::os::unix::fs::symlink(&elsewhere, store.root().join("sessions")).unwrap();
    let session = fencepost::SessionTag::of("claude-code:s1");
    let noted = store.note_session_store(&session, &dir.path().join("a/.fencepost"));
    assert!(noted.is_err(), "{noted:?}");
    assert_eq!(names_in(&elsewhere), Vec::<String>::new());
}

/// A temporary directory and its path resolved, as the hook resolves paths
/// (Windows: without the `\\?\` prefix).
fn resolved_tempdir() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let top = if cfg!(windows) {
        tmp.path().to_path_buf()
    } else {
        tmp.path().canonicalize().unwrap()
    };
    (tmp, top)
}

/// A hard link to a store record, made beside the store, is found under its other
/// name; a copy (one name), a hard link to other JSON, and the record in the store
/// alone are not a record linked elsewhere.
#[test]
fn a_hard_link_to_a_record_is_found() {
    use fencepost_fs::store_record_linked_at;
    let (_tmp, top) = resolved_tempdir();
    let store = Store::new(FsStore::open(top.join("store")).unwrap());
    let _lease = store
        .acquire(&Resource::lock("linked"), &AcquireOptions::new(60_000))
        .unwrap();
    let record = walk_files(&top.join("store"))
        .into_iter()
        .find(|path| {
            path.to_string_lossy().contains("lock-")
                && path.extension().is_some_and(|e| e == "json")
        })
        .expect("the claim's record");
    assert!(
        !store_record_linked_at(&record),
        "one name: the record itself"
    );
    let work = top.join("work");
    fs::create_dir_all(&work).unwrap();
    fs::hard_link(&record, work.join("notes.json")).unwrap();
    assert!(store_record_linked_at(&work.join("notes.json")));
    assert!(store_record_linked_at(&record), "now it has two names");
    write_new(&work.join("copy.json"), &fs::read(&record).unwrap());
    assert!(!store_record_linked_at(&work.join("copy.json")));
    write_new(&work.join("package.json"), br#"{"v":1,"key":"not-a-key"}"#);
    fs::hard_link(work.join("package.json"), work.join("package2.json")).unwrap();
    assert!(!store_record_linked_at(&work.join("package2.json")));
    assert!(!store_record_linked_at(&work.join("missing.json")));
}

/// Every file below `dir`.
fn walk_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk_files(&path));
        } else {
            found.push(path);
        }
    }
    found
}

/// Every store a record file could be written into is found: the named one, a
/// `.fencepost` directory's, a repository's, a bare repository's inside a work
/// tree, the per-user store (existing or not); a file beside them is not.
#[test]
fn a_write_into_any_store_is_found() {
    use fencepost_fs::store_holding;
    let (_tmp, top) = resolved_tempdir();
    let record = "claims/lock-x/g00000099.json";
    // Named (it need not exist), whatever the case of its spelling.
    let named = top.join("named");
    assert_eq!(
        store_holding(&named.join(record), Some(&named)),
        Some(named.clone())
    );
    assert_eq!(
        store_holding(&top.join("NAMED").join(record), Some(&named)),
        Some(named.clone())
    );
    // A marker directory's.
    fs::create_dir_all(top.join("m/.fencepost")).unwrap();
    assert_eq!(
        store_holding(&top.join("m/.fencepost").join(record), None),
        Some(top.join("m/.fencepost"))
    );
    // A repository's, and a bare repository's inside a work tree (its store is
    // made inside it).
    fs::create_dir_all(top.join("r/.git/objects")).unwrap();
    fs::create_dir_all(top.join("r/.git/refs")).unwrap();
    write_new(&top.join("r/.git/HEAD"), b"ref: refs/heads/main\n");
    assert_eq!(
        store_holding(&top.join("r/.git/fencepost").join(record), None),
        Some(top.join("r/.git/fencepost"))
    );
    let bare = top.join("r/fx.git");
    fs::create_dir_all(bare.join("objects")).unwrap();
    fs::create_dir_all(bare.join("refs")).unwrap();
    write_new(&bare.join("HEAD"), b"ref: refs/heads/main\n");
    assert_eq!(
        store_holding(&bare.join("fencepost").join(record), None),
        Some(bare.join("fencepost"))
    );
    // The per-user store, existing or not.
    if let Some(user) = fencepost_fs::user_store() {
        assert!(store_holding(&user.join(record), None).is_some());
    }
    // Files beside stores are no store's.
    for beside in ["r/src/a.rs", "r/fx.git/config", "m/a.txt", "named.txt"] {
        assert_eq!(
            store_holding(&top.join(beside), Some(&named)),
            None,
            "{beside}"
        );
    }
}

/// A write that completes a git directory (its `HEAD`, `objects/` or `refs/`),
/// or writes a git directory's `commondir`, is found; other writes are not.
#[test]
fn a_write_that_makes_a_git_directory_is_found() {
    use fencepost_fs::git_dir_made_by_write;
    let (_tmp, top) = resolved_tempdir();
    let x = top.join("x");
    fs::create_dir_all(&x).unwrap();
    // Nothing there yet: one part alone makes nothing.
    for part in ["HEAD", "objects/.keep", "refs/.keep"] {
        assert_eq!(git_dir_made_by_write(&x.join(part)), None, "{part}");
    }
    write_new(&x.join("HEAD"), b"ref: refs/heads/main\n");
    fs::create_dir_all(x.join("objects")).unwrap();
    // The last part, whichever it is, is found; in another case too.
    assert_eq!(
        git_dir_made_by_write(&x.join("refs/.keep")),
        Some(x.clone())
    );
    assert_eq!(
        git_dir_made_by_write(&x.join("Refs/heads/main")),
        Some(x.clone())
    );
    assert_eq!(
        git_dir_made_by_write(&x.join("refs")),
        None,
        "a file named refs"
    );
    fs::create_dir_all(x.join("refs")).unwrap();
    // Already a git directory: writing inside it moves nothing, but its
    // `commondir` would.
    assert_eq!(git_dir_made_by_write(&x.join("config")), None);
    assert_eq!(git_dir_made_by_write(&x.join("commondir")), Some(x.clone()));
    fs::remove_file(x.join("HEAD")).unwrap();
    assert_eq!(git_dir_made_by_write(&x.join("HEAD")), Some(x.clone()));
    assert_eq!(git_dir_made_by_write(&x.join("sub/HEAD")), None);
    // A `HEAD` and a `commondir`, in either order: whatever the commondir names,
    // the second write is refused (a breaker moved a directory's store this way).
    let w = top.join("w");
    fs::create_dir_all(&w).unwrap();
    assert_eq!(git_dir_made_by_write(&w.join("HEAD")), None);
    assert_eq!(git_dir_made_by_write(&w.join("commondir")), None);
    write_new(&w.join("HEAD"), b"ref: refs/heads/main\n");
    assert_eq!(git_dir_made_by_write(&w.join("commondir")), Some(w.clone()));
    fs::remove_file(w.join("HEAD")).unwrap();
    write_new(&w.join("commondir"), b"../x\n");
    assert_eq!(git_dir_made_by_write(&w.join("HEAD")), Some(w.clone()));
    assert_eq!(git_dir_made_by_write(&top.join("a.txt")), None);
}
