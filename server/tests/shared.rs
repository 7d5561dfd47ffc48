//! Shared claims through real server processes (docs/design-05-subtrees-and-shared.md
//! §4): two servers share a file; `write` refuses a shared lease; an exclusive
//! claim waits for every shared holder; `status` lists the shared holders.

use serde_json::json;

use crate::support::{Server, Tree, file, lock};

#[tokio::test]
async fn a_shared_lease_reads_never_writes_and_excludes_writers() {
    let tree = Tree::new();
    std::fs::write(tree.root.join("notes.md"), "original").unwrap();
    let a = Server::start(&tree, "agent-a").await;
    let b = Server::start(&tree, "agent-b").await;
    let c = Server::start(&tree, "agent-c").await;
    let shared = json!({"resource": file("notes.md"), "ttl_ms": 600_000, "shared": true});
    let claimed = a.call("claim", shared.clone()).await.unwrap();
    assert_eq!(claimed["shared"], true, "{claimed}");
    // Claimed by this server alone: no session, not an empty one.
    assert!(claimed.get("session").is_none(), "{claimed}");
    let token = claimed["token"].as_u64().unwrap();
    let second = b.call("claim", shared.clone()).await.unwrap();
    assert_eq!(second["shared"], true, "a second shared holder: {second}");
    // A shared lease never writes.
    let refused = a
        .call(
            "write",
            json!({"resource": file("notes.md"), "token": token, "path": "notes.md", "content": "A"}),
        )
        .await
        .unwrap_err();
    assert!(
        refused.contains("is shared, which authorizes reading only"),
        "{refused}"
    );
    assert_eq!(
        std::fs::read_to_string(tree.root.join("notes.md")).unwrap(),
        "original"
    );
    let asserted = a
        .call(
            "assert",
            json!({"resource": file("notes.md"), "token": token}),
        )
        .await
        .unwrap();
    assert_eq!(asserted["authorized"], false, "{asserted}");
    assert!(
        asserted["reason"]
            .as_str()
            .unwrap()
            .contains("shared lease"),
        "{asserted}"
    );
    // An exclusive claim is held by the shared holders.
    let held = c
        .call(
            "claim",
            json!({"resource": file("notes.md"), "ttl_ms": 60_000}),
        )
        .await
        .unwrap_err();
    assert!(held.contains("(shared)"), "{held}");
    // status: one row for the file, listing both shared holders.
    let status = c.call("status", json!({})).await.unwrap();
    let rows: Vec<_> = status["claims"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| {
            e["resource"]
                .as_str()
                .is_some_and(|r| r.ends_with("notes.md"))
        })
        .collect();
    assert_eq!(rows.len(), 1, "{status}");
    assert_eq!(
        rows[0]["shared"].as_array().map(Vec::len),
        Some(2),
        "{status}"
    );
    // Once both released, the exclusive claim gets it and writes.
    for (server, lease) in [(&a, &claimed), (&b, &second)] {
        server
            .call(
                "release",
                json!({"resource": file("notes.md"), "token": lease["token"]}),
            )
            .await
            .unwrap();
    }
    let exclusive = c
        .call(
            "claim",
            json!({"resource": file("notes.md"), "ttl_ms": 60_000}),
        )
        .await
        .unwrap();
    let token = exclusive["token"].as_u64().unwrap();
    c.call(
        "write",
        json!({"resource": file("notes.md"), "token": token, "path": "notes.md", "content": "C"}),
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(tree.root.join("notes.md")).unwrap(),
        "C"
    );
}

/// A subtree claim over a file this very server holds shared is refused by its
/// own lease, and told so: release the shared lease first (waiting cannot help, as
/// the server renews it), never a break (a new user was told to wait or to ask
/// for a break of the server's own lease).
#[tokio::test]
async fn a_claim_blocked_by_the_servers_own_shared_lease_says_so() {
    let tree = Tree::new();
    std::fs::create_dir_all(tree.root.join("docs")).unwrap();
    std::fs::write(tree.root.join("docs/api.md"), "api").unwrap();
    let a = Server::start(&tree, "agent-a").await;
    let shared = a
        .call(
            "claim",
            json!({"resource": file("docs/api.md"), "ttl_ms": 600_000, "shared": true}),
        )
        .await
        .unwrap();
    let token = shared["token"].as_u64().unwrap();
    let refused = a
        .call(
            "claim",
            json!({"resource": {"kind": "dir", "target": "docs"}, "ttl_ms": 60_000}),
        )
        .await
        .unwrap_err();
    assert!(
        refused.contains("this server's own shared lease on")
            && refused.contains(&format!("(token {token})"))
            && refused.contains("release that shared lease first"),
        "{refused}"
    );
    assert!(!refused.contains("break"), "{refused}");
    a.call(
        "release",
        json!({"resource": file("docs/api.md"), "token": token}),
    )
    .await
    .unwrap();
    a.call(
        "claim",
        json!({"resource": {"kind": "dir", "target": "docs"}, "ttl_ms": 60_000}),
    )
    .await
    .unwrap();
}

/// `status` with `held_only` lists only what is held now and counts the rest in
/// `not_held`; without it, every row and no `not_held` (a new user: the list grows
/// with every resource ever claimed).
#[tokio::test]
async fn status_held_only_lists_what_is_held_and_counts_the_rest() {
    let tree = Tree::new();
    let a = Server::start(&tree, "agent-a").await;
    a.call("claim", json!({"resource": lock("kept")}))
        .await
        .unwrap();
    let done = a
        .call("claim", json!({"resource": lock("done")}))
        .await
        .unwrap();
    a.call(
        "release",
        json!({"resource": lock("done"), "token": done["token"]}),
    )
    .await
    .unwrap();
    let held = a.call("status", json!({"held_only": true})).await.unwrap();
    let labels: Vec<_> = held["claims"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|row| row["resource"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(labels, ["lock:kept"], "{held}");
    assert_eq!(held["not_held"], 1, "{held}");
    let all = a.call("status", json!({})).await.unwrap();
    assert_eq!(all["claims"].as_array().map(Vec::len), Some(2), "{all}");
    assert!(all.get("not_held").is_none(), "{all}");
    // `null` is as good as leaving it out (a breaker's client was refused).
    let null = a.call("status", json!({"held_only": null})).await.unwrap();
    assert_eq!(null["claims"], all["claims"], "{null}");
}
