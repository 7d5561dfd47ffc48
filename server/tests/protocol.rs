//! The wire: handshake, tool list, bad arguments and malformed JSON-RPC.

use serde_json::{Value, json};

use crate::support::{Raw, Server, Tree, file, lock};

const TOOLS: [&str; 7] = [
    "assert",
    "claim",
    "claim_all",
    "release",
    "renew",
    "status",
    "write",
];

/// Issue 4 acceptance: `initialize` and `tools/list` over stdio list exactly the
/// tools (six, and `claim_all` since issue 14), each with an input schema (bounds included) and an output schema; stdout
/// carries nothing but JSON-RPC.
#[test]
fn initialize_then_tools_list_shows_exactly_the_tools_with_schemas() {
    let tree = Tree::new();
    let mut raw = Raw::start(&tree);
    let init = raw.initialize();
    assert_eq!(init["serverInfo"]["name"], "fencepost-server");
    assert!(init["capabilities"]["tools"].is_object(), "{init}");

    raw.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let response = raw.next().expect("tools/list response");
    assert_eq!(response["id"], 2);
    let tools = response["result"]["tools"].as_array().expect("tools");
    let mut names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    assert_eq!(names, TOOLS);
    for tool in tools {
        let name = &tool["name"];
        assert!(
            tool["description"].as_str().is_some_and(|d| d.len() > 40),
            "{name}: no useful description"
        );
        assert_eq!(tool["inputSchema"]["type"], "object", "{name}");
        assert_eq!(tool["outputSchema"]["type"], "object", "{name}");
        assert_eq!(tool["inputSchema"]["additionalProperties"], false, "{name}");
    }
    let claim = tools.iter().find(|t| t["name"] == "claim").unwrap();
    let ttl = &claim["inputSchema"]["properties"]["ttl_ms"];
    assert_eq!(
        (ttl["minimum"].clone(), ttl["maximum"].clone()),
        (json!(1000), json!(3600000))
    );
    let wait = &claim["inputSchema"]["properties"]["wait_ms"];
    assert_eq!(
        (wait["minimum"].clone(), wait["maximum"].clone()),
        (json!(0), json!(120000))
    );
    let kind = &claim["inputSchema"]["properties"]["resource"]["properties"]["kind"];
    assert_eq!(kind["enum"], json!(["file", "lock", "dir"]), "{kind}");
    let write = tools.iter().find(|t| t["name"] == "write").unwrap();
    assert_eq!(
        write["inputSchema"]["required"],
        json!(["resource", "token", "path", "content"])
    );
}

/// Issue 4: malformed JSON-RPC gets a JSON-RPC error, and the server keeps serving.
///
/// Well-formed JSON that is not a valid message gets `-32600 Invalid Request`; a
/// line that is not JSON at all is skipped without a reply (rmcp does what every
/// official MCP SDK does, so a peer that echoes errors cannot start a storm); an
/// unknown method gets `-32601`. After all three, requests are still answered.
#[test]
fn malformed_json_rpc_gets_a_json_rpc_error_and_the_server_keeps_serving() {
    let tree = Tree::new();
    let mut raw = Raw::start(&tree);
    raw.initialize();

    raw.send_line(r#"{"jsonrpc":"2.0","id":3,"method":42,"params":[]}"#);
    let error = raw.next().expect("a reply to a malformed message");
    assert_eq!(error["jsonrpc"], "2.0");
    assert_eq!(error["error"]["code"], -32600, "{error}");

    raw.send_line(r#"{"jsonrpc":"2.0","id":4,"method":"tools/call""#);
    raw.send(json!({"jsonrpc": "2.0", "id": 5, "method": "no/such/method"}));
    let error = raw.next().expect("a reply to an unknown method");
    assert_eq!(error["id"], 5, "the unparsable line got a reply: {error}");
    assert_eq!(error["error"]["code"], -32601, "{error}");

    raw.send(json!({
        "jsonrpc": "2.0", "id": 6, "method": "tools/call",
        "params": {"name": "status", "arguments": {}}
    }));
    let status = raw.next().expect("status after malformed input");
    assert_eq!(status["id"], 6);
    assert_eq!(status["result"]["isError"], false, "{status}");
}

/// Issue 4: every bad input is a tool error with a one-line reason (the helper
/// asserts one line), sent over real JSON-RPC; the server never exits on one.
#[tokio::test]
async fn bad_arguments_are_one_line_tool_errors() {
    let tree = Tree::new();
    let server = Server::start(&tree, "bad-args").await;
    let token = server.claim_lock("db", 60_000).await;
    let released = server.claim_lock("gone", 60_000).await;
    server
        .call(
            "release",
            json!({"resource": lock("gone"), "token": released}),
        )
        .await
        .unwrap();

    let cases: Vec<(&'static str, Value, &str)> = vec![
        ("claim", json!({}), "missing field `resource`"),
        (
            "claim",
            json!({"resource": {"kind": "lock"}}),
            "resource: missing field `target`",
        ),
        (
            "claim",
            json!({"resource": {"kind": "tree", "target": "x"}}),
            "resource.kind: unknown variant `tree`",
        ),
        (
            "claim",
            json!({"resource": "db"}),
            "resource: invalid type: string",
        ),
        (
            "claim",
            json!({"resource": lock("x"), "ttl_ms": 10}),
            "ttl_ms must be between 1000 and 3600000, got 10",
        ),
        (
            "claim",
            json!({"resource": lock("x"), "ttl_ms": 3_600_001}),
            "ttl_ms must be between",
        ),
        (
            "claim",
            json!({"resource": lock("x"), "ttl_ms": "60000"}),
            "ttl_ms: invalid type: string",
        ),
        (
            "claim",
            json!({"resource": lock("x"), "ttl_ms": 1.5}),
            "ttl_ms: invalid type: floating point",
        ),
        (
            "claim",
            json!({"resource": lock("x"), "wait_ms": -1}),
            "wait_ms must be between 0 and 120000, got -1",
        ),
        (
            "claim",
            json!({"resource": lock("x"), "ttl": 5000}),
            "unknown field `ttl`",
        ),
        (
            "claim",
            json!({"resource": lock("   ")}),
            "the lock name is empty",
        ),
        (
            "claim",
            json!({"resource": lock("a\u{0}b")}),
            "control character",
        ),
        (
            "assert",
            json!({"resource": lock("db")}),
            "missing field `token`",
        ),
        (
            "assert",
            json!({"resource": lock("db"), "token": "1"}),
            "token: invalid type: string",
        ),
        (
            "assert",
            json!({"resource": lock("db"), "token": -3}),
            "token must be a positive integer",
        ),
        (
            "assert",
            json!({"resource": lock("db"), "token": 0}),
            "token must be a positive integer",
        ),
        (
            "renew",
            json!({"resource": lock("gone"), "token": released}),
            "not the holder",
        ),
        (
            "release",
            json!({"resource": lock("gone"), "token": released}),
            "not the holder",
        ),
        (
            "release",
            json!({"resource": lock("db"), "token": token + 100}),
            "not token",
        ),
        (
            "write",
            json!({"resource": lock("gone"), "token": released, "path": "f", "content": "x"}),
            "not authorized: token",
        ),
        (
            "write",
            json!({"resource": lock("db"), "token": token, "path": "f"}),
            "missing field `content`",
        ),
        (
            "write",
            json!({"resource": lock("db"), "token": token, "path": "f", "content": 7}),
            "content: invalid type: integer",
        ),
        (
            "write",
            json!({"resource": lock("db"), "token": token, "path": "sub", "content": "x"}),
            "is a directory",
        ),
        (
            "write",
            json!({"resource": file("a.txt"), "token": 1, "path": "a.txt", "content": "x"}),
            "not authorized",
        ),
        (
            "status",
            json!({"verbose": true}),
            "unknown field `verbose`",
        ),
    ];
    for (tool, arguments, expected) in cases {
        let outcome = server.call(tool, arguments.clone()).await;
        match outcome {
            Err(reason) => assert!(
                reason.contains(expected),
                "{tool} {arguments}: expected {expected:?} in {reason:?}"
            ),
            Ok(result) => panic!("{tool} {arguments}: accepted: {result}"),
        }
    }
    // A dead token is not an error for assert: it is simply not authorized.
    assert!(!server.authorized(lock("gone"), released).await);
    // Still serving, still holding.
    assert!(server.authorized(lock("db"), token).await);
    assert!(
        !tree.root.join("f").exists(),
        "a refused write created a file"
    );
}
