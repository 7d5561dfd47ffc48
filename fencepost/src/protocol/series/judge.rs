//! Judging the newest record of a key while acquiring: live holder, stagnated,
//! dead holder, or a create still in progress.

use super::Newest;
use crate::Holder;
use crate::liveness::{ProcessEvidence, Verdict, same_host};
use crate::protocol::{AcquireOptions, CREATE_GRACE_MS, Store, TURN_MS};
use crate::record;

/// Per key, what an acquisition has watched across its attempts.
#[derive(Debug, Default)]
pub(crate) struct Watch {
    /// (generation, monotonic ms when first seen newest) for the stagnation bound.
    pub(crate) watched: Option<(u64, u64)>,
    /// (generation, times in a row we lost or failed to confirm it while the listing
    /// never got past the generation below it).
    pub(crate) invisible: (u64, usize),
    /// The last judgement was "a create is in progress" (a torn newest record
    /// seen for less than [`CREATE_GRACE_MS`]) or "the turn of another waiter"
    /// (see [`Watch::turn`]): worth waiting for past the deadline.
    pub(crate) in_progress: bool,
    /// The holder id this acquisition claims with, when it may be named in a turn
    /// ([`crate::record::Turn`]): a turn naming it is no obstacle. `None`: every
    /// turn is someone else's.
    pub(crate) me: Option<String>,
    /// The last judgement was "another waiter's turn": its ticket and how many ms
    /// of the turn are left at most (the waiter sleeps no longer than that).
    pub(crate) turn: Option<(u64, u64)>,
    /// The last judgement found a turn that lapsed before its waiter claimed: that
    /// waiter's ticket, which the claim that follows removes (it was passed over).
    pub(crate) lapsed: Option<u64>,
    /// The monotonic reading of the last judgement: taken before the read that the
    /// next judgement judges.
    pub(crate) judged_at: Option<u64>,
}

impl Store {
    /// The holder of `newest` if it is live and has not stagnated: the same newest
    /// record seen for a full ttl of this process's monotonic clock counts as
    /// expired (the stagnation bound of docs/protocol.md §3.4). A torn newest record
    /// is a create in progress for [`CREATE_GRACE_MS`] (see [`Watch::in_progress`]).
    pub(crate) fn live_holder(
        &self,
        newest: &Newest,
        watch: &mut Watch,
        options: &AcquireOptions,
    ) -> Option<Holder> {
        watch.in_progress = false;
        watch.turn = None;
        watch.lapsed = None;
        let mono = self.clock.monotonic_ms();
        let first_seen = match watch.watched {
            Some((generation, since)) if generation == newest.generation => since,
            _ => {
                watch.watched = Some((newest.generation, mono));
                mono
            }
        };
        let watched_for = mono.saturating_sub(first_seen);
        // How long a torn record has been seen in progress, at least: from the
        // reading after the read that first found it (its create had begun) to the
        // reading before the read judged now, which still found it torn. The
        // reading after this read would count a pause between the two as time the
        // create was in progress, and a claim above a create that completed in
        // that pause could evict a holder its creator trusts (the same hole as in
        // `read_settled`, found by the interleaving checker).
        let before = watch.judged_at.replace(mono).unwrap_or(mono);
        let torn_for = before.saturating_sub(first_seen);
        #[cfg(feature = "planted-bugs")]
        let torn_for = if crate::planted::on(&crate::planted::TORN_AGED_AFTER_THE_READ) {
            watched_for
        } else {
            torn_for
        };
        #[cfg(feature = "planted-bugs")]
        let planted_vacancy = crate::planted::on(&crate::planted::TORN_NEWEST_IS_VACANCY);
        #[cfg(not(feature = "planted-bugs"))]
        let planted_vacancy = false;
        if newest.top_is_torn() && planted_vacancy {
            return None;
        }
        #[cfg(feature = "planted-bugs")]
        if crate::planted::on(&crate::planted::SESSION_HOLDER_IS_VACANCY)
            && options.session.is_some()
            && newest
                .claim()
                .is_some_and(|r| r.session == options.session.as_deref().map(crate::SessionTag::of))
        {
            return None;
        }
        let live = newest
            .envelope()
            .filter(|e| record::is_live(e, self.clock.wall_ms()));
        // Dead-holder takeover: the holder's process is gone, so its record is
        // treated as expired. Safe only because the fence refuses its token from
        // our claim on (docs/design-01-lease-and-fence.md).
        let dead = options.dead_holder_takeover
            && newest
                .claim()
                .and_then(|r| r.process.as_ref())
                .is_some_and(|evidence| self.provably_dead(evidence));
        if let Some(envelope) = live.filter(|_| !dead) {
            let record_ttl = newest.claim().map(|r| r.ttl_ms).unwrap_or(
                envelope
                    .expires_at_ms
                    .saturating_sub(envelope.granted_at_ms),
            );
            if watched_for < record_ttl {
                return Some(newest.holder().expect("a live record has a holder"));
            }
        }
        if let Some(holder) = self.turn_of_another(newest, watch, watched_for) {
            return Some(holder);
        }
        // A torn newest record is a create that may still be in progress: it only
        // proves its generation is taken. Wait it out for CREATE_GRACE_MS; a
        // creator whose create took that long gives its claim back, so taking over
        // after that is safe.
        if newest.top_is_torn() && torn_for < CREATE_GRACE_MS {
            watch.in_progress = true;
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
        None
    }

    /// The waiter named by a contended release's tombstone, while its turn lasts and
    /// it is not us: the key is kept for it for up to [`TURN_MS`] (by the tombstone's
    /// stamp on the wall clock, and by our monotonic clock since we first saw it,
    /// whichever ends first), waited out even past our deadline. Fairness only: a
    /// turn never lets anyone claim without the exclusive create.
    fn turn_of_another(
        &self,
        newest: &Newest,
        watch: &mut Watch,
        watched_for: u64,
    ) -> Option<Holder> {
        let tombstone = newest.top_record().filter(|r| r.released)?;
        let turn = tombstone.next.as_ref()?;
        #[cfg(feature = "planted-bugs")]
        let ours = watch.me.as_deref() == Some(&*turn.holder)
            && !crate::planted::on(&crate::planted::TURN_FOR_NOBODY);
        #[cfg(not(feature = "planted-bugs"))]
        let ours = watch.me.as_deref() == Some(&*turn.holder);
        if ours {
            return None;
        }
        let age = watched_for.max(self.clock.wall_ms().saturating_sub(tombstone.granted_at_ms));
        #[cfg(feature = "planted-bugs")]
        let age = if crate::planted::on(&crate::planted::TURN_NEVER_LAPSES) {
            0
        } else {
            age
        };
        if age >= TURN_MS {
            watch.lapsed = Some(turn.ticket);
            return None;
        }
        watch.in_progress = true;
        watch.turn = Some((turn.ticket, TURN_MS - age));
        Some(Holder {
            owner: format!("{}, the next waiter in line", turn.owner),
            holder_id: turn.holder.to_string(),
            pid: turn.pid,
            token: 0,
            generation: newest.generation,
            expires_at_ms: tombstone.granted_at_ms.saturating_add(TURN_MS),
            in_the_way: None,
            waiting: true,
            session: None,
        })
    }

    /// True only when `evidence` names a process of this host and boot that the
    /// liveness probe says definitely no longer runs; every doubt is `false`.
    /// Whether `evidence` names a process of this host and boot that has certainly
    /// ended, by the platform's cheapest check ([`Liveness::surely_gone`](crate::Liveness::surely_gone)): for
    /// naming the next waiter, where doubt costs only a lapsed turn.
    pub(crate) fn surely_gone(&self, evidence: &ProcessEvidence) -> bool {
        self.liveness
            .this_process()
            .is_some_and(|ours| same_host(evidence, &ours))
            && self.liveness.surely_gone(evidence)
    }

    /// The process evidence a claim made with `options` carries: this process's,
    /// for a tenure tied to it, naming [`ProcessEvidence::GROUP_TO_COME`] when its
    /// command's group is yet to be named; `None` for a tenure not tied.
    pub(crate) fn tied_evidence(&self, options: &AcquireOptions) -> Option<ProcessEvidence> {
        if !options.tied_to_process {
            return None;
        }
        let evidence = self.liveness.this_process()?;
        Some(ProcessEvidence {
            group: options
                .group_to_come
                .then_some(ProcessEvidence::GROUP_TO_COME),
            ..evidence
        })
    }

    pub(crate) fn provably_dead(&self, evidence: &ProcessEvidence) -> bool {
        self.liveness
            .this_process()
            .is_some_and(|ours| same_host(evidence, &ours))
            && self.liveness.verdict(evidence) == Verdict::Gone
            // And its process group, if it names one: `fencepost run`'s command may
            // outlive a killed `run` until the guard has stopped it (a breaker: a
            // waiter took over while the orphaned command still wrote).
            && self.group_gone(evidence)
    }

    /// True when the process group `evidence` names, if any, has certainly no
    /// process left: `fencepost run`'s command may outlive a killed `run` until
    /// its guard has stopped it.
    pub(crate) fn group_gone(&self, evidence: &ProcessEvidence) -> bool {
        (match evidence.group {
            None => true,
            // Its command is being started in a group not named yet: nothing
            // here can prove that group empty, so the ttl decides.
            Some(ProcessEvidence::GROUP_TO_COME) => group_to_come_ignored(),
            Some(group) => self.liveness.group_verdict(group) == Verdict::Gone,
        }) || group_ignored()
    }
}

/// Planted bug [`crate::planted::GROUP_TO_COME_IGNORED`]: a holder whose group is
/// not named yet is gone once its process is.
fn group_to_come_ignored() -> bool {
    #[cfg(feature = "planted-bugs")]
    if crate::planted::on(&crate::planted::GROUP_TO_COME_IGNORED) {
        return true;
    }
    false
}

/// Planted bug [`crate::planted::GROUP_IGNORED`]: a holder whose process ended is
/// gone even while its process group runs.
fn group_ignored() -> bool {
    #[cfg(feature = "planted-bugs")]
    if crate::planted::on(&crate::planted::GROUP_IGNORED) {
        return true;
    }
    false
}
