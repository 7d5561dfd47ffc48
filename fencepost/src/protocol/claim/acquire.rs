//! Acquiring a claim: every key of it, in canonical order, waiting while held.

use std::time::Duration;

use super::session::check_session;
use super::shared::Intent;
use crate::proof::{Secret, SessionTag};
use crate::protocol::series::{Claim, Watch};
use crate::protocol::{
    AcquireOptions, BACKOFF_CAP_MS, BACKOFF_START_MS, HeldKey, Lease, RACE_GRACE_MS, Store,
    TryAcquire, Written, new_holder_id,
};
use crate::record::Record;
use crate::{Error, Holder, Key, Resource, Result};

/// How many times acquire retries a claim that lapsed before it was confirmed even
/// when the wait is over: one pause (a GC, a swapped-out process) should not fail an
/// acquire with no wait, but creates that are always slower than the ttl must end.
const LAPSE_RETRIES: usize = 2;

/// How long past the wait's end (ms) an acquisition keeps trying while the holder
/// in its way is a tenure of its own session: another process of the session is
/// part-way through claiming the resource (one key of a file taken, the other not
/// yet), and re-entry succeeds once that claim settles — its create completes
/// within [`CREATE_GRACE_MS`](crate::CREATE_GRACE_MS) or is taken for abandoned.
/// Without it a session's parallel claims of one file with no wait were refused
/// "held by" the session itself (found by a breaker: 11 of 12 parallel
/// `claim --file --session` refused; pinned by
/// `cli/tests/sessions.rs::parallel_claims_of_one_file_by_one_session_are_never_refused_by_the_session`).
/// Bounded, so a tenure of the session that cannot be re-entered is still reported.
const OWN_SESSION_GRACE_MS: u64 = crate::CREATE_GRACE_MS;

/// A key's claim taken by an acquisition, with the superseded generations its
/// confirming read listed below it.
struct Taken<'k> {
    key: &'k Key,
    claim: Record,
    below: Vec<u64>,
    /// Monotonic ms read just before the claim was stamped: the claim is live for
    /// `ttl` of this clock from then, whatever the wall clock does meanwhile.
    since_mono: u64,
    /// The create took less than [`CREATE_GRACE_MS`].
    trusted: bool,
}

impl Store {
    /// Acquires `resource`, waiting up to `options.wait_ms` while it is held.
    ///
    /// Creates generation newest+1 with token = that generation, flushed; confirms
    /// the record is the newest and still live before returning (a caller paused
    /// between create and return never gets an expired lease); then sweeps older
    /// records. While waiting, backs off with jitter, and treats a newest record that
    /// stayed newest for a full ttl of this process's monotonic clock as expired (the
    /// stagnation bound of docs/protocol.md §3.4).
    ///
    /// # Errors
    ///
    /// - [`Error::Held`] when a live lease of someone else outlasted the wait.
    /// - [`Error::InvalidArgument`] for a ttl of 0; [`Error::InvalidResource`] for a
    ///   resource without a key.
    /// - [`Error::Backend`] when the store fails. If the failure came after a create
    ///   that may have landed, the series is re-read and a landed claim of ours is
    ///   given up with a tombstone (docs/protocol.md I4): an unconfirmed claim is never handed out.
    pub fn acquire(&self, resource: &Resource, options: &AcquireOptions) -> Result<Lease> {
        match self.try_acquire(resource, options)? {
            TryAcquire::Acquired(lease) => Ok(lease),
            TryAcquire::Held(holder) => Err(Error::Held {
                label: resource.target(),
                holder,
            }),
        }
    }

    /// Like [`Store::acquire`], but a resource still held when the wait ends is
    /// reported as [`TryAcquire::Held`] with its holder instead of as an error.
    ///
    /// # Errors
    ///
    /// As [`Store::acquire`], except [`Error::Held`].
    pub fn try_acquire(&self, resource: &Resource, options: &AcquireOptions) -> Result<TryAcquire> {
        self.try_acquire_observed(resource, options, &mut |_, _| {})
    }

    /// Like [`Store::try_acquire`], and calls `on_wait(holder, waited_ms)` each time
    /// it is about to back off because `holder` holds the resource (`waited_ms`: how
    /// long this call has waited so far, by the monotonic clock). For progress
    /// displays; it decides nothing.
    ///
    /// # Errors
    ///
    /// As [`Store::try_acquire`].
    pub fn try_acquire_observed(
        &self,
        resource: &Resource,
        options: &AcquireOptions,
        on_wait: &mut dyn FnMut(&Holder, u64),
    ) -> Result<TryAcquire> {
        if options.ttl_ms == 0 {
            return Err(Error::InvalidArgument(
                "ttl must be at least 1 millisecond".into(),
            ));
        }
        crate::protocol::check_owner(&options.owner)?;
        if options.shared {
            return self.try_acquire_shared(resource, options, on_wait);
        }
        // A writer that has to wait holds an intent that keeps new shared claimers
        // out (design-05 §4.3); whatever the outcome, it is given back here.
        let mut intent = None;
        // Our place in the key's wait queue, once we sleep on its change
        // notification (docs/design-07-performance.md, "Who is woken: turns"),
        // likewise given back whatever the outcome.
        let mut ticket = None;
        let secret = match &options.session {
            Some(session) => Secret::for_session(session),
            None => Secret::generate(),
        };
        let outcome = self.acquire_rounds(
            resource,
            options,
            on_wait,
            &mut intent,
            &mut ticket,
            &secret,
        );
        self.drop_intent(intent, &secret);
        if let Some((key, ticket)) = ticket {
            self.leave_queue(&key, ticket);
        }
        // Refused by a tenure of its own session that cannot take the whole
        // resource in (another tenure holds one of its series: a file's new file id
        // claimed through another link): the one in the way is that other holder,
        // so name it (a breaker: the session was told its own claim was in the
        // way, and to have the human break it, which would not have helped).
        match outcome {
            Ok(TryAcquire::Held(holder))
                if options.session.as_deref().is_some_and(|session| {
                    holder.session.as_deref() == Some(&crate::SessionTag::of(session))
                }) =>
            {
                let other = self.conflict(resource, options).ok().flatten();
                Ok(TryAcquire::Held(other.unwrap_or(holder)))
            }
            Ok(TryAcquire::Held(holder)) => {
                Ok(TryAcquire::Held(self.through_link(resource, holder)))
            }
            outcome => outcome,
        }
    }

    /// `holder`, refusing a claim of the file `resource`, named with the other hard
    /// link it holds the file through ([`Holder::in_the_way`]), when it is the
    /// holder of the file's file-id series under another path: "held through
    /// hl.txt", not "f.txt is held" by someone who never named f.txt. One read, on
    /// a refusal only.
    fn through_link(&self, resource: &Resource, mut holder: Holder) -> Holder {
        if holder.in_the_way.is_some() {
            return holder;
        }
        let Ok(identity) = resource.identity() else {
            return holder;
        };
        let Some(file_id) = identity.file_id else {
            return holder;
        };
        let Ok(newest) = self.read_newest(&file_id) else {
            return holder;
        };
        if let Some(record) = newest.claim()
            && *record.holder == *holder.holder_id
            && *record.label != *identity.label
        {
            holder.in_the_way = Some(Box::new(Resource::File(std::path::PathBuf::from(
                &*record.label,
            ))));
        }
        holder
    }

    /// The rounds of an exclusive acquisition (see [`Store::try_acquire_observed`]).
    fn acquire_rounds(
        &self,
        resource: &Resource,
        options: &AcquireOptions,
        on_wait: &mut dyn FnMut(&Holder, u64),
        intent: &mut Option<Intent>,
        ticket: &mut Option<(Key, u64)>,
        secret: &Secret,
    ) -> Result<TryAcquire> {
        if let Some(session) = &options.session {
            check_session(session)?;
        }
        let identity = resource.identity()?;
        let keys = identity.keys();
        // A file or subtree claim: findable from every directory above it before it
        // claims anything (docs/design-05-subtrees-and-shared.md §3.1).
        let chain = resource.tree_chain()?;
        if let Some(chain) = &chain {
            self.register_path(chain)?;
        }
        let down = matches!(resource, Resource::Dir(_));
        // The holder id and the pid its records carry: one process id for both.
        let (holder_id, pid) = new_holder_id(&options.owner);
        // One secret per tenure, whatever the number of keys and attempts: its hash
        // in every record of the tenure is the proof of holding. A session's is
        // derived from its name, so its other processes can act on the tenure.
        let secret = secret.clone();
        let proof = secret.proof();
        let (primary, label) = (identity.key.clone(), identity.label.clone());
        let started = self.clock.monotonic_ms();
        let deadline = started.saturating_add(options.wait_ms);
        let mut backoff_ms = BACKOFF_START_MS;
        let mut lapses = 0;
        // Past the wait, while our own session is in the way: until when.
        let mut own_session_until: Option<u64> = None;
        // Past the wait, after giving back for a rival found only once our claim
        // had landed: until when we look again before reporting it.
        let mut race_until: Option<u64> = None;
        let own_tag = options.session.as_deref().map(crate::SessionTag::of);
        let mut watches: Vec<Watch> = keys.iter().map(|_| Watch::default()).collect();

        // A change notification to sleep on while held (one key only; a resource of
        // several keys polls), made the first time the key is found held.
        let mut change: Option<Option<Box<dyn crate::ChangeWatch>>> = None;
        // Once queued, a watch on our own ticket: a release rings the waiter it
        // names and no other, so the rest of the line sleeps through handoffs that
        // are not theirs (docs/design-07-performance.md, "Who is woken: rings").
        let mut rung: Option<Box<dyn crate::ChangeWatch>> = None;
        // This acquisition waited in the key's queue: its release looks for the
        // next in line.
        let mut queued = false;
        // Our ticket was made (and its watch) just before the last read.
        let mut joined_before_read = false;
        // Joins the key's queue for the rest of the wait (`wait_ms`): the ticket into
        // `ticket`, and the watch on it to sleep on.
        let join = |ticket: &mut Option<(Key, u64)>, judge: Option<&mut Watch>, wait_ms: u64| {
            self.queue_up(
                (&primary, &label),
                (&holder_id, pid),
                options,
                wait_ms,
                ticket,
                judge,
            )
        };
        loop {
            // Over at once when the caller gave up (`AcquireOptions::cancel`).
            let deadline = options.deadline(deadline);
            let just_joined = std::mem::take(&mut joined_before_read);
            // The session already holds it: the same tenure, renewed. Every round,
            // so a claim that lost the race to another process of its session
            // re-enters that process's tenure instead of waiting it out.
            if let Some(lease) = self.reenter(resource, options)? {
                return Ok(TryAcquire::Acquired(lease));
            }
            // Several keys (an existing file: path and file id): look before taking
            // anything, so a waiter does not write and tombstone claims every round.
            let mut held = None;
            let mut readers_in_way = false;
            if keys.len() > 1 {
                for (key, watch) in keys.iter().zip(&mut watches) {
                    let newest = self.read_newest(key)?;
                    held = self.live_holder(&newest, watch, options);
                    if held.is_some() {
                        break;
                    }
                }
            }
            // Another name of the file claimed by a tenure without its file id (the
            // file was made, or replaced by a save, after that claim): look before
            // taking, only when the file has other names.
            if held.is_none() {
                held = self.held_under_another_name(&identity, own_tag.as_ref(), options)?;
            }
            // A covering or covered claim: look before taking, as for several keys.
            // A holder in the way whose process provably died is fenced here, as
            // a direct claim of its resource would take it over.
            // Whether that is a reader of a subtree above: then we wait with an
            // intent, which new readers of it honour (they kept a writer below
            // them waiting for as long as they kept arriving: a breaker).
            let mut readers_above = false;
            if held.is_none()
                && let Some(chain) = &chain
            {
                let way = self.look_tree(chain, &holder_id, &proof, down, true, options)?;
                readers_above = !down && way.as_ref().is_some_and(|way| way.key.is_share());
                held = way.map(|way| way.holder);
            }
            // Shared holders of it: also looked at before taking.
            if held.is_none() {
                for key in &keys {
                    held = self.look_participants(key, &holder_id, options)?;
                    readers_in_way = held.is_some();
                    if held.is_some() {
                        break;
                    }
                }
            }
            // Take every key in sorted order; a key found held part-way gives back
            // the ones already taken, so a failure leaves nothing held.
            let mut taken: Vec<Taken> = Vec::new();
            let looked_held = held.is_some();
            if held.is_none() {
                for (key, watch) in keys.iter().zip(&mut watches) {
                    match self.claim_key(
                        key,
                        &identity.label,
                        (&holder_id, pid),
                        &proof,
                        options,
                        watch,
                    ) {
                        Ok(Claim::Taken(claim, below, since_mono, trusted)) => taken.push(Taken {
                            key,
                            claim,
                            below,
                            since_mono,
                            trusted,
                        }),
                        Ok(Claim::Held(holder)) => {
                            held = Some(holder);
                            break;
                        }
                        Err(error) => {
                            self.give_back(&taken, &secret);
                            return Err(error);
                        }
                    }
                }
            }
            // Claimed: now check the other side (design-05 §3.2, §3.3). A claim that
            // covers ours, or that ours covers, made while we claimed, is seen here
            // or sees ours; whoever sees the other gives back.
            if held.is_none()
                && let Some(chain) = &chain
            {
                #[cfg(feature = "planted-bugs")]
                let skip = crate::planted::on(&crate::planted::TREE_CHECK_BEFORE_CLAIM_ONLY);
                #[cfg(not(feature = "planted-bugs"))]
                let skip = false;
                if !skip {
                    // Intents only in the look: they decide fairness, not safety.
                    match self.tree_conflict(chain, &holder_id, &proof, down, true, false) {
                        Ok(conflict) => held = conflict.map(|way| way.holder),
                        Err(error) => {
                            self.give_back(&taken, &secret);
                            return Err(error);
                        }
                    }
                }
            }
            // Claimed: now the shared participants, after our claim landed
            // (design-05 §4.2): a reader admitted meanwhile sees our claim, or we
            // see it.
            if held.is_none() {
                for key in &keys {
                    match self.live_participant(key, &holder_id) {
                        Ok(None) => {}
                        Ok(conflict) => {
                            held = conflict;
                            readers_in_way = true;
                            break;
                        }
                        Err(error) => {
                            self.give_back(&taken, &secret);
                            return Err(error);
                        }
                    }
                }
            }
            if held.is_none() {
                // Our claims keep shared claimers out from here on; the intent
                // goes before the final liveness check, so giving it back cannot
                // delay a lease past its ttl.
                self.drop_intent(intent.take(), &secret);
                // Sweep before the final liveness check, not after: a sweep that
                // stalls (a slow disk, an etcd member without a leader) must not
                // hand out a lease that expired meanwhile (docs/protocol.md §3; found by the
                // etcd cluster test).
                for t in &taken {
                    self.sweep_after_claim(t.key, t.claim.generation, &t.below);
                }
                // A waiter whose turn lapsed before we claimed (passed over) leaves
                // the queue, to join again at the tail, and so does every ticket
                // whose waiter is gone: before the final liveness check too, for the
                // same reason (found by the checker, `notified_handover` seed 4).
                #[cfg(feature = "planted-bugs")]
                let late = crate::planted::on(&crate::planted::CLEAR_LAPSED_AFTER_CONFIRM);
                #[cfg(not(feature = "planted-bugs"))]
                let late = false;
                if let Some(lapsed) = watches.first().and_then(|w| w.lapsed)
                    && !late
                {
                    self.clear_lapsed(&primary, lapsed);
                }
                // Our own ticket goes now, not at our release: a ticket that
                // outlives the wait it was for can be named by a later release
                // (the next holder's, should ours be descheduled right after its
                // tombstone), and a turn for a waiter that already held holds
                // every claimant back for TURN_MS (docs/design-07-performance.md,
                // "A ticket outlives its tenure"). Before the final liveness
                // check too; should our claims lapse after all, we queue again.
                #[cfg(feature = "planted-bugs")]
                let kept = crate::planted::on(&crate::planted::TICKET_KEPT_WHILE_HOLDING);
                #[cfg(not(feature = "planted-bugs"))]
                let kept = false;
                if !kept && let Some((key, mine)) = ticket.take() {
                    self.leave_queue(&key, mine);
                }
            }
            // "Still live after my create" on the monotonic clock from before the
            // stamp: a wall-clock step during a stalled call cannot make a claim a
            // rival already superseded look live (design-01, "confirm on monotonic
            // time"; pinned by the checker's `clock_step_acquire` schedule).
            let mono = self.clock.monotonic_ms();
            let all_live = taken
                .iter()
                .all(|t| t.trusted && mono.saturating_sub(t.since_mono) < options.ttl_ms);
            if held.is_none() && all_live {
                #[cfg(feature = "planted-bugs")]
                if crate::planted::on(&crate::planted::CLEAR_LAPSED_AFTER_CONFIRM)
                    && let Some(lapsed) = watches.first().and_then(|w| w.lapsed)
                {
                    self.clear_lapsed(&primary, lapsed);
                }
                // Our ticket went before the final liveness check (above); the
                // planted bug keeps it for the release to remove, as before.
                ticket.take();
                let mut lease =
                    self.confirmed_lease(resource, identity, taken, holder_id, secret, options);
                lease.queued = queued;
                return Ok(TryAcquire::Acquired(lease));
            }
            // A holder found after some of our claims landed (the checks after
            // claiming, or a key part-way) may be a claimer in the same race,
            // which saw ours and gives back too.
            let raced = !taken.is_empty() && held.is_some();
            self.give_back(&taken, &secret);
            let mono = self.clock.monotonic_ms();
            let Some(holder) = held else {
                // Our claims lapsed before they were confirmed (a pause, or creates
                // slower than the ttl): retry with backoff until the deadline, never
                // in a tight loop that writes a record per pass.
                lapses += 1;
                if mono >= deadline && lapses > LAPSE_RETRIES {
                    return Err(Error::ClaimLapsed {
                        label: resource.target(),
                        ttl_ms: options.ttl_ms,
                    });
                }
                let step = self
                    .jittered(backoff_ms)
                    .min(deadline.saturating_sub(mono))
                    .max(1);
                self.clock.sleep(Duration::from_millis(step));
                backoff_ms = (backoff_ms * 2).min(BACKOFF_CAP_MS);
                continue;
            };
            // A create in progress is waited out even past the deadline: it ends
            // within CREATE_GRACE_MS (completed, or taken for abandoned).
            let in_progress = watches.iter().any(|w| w.in_progress);
            if mono >= deadline && !in_progress {
                // The holder may be this session, which won the race since the
                // round began.
                if let Some(lease) = self.reenter(resource, options)? {
                    return Ok(TryAcquire::Acquired(lease));
                }
                let own = own_tag.is_some() && holder.session.as_deref() == own_tag.as_ref();
                #[cfg(feature = "planted-bugs")]
                let own = own && !crate::planted::on(&crate::planted::OWN_SESSION_NO_GRACE);
                if own
                    && self.within_grace(
                        &mut own_session_until,
                        OWN_SESSION_GRACE_MS,
                        &mut backoff_ms,
                        mono,
                    )
                {
                    continue;
                }
                // Found only after our claim landed: look again (the next round
                // looks before taking, and reports a rival that does hold) rather
                // than name a claimer that may hold nothing
                // (docs/design-05-subtrees-and-shared.md §4.4).
                #[cfg(feature = "planted-bugs")]
                let raced = raced && !crate::planted::on(&crate::planted::RACE_REFUSED_AT_ONCE);
                if raced && self.within_grace(&mut race_until, RACE_GRACE_MS, &mut backoff_ms, mono)
                {
                    continue;
                }
                // Refused by readers: name the one whose lease ends last and how
                // many hold beside it, so "until" is when the last one ends.
                if readers_in_way {
                    for key in &keys {
                        if let Some(readers) = self.readers_in_way(key, &holder_id)? {
                            return Ok(TryAcquire::Held(readers));
                        }
                    }
                }
                return Ok(TryAcquire::Held(holder));
            }
            // Waiting: no shared claimer is admitted from now on.
            // (Only once shared holders are in the way: a writer waiting for a
            // writer needs none, and takes none.)
            // A subtree claimer waiting for claims of other resources (below it,
            // or the readers of one) holds one too, which covered claims honour
            // (design-05 §4.3).
            let covered_in_way = down && holder.in_the_way.is_some();
            if readers_in_way || covered_in_way || readers_above || intent.is_some() {
                self.hold_intent(
                    intent,
                    &primary,
                    &label,
                    (&holder_id, pid),
                    &secret,
                    options,
                )?;
            }
            on_wait(&holder, mono.saturating_sub(started));
            if change.is_none() {
                let watch = (keys.len() == 1 && self.clock.waits_on_change_watches())
                    .then(|| self.backend.watch_changes(&keys[0]))
                    .flatten();
                let registered = watch.is_some();
                change = Some(watch);
                // The watch exists from now on: read again before sleeping on it, so
                // a release that landed since the last read is not slept through
                // (docs/design-07-performance.md, "Waiting").
                #[cfg(feature = "planted-bugs")]
                let registered =
                    registered && !crate::planted::on(&crate::planted::WAIT_WITHOUT_FALLBACK);
                if registered {
                    // A waiter that will queue joins now, before that one read: its
                    // ticket's watch then also exists before it, so the read is the
                    // last one before the first sleep on the ticket (no sleep on the
                    // key's watch in between: docs/design-07-performance.md, "Who is
                    // woken: rings").
                    if !looked_held && mono < deadline && ticket.is_none() {
                        rung = join(ticket, watches.first_mut(), deadline.saturating_sub(mono));
                        queued |= ticket.is_some();
                        joined_before_read = ticket.is_some();
                    }
                    // The planted bug: a waiter that just joined skips that read
                    // and sleeps on its ticket at once.
                    #[cfg(feature = "planted-bugs")]
                    if joined_before_read
                        && crate::planted::on(&crate::planted::TICKET_WATCH_WITHOUT_REREAD)
                    {
                        joined_before_read = false;
                    } else {
                        continue;
                    }
                    #[cfg(not(feature = "planted-bugs"))]
                    continue;
                }
            }
            if let Some(Some(watch)) = change.as_mut() {
                // Asleep on the key's notification: in its queue, so that a
                // contended release can name us (only the key's own holder is
                // released to us; a claim of another resource in the way is not).
                // A waiter passed over (its ticket removed) joins again at the tail.
                let turn = watches.first().and_then(|w| w.turn);
                // (A claim whose wait is over only waits out a turn or a create in
                // progress: it does not queue, and sleeps on the key, for its
                // ticket may be gone.)
                let mut in_line = false;
                // Queued just now: this one sleep is still on the key's watch.
                let mut fresh = false;
                if !looked_held && mono < deadline {
                    // Our ticket gone (passed over, or cleared as expired): a
                    // release would ring nobody we hear, so we queue again.
                    // (Joined just before the last read: the ticket is there, and
                    // its watch was made before that read.)
                    #[cfg(feature = "planted-bugs")]
                    let just_joined = just_joined
                        || crate::planted::on(&crate::planted::TICKET_TRUSTED_WITHOUT_LOOKING);
                    let rejoin = match ticket {
                        None => true,
                        Some(_) if just_joined => false,
                        Some((_, mine)) => !self.holds_ticket(&primary, *mine)?,
                    };
                    if rejoin {
                        rung = join(ticket, watches.first_mut(), deadline.saturating_sub(mono));
                        queued |= ticket.is_some();
                    }
                    in_line = ticket.is_some();
                    // Joined again just now (our ticket was removed): its watch
                    // exists from now on, but a release that listed the queue
                    // before the new ticket landed, and whose tombstone lands
                    // after our last read, rings nobody we hear (it names someone
                    // else, or nobody and rang before the watch). The key's
                    // watch, made before that read, hears that tombstone: this
                    // sleep is on it, the next ones (after a read) on the ticket.
                    // (Not a read again at once, as after the first join: a
                    // ticket removed as soon as it is made would spin.)
                    #[cfg(feature = "planted-bugs")]
                    let planted = crate::planted::on(&crate::planted::TICKET_WATCH_WITHOUT_REREAD);
                    #[cfg(not(feature = "planted-bugs"))]
                    let planted = false;
                    fresh = rejoin && !planted;
                }
                // Woken by the change (a release, a renewal, a claim) or after
                // CHANGE_WAIT_MAX at the latest: a missed notification, or a holder
                // that died without releasing, costs no more than polling did.
                // Another waiter's turn is slept on no longer than it lasts.
                let cap = crate::CHANGE_WAIT_MAX.as_millis() as u64;
                let cap = turn.map_or(cap, |(_, left)| cap.min(left));
                #[cfg(feature = "planted-bugs")]
                let cap = if crate::planted::on(&crate::planted::WAIT_WITHOUT_FALLBACK) {
                    u64::MAX
                } else {
                    cap
                };
                let step = cap.min(deadline.saturating_sub(mono)).max(1);
                // Queued with a ticket watch: only our ring (or the fallback) wakes
                // us, not every record of the key.
                let sleeper = match rung.as_mut() {
                    Some(rung) if in_line && !fresh => rung,
                    _ => watch,
                };
                sleeper.wait(Duration::from_millis(step));
                continue;
            }
            self.back_off(&mut backoff_ms, deadline, mono);
        }
    }

    /// The lease for claims confirmed (and swept below) on every key of `identity`.
    fn confirmed_lease(
        &self,
        resource: &Resource,
        identity: crate::Identity,
        taken: Vec<Taken>,
        holder_id: String,
        secret: Secret,
        options: &AcquireOptions,
    ) -> Lease {
        let mut primary = None;
        let mut others = Vec::new();
        // The whole resource is held until the earliest of its claims ends (they
        // were created one after another).
        let mut end = u64::MAX;
        for Taken {
            key,
            claim,
            since_mono,
            ..
        } in taken
        {
            end = end.min(claim.expires_at_ms);
            if *key == identity.key {
                primary = Some((claim, since_mono));
            } else {
                others.push(HeldKey {
                    key: key.clone(),
                    token: claim.token,
                    generation: claim.generation,
                    stamped: crate::protocol::Stamp::at(claim.granted_at_ms, since_mono),
                });
            }
        }
        let (claim, since_mono) = primary.expect("the primary key is among the keys taken");
        #[cfg(feature = "planted-bugs")]
        if crate::planted::on(&crate::planted::LEASE_END_FROM_PRIMARY) {
            end = claim.expires_at_ms;
        }
        Lease {
            resource: resource.clone(),
            key: identity.key,
            others,
            label: identity.label,
            token: claim.token,
            generation: claim.generation,
            holder_id,
            owner: options.owner.clone(),
            ttl_ms: options.ttl_ms,
            granted_at_ms: claim.granted_at_ms,
            expires_at_ms: end,
            secret,
            tied: options.tied_to_process,
            // Renewals keep saying "a group to come" until it is named.
            group: options
                .group_to_come
                .then_some(crate::ProcessEvidence::GROUP_TO_COME),
            session: options.session.clone(),
            session_tag: options.session.as_deref().map(SessionTag::of),
            reentered: false,
            siblings: false,
            shared: false,
            queued: false,
            // The claim itself, moved (its numbers were copied above): no clone on
            // the acquire path; stamped after `since_mono` was read.
            written: Written::stamped(claim, since_mono),
        }
    }

    /// Releases claims taken by an acquisition that cannot complete, best effort: a
    /// tombstone that fails to land leaves a claim that expires with its ttl, as a
    /// crashed holder's would.
    fn give_back(&self, taken: &[Taken], secret: &Secret) {
        for Taken { key, claim, .. } in taken {
            self.give_back_claim(key, &claim.label, (claim.token, claim.generation), secret);
        }
    }
}
