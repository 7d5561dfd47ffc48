//! Subtree claims through real server processes (docs/design-05-subtrees-and-shared.md):
//! a `dir` lease writes below its directory only; another server's file claim below
//! it is refused, and so is its lock-guarded write there.

use serde_json::json;

use crate::support::{Server, Tree, file, lock};

fn dir(path: &str) -> serde_json::Value {
    json!({"kind": "dir", "target": path})
}

#[tokio::test]
async fn a_subtree_lease_writes_below_its_directory_and_excludes_files_there() {
    let tree = Tree::new();
    std::fs::create_dir_all(tree.root.join("src/auth")).unwrap();
    let a = Server::start(&tree, "agent-a").await;
    let b = Server::start(&tree, "agent-b").await;
    let token = a
        .call("claim", json!({"resource": dir("src"), "ttl_ms": 600_000}))
        .await
        .unwrap()["token"]
        .as_u64()
        .unwrap();
    // Writes below the directory, including a file that does not exist yet.
    let write =
        |path: &str| json!({"resource": dir("src"), "token": token, "path": path, "content": "A"});
    a.call("write", write("src/auth/new.rs")).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(tree.root.join("src/auth/new.rs")).unwrap(),
        "A"
    );
    // Not outside it.
    let refused = a.call("write", write("README.md")).await.unwrap_err();
    assert!(
        refused.contains("subtree lease authorizes writes below its directory"),
        "{refused}"
    );
    assert!(!tree.root.join("README.md").exists());
    // Another server: a file below it is held by agent-a; a lock does not override it.
    let held = b
        .call(
            "claim",
            json!({"resource": file("src/auth/new.rs"), "ttl_ms": 60_000}),
        )
        .await
        .unwrap_err();
    assert!(held.contains("agent-a"), "{held}");
    // The refusal names the subtree in the way and a break of it, not of the file.
    // As fencepost shows it (the root has no `\\?\` prefix on Windows).
    let src = tree.root.join("src");
    assert!(
        held.contains(&format!(
            "is blocked by dir {}, held by agent-a",
            src.display()
        )) && held.contains(&format!("`fencepost break` on dir {}", src.display())),
        "{held}"
    );
    let lock_token = b.claim_lock("anything", 600_000).await;
    let refused = b
        .call(
            "write",
            json!({"resource": lock("anything"), "token": lock_token, "path": "src/auth/new.rs", "content": "B"}),
        )
        .await
        .unwrap_err();
    // Naming the subtree in the way, as the claim's refusal does.
    assert!(
        refused.contains(&format!(
            "is held by a lease on dir {}, held by agent-a",
            src.display()
        )),
        "{refused}"
    );
    assert_eq!(
        std::fs::read_to_string(tree.root.join("src/auth/new.rs")).unwrap(),
        "A"
    );
    // status: one row of kind dir.
    let status = b.call("status", json!({})).await.unwrap();
    let dirs: Vec<_> = status["claims"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "dir")
        .collect();
    assert_eq!(dirs.len(), 1, "{status}");
    // Released: the file can be claimed by the other server.
    a.call("release", json!({"resource": dir("src"), "token": token}))
        .await
        .unwrap();
    b.call(
        "claim",
        json!({"resource": file("src/auth/new.rs"), "ttl_ms": 60_000}),
    )
    .await
    .unwrap();
}

/// The root itself may be claimed as a subtree (`.` or `./`), as the CLI's
/// `claim --dir .` is: the lease writes any file below it, and another server's
/// file claim there is refused (a breaker: refused as "the root directory itself,
/// not a file").
#[tokio::test]
async fn the_root_is_claimed_as_a_subtree() {
    let tree = Tree::new();
    let a = Server::start(&tree, "agent-a").await;
    let b = Server::start(&tree, "agent-b").await;
    for target in [".", "./"] {
        let claimed = a
            .call("claim", json!({"resource": dir(target), "ttl_ms": 60_000}))
            .await
            .unwrap();
        let token = claimed["token"].as_u64().unwrap();
        a.call(
            "write",
            json!({"resource": dir(target), "token": token, "path": "deep/x.txt", "content": "A"}),
        )
        .await
        .unwrap();
        let held = b
            .call(
                "claim",
                json!({"resource": file("deep/x.txt"), "ttl_ms": 60_000}),
            )
            .await
            .unwrap_err();
        assert!(held.contains("agent-a"), "{held}");
        a.call("release", json!({"resource": dir(target), "token": token}))
            .await
            .unwrap();
    }
    assert_eq!(
        std::fs::read_to_string(tree.root.join("deep/x.txt")).unwrap(),
        "A"
    );
}
