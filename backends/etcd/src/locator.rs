//! The store URL: `etcd://host:port[,host2:port2…]/prefix`.

use std::fmt;

/// The port etcd's client API listens on by default.
pub const DEFAULT_PORT: u16 = 2379;

/// The key prefix used when the URL has no path.
pub const DEFAULT_PREFIX: &str = "/fencepost";

/// A parsed store URL: where etcd answers and under which key prefix the store lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdUrl {
    /// `host:port` of each member to talk to, in failover order.
    pub endpoints: Vec<String>,
    /// The key prefix, starting with `/` and without a trailing `/` (`/t`).
    pub prefix: String,
}

/// Why a store URL was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlError(pub String);

impl fmt::Display for UrlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UrlError {}

/// `true` when `text` names an etcd store (starts with `etcd://`, any case), so a
/// caller can choose the backend before parsing.
pub fn is_etcd_url(text: &str) -> bool {
    text.get(..7)
        .is_some_and(|s| s.eq_ignore_ascii_case("etcd://"))
}

/// `text` with any user name and password in its authority replaced by `…`
/// (`etcd://…@host/p`), for messages: a refused URL was echoed whole, password and
/// all, twice (a breaker). Anything that is not an etcd URL with a `@` before its
/// path is returned unchanged.
pub fn redacted(text: &str) -> String {
    if !is_etcd_url(text) {
        return text.to_string();
    }
    let rest = &text[7..];
    let end = rest.find('/').unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) => format!("{}…{}", &text[..7], &rest[at..]),
        None => text.to_string(),
    }
}

impl EtcdUrl {
    /// Parses `etcd://host[:port][,host[:port]…][/prefix]`.
    ///
    /// Hosts are names, IPv4 addresses or bracketed IPv6 addresses (`[::1]:2379`);
    /// the port defaults to 2379; the prefix defaults to `/fencepost`. The prefix may
    /// hold letters, digits and `-._~/`. It is normalized like a path, so that one
    /// store has one prefix however it is spelled: empty segments, trailing slashes and
    /// `.` segments are dropped, and `..` removes the segment before it (`/./pfx`,
    /// `/pfx/`, `/x/../pfx` are all `/pfx`); a `..` above the root is refused. There is
    /// no TLS and no authentication (see the crate docs).
    pub fn parse(text: &str) -> Result<EtcdUrl, UrlError> {
        let shown = redacted(text);
        let bad = |why: &str| UrlError(format!("bad etcd store URL '{shown}': {why}"));
        if !is_etcd_url(text) {
            return Err(bad("it must start with etcd://"));
        }
        let rest = &text[7..];
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if authority.contains('@') {
            return Err(bad("credentials in the URL are not supported"));
        }
        let mut endpoints = Vec::new();
        for part in authority.split(',') {
            let part = part.trim();
            if part.is_empty() {
                return Err(bad("an empty endpoint (expected host:port[,host:port…])"));
            }
            endpoints.push(parse_endpoint(part).map_err(|why| bad(&why))?);
        }
        let mut segments: Vec<&str> = Vec::new();
        for segment in path.split('/').filter(|s| !s.is_empty()) {
            if !segment
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-._~".contains(c))
            {
                return Err(bad(
                    "the prefix may only hold letters, digits, '-', '.', '_', '~' and '/'",
                ));
            }
            // Two spellings of one prefix must not be two stores (issue 19).
            match segment {
                "." => {}
                ".." => {
                    if segments.pop().is_none() {
                        return Err(bad("the prefix climbs above the root with '..'"));
                    }
                }
                _ => segments.push(segment),
            }
        }
        let prefix = if segments.is_empty() {
            DEFAULT_PREFIX.to_string()
        } else {
            format!("/{}", segments.join("/"))
        };
        Ok(EtcdUrl { endpoints, prefix })
    }
}

fn parse_endpoint(part: &str) -> Result<String, String> {
    let (host, port) = if let Some(stripped) = part.strip_prefix('[') {
        let end = stripped
            .find(']')
            .ok_or_else(|| format!("unclosed '[' in endpoint '{part}'"))?;
        let host = &part[..end + 2];
        match &stripped[end + 1..] {
            "" => (host, None),
            tail => match tail.strip_prefix(':') {
                Some(port) => (host, Some(port)),
                None => return Err(format!("junk after ']' in endpoint '{part}'")),
            },
        }
    } else {
        match part.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (part, None),
        }
    };
    if host.is_empty()
        || !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._[]:".contains(c))
    {
        return Err(format!("bad host in endpoint '{part}'"));
    }
    let port = match port {
        None => DEFAULT_PORT,
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("bad port in endpoint '{part}'"))?,
    };
    Ok(format!("{host}:{port}"))
}

impl fmt::Display for EtcdUrl {
    /// The normalized URL, which [`EtcdUrl::parse`] reads back unchanged.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "etcd://{}{}", self.endpoints.join(","), self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_endpoints_ports_and_prefix() {
        let url = EtcdUrl::parse("etcd://127.0.0.1:2379,h2,[::1]:4000/t/x/").unwrap();
        assert_eq!(url.endpoints, ["127.0.0.1:2379", "h2:2379", "[::1]:4000"]);
        assert_eq!(url.prefix, "/t/x");
        assert_eq!(
            url.to_string(),
            "etcd://127.0.0.1:2379,h2:2379,[::1]:4000/t/x"
        );
        assert_eq!(EtcdUrl::parse(&url.to_string()).unwrap(), url);
    }

    #[test]
    fn prefixes_are_normalized_like_paths() {
        for spelling in ["/./pfx", "/pfx/../pfx", "//pfx//", "/a/b/../../pfx/."] {
            let url = EtcdUrl::parse(&format!("etcd://h{spelling}")).unwrap();
            assert_eq!(url.prefix, "/pfx", "{spelling}");
        }
        assert!(EtcdUrl::parse("etcd://h/../pfx").is_err());
        assert!(EtcdUrl::parse("etcd://h/pfx/../..").is_err());
    }

    #[test]
    fn default_prefix() {
        assert_eq!(EtcdUrl::parse("ETCD://h").unwrap().prefix, DEFAULT_PREFIX);
        assert_eq!(EtcdUrl::parse("etcd://h/").unwrap().prefix, DEFAULT_PREFIX);
    }

    /// A refused URL with credentials never shows them (a breaker: the password was
    /// echoed twice on one line).
    #[test]
    fn credentials_are_never_shown() {
        let error = EtcdUrl::parse("etcd://user:s3cret@h:2379/p").unwrap_err();
        assert!(
            !error.0.contains("s3cret") && !error.0.contains("user"),
            "{error}"
        );
        assert!(error.0.contains("etcd://…@h:2379/p"), "{error}");
        let opened = crate::EtcdStore::open("etcd://user:s3cret@h/p").unwrap_err();
        assert!(!opened.to_string().contains("s3cret"), "{opened}");
        assert_eq!(redacted("etcd://h/a@b"), "etcd://h/a@b");
        assert_eq!(redacted("/work/x@y"), "/work/x@y");
    }

    #[test]
    fn refuses_bad_urls() {
        for bad in [
            "http://h:2379/t",
            "etcd:///t",
            "etcd://h:0/t",
            "etcd://h:99999/t",
            "etcd://h,,h2/t",
            "etcd://u:p@h/t",
            "etcd://h/t?x=1",
            "etcd://h/a b",
            "etcd://[::1/t",
        ] {
            assert!(EtcdUrl::parse(bad).is_err(), "{bad} was accepted");
        }
    }
}
