//! `write` (and `file` claims) stay inside the root and out of the store, judged on
//! the resolved location (docs/protocol.md §8).

use serde_json::json;

use crate::support::{Server, Tree, file, lock};

/// Issue 4's confinement table: every escape is refused with a one-line reason, and
/// nothing is created or changed outside the root or in the store.
#[tokio::test]
async fn escapes_are_refused_and_nothing_lands_outside_the_root() {
    let tree = Tree::new();
    std::fs::write(tree.outside.join("secret"), "untouched").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::symlink;
        symlink(&tree.outside, tree.root.join("outdir")).unwrap();
        symlink(tree.outside.join("secret"), tree.root.join("outfile")).unwrap();
        symlink(tree.outside.join("missing"), tree.root.join("dangling")).unwrap();
    }
    let server = Server::start(&tree, "confined").await;
    // An hour's ttl: no renewal adds a record to the store during the test.
    let token = server.claim_lock("tree", 3_600_000).await;
    let store_before = Tree::listing(&tree.store);
    let outside_before = Tree::listing(&tree.outside);

    let absolute_inside = tree.root.join("inside.txt").display().to_string();
    let mut cases: Vec<(String, &str)> = vec![
        ("../x".into(), "outside the server's root"),
        ("/etc/x".into(), "absolute paths are refused"),
        (absolute_inside, "absolute paths are refused"),
        ("sub/../../x".into(), "outside the server's root"),
        ("new/../../x".into(), "outside the server's root"),
        (".fencepost".into(), "lies in the lease store"),
        (".fencepost/claims/x".into(), "lies in the lease store"),
        ("sub/../.fencepost/x".into(), "lies in the lease store"),
        // A `.fencepost` directory anywhere is a store for the files around it: a
        // write that made one moved their store and split their leases (breaker).
        ("src/.fencepost/notes".into(), "lies in the lease store"),
        ("a/b/.FencePost/x".into(), "lies in the lease store"),
        ("".into(), "the path is empty"),
        (".".into(), "the root directory itself"),
    ];
    #[cfg(unix)]
    cases.extend([
        ("outdir/x".to_string(), "outside the server's root"),
        (
            "outdir/../root/../outside/y".to_string(),
            "outside the server's root",
        ),
        ("outfile".to_string(), "outside the server's root"),
        ("dangling".to_string(), "symbolic link to a missing target"),
    ]);
    // Reserved device names open the device in every directory on Windows: a write
    // to `NUL.json` would be reported written and vanish (issue 18, under Wine).
    #[cfg(windows)]
    cases.extend([
        ("NUL.json".to_string(), "names the device NUL"),
        ("sub/con.txt".to_string(), "names the device CON"),
        ("new/aux/x".to_string(), "names the device AUX"),
        ("COM1".to_string(), "names the device COM1"),
    ]);
    for (path, expected) in &cases {
        let refused = server
            .call(
                "write",
                json!({"resource": lock("tree"), "token": token, "path": path, "content": "escaped"}),
            )
            .await
            .expect_err(&format!("write to {path:?} was accepted"));
        assert!(refused.starts_with("refused path"), "{path:?}: {refused}");
        assert!(
            refused.contains(expected),
            "{path:?}: expected {expected:?} in {refused:?}"
        );

        // A file claim through the same path is refused the same way.
        if !path.is_empty() {
            let refused = server
                .call("claim", json!({"resource": file(path)}))
                .await
                .expect_err(&format!("claim of {path:?} was accepted"));
            assert!(refused.contains(expected), "claim {path:?}: {refused}");
        }
    }

    assert_eq!(
        Tree::listing(&tree.outside),
        outside_before,
        "something landed outside the root"
    );
    assert_eq!(
        std::fs::read_to_string(tree.outside.join("secret")).unwrap(),
        "untouched"
    );
    assert_eq!(
        Tree::listing(&tree.store),
        store_before,
        "something landed in the store"
    );
    assert!(
        !tree.root.join("new").exists(),
        "a refused write created a directory"
    );
    assert!(!tree.root.join("inside.txt").exists());
    assert!(!tree.root.parent().unwrap().join("x").exists());
}

/// What confinement allows: paths that resolve inside the root, however spelt,
/// with missing parents created; a link inside the root is written through, not
/// replaced. A file lease authorizes its own file only.
#[tokio::test]
async fn writes_inside_the_root_land_where_they_resolve() {
    let tree = Tree::new();
    #[cfg(unix)]
    {
        std::fs::write(tree.root.join("sub/real.txt"), "old").unwrap();
        std::os::unix::fs::symlink(tree.root.join("sub/real.txt"), tree.root.join("alias"))
            .unwrap();
    }
    let server = Server::start(&tree, "inside").await;
    let token = server.claim_lock("tree", 60_000).await;
    let write = |path: &str, content: &str| json!({"resource": lock("tree"), "token": token, "path": path, "content": content});

    let result = server
        .call("write", write("deep/er/new.txt", "made"))
        .await
        .unwrap();
    assert_eq!(result["path"], "deep/er/new.txt");
    assert_eq!(
        std::fs::read_to_string(tree.root.join("deep/er/new.txt")).unwrap(),
        "made"
    );

    let result = server
        .call("write", write("sub/../top.txt", "top"))
        .await
        .unwrap();
    assert_eq!(result["path"], "top.txt");
    assert_eq!(result["bytes"], 3);

    #[cfg(unix)]
    {
        let result = server.call("write", write("alias", "new")).await.unwrap();
        assert_eq!(result["path"], "sub/real.txt");
        assert_eq!(
            std::fs::read_to_string(tree.root.join("sub/real.txt")).unwrap(),
            "new"
        );
        assert!(
            std::fs::symlink_metadata(tree.root.join("alias"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }

    // No staging file is left behind anywhere.
    let stray: Vec<String> = Tree::listing(&tree.root)
        .into_iter()
        .filter(|p| p.contains("fencepost-tmp"))
        .collect();
    assert!(stray.is_empty(), "{stray:?}");

    // A file lease authorizes writes to that file only.
    let own = server
        .call("claim", json!({"resource": file("owned.txt")}))
        .await
        .unwrap()["token"]
        .as_u64()
        .unwrap();
    let other = server
        .call(
            "write",
            json!({"resource": file("owned.txt"), "token": own, "path": "top.txt", "content": "x"}),
        )
        .await
        .expect_err("a file lease must not authorize another file");
    assert!(
        other.contains("authorizes writes to that file only"),
        "{other}"
    );
    assert_eq!(
        std::fs::read_to_string(tree.root.join("top.txt")).unwrap(),
        "top"
    );
    server
        .call(
            "write",
            json!({"resource": file("owned.txt"), "token": own, "path": "./owned.txt", "content": "mine"}),
        )
        .await
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(tree.root.join("owned.txt")).unwrap(),
        "mine"
    );
}
