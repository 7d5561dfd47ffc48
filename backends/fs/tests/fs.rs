//! Behaviour of the filesystem backend: the `LeaseStore` contract (docs/protocol.md §4) as the
//! fs format (docs/protocol.md §5) implements it, store discovery, and the protocol on top.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::{Duration, SystemTime};

use fencepost::{AcquireOptions, CreateOutcome, Durability, Key, LeaseStore, Resource, Store};
use fencepost_fs::{FsStore, locate_store};

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
        // A symbolic link named like a key is not followed out of the store.
        let outside = tmp.path().join("outside");
        fs::create_dir(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, claims.join(key("a link").as_str())).unwrap();
    }
    let _ = tmp;
    let mut keys = store.keys().unwrap();
    keys.sort();
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
        key: key.to_string(),
        label: "outside".into(),
        token: generation,
        generation,
        holder: "intruder-1-0".into(),
        owner: "intruder".into(),
        pid: 1,
        host: String::new(),
        granted_at_ms: 0,
        expires_at_ms: u64::MAX,
        ttl_ms: u64::MAX,
        released: false,
        process: None,
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
    // Decision: every operation on the key is an error; keys() skips it.
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
    assert_eq!(store.keys().unwrap(), [key("other")]);
    assert_eq!(
        names_in(&outside),
        ["g00000001.json"],
        "outside was written"
    );
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
// store discovery (docs/protocol.md §5)

/// The test directories live under the system temp dir: make sure nothing above it
/// would be found first.
fn isolated() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for dir in tmp.path().ancestors() {
        assert!(
            !dir.join(".fencepost").is_dir() && fs::symlink_metadata(dir.join(".git")).is_err(),
            "{} holds a .fencepost or .git; these tests need a clean temp dir",
            dir.display()
        );
    }
    tmp
}

#[test]
fn locate_explicit_wins_and_is_made_absolute() {
    let tmp = isolated();
    let cwd = tmp.path().join("work");
    fs::create_dir_all(cwd.join(".fencepost")).unwrap();
    fs::create_dir(cwd.join(".git")).unwrap();
    let explicit = tmp.path().join("elsewhere");
    assert_eq!(locate_store(Some(&explicit), &cwd), explicit);
    assert_eq!(
        locate_store(Some(Path::new("rel/store")), &cwd),
        cwd.join("rel/store")
    );
}

#[test]
fn locate_finds_the_nearest_store_walking_up() {
    let tmp = isolated();
    let top = tmp.path();
    let cwd = top.join("a/b/c");
    fs::create_dir_all(&cwd).unwrap();
    fs::create_dir(top.join(".fencepost")).unwrap();
    fs::create_dir(top.join("a/.fencepost")).unwrap();
    // A file named .fencepost is not a store.
    write_new(&top.join("a/b/.fencepost"), b"");
    assert_eq!(locate_store(None, &cwd), top.join("a/.fencepost"));
    assert_eq!(locate_store(None, top), top.join(".fencepost"));
}

#[test]
fn locate_uses_the_git_work_tree_root_from_a_subdirectory() {
    // docs/protocol.md §5: two agents in different subdirectories must land in one store.
    let tmp = isolated();
    let repo = tmp.path().join("repo");
    fs::create_dir_all(repo.join(".git")).unwrap();
    fs::create_dir_all(repo.join("src/deep")).unwrap();
    fs::create_dir_all(repo.join("docs")).unwrap();
    let expected = repo.join(".fencepost");
    assert_eq!(locate_store(None, &repo.join("src/deep")), expected);
    assert_eq!(locate_store(None, &repo.join("docs")), expected);
    assert_eq!(locate_store(None, &repo), expected);

    // A worktree or submodule has a `.git` file; its root is the nearest one.
    let worktree = tmp.path().join("worktree");
    fs::create_dir_all(worktree.join("sub")).unwrap();
    write_new(
        &worktree.join(".git"),
        b"gitdir: ../repo/.git/worktrees/w\n",
    );
    assert_eq!(
        locate_store(None, &worktree.join("sub")),
        worktree.join(".fencepost")
    );

    // An existing store below the work tree root is nearer, and wins.
    fs::create_dir(repo.join("src/.fencepost")).unwrap();
    assert_eq!(
        locate_store(None, &repo.join("src/deep")),
        repo.join("src/.fencepost")
    );
}

#[test]
fn locate_falls_back_to_the_working_directory() {
    let tmp = isolated();
    let cwd = tmp.path().join("plain/dir");
    fs::create_dir_all(&cwd).unwrap();
    assert_eq!(locate_store(None, &cwd), cwd.join(".fencepost"));
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
