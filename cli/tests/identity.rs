//! Resource identity through the binary (docs/protocol.md §6, issue 5): one file, one key. Each
//! row claims one spelling, then another, and asserts exit 3 (contention) or exit 0
//! (independence). Every row gets a fresh scratch directory and store.

use std::path::Path;

use crate::util::Scratch;

/// `fencepost claim --file|--lock TARGET` in the scratch directory; the exit code.
fn claim(s: &Scratch, kind: &str, target: &str) -> i32 {
    let output = s
        .cmd()
        .args(["claim", kind, target, "--ttl", "60000"])
        .output()
        .unwrap();
    output.status.code().expect("exited")
}

struct Row {
    name: &'static str,
    setup: fn(&Path),
    first: (&'static str, &'static str),
    between: fn(&Path),
    /// `{PWD}` in the target is replaced by the scratch directory.
    second: (&'static str, &'static str),
    /// 3 = contends (held), 0 = independent.
    exit: i32,
}

fn nothing(_: &Path) {}

fn a_txt(root: &Path) {
    std::fs::write(root.join("a.txt"), b"a").unwrap();
    std::fs::create_dir(root.join("sub")).unwrap();
}

#[cfg(unix)]
fn links_to_a(root: &Path) {
    a_txt(root);
    std::os::unix::fs::symlink("a.txt", root.join("link-to-a.txt")).unwrap();
    std::fs::hard_link(root.join("a.txt"), root.join("hardlink-to-a.txt")).unwrap();
    std::fs::create_dir(root.join("real")).unwrap();
    std::os::unix::fs::symlink("real", root.join("alias")).unwrap();
}

const FILE: &str = "--file";
const LOCK: &str = "--lock";

fn rows() -> Vec<Row> {
    vec![
        // Issue 5 acceptance: every spelling of a.txt exits 3.
        Row {
            name: "a.txt then ./sub/../a.txt",
            setup: a_txt,
            first: (FILE, "a.txt"),
            between: nothing,
            second: (FILE, "./sub/../a.txt"),
            exit: 3,
        },
        Row {
            name: "a.txt then $PWD/a.txt",
            setup: a_txt,
            first: (FILE, "a.txt"),
            between: nothing,
            second: (FILE, "{PWD}/a.txt"),
            exit: 3,
        },
        Row {
            name: "a.txt then ./a.txt",
            setup: a_txt,
            first: (FILE, "a.txt"),
            between: nothing,
            second: (FILE, "./a.txt"),
            exit: 3,
        },
        Row {
            name: "a.txt then a.txt/ (trailing slash)",
            setup: a_txt,
            first: (FILE, "a.txt"),
            between: nothing,
            second: (FILE, "a.txt/"),
            exit: 3,
        },
        Row {
            name: "a.txt then b.txt",
            setup: a_txt,
            first: (FILE, "a.txt"),
            between: nothing,
            second: (FILE, "b.txt"),
            exit: 0,
        },
        // Issue 5 acceptance: claimed before it exists, created, claimed again.
        Row {
            name: "new.txt before it exists, created, then ./sub/../new.txt",
            setup: a_txt,
            first: (FILE, "new.txt"),
            between: |root| std::fs::write(root.join("new.txt"), b"n").unwrap(),
            second: (FILE, "./sub/../new.txt"),
            exit: 3,
        },
        Row {
            name: "new.txt before it exists, created, then $PWD/new.txt",
            setup: nothing,
            first: (FILE, "new.txt"),
            between: |root| std::fs::write(root.join("new.txt"), b"n").unwrap(),
            second: (FILE, "{PWD}/new.txt"),
            exit: 3,
        },
        Row {
            name: "NEW.TXT then new.txt (merged: the volume may be case-insensitive)",
            setup: nothing,
            first: (FILE, "NEW.TXT"),
            between: nothing,
            second: (FILE, "new.txt"),
            exit: 3,
        },
        Row {
            name: "NFC then NFD file name",
            setup: nothing,
            first: (FILE, "caf\u{e9}.txt"),
            between: nothing,
            second: (FILE, "cafe\u{301}.txt"),
            exit: 3,
        },
        Row {
            name: "lock `DB:Migrations ` then db:migrations",
            setup: nothing,
            first: (LOCK, "DB:Migrations "),
            between: nothing,
            second: (LOCK, "db:migrations"),
            exit: 3,
        },
        Row {
            name: "lock NFC then NFD",
            setup: nothing,
            first: (LOCK, "\u{c5}ngstr\u{f6}m"),
            between: nothing,
            second: (LOCK, "A\u{30a}ngstro\u{308}m"),
            exit: 3,
        },
        Row {
            name: "a lock named like a path, then the file at that path",
            setup: a_txt,
            first: (LOCK, "{PWD}/a.txt"),
            between: nothing,
            second: (FILE, "{PWD}/a.txt"),
            exit: 0,
        },
        Row {
            name: "a lock named a.txt, then the file a.txt",
            setup: a_txt,
            first: (LOCK, "a.txt"),
            between: nothing,
            second: (FILE, "a.txt"),
            exit: 0,
        },
        #[cfg(unix)]
        Row {
            name: "a.txt then link-to-a.txt (symlink)",
            setup: links_to_a,
            first: (FILE, "a.txt"),
            between: nothing,
            second: (FILE, "link-to-a.txt"),
            exit: 3,
        },
        #[cfg(unix)]
        Row {
            name: "a.txt then hardlink-to-a.txt",
            setup: links_to_a,
            first: (FILE, "a.txt"),
            between: nothing,
            second: (FILE, "hardlink-to-a.txt"),
            exit: 3,
        },
        #[cfg(unix)]
        Row {
            name: "hardlink-to-a.txt then link-to-a.txt",
            setup: links_to_a,
            first: (FILE, "hardlink-to-a.txt"),
            between: nothing,
            second: (FILE, "link-to-a.txt"),
            exit: 3,
        },
        #[cfg(unix)]
        Row {
            name: "real/x.txt then alias/x.txt (symlinked parent directory)",
            setup: links_to_a,
            first: (FILE, "real/x.txt"),
            between: nothing,
            second: (FILE, "alias/x.txt"),
            exit: 3,
        },
        // A breaker: a `..` out of a missing directory, then a symlinked one, was
        // keyed by its spelling: two holders of one file, one subtree twice.
        #[cfg(unix)]
        Row {
            name: "real/x.txt then missing/../alias/x.txt (a climb, then a link)",
            setup: links_to_a,
            first: (FILE, "real/x.txt"),
            between: nothing,
            second: (FILE, "missing/../alias/x.txt"),
            exit: 3,
        },
        #[cfg(unix)]
        Row {
            name: "--dir real then --dir missing/../alias",
            setup: links_to_a,
            first: ("--dir", "real"),
            between: nothing,
            second: ("--dir", "missing/../alias"),
            exit: 3,
        },
        #[cfg(unix)]
        Row {
            name: "a dangling symlink, then the file it points to",
            setup: |root| std::os::unix::fs::symlink("new.txt", root.join("soon")).unwrap(),
            first: (FILE, "soon"),
            between: nothing,
            second: (FILE, "new.txt"),
            exit: 3,
        },
    ]
}

#[test]
fn spellings_of_one_resource_contend_and_others_do_not() {
    let mut failures = Vec::new();
    for row in rows() {
        let s = Scratch::new();
        (row.setup)(s.path());
        let pwd = s.path().to_str().unwrap();
        let first = row.first.1.replace("{PWD}", pwd);
        assert_eq!(
            claim(&s, row.first.0, &first),
            0,
            "{}: first claim",
            row.name
        );
        (row.between)(s.path());
        let second = row.second.1.replace("{PWD}", pwd);
        let got = claim(&s, row.second.0, &second);
        if got != row.exit {
            failures.push(format!("{}: exit {got}, expected {}", row.name, row.exit));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn a_very_long_path_gets_a_short_key_and_contends() {
    let s = Scratch::new();
    let component = "c".repeat(200);
    // Within the 4096 bytes a path may have (18 × 201 bytes and the scratch dir).
    let deep = vec![component.as_str(); 18].join("/");
    let output = s
        .cmd()
        .args(["claim", "--file", &deep, "--json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let json = crate::util::json_of(&output);
    let key = json["key"].as_str().unwrap();
    assert!(key.starts_with("file-") && key.len() == 37, "{key}");
    let respelled = format!("./{}", vec![component.as_str(); 18].join("/./"));
    assert_eq!(claim(&s, FILE, &respelled), 3);
    // Beyond it: refused in one short line, exit 1, alone or with another resource
    // (which printed the whole path ahead of the reason: a breaker).
    let beyond = vec![component.as_str(); 40].join("/");
    for extra in [&[][..], &["--lock", "x"][..]] {
        // Without --store: the store is located for each resource.
        let output = s
            .bare_cmd(s.path())
            .args(["claim", "--file", &beyond])
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1), "{output:?}");
        let said = crate::util::one_line_stderr(&output);
        assert!(said.contains("4096 bytes") && said.len() < 400, "{said}");
    }
}

#[cfg(unix)]
#[test]
fn release_through_one_hard_link_frees_the_other() {
    let s = Scratch::new();
    links_to_a(s.path());
    let output = s.cmd().args(["claim", "--file", "a.txt"]).output().unwrap();
    let token = crate::util::token_of(&output);
    let handle = crate::util::handle_of(&output);
    assert_eq!(claim(&s, FILE, "hardlink-to-a.txt"), 3);
    let check = s
        .cmd()
        .args(["check", "--file", "./a.txt", &token.to_string()])
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(0), "{check:?}");
    let release = s
        .cmd()
        .args(["release", "--file", "a.txt", &handle])
        .output()
        .unwrap();
    assert_eq!(release.status.code(), Some(0), "{release:?}");
    // The other link was never claimed itself, but the file was: said so, not
    // "never claimed" (a breaker).
    let check = s
        .cmd()
        .args(["check", "--file", "hardlink-to-a.txt", &token.to_string()])
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(3), "{check:?}");
    let said = crate::util::one_line_stderr(&check);
    assert!(
        said.contains("this link has never been claimed itself")
            && said.contains("a.txt, and that claim has ended (token 1)")
            && !said.contains("it has never been claimed"),
        "{said}"
    );
    assert_eq!(claim(&s, FILE, "hardlink-to-a.txt"), 0);
}

/// A break through another hard link fences the holder for good: `break --file
/// hardlink-to-a.txt` ends the tenure of the holder of `a.txt` in the file's
/// file-id series alone, and its token no longer passes `check` (it did, until the
/// next claim, while the break said it never would again: a new user), its handle
/// no longer renews or releases (told "broken", not "superseded by token 1"), and
/// `status` shows the row broken. Before the break, a check through the other link
/// says who holds the file and through which link (it said "never been claimed").
#[cfg(unix)]
#[test]
fn a_break_through_another_link_fences_the_holder() {
    let s = Scratch::new();
    links_to_a(s.path());
    let output = s.cmd().args(["claim", "--file", "a.txt"]).output().unwrap();
    let token = crate::util::token_of(&output).to_string();
    let handle = crate::util::handle_of(&output);
    let other_link = s
        .cmd()
        .args(["check", "--file", "hardlink-to-a.txt", &token])
        .output()
        .unwrap();
    assert_eq!(other_link.status.code(), Some(3), "{other_link:?}");
    let line = crate::util::one_line_stderr(&other_link);
    assert!(line.contains("held through another link"), "{line}");
    assert!(line.contains("a.txt"), "{line}");

    let broke = s
        .cmd()
        .args(["break", "--file", "hardlink-to-a.txt", "--reason", "stuck"])
        .output()
        .unwrap();
    assert_eq!(broke.status.code(), Some(0), "{broke:?}");
    // The report names the link the lease was on, then the one typed.
    let said = String::from_utf8_lossy(&broke.stdout);
    let (on, through) = (
        said.find("/a.txt (through").unwrap_or(usize::MAX),
        said.find("hardlink-to-a.txt"),
    );
    assert!(
        on != usize::MAX && through.is_some_and(|t| t > on),
        "the break did not name the holder's link first: {said}"
    );
    let check = s
        .cmd()
        .args(["check", "--file", "a.txt", &token])
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(3), "{check:?}");
    let line = crate::util::one_line_stderr(&check);
    assert!(line.contains("broken") && line.contains("stuck"), "{line}");
    for command in ["renew", "release"] {
        let output = s
            .cmd()
            .args([command, "--file", "a.txt", &handle])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(3), "{command}: {output:?}");
        let line = crate::util::one_line_stderr(&output);
        assert!(line.contains("broken"), "{command}: {line}");
    }
    let rows = s.status();
    let row = rows
        .iter()
        .find(|e| e["label"].as_str().unwrap().ends_with("/a.txt"))
        .unwrap();
    assert_eq!(row["state"], "broken", "{row}");
    assert_eq!(row["live"], false, "{row}");
}

/// The `break` a refusal suggests names the path as its key resolves it: a spelling
/// with `..` and a link in it named the spelling (a breaker was told `break --file
/// /repo/src/missing/../alias/b.rs`).
#[cfg(unix)]
#[test]
fn a_suggested_break_names_the_path_resolved() {
    let s = Scratch::new();
    links_to_a(s.path());
    assert_eq!(claim(&s, FILE, "real/x.txt"), 0);
    let refused = s
        .cmd()
        .args(["claim", "--file", "missing/../alias/x.txt"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(3), "{refused:?}");
    let line = crate::util::one_line_stderr(&refused);
    let real = s.path().canonicalize().unwrap().join("real/x.txt");
    assert!(
        line.contains(&format!("fencepost break --file {} ", real.display())),
        "{line}"
    );
}

/// A name on a claimed path that becomes a symbolic link afterwards (a directory
/// moved away and linked back, a directory made as a link, the claimed name made a
/// link) gives the spelling a new key, whose first claim gets token 1 as the first
/// holder's did: a bare `check` through the spelling passed for both (a breaker).
/// Now a check through such a spelling fails while the claim made under its old
/// key is live; the new claim still checks through the path it resolves to, and a
/// link that was there before the claim changes nothing.
#[cfg(unix)]
#[test]
fn a_name_that_becomes_a_link_fences_checks_through_it() {
    type Step = fn(&Path);
    /// Name, setup, the first claim (kind, path), what makes the link, the second
    /// claim's path, and the path the spelling leads to afterwards.
    type LinkRow = (
        &'static str,
        Step,
        (&'static str, &'static str),
        Step,
        &'static str,
        &'static str,
    );
    let check = |s: &Scratch, kind: &str, target: &str| -> i32 {
        let output = s.cmd().args(["check", kind, target, "1"]).output().unwrap();
        output.status.code().expect("exited")
    };
    let rows: [LinkRow; 4] = [
        (
            "a directory moved away and linked back",
            |root| std::fs::create_dir(root.join("d")).unwrap(),
            (FILE, "d/new.rs"),
            |root| {
                std::fs::rename(root.join("d"), root.join("d2")).unwrap();
                std::os::unix::fs::symlink("d2", root.join("d")).unwrap();
            },
            "d/new.rs",
            "d2/new.rs",
        ),
        (
            "a missing directory made as a link",
            |root| std::fs::create_dir(root.join("src")).unwrap(),
            (FILE, "newdir/a.rs"),
            |root| std::os::unix::fs::symlink("src", root.join("newdir")).unwrap(),
            "src/a.rs",
            "src/a.rs",
        ),
        (
            "the claimed name made a link",
            |root| std::fs::write(root.join("real.txt"), b"r").unwrap(),
            (FILE, "x.txt"),
            |root| std::os::unix::fs::symlink("real.txt", root.join("x.txt")).unwrap(),
            "real.txt",
            "real.txt",
        ),
        (
            "a claimed subtree moved away and linked back",
            |root| std::fs::create_dir(root.join("d")).unwrap(),
            ("--dir", "d"),
            |root| {
                std::fs::rename(root.join("d"), root.join("d2")).unwrap();
                std::os::unix::fs::symlink("d2", root.join("d")).unwrap();
            },
            "d",
            "d2",
        ),
    ];
    for (name, setup, (kind, first), relink, second, real) in rows {
        let s = Scratch::new();
        setup(s.path());
        assert_eq!(claim(&s, kind, first), 0, "{name}: first claim");
        assert_eq!(check(&s, kind, first), 0, "{name}: before the link");
        relink(s.path());
        assert_eq!(claim(&s, kind, second), 0, "{name}: second claim");
        let refused = s.cmd().args(["check", kind, first, "1"]).output().unwrap();
        assert_eq!(refused.status.code(), Some(3), "{name}: the old spelling");
        let said = crate::util::one_line_stderr(&refused);
        assert!(
            said.contains("became a symbolic link after"),
            "{name}: {said}"
        );
        assert!(said.contains("passes for neither"), "{name}: {said}");
        assert_eq!(check(&s, kind, real), 0, "{name}: the path it resolves to");
    }
    // A link that was there before the claim: checks through it pass.
    let s = Scratch::new();
    links_to_a(s.path());
    assert_eq!(claim(&s, FILE, "alias/x.txt"), 0);
    assert_eq!(check(&s, FILE, "alias/x.txt"), 0);
    assert_eq!(check(&s, FILE, "real/x.txt"), 0);
}
