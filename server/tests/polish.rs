//! What a new user trips on (issue 19), through the real server.

use serde_json::json;

use crate::support::{Server, Tree, file};

/// issue 19: `status` returned an `"kind":"inode"` row (which its schema says cannot
/// exist) with `held_by_this_server: false` and another token for the server's own
/// lease. One row per resource.
#[tokio::test]
async fn status_has_one_row_per_claimed_file_and_agrees_with_its_schema() {
    let tree = Tree::new();
    std::fs::write(tree.root.join("a.txt"), "a").unwrap();
    let server = Server::start(&tree, "agent").await;
    let claimed = server
        .call("claim", json!({"resource": file("a.txt"), "ttl_ms": 60000}))
        .await
        .unwrap();
    let status = server.call("status", json!({})).await.unwrap();
    let claims = status["claims"].as_array().unwrap();
    assert_eq!(claims.len(), 1, "{status}");
    let row = &claims[0];
    assert_eq!(row["kind"], "file", "{row}");
    assert_eq!(row["token"], claimed["token"], "{row}");
    assert_eq!(row["held_by_this_server"], true, "{row}");
    assert_eq!(row["pid"], server.pid(), "{row}");
    let path = tree.root.join("a.txt");
    assert_eq!(row["resource"], format!("file:{}", path.display()), "{row}");
    for claim in claims {
        assert!(
            matches!(claim["kind"].as_str(), Some("file" | "lock")),
            "{claim}"
        );
    }
    server.disconnect().await;
}
