//! The CLI against a real etcd (issue 7): `--store etcd://…` and `FENCEPOST_STORE`
//! give the same outputs and exit codes as the fs store (docs/protocol.md §7).
//!
//! Needs the `etcd` feature: `cargo test -p fencepost-cli --features etcd --test etcd`.

use std::process::{Command, Output};

use fencepost_etcd::testing::EtcdCluster;

const BIN: &str = env!("CARGO_BIN_EXE_fencepost");

/// `fencepost <args>` with a clean environment of ours, plus `env`.
fn fencepost(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(BIN);
    for var in [
        "FENCEPOST_STORE",
        "FENCEPOST_OWNER",
        "FENCEPOST_TOKEN",
        "FENCEPOST_RESOURCE",
    ] {
        cmd.env_remove(var);
    }
    cmd.args(args).envs(env.iter().copied());
    cmd.output().expect("running fencepost")
}

fn code(output: &Output) -> i32 {
    output.status.code().expect("exited normally")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).to_string()
}

#[test]
fn claim_check_renew_release_status_and_run_with_fs_exit_codes() {
    let etcd = EtcdCluster::single();
    let url = etcd.url("t");
    let store = ["--store", url.as_str()];
    let with = |args: &[&str]| fencepost(&[&store[..], args].concat(), &[]);

    // claim → 0, the lease handle (token 1 and its secret) alone on stdout.
    let claimed = with(&["claim", "--lock", "x", "--ttl", "60000"]);
    assert_eq!(code(&claimed), 0, "{}", stderr(&claimed));
    let token = stdout(&claimed);
    assert!(token.starts_with("1.") && token.len() == 34, "{token}");
    // Another's release with the bare token is refused (only the handle proves).
    assert_eq!(code(&with(&["release", "--lock", "x", "1"])), 3);

    // Again → 3 (held), one line naming the holder.
    let again = with(&["claim", "--lock", "x"]);
    assert_eq!(code(&again), 3, "{}", stderr(&again));
    assert_eq!(stderr(&again).lines().count(), 1, "{}", stderr(&again));

    // check → 0 for the holder's token, 3 for any other.
    assert_eq!(code(&with(&["check", "--lock", "x", &token])), 0);
    assert_eq!(code(&with(&["check", "--lock", "x", "7"])), 3);

    // renew keeps the token.
    let renewed = with(&["renew", "--lock", "x", &token]);
    assert_eq!(code(&renewed), 0, "{}", stderr(&renewed));

    // status lists it, as JSON too; the store shown is the URL.
    let status = with(&["status", "--json"]);
    assert_eq!(code(&status), 0, "{}", stderr(&status));
    let text = stdout(&status);
    assert!(text.contains("\"x\"") || text.contains("x"), "{text}");

    // The same store through FENCEPOST_STORE.
    let via_env = fencepost(
        &["check", "--lock", "x", &token],
        &[("FENCEPOST_STORE", url.as_str())],
    );
    assert_eq!(code(&via_env), 0, "{}", stderr(&via_env));

    // release → 0; the token no longer passes; a stale release → 3.
    assert_eq!(code(&with(&["release", "--lock", "x", &token])), 0);
    assert_eq!(code(&with(&["check", "--lock", "x", &token])), 3);
    assert_eq!(code(&with(&["release", "--lock", "x", &token])), 3);

    // The next claim gets a greater token.
    let next = with(&["claim", "--lock", "x", "--ttl", "60000"]);
    assert_eq!(code(&next), 0, "{}", stderr(&next));
    assert!(stdout(&next).parse::<u64>().unwrap() > token.parse::<u64>().unwrap());

    // run: the child sees the etcd store and its token passes; exit code passed on.
    let script = format!(
        "test \"$FENCEPOST_STORE\" = '{url}' && '{BIN}' check --lock y \"$FENCEPOST_TOKEN\" && exit 42"
    );
    let ran = with(&["run", "--lock", "y", "--", "sh", "-c", &script]);
    assert_eq!(code(&ran), 42, "{}", stderr(&ran));
    // Released after the child: claimable again at once.
    assert_eq!(code(&with(&["claim", "--lock", "y"])), 0);
}

#[test]
fn an_unreachable_or_malformed_etcd_store_is_exit_1_with_one_line() {
    // Nothing listens on port 1.
    let down = fencepost(
        &["--store", "etcd://127.0.0.1:1/t", "claim", "--lock", "x"],
        &[],
    );
    assert_eq!(code(&down), 1, "{}", stderr(&down));
    assert_eq!(stderr(&down).lines().count(), 1, "{}", stderr(&down));
    assert!(stderr(&down).contains("127.0.0.1:1"), "{}", stderr(&down));

    let bad = fencepost(&["--store", "etcd://h:0/t", "status"], &[]);
    assert_eq!(code(&bad), 1, "{}", stderr(&bad));
    assert!(
        stderr(&bad).contains("bad etcd store URL"),
        "{}",
        stderr(&bad)
    );
}

#[test]
fn two_spellings_of_one_prefix_are_one_store() {
    // issue 19: `/./pfx` and `/pfx/../pfx` were stores apart from `/pfx`.
    let etcd = EtcdCluster::single();
    let endpoints = etcd.endpoints();
    let plain = format!("etcd://{endpoints}/pfx");
    let claimed = fencepost(
        &["--store", &plain, "claim", "--lock", "x", "--ttl", "60000"],
        &[],
    );
    assert_eq!(code(&claimed), 0, "{}", stderr(&claimed));
    for spelling in ["/./pfx", "/pfx/../pfx", "/pfx/"] {
        let url = format!("etcd://{endpoints}{spelling}");
        let again = fencepost(&["--store", &url, "claim", "--lock", "x", "--json"], &[]);
        assert_eq!(code(&again), 3, "{spelling}: {}", stderr(&again));
        let verdict: serde_json::Value = serde_json::from_str(&stdout(&again)).unwrap();
        assert_eq!(verdict["store"], plain.as_str(), "{spelling}");
    }
}
