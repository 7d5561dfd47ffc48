//! One key's series: the single-key rules of docs/protocol.md §3.

mod create;
mod judge;
mod queue;
mod sweep;
mod tenure;

pub(crate) use create::Claim;
pub(crate) use judge::Watch;

use std::time::Duration;

use super::{BACKOFF_CAP_MS, BACKOFF_START_MS, CREATE_GRACE_MS, Store};
use crate::record::{self, Decoded, Envelope, Record};
use crate::{Error, Holder, Key, Result};

/// How often `read_newest` re-lists when the newest listed record vanishes before
/// it is read (a concurrent sweep); after that the vanished record counts as torn.
const VANISHED_RELIST_ATTEMPTS: usize = 8;

/// The newest record of a series as read: the highest generation listed (0 for an
/// empty series), and the newest *decodable* record, by which liveness is judged.
///
/// A torn highest record only proves its generation is taken: it may be a create
/// still in progress (a renewal caught half-written), so it is never judged as a
/// vacancy over a live predecessor (docs/design-01-lease-and-fence.md, "torn newest
/// record"; pinned by the checker's `torn_renewal` schedule).
#[derive(Debug)]
pub(crate) struct Newest {
    pub(crate) generation: u64,
    /// The newest decodable record (a v1 record or a newer format) and its
    /// generation; `None` when nothing in the series decodes. Equal to `generation`
    /// unless the highest record is torn.
    pub(crate) judged: Option<(u64, Decoded)>,
    /// The other generations the same listing showed (all below `generation`): what a
    /// sweep above them removes, without listing again.
    pub(crate) below: Vec<u64>,
}

impl Newest {
    pub(crate) fn empty() -> Self {
        Newest {
            generation: 0,
            judged: None,
            below: Vec::new(),
        }
    }

    pub(crate) fn decoded(&self) -> Option<&Decoded> {
        self.judged.as_ref().map(|(_, decoded)| decoded)
    }

    /// True when the highest generation is torn (a create in progress, or a crash
    /// mid-create).
    pub(crate) fn top_is_torn(&self) -> bool {
        self.generation > 0
            && self
                .judged
                .as_ref()
                .is_none_or(|(g, _)| *g != self.generation)
    }

    pub(crate) fn envelope(&self) -> Option<Envelope> {
        match self.decoded() {
            Some(Decoded::Record(record)) if !record.released => Some(record.envelope()),
            Some(Decoded::Newer { envelope, .. }) => Some(*envelope),
            _ => None,
        }
    }

    pub(crate) fn holder(&self) -> Option<Holder> {
        match self.decoded() {
            Some(Decoded::Record(record)) => Some(holder_of(record)),
            Some(Decoded::Newer { v, envelope }) => Some(Holder {
                owner: format!("{}{v}", crate::error::NEWER_FORMAT_OWNER),
                holder_id: String::new(),
                pid: 0,
                token: envelope.token,
                generation: envelope.generation,
                expires_at_ms: envelope.expires_at_ms,
                in_the_way: None,
                waiting: false,
                session: None,
            }),
            _ => None,
        }
    }

    /// The newest decodable record, if it is an unreleased v1 claim.
    pub(crate) fn claim(&self) -> Option<&Record> {
        match self.decoded() {
            Some(Decoded::Record(record)) if !record.released => Some(record),
            _ => None,
        }
    }

    /// The highest record itself, if it is a decodable v1 record (a claim or a
    /// tombstone): what a confirming read compares with its own create.
    pub(crate) fn top_record(&self) -> Option<&Record> {
        match &self.judged {
            Some((g, Decoded::Record(record))) if *g == self.generation => Some(record),
            _ => None,
        }
    }

    pub(crate) fn token(&self) -> u64 {
        match self.decoded() {
            Some(Decoded::Record(record)) => record.token,
            Some(Decoded::Newer { envelope, .. }) => envelope.token,
            _ => 0,
        }
    }

    /// The loss of tenure `token` (of the resource labelled `label`) to this newest
    /// record of series `key`: [`Error::Superseded`], naming, for a file-id series
    /// (`inode-`), the name the other tenure claimed the file by — its token there
    /// numbers the file id's series, not the resource's.
    pub(crate) fn superseded(&self, key: &Key, label: &str, token: u64) -> Error {
        let through = match self.decoded() {
            Some(Decoded::Record(record)) if key.as_str().starts_with("inode-") => {
                Some(record.label.to_string())
            }
            _ => None,
        };
        Error::Superseded {
            label: label.to_string(),
            token,
            by_token: self.token(),
            through,
            by: self.claim().map(|record| Box::new(holder_of(record))),
        }
    }

    /// The holder id of the newest decodable record; `Some("")` for a newer format
    /// (whose holder cannot be compared, so it is never ours).
    pub(crate) fn holder_id(&self) -> Option<&str> {
        match self.decoded() {
            Some(Decoded::Record(record)) => Some(&*record.holder),
            Some(Decoded::Newer { .. }) => Some(""),
            _ => None,
        }
    }
}

/// How the tenure of `record` (already matched by token and proof) ended, if its
/// record is a tombstone: broken by an operator, or released by a holder of its
/// secret.
pub(crate) fn ended(record: &Record, label: &str) -> Option<Error> {
    if !record.released {
        return None;
    }
    Some(match &record.broken {
        Some(note) => Error::Broken {
            label: label.to_string(),
            token: record.token,
            note: note.clone(),
        },
        None => Error::Released {
            label: label.to_string(),
            token: record.token,
        },
    })
}

pub(crate) fn holder_of(record: &Record) -> Holder {
    Holder {
        owner: record.owner.to_string(),
        holder_id: record.holder.to_string(),
        pid: record.pid,
        token: record.token,
        generation: record.generation,
        expires_at_ms: record.expires_at_ms,
        in_the_way: None,
        waiting: false,
        session: record.session.clone().map(Box::new),
    }
}

impl Store {
    /// [`Newest::superseded`], except that a loss found in a file's file-id series to
    /// a tenure that claimed the file by this same name (the same path key) is no
    /// write-around through another name: that tenure took the path series too, so
    /// the loss is reported from there, with the resource's own token (a breaker:
    /// a plain takeover after expiry was told "another holder claimed the same file
    /// as" its own name, "a hard link of it, or its name before it moved").
    /// Pinned by `cli/tests/loss.rs::a_file_run_resumed_after_a_takeover_is_told_superseded`.
    pub(crate) fn superseded(&self, newest: &Newest, key: &Key, label: &str, token: u64) -> Error {
        let error = newest.superseded(key, label, token);
        let Error::Superseded {
            through: Some(name),
            ..
        } = &error
        else {
            return error;
        };
        let path_key = |text: &str| {
            crate::Resource::file(std::path::PathBuf::from(text))
                .identity()
                .ok()
                .map(|identity| identity.key)
        };
        let Some(primary) = path_key(name).filter(|key| Some(key) == path_key(label).as_ref())
        else {
            return error;
        };
        match self.read_newest(&primary) {
            Ok(newest) if newest.generation > 0 => newest.superseded(&primary, label, token),
            _ => error,
        }
    }

    /// Reads the newest record of `key`: the highest listed generation (by number),
    /// and the newest record that decodes (walking down past a torn highest record).
    /// A record removed between listing and reading (a concurrent sweep) causes a
    /// re-list; one that keeps vanishing counts as torn, so numbering still continues
    /// above it.
    pub(crate) fn read_newest(&self, key: &Key) -> Result<Newest> {
        let mut generation = 0;
        for _ in 0..VANISHED_RELIST_ATTEMPTS {
            let mut listed = self.backend.generations(key)?;
            generation = match listed.iter().copied().max() {
                Some(generation) => generation,
                None => return Ok(Newest::empty()),
            };
            let Some(bytes) = self.backend.read(key, generation)? else {
                continue;
            };
            listed.retain(|g| *g < generation);
            let decoded = record::decode(&bytes, key.as_str(), generation);
            let judged = match decoded {
                Decoded::Torn(_) => self.newest_decodable_below(key, &listed)?,
                decoded => Some((generation, decoded)),
            };
            return Ok(Newest {
                generation,
                judged,
                below: listed,
            });
        }
        Ok(Newest {
            generation,
            judged: None,
            below: Vec::new(),
        })
    }

    /// Reads the newest record of `key` for a write on top of our own record
    /// (renew, release, adopt): a torn newest record may be someone's create in
    /// progress, and writing above it could evict a claim that completes and is
    /// confirmed first, so it is waited out until its create has run for at least
    /// [`CREATE_GRACE_MS`] (after which its creator no longer trusts it).
    ///
    /// "Has run for" is measured from the monotonic reading taken *after* the read
    /// that first found that generation torn (its create had begun by then) to the
    /// reading taken *before* a later read that still finds it torn. Readings on
    /// the other side of a read would let a pause between a read and its clock
    /// reading count as time the create was seen in progress, and a release paused
    /// there write above a claim that completed quickly and was handed out (found
    /// by the interleaving checker, `several_resources` seed 4378 of 5000).
    pub(crate) fn read_settled(&self, key: &Key) -> Result<Newest> {
        // Before the first read; thereafter, the reading after each read is the
        // reading before the next.
        let mut before = self.clock.monotonic_ms();
        let mut backoff_ms = BACKOFF_START_MS;
        // The torn generation waited out, and the reading after the read that
        // first found it torn.
        let mut torn: Option<(u64, u64)> = None;
        loop {
            let newest = self.read_newest(key)?;
            let after = self.clock.monotonic_ms();
            if !newest.top_is_torn() {
                return Ok(newest);
            }
            let since = match torn {
                Some((generation, since)) if generation == newest.generation => {
                    if before.saturating_sub(since) >= CREATE_GRACE_MS {
                        return Ok(newest);
                    }
                    since
                }
                _ => {
                    torn = Some((newest.generation, after));
                    after
                }
            };
            let step = self
                .jittered(backoff_ms)
                .min(CREATE_GRACE_MS.saturating_sub(after.saturating_sub(since)))
                .max(1);
            self.clock.sleep(Duration::from_millis(step));
            backoff_ms = (backoff_ms * 2).min(BACKOFF_CAP_MS);
            before = after;
        }
    }

    /// The newest record among `listed` that decodes, reading downwards; records
    /// swept meanwhile are skipped. Only reached when the highest record is torn.
    fn newest_decodable_below(&self, key: &Key, listed: &[u64]) -> Result<Option<(u64, Decoded)>> {
        #[cfg(feature = "planted-bugs")]
        if crate::planted::on(&crate::planted::TORN_NEWEST_IS_VACANCY) {
            return Ok(None);
        }
        let mut below = listed.to_vec();
        below.sort_unstable_by(|a, b| b.cmp(a));
        for generation in below {
            if let Some(bytes) = self.backend.read(key, generation)? {
                match record::decode(&bytes, key.as_str(), generation) {
                    Decoded::Torn(_) => {}
                    decoded => return Ok(Some((generation, decoded))),
                }
            }
        }
        Ok(None)
    }
}

/// The generation after `newest`, or a backend error when the series has reached
/// `u64::MAX` (only a hand-made record can get there; wrapping would restart the
/// numbering, docs/protocol.md I2).
pub(crate) fn next_generation(key: &Key, newest: u64) -> Result<u64> {
    newest.checked_add(1).ok_or_else(|| {
        Error::Backend(crate::BackendError::new(
            "create",
            key,
            std::io::Error::other(
                "the series holds the largest possible generation, so no later claim can be numbered (a record was planted by hand); this resource cannot be claimed again without restarting its tokens, which a holder's stale token would then pass: use a resource of another name",
            ),
        ))
    })
}
