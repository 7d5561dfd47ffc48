//! Authority through real server processes (issue 13): a token is public, not a
//! password. `write`, `renew` and `release` act only with a lease the server itself
//! holds; a lock never overrides a file lease; version-control metadata and the
//! store are never written; a break is reported to the holding server.

use serde_json::json;

use crate::support::{Raw, Server, Tree, file, lock};

/// B copies A's token from `status` and tries to act as A: every call is refused,
/// nothing changes, and A's own calls still work.
#[tokio::test]
async fn another_servers_token_neither_writes_nor_renews_nor_releases() {
    let tree = Tree::new();
    std::fs::write(tree.root.join("notes.txt"), "A's notes").unwrap();
    let a = Server::start(&tree, "agent-a").await;
    let b = Server::start(&tree, "agent-b").await;
    let token = a.claim_lock("notes", 600_000).await;
    let status = b.call("status", json!({})).await.unwrap();
    assert_eq!(status["claims"][0]["token"], token, "the token is public");

    let write = json!({"resource": lock("notes"), "token": token, "path": "notes.txt", "content": "B was here"});
    let refused = b.call("write", write.clone()).await.unwrap_err();
    assert!(refused.starts_with("not authorized:"), "{refused}");
    assert!(refused.contains("A token is public"), "{refused}");
    for tool in ["renew", "release"] {
        let refused = b
            .call(tool, json!({"resource": lock("notes"), "token": token}))
            .await
            .unwrap_err();
        assert!(refused.starts_with("not the holder:"), "{tool}: {refused}");
        assert!(!refused.contains("release it"), "{tool}: {refused}");
    }
    assert_eq!(
        std::fs::read_to_string(tree.root.join("notes.txt")).unwrap(),
        "A's notes"
    );
    assert!(b.authorized(lock("notes"), token).await, "A still holds it");
    assert_eq!(
        b.call("status", json!({})).await.unwrap()["claims"][0]["held_by_this_server"],
        false
    );

    // A's own lease writes, renews and releases.
    let mut own = write;
    own["content"] = json!("A again");
    a.call("write", own).await.unwrap();
    a.call("renew", json!({"resource": lock("notes"), "token": token}))
        .await
        .unwrap();
    a.call(
        "release",
        json!({"resource": lock("notes"), "token": token}),
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(tree.root.join("notes.txt")).unwrap(),
        "A again"
    );
}

/// A holds notes.txt shared (for reading), and a subtree `docs/` shared; B's lock
/// token writes neither (a breaker: both writes landed while `status` showed the
/// readers). A shared lease is a file or subtree lease too, which a lock never
/// overrides.
#[tokio::test]
async fn a_lock_never_overrides_a_shared_lease() {
    let tree = Tree::new();
    std::fs::write(tree.root.join("notes.txt"), "A's notes").unwrap();
    std::fs::create_dir(tree.root.join("docs")).unwrap();
    let a = Server::start(&tree, "agent-a").await;
    let b = Server::start(&tree, "agent-b").await;
    for resource in [file("notes.txt"), json!({"kind": "dir", "target": "docs"})] {
        a.call(
            "claim",
            json!({"resource": resource, "ttl_ms": 600_000, "shared": true}),
        )
        .await
        .unwrap();
    }
    let lock_token = b.claim_lock("anything", 600_000).await;
    for path in ["notes.txt", "docs/new.md"] {
        let refused = b
            .call(
                "write",
                json!({"resource": lock("anything"), "token": lock_token, "path": path, "content": "B"}),
            )
            .await
            .unwrap_err();
        assert!(refused.contains("agent-a (shared)"), "{refused}");
        assert!(refused.contains("never overrides"), "{refused}");
    }
    assert_eq!(
        std::fs::read_to_string(tree.root.join("notes.txt")).unwrap(),
        "A's notes"
    );
    assert!(!tree.root.join("docs/new.md").exists());
}

/// The same when B holds the file (or the subtree) shared too: the reader a
/// lookup names may be B's own, and A's shared lease must still keep B's lock
/// out (a breaker: B's write landed); B's own shared lease alone keeps it out as
/// well, since it authorizes reading only.
#[tokio::test]
async fn a_lock_never_overrides_a_shared_lease_beside_ones_own() {
    let tree = Tree::new();
    std::fs::write(tree.root.join("notes.txt"), "notes").unwrap();
    std::fs::create_dir(tree.root.join("docs")).unwrap();
    let a = Server::start(&tree, "agent-a").await;
    let b = Server::start(&tree, "agent-b").await;
    let shared = |resource: serde_json::Value| json!({"resource": resource, "ttl_ms": 600_000, "shared": true});
    for resource in [file("notes.txt"), json!({"kind": "dir", "target": "docs"})] {
        a.call("claim", shared(resource.clone())).await.unwrap();
        b.call("claim", shared(resource)).await.unwrap();
    }
    let lock_token = b.claim_lock("anything", 600_000).await;
    for path in ["notes.txt", "docs/new.md"] {
        let refused = b
            .call(
                "write",
                json!({"resource": lock("anything"), "token": lock_token, "path": path, "content": "B"}),
            )
            .await
            .unwrap_err();
        assert!(refused.starts_with("refused path"), "{refused}");
        assert!(refused.contains("never overrides"), "{refused}");
    }
    assert_eq!(
        std::fs::read_to_string(tree.root.join("notes.txt")).unwrap(),
        "notes"
    );
    assert!(!tree.root.join("docs/new.md").exists());
    // B's shared lease alone.
    let c = Server::start(&tree, "agent-c").await;
    std::fs::write(tree.root.join("mine.txt"), "mine").unwrap();
    c.call("claim", shared(file("mine.txt"))).await.unwrap();
    let lock_token = c.claim_lock("other", 600_000).await;
    let refused = c
        .call(
            "write",
            json!({"resource": lock("other"), "token": lock_token, "path": "mine.txt", "content": "C"}),
        )
        .await
        .unwrap_err();
    assert!(
        refused.contains("this server holds mine.txt shared"),
        "{refused}"
    );
    assert_eq!(
        std::fs::read_to_string(tree.root.join("mine.txt")).unwrap(),
        "mine"
    );
}

/// A holds notes.txt as a file; B's lock token cannot write it (the refusal names
/// A), while a file nobody holds is writable with the lock, as before.
#[tokio::test]
async fn a_lock_never_overrides_a_file_lease() {
    let tree = Tree::new();
    std::fs::write(tree.root.join("notes.txt"), "A's notes").unwrap();
    let a = Server::start(&tree, "agent-a").await;
    let b = Server::start(&tree, "agent-b").await;
    let file_token = a
        .call(
            "claim",
            json!({"resource": file("notes.txt"), "ttl_ms": 600_000}),
        )
        .await
        .unwrap()["token"]
        .as_u64()
        .unwrap();
    let lock_token = b.claim_lock("anything", 600_000).await;
    let write = |path: &str, content: &str| json!({"resource": lock("anything"), "token": lock_token, "path": path, "content": content});
    for path in ["notes.txt", "./sub/../notes.txt"] {
        let refused = b.call("write", write(path, "B")).await.unwrap_err();
        assert!(refused.starts_with("refused path"), "{refused}");
        assert!(refused.contains("is held by agent-a"), "{refused}");
        assert!(
            refused.contains(&format!("token {file_token}")),
            "{refused}"
        );
        assert!(
            refused.contains("never overrides a file lease"),
            "{refused}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(tree.root.join("notes.txt")).unwrap(),
        "A's notes"
    );
    // A file nobody holds: the lock guards it.
    let written = b.call("write", write("free.txt", "B's")).await.unwrap();
    assert_eq!(written["written"], true);
    // A server holding both the lock and the file lease may write with the lock.
    let own_lock = a.claim_lock("mine", 600_000).await;
    a.call(
        "write",
        json!({"resource": lock("mine"), "token": own_lock, "path": "notes.txt", "content": "A via lock"}),
    )
    .await
    .unwrap();
    // Once A releases the file, B's lock may write it.
    a.call(
        "release",
        json!({"resource": file("notes.txt"), "token": file_token}),
    )
    .await
    .unwrap();
    b.call("write", write("notes.txt", "B now")).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(tree.root.join("notes.txt")).unwrap(),
        "B now"
    );
}

/// `.git` (and `.hg`, `.svn`, `.jj`) at any depth, in any case, through a symlink,
/// and the store, are never written; the repository still works afterwards.
#[tokio::test]
async fn version_control_metadata_and_the_store_are_never_written() {
    let tree = Tree::new();
    // A real repository where git runs (CI has git); under Windows emulation, a
    // stand-in `.git` directory.
    #[cfg(unix)]
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(&tree.root)
            .output()
            .expect("git is installed (CI installs it)")
    };
    #[cfg(unix)]
    assert!(git(&["init", "-q"]).status.success());
    #[cfg(not(unix))]
    {
        std::fs::create_dir_all(tree.root.join(".git")).unwrap();
        std::fs::write(tree.root.join(".git/config"), "[core]\n").unwrap();
    }
    std::fs::create_dir_all(tree.root.join("sub/.git")).unwrap();
    std::fs::write(tree.root.join("sub/.git/HEAD"), "ref: refs/heads/main\n").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(tree.root.join(".git"), tree.root.join("gitlink")).unwrap();
    let config_before = std::fs::read(tree.root.join(".git/config")).unwrap();

    let server = Server::start(&tree, "careful").await;
    let token = server.claim_lock("tree", 600_000).await;
    #[cfg_attr(not(unix), allow(unused_mut))]
    let mut cases = vec![
        (".git/config", "version-control metadata"),
        (".GIT/config", "version-control metadata"),
        ("sub/.git/HEAD", "version-control metadata"),
        ("sub/../.git/hooks/pre-commit", "version-control metadata"),
        (".hg/hgrc", "version-control metadata"),
        ("deep/.svn/entries", "version-control metadata"),
        (".jj/repo/store", "version-control metadata"),
        (".fencepost/claims/x", "lease store"),
        (".FENCEPOST/x", "lease store"),
    ];
    #[cfg(unix)]
    cases.push(("gitlink/config", "version-control metadata"));
    for (path, expected) in cases {
        let refused = server
            .call(
                "write",
                json!({"resource": lock("tree"), "token": token, "path": path, "content": "[broken"}),
            )
            .await
            .expect_err(&format!("write to {path} was accepted"));
        assert!(refused.starts_with("refused path"), "{path}: {refused}");
        assert!(refused.contains(expected), "{path}: {refused}");
    }
    assert_eq!(
        std::fs::read(tree.root.join(".git/config")).unwrap(),
        config_before
    );
    assert_eq!(
        std::fs::read_to_string(tree.root.join("sub/.git/HEAD")).unwrap(),
        "ref: refs/heads/main\n"
    );
    // By exact name: where case does not matter (Windows) `.FENCEPOST` opens the
    // store `.fencepost`, which exists.
    let names: Vec<String> = std::fs::read_dir(&tree.root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for never in [".hg", "deep", ".jj", ".FENCEPOST"] {
        assert!(!names.iter().any(|n| n == never), "{never} was created");
    }
    // Look-alikes are ordinary files.
    for path in [".github/workflows/ci.yml", ".gitignore"] {
        server
            .call(
                "write",
                json!({"resource": lock("tree"), "token": token, "path": path, "content": "ok\n"}),
            )
            .await
            .unwrap_or_else(|e| panic!("{path}: {e}"));
    }
    #[cfg(unix)]
    {
        let status = git(&["status", "--porcelain"]);
        assert!(status.status.success(), "git status failed: {status:?}");
    }
}

/// An operator breaks the server's lease: its next write, renew, assert, release
/// and status say who, when and why; the next claim gets a higher token.
#[tokio::test]
async fn a_break_is_reported_to_the_holding_server_with_the_reason() {
    let tree = Tree::new();
    let server = Server::start(&tree, "agent-a").await;
    let token = server.claim_lock("db:migrations", 600_000).await;

    // The operator's break, through the library (what `fencepost break` calls).
    let store = fencepost::Store::new(fencepost_fs::FsStore::open(&tree.store).unwrap());
    let broken = store
        .break_lease(
            &fencepost::Resource::lock("db:migrations"),
            "ops",
            "agent-a is wedged",
        )
        .unwrap();
    assert_eq!(broken.owner, "agent-a");

    let told =
        |text: &str| text.contains("broken by ops at ") && text.contains(": agent-a is wedged");
    let write = server
        .call(
            "write",
            json!({"resource": lock("db:migrations"), "token": token, "path": "m.sql", "content": "x"}),
        )
        .await
        .unwrap_err();
    assert!(told(&write), "{write}");
    assert!(!tree.root.join("m.sql").exists());
    let renew = server
        .call(
            "renew",
            json!({"resource": lock("db:migrations"), "token": token}),
        )
        .await
        .unwrap_err();
    assert!(told(&renew), "{renew}");
    let asserted = server
        .call(
            "assert",
            json!({"resource": lock("db:migrations"), "token": token}),
        )
        .await
        .unwrap();
    assert_eq!(asserted["authorized"], false);
    assert!(told(asserted["reason"].as_str().unwrap()), "{asserted}");
    let status = server.call("status", json!({})).await.unwrap();
    let claim = &status["claims"][0];
    assert_eq!(claim["state"], "broken");
    assert!(told(claim["broken"].as_str().unwrap()), "{status}");
    let release = server
        .call(
            "release",
            json!({"resource": lock("db:migrations"), "token": token}),
        )
        .await
        .unwrap_err();
    assert!(told(&release), "{release}");
    let next = server.claim_lock("db:migrations", 600_000).await;
    assert!(next > token);
}

/// A file written around under another name — replaced by a new file that someone
/// else had claimed through a hard link of it before it took the name (after, the
/// claim would find a.rs held: docs/design-02-resource-identity.md, "Other names of
/// the file") — is a loss the server reports as such: the
/// name the other holder claimed it by, no token of another series passed off as
/// this resource's ("token 1 was superseded by token 1", a breaker), and a claim
/// while that holder keeps it names the holder and until when. Unix: hard links
/// share a file id there only (docs/design-02-resource-identity.md, "Windows file ids").
#[cfg(unix)]
#[tokio::test]
async fn a_file_written_around_through_another_name_is_reported_with_that_name() {
    let tree = Tree::new();
    std::fs::write(tree.root.join("a.rs"), "a").unwrap();
    let server = Server::start(&tree, "agent-a").await;
    let token = server
        .call(
            "claim",
            json!({"resource": file("a.rs"), "ttl_ms": 600_000}),
        )
        .await
        .unwrap()["token"]
        .as_u64()
        .unwrap();
    std::fs::write(tree.root.join("a.rs.tmp"), "b").unwrap();
    std::fs::hard_link(tree.root.join("a.rs.tmp"), tree.root.join("b.rs")).unwrap();
    let store = fencepost::Store::new(fencepost_fs::FsStore::open(&tree.store).unwrap());
    let _rival = store
        .acquire(
            &fencepost::Resource::file(tree.root.join("b.rs")),
            &fencepost::AcquireOptions::new(600_000).owner("agent-b"),
        )
        .unwrap();
    std::fs::rename(tree.root.join("a.rs.tmp"), tree.root.join("a.rs")).unwrap();
    let write = server
        .call(
            "write",
            json!({"resource": file("a.rs"), "token": token, "path": "a.rs", "content": "x"}),
        )
        .await
        .unwrap_err();
    assert!(
        write.starts_with("lost: ")
            && write.contains("written around")
            && write.contains("claimed the same file as ")
            && write.contains("b.rs")
            && !write.contains("superseded by token"),
        "{write}"
    );
    assert_eq!(
        std::fs::read_to_string(tree.root.join("a.rs")).unwrap(),
        "b"
    );
    let again = server
        .call(
            "claim",
            json!({"resource": file("a.rs"), "ttl_ms": 600_000}),
        )
        .await
        .unwrap_err();
    assert!(
        again.contains("agent-b") && again.contains("b.rs") && again.contains("until"),
        "{again}"
    );
}

/// The tool descriptions tell a model that tokens are not passwords.
#[test]
fn tool_descriptions_say_tokens_are_not_passwords() {
    let tree = Tree::new();
    let mut raw = Raw::start(&tree);
    let init = raw.initialize();
    assert!(
        init["instructions"]
            .as_str()
            .is_some_and(|i| i.contains("Tokens are public, not passwords")),
        "{init}"
    );
    raw.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let response = raw.next().expect("tools/list response");
    for tool in response["result"]["tools"].as_array().unwrap() {
        let name = tool["name"].as_str().unwrap();
        let description = tool["description"].as_str().unwrap();
        if ["claim", "assert", "renew", "release", "write"].contains(&name) {
            assert!(
                description.contains("not a password") || description.contains("not passwords"),
                "{name}: {description}"
            );
        }
        assert!(!description.contains("release it yourself"), "{name}");
    }
}

/// A lease a newer fencepost wrote (a record of a higher format version) holds the
/// resource, and the refusal does not send the agent's human to a `fencepost
/// break` this version cannot do (a breaker, through the CLI).
#[tokio::test]
async fn a_newer_format_holder_is_not_sent_to_break() {
    let tree = Tree::new();
    let a = Server::start(&tree, "agent-a").await;
    let token = a.claim_lock("v2", 600_000).await;
    a.call("release", json!({"resource": lock("v2"), "token": token}))
        .await
        .unwrap();
    let claims = tree.store.join("claims");
    let dir = std::fs::read_dir(&claims)
        .unwrap()
        .map(|e| e.unwrap().path())
        .next()
        .unwrap();
    let key = dir.file_name().unwrap().to_str().unwrap().to_string();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    std::fs::write(
        dir.join("g00000009.json"),
        format!(
            r#"{{"v":2,"key":"{key}","token":9,"generation":9,"granted_at_ms":{now},"expires_at_ms":{}}}"#,
            now + 600_000
        ),
    )
    .unwrap();
    let refused = a
        .call("claim", json!({"resource": lock("v2"), "ttl_ms": 60_000}))
        .await
        .unwrap_err();
    assert!(
        refused.contains("a lease a newer fencepost wrote (format v2)")
            && refused.contains("end it with that newer fencepost"),
        "{refused}"
    );
    assert!(!refused.contains("`fencepost break`"), "{refused}");
}
