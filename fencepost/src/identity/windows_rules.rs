//! Windows spelling rules as pure functions on text (docs/protocol.md §6), so every platform's
//! test run proves them; on Windows they are applied to the path that
//! `std::fs::canonicalize` (or the deepest-existing-ancestor walk) produced.
//!
//! The steps run in this order, and the order matters:
//!
//! 1. **Prefix, on the raw text.** A leading pair of separators (`\\` or `//`, in any
//!    mix) is recognised *before* separators are collapsed — collapsing first would
//!    turn the UNC path `\\server\share\x` into the rooted path `\server\share\x` on
//!    the current drive, a different file. `\\?\` and `\\.\` (verbatim and device
//!    prefixes) are stripped; `\\?\UNC\server\share` is the UNC path
//!    `\\server\share`; `\\?\C:` and `\\.\C:` are the drive `C:`.
//! 2. **Loopback admin shares.** `\\localhost\c$\x`, `\\127.0.0.1\c$\x` (any
//!    127.0.0.0/8 address) and `\\::1\c$\x` are the local drive `C:\x`.
//! 3. **Components.** Both `\` and `/` separate; empty components (repeated
//!    separators, a trailing separator) and `.` are dropped; `..` removes the
//!    previous component and never climbs above the root; trailing dots and spaces
//!    are stripped from each component (Win32 does this on open; a component that
//!    becomes empty is dropped).
//! 4. **Case.** The whole text is NFC-normalized and lowercased
//!    ([`super::fold`]), which also folds the drive letter.
//!
//! Every doubtful step merges: Win32 keeps trailing dots under `\\?\` and NTFS does
//! not normalize Unicode, so `\\?\C:\a.` and `C:\a` (or an NFC and an NFD name) may
//! be two files on disk; here they are one key. A false contention clears itself when
//! the lease ends; a split key would give two writers each an uncontested lease.
//!
//! Not covered (see `docs/design-02-resource-identity.md`): the machine's own host
//! name as a UNC server (`\\MYPC\c$`), mapped drive letters versus their UNC target,
//! 8.3 short names of files that do not exist yet, alternate data streams.

// On non-Windows targets only the unit tests call these functions.
#![cfg_attr(not(windows), allow(dead_code))]

use std::net::IpAddr;

/// Where a Windows path is rooted, after the prefix rules.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Root {
    /// A drive letter (`C:`), stored uppercase.
    Disk(char),
    /// `\\server\share`.
    Unc { server: String, share: String },
    /// Another `\\?\` or `\\.\` device (`\\?\Volume{…}`, `\\.\pipe`): kept by name.
    Device(String),
    /// A single leading separator: the root of the current drive.
    Rooted,
    /// No root at all (only seen if a caller passes a relative path).
    Relative,
}

fn is_separator(c: char) -> bool {
    c == '\\' || c == '/'
}

/// The canonical text of a Windows path: prefix, loopback, components, case — in
/// that order (see the module docs). Two spellings of one file give one string.
pub(crate) fn normalize(path: &str) -> String {
    let (root, rest) = split_root(path);
    let root = loopback_admin_share(root);
    let components = components(rest);
    let mut text = match &root {
        Root::Disk(letter) => format!("{letter}:\\"),
        Root::Unc { server, share } => format!("\\\\{server}\\{share}\\"),
        Root::Device(name) => format!("\\\\?\\{name}\\"),
        Root::Rooted => "\\".to_string(),
        Root::Relative => String::new(),
    };
    text.push_str(&components.join("\\"));
    super::fold(&text)
}

/// Step 1: recognises the prefix on the raw text and returns the root and the rest.
fn split_root(path: &str) -> (Root, &str) {
    let mut chars = path.chars();
    let first = chars.next();
    let second = chars.next();
    if first.is_some_and(is_separator) && second.is_some_and(is_separator) {
        let after = &path[2..];
        let mut rest_chars = after.chars();
        let marker = rest_chars.next();
        let marker_sep = rest_chars.next();
        if matches!(marker, Some('?' | '.')) && marker_sep.is_some_and(is_separator) {
            // `\\?\` or `\\.\`: a verbatim or device path.
            let inner = &after[2..];
            if let Some(unc) = strip_prefix_ignore_case(inner, "UNC")
                .filter(|r| r.chars().next().is_some_and(is_separator))
            {
                return unc_root(&unc[1..]);
            }
            if let Some((letter, rest)) = drive(inner) {
                return (Root::Disk(letter), rest);
            }
            let (name, rest) = split_first_component(inner);
            return (Root::Device(name.to_string()), rest);
        }
        return unc_root(after);
    }
    if let Some((letter, rest)) = drive(path) {
        return (Root::Disk(letter), rest);
    }
    if first.is_some_and(is_separator) {
        return (Root::Rooted, &path[1..]);
    }
    (Root::Relative, path)
}

/// `server\share\rest` (after the leading `\\`): the UNC root and the rest. Repeated
/// separators between server and share are tolerated.
fn unc_root(text: &str) -> (Root, &str) {
    let text = text.trim_start_matches(is_separator);
    let (server, rest) = split_first_component(text);
    let rest = rest.trim_start_matches(is_separator);
    let (share, rest) = split_first_component(rest);
    (
        Root::Unc {
            server: server.to_string(),
            share: share.to_string(),
        },
        rest,
    )
}

/// `C:rest` → (`C`, `rest`).
fn drive(text: &str) -> Option<(char, &str)> {
    let mut chars = text.chars();
    let letter = chars.next().filter(char::is_ascii_alphabetic)?;
    (chars.next() == Some(':')).then(|| (letter.to_ascii_uppercase(), &text[2..]))
}

fn split_first_component(text: &str) -> (&str, &str) {
    match text.find(is_separator) {
        Some(at) => (&text[..at], &text[at..]),
        None => (text, ""),
    }
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

/// Step 2: `\\localhost\c$` and `\\127.0.0.1\c$` are the local drive `C:`.
fn loopback_admin_share(root: Root) -> Root {
    let Root::Unc { server, share } = &root else {
        return root;
    };
    let mut share_chars = share.chars();
    let (Some(letter), Some('$'), None) =
        (share_chars.next(), share_chars.next(), share_chars.next())
    else {
        return root;
    };
    if letter.is_ascii_alphabetic() && is_loopback_host(server) {
        Root::Disk(letter.to_ascii_uppercase())
    } else {
        root
    }
}

fn is_loopback_host(server: &str) -> bool {
    let server = server.trim_start_matches('[').trim_end_matches(']');
    server.eq_ignore_ascii_case("localhost")
        || server.eq_ignore_ascii_case("0--1.ipv6-literal.net")
        || server.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Step 3: components split on both separators; empty and `.` dropped, `..` applied
/// without climbing above the root, trailing dots and spaces stripped.
fn components(rest: &str) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for component in rest.split(is_separator) {
        match component {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            other => {
                let stripped = other.trim_end_matches(['.', ' ']);
                if !stripped.is_empty() {
                    out.push(stripped);
                }
            }
        }
    }
    out
}

/// The Windows devices whose names open the device in every directory.
const DEVICES: [&str; 30] = [
    "CON", "PRN", "AUX", "NUL", "COM1", "COM2", "COM3", "COM4", "COM5", "COM6", "COM7", "COM8",
    "COM9", "COM¹", "COM²", "COM³", "LPT1", "LPT2", "LPT3", "LPT4", "LPT5", "LPT6", "LPT7", "LPT8",
    "LPT9", "LPT¹", "LPT²", "LPT³", "CONIN$", "CONOUT$",
];

/// The Windows device that the file name `name` (one path component) opens instead
/// of a file, if any: `CON`, `PRN`, `AUX`, `NUL`, `COM1`–`COM9`, `LPT1`–`LPT9` (also
/// with a superscript digit), `CONIN$`, `CONOUT$`, in any case, also followed by an
/// extension, a stream (`:`) or trailing spaces (`NUL.json`, `con .txt`, `Com1:`).
///
/// Windows 10 (and Wine, which CI runs) reads all of these as the device in every
/// directory: a "file" `NUL.json` swallows what is written to it. Windows 11 no longer
/// does for names with an extension; the bias is to refuse those too. A pure function
/// on text, tested on every platform; the CLI refuses such a file resource and the
/// MCP server such a `write` path on Windows only (docs/windows.md).
pub fn reserved_device_name(name: &str) -> Option<&'static str> {
    let stem = name
        .split(['.', ':'])
        .next()
        .unwrap_or(name)
        .trim_end_matches(' ');
    DEVICES
        .iter()
        .copied()
        .find(|device| device.eq_ignore_ascii_case(stem))
}

#[cfg(test)]
mod tests {
    use super::normalize;

    #[test]
    fn reserved_device_names_are_recognised_in_any_spelling() {
        use super::reserved_device_name;
        for (name, device) in [
            ("CON", "CON"),
            ("con", "CON"),
            ("NUL.json", "NUL"),
            ("nul.tar.gz", "NUL"),
            ("con .txt", "CON"),
            ("Com1:", "COM1"),
            ("lpt9.log", "LPT9"),
            ("com¹", "COM¹"),
            ("conin$", "CONIN$"),
            ("AUX", "AUX"),
        ] {
            assert_eq!(reserved_device_name(name), Some(device), "{name:?}");
        }
        for name in [
            "CONFIG",
            "console.txt",
            "nul_x",
            "COM0",
            "COM10",
            "LPT",
            "a.con",
            " con",
            "",
            "null",
        ] {
            assert_eq!(reserved_device_name(name), None, "{name:?}");
        }
    }

    /// Groups of spellings: every spelling in a group names one file, and no two
    /// groups do (docs/protocol.md §6, Windows spelling rules).
    const SAME_FILE: &[&[&str]] = &[
        &[
            r"C:\work\a.txt",
            r"c:\work\a.txt",             // drive-letter case
            r"C:\Work\A.TXT",             // case folding
            r"C:/work/a.txt",             // forward slashes
            r"C:\work//a.txt",            // repeated separators collapse
            r"C:\work\.\a.txt",           // `.`
            r"C:\work\sub\..\a.txt",      // `..`
            r"C:\..\work\a.txt",          // `..` never climbs above the root
            r"C:\work\a.txt.",            // trailing dot
            r"C:\work\a.txt . .",         // trailing dots and spaces
            r"C:\work.\a.txt",            // on an inner component too
            r"C:\work\a.txt\",            // trailing separator
            r"\\?\C:\work\a.txt",         // verbatim prefix
            r"\\.\C:\work\a.txt",         // device prefix
            r"//?/C:/work/a.txt",         // prefix spelled with forward slashes
            r"\\localhost\c$\work\a.txt", // loopback admin share
            r"\\LOCALHOST\C$\work\a.txt",
            r"\\127.0.0.1\c$\work\a.txt",
            r"\\127.1.2.3\c$\work\a.txt", // all of 127.0.0.0/8 is loopback
            r"\\[::1]\c$\work\a.txt",
            r"\\0--1.ipv6-literal.net\c$\work\a.txt",
            r"\\?\UNC\localhost\c$\work\a.txt", // verbatim UNC to the loopback share
        ],
        &[
            r"\\server\share\dir\f",
            r"\\SERVER\Share\DIR\F",
            r"//server/share/dir/f", // a leading `//` is UNC too
            r"\\server\share\\dir\f",
            r"\\?\UNC\server\share\dir\f",
            r"\\?\unc\server\share\dir\f",
            r"\\.\UNC\server\share\dir\f",
            r"\\server\share\dir\f.",
        ],
        // A rooted path on the current drive: what `\\server\share` would become if
        // separators were collapsed before the UNC prefix was recognised.
        &[r"\server\share\dir\f", r"/server/share/dir/f"],
        &[r"D:\work\a.txt", r"\\localhost\d$\work\a.txt"],
        // Another machine's admin share is not the local drive.
        &[r"\\otherpc\c$\work\a.txt"],
        &[r"\\server\other\dir\f"],
        &[r"C:\work\b.txt"],
        &[
            r"\\?\Volume{0b1c}\work\a.txt",
            r"\\?\volume{0B1C}\work\a.txt.",
        ],
    ];

    #[test]
    fn spellings_of_one_file_normalize_to_one_text() {
        for group in SAME_FILE {
            let first = normalize(group[0]);
            for spelling in group.iter() {
                assert_eq!(normalize(spelling), first, "{spelling} vs {}", group[0]);
            }
        }
    }

    #[test]
    fn different_files_stay_different() {
        let canon: Vec<String> = SAME_FILE.iter().map(|g| normalize(g[0])).collect();
        for (i, a) in canon.iter().enumerate() {
            for b in &canon[i + 1..] {
                assert_ne!(a, b, "two groups merged");
            }
        }
    }

    #[test]
    fn the_unc_prefix_is_recognised_before_separators_collapse() {
        assert_eq!(normalize(r"\\server\share\x"), r"\\server\share\x");
        assert_eq!(normalize(r"\server\share\x"), r"\server\share\x");
        assert_eq!(normalize(r"\\?\C:\Work\A."), r"c:\work\a");
    }

    #[test]
    fn unicode_names_fold_to_nfc_lowercase() {
        assert_eq!(
            normalize("C:\\Caf\u{c9}\\x"),
            normalize("c:\\cafe\u{301}\\x")
        );
    }
}
