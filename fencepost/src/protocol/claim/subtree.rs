//! Subtree claims against file claims, both ways (docs/design-05-subtrees-and-shared.md
//! §3): every file or directory claim registers its path in the index of each
//! directory above it before it claims, and after it claimed checks the other side —
//! up (a live subtree claim of a directory above) and, for a subtree, down (a live
//! claim found through its directory's index). Both sides write first and read
//! second, so two conflicting claims never both hold (design-05 §3.4).

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::backend::{CreateOutcome, Durability};
use crate::identity::TreeChain;
use crate::protocol::Store;
use crate::record::{self, FORMAT_VERSION};
use crate::{Holder, Key, Result};

/// How many generations an index append tries before it lists the index again.
const APPEND_ATTEMPTS: usize = 64;

/// One record of a directory's index (`tree-…`): a claim key whose path's parent is
/// the directory (`entry: "claim"`), or the index of a child directory that has
/// entries (`entry: "child"`). docs/format-v1.md §3.5.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct IndexEntry {
    pub(crate) v: u64,
    pub(crate) key: String,
    pub(crate) generation: u64,
    pub(crate) entry: String,
    pub(crate) points_to: String,
    pub(crate) label: String,
}

/// The only record of a `link-…` marker: the entry it stands for exists.
#[derive(Debug, Serialize)]
struct LinkMarker<'a> {
    v: u64,
    key: &'a str,
    generation: u64,
    linked: bool,
}

impl Store {
    /// Makes the path of `chain` findable from every directory above it: an index
    /// entry in its parent's index, and a child entry in each index above, the
    /// root first, each written once (a `link-` marker says it exists; it is created
    /// only after the entry landed, so an interrupted registration is repeated, at
    /// worst as a duplicate entry). Must complete before the claim's first create.
    pub(crate) fn register_path(&self, chain: &TreeChain) -> Result<()> {
        for (i, dir) in chain.above.iter().enumerate() {
            let (kind, points_to, label) = match chain.above.get(i + 1) {
                Some(child) => ("child", &child.index, child.label.as_str()),
                None => ("claim", &chain.own, dir.label.as_str()),
            };
            let marker = Key::link(&dir.index, points_to);
            if !self.backend.generations(&marker)?.is_empty() {
                continue;
            }
            self.append_entry(&dir.index, kind, points_to, label)?;
            let bytes = serde_json::to_vec(&LinkMarker {
                v: FORMAT_VERSION,
                key: marker.as_str(),
                generation: 1,
                linked: true,
            })
            .expect("a marker serializes");
            // "Already exists": a racing registrar marked it first; either way the
            // entry exists.
            self.backend
                .create(&marker, 1, &bytes, Durability::Flushed)?;
        }
        Ok(())
    }

    /// Appends an entry to `index` at its next free generation, flushed.
    pub(crate) fn append_entry(
        &self,
        index: &Key,
        kind: &str,
        points_to: &Key,
        label: &str,
    ) -> Result<()> {
        loop {
            let mut generation = self
                .backend
                .generations(index)?
                .into_iter()
                .max()
                .unwrap_or(0);
            for _ in 0..APPEND_ATTEMPTS {
                generation = crate::protocol::series::next_generation(index, generation)?;
                let entry = IndexEntry {
                    v: FORMAT_VERSION,
                    key: index.to_string(),
                    generation,
                    entry: kind.to_string(),
                    points_to: points_to.to_string(),
                    label: label.to_string(),
                };
                let bytes = serde_json::to_vec(&entry).expect("an index entry serializes");
                if self
                    .backend
                    .create(index, generation, &bytes, Durability::Flushed)?
                    == CreateOutcome::Created
                {
                    return Ok(());
                }
            }
        }
    }

    /// The live claim of another tenure that conflicts with a claim at `chain`: a
    /// subtree claim of any directory above it, or — for a subtree claim — any claim
    /// found through its directory's index. `holder_id` and `proof` (the hash of its
    /// secret) are the claimant's own: a tenure of the claimant's own session (the
    /// same secret) is no conflict, so a session holding a subtree may claim files in
    /// it. With `readers` (an exclusive claimant), live shared participants of
    /// those keys conflict too.
    pub(crate) fn tree_conflict(
        &self,
        chain: &TreeChain,
        holder_id: &str,
        proof: &str,
        down: bool,
        readers: bool,
    ) -> Result<Option<Holder>> {
        #[cfg(feature = "planted-bugs")]
        let up = !crate::planted::on(&crate::planted::FILE_SKIPS_CHECK_UP);
        #[cfg(not(feature = "planted-bugs"))]
        let up = true;
        if up {
            for dir in &chain.above {
                if let Some(holder) = self.live_other(&dir.subtree, holder_id, proof, readers)? {
                    return Ok(Some(holder));
                }
            }
        }
        #[cfg(feature = "planted-bugs")]
        let down = down && !crate::planted::on(&crate::planted::SUBTREE_SKIPS_CHECK_DOWN);
        if let (true, Some(index)) = (down, &chain.own_index) {
            return self.live_below(index, holder_id, proof, readers);
        }
        Ok(None)
    }

    /// Walks `index` and the indexes of its child directories for a live claim of
    /// another tenure.
    fn live_below(
        &self,
        index: &Key,
        holder_id: &str,
        proof: &str,
        readers: bool,
    ) -> Result<Option<Holder>> {
        let mut pending = vec![index.clone()];
        let mut seen: HashSet<Key> = HashSet::new();
        while let Some(index) = pending.pop() {
            if !seen.insert(index.clone()) {
                continue;
            }
            let mut generations = self.backend.generations(&index)?;
            generations.sort_unstable();
            let mut pointed: HashSet<String> = HashSet::new();
            for generation in generations {
                let Some(bytes) = self.backend.read(&index, generation)? else {
                    continue;
                };
                // An entry cut off by a crash names nothing; its registrar had not
                // claimed yet (it claims only after the marker, written after this).
                let Ok(entry) = serde_json::from_slice::<IndexEntry>(&bytes) else {
                    continue;
                };
                if !pointed.insert(entry.points_to.clone()) {
                    continue;
                }
                let Some(key) = Key::parse(&entry.points_to) else {
                    continue;
                };
                match entry.entry.as_str() {
                    "child" => pending.push(key),
                    "claim" => {
                        if let Some(holder) = self.live_other(&key, holder_id, proof, readers)? {
                            return Ok(Some(holder));
                        }
                    }
                    _ => {}
                }
            }
        }
        Ok(None)
    }

    /// The holder of the newest record of `key` when it is live and not
    /// `holder_id`'s. A torn newest record (a create in progress) is waited out as
    /// for a write ([`Store::read_settled`]); one over a live predecessor leaves the
    /// predecessor judged (docs/protocol.md R1). With `readers`, a live shared
    /// participant of `key` counts too (design-05 §4).
    fn live_other(
        &self,
        key: &Key,
        holder_id: &str,
        proof: &str,
        readers: bool,
    ) -> Result<Option<Holder>> {
        if readers && let Some(holder) = self.live_participant(key, holder_id)? {
            return Ok(Some(holder));
        }
        let newest = self.read_settled(key)?;
        let now = self.clock.wall_ms();
        let live = newest
            .envelope()
            .is_some_and(|envelope| record::is_live(&envelope, now));
        let same_secret = newest
            .claim()
            .is_some_and(|r| r.secret_sha256.as_deref() == Some(proof));
        if !live || newest.holder_id() == Some(holder_id) || same_secret {
            return Ok(None);
        }
        Ok(newest.holder())
    }
}
