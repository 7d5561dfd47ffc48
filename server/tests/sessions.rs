//! Sessions and several resources at once through real server processes (issue
//! 14): a server's claim of what its session already holds returns the same token,
//! renewed; servers of one session share its leases; any other session is refused;
//! `claim_all` claims all or nothing.

use serde_json::json;

use crate::support::{BIN, Server, Tree, lock, scrubbed};

#[tokio::test]
async fn a_second_claim_by_the_same_server_returns_the_same_token_renewed() {
    let tree = Tree::new();
    let a = Server::start(&tree, "agent-a").await;
    let first = a
        .call("claim", json!({"resource": lock("db"), "ttl_ms": 60_000}))
        .await
        .unwrap();
    assert_eq!(first["reentered"], false);
    let session = first["session"].as_str().unwrap().to_string();
    assert!(
        session.starts_with("mcp-"),
        "the server's own session: {session}"
    );
    let again = a
        .call("claim", json!({"resource": lock("db"), "ttl_ms": 600_000}))
        .await
        .unwrap();
    assert_eq!(again["token"], first["token"], "same tenure, same token");
    assert_eq!(again["reentered"], true);
    assert_eq!(again["session"], session.as_str());
    assert!(again["expires_at_ms"].as_u64() > first["expires_at_ms"].as_u64());
    let token = first["token"].as_u64().unwrap();
    assert!(a.authorized(lock("db"), token).await);

    // Another server has another session: refused, told who holds it.
    let b = Server::start(&tree, "agent-b").await;
    let refused = b
        .call("claim", json!({"resource": lock("db")}))
        .await
        .unwrap_err();
    assert!(refused.contains("held by agent-a"), "{refused}");
    // The lease is still kept alive and released by its server.
    a.call("release", json!({"resource": lock("db"), "token": token}))
        .await
        .unwrap();
    assert!(!b.authorized(lock("db"), token).await);
}

/// A tenure the server began is released at its exit however often it claimed it
/// again (each later claim re-enters it; a breaker: the second claim left it held
/// for its whole ttl, with a session no one else could name).
#[tokio::test]
async fn a_server_releases_what_it_began_however_often_it_claimed_it() {
    let tree = Tree::new();
    let server = Server::start(&tree, "agent").await;
    let token = server.claim_lock("notes", 600_000).await;
    let again = server
        .call(
            "claim",
            json!({"resource": lock("notes"), "ttl_ms": 600_000}),
        )
        .await
        .unwrap();
    assert_eq!(again["reentered"], true);
    server.disconnect().await;
    let other = Server::start(&tree, "other").await;
    let next = other.claim_lock("notes", 60_000).await;
    assert!(
        next > token,
        "still held after the server that began it exited"
    );
}

/// A server that re-entered its session's tenure (the session held it before:
/// the agent's edit hook, another of its processes) leaves it held when it
/// exits, as `run` and `claim --hold` do; only its own tenures end with it (a new
/// user's find: closing the server freed a file the session was still editing).
#[tokio::test]
async fn a_server_leaves_a_reentered_tenure_held_when_it_exits() {
    let tree = Tree::new();
    let first = Server::start_in_session(&tree, "agent", "session-1").await;
    let token = first.claim_lock("notes", 60_000).await;
    let second = Server::start_in_session(&tree, "agent", "session-1").await;
    let again = second
        .call(
            "claim",
            json!({"resource": lock("notes"), "ttl_ms": 60_000}),
        )
        .await
        .unwrap();
    assert_eq!(again["reentered"], true);
    let own = second.claim_lock("scratch", 60_000).await;
    second.disconnect().await;
    assert!(
        first.authorized(lock("notes"), token).await,
        "the session's tenure ended with the server that re-entered it"
    );
    let stranger = Server::start_in_session(&tree, "other", "session-2").await;
    let refused = stranger
        .call("claim", json!({"resource": lock("notes")}))
        .await
        .unwrap_err();
    assert!(refused.starts_with("held"), "{refused}");
    // Its own tenure ended with it.
    let next = stranger.claim_lock("scratch", 60_000).await;
    assert!(next > own);
}

#[tokio::test]
async fn servers_of_one_session_share_its_lease_and_others_are_refused() {
    let tree = Tree::new();
    let first = Server::start_in_session(&tree, "agent", "session-1").await;
    let second = Server::start_in_session(&tree, "agent", "session-1").await;
    let stranger = Server::start_in_session(&tree, "other", "session-2").await;
    let token = first.claim_lock("notes", 60_000).await;
    let shared = second
        .call(
            "claim",
            json!({"resource": lock("notes"), "ttl_ms": 60_000}),
        )
        .await
        .unwrap();
    assert_eq!(
        shared["token"], token,
        "the session's second process keeps the token"
    );
    assert_eq!(shared["reentered"], true);
    let refused = stranger
        .call("claim", json!({"resource": lock("notes")}))
        .await
        .unwrap_err();
    assert!(refused.starts_with("held"), "{refused}");
    // The holder is named by its session's tag, never by the id (which would let
    // the stranger act as it), in the refusal and in `status`.
    let tag = fencepost::SessionTag::of("session-1").to_string();
    assert!(
        refused.contains(&format!("agent (session {tag}, pid ")),
        "{refused}"
    );
    let status = stranger.call("status", json!({})).await.unwrap();
    let row = status["claims"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["label"] == "notes")
        .unwrap_or_else(|| panic!("no row for notes: {status}"));
    assert_eq!(row["session"], tag.as_str(), "{status}");
    assert_eq!(row["owner"], "agent", "{status}");
    for shown in [&refused, &status.to_string()] {
        assert!(
            !shown.contains("session-1"),
            "shows the session id: {shown}"
        );
    }
    // A release by either process of the session ends the lease for the session.
    second
        .call(
            "release",
            json!({"resource": lock("notes"), "token": token}),
        )
        .await
        .unwrap();
    assert!(!first.authorized(lock("notes"), token).await);
    let next = stranger.claim_lock("notes", 60_000).await;
    assert!(next > token);
}

#[tokio::test]
async fn a_bad_session_id_stops_the_server_with_one_line() {
    let tree = Tree::new();
    let output = scrubbed(&mut std::process::Command::new(BIN))
        .arg("--root")
        .arg(&tree.root)
        .args(["--session", "a\u{7}b"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with("fencepost-server: --session: ")
            && stderr.contains("control characters"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[tokio::test]
async fn claim_all_is_all_or_nothing_with_one_token_per_resource() {
    let tree = Tree::new();
    let a = Server::start(&tree, "agent-a").await;
    let b = Server::start(&tree, "agent-b").await;
    let both = a
        .call(
            "claim_all",
            json!({"resources": [lock("x"), crate::support::file("notes.txt")], "ttl_ms": 60_000}),
        )
        .await
        .unwrap();
    let leases = both["leases"].as_array().unwrap();
    assert_eq!(leases.len(), 2);
    assert_eq!(leases[0]["label"], "x", "in the order given");
    assert!(leases[1]["label"].as_str().unwrap().ends_with("notes.txt"));
    let (x, notes) = (
        leases[0]["token"].as_u64().unwrap(),
        leases[1]["token"].as_u64().unwrap(),
    );
    assert!(a.authorized(lock("x"), x).await);
    assert!(a.authorized(crate::support::file("notes.txt"), notes).await);

    // B wants {free, x}: refused, naming x's holder, and takes nothing.
    let refused = b
        .call("claim_all", json!({"resources": [lock("free"), lock("x")]}))
        .await
        .unwrap_err();
    assert!(refused.contains("x is held by agent-a"), "{refused}");
    let status = b.call("status", json!({})).await.unwrap();
    assert!(
        !status["claims"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["label"] == "free" && c["live"] == true),
        "a refused claim_all left something held: {status}"
    );
    // Each lease is released on its own; then B gets both.
    a.call("release", json!({"resource": lock("x"), "token": x}))
        .await
        .unwrap();
    let got = b
        .call("claim_all", json!({"resources": [lock("free"), lock("x")]}))
        .await
        .unwrap();
    assert!(got["leases"][1]["token"].as_u64().unwrap() > x);
    // One resource named twice, or none, is a one-line error.
    for resources in [json!([lock("d"), lock("D")]), json!([])] {
        let error = b
            .call("claim_all", json!({"resources": resources}))
            .await
            .unwrap_err();
        assert!(
            error.contains("one resource") || error.contains("give 1 to 64"),
            "{error}"
        );
    }
}

/// Issue 15: inside Claude Code the server's default session is the one
/// `fencepost hook claude-code` claims for (`claude-code:` + the session id Claude
/// Code gives its MCP servers), so the agent's edit hooks and its server are one
/// session; outside it, and with --session, nothing changes.
#[tokio::test]
async fn inside_claude_code_the_server_is_the_hooks_session() {
    let tree = Tree::new();
    let env = [("CLAUDECODE", "1"), ("CLAUDE_CODE_SESSION_ID", "7f3c2a")];
    let a = Server::start_with_env(&tree, "agent-a", &env).await;
    let first = a
        .call("claim", json!({"resource": lock("db"), "ttl_ms": 60_000}))
        .await
        .unwrap();
    assert_eq!(first["session"], "claude-code:7f3c2a");
    // A second server of the same Claude Code session re-enters the tenure.
    let b = Server::start_with_env(&tree, "agent-a", &env).await;
    let again = b
        .call("claim", json!({"resource": lock("db"), "ttl_ms": 60_000}))
        .await
        .unwrap();
    assert_eq!(again["token"], first["token"]);
    assert_eq!(again["reentered"], true);
    // Not inside Claude Code (CLAUDECODE unset): the variable alone is not trusted.
    let c = Server::start_with_env(&tree, "agent-c", &[("CLAUDE_CODE_SESSION_ID", "7f3c2a")]).await;
    let refused = c
        .call("claim", json!({"resource": lock("db")}))
        .await
        .unwrap_err();
    assert!(refused.contains("held by agent-a"), "{refused}");
}

/// Slots (issue 14): `claim` with `slots` takes one free slot of a lock and says
/// which; each slot is its own lease (named with `slot`); when all are held the
/// claim is refused.
#[tokio::test]
async fn claim_with_slots_takes_one_free_slot() {
    let tree = Tree::new();
    let a = Server::start(&tree, "agent-a").await;
    let b = Server::start(&tree, "agent-b").await;
    let c = Server::start(&tree, "agent-c").await;
    let claim = json!({"resource": lock("dev"), "slots": 2, "ttl_ms": 60_000});
    let first = a.call("claim", claim.clone()).await.unwrap();
    let second = b.call("claim", claim.clone()).await.unwrap();
    assert_eq!(
        (first["slot"].clone(), second["slot"].clone()),
        (json!(1), json!(2))
    );
    let refused = c.call("claim", claim.clone()).await.unwrap_err();
    assert!(refused.contains("held by"), "{refused}");
    let slot2 = json!({"kind": "lock", "target": "dev", "slot": 2});
    let token2 = second["token"].as_u64().unwrap();
    assert!(c.authorized(slot2.clone(), token2).await);
    b.call("renew", json!({"resource": slot2.clone(), "token": token2}))
        .await
        .unwrap();
    b.call("release", json!({"resource": slot2, "token": token2}))
        .await
        .unwrap();
    let third = c.call("claim", claim).await.unwrap();
    assert_eq!(third["slot"], 2, "the freed slot");
    let bad = c
        .call(
            "claim",
            json!({"resource": {"kind": "file", "target": "f.txt", "slot": 1}}),
        )
        .await
        .unwrap_err();
    assert!(bad.contains("only a lock has slots"), "{bad}");
    // A claim does not pick a slot by number: slot 9 of a lock shared as 2 was
    // taken beside the two holders (a breaker).
    for (tool, arguments) in [
        (
            "claim",
            json!({"resource": {"kind": "lock", "target": "dev", "slot": 9}, "ttl_ms": 60_000}),
        ),
        (
            "claim_all",
            json!({"resources": [{"kind": "lock", "target": "dev", "slot": 9}], "ttl_ms": 60_000}),
        ),
    ] {
        let refused = c.call(tool, arguments).await.unwrap_err();
        assert!(
            refused.starts_with("slot: a claim does not pick a slot"),
            "{tool}: {refused}"
        );
    }
    let status = c.call("status", json!({})).await.unwrap();
    assert!(!status.to_string().contains("dev#9"), "{status}");
}

/// An MCP client's parallel tool calls: three claims of one resource sent at once.
/// Each claimed through the store and re-entered the session's tenure, and each
/// kept lease replaced the one before, whose keepalive, dropped, released the
/// tenure under all of them: every call answered "token 1, reentered" and the lock
/// was free moments later (found by a breaker). Now one claims, the others re-enter
/// the same tenure, and it stays held.
#[tokio::test]
async fn parallel_claims_of_one_resource_keep_it_held() {
    let tree = Tree::new();
    let a = Server::start(&tree, "agent-a").await;
    let b = Server::start(&tree, "agent-b").await;
    for round in 0..3 {
        let name = format!("dup-{round}");
        let claim = || a.call("claim", json!({"resource": lock(&name), "ttl_ms": 60_000}));
        let (x, y, z) = tokio::join!(claim(), claim(), claim());
        let results = [x.unwrap(), y.unwrap(), z.unwrap()];
        let token = results[0]["token"].as_u64().unwrap();
        for result in &results {
            assert_eq!(result["token"], token, "one tenure: {results:?}");
        }
        let first = results.iter().filter(|r| r["reentered"] == false).count();
        assert_eq!(first, 1, "one claim began the tenure: {results:?}");
        assert!(
            a.authorized(lock(&name), token).await,
            "round {round}: the tenure was released under its claims"
        );
        let refused = b
            .call("claim", json!({"resource": lock(&name)}))
            .await
            .unwrap_err();
        assert!(refused.contains("held by agent-a"), "{refused}");
    }
}
