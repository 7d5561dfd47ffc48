//! What the store holds, for `status`: one entry per resource.

use crate::protocol::Store;
use crate::record::{self, BreakNote, Decoded};
use crate::{Key, Result};

/// What the newest record of a key says, for `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClaimState {
    /// A live lease.
    Held,
    /// A lease whose ttl ran out.
    Expired,
    /// Released (the newest record is a tombstone).
    Released,
    /// Broken by an operator (the newest record is a break's tombstone; see
    /// [`StatusEntry::broken`]).
    Broken,
    /// The newest record is torn or corrupt; the next acquire supersedes it.
    Unreadable,
    /// A record of a newer format version (see [`Decoded::Newer`]).
    NewerFormat,
}

/// One resource's line in [`Store::status`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StatusEntry {
    /// The resource as `claim --json` names it: `lock:NAME` or `file:PATH` (for an
    /// unreadable series, its key).
    pub resource: String,
    /// The key.
    pub key: Key,
    /// The label of the newest record (empty when unreadable).
    pub label: String,
    /// What the newest record says.
    pub state: ClaimState,
    /// True when the resource is held right now (by the liveness rule).
    pub live: bool,
    /// The newest record's token (0 when unreadable).
    pub token: u64,
    /// The newest generation.
    pub generation: u64,
    /// The owner of the newest record (empty when unknown).
    pub owner: String,
    /// The holder's process id: the process that began the tenure, whoever renewed
    /// it since (0 when unknown).
    pub pid: u32,
    /// The host the holder ran on (empty when unknown, or written by a version that
    /// did not record it).
    pub host: String,
    /// When the newest record expires, milliseconds since the Unix epoch (0 when
    /// unknown).
    pub expires_at_ms: u64,
    /// Who broke the lease, when and why, while the break's tombstone is newest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broken: Option<BreakNote>,
    /// The tag of the session that claimed the tenure, when it was claimed with one
    /// ([`crate::SessionTag`]: it tells sessions apart; it is not the session id and
    /// gives no one the session's proof of holding).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<crate::SessionTag>,
    /// The owners of the live shared tenures of the resource
    /// ([`crate::AcquireOptions::shared`]), sorted; empty when none. A row with
    /// shared holders and no live exclusive one is `held`, its token the newest
    /// shared token and its expiry the latest.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shared: Vec<String>,
    /// True when the lease is held by the liveness rule but its holder's process
    /// has certainly ended on this host (killed, crashed): a claim with dead-holder
    /// takeover (the default) takes it over at once instead of waiting for
    /// `expires_at_ms`. Judged by the cheapest certain check
    /// ([`Liveness::surely_gone`](crate::Liveness::surely_gone)), so a holder whose
    /// pid was reused since is shown as held. Only for records that carry process
    /// evidence (tied claims), and only once no process is left in the process
    /// group it names (`fencepost run`'s command); absent from JSON when false.
    /// Pinned by `cli/tests/takeover.rs::status_shows_a_killed_holder_s_process_ended`
    /// and `status_does_not_promise_a_takeover_while_a_killed_runs_command_runs`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub holder_ended: bool,
}

impl StatusEntry {
    /// Who holds or last held it, for messages: the owner, and the session's tag
    /// when the tenure has one, as [`crate::Holder::who`] says it.
    pub fn who(&self) -> String {
        crate::error::owner_and_session(&self.owner, self.session.as_ref())
    }

    pub(crate) fn unreadable(key: &Key, generation: u64) -> Self {
        StatusEntry {
            resource: key.to_string(),
            key: key.clone(),
            label: String::new(),
            state: ClaimState::Unreadable,
            live: false,
            token: 0,
            generation,
            owner: String::new(),
            pid: 0,
            host: String::new(),
            expires_at_ms: 0,
            broken: None,
            session: None,
            shared: Vec::new(),
            holder_ended: false,
        }
    }
}

/// What record `r` says of its tenure, `live` by the liveness rule.
fn state_of(r: &crate::record::Record, live: bool) -> ClaimState {
    if r.broken.is_some() {
        ClaimState::Broken
    } else if r.released {
        ClaimState::Released
    } else if live {
        ClaimState::Held
    } else {
        ClaimState::Expired
    }
}

/// The label of a resource as `status` names it (`lock:NAME` → `NAME`).
fn label_of(resource: &str) -> &str {
    resource
        .split_once(':')
        .map_or(resource, |(_, label)| label)
}

/// The row of a resource whose shared tenures all ended: what the one that ended
/// last says (broken, released or expired), listed under its participant index.
fn ended_shared_row(resource: &str, index: &Key, r: &crate::record::Record) -> StatusEntry {
    StatusEntry {
        resource: resource.to_string(),
        key: index.clone(),
        label: label_of(resource).to_string(),
        state: state_of(r, false),
        live: false,
        token: r.token,
        generation: r.generation,
        owner: r.owner.to_string(),
        pid: r.pid,
        host: r.host.to_string(),
        expires_at_ms: r.expires_at_ms,
        broken: r.broken.clone(),
        session: None,
        shared: Vec::new(),
        holder_ended: false,
    }
}

/// `lock:NAME` or `file:PATH` for a record's label under `key` (a file-id key names
/// a file too).
pub(crate) fn resource_of(key: &Key, label: &str) -> String {
    let kind = match key.as_str().split('-').next() {
        Some("lock") => "lock",
        Some("dir") => "dir",
        Some("slot") => "slot",
        _ => "file",
    };
    format!("{kind}:{label}")
}

impl Store {
    /// Every resource in the store with what its newest record says, one entry per
    /// resource, sorted by label then key.
    ///
    /// An existing file's tenure holds two series (its path key and its file-id key);
    /// the file-id series is shown only when it says something the path series does
    /// not: a live tenure there that no shown path entry holds. File-id series of
    /// replaced files, and ones whose tenure the path entry already shows, are left
    /// out, so one claimed file is one line. A tenure broken through another hard
    /// link (its file-id series ends in its broken tombstone) shows as broken in its
    /// own path entry too: it never passes `check` again.
    ///
    /// # Errors
    ///
    /// [`Error::Backend`](crate::Error::Backend) when the store cannot be listed.
    pub fn status(&self) -> Result<Vec<StatusEntry>> {
        let mut entries = Vec::new();
        // File-id keys are decided once every path key is seen.
        let mut file_ids = Vec::new();
        let mut shown_holders = std::collections::HashSet::new();
        // Each path entry's holder, for a break through another link (below).
        let mut path_holders = Vec::new();
        for (entry, holder) in self.key_rows()? {
            // Shared tenures and writers' intents are shown in their resource's row.
            if ["share-", "want-"]
                .iter()
                .any(|p| entry.key.as_str().starts_with(p))
            {
                continue;
            }
            if entry.key.as_str().starts_with("inode-") {
                file_ids.push((entry, holder));
            } else {
                if let Some(holder) = holder.as_ref().filter(|_| entry.live) {
                    shown_holders.insert(holder.clone());
                }
                path_holders.push(holder);
                entries.push(entry);
            }
        }
        for (entry, holder) in &file_ids {
            if entry.state != ClaimState::Broken {
                continue;
            }
            for (row, row_holder) in entries.iter_mut().zip(&path_holders) {
                if row.live && row_holder.is_some() && row_holder == holder {
                    row.state = ClaimState::Broken;
                    row.live = false;
                    row.broken = entry.broken.clone();
                    row.holder_ended = false;
                }
            }
        }
        for (entry, holder) in file_ids {
            let shown = holder.as_ref().is_some_and(|h| shown_holders.contains(h));
            if (entry.live && !shown) || entry.state == ClaimState::Unreadable {
                entries.push(entry);
            }
        }
        for shared in self.shared_holders()? {
            let (resource, index, holders) = (shared.resource, shared.index, shared.holders);
            let gone = shared.gone;
            if holders.is_empty() {
                // No live reader: the one that ended last, as an exclusive tenure's
                // tombstone shows (a breaker: a broken or released shared claim
                // left no row, and `status` said nothing of the break).
                if let Some(r) = shared.ended
                    && !entries.iter().any(|e| e.resource == resource)
                {
                    entries.push(ended_shared_row(&resource, &index, &r));
                }
                continue;
            }
            let row = match entries.iter_mut().position(|e| e.resource == resource) {
                Some(i) => &mut entries[i],
                None => {
                    let mut row = StatusEntry::unreadable(&index, 0);
                    row.resource = resource.clone();
                    row.label = label_of(&resource).to_string();
                    entries.push(row);
                    entries.last_mut().expect("just pushed")
                }
            };
            if !row.live {
                row.state = ClaimState::Held;
                row.live = true;
                row.token = holders.iter().map(|h| h.token).max().unwrap_or(0);
                row.owner = String::new();
                row.pid = 0;
                row.host = String::new();
                row.broken = None;
                row.session = None;
                // Every reader's process ended: taken over at once, as a dead
                // exclusive holder is (a breaker: a killed `run --shared` showed
                // plainly held).
                row.holder_ended = gone;
                row.expires_at_ms = holders.iter().map(|h| h.expires_at_ms).max().unwrap_or(0);
            }
            row.shared = holders.into_iter().map(|h| h.owner).collect();
            row.shared.sort();
        }
        entries.sort_by(|a, b| (&a.label, &a.key).cmp(&(&b.label, &b.key)));
        Ok(entries)
    }

    /// Every key in the store with what its newest record says, one entry per key
    /// (an existing file's path key and file-id key apart), sorted by label then key:
    /// the raw view behind [`Store::status`], for tests and tools that inspect series.
    ///
    /// # Errors
    ///
    /// [`Error::Backend`](crate::Error::Backend) when the store cannot be listed.
    pub fn key_status(&self) -> Result<Vec<StatusEntry>> {
        let mut entries: Vec<StatusEntry> = self
            .key_rows()?
            .into_iter()
            .map(|(entry, _)| entry)
            .collect();
        entries.sort_by(|a, b| (&a.label, &a.key).cmp(&(&b.label, &b.key)));
        Ok(entries)
    }

    /// Each key's entry and the holder id of its newest record, when it has one.
    pub(crate) fn key_rows(&self) -> Result<Vec<(StatusEntry, Option<String>)>> {
        let now = self.clock.wall_ms();
        let mut rows = Vec::new();
        // Subtree indexes and their markers hold no tenure (design-05 §2).
        for key in self.backend.keys()?.into_iter().filter(Key::is_claim) {
            rows.extend(self.key_row(key, now));
        }
        Ok(rows)
    }

    /// What the newest record of series `key` says, as one row of
    /// [`Store::key_status`] (`None` when the series is empty): for a caller that
    /// needs one series, not the whole store (an agent hook looking at a file's
    /// file-id series before it claims the file). Never fails: a series that
    /// cannot be read is a row in the unreadable state.
    pub fn series_status(&self, key: &Key) -> Option<StatusEntry> {
        self.key_row(key.clone(), self.clock.wall_ms())
            .map(|(entry, _)| entry)
    }

    /// One row of [`Store::key_rows`].
    fn key_row(&self, key: Key, now: u64) -> Option<(StatusEntry, Option<String>)> {
        // One unreadable series (permissions, a broken key directory) is shown as
        // unreadable rather than failing the listing of every other key.
        let Ok(newest) = self.read_newest(&key) else {
            return Some((StatusEntry::unreadable(&key, 0), None));
        };
        if newest.generation == 0 {
            return None;
        }
        // A torn highest record over a live claim is that holder's create in
        // progress: shown as held by the claim below it.
        let live_below =
            newest.top_is_torn() && newest.envelope().is_some_and(|e| record::is_live(&e, now));
        let decoded = if newest.top_is_torn() && !live_below {
            None
        } else {
            newest.decoded()
        };
        let (entry, holder) = match decoded {
            Some(Decoded::Record(r)) => {
                let live = !r.released && record::is_live(&r.envelope(), now);
                let entry = StatusEntry {
                    resource: resource_of(&key, &r.label),
                    key: key.clone(),
                    label: r.label.to_string(),
                    state: state_of(r, live),
                    live,
                    token: r.token,
                    generation: newest.generation,
                    owner: r.owner.to_string(),
                    pid: r.pid,
                    host: r.host.to_string(),
                    expires_at_ms: r.expires_at_ms,
                    broken: r.broken.clone(),
                    session: r.session.clone(),
                    shared: Vec::new(),
                    // And its command's group, when it names one: a killed
                    // `run` whose command still runs is not taken over yet
                    // (a breaker: status promised a takeover the next claim
                    // refused).
                    holder_ended: live
                        && r.process
                            .as_ref()
                            .is_some_and(|e| self.surely_gone(e) && self.group_gone(e)),
                };
                (entry, Some(r.holder.to_string()))
            }
            Some(Decoded::Newer { envelope, .. }) => (
                StatusEntry {
                    resource: key.to_string(),
                    key: key.clone(),
                    label: String::new(),
                    state: ClaimState::NewerFormat,
                    live: record::is_live(envelope, now),
                    token: envelope.token,
                    generation: newest.generation,
                    owner: String::new(),
                    pid: 0,
                    host: String::new(),
                    expires_at_ms: envelope.expires_at_ms,
                    broken: None,
                    session: None,
                    shared: Vec::new(),
                    holder_ended: false,
                },
                None,
            ),
            _ => (StatusEntry::unreadable(&key, newest.generation), None),
        };
        Some((entry, holder))
    }
}
