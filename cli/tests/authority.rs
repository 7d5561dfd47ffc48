//! Authority (issue 13): a token is an ordering, not a key. Only the holder's lease
//! handle renews or releases; `break` is the operator's recorded override, and the
//! broken holder is told who, when and why.

#[cfg(unix)]
use std::process::Stdio;
#[cfg(unix)]
use std::time::Duration;

#[cfg(unix)]
use crate::util::{Background, wait_until};
use crate::util::{Scratch, expired_claim_through_the_library, json_of, one_line_stderr, token_of};

/// The holder's token with a secret that is not its own.
fn forged(token: u64) -> String {
    format!("{token}.{}", "0123456789abcdef".repeat(2))
}

/// Another agent's `release`/`renew` with the holder's token (read from `status` or
/// a "held" message), bare or in a forged handle: exit 3, nothing written, the
/// holder's check still passes. `owner` is the other agent's FENCEPOST_OWNER (renew
/// and release take no owner: a name is not a proof).
fn others_cannot_act(s: &Scratch, token: u64, holder: &str, owner: Option<&str>) {
    let generation = s.entry("x").unwrap()["generation"].clone();
    for proof in [token.to_string(), forged(token)] {
        for command in ["release", "renew"] {
            let mut cmd = s.cmd();
            if let Some(owner) = owner {
                cmd.env("FENCEPOST_OWNER", owner);
            }
            let output = cmd.args([command, "--lock", "x", &proof]).output().unwrap();
            assert_eq!(
                output.status.code(),
                Some(3),
                "{command} {proof}: {output:?}"
            );
            let stderr = one_line_stderr(&output);
            assert!(stderr.contains(holder), "names the holder: {stderr}");
            assert!(stderr.contains("a token is public"), "{stderr}");
            assert!(stderr.contains("Nothing was changed"), "{stderr}");
            assert!(
                !stderr.contains("release it"),
                "never suggests acting as the holder: {stderr}"
            );
        }
    }
    let entry = s.entry("x").unwrap();
    assert_eq!(entry["generation"], generation, "nothing was written");
    assert_eq!(entry["state"], "held");
    s.cmd()
        .args(["check", "--lock", "x", &token.to_string()])
        .assert()
        .code(0);
}

#[test]
fn another_owners_release_and_renew_with_the_holders_token_are_refused() {
    let s = Scratch::new();
    let (token, handle) = s.claim_handle("x", &["--owner", "agent-a"]);
    others_cannot_act(&s, token, "agent-a", Some("agent-b"));
    // The holder's own handle works as documented.
    let renewed = s
        .cmd()
        .args(["renew", "--lock", "x", &handle])
        .output()
        .unwrap();
    assert_eq!(renewed.status.code(), Some(0), "{renewed:?}");
    assert_eq!(token_of(&renewed), token);
    s.cmd()
        .args(["release", "--lock", "x", &handle])
        .assert()
        .code(0);
    assert_eq!(s.entry("x").unwrap()["state"], "released");
}

#[test]
fn owner_names_are_not_the_proof() {
    // Both agents left at the default owner (`cli`): the same name, still refused.
    let s = Scratch::new();
    let (token, handle) = s.claim_handle("x", &[]);
    others_cannot_act(&s, token, "cli", None);
    s.cmd()
        .args(["release", "--lock", "x", &handle])
        .assert()
        .code(0);
}

#[test]
fn claim_json_gives_token_and_secret_apart_and_status_shows_no_secret() {
    let s = Scratch::new();
    let output = s
        .cmd()
        .args(["claim", "--lock", "x", "--json"])
        .output()
        .unwrap();
    let lease = json_of(&output);
    let secret = lease["secret"].as_str().unwrap().to_string();
    let handle = format!("{}.{secret}", lease["token"]);
    assert_eq!(lease["handle"], handle.as_str());
    // Nothing shown to other parties carries the secret.
    let status = s.cmd().args(["status", "--json"]).output().unwrap();
    let table = s.cmd().arg("status").output().unwrap();
    let held = s
        .cmd()
        .args(["claim", "--lock", "x", "--json"])
        .output()
        .unwrap();
    for shown in [&status.stdout, &table.stdout, &held.stdout, &held.stderr] {
        assert!(
            !String::from_utf8_lossy(shown).contains(&secret),
            "the secret leaked: {}",
            String::from_utf8_lossy(shown)
        );
    }
    s.cmd()
        .args(["release", "--lock", "x", &handle])
        .assert()
        .code(0);
}

#[cfg(unix)]
#[test]
fn runs_child_renews_and_releases_its_own_lease() {
    let s = Scratch::new();
    // The child's token alone is refused like anyone's; its handle works.
    let script = r#""$FP" release --lock x "$FENCEPOST_TOKEN" 2> token-refused.txt && exit 90
        "$FP" renew --lock x "$FENCEPOST_LEASE" > renewed.txt || exit 91
        "$FP" release --lock x "$FENCEPOST_LEASE" || exit 92
        exit 7"#;
    let output = s
        .cmd()
        .env("FP", crate::util::bin())
        .args(["run", "--lock", "x", "--", "sh", "-c", script])
        .output()
        .unwrap();
    // The child's own release is not a lost lease: run exits with its code.
    assert_eq!(output.status.code(), Some(7), "{output:?}");
    assert!(output.stderr.is_empty(), "{output:?}");
    let refused = std::fs::read_to_string(s.path().join("token-refused.txt")).unwrap();
    assert!(refused.contains("a token is public"), "{refused}");
    let renewed = std::fs::read_to_string(s.path().join("renewed.txt")).unwrap();
    assert!(renewed.starts_with("1."), "{renewed}");
    assert_eq!(s.entry("x").unwrap()["state"], "released");
}

#[test]
fn break_tells_a_claim_holder_at_its_next_renew_and_check() {
    let s = Scratch::new();
    let (token, handle) = s.claim_handle("db:migrations", &["--owner", "agent-a"]);
    let broke = s
        .cmd()
        .args(["break", "--lock", "db:migrations", "--owner", "ops"])
        .args(["--reason", "agent-a is wedged; migrating by hand"])
        .output()
        .unwrap();
    assert_eq!(broke.status.code(), Some(0), "{broke:?}");
    let said = String::from_utf8_lossy(&broke.stdout);
    assert!(
        said.contains("agent-a") && said.contains(&format!("token {token}")),
        "{said}"
    );

    let told = "broken by ops";
    let when_why = regex_like_timestamp_and_reason();
    for args in [
        vec!["renew", "--lock", "db:migrations", handle.as_str()],
        vec!["check", "--lock", "db:migrations", &token.to_string()],
        vec!["release", "--lock", "db:migrations", handle.as_str()],
    ]
    .iter()
    {
        let output = s.cmd().args(args).output().unwrap();
        assert_eq!(output.status.code(), Some(3), "{args:?}: {output:?}");
        let stderr = one_line_stderr(&output);
        assert!(stderr.contains(told), "{args:?}: {stderr}");
        assert!(when_why(&stderr), "{args:?}: {stderr}");
    }
    // Status shows it while the tombstone is newest: the table and JSON.
    let entry = s.entry("db:migrations").unwrap();
    assert_eq!(entry["state"], "broken");
    assert_eq!(entry["live"], false);
    assert_eq!(
        entry["broken"]["reason"],
        "agent-a is wedged; migrating by hand"
    );
    assert!(entry["broken"]["by"].as_str().unwrap().starts_with("ops"));
    let table = s.cmd().arg("status").output().unwrap();
    let table = String::from_utf8(table.stdout).unwrap();
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("lock:db:migrations ") && l.contains(" broken ")),
        "{table}"
    );
    assert!(
        table.lines().any(|l| l.contains(told) && when_why(l)),
        "{table}"
    );
    // The next claim gets a higher token.
    let next = s.claim("db:migrations", &[]);
    assert!(next > token, "{next} after {token}");
}

/// "at 2026-12-01T12:30:05Z: agent-a is wedged; migrating by hand".
fn regex_like_timestamp_and_reason() -> impl Fn(&str) -> bool {
    |text: &str| {
        let Some(at) = text.find(" at ") else {
            return false;
        };
        let stamp = &text[at + 4..];
        stamp.len() > 22
            && stamp.as_bytes()[4] == b'-'
            && stamp.as_bytes()[10] == b'T'
            && stamp[19..].starts_with("Z: agent-a is wedged; migrating by hand")
    }
}

#[test]
fn break_of_a_free_resource_exits_3() {
    let s = Scratch::new();
    let nothing = |s: &Scratch| {
        let output = s
            .cmd()
            .args(["break", "--lock", "x", "--reason", "cleanup"])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(3), "{output:?}");
        assert!(one_line_stderr(&output).contains("nothing to break"));
    };
    nothing(&s);
    let handle = s.claim_handle("x", &[]).1;
    s.cmd()
        .args(["release", "--lock", "x", &handle])
        .assert()
        .code(0);
    nothing(&s);
    // Expired: nothing to break either.
    expired_claim_through_the_library(&s, "x");
    assert_eq!(s.entry("x").unwrap()["state"], "expired");
    nothing(&s);
    // --reason is required, and must be one printable line.
    s.claim("x", &[]);
    for args in [
        &["break", "--lock", "x"][..],
        &["break", "--lock", "x", "--reason", ""],
        &["break", "--lock", "x", "--reason", "a\nb"],
    ] {
        let output = s.cmd().args(args).output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{args:?}: {output:?}");
        one_line_stderr(&output);
    }
    assert_eq!(s.entry("x").unwrap()["state"], "held", "nothing was broken");
    // Broken already: nothing to break, and the message says a break is one reason.
    s.cmd()
        .args(["break", "--lock", "x", "--reason", "wedged"])
        .assert()
        .code(0);
    let output = s
        .cmd()
        .args(["break", "--lock", "x", "--reason", "again"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    assert!(
        one_line_stderr(&output).contains("already broken"),
        "{output:?}"
    );
}

/// The holder is a `run`: it reports the break with the reason while its child
/// still runs (its keepalive watches the lease between renewals), and exits 3.
#[cfg(unix)]
#[test]
fn break_tells_a_run_holder_with_the_reason() {
    let s = Scratch::new();
    let script = r#"echo started > started
        i=0
        while [ ! -e go ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done
        exit 0"#;
    let mut run = s.spawn_cmd();
    // `--on-loss keep` so the child still runs however slowly the report is read.
    run.args(["run", "--owner", "agent-a", "--lock", "x", "--ttl", "900"])
        .args(["--on-loss", "keep"])
        .args(["--", "sh", "-c", script])
        .stderr(Stdio::piped());
    let mut child = Background::spawn(&mut run);
    // The child runs once the lease is confirmed (a break before that would only
    // make run claim again, as any free resource would).
    let started = s.path().join("started");
    wait_until("the child started", Duration::from_secs(10), || {
        started.exists()
    });
    let token = s.entry("x").unwrap()["token"].as_u64().unwrap();
    s.cmd()
        .args([
            "break",
            "--lock",
            "x",
            "--owner",
            "ops",
            "--reason",
            "stuck for an hour",
        ])
        .assert()
        .code(0);
    let first = child.first_stderr_line("reporting the break");
    assert!(
        child.0.try_wait().unwrap().is_none(),
        "the break was reported only after the child ended: {first}"
    );
    assert!(
        first.starts_with("fencepost: lease on x lost: broken by ops")
            && first.contains(": stuck for an hour; "),
        "{first}"
    );
    std::fs::write(s.path().join("go"), b"").unwrap();
    assert_eq!(child.0.wait().unwrap().code(), Some(3));
    assert!(s.claim("x", &[]) > token);
}

#[test]
fn break_json_names_the_broken_holder() {
    let s = Scratch::new();
    let token = s.claim("x", &["--owner", "agent-a"]);
    let output = s
        .cmd()
        .args(["break", "--lock", "x", "--reason", "r", "--json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let verdict = json_of(&output);
    assert_eq!(verdict["ok"], true);
    assert_eq!(verdict["token"], token);
    assert_eq!(verdict["holder"]["owner"], "agent-a");
}

/// `claim --hold` prints the handle; the holder's other process releasing through
/// it ends the hold without a loss (exit 0, nothing on stderr), and another agent's
/// bare token leaves the hold running.
#[cfg(unix)]
#[test]
fn a_hold_released_through_its_handle_ends_quietly() {
    let s = Scratch::new();
    let (mut hold, handle) = s.hold("x", 30_000, true);
    let token = crate::util::token_of_handle(&handle).to_string();
    s.cmd()
        .args(["release", "--lock", "x", &token])
        .assert()
        .code(3);
    assert!(hold.0.try_wait().unwrap().is_none(), "the hold ended");
    s.cmd()
        .args(["release", "--lock", "x", &handle])
        .assert()
        .code(0);
    let status = hold.0.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    let stderr = std::io::read_to_string(hold.0.stderr.take().unwrap()).unwrap();
    assert!(stderr.is_empty(), "{stderr:?}");
}

/// Who a break of lock `x` (held by agent-a) records, the break run with no login
/// name in the environment but `logname` as `LOGNAME`, and `break_args` after
/// `break --lock x --reason wedged`.
fn broken_by(logname: Option<&str>, break_args: &[&str]) -> serde_json::Value {
    let s = Scratch::new();
    s.claim_handle("x", &["--owner", "agent-a"]);
    let mut cmd = s.cmd();
    cmd.env_remove("USER")
        .env_remove("USERNAME")
        .env_remove("LOGNAME");
    if let Some(name) = logname {
        cmd.env("LOGNAME", name);
    }
    let broke = cmd
        .args(["break", "--lock", "x", "--reason", "wedged"])
        .args(break_args)
        .output()
        .unwrap();
    assert_eq!(broke.status.code(), Some(0), "{broke:?}");
    let entry = s.entry("x").unwrap();
    assert_eq!(entry["state"], "broken");
    entry["broken"]["by"].clone()
}

/// `break --owner` records the login name beside the owner when it says more, from
/// `$USER`, else `$LOGNAME` (a new user's find: with only `LOGNAME` set, none was
/// recorded, though the help promised it).
#[test]
fn a_break_records_the_login_name_from_logname_too() {
    assert_eq!(
        broken_by(Some("alice"), &["--owner", "ops"]),
        "ops (user alice)"
    );
}

/// With no login name in the environment (`USER`, `LOGNAME`, `USERNAME` all unset,
/// as in many containers) a break records the user id on POSIX (a new user's find:
/// "broken by cli" named nobody).
#[cfg(unix)]
#[test]
fn a_break_without_a_login_name_records_the_user_id() {
    let uid = std::process::Command::new("id").arg("-u").output().unwrap();
    let uid = String::from_utf8(uid.stdout).unwrap();
    assert_eq!(broken_by(None, &[]), format!("cli (uid {})", uid.trim()));
}
