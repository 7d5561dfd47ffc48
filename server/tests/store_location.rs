//! Store location in the server (issue 12): without `--store`, a server locates each
//! resource's store by the rule the CLI follows, so servers rooted in a main
//! checkout, a linked worktree, a superproject or its submodule never split a
//! resource; and a `--root` that does not exist is refused before anything is
//! created.

use std::path::PathBuf;

use crate::support::{BIN, scrubbed};

fn scratch() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let top = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir(top.join("state")).unwrap();
    (dir, top)
}

/// Real git repositories: not available to the Windows test executables under Wine.
#[cfg(unix)]
mod repositories {
    use std::path::Path;

    use rmcp::RoleClient;
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;
    use rmcp::service::RunningService;
    use rmcp::transport::TokioChildProcess;
    use serde_json::{Value, json};

    use super::scratch;
    use crate::support::{BIN, file, lock, scrubbed};

    fn git(dir: &Path, args: &[&str]) {
        let output = std::process::Command::new("git")
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .args([
                "-c",
                "user.name=fencepost tests",
                "-c",
                "user.email=tests@fencepost.invalid",
                "-c",
                "init.defaultBranch=main",
                "-c",
                "protocol.file.allow=always",
            ])
            .args(args)
            .output()
            .expect("git is required for these tests (apt-get install git)");
        assert!(
            output.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    fn repository(dir: &Path, files: &[&str]) {
        std::fs::create_dir_all(dir).unwrap();
        git(dir, &["init", "-q"]);
        for name in files {
            let path = dir.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "x\n").unwrap();
        }
        git(dir, &["add", "-A"]);
        git(dir, &["commit", "-q", "--allow-empty", "-m", "initial"]);
    }

    /// A server rooted at `root` with no `--store`, its per-user store in `state`.
    async fn located_server(root: &Path, state: &Path) -> RunningService<RoleClient, ()> {
        let mut command = tokio::process::Command::new(BIN);
        scrubbed(command.as_std_mut());
        command
            .arg("--root")
            .arg(root)
            .env("XDG_STATE_HOME", state)
            .env("FENCEPOST_LOG", "error")
            .current_dir(state);
        let transport = TokioChildProcess::new(command).expect("spawn server");
        ().serve(transport).await.expect("MCP handshake")
    }

    /// Calls `tool`; the structured result, or the tool error's text.
    async fn call(
        server: &RunningService<RoleClient, ()>,
        tool: &'static str,
        args: Value,
    ) -> Result<Value, String> {
        let Value::Object(args) = args else { panic!() };
        let result = server
            .call_tool(CallToolRequestParams::new(tool).with_arguments(args))
            .await
            .expect("JSON-RPC");
        let text: String = result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect();
        if result.is_error == Some(true) {
            Err(text)
        } else {
            Ok(result.structured_content.expect("structured content"))
        }
    }

    /// A write is refused over a claim of its file in any store on the file's
    /// path, not only the one the layout picks now: here a claim stranded in the
    /// repository's store while the `.fencepost` directory was away (a breaker:
    /// only the located store was read).
    #[tokio::test]
    async fn a_write_meets_a_claim_stranded_in_another_store() {
        let (_dir, top) = scratch();
        let state = top.join("state");
        let main = top.join("main");
        repository(&main, &["a.txt"]);
        let marker = main.join(".fencepost");
        let a = fencepost::Resource::file(main.join("a.txt"));
        let options = fencepost::AcquireOptions::new(60_000).owner("stranded");
        let in_marker = fencepost::Store::new(fencepost_fs::FsStore::open(&marker).unwrap());
        let lease = in_marker.acquire(&a, &options).unwrap();
        in_marker.release(&lease).unwrap();
        let away = top.join("away");
        std::fs::rename(&marker, &away).unwrap();
        let in_repository = fencepost::Store::new(
            fencepost_fs::FsStore::open(main.join(".git/fencepost")).unwrap(),
        );
        let _held = in_repository.acquire(&a, &options).unwrap();
        std::fs::rename(&away, &marker).unwrap();

        let server = located_server(&main, &state).await;
        let token = call(&server, "claim", json!({"resource": lock("guard")}))
            .await
            .unwrap()["token"]
            .clone();
        let write = call(
            &server,
            "write",
            json!({"resource": lock("guard"), "token": token, "path": "a.txt", "content": "y"}),
        )
        .await;
        assert!(
            write.as_ref().is_err_and(|e| e.contains("stranded")),
            "{write:?}"
        );
        assert_eq!(std::fs::read_to_string(main.join("a.txt")).unwrap(), "x\n");
        // The break advised, by the write's refusal and a claim's, is made in the
        // store the claim is in (a breaker: the located store had nothing to break).
        let there = format!(
            "fencepost --store {} break --file {} --reason",
            main.join(".git/fencepost").display(),
            main.join("a.txt").display()
        );
        let claim = call(&server, "claim", json!({"resource": file("a.txt")})).await;
        for refusal in [write, claim] {
            assert!(
                refusal.as_ref().is_err_and(|e| e.contains(&there)),
                "{refusal:?}"
            );
        }
    }

    #[tokio::test]
    async fn servers_in_worktrees_and_submodules_share_one_store() {
        let (_dir, top) = scratch();
        let state = top.join("state");
        let main = top.join("main");
        repository(&main, &["a.txt"]);
        git(&main, &["worktree", "add", "-q", "../wt", "-b", "wt"]);
        let upstream = top.join("upstream");
        repository(&upstream, &["shared.txt"]);
        git(
            &main,
            &["submodule", "add", "-q", upstream.to_str().unwrap(), "sub"],
        );

        let in_main = located_server(&main, &state).await;
        let in_worktree = located_server(&top.join("wt"), &state).await;
        let in_sub = located_server(&main.join("sub"), &state).await;

        // A lock: the main checkout's server holds it, the worktree's is refused.
        let claimed = call(
            &in_main,
            "claim",
            json!({"resource": lock("db:migrations")}),
        )
        .await;
        assert!(claimed.is_ok(), "{claimed:?}");
        let refused = call(
            &in_worktree,
            "claim",
            json!({"resource": lock("db:migrations")}),
        )
        .await;
        assert!(
            refused.as_ref().is_err_and(|e| e.contains("held")),
            "{refused:?}"
        );

        // A submodule file, from the superproject's root and from the submodule's.
        let claimed = call(
            &in_main,
            "claim",
            json!({"resource": file("sub/shared.txt")}),
        )
        .await;
        assert!(claimed.is_ok(), "{claimed:?}");
        let refused = call(&in_sub, "claim", json!({"resource": file("shared.txt")})).await;
        assert!(
            refused.as_ref().is_err_and(|e| e.contains("held")),
            "{refused:?}"
        );

        // `status` names the store it read: the repository's, in its git directory.
        let status = call(&in_worktree, "status", json!({})).await.unwrap();
        assert_eq!(
            status["store"],
            main.join(".git/fencepost").to_str().unwrap()
        );
        // The submodule file's store is the submodule's own git directory.
        assert!(main.join(".git/modules/sub/fencepost/claims").is_dir());
        // Writes into a located store are refused like writes into a named one.
        std::fs::create_dir(main.join("sub/.fencepost")).unwrap();
        let token = call(&in_sub, "claim", json!({"resource": lock("guard")}))
            .await
            .unwrap()["token"]
            .clone();
        let write = call(
            &in_sub,
            "write",
            json!({"resource": lock("guard"), "token": token, "path": ".fencepost/x", "content": "x"}),
        )
        .await;
        assert!(
            write.as_ref().is_err_and(|e| e.contains("lease store")),
            "{write:?}"
        );
        assert!(!main.join("sub/.fencepost/x").exists());

        for server in [in_main, in_worktree, in_sub] {
            let _ = server.cancel().await;
        }
    }

    /// A repository (or a `.fencepost` directory) made below a held subtree after
    /// the claim gives the files there a store of their own, where this lease is
    /// never seen: the subtree's token writes none of them (a breaker: such a write
    /// overwrote a file another agent held in the new repository's store), while
    /// the rest of the subtree stays writable.
    /// A repository and a `.fencepost` directory made below a held subtree: the
    /// files there keep their claims in the subtree's store (rule 5: a subtree
    /// claim of a directory above them was made there), so the lease still covers
    /// them and another server's claim of one is refused. A file whose claims were
    /// made in the new store is not written under the lease (a breaker: such a
    /// write overwrote a file another agent held there).
    #[tokio::test]
    async fn a_subtree_lease_covers_a_store_made_below_it_since_unless_claims_moved() {
        let (_dir, top) = scratch();
        let state = top.join("state");
        let main = top.join("main");
        repository(&main, &["a.txt"]);
        std::fs::create_dir_all(main.join("d/e")).unwrap();
        let server = located_server(&main, &state).await;
        let token = call(
            &server,
            "claim",
            json!({"resource": {"kind": "dir", "target": "d"}}),
        )
        .await
        .unwrap()["token"]
            .as_u64()
            .unwrap();
        repository(&main.join("d/inner"), &["f.txt"]);
        std::fs::create_dir(main.join("d/e/.fencepost")).unwrap();
        // A claim of d/e/h.txt made in the new store (and released): its claims
        // are made there from now on.
        let planted = fencepost::Store::new(
            fencepost_fs::FsStore::open(main.join("d/e/.fencepost")).unwrap(),
        );
        let h = fencepost::Resource::file(main.join("d/e/h.txt"));
        let lease = planted
            .acquire(&h, &fencepost::AcquireOptions::new(60_000))
            .unwrap();
        planted.release(&lease).unwrap();
        let write = |path: &str| json!({"resource": {"kind": "dir", "target": "d"}, "token": token, "path": path, "content": "B"});
        for path in ["d/inner/f.txt", "d/e/g.txt"] {
            let written = call(&server, "write", write(path)).await;
            assert!(written.is_ok(), "{path}: {written:?}");
            assert_eq!(std::fs::read_to_string(main.join(path)).unwrap(), "B");
        }
        let refused = call(&server, "write", write("d/e/h.txt")).await;
        assert!(
            refused
                .as_ref()
                .is_err_and(|e| e.contains("now belongs to the store")),
            "{refused:?}"
        );
        assert!(!main.join("d/e/h.txt").exists());
        // Another agent's claim of a file below meets the subtree lease.
        let other = located_server(&main, &state).await;
        let claimed = call(
            &other,
            "claim",
            json!({"resource": {"kind": "file", "target": "d/inner/f.txt"}}),
        )
        .await;
        assert!(
            claimed.as_ref().is_err_and(|e| e.contains("held")),
            "{claimed:?}"
        );
        let _ = other.cancel().await;
        let _ = server.cancel().await;
    }

    /// A live claim of a file in another store on its path (one the location rule
    /// picked under an earlier layout) is met: the server's claim in the file's own
    /// store is given back and refused naming that store, or waits it out.
    #[tokio::test]
    async fn a_claim_meets_a_live_claim_in_another_store_on_its_path() {
        let (_dir, top) = scratch();
        let state = top.join("state");
        let main = top.join("main");
        repository(&main, &["sub/b.txt"]);
        git(&main.join("sub"), &["init", "-q"]);
        let b = fencepost::Resource::file(main.join("sub/b.txt"));
        // sub/b.txt's claims are made in the nested repository's store...
        let inner = fencepost::Store::new(
            fencepost_fs::FsStore::open(main.join("sub/.git/fencepost")).unwrap(),
        );
        let seed = inner
            .acquire(&b, &fencepost::AcquireOptions::new(60_000))
            .unwrap();
        inner.release(&seed).unwrap();
        // ...and a subtree over it is held in the outer repository's.
        let outer_dir = std::fs::canonicalize(main.join(".git"))
            .unwrap()
            .join("fencepost");
        let outer = fencepost::Store::new(fencepost_fs::FsStore::open(&outer_dir).unwrap());
        let subtree = outer
            .acquire(
                &fencepost::Resource::dir(main.join("sub")),
                &fencepost::AcquireOptions::new(60_000).owner("alice"),
            )
            .unwrap();
        let server = located_server(&main, &state).await;
        let claim = |wait_ms: u64| json!({"resource": {"kind": "file", "target": "sub/b.txt"}, "wait_ms": wait_ms});
        let refused = call(&server, "claim", claim(0)).await;
        assert!(
            refused.as_ref().is_err_and(|e| e.contains("alice")
                && e.contains(&outer_dir.display().to_string())),
            "{refused:?}"
        );
        assert!(
            inner.holder(&b).unwrap().is_none(),
            "the claim was given back"
        );
        let release = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            outer.release(&subtree).unwrap();
        });
        let claimed = call(&server, "claim", claim(20_000)).await;
        release.join().unwrap();
        assert!(claimed.is_ok(), "{claimed:?}");
        let _ = server.cancel().await;
    }

    #[tokio::test]
    async fn a_subtree_over_a_submodule_is_refused_not_split() {
        let (_dir, top) = scratch();
        let state = top.join("state");
        let main = top.join("main");
        repository(&main, &["a.txt"]);
        let upstream = top.join("upstream");
        repository(&upstream, &["shared.txt"]);
        git(
            &main,
            &[
                "submodule",
                "add",
                "-q",
                upstream.to_str().unwrap(),
                "vendor/sub",
            ],
        );
        let server = located_server(&main, &state).await;
        // The subtree would be in the superproject's store, sub/shared.txt in the
        // submodule's: refused, naming the submodule and what to do.
        let refused = call(
            &server,
            "claim",
            json!({"resource": {"kind": "dir", "target": "vendor"}}),
        )
        .await;
        assert!(
            refused.as_ref().is_err_and(|e| e.contains("cannot cover")
                && e.contains("sub")
                && e.contains("--store")),
            "{refused:?}"
        );
        // Nothing was claimed: the submodule's file is free.
        let claimed = call(
            &server,
            "claim",
            json!({"resource": file("vendor/sub/shared.txt")}),
        )
        .await;
        assert!(claimed.is_ok(), "{claimed:?}");
        let _ = server.cancel().await;
    }
}

#[test]
fn a_root_that_does_not_exist_is_refused_and_not_created() {
    let (_dir, top) = scratch();
    let missing = top.join("missing/tree");
    for store in [None, Some("store")] {
        let mut command = std::process::Command::new(BIN);
        scrubbed(&mut command)
            .arg("--root")
            .arg(&missing)
            .env("XDG_STATE_HOME", top.join("state"))
            .stdin(std::process::Stdio::null());
        if let Some(store) = store {
            command.arg("--store").arg(store);
        }
        let output = command.output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr:?}");
        assert!(
            stderr.starts_with("fencepost-server: --root ") && stderr.contains("tree"),
            "{stderr:?}"
        );
        assert!(output.stdout.is_empty());
        assert!(!top.join("missing").exists(), "the root was created");
    }
}

/// A store named by `--store` is created by the first claim, not when the server
/// starts (a new user found an empty store made at start, where both READMEs say
/// only a claim creates one): `status` before it reads none and creates nothing.
#[test]
fn a_named_store_is_created_by_the_first_claim_not_at_start() {
    use crate::support::{Raw, Tree, lock};
    use serde_json::json;
    let tree = Tree::new();
    let mut raw = Raw::start(&tree);
    raw.initialize();
    raw.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "status", "arguments": {}}}));
    let status = raw.next().expect("status answered");
    assert_eq!(status["id"], 2, "{status}");
    assert!(status["result"]["isError"] != true, "{status}");
    assert!(
        !tree.store.exists(),
        "the store was created before any claim"
    );
    raw.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "claim", "arguments": {"resource": lock("a")}}}));
    let claimed = raw.next().expect("claim answered");
    assert!(claimed["result"]["isError"] != true, "{claimed}");
    assert!(tree.store.is_dir(), "the claim did not create the store");
}

/// A `--store` that reads as a URL of another kind than `etcd://` (a mistyped
/// `etcd:/host` too) is refused at start with one line, and nothing is created
/// under the working directory.
#[test]
fn a_store_named_like_a_url_is_refused_at_start() {
    let (_dir, top) = scratch();
    let output = scrubbed(&mut std::process::Command::new(BIN))
        .current_dir(&top)
        .arg("--root")
        .arg(&top)
        .arg("--store")
        .arg("etcd:/127.0.0.1:2379/x")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr:?}");
    assert!(stderr.contains("reads as a URL"), "{stderr:?}");
    assert!(!top.join("etcd:").exists());
}
