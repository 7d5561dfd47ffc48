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
use crate::proof::Secret;
use crate::protocol::series::{Claim, Watch};
use crate::protocol::{AcquireOptions, Store, new_holder_id};
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
    /// In a participant index (`shares-…`), the evidence of the process that
    /// wrote the entry, when its tenure is tied to its process: an entry whose
    /// participant never wrote its record and whose writer provably died is swept
    /// (docs/format-v1.md §3.6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) process: Option<crate::ProcessEvidence>,
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
        self.append_entry_of(index, kind, points_to, label, None)
    }

    /// [`Store::append_entry`] with the writer's process evidence.
    pub(crate) fn append_entry_of(
        &self,
        index: &Key,
        kind: &str,
        points_to: &Key,
        label: &str,
        process: Option<crate::ProcessEvidence>,
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
                    process: process.clone(),
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
    /// subtree claim of any directory above it or of its own path (a subtree covers
    /// its directory itself, so `dir:P` and `file:P` conflict), or — for a subtree
    /// claim — any claim found through its directory's index. `holder_id` and
    /// `proof` (the hash of its secret) are the claimant's own: a tenure of the
    /// claimant's own session (the same secret) is no conflict, so a session holding
    /// a subtree may claim files in it. With `readers` (an exclusive claimant), live
    /// shared participants of those keys conflict too. With `intents`, a live
    /// intent of an exclusive subtree claimer waiting for a directory above (or,
    /// for a file, of its own path) is in the way too: a covered claim does not
    /// overtake it (design-05 §4.3). The holder names the resource in the way
    /// ([`Holder::in_the_way`]).
    pub(crate) fn tree_conflict(
        &self,
        chain: &TreeChain,
        holder_id: &str,
        proof: &str,
        down: bool,
        readers: bool,
        intents: bool,
    ) -> Result<Option<InTheWay>> {
        #[cfg(feature = "planted-bugs")]
        let up = !crate::planted::on(&crate::planted::FILE_SKIPS_CHECK_UP);
        #[cfg(not(feature = "planted-bugs"))]
        let up = true;
        if up {
            for dir in &chain.above {
                if let Some(way) =
                    self.live_other(&dir.subtree, &dir.label, holder_id, proof, readers)?
                {
                    return Ok(Some(way));
                }
            }
        }
        // A subtree claimer waiting for claims it covers: no new covered claim
        // starts while its intent is live (design-05 §4.3).
        #[cfg(feature = "planted-bugs")]
        let intents = intents && !crate::planted::on(&crate::planted::COVERED_IGNORES_INTENT);
        if intents {
            let file_claim = chain.own_index.is_none();
            let dirs = chain
                .above
                .iter()
                .map(|dir| (&dir.subtree, dir.label.as_str()))
                .chain(file_claim.then_some((&chain.same_path, chain.label.as_str())));
            for (subtree, label) in dirs {
                if let Some(mut way) =
                    self.live_other(&subtree.intent(), label, holder_id, proof, false)?
                {
                    way.holder.owner =
                        format!("{} (an exclusive claimer waiting)", way.holder.owner);
                    way.holder.waiting = true;
                    way.holder.in_the_way = Some(Box::new(crate::Resource::Dir(label.into())));
                    return Ok(Some(way));
                }
            }
        }
        #[cfg(feature = "planted-bugs")]
        let same_path = !crate::planted::on(&crate::planted::SAME_PATH_UNCHECKED);
        #[cfg(not(feature = "planted-bugs"))]
        let same_path = true;
        if same_path
            && let Some(way) =
                self.live_other(&chain.same_path, &chain.label, holder_id, proof, readers)?
        {
            return Ok(Some(way));
        }
        #[cfg(feature = "planted-bugs")]
        let down = down && !crate::planted::on(&crate::planted::SUBTREE_SKIPS_CHECK_DOWN);
        if let (true, Some(index)) = (down, &chain.own_index) {
            // A reader (no `readers`: it looks for writers only) honours the
            // intents of writers waiting below it too.
            return self.live_below(index, holder_id, proof, readers, intents && !readers);
        }
        Ok(None)
    }

    /// [`Store::tree_conflict`] as the look before claiming: a holder in the way
    /// whose process provably died (the liveness rule of dead-holder takeover,
    /// docs/design-01-lease-and-fence.md) is fenced — its key claimed and given
    /// back at once, so its token never passes again — and the look repeated, so a
    /// SIGKILLed subtree holder does not keep the claims it covers out until its
    /// ttl. Only with `options.dead_holder_takeover`.
    pub(crate) fn look_tree(
        &self,
        chain: &TreeChain,
        holder_id: &str,
        proof: &str,
        down: bool,
        readers: bool,
        options: &AcquireOptions,
    ) -> Result<Option<InTheWay>> {
        let look = || self.tree_conflict(chain, holder_id, proof, down, readers, true);
        self.look_fencing_dead(options, look)
    }

    /// What `look` finds in the way in this store, a holder whose process provably
    /// died fenced first ([`Store::fence_dead`]) and the look repeated, at most
    /// [`FENCE_ATTEMPTS`] times; with `options.dead_holder_takeover` only. Shared by
    /// a subtree's look before claiming and a claim's look at another store
    /// (`Store::claim_beside`).
    pub(crate) fn look_fencing_dead(
        &self,
        options: &AcquireOptions,
        mut look: impl FnMut() -> Result<Option<InTheWay>>,
    ) -> Result<Option<InTheWay>> {
        for _ in 0..FENCE_ATTEMPTS {
            match look()? {
                Some(way) if way.dead && options.dead_holder_takeover => {
                    if !self.fence_dead(&way, options)? {
                        return Ok(Some(way));
                    }
                }
                other => return Ok(other),
            }
        }
        look()
    }

    /// Takes over the key of a dead holder in the way and gives it back at once
    /// (the takeover's own record fences the dead tenure, as a direct claim of
    /// the resource would). False when the key turned out held after all (a live
    /// rival took it meanwhile).
    pub(crate) fn fence_dead(&self, way: &InTheWay, options: &AcquireOptions) -> Result<bool> {
        let secret = Secret::generate();
        let (holder_id, pid) = new_holder_id(&options.owner);
        let options = options.clone().wait_ms(0).tied_to_process(false);
        let mut watch = Watch::default();
        match self.claim_key(
            &way.key,
            &way.label,
            (&holder_id, pid),
            &secret.proof(),
            &options,
            &mut watch,
        )? {
            Claim::Taken(claim, _, _, _) => {
                let _ = self.release_tenure(&way.key, &claim.label, claim.token, &secret);
                Ok(true)
            }
            Claim::Held(_) => Ok(false),
        }
    }

    /// Walks `index` and the indexes of its child directories for a live claim of
    /// another tenure.
    fn live_below(
        &self,
        index: &Key,
        holder_id: &str,
        proof: &str,
        readers: bool,
        intents: bool,
    ) -> Result<Option<InTheWay>> {
        #[cfg(feature = "planted-bugs")]
        let intents = intents && !crate::planted::on(&crate::planted::READERS_IGNORE_INTENTS_BELOW);
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
                        if let Some(way) =
                            self.live_other(&key, &entry.label, holder_id, proof, readers)?
                        {
                            return Ok(Some(way));
                        }
                        // A writer waiting below (for readers of this subtree):
                        // a new reader does not overtake it (design-05 §4.3). One
                        // whose waiter provably died keeps nobody out.
                        if intents
                            && let Some(mut way) = self.live_other(
                                &key.intent(),
                                &entry.label,
                                holder_id,
                                proof,
                                false,
                            )?
                            && !way.dead
                        {
                            way.holder.owner =
                                format!("{} (an exclusive claimer waiting)", way.holder.owner);
                            way.holder.waiting = true;
                            // Named by the intent's own label, the waiting claim's
                            // path: the entry's is the directory it sits in (a
                            // breaker: "kept free for file /d" for a writer of d/f).
                            let waiting = std::path::PathBuf::from(&way.label);
                            way.holder.in_the_way =
                                Some(Box::new(if key.as_str().starts_with("dir-") {
                                    crate::Resource::Dir(waiting)
                                } else {
                                    crate::Resource::File(waiting)
                                }));
                            return Ok(Some(way));
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
    /// participant of `key` counts too (design-05 §4). `label` names the resource
    /// when no record of it does.
    pub(crate) fn live_other(
        &self,
        key: &Key,
        label: &str,
        holder_id: &str,
        proof: &str,
        readers: bool,
    ) -> Result<Option<InTheWay>> {
        if readers
            && let Some((holder, participant, dead, named)) =
                self.participant_in_way(key, holder_id)?
        {
            return Ok(Some(InTheWay::new(holder, participant, key, &named, dead)));
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
        let dead = newest
            .claim()
            .and_then(|r| r.process.as_ref())
            .is_some_and(|evidence| self.provably_dead(evidence));
        #[cfg(feature = "planted-bugs")]
        if dead && crate::planted::on(&crate::planted::COVERED_DEAD_NOT_FENCED) {
            return Ok(None);
        }
        let label = newest.claim().map_or(label, |r| &*r.label);
        Ok(newest
            .holder()
            .map(|holder| InTheWay::new(holder, key.clone(), key, label, dead)))
    }
}

/// How many dead holders in the way one look fences before it reports the next
/// one as held (each fence is two records; a bound instead of a loop).
pub(crate) const FENCE_ATTEMPTS: usize = 8;

/// A claim of another resource in the way of a file or subtree claim.
pub(crate) struct InTheWay {
    /// Its holder, naming the resource ([`Holder::in_the_way`]).
    pub(crate) holder: Holder,
    /// The series its tenure holds (a participant's own series for a shared one).
    pub(crate) key: Key,
    /// The label its records carry.
    pub(crate) label: String,
    /// Its holder's process provably no longer runs (dead-holder takeover's rule).
    pub(crate) dead: bool,
}

impl InTheWay {
    /// `resource_key` is the claim series of the resource in the way (`dir-` or
    /// `file-`), `key` the series its tenure holds.
    fn new(mut holder: Holder, key: Key, resource_key: &Key, label: &str, dead: bool) -> Self {
        let path = std::path::PathBuf::from(label);
        holder.in_the_way = Some(Box::new(if resource_key.as_str().starts_with("dir-") {
            crate::Resource::Dir(path)
        } else {
            crate::Resource::File(path)
        }));
        InTheWay {
            holder,
            key,
            label: label.to_string(),
            dead,
        }
    }
}
