//! Sessions through real server processes (issue 14): a server's claim of what its
//! session already holds returns the same token, renewed; servers of one session
//! share its leases; any other session is refused.

use serde_json::json;

use crate::support::{Server, Tree, lock};

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
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_fencepost-server"))
        .arg("--root")
        .arg(&tree.root)
        .args(["--session", "a\u{7}b"])
        .env_remove("FENCEPOST_SESSION")
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
