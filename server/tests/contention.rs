//! Two and three server processes over one store: exclusion, token stability,
//! zombies, and what a clean exit leaves behind.

use std::time::Duration;

use serde_json::json;

use crate::support::{Raw, Server, Tree, file, lock};

/// docs/protocol.md §8: two server processes over one store contend through the backend alone.
/// First claim wins; the second is refused and told who holds it; the second sees
/// the first's token through `assert` and cannot release it; after release the
/// second claim gets a strictly higher token.
#[tokio::test]
async fn two_servers_over_one_store_exclude_each_other() {
    let tree = Tree::new();
    let a = Server::start(&tree, "agent-a").await;
    let b = Server::start(&tree, "agent-b").await;

    let first = a.claim_lock("db:migrations", 60_000).await;
    let refused = b
        .call(
            "claim",
            json!({"resource": lock("DB:Migrations "), "ttl_ms": 60_000}),
        )
        .await
        .expect_err("the second claim must be refused");
    assert!(refused.starts_with("held:"), "{refused}");
    assert!(
        refused.contains("agent-a"),
        "the holder is not named: {refused}"
    );
    assert!(refused.contains(&format!("token {first}")), "{refused}");
    assert!(refused.contains(&format!("pid {}", a.pid())), "{refused}");

    assert!(b.authorized(lock("db:migrations"), first).await);
    let not_yours = b
        .call(
            "release",
            json!({"resource": lock("db:migrations"), "token": first}),
        )
        .await
        .expect_err("B must not release A's lease");
    assert!(
        not_yours.starts_with("not the holder:")
            && not_yours.contains("is not a lease this server holds")
            && not_yours.contains("A token is public")
            && !not_yours.contains("release it"),
        "{not_yours}"
    );
    assert!(
        a.authorized(lock("db:migrations"), first).await,
        "B's refused release changed something"
    );

    let released = a
        .call(
            "release",
            json!({"resource": lock("db:migrations"), "token": first}),
        )
        .await
        .unwrap();
    assert_eq!(released["released"], true);
    assert!(!b.authorized(lock("db:migrations"), first).await);

    let second = b.claim_lock("db:migrations", 60_000).await;
    assert!(second > first, "token {second} after {first}");

    // The same holds for a file resource spelt two ways.
    let token = a
        .call("claim", json!({"resource": file("sub/a.rs")}))
        .await
        .unwrap()["token"]
        .as_u64()
        .unwrap();
    let refused = b
        .call("claim", json!({"resource": file("./sub/../sub/a.rs")}))
        .await
        .expect_err("one file, two spellings, one lease");
    assert!(refused.contains("agent-a"), "{refused}");
    assert!(b.authorized(file("sub/./a.rs"), token).await);

    // status shows both claims, and who holds them.
    let status = b.call("status", json!({})).await.unwrap();
    let claims = status["claims"].as_array().unwrap();
    assert_eq!(claims.len(), 2, "{status}");
    let db = claims.iter().find(|c| c["kind"] == "lock").unwrap();
    assert_eq!(db["owner"], "agent-b");
    assert_eq!(db["token"], second);
    assert_eq!(db["live"], true);
    assert_eq!(db["held_by_this_server"], true);
    let a_rs = claims.iter().find(|c| c["kind"] == "file").unwrap();
    assert_eq!(a_rs["owner"], "agent-a");
    assert_eq!(a_rs["held_by_this_server"], false);
    assert!(a_rs["label"].as_str().unwrap().ends_with("a.rs"), "{a_rs}");
}

/// docs/protocol.md I5 through the server: the token from `claim` passes `assert` and `write`
/// after several automatic renewals (ttl 1500 ms, renewed every 500 ms, 4 s).
#[tokio::test]
async fn token_stays_valid_across_automatic_renewals() {
    let tree = Tree::new();
    let server = Server::start(&tree, "steady").await;
    let token = server
        .call(
            "claim",
            json!({"resource": file("notes.md"), "ttl_ms": 1500}),
        )
        .await
        .unwrap()["token"]
        .as_u64()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await;

    assert!(server.authorized(file("notes.md"), token).await);
    let written = server
        .call(
            "write",
            json!({"resource": file("notes.md"), "token": token, "path": "notes.md", "content": "still mine\n"}),
        )
        .await
        .unwrap();
    assert_eq!(
        written,
        json!({"written": true, "bytes": 11, "path": "notes.md"})
    );
    assert_eq!(
        std::fs::read_to_string(tree.root.join("notes.md")).unwrap(),
        "still mine\n"
    );

    let renewed = server
        .call(
            "renew",
            json!({"resource": file("notes.md"), "token": token}),
        )
        .await
        .unwrap();
    assert_eq!(renewed["token"], token);
    // An explicit renew does not disturb the server's own keepalive.
    tokio::time::sleep(Duration::from_millis(1600)).await;
    assert!(server.authorized(file("notes.md"), token).await);
}

/// docs/protocol.md §1, the reason fencepost exists: a holder that was judged dead and written
/// around cannot land a write. Server A is SIGKILLed while holding; B claims once
/// the ttl ran out; a write through a fresh server with A's token is refused and
/// the file keeps B's content.
#[cfg(unix)]
#[tokio::test]
async fn a_killed_holders_token_cannot_write_after_takeover() {
    let tree = Tree::new();
    let a = Server::start(&tree, "zombie").await;
    let old = a
        .call(
            "claim",
            json!({"resource": file("data.txt"), "ttl_ms": 1000}),
        )
        .await
        .unwrap()["token"]
        .as_u64()
        .unwrap();
    a.call(
        "write",
        json!({"resource": file("data.txt"), "token": old, "path": "data.txt", "content": "A"}),
    )
    .await
    .unwrap();
    a.kill9();

    let b = Server::start(&tree, "successor").await;
    let started = std::time::Instant::now();
    let new = b
        .call(
            "claim",
            json!({"resource": file("data.txt"), "ttl_ms": 60_000, "wait_ms": 10_000}),
        )
        .await
        .expect("B takes over once A's ttl ran out")["token"]
        .as_u64()
        .unwrap();
    assert!(new > old);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "B waited {:?}",
        started.elapsed()
    );
    b.call(
        "write",
        json!({"resource": file("data.txt"), "token": new, "path": "data.txt", "content": "B"}),
    )
    .await
    .unwrap();

    let fresh = Server::start(&tree, "zombie-woke-up").await;
    let refused = fresh
        .call(
            "write",
            json!({"resource": file("data.txt"), "token": old, "path": "data.txt", "content": "stale A"}),
        )
        .await
        .expect_err("the zombie's token must not write");
    assert!(refused.starts_with("not authorized"), "{refused}");
    assert_eq!(
        std::fs::read_to_string(tree.root.join("data.txt")).unwrap(),
        "B"
    );
    assert!(!fresh.authorized(file("data.txt"), old).await);
    assert!(fresh.authorized(file("data.txt"), new).await);
}

/// A server whose client disconnects releases what it held (no waiting for the
/// ttl), and nothing it printed on the way out broke the protocol.
#[tokio::test]
async fn a_disconnected_server_releases_its_leases() {
    let tree = Tree::new();
    let a = Server::start(&tree, "leaving").await;
    let first = a.claim_lock("port:8080", 600_000).await;
    a.disconnect().await;

    let b = Server::start(&tree, "next").await;
    let mut second = None;
    // The server exits right after stdin closes; allow it a moment.
    for _ in 0..50 {
        match b
            .call("claim", json!({"resource": lock("port:8080")}))
            .await
        {
            Ok(result) => {
                second = result["token"].as_u64();
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    let second = second.expect("the lease of a disconnected server was not released");
    assert!(second > first);
}

/// A claim with no wait, sent while another claim of the same resource by this
/// server waits for its holder, is answered at once (within the turn's grace), not
/// when the first one gives up: it was answered only after the first claim's whole
/// `wait_ms` (a breaker). Judged by the order of the answers, not by a clock.
#[test]
fn a_claim_without_a_wait_is_not_queued_behind_a_waiting_one() {
    let tree = Tree::new();
    let store = fencepost::Store::new(fencepost_fs::FsStore::open(&tree.store).unwrap());
    let _held = store
        .acquire(
            &fencepost::Resource::lock("ser"),
            &fencepost::AcquireOptions::new(60_000).owner("cli-holder"),
        )
        .unwrap();
    let mut raw = Raw::start(&tree);
    raw.initialize();
    let claim = |id: u64, wait_ms: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "claim",
            "arguments": {"resource": lock("ser"), "ttl_ms": 60_000, "wait_ms": wait_ms}}})
    };
    raw.send(claim(200, 8_000));
    std::thread::sleep(Duration::from_millis(200));
    raw.send(claim(201, 0));
    let first = raw.next().expect("an answer");
    assert_eq!(first["id"], 201, "the claim with no wait waited: {first}");
    let text = first["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        first["result"]["isError"] == true
            && text.starts_with("held:")
            && text.contains("cli-holder"),
        "{first}"
    );
}

/// A tree whose lock `name` a library holder (`cli-holder`, ttl 60 s) holds, the
/// store and lease it holds it with, and a raw server on the tree, initialized.
fn server_beside_a_holder(name: &str) -> (Tree, fencepost::Store, fencepost::Lease, Raw) {
    let tree = Tree::new();
    let store = fencepost::Store::new(fencepost_fs::FsStore::open(&tree.store).unwrap());
    let held = store
        .acquire(
            &fencepost::Resource::lock(name),
            &fencepost::AcquireOptions::new(60_000).owner("cli-holder"),
        )
        .unwrap();
    let mut raw = Raw::start(&tree);
    raw.initialize();
    (tree, store, held, raw)
}

/// A waiting claim the client cancels stops waiting: when the holder then lets go,
/// another claimant gets the lock, not the cancelled claim (it kept waiting for its
/// whole `wait_ms` and took the lock as soon as it was free, nobody to learn its
/// token: a breaker).
#[test]
fn a_cancelled_claim_stops_waiting() {
    let (_tree, store, held, mut raw) = server_beside_a_holder("cx");
    let cx = fencepost::Resource::lock("cx");
    raw.send(
        json!({"jsonrpc": "2.0", "id": 100, "method": "tools/call", "params": {"name": "claim",
        "arguments": {"resource": lock("cx"), "ttl_ms": 60_000, "wait_ms": 60_000}}}),
    );
    std::thread::sleep(Duration::from_millis(300));
    raw.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 100, "reason": "the user gave up"}}),
    );
    // A status call answered proves the cancel was read; then time for the waiting
    // claim to see it (it looks at least every 100 ms).
    raw.send(json!({"jsonrpc": "2.0", "id": 101, "method": "tools/call",
        "params": {"name": "status", "arguments": {}}}));
    let _ = raw.next().expect("status answered");
    std::thread::sleep(Duration::from_millis(1_000));
    store.release(&held).unwrap();
    // With no wait: a claim still waiting would be named by the release as the
    // next in line, and the lock kept for its turn.
    let other = store
        .acquire(&cx, &fencepost::AcquireOptions::new(60_000).owner("other"))
        .expect("the cancelled claim is still waiting for the lock");
    assert_eq!(other.owner(), "other");
}

/// A batch whose waiting claim is cancelled is answered without it: no response
/// to a cancelled request comes, and the batch stops waiting for one (else the
/// batch's other answers would never be sent).
#[test]
fn a_batch_with_a_cancelled_claim_is_answered() {
    let (_tree, _store, _held, mut raw) = server_beside_a_holder("bx");
    raw.send(json!([
        {"jsonrpc": "2.0", "id": 200, "method": "tools/call", "params": {"name": "claim",
            "arguments": {"resource": lock("bx"), "ttl_ms": 60_000, "wait_ms": 60_000}}},
        {"jsonrpc": "2.0", "id": 201, "method": "ping"}
    ]));
    std::thread::sleep(Duration::from_millis(300));
    raw.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 200, "reason": "the user gave up"}}),
    );
    let reply = raw
        .next()
        .expect("the batch answered once its claim was cancelled");
    let answers = reply
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {reply}"));
    assert!(answers.iter().any(|a| a["id"] == 201), "{reply}");
    // Answered once: the next reply is the next request's.
    raw.send(json!({"jsonrpc": "2.0", "id": 202, "method": "ping"}));
    let pong = raw.next().expect("still serving");
    assert_eq!(pong["id"], 202, "{pong}");
}

/// A request reusing the id of one still in flight is refused, not forwarded: rmcp
/// took the second for the first and the waiting claim's answer never came (a
/// breaker). Once the first is answered, or cancelled, its id is free again.
#[test]
fn a_request_reusing_an_id_in_flight_is_refused() {
    let (_tree, _store, _held, mut raw) = server_beside_a_holder("dx");
    raw.send(
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "claim",
        "arguments": {"resource": lock("dx"), "ttl_ms": 60_000, "wait_ms": 60_000}}}),
    );
    std::thread::sleep(Duration::from_millis(200));
    raw.send(json!({"jsonrpc": "2.0", "id": 5, "method": "ping"}));
    let refused = raw.next().expect("the reused id answered");
    assert!(refused["id"].is_null(), "{refused}");
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("still unanswered")),
        "{refused}"
    );
    raw.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 5, "reason": "gave up"}}),
    );
    raw.send(json!({"jsonrpc": "2.0", "id": 5, "method": "ping"}));
    let pong = loop {
        let reply = raw.next().expect("the freed id answered");
        // The cancelled claim may still be answered (with an error) first.
        if reply
            .get("result")
            .is_some_and(|r| r.as_object().is_some_and(|o| o.is_empty()))
        {
            break reply;
        }
    };
    assert_eq!(pong["id"], 5, "{pong}");
}

/// A claim of what the server's session already holds through another process (an
/// agent's hook, a CLI `claim --session`) re-enters that lease; cancelled by the
/// client, it leaves the lease held. It released it, under the other process (a
/// breaker: the hook's next edit was refused, "claim ended").
#[test]
fn a_cancelled_claim_leaves_a_reentered_lease_held() {
    let tree = Tree::new();
    let store = fencepost::Store::new(fencepost_fs::FsStore::open(&tree.store).unwrap());
    let lock_l = fencepost::Resource::lock("L4c");
    let held = store
        .acquire(
            &lock_l,
            &fencepost::AcquireOptions::new(60_000)
                .owner("cli")
                .session("srvS"),
        )
        .unwrap();
    let mut raw = Raw::start_with_session(&tree, "srvS");
    raw.initialize();
    raw.send(
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "claim",
        "arguments": {"resource": lock("L4c"), "ttl_ms": 60_000, "wait_ms": 0}}}),
    );
    raw.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 5}}),
    );
    raw.send(json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call",
        "params": {"name": "status", "arguments": {}}}));
    while raw.next().expect("an answer")["id"] != 6 {}
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        store.check(&lock_l, held.token()).unwrap(),
        "the cancelled claim released the session's lease"
    );
}

/// A claim queued behind another claim of the same resource by this server counts
/// that wait in its own `wait_ms`: it answered after its turn came *and* a whole
/// `wait_ms` more, about twice its wait (a breaker: 7.0 s for 4000 ms). The bound is
/// the behaviour, with a second and a half of slack.
#[test]
fn a_claim_queued_behind_another_waits_at_most_its_own_wait() {
    let tree = Tree::new();
    let store = fencepost::Store::new(fencepost_fs::FsStore::open(&tree.store).unwrap());
    let _held = store
        .acquire(
            &fencepost::Resource::lock("W"),
            &fencepost::AcquireOptions::new(60_000).owner("X"),
        )
        .unwrap();
    let mut raw = Raw::start(&tree);
    raw.initialize();
    let claim = |id: u64, wait_ms: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "claim",
            "arguments": {"resource": lock("W"), "ttl_ms": 60_000, "wait_ms": wait_ms}}})
    };
    raw.send(claim(1, 3_000));
    std::thread::sleep(Duration::from_millis(1_000));
    let sent = std::time::Instant::now();
    raw.send(claim(2, 3_000));
    loop {
        let answer = raw.next().expect("an answer");
        if answer["id"] == 2 {
            break;
        }
    }
    let took = sent.elapsed();
    assert!(
        took < Duration::from_millis(4_500),
        "answered after {took:?} for a wait of 3000 ms"
    );
}
