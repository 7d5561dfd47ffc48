//! Shared claims (docs/design-05-subtrees-and-shared.md §4): many shared holders of a
//! resource at once, none together with an exclusive holder. Each shared tenure is
//! an ordinary series of its own (`share-…`), found through the resource's
//! participant index (`shares-…`); both sides write first and read the other side
//! second, as subtree claims do (design-05 §3.4). A waiting writer's intent
//! (`want-…`) keeps new readers out, so readers that keep arriving never starve it.

use crate::backend::{CreateOutcome, Durability};
use crate::identity::TreeChain;
use crate::proof::Secret;
use crate::protocol::claim::participants::Participant;
use crate::protocol::claim::subtree::InTheWay;
use crate::protocol::series::Newest;
use crate::protocol::{
    AcquireOptions, BACKOFF_START_MS, CREATE_GRACE_MS, Lease, RACE_GRACE_MS, Store, TryAcquire,
    Written, new_holder_id,
};
use crate::record::{self, Record};
use crate::{Error, Holder, Key, Resource, Result};

/// The longest ttl of a waiting writer's intent, in milliseconds (its claim's
/// ttl when shorter): renewed every third of it while the writer waits, so it
/// outlives a waiter that stopped by at most this
/// (docs/design-05-subtrees-and-shared.md §4.3).
pub(crate) const INTENT_TTL_MAX_MS: u64 = 10_000;

/// A waiting writer's intent (`want-…`), held as an ordinary tenure of that key.
pub(crate) struct Intent {
    key: Key,
    label: String,
    token: u64,
    renewed_mono: u64,
}

impl Store {
    /// A shared acquisition: admits a participant of `resource` once no exclusive
    /// claim of it (nor a writer's intent) is live before and after the
    /// participant's record landed.
    pub(crate) fn try_acquire_shared(
        &self,
        resource: &Resource,
        options: &AcquireOptions,
        on_wait: &mut dyn FnMut(&Holder, u64),
    ) -> Result<TryAcquire> {
        if options.session.is_some() {
            return Err(Error::InvalidArgument(
                "a shared claim takes no session: drop --session (or FENCEPOST_SESSION) or --shared".into(),
            ));
        }
        let identity = resource.identity()?;
        let keys = identity.keys();
        let chain = resource.tree_chain()?;
        if let Some(chain) = &chain {
            self.register_path(chain)?;
        }
        let (holder_id, pid) = new_holder_id(&options.owner);
        let secret = Secret::generate();
        let proof = secret.proof();
        let mut attempt = 0u64;
        let started = self.clock.monotonic_ms();
        let deadline = started.saturating_add(options.wait_ms);
        let mut backoff_ms = BACKOFF_START_MS;
        // Past the wait, after giving back for a writer found only once our record
        // had landed: until when we look again before reporting it.
        let mut race_until: Option<u64> = None;
        loop {
            // Over at once when the caller gave up (`AcquireOptions::cancel`).
            let deadline = options.deadline(deadline);
            let (mut held, seen) =
                self.look_exclusive(&keys, chain.as_ref(), &holder_id, &proof, options)?;
            // A writer of another name of the file, which has not taken in its
            // current file id (docs/design-02-resource-identity.md, "Other names of
            // the file").
            if held.is_none() {
                held = self.held_under_another_name(&identity, None, options)?;
            }
            // The writer in the way was found after our record landed: it may be
            // a claimer in the same race, which saw our record and gives back too.
            let mut raced = false;
            if held.is_none() {
                // A fresh participant series per attempt (one given back is ended
                // for good), findable by every exclusive claimer before its record
                // exists.
                attempt += 1;
                let participant = identity.key.share(&format!("{holder_id}/{attempt}"));
                // Labelled with the resource as `status` names it.
                let named = crate::protocol::status::resource_of(&identity.key, &identity.label);
                // The writer's process evidence (a tenure tied to its process):
                // an entry whose writer died before its record landed is swept.
                let process = self.tied_evidence(options);
                for key in &keys {
                    self.append_entry_of(
                        &key.shares(),
                        "share",
                        &participant,
                        &named,
                        process.clone(),
                    )?;
                }
                // Above every exclusive token issued before, at most every later one.
                let token = crate::protocol::series::next_generation(&identity.key, seen)?;
                let since_mono = self.clock.monotonic_ms();
                let claim = self.admit(
                    &participant,
                    &identity.label,
                    token,
                    (&holder_id, pid),
                    &proof,
                    options,
                )?;
                #[cfg(feature = "planted-bugs")]
                let skip = crate::planted::on(&crate::planted::SHARED_CHECK_BEFORE_ADMIT_ONLY);
                #[cfg(not(feature = "planted-bugs"))]
                let skip = false;
                let (after, seen_after) = if skip {
                    (None, seen)
                } else {
                    match self.exclusive_conflict(&keys, chain.as_ref(), &holder_id, &proof) {
                        Ok(found) => found,
                        Err(error) => {
                            let _ =
                                self.release_tenure(&participant, &identity.label, token, &secret);
                            return Err(error);
                        }
                    }
                };
                let mono = self.clock.monotonic_ms();
                // The token is the exclusive generation seen on both sides of the
                // admission: an exclusive claim created in between moves it.
                if after.is_none()
                    && seen_after == seen
                    && mono.saturating_sub(since_mono) < options.ttl_ms
                {
                    return Ok(TryAcquire::Acquired(Lease {
                        resource: resource.clone(),
                        key: participant,
                        others: Vec::new(),
                        label: identity.label,
                        token,
                        generation: claim.generation,
                        holder_id,
                        owner: options.owner.clone(),
                        ttl_ms: options.ttl_ms,
                        granted_at_ms: claim.granted_at_ms,
                        expires_at_ms: claim.expires_at_ms,
                        secret,
                        tied: options.tied_to_process,
                        group: options
                            .group_to_come
                            .then_some(crate::ProcessEvidence::GROUP_TO_COME),
                        session: None,
                        session_tag: None,
                        reentered: false,
                        siblings: false,
                        shared: true,
                        queued: false,
                        written: Written::of(&claim),
                    }));
                }
                let _ = self.release_tenure(&participant, &identity.label, token, &secret);
                raced = after.is_some();
                held = after;
            }
            let mono = self.clock.monotonic_ms();
            if let Some(holder) = &held {
                if mono >= deadline {
                    // Look again (at the top of the loop) rather than name a writer
                    // that may hold nothing (docs/design-05-subtrees-and-shared.md
                    // §4.4).
                    #[cfg(feature = "planted-bugs")]
                    let raced = raced && !crate::planted::on(&crate::planted::RACE_REFUSED_AT_ONCE);
                    if raced
                        && self.within_grace(&mut race_until, RACE_GRACE_MS, &mut backoff_ms, mono)
                    {
                        continue;
                    }
                    return Ok(TryAcquire::Held(holder.clone()));
                }
                on_wait(holder, mono.saturating_sub(started));
            } else if mono >= deadline.saturating_add(CREATE_GRACE_MS) {
                return Err(Error::ClaimLapsed {
                    label: resource.target(),
                    ttl_ms: options.ttl_ms,
                });
            }
            self.back_off(&mut backoff_ms, deadline, mono);
        }
    }

    /// Creates the first record of the fresh participant series `key`, flushed:
    /// generation and token `token` (a record's token is never above its
    /// generation), or the next generation if a create of ours was lost.
    fn admit(
        &self,
        key: &Key,
        label: &str,
        token: u64,
        (holder_id, pid): (&str, u32),
        proof: &std::sync::Arc<str>,
        options: &AcquireOptions,
    ) -> Result<Record> {
        loop {
            let newest = self.read_newest(key)?;
            let generation =
                crate::protocol::series::next_generation(key, newest.generation)?.max(token);
            let granted_at_ms = self.clock.wall_ms();
            // A shared claim never carries a session (refused with one).
            let claim = self.fresh_claim(
                key,
                label,
                (token, generation),
                (holder_id, pid),
                options,
                proof,
                granted_at_ms,
            );
            let bytes = claim.encode();
            if self
                .backend
                .create(key, generation, &bytes, Durability::Flushed)?
                == CreateOutcome::Created
            {
                return Ok(claim);
            }
        }
    }

    /// What keeps a shared claimer out: a live exclusive claim of any of `keys` or
    /// a live writer's intent on one, or a covering or covered exclusive claim
    /// (`chain`). Also the generation of the primary key's newest record (the token
    /// a participant admitted now gets).
    fn exclusive_conflict(
        &self,
        keys: &[Key],
        chain: Option<&TreeChain>,
        holder_id: &str,
        proof: &str,
    ) -> Result<(Option<Holder>, u64)> {
        let (way, seen) = self.exclusive_in_way(keys, chain, holder_id, proof)?;
        Ok((way.map(|way| way.holder), seen))
    }

    /// [`Store::exclusive_conflict`] as the look before admitting: an exclusive
    /// holder in the way whose process provably died (dead-holder takeover's rule,
    /// docs/design-01-lease-and-fence.md) is fenced — its key claimed and given back
    /// at once, so its token never passes again — and the look repeated, as an
    /// exclusive claimer would take it over. Only with
    /// `options.dead_holder_takeover`. Before, a reader waited out the whole ttl of
    /// a SIGKILLed `fencepost run` while `status` said the next claim takes it over
    /// at once (found by a breaker).
    fn look_exclusive(
        &self,
        keys: &[Key],
        chain: Option<&TreeChain>,
        holder_id: &str,
        proof: &str,
        options: &AcquireOptions,
    ) -> Result<(Option<Holder>, u64)> {
        for _ in 0..super::subtree::FENCE_ATTEMPTS {
            match self.exclusive_in_way(keys, chain, holder_id, proof)? {
                (Some(way), _) if way.dead && options.dead_holder_takeover => {
                    // False: a live rival took the key meanwhile; the next look
                    // finds it.
                    self.fence_dead(&way, options)?;
                }
                (way, seen) => return Ok((way.map(|way| way.holder), seen)),
            }
        }
        self.exclusive_conflict(keys, chain, holder_id, proof)
    }

    /// What [`Store::exclusive_conflict`] finds, with the series it holds and
    /// whether its holder's process provably died.
    pub(crate) fn exclusive_in_way(
        &self,
        keys: &[Key],
        chain: Option<&TreeChain>,
        holder_id: &str,
        proof: &str,
    ) -> Result<(Option<InTheWay>, u64)> {
        let mut primary = None;
        for key in keys {
            let newest = self.read_settled(key)?;
            primary.get_or_insert(newest.generation);
            if let Some(holder) = self.live_in(&newest) {
                let claim = newest.claim();
                let dead = claim
                    .and_then(|r| r.process.as_ref())
                    .is_some_and(|evidence| self.provably_dead(evidence));
                // The planted bug: a dead holder is ignored, not fenced.
                #[cfg(feature = "planted-bugs")]
                if dead && crate::planted::on(&crate::planted::SHARED_DEAD_NOT_FENCED) {
                    continue;
                }
                let way = InTheWay {
                    holder,
                    key: key.clone(),
                    label: claim.map_or_else(String::new, |r| r.label.to_string()),
                    dead,
                };
                return Ok((Some(way), newest.generation));
            }
        }
        let seen = primary.unwrap_or(0);
        #[cfg(feature = "planted-bugs")]
        let intents = !crate::planted::on(&crate::planted::SHARED_IGNORES_INTENT);
        #[cfg(not(feature = "planted-bugs"))]
        let intents = true;
        if intents {
            for key in keys {
                let newest = self.read_settled(&key.intent())?;
                // An intent decides fairness, not safety: one whose waiter provably
                // died waits for nothing and keeps nobody out.
                let dead = newest
                    .claim()
                    .and_then(|r| r.process.as_ref())
                    .is_some_and(|evidence| self.provably_dead(evidence));
                #[cfg(feature = "planted-bugs")]
                let dead = dead && !crate::planted::on(&crate::planted::DEAD_INTENT_HONOURED);
                if let Some(mut holder) = self.live_in(&newest).filter(|_| !dead) {
                    holder.owner = format!("{} (an exclusive claimer waiting)", holder.owner);
                    holder.waiting = true;
                    // Never fenced: a live intent waits, a dead one is skipped above.
                    let way = InTheWay {
                        holder,
                        key: key.intent(),
                        label: String::new(),
                        dead: false,
                    };
                    return Ok((Some(way), seen));
                }
            }
        }
        if let Some(chain) = chain {
            let down = chain.own_index.is_some();
            if let Some(way) = self.tree_conflict(chain, holder_id, proof, down, false, true)? {
                return Ok((Some(way), seen));
            }
        }
        Ok((None, seen))
    }

    /// The holder of `newest` when it is live, or a create still in progress.
    fn live_in(&self, newest: &Newest) -> Option<Holder> {
        if newest.top_is_torn() {
            return Some(Holder {
                owner: "a claim still being written".into(),
                holder_id: String::new(),
                pid: 0,
                token: 0,
                generation: newest.generation,
                expires_at_ms: 0,
                in_the_way: None,
                waiting: false,
                session: None,
            });
        }
        let live = newest
            .envelope()
            .is_some_and(|envelope| record::is_live(&envelope, self.clock.wall_ms()));
        if live { newest.holder() } else { None }
    }

    /// A live shared participant of the claim series `key` other than `holder_id`:
    /// what keeps an exclusive claimer waiting.
    pub(crate) fn live_participant(&self, key: &Key, holder_id: &str) -> Result<Option<Holder>> {
        Ok(self
            .participant_in_way(key, holder_id)?
            .map(|(holder, ..)| holder))
    }

    /// The look before an exclusive claim at the shared participants of `key`: a
    /// live one other than `holder_id`'s, with one whose process provably died
    /// fenced (its series claimed and given back, so its entry is swept) when the
    /// options allow dead-holder takeover.
    pub(crate) fn look_participants(
        &self,
        key: &Key,
        holder_id: &str,
        options: &AcquireOptions,
    ) -> Result<Option<Holder>> {
        for _ in 0..8 {
            match self.participant_in_way(key, holder_id)? {
                Some((holder, participant, dead, label))
                    if dead && options.dead_holder_takeover =>
                {
                    let way = super::subtree::InTheWay {
                        holder,
                        key: participant,
                        label,
                        dead,
                    };
                    if !self.fence_dead(&way, options)? {
                        return Ok(Some(way.holder));
                    }
                }
                other => return Ok(other.map(|(holder, ..)| holder)),
            }
        }
        self.live_participant(key, holder_id)
    }

    /// The live shared holders of `key` other than `holder_id`, summed up for a
    /// refusal: the one whose lease ends last (so the refusal's "until" is when the
    /// last reader's lease ends), its owner followed by how many others hold beside
    /// it. `None` when none is live now. Reads only (the index is healed by
    /// [`Store::participant_in_way`]); called once, when a claim is refused.
    pub(crate) fn readers_in_way(&self, key: &Key, holder_id: &str) -> Result<Option<Holder>> {
        let mut last: Option<Holder> = None;
        let mut readers = 0usize;
        self.find_participant(&key.shares(), |participant| {
            let newest = self.read_settled(&participant.key)?;
            if newest.holder_id() != Some(holder_id)
                && let Some(holder) = self.live_in(&newest)
            {
                readers += 1;
                if last
                    .as_ref()
                    .is_none_or(|l| holder.expires_at_ms > l.expires_at_ms)
                {
                    last = Some(holder);
                }
            }
            Ok(None::<()>)
        })?;
        Ok(last.map(|mut holder| {
            holder.owner = match readers - 1 {
                0 => format!("{} (shared)", holder.owner),
                1 => format!("{} and 1 other reader (shared)", holder.owner),
                others => format!("{} and {others} other readers (shared)", holder.owner),
            };
            holder
        }))
    }

    /// [`Store::live_participant`] with the participant's own series, whether its
    /// process provably died (dead-holder takeover's rule) and its label.
    ///
    /// The index heals itself: an entry whose participant ended (released, given
    /// back, expired) is ignored and removed, and so is one whose participant never
    /// wrote its record and whose writer provably died before it could (a crash
    /// between the entry and the record: the entry carries its writer's process
    /// evidence). Never the newest generation (docs/protocol.md I2), and never an
    /// entry whose record may still be written.
    pub(crate) fn participant_in_way(
        &self,
        key: &Key,
        holder_id: &str,
    ) -> Result<Option<(Holder, Key, bool, String)>> {
        let index = key.shares();
        self.find_participant(
            &index,
            |Participant {
                 generation,
                 entry,
                 key: participant,
                 newest_entry,
             }| {
                let newest = self.read_settled(&participant)?;
                if let Some(mut holder) = self.live_in(&newest) {
                    if newest.holder_id() == Some(holder_id) {
                        return Ok(None);
                    }
                    holder.owner = format!("{} (shared)", holder.owner);
                    let dead = newest
                        .claim()
                        .and_then(|r| r.process.as_ref())
                        .is_some_and(|evidence| self.provably_dead(evidence));
                    let label = newest
                        .claim()
                        .map_or_else(|| entry.label.clone(), |r| r.label.to_string());
                    return Ok(Some((holder, participant, dead, label)));
                }
                // A participant whose record ended (released or expired) never holds
                // again: renewal refuses an ended record, and its key is its own. One
                // with no record yet may be about to write it — unless its writer is
                // provably dead.
                #[cfg(feature = "planted-bugs")]
                let sweep_unwritten = crate::planted::on(&crate::planted::SHARES_SWEEP_UNWRITTEN);
                #[cfg(not(feature = "planted-bugs"))]
                let sweep_unwritten = false;
                let ended = newest.generation > 0;
                let never_written = newest.generation == 0
                    && (sweep_unwritten
                        || entry
                            .process
                            .as_ref()
                            .is_some_and(|evidence| self.provably_dead(evidence)));
                if ended && !newest_entry {
                    self.remove_ended_participant(&index, generation, &participant);
                } else if never_written && !newest_entry {
                    let _ = self.backend.remove_superseded(&index, generation);
                }
                Ok(None)
            },
        )
    }

    /// Removes the index entry (`generation` of `index`) of a participant whose
    /// series `participant` ended (its newest record a tombstone or expired), then
    /// the series itself (docs/design-05-subtrees-and-shared.md §4.2): the entry
    /// first and synchronously, and the series only once that removal succeeded —
    /// an entry left behind an emptied series would read as a participant whose
    /// record is not written yet, kept while its writer lives, and never heal.
    /// Then the series' records lowest first, the newest last, and its key's
    /// container: at every moment, if the newest record is gone so is every one
    /// below it, so a stale renewal of the ended tenure either finds its
    /// generation taken or lands in an empty series, which the renewal rule refuses
    /// (docs/protocol.md §3.2). A participant key is never reused, so this one
    /// exception to "the newest record is never removed" (docs/protocol.md I2)
    /// hands no generation to anyone. Best effort; not on a backend whose listing
    /// is not a snapshot (which is never swept).
    fn remove_ended_participant(&self, index: &Key, generation: u64, participant: &Key) {
        if !self.backend.listing_is_snapshot() {
            let _ = self.backend.remove_superseded(index, generation);
            return;
        }
        #[cfg(feature = "planted-bugs")]
        let newest_first = crate::planted::on(&crate::planted::PARTICIPANT_REMOVED_NEWEST_FIRST);
        #[cfg(not(feature = "planted-bugs"))]
        let newest_first = false;
        if !newest_first && self.backend.remove(index, generation).is_err() {
            return;
        }
        let Ok(mut generations) = self.backend.generations(participant) else {
            return;
        };
        generations.sort_unstable();
        if newest_first {
            // The planted bug: newest first, and the entry last.
            generations.reverse();
        }
        for g in generations {
            if self.backend.remove(participant, g).is_err() {
                return;
            }
        }
        if newest_first && self.backend.remove(index, generation).is_err() {
            return;
        }
        let _ = self.backend.remove_key_if_empty(participant);
    }

    /// Registers or renews a waiting writer's intent on `key` (held by `holder_id`
    /// of process `pid`, with `secret`), so that no new shared claimer is admitted
    /// while it waits.
    pub(crate) fn hold_intent(
        &self,
        intent: &mut Option<Intent>,
        key: &Key,
        label: &str,
        (holder_id, pid): (&str, u32),
        secret: &Secret,
        options: &AcquireOptions,
    ) -> Result<()> {
        let mono = self.clock.monotonic_ms();
        // At most INTENT_TTL_MAX_MS: a waiter stopped (SIGSTOP) keeps readers out
        // that long, not for its claim's whole ttl (a breaker: ten minutes,
        // invisible in `status` and unbreakable).
        let options = &AcquireOptions {
            ttl_ms: options.ttl_ms.min(INTENT_TTL_MAX_MS),
            ..options.clone()
        };
        if let Some(held) = intent {
            if mono.saturating_sub(held.renewed_mono) < options.ttl_ms / 3 {
                return Ok(());
            }
            // Renewed with this process's evidence too (see the claim below).
            let evidence = self.liveness.this_process();
            #[cfg(feature = "planted-bugs")]
            let evidence = evidence.filter(|_| {
                options.tied_to_process || !crate::planted::on(&crate::planted::INTENT_UNTIED)
            });
            match self.renew_tenure(
                &held.key,
                &held.label,
                held.token,
                secret,
                options.ttl_ms,
                evidence,
            ) {
                Ok(_) => {
                    held.renewed_mono = mono;
                    return Ok(());
                }
                Err(error) if crate::protocol::is_loss(&error) => *intent = None,
                Err(error) => return Err(error),
            }
        }
        let want = key.intent();
        let mut watch = crate::protocol::series::Watch::default();
        // Tied to this process whatever the claim is: an intent lives only while
        // its waiter waits, so a waiter killed meanwhile (SIGKILL, a crash) leaves
        // one that readers and covered claims see as dead at once, instead of one
        // that keeps them out for a ttl (found by a breaker).
        let wait_options = options.clone().wait_ms(0).tied_to_process(true);
        #[cfg(feature = "planted-bugs")]
        let wait_options = if crate::planted::on(&crate::planted::INTENT_UNTIED) {
            wait_options.tied_to_process(options.tied_to_process)
        } else {
            wait_options
        };
        if let crate::protocol::series::Claim::Taken(claim, _, _, _) = self.claim_key(
            &want,
            label,
            (holder_id, pid),
            &secret.proof(),
            &wait_options,
            &mut watch,
        )? {
            *intent = Some(Intent {
                key: want,
                label: label.to_string(),
                token: claim.token,
                renewed_mono: mono,
            });
        }
        Ok(())
    }

    /// Gives a waiting writer's intent back, best effort (it expires with its ttl).
    pub(crate) fn drop_intent(&self, intent: Option<Intent>, secret: &Secret) {
        if let Some(held) = intent {
            let _ = self.release_tenure(&held.key, &held.label, held.token, secret);
        }
    }
}

/// A resource's shared tenures as `status` shows them ([`Store::shared_holders`]).
pub(crate) struct SharedRow {
    /// `lock:NAME`, `file:PATH` or `dir:PATH`.
    pub(crate) resource: String,
    /// Its participant index.
    pub(crate) index: Key,
    /// Its live shared holders.
    pub(crate) holders: Vec<Holder>,
    /// The newest record of the shared tenure that ended last, when one did.
    pub(crate) ended: Option<crate::record::Record>,
    /// Every live holder's process provably ended (a writer takes them over at
    /// once); true when there are none.
    pub(crate) gone: bool,
}

impl Store {
    /// Every resource with shared tenures in its participant index: its name as
    /// `status` shows it (`lock:NAME`, `file:PATH`, `dir:PATH`), its participant
    /// index, the live holders, and — for `status` to show when none is live — the
    /// record of the shared tenure that ended last (released, broken or expired;
    /// the one whose newest record was written last).
    pub(crate) fn shared_holders(&self) -> Result<Vec<SharedRow>> {
        let mut found: Vec<SharedRow> = Vec::new();
        let now = self.clock.wall_ms();
        for index in self.backend.keys()? {
            if !index.as_str().starts_with("shares-") {
                continue;
            }
            self.find_participant(&index, |Participant { entry, key, .. }| {
                let newest = self.read_newest(&key)?;
                let live = newest
                    .envelope()
                    .is_some_and(|envelope| record::is_live(&envelope, now));
                // An existing file's participant is in both of its keys' indexes.
                let row = match found.iter().position(|row| row.resource == entry.label) {
                    Some(i) => &mut found[i],
                    None => {
                        found.push(SharedRow {
                            resource: entry.label.clone(),
                            index: index.clone(),
                            holders: Vec::new(),
                            ended: None,
                            gone: true,
                        });
                        found.last_mut().expect("just pushed")
                    }
                };
                match newest.holder().filter(|_| live) {
                    Some(holder) => {
                        if !row.holders.iter().any(|h| h.holder_id == holder.holder_id) {
                            row.holders.push(holder);
                        }
                        // As for an exclusive holder: its process, and its
                        // command's group when it names one, provably ended.
                        row.gone &= newest.claim().and_then(|r| r.process.as_ref()).is_some_and(
                            |evidence| self.surely_gone(evidence) && self.group_gone(evidence),
                        );
                    }
                    None => {
                        if let Some(crate::record::Decoded::Record(r)) = newest.decoded()
                            && row
                                .ended
                                .as_ref()
                                .is_none_or(|last| r.granted_at_ms > last.granted_at_ms)
                        {
                            row.ended = Some(r.clone());
                        }
                    }
                }
                Ok(None::<()>)
            })?;
        }
        Ok(found)
    }

    /// The shared tenure of `resource` that `handle` names, for [`Store::resume`]:
    /// found through the resource's participant index.
    pub(crate) fn resume_shared(
        &self,
        resource: &Resource,
        primary: &Key,
        handle: &crate::LeaseHandle,
    ) -> Result<Option<Lease>> {
        self.find_participant(
            &primary.shares(),
            |Participant {
                 key: participant, ..
             }| {
                let newest = self.read_newest(&participant)?;
                let Some(crate::record::Decoded::Record(r)) = newest.decoded() else {
                    return Ok(None);
                };
                if r.token != handle.token() || !handle.secret().proves(r.secret_sha256.as_deref())
                {
                    return Ok(None);
                }
                if let Some(ended) = crate::protocol::series::ended(r, &resource.target()) {
                    return Err(ended);
                }
                Ok(Some(Lease {
                    resource: resource.clone(),
                    key: participant.clone(),
                    others: Vec::new(),
                    label: r.label.to_string(),
                    token: r.token,
                    generation: r.generation,
                    holder_id: r.holder.to_string(),
                    owner: r.owner.to_string(),
                    ttl_ms: r.ttl_ms,
                    granted_at_ms: r.granted_at_ms,
                    expires_at_ms: r.expires_at_ms,
                    secret: handle.secret().clone(),
                    tied: false,
                    group: None,
                    session: None,
                    session_tag: None,
                    reentered: false,
                    siblings: false,
                    shared: true,
                    queued: false,
                    written: Written::of(r),
                }))
            },
        )
    }
}
