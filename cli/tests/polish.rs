//! What a new user trips on (issue 19): lock-name folding, messages, conveniences.
//! Each test goes through the real binary and failed before its fix.

use crate::util::{Scratch, one_line_stderr};

/// Claims `first`, then tries `second`; the second claim's exit code (3 = one lock).
fn second_claim_exit(first: &str, second: &str) -> i32 {
    let s = Scratch::new();
    s.claim(first, &["--ttl", "60000"]);
    let output = s
        .cmd()
        .args(["claim", "--lock", second, "--ttl", "60000"])
        .output()
        .unwrap();
    output.status.code().expect("exited")
}

#[test]
fn lock_names_use_full_case_folding() {
    // docs/protocol.md §6: case-folded, not lowercased.
    assert_eq!(second_claim_exit("Straße", "STRASSE"), 3, "ß folds to ss");
    assert_eq!(second_claim_exit("σας", "ΣΑΣ"), 3, "final sigma folds to σ");
    assert_eq!(
        second_claim_exit("ﬁle", "FILE"),
        3,
        "the fi ligature folds to fi"
    );
    assert_eq!(second_claim_exit("db:migrations", "db:seeds"), 0);
}

#[test]
fn invisible_characters_do_not_split_a_lock() {
    // docs/protocol.md §6, merge bias: names that look the same are one lock.
    for invisible in [
        "db:\u{200B}migrations",
        "db:mig\u{200D}rations",
        "\u{202E}db:migrations",
        "db:migrations\u{FEFF}",
    ] {
        assert_eq!(
            second_claim_exit("db:migrations", invisible),
            3,
            "{invisible:?}"
        );
    }
}

#[test]
fn a_lock_name_of_only_invisible_characters_is_refused() {
    let s = Scratch::new();
    let output = s
        .cmd()
        .args(["claim", "--lock", "\u{200B}\u{200D}"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        one_line_stderr(&output).contains("no visible characters"),
        "{output:?}"
    );
}
