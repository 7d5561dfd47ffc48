//! A killed server's leases are a dead holder's: a server on the same host takes
//! them over at once (no waiting out a 60 s ttl), with a higher token, and the dead
//! token no longer passes (issue 16; docs/protocol.md §3.4.1). Linux only: other
//! platforms give no liveness evidence yet.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::{Server, Tree, lock};

#[tokio::test]
async fn a_killed_servers_lease_is_taken_over_at_once_on_its_host() {
    let tree = Tree::new();
    let a = Server::start(&tree, "doomed").await;
    let dead = a.claim_lock("db:migrations", 60_000).await;
    a.kill9();
    let b = Server::start(&tree, "successor").await;
    let started = Instant::now();
    let token = b
        .call(
            "claim",
            json!({"resource": lock("db:migrations"), "ttl_ms": 60_000, "wait_ms": 10_000}),
        )
        .await
        .expect("the dead server's lease is taken over")["token"]
        .as_u64()
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "waited {:?} for a dead server",
        started.elapsed()
    );
    assert!(token > dead);
    assert!(!b.authorized(lock("db:migrations"), dead).await);
    assert!(b.authorized(lock("db:migrations"), token).await);
}
