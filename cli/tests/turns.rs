//! Turns (docs/design-07-performance.md, "Who is woken: turns"), with real processes
//! and real signals: waiters asleep on the key's change notification queue in
//! arrival order, a release names the oldest in its tombstone, and a named waiter
//! that is stopped is passed over once its turn lapses, then still gets the lock.
//! Linux only: the queue exists where waiters sleep on inotify.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

use crate::util::{Background, Scratch, send_signal, token_of_handle, wait_until};

/// The tickets of the store's only wait queue: (generation, holder id), oldest first.
fn tickets(store: &Path) -> Vec<(u64, String)> {
    let Some(queue) = queue_dir(store) else {
        return Vec::new();
    };
    let mut found: Vec<(u64, String)> = std::fs::read_dir(queue)
        .map(|entries| entries.filter_map(Result::ok).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|entry| {
            let record: Value = serde_json::from_slice(&std::fs::read(entry.path()).ok()?).ok()?;
            Some((
                record["generation"].as_u64()?,
                record["holder"].as_str()?.to_string(),
            ))
        })
        .collect();
    found.sort();
    found
}

fn queue_dir(store: &Path) -> Option<PathBuf> {
    std::fs::read_dir(store.join("claims"))
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("queue-"))
        })
}

/// The newest record of the store's only lock series, parsed.
fn newest_record(store: &Path) -> Value {
    let dir = std::fs::read_dir(store.join("claims"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("lock-"))
        })
        .expect("no lock series");
    let newest = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .max()
        .expect("an empty series");
    serde_json::from_slice(&std::fs::read(newest).unwrap()).unwrap()
}

/// `claim --lock LOCK --wait 60000` in the background, its handle read from stdout
/// once it holds.
fn waiter(s: &Scratch, lock: &str) -> Background {
    let mut claim = s.spawn_cmd();
    claim
        .args(["claim", "--lock", lock, "--wait", "60000", "--ttl", "60000"])
        .stdout(Stdio::piped());
    Background::spawn(&mut claim)
}

fn handle_of(waiter: &mut Background) -> String {
    let mut line = String::new();
    BufReader::new(waiter.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    line.trim().to_string()
}

fn release(s: &Scratch, lock: &str, handle: &str) {
    s.cmd()
        .args(["release", "--lock", lock, handle])
        .assert()
        .success();
}

#[test]
fn a_release_names_the_oldest_waiter_and_a_stopped_one_is_passed_over() {
    let s = Scratch::new();
    let (_, holder) = s.claim_handle("q", &["--ttl", "60000"]);
    let limit = Duration::from_secs(20);

    // Two waiters queue in arrival order; both are stopped before the release, so
    // nobody can claim over its tombstone while the test reads it.
    let mut first = waiter(&s, "q");
    wait_until("the first waiter queued", limit, || {
        tickets(s.store()).len() == 1
    });
    send_signal(first.id(), "STOP");
    let mut second = waiter(&s, "q");
    wait_until("the second waiter queued", limit, || {
        tickets(s.store()).len() == 2
    });
    send_signal(second.id(), "STOP");
    let queued = tickets(s.store());
    let (first_ticket, first_holder) = queued[0].clone();

    release(&s, "q", &holder);
    let tombstone = newest_record(s.store());
    assert_eq!(tombstone["released"], true, "{tombstone}");
    assert_eq!(
        tombstone["next"]["holder"], first_holder,
        "the release did not name the oldest waiter: {tombstone}, queue {queued:?}"
    );
    assert_eq!(tombstone["next"]["ticket"], first_ticket, "{tombstone}");

    // The second waiter resumes: the first, still stopped, never claims, so its
    // turn lapses and the second takes the lock, removing the first's ticket.
    send_signal(second.id(), "CONT");
    let second_handle = handle_of(&mut second);
    assert!(
        token_of_handle(&second_handle) > token_of_handle(&holder),
        "{second_handle}"
    );
    assert!(
        tickets(s.store()).iter().all(|(_, h)| *h != first_holder),
        "the waiter passed over still has its ticket: {:?}",
        tickets(s.store())
    );

    // The first resumes and still gets the lock once the second releases it.
    send_signal(first.id(), "CONT");
    release(&s, "q", &second_handle);
    let first_handle = handle_of(&mut first);
    assert!(
        token_of_handle(&first_handle) > token_of_handle(&second_handle),
        "{first_handle}"
    );
    assert!(first.0.wait().unwrap().success());
    release(&s, "q", &first_handle);
    // Every waiter that left took (or had) its ticket out: the queue is empty.
    assert_eq!(tickets(s.store()), Vec::new());
}

/// A waiter leaves the queue as it gets the lock, not at its release: a ticket kept
/// while its waiter holds could be named by the next holder's release (should that
/// come before this holder's own release had removed it), a turn for nobody that
/// every claimant waits out. Found timing the contention bench on a store with
/// flush off: every handoff between two processes waited out a lapsed turn.
#[test]
fn a_waiter_leaves_the_queue_as_it_gets_the_lock() {
    let s = Scratch::new();
    let (_, holder) = s.claim_handle("q", &["--ttl", "60000"]);
    let limit = Duration::from_secs(20);
    let mut next = waiter(&s, "q");
    wait_until("the waiter queued", limit, || tickets(s.store()).len() == 1);
    let (_, next_holder) = tickets(s.store())[0].clone();

    release(&s, "q", &holder);
    let next_handle = handle_of(&mut next);
    assert!(next.0.wait().unwrap().success());
    // It holds now (its `claim` returned and exited): no ticket of its is left.
    assert_eq!(
        tickets(s.store()),
        Vec::new(),
        "the new holder {next_holder} still has a ticket in the queue"
    );
    release(&s, "q", &next_handle);
    assert_eq!(tickets(s.store()), Vec::new());
}

/// A release passes over a waiter whose process has ended (its ticket left behind,
/// as a SIGKILL leaves it) and names the live one behind it. Found by the breaker:
/// where tickets cannot be removed (a queue directory that refuses removals), every
/// release named the same dead waiter, and every handoff waited out its turn.
#[test]
fn a_release_passes_over_a_waiter_whose_process_ended() {
    let s = Scratch::new();
    let (_, holder) = s.claim_handle("d", &["--ttl", "60000"]);
    let limit = Duration::from_secs(20);
    let mut dead = waiter(&s, "d");
    wait_until("a waiter queued", limit, || tickets(s.store()).len() == 1);
    dead.kill_and_reap();
    let mut live = waiter(&s, "d");
    wait_until("the live waiter queued", limit, || {
        tickets(s.store()).len() == 2
    });
    // Stopped, so nobody claims over the tombstone while the test reads it.
    send_signal(live.id(), "STOP");
    let (_, live_holder) = tickets(s.store())[1].clone();

    release(&s, "d", &holder);
    let tombstone = newest_record(s.store());
    assert_eq!(tombstone["released"], true, "{tombstone}");
    assert_eq!(
        tombstone["next"]["holder"], live_holder,
        "the release did not pass over the dead waiter: {tombstone}"
    );
    send_signal(live.id(), "CONT");
    let live_handle = handle_of(&mut live);
    release(&s, "d", &live_handle);
    // The dead waiter's ticket went with the release that passed it over.
    assert_eq!(tickets(s.store()), Vec::new());
}

/// Found by the breaker: waiters SIGKILLed while queued left their tickets, and each
/// cost every later handoff a lapsed turn; a foreign file in the queue was read whole
/// by every release. One release now clears the dead tickets and the foreign file.
#[test]
fn dead_waiters_and_foreign_files_leave_the_queue_at_the_next_release() {
    let s = Scratch::new();
    let (_, holder) = s.claim_handle("k", &["--ttl", "60000"]);
    let limit = Duration::from_secs(20);

    // The oldest place in the queue holds a foreign file, larger than any ticket
    // (a waiter's ticket replaced by hand); then two waiters queue and are killed:
    // their tickets stay, their processes are gone.
    let mut first = waiter(&s, "k");
    wait_until("a waiter queued", limit, || tickets(s.store()).len() == 1);
    let (first_ticket, _) = tickets(s.store())[0].clone();
    first.kill_and_reap();
    let foreign = queue_dir(s.store())
        .unwrap()
        .join(format!("g{first_ticket:08}.json"));
    std::fs::remove_file(&foreign).unwrap();
    std::fs::write(&foreign, vec![b'x'; 1 << 20]).unwrap();
    for queued in 1..=2 {
        let mut dead = waiter(&s, "k");
        wait_until("a waiter queued", limit, || {
            tickets(s.store()).len() == queued
        });
        dead.kill_and_reap();
    }
    let dead: Vec<String> = tickets(s.store()).into_iter().map(|(_, h)| h).collect();
    // A live waiter queues behind them.
    let mut live = waiter(&s, "k");
    wait_until("the live waiter queued", limit, || {
        tickets(s.store()).len() == 3
    });

    // The release reads the foreign file first and removes it (it does not decode),
    // passes over the dead waiters' tickets (their processes ended) and names the
    // live waiter, removing the foreign file and the dead tickets after its
    // tombstone.
    release(&s, "k", &holder);
    assert!(
        !foreign.exists(),
        "the release left the foreign file in the queue"
    );
    let live_handle = handle_of(&mut live);
    let left: Vec<String> = tickets(s.store()).into_iter().map(|(_, h)| h).collect();
    assert!(
        dead.iter().all(|d| !left.contains(d)),
        "dead waiters' tickets survived the lapse: {left:?} (dead: {dead:?})"
    );
    // The new holder left the queue as it got the lock: nothing stays.
    assert_eq!(left, Vec::<String>::new(), "tickets left in the queue");
    release(&s, "k", &live_handle);
    assert_eq!(tickets(s.store()), Vec::new());
}
