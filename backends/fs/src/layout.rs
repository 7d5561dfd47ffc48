//! Names inside the store (format v1, `docs/format-v1.md`).
//!
//! ```text
//! <root>/claims/<key>/g00000001.json      one record per generation
//! <root>/claims/<key>/.stage-<pid>-<hex>.tmp   a create in progress (or left by a crash)
//! ```

use std::time::Duration;

/// The directory under the store root that holds one directory per key.
pub(crate) const CLAIMS_DIR: &str = "claims";

/// Staging files start with this; the leading dot keeps them out of the record
/// pattern and out of casual `ls` output.
pub(crate) const STAGE_PREFIX: &str = ".stage-";
/// Staging files end with this.
pub(crate) const STAGE_SUFFIX: &str = ".tmp";

/// A staging file older than this is taken as left behind by a crash and removed
/// when a listing passes by. Removing one that is still in use is safe: its writer's
/// hard link fails with "not found", an error, and the protocol re-reads (docs/protocol.md I4).
pub(crate) const STALE_STAGING_AGE: Duration = Duration::from_secs(10 * 60);

/// The file name of record `generation`: `g` + the decimal number zero-padded to at
/// least 8 digits + `.json`.
pub(crate) fn record_file_name(generation: u64) -> String {
    format!("g{generation:08}.json")
}

/// The generation named by `name`, or `None` for anything that is not exactly a
/// record name as [`record_file_name`] writes it: wrong prefix or suffix, fewer than 8
/// digits, non-digits, extra leading zeros (`g000000001.json` would be a second name
/// for generation 1), generation 0, or a number that does not fit in a `u64`.
pub(crate) fn parse_record_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix('g')?.strip_suffix(".json")?;
    if digits.len() < 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if digits.len() > 8 && digits.starts_with('0') {
        return None;
    }
    let generation: u64 = digits.parse().ok()?;
    (generation > 0).then_some(generation)
}

/// The generation `name` names when ASCII case is ignored (`G00000002.JSON` is 2),
/// for filesystems that match names that way, where such a name occupies the record
/// name (`docs/format-v1.md` §2). `None` for anything that is not a record name in
/// some case.
pub(crate) fn parse_record_file_name_any_case(name: &str) -> Option<u64> {
    parse_record_file_name(&name.to_ascii_lowercase())
}

/// A fresh staging file name: `.stage-<pid>-<16 hex digits>.tmp`.
pub(crate) fn staging_file_name() -> String {
    format!(
        "{STAGE_PREFIX}{}-{:016x}{STAGE_SUFFIX}",
        std::process::id(),
        fencepost::nonce()
    )
}

/// Whether `name` is a staging file name (of any process).
pub(crate) fn is_staging_file_name(name: &str) -> bool {
    name.len() > STAGE_PREFIX.len() + STAGE_SUFFIX.len()
        && name.starts_with(STAGE_PREFIX)
        && name.ends_with(STAGE_SUFFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_names_round_trip() {
        // docs/protocol.md §5: `g` + at least 8 zero-padded digits; the number is parsed.
        assert_eq!(record_file_name(1), "g00000001.json");
        assert_eq!(record_file_name(123_456_789), "g123456789.json");
        assert_eq!(record_file_name(u64::MAX), format!("g{}.json", u64::MAX));
        for generation in [1, 9, 10, 99_999_999, 100_000_000, 123_456_789, u64::MAX] {
            assert_eq!(
                parse_record_file_name(&record_file_name(generation)),
                Some(generation)
            );
        }
    }

    #[test]
    fn foreign_names_are_not_records() {
        for name in [
            "g1.json",
            "g0000001.json",
            "g000000001.json",
            "g00000000.json",
            "g00000001.json.bak",
            "g12.json.bak",
            "gabc.json",
            "gabcdefgh.json",
            "G00000001.json",
            "g00000001.JSON",
            "g+0000001.json",
            "g-0000001.json",
            "g 0000001.json",
            "g99999999999999999999.json",
            "notes.txt",
            ".stage-1-0123456789abcdef.tmp",
            "",
        ] {
            assert_eq!(parse_record_file_name(name), None, "{name:?}");
        }
    }

    #[test]
    fn record_names_in_another_case_name_their_generation() {
        assert_eq!(parse_record_file_name_any_case("G00000002.JSON"), Some(2));
        assert_eq!(parse_record_file_name_any_case("g00000002.Json"), Some(2));
        assert_eq!(parse_record_file_name_any_case("g00000002.json"), Some(2));
        for name in [
            "G0000002.JSON",
            "G000000002.JSON",
            "G00000000.JSON",
            "H00000002.JSON",
        ] {
            assert_eq!(parse_record_file_name_any_case(name), None, "{name:?}");
        }
    }

    #[test]
    fn staging_names_never_look_like_records() {
        let name = staging_file_name();
        assert!(is_staging_file_name(&name), "{name}");
        assert_eq!(parse_record_file_name(&name), None);
        assert_ne!(staging_file_name(), name, "two staging names collided");
        assert!(!is_staging_file_name(".stage-.tmp"));
        assert!(!is_staging_file_name("g00000001.json"));
    }
}
