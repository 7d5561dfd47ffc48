//! Resource identity through the public API (docs/protocol.md §6, issue 5): every row claims one
//! spelling, then another, and asserts they contend (held) or are independent.

use std::path::{Path, PathBuf};

use fencepost::doc_support::TinyStore;
use fencepost::{AcquireOptions, Resource, Store, TryAcquire};

const TTL_MS: u64 = 60_000;

fn store() -> Store {
    Store::new(TinyStore::default())
}

fn options() -> AcquireOptions {
    AcquireOptions::new(TTL_MS).owner("test")
}

fn acquired(store: &Store, resource: &Resource) -> bool {
    match store
        .try_acquire(resource, &options())
        .expect("no store error")
    {
        TryAcquire::Acquired(_) => true,
        TryAcquire::Held(_) => false,
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Expect {
    Contend,
    Independent,
}
use Expect::{Contend, Independent};

/// A row: a name, how to prepare the scratch directory, the first spelling, what to
/// do between the claims, the second spelling, and the expectation.
struct Row {
    name: &'static str,
    setup: fn(&Path),
    first: fn(&Path) -> Resource,
    between: fn(&Path),
    second: fn(&Path) -> Resource,
    expect: Expect,
}

fn nothing(_: &Path) {}
fn a_txt(root: &Path) {
    std::fs::write(root.join("a.txt"), b"a").unwrap();
    std::fs::create_dir(root.join("sub")).unwrap();
}
fn file(relative: &'static str) -> impl Fn(&Path) -> PathBuf {
    move |root| root.join(relative)
}

const LONG: &str = "a-component-of-fifty-characters-abcdefghijklmnopq";

fn rows() -> Vec<Row> {
    vec![
        Row {
            name: "a.txt vs ./a.txt",
            setup: a_txt,
            first: |r| Resource::file(file("a.txt")(r)),
            between: nothing,
            second: |r| Resource::file(file("./a.txt")(r)),
            expect: Contend,
        },
        Row {
            name: "a.txt vs sub/../a.txt",
            setup: a_txt,
            first: |r| Resource::file(r.join("a.txt")),
            between: nothing,
            second: |r| Resource::file(r.join("sub/../a.txt")),
            expect: Contend,
        },
        Row {
            name: "a.txt vs a.txt/ (trailing slash)",
            setup: a_txt,
            first: |r| Resource::file(r.join("a.txt")),
            between: nothing,
            second: |r| Resource::file(format!("{}/", r.join("a.txt").display())),
            expect: Contend,
        },
        Row {
            name: "a.txt vs b.txt",
            setup: a_txt,
            first: |r| Resource::file(r.join("a.txt")),
            between: nothing,
            second: |r| Resource::file(r.join("b.txt")),
            expect: Independent,
        },
        Row {
            name: "new.txt claimed before it exists, then created, then claimed",
            setup: nothing,
            first: |r| Resource::file(r.join("new.txt")),
            between: |r| std::fs::write(r.join("new.txt"), b"n").unwrap(),
            second: |r| Resource::file(r.join("./new.txt")),
            expect: Contend,
        },
        Row {
            name: "new.txt vs missing/../new.txt (neither exists)",
            setup: nothing,
            first: |r| Resource::file(r.join("new.txt")),
            between: nothing,
            second: |r| Resource::file(r.join("missing/../new.txt")),
            expect: Contend,
        },
        Row {
            name: "A.TXT vs a.txt (merge: the volume may be case-insensitive)",
            setup: nothing,
            first: |r| Resource::file(r.join("A.TXT")),
            between: nothing,
            second: |r| Resource::file(r.join("a.txt")),
            expect: Contend,
        },
        Row {
            name: "NFC vs NFD file name",
            setup: nothing,
            first: |r| Resource::file(r.join("caf\u{e9}.txt")),
            between: nothing,
            second: |r| Resource::file(r.join("cafe\u{301}.txt")),
            expect: Contend,
        },
        Row {
            name: "lock DB:Migrations_ vs db:migrations",
            setup: nothing,
            first: |_| Resource::lock("DB:Migrations "),
            between: nothing,
            second: |_| Resource::lock("db:migrations"),
            expect: Contend,
        },
        Row {
            name: "lock NFC vs NFD",
            setup: nothing,
            first: |_| Resource::lock("caf\u{e9}"),
            between: nothing,
            second: |_| Resource::lock("CAFE\u{301}"),
            expect: Contend,
        },
        Row {
            name: "a lock named like a path vs the file at that path",
            setup: a_txt,
            first: |r| Resource::lock(r.join("a.txt").to_str().unwrap()),
            between: nothing,
            second: |r| Resource::file(r.join("a.txt")),
            expect: Independent,
        },
        Row {
            name: "a very long path vs its ./ spelling",
            setup: nothing,
            first: |r| Resource::file(r.join([LONG; 70].join("/"))),
            between: nothing,
            second: |r| Resource::file(r.join(format!("./{}", [LONG; 70].join("/./")))),
            expect: Contend,
        },
        #[cfg(unix)]
        Row {
            name: "a symlinked parent directory",
            setup: |r| {
                std::fs::create_dir(r.join("real")).unwrap();
                std::os::unix::fs::symlink(r.join("real"), r.join("alias")).unwrap();
            },
            first: |r| Resource::file(r.join("real/x.txt")),
            between: nothing,
            second: |r| Resource::file(r.join("alias/x.txt")),
            expect: Contend,
        },
        #[cfg(unix)]
        Row {
            name: "`..` after a symlinked directory is resolved by the kernel, not lexically",
            setup: |r| {
                std::fs::create_dir_all(r.join("deep/real")).unwrap();
                std::os::unix::fs::symlink(r.join("deep/real"), r.join("alias")).unwrap();
            },
            first: |r| Resource::file(r.join("deep/x.txt")),
            between: nothing,
            second: |r| Resource::file(r.join("alias/../x.txt")),
            expect: Contend,
        },
        #[cfg(unix)]
        Row {
            name: "a symlink to the file",
            setup: |r| {
                a_txt(r);
                std::os::unix::fs::symlink(r.join("a.txt"), r.join("link.txt")).unwrap();
            },
            first: |r| Resource::file(r.join("a.txt")),
            between: nothing,
            second: |r| Resource::file(r.join("link.txt")),
            expect: Contend,
        },
        #[cfg(unix)]
        Row {
            name: "a dangling symlink vs the file it will create",
            setup: |r| std::os::unix::fs::symlink("new.txt", r.join("link.txt")).unwrap(),
            first: |r| Resource::file(r.join("link.txt")),
            between: nothing,
            second: |r| Resource::file(r.join("new.txt")),
            expect: Contend,
        },
        #[cfg(unix)]
        Row {
            name: "two hard links to one file",
            setup: |r| {
                a_txt(r);
                std::fs::hard_link(r.join("a.txt"), r.join("hard.txt")).unwrap();
            },
            first: |r| Resource::file(r.join("a.txt")),
            between: nothing,
            second: |r| Resource::file(r.join("hard.txt")),
            expect: Contend,
        },
    ]
}

#[test]
fn spellings_contend_or_stay_independent() {
    let mut failures = Vec::new();
    for row in rows() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        (row.setup)(root);
        let store = store();
        assert!(
            acquired(&store, &(row.first)(root)),
            "{}: first claim",
            row.name
        );
        (row.between)(root);
        let got = if acquired(&store, &(row.second)(root)) {
            Independent
        } else {
            Contend
        };
        if got != row.expect {
            failures.push(format!(
                "{}: expected {:?}, got {got:?}",
                row.name, row.expect
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn relative_and_absolute_spellings_contend() {
    // The only test in this binary that changes the working directory; every other
    // test uses absolute paths.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), b"a").unwrap();
    std::env::set_current_dir(dir.path()).unwrap();
    let store = store();
    assert!(acquired(&store, &Resource::file("a.txt")));
    assert!(!acquired(&store, &Resource::file(dir.path().join("a.txt"))));
    assert!(!acquired(&store, &Resource::file("./a.txt")));
}

#[test]
fn keys_stay_short_valid_file_names() {
    let dir = tempfile::tempdir().unwrap();
    let long = dir.path().join([LONG; 80].join("/"));
    for resource in [
        Resource::file(&long),
        Resource::lock(LONG.repeat(100)),
        Resource::lock("a/b\\c:d*e?f\"g<h>i|j"),
    ] {
        let identity = resource.identity().unwrap();
        for key in identity.keys() {
            let text = key.as_str();
            assert!(text.len() <= 38, "{text}");
            assert!(
                text.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
                "{text}"
            );
        }
    }
}

/// A file or subtree path deeper than `DEPTH_LIMIT` or longer than
/// `PATH_LIMIT_BYTES` once resolved is refused before anything is written: a claim
/// is indexed in every directory above it, so a 20,000-level path wrote 662 MB (a
/// breaker). One at the depth limit is claimed as any.
#[test]
fn paths_beyond_the_limits_are_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().components().count();
    let at_limit: PathBuf = std::iter::once(dir.path().to_path_buf())
        .chain((base..fencepost::DEPTH_LIMIT).map(|_| PathBuf::from("d")))
        .collect();
    let too_deep = at_limit.join("f");
    let too_long = dir
        .path()
        .join("x".repeat(200))
        .join("y".repeat(fencepost::PATH_LIMIT_BYTES));
    let backend = std::sync::Arc::new(TinyStore::default());
    let store = Store::new(std::sync::Arc::clone(&backend));
    for resource in [
        Resource::file(&too_deep),
        Resource::dir(&too_deep),
        Resource::file(&too_long),
        Resource::dir(&too_long),
    ] {
        match store.try_acquire(&resource, &options()) {
            Err(fencepost::Error::InvalidResource(why)) => {
                assert!(why.contains("claim"), "{why}");
                assert!(why.len() < 300, "the refusal repeats the whole path: {why}");
            }
            other => panic!("{resource}: {other:?}"),
        }
    }
    use fencepost::LeaseStore;
    assert_eq!(backend.keys().unwrap(), vec![], "a refused claim wrote");
    assert_eq!(at_limit.components().count(), fencepost::DEPTH_LIMIT);
    assert!(acquired(&store, &Resource::file(&at_limit)));
}

#[cfg(unix)]
mod hard_links {
    use super::*;
    use std::sync::{Arc, Mutex};

    use fencepost::{BackendError, CreateOutcome, Durability, Key, LeaseStore, SystemClock};

    fn linked() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.txt");
        let b = dir.path().join("b.txt");
        std::fs::write(&a, b"a").unwrap();
        std::fs::hard_link(&a, &b).unwrap();
        (dir, a, b)
    }

    fn live_keys(store: &Store) -> Vec<String> {
        store
            .key_status()
            .unwrap()
            .into_iter()
            .filter(|e| e.live)
            .map(|e| e.key.to_string())
            .collect()
    }

    #[test]
    fn an_existing_file_has_a_path_key_and_a_file_id_key() {
        let (_dir, a, b) = linked();
        let (ia, ib) = (
            Resource::file(&a).identity().unwrap(),
            Resource::file(&b).identity().unwrap(),
        );
        assert_ne!(ia.key, ib.key, "two links have two path keys");
        assert_eq!(ia.file_id, ib.file_id, "and one file-id key");
        assert!(ia.file_id.as_ref().unwrap().as_str().starts_with("inode-"));
        assert_eq!(
            Resource::file(a.with_extension("new"))
                .identity()
                .unwrap()
                .file_id,
            None
        );
        assert_eq!(Resource::lock("x").identity().unwrap().file_id, None);
    }

    #[test]
    fn a_claim_held_part_way_leaves_nothing_held() {
        // The path key sorts before the file-id key (`file-` < `inode-`), so the
        // second claimant takes its own path key first, then finds the file id held
        // and must give its path key back.
        let (_dir, a, b) = linked();
        let store = store();
        let lease = store.acquire(&Resource::file(&a), &options()).unwrap();
        assert_eq!(lease.keys().count(), 2);
        let before = live_keys(&store);
        assert_eq!(before.len(), 2);
        assert!(!acquired(&store, &Resource::file(&b)));
        assert_eq!(live_keys(&store), before, "the loser left a claim behind");
        // Waiting gives the same answer and still leaves nothing behind.
        let waiting = options().wait_ms(30);
        assert!(matches!(
            store.try_acquire(&Resource::file(&b), &waiting).unwrap(),
            TryAcquire::Held(_)
        ));
        assert_eq!(live_keys(&store), before);
    }

    /// A backend that lets a rival claim a resource at the moment a create of
    /// `trigger` is attempted: the rival arrives between our look and our take.
    #[derive(Debug)]
    struct RivalArrives {
        inner: Arc<TinyStore>,
        trigger: Key,
        rival: Mutex<Option<Resource>>,
    }

    impl LeaseStore for RivalArrives {
        fn create(
            &self,
            key: &Key,
            generation: u64,
            bytes: &[u8],
            durability: Durability,
        ) -> Result<CreateOutcome, BackendError> {
            if *key == self.trigger
                && let Some(rival) = self.rival.lock().unwrap().take()
            {
                let inner: Arc<dyn LeaseStore> = self.inner.clone();
                let store = Store::from_parts(inner, Arc::new(SystemClock::new()));
                store.acquire(&rival, &options()).unwrap();
            }
            self.inner.create(key, generation, bytes, durability)
        }
        fn generations(&self, key: &Key) -> Result<Vec<u64>, BackendError> {
            self.inner.generations(key)
        }
        fn read(&self, key: &Key, generation: u64) -> Result<Option<Vec<u8>>, BackendError> {
            self.inner.read(key, generation)
        }
        fn remove(&self, key: &Key, generation: u64) -> Result<(), BackendError> {
            self.inner.remove(key, generation)
        }
        fn keys(&self) -> Result<Vec<Key>, BackendError> {
            self.inner.keys()
        }
        fn locator(&self) -> String {
            "rival-arrives".into()
        }
    }

    #[test]
    fn a_key_taken_by_a_rival_part_way_gives_back_the_keys_already_taken() {
        // Keys are taken in sorted order, and `file-` < `inode-`: the path key of
        // b.txt is taken first; the rival takes a.txt (its own path key and the shared
        // file id) just then, so b.txt's claim finds the file id held and must give
        // its path key back.
        let (_dir, a, b) = linked();
        let b_path_key = Resource::file(&b).identity().unwrap().key;
        let store = Store::new(RivalArrives {
            inner: Arc::new(TinyStore::default()),
            trigger: b_path_key.clone(),
            rival: Mutex::new(Some(Resource::file(&a))),
        });
        assert!(!acquired(&store, &Resource::file(&b)));
        let live = live_keys(&store);
        assert_eq!(live.len(), 2, "the rival's two keys: {live:?}");
        assert!(
            !live.contains(&b_path_key.to_string()),
            "b.txt's path key was left held"
        );
    }

    /// A backend whose calls stall: each planned `(call, key prefix, ms)` advances
    /// the manual clock by `ms` at the first matching call, in order.
    #[derive(Debug)]
    struct Stalls {
        inner: TinyStore,
        clock: fencepost::ManualClock,
        plan: Mutex<std::collections::VecDeque<(&'static str, &'static str, u64)>>,
    }

    impl Stalls {
        fn stall(&self, call: &str, key: &Key) {
            let mut plan = self.plan.lock().unwrap();
            if let Some(&(c, prefix, ms)) = plan.front()
                && c == call
                && key.as_str().starts_with(prefix)
            {
                plan.pop_front();
                self.clock.advance_ms(ms);
            }
        }
    }

    impl LeaseStore for Stalls {
        fn create(
            &self,
            key: &Key,
            generation: u64,
            bytes: &[u8],
            durability: Durability,
        ) -> Result<CreateOutcome, BackendError> {
            let created = self.inner.create(key, generation, bytes, durability);
            self.stall("create", key);
            created
        }
        fn generations(&self, key: &Key) -> Result<Vec<u64>, BackendError> {
            self.stall("generations", key);
            self.inner.generations(key)
        }
        fn read(&self, key: &Key, generation: u64) -> Result<Option<Vec<u8>>, BackendError> {
            self.inner.read(key, generation)
        }
        fn remove(&self, key: &Key, generation: u64) -> Result<(), BackendError> {
            self.inner.remove(key, generation)
        }
        fn keys(&self) -> Result<Vec<Key>, BackendError> {
            self.inner.keys()
        }
        fn locator(&self) -> String {
            "stalls".into()
        }
    }

    /// A renewal of a file's two keys that stalled, all told, for a ttl (though
    /// neither key's own renewal was late) is given back and reported expired at
    /// the lease's end before it: a time behind the clock. It reported the end of
    /// the record it gave back, a ttl ahead ("expired -6.0s ago" in the CLI).
    #[test]
    fn a_renewal_stalled_for_a_ttl_reports_an_end_already_past() {
        let (_dir, a, _b) = linked();
        let clock = fencepost::ManualClock::new(1_000_000);
        let backend = Arc::new(Stalls {
            inner: TinyStore::default(),
            clock: clock.clone(),
            plan: Mutex::new(Default::default()),
        });
        let store = Store::from_parts(backend.clone(), Arc::new(clock.clone()));
        let options = AcquireOptions::new(10_000).owner("stalled");
        let mut lease = store.acquire(&Resource::file(&a), &options).unwrap();
        assert_eq!(lease.keys().count(), 2);
        // The file id's renewal lands 6 s in (of its 10 s), the path key's 3 s
        // later (of its 4 s left), and its confirming listing 1.5 s after that:
        // 10.5 s since the renewal began.
        *backend.plan.lock().unwrap() = [
            ("create", "inode-", 6_000),
            ("create", "file-", 3_000),
            ("generations", "file-", 1_500),
        ]
        .into();
        match store.renew(&mut lease) {
            Err(fencepost::Error::Expired { expired_at_ms, .. }) => assert!(
                expired_at_ms <= fencepost::Clock::wall_ms(&clock),
                "reported expired at {expired_at_ms}, ahead of the clock at {}",
                fencepost::Clock::wall_ms(&clock)
            ),
            other => panic!("a renewal stalled for a ttl returned {other:?}"),
        }
        assert!(
            backend.plan.lock().unwrap().is_empty(),
            "every stall happened"
        );
    }

    #[test]
    fn check_renew_and_release_cover_every_key() {
        let (_dir, a, b) = linked();
        let store = store();
        let mut lease = store.acquire(&Resource::file(&a), &options()).unwrap();
        let token = lease.token();
        assert!(store.check(&Resource::file(&a), token).unwrap());
        store.renew(&mut lease).unwrap();
        assert_eq!(
            lease.token(),
            token,
            "renewal keeps the token (docs/protocol.md I5)"
        );
        let mut by_handle = store.resume(&Resource::file(&a), &lease.handle()).unwrap();
        assert_eq!(
            by_handle.keys().count(),
            2,
            "a resumed lease holds the file id too"
        );
        store.renew(&mut by_handle).unwrap();
        assert!(!acquired(&store, &Resource::file(&b)));
        store.release(&lease).unwrap();
        assert!(live_keys(&store).is_empty(), "release released every key");
        assert!(acquired(&store, &Resource::file(&b)));
    }

    #[test]
    fn release_by_token_releases_the_file_id_too() {
        let (_dir, a, b) = linked();
        let store = store();
        let lease = store.acquire(&Resource::file(&a), &options()).unwrap();
        let resumed = store.resume(&Resource::file(&a), &lease.handle()).unwrap();
        store.release(&resumed).unwrap();
        assert!(acquired(&store, &Resource::file(&b)));
    }

    #[test]
    fn a_link_made_after_a_claim_on_a_missing_file_is_refused() {
        // `new.txt` is claimed before it exists, so its tenure holds no file-id key;
        // once the file and a second link exist, the file id is free. A claim
        // through the link looks for the file's other names and finds new.txt held
        // (it got in before, writing around the live tenure).
        let dir = tempfile::tempdir().unwrap();
        let new = dir.path().join("new.txt");
        let link = dir.path().join("link.txt");
        let store = store();
        let first = store.acquire(&Resource::file(&new), &options()).unwrap();
        std::fs::write(&new, b"n").unwrap();
        assert!(store.check(&Resource::file(&new), first.token()).unwrap());
        // Another spelling of the same path still contends through the path key.
        assert!(!acquired(
            &store,
            &Resource::file(dir.path().join("./new.txt"))
        ));
        std::fs::hard_link(&new, &link).unwrap();
        match store
            .try_acquire(&Resource::file(&link), &options())
            .unwrap()
        {
            TryAcquire::Held(holder) => {
                assert_eq!(holder.token, first.token());
                let name = Resource::file(&new).identity().unwrap().label;
                assert_eq!(
                    holder.in_the_way.as_deref(),
                    Some(&Resource::File(PathBuf::from(name)))
                );
            }
            TryAcquire::Acquired(lease) => panic!("got {lease:?} through the link"),
        }
        assert!(store.check(&Resource::file(&new), first.token()).unwrap());
        // Released, the other name is free to claim through the link.
        store.release(&first).unwrap();
        assert!(acquired(&store, &Resource::file(&link)));
    }

    #[test]
    fn a_file_linked_before_it_took_a_claimed_name_fences_that_claim() {
        // What no look can see: the file took the claimed name only after the
        // claim through its other link (a temporary file, hard-linked and claimed,
        // then renamed over the claimed name). The fence decides: the first
        // tenure's token stops passing check, and its resume is refused.
        let dir = tempfile::tempdir().unwrap();
        let new = dir.path().join("new.txt");
        let tmp = dir.path().join("new.txt.tmp");
        let link = dir.path().join("link.txt");
        let store = store();
        let first = store.acquire(&Resource::file(&new), &options()).unwrap();
        std::fs::write(&tmp, b"n").unwrap();
        std::fs::hard_link(&tmp, &link).unwrap();
        let second = store.acquire(&Resource::file(&link), &options()).unwrap();
        std::fs::rename(&tmp, &new).unwrap();
        assert!(store.check(&Resource::file(&link), second.token()).unwrap());
        assert!(
            !store.check(&Resource::file(&new), first.token()).unwrap(),
            "the first tenure must be fenced once a rival holds the file id"
        );
        assert!(matches!(
            store.resume(&Resource::file(&new), &first.handle()),
            Err(fencepost::Error::Superseded { .. })
        ));
    }

    #[test]
    fn a_file_deleted_and_recreated_keeps_its_path_key() {
        // A new inode means a new file-id key; the path key still contends, and the
        // first tenure's check still passes (nobody holds the new file id).
        let (_dir, a, _b) = linked();
        let store = store();
        let lease = store.acquire(&Resource::file(&a), &options()).unwrap();
        std::fs::remove_file(&a).unwrap();
        std::fs::write(&a, b"again").unwrap();
        assert!(store.check(&Resource::file(&a), lease.token()).unwrap());
        assert!(!acquired(&store, &Resource::file(&a)));
        store.release(&lease).unwrap();
        assert!(acquired(&store, &Resource::file(&a)));
    }
}
