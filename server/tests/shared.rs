//! Shared claims through real server processes (docs/design-05-subtrees-and-shared.md
//! §4): two servers share a file; `write` refuses a shared lease; an exclusive
//! claim waits for every shared holder; `status` lists the shared holders.

use serde_json::json;

use crate::support::{Server, Tree, file};

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
