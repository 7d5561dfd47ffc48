//! A key's wait queue (`queue-…`): one ticket per waiter asleep on a change
//! notification, in arrival order, and the turn a contended release gives the oldest
//! (docs/design-07-performance.md, "Who is woken: turns").
//!
//! Nothing here decides safety. A ticket carries no token and fences nothing; a turn
//! only makes other claimants hold back for at most [`TURN_MS`](crate::TURN_MS).
//! Every claim is still one exclusive create, judged as before, so a lost ticket, a
//! stale turn or a queue nobody reads costs fairness, never exclusion.

use super::next_generation;
use crate::backend::{CreateOutcome, Durability};
use crate::protocol::{AcquireOptions, Store};
use crate::record::{self, Decoded, FORMAT_VERSION, Record, Turn};
use crate::{Key, Result};

/// How many ticket numbers each generation of a key keeps for its queue (see
/// [`Store::key_newest`]); past 2^48 generations, numbering falls back to the
/// queue's own.
const TICKET_BLOCK: u64 = 1 << 16;

/// How many times joining retries when another waiter takes the same ticket number.
const JOIN_ATTEMPTS: usize = 8;

impl Store {
    /// Joins `key`'s wait queue as `holder_id` of process `pid`: creates the queue's next generation,
    /// unflushed (a ticket lost in a power cut only loses a place in line), valid
    /// for `wait_ms` (the rest of the waiter's wait) and carrying this process's
    /// liveness evidence (for a human reading the queue; a release does not probe
    /// it: a waiter that died is passed over when its turn lapses). Returns the
    /// ticket's generation; `None` when the queue cannot be written (the waiter
    /// then waits unqueued, as every waiter did before turns).
    pub(crate) fn join_queue(
        &self,
        key: &Key,
        label: &str,
        (holder_id, pid): (&str, u32),
        options: &AcquireOptions,
        wait_ms: u64,
    ) -> Option<u64> {
        let queue = key.queue();
        for _ in 0..JOIN_ATTEMPTS {
            let newest = self.backend.generations(&queue).ok()?.into_iter().max();
            // Read after the queue: see `key_newest`.
            let key_newest = self.key_newest(key).ok()?;
            let floor = key_newest.checked_mul(TICKET_BLOCK).unwrap_or(0);
            let generation = next_generation(&queue, newest.unwrap_or(0).max(floor)).ok()?;
            let now = self.clock.wall_ms();
            let ticket = Record {
                v: FORMAT_VERSION,
                key: queue.as_str().into(),
                label: label.into(),
                token: generation,
                generation,
                holder: holder_id.into(),
                owner: options.owner.as_str().into(),
                pid,
                host: crate::host_name_shared(),
                granted_at_ms: now,
                expires_at_ms: now.saturating_add(wait_ms),
                ttl_ms: wait_ms,
                released: false,
                secret_sha256: None,
                broken: None,
                process: self.liveness.this_process(),
                session: None,
                next: None,
            };
            match self.backend.create(
                &queue,
                generation,
                &ticket.encode_owned(),
                Durability::Unflushed,
            ) {
                Ok(CreateOutcome::Created) => {
                    #[cfg(feature = "planted-bugs")]
                    if crate::planted::on(&crate::planted::TICKET_NUMBER_UNCONFIRMED) {
                        return Some(generation);
                    }
                    // A record of the key landed since it was read: the number may
                    // be one given before and removed since (see `key_newest`).
                    // Ours for certain (just created, and no waiter's ticket is
                    // removed by another while it waits): given up, and numbered
                    // again.
                    let again = self.key_newest(key);
                    if matches!(again, Ok(n) if n == key_newest) {
                        return Some(generation);
                    }
                    // Not confirmed (changed, or the read failed): no ticket is
                    // left behind for a waiter that will not watch it.
                    #[cfg(feature = "planted-bugs")]
                    if again.is_err()
                        && crate::planted::on(&crate::planted::TICKET_LEFT_ON_FAILED_CONFIRM)
                    {
                        return None;
                    }
                    let _ = self.backend.remove(&queue, generation);
                    again.ok()?;
                    continue;
                }
                Ok(CreateOutcome::AlreadyExists) => continue,
                Err(_) => {
                    // Landed or not, a ticket we do not know we hold is given up.
                    let _ = self.backend.remove(&queue, generation);
                    return None;
                }
            }
        }
        None
    }

    /// `key`'s newest generation, which numbers its queue's tickets: a new ticket
    /// is numbered above it times [`TICKET_BLOCK`] (and above the queue's newest),
    /// so that no ticket number is given twice though the queue empties
    /// (docs/design-07-performance.md, "A ticket number is never given twice").
    ///
    /// Why that holds: a ticket is removed by another than its waiter only after a
    /// record of the key landed above the generation its waiter read when joining
    /// (a release's tombstone, or a claim over a lapsed turn). A joiner that read
    /// the key after that record landed numbers above the removed ticket (fewer
    /// than [`TICKET_BLOCK`] joins land while one generation is the key's newest);
    /// one that read it before sees the key's newest changed when it reads it again
    /// after its create, and numbers again. (A waiter's own removal follows the end
    /// of its wait: its number may be given again harmlessly.) Given twice, a
    /// number is taken by its first waiter, passed over, for its own: it sleeps on
    /// the ticket, rung only for the other's turn, and its leaving removes the
    /// other's place (found by the checker, `turn_handover` seeds 566 and 1738).
    fn key_newest(&self, key: &Key) -> Result<u64> {
        #[cfg(feature = "planted-bugs")]
        if crate::planted::on(&crate::planted::TICKET_NUMBER_RESTARTS) {
            return Ok(0);
        }
        Ok(self
            .backend
            .generations(key)?
            .into_iter()
            .max()
            .unwrap_or(0))
    }

    /// Joins `key`'s wait queue (see [`Store::join_queue`]) into `ticket`, and
    /// returns a watch on the new ticket for its waiter to sleep on (`None` when the
    /// queue could not be joined or the backend cannot watch a ticket). `judge`, the
    /// key's judging state, learns whose turn is ours.
    pub(crate) fn queue_up(
        &self,
        (key, label): (&Key, &str),
        (holder_id, pid): (&str, u32),
        options: &AcquireOptions,
        wait_ms: u64,
        ticket: &mut Option<(Key, u64)>,
        judge: Option<&mut super::Watch>,
    ) -> Option<Box<dyn crate::ChangeWatch>> {
        *ticket = self
            .join_queue(key, label, (holder_id, pid), options, wait_ms)
            .map(|mine| (key.clone(), mine));
        if let Some(judge) = judge {
            judge.me = ticket.as_ref().map(|_| holder_id.to_owned());
        }
        let (_, mine) = ticket.as_ref()?;
        self.backend.watch_ticket(key, *mine)
    }

    /// Leaves `key`'s wait queue: removes ticket `ticket`, best effort (a ticket left
    /// behind expires with the wait it was made for, and a release passes over it
    /// once its process has ended).
    pub(crate) fn leave_queue(&self, key: &Key, ticket: u64) {
        self.remove_ticket(&key.queue(), ticket);
    }

    /// Removes a ticket before returning: never through `remove_superseded`, which
    /// a backend may complete later, while other processes still judge the queue by
    /// the ticket (a release names it, a waiter passed over looks for it) —
    /// docs/design-07-performance.md, "The audit".
    fn remove_ticket(&self, queue: &Key, ticket: u64) {
        #[cfg(feature = "planted-bugs")]
        if crate::planted::on(&crate::planted::TICKET_REMOVAL_DEFERRED) {
            let _ = self.backend.remove_superseded(queue, ticket);
            return;
        }
        let _ = self.backend.remove(queue, ticket);
    }

    /// Whether ticket `ticket` of `key`'s queue is still there (a waiter passed over
    /// finds it removed and joins again at the tail).
    pub(crate) fn holds_ticket(&self, key: &Key, ticket: u64) -> Result<bool> {
        Ok(self.backend.read(&key.queue(), ticket)?.is_some())
    }

    /// The oldest waiter in `key`'s queue that can still take a turn: its ticket is
    /// not `releasing`'s own, has not expired, and its process has not certainly
    /// ended. Also the tickets found gone on the way (those, the undecodable, and
    /// the releasing holder's own, left by a removal that failed), for the release
    /// to remove once its tombstone landed, off the next holder's path. `None` when nobody waits or the queue cannot be read
    /// (the release then names nobody).
    pub(crate) fn next_in_line(&self, key: &Key, releasing: &str) -> (Option<Turn>, Vec<u64>) {
        let queue = key.queue();
        let mut gone_tickets = Vec::new();
        let Ok(mut tickets) = self.backend.generations(&queue) else {
            return (None, gone_tickets);
        };
        tickets.sort_unstable();
        let now = self.clock.wall_ms();
        for generation in tickets {
            let Ok(Some(bytes)) = self.backend.read(&queue, generation) else {
                continue;
            };
            // A ticket that does not decode is foreign or cut off (a crash mid-create;
            // on Linux, where queues are, a ticket is linked whole): removed, so that
            // no release reads it again. Were it a create in progress after all, its
            // waiter only loses its place and queues again.
            let Decoded::Record(ticket) = record::decode(&bytes, queue.as_str(), generation) else {
                gone_tickets.push(generation);
                continue;
            };
            // Our own ticket went when we acquired (see `acquire_rounds`); one
            // still here (its removal failed) is removed with the gone ones.
            // A waiter whose process certainly ended is passed over now, by the
            // cheapest check (one `kill(pid, 0)` on Linux; the full probe reads
            // `/proc` and is left to `clear_lapsed`): named, its turn would lapse,
            // and a ticket nobody can remove (a queue directory that refuses
            // removals) would be named by every release, a lapsed turn each
            // (found by the breaker). A dead waiter whose pid was reused is still
            // named, and costs one lapse.
            let gone = &*ticket.holder == releasing
                || now >= ticket.expires_at_ms
                || ticket
                    .process
                    .as_ref()
                    .is_some_and(|evidence| self.surely_gone(evidence) && !dead_named());
            if gone {
                gone_tickets.push(generation);
                continue;
            }
            let turn = Turn {
                holder: ticket.holder,
                ticket: generation,
                owner: ticket.owner,
                pid: ticket.pid,
            };
            return (Some(turn), gone_tickets);
        }
        (None, gone_tickets)
    }

    /// After a claim over a lapsed turn (a named waiter that did not claim: dead,
    /// stopped or slow), removes that waiter's ticket and every ticket whose waiter is
    /// provably gone (its process ended on this host), expired, or that does not
    /// decode: a burst of waiters killed while queued then costs one lapsed turn,
    /// not one per waiter (a release does not probe processes, see
    /// [`Store::next_in_line`]).
    pub(crate) fn clear_lapsed(&self, key: &Key, lapsed: u64) {
        let queue = key.queue();
        self.remove_ticket(&queue, lapsed);
        let Ok(tickets) = self.backend.generations(&queue) else {
            return;
        };
        let now = self.clock.wall_ms();
        for generation in tickets {
            let Ok(Some(bytes)) = self.backend.read(&queue, generation) else {
                continue;
            };
            let gone = match record::decode(&bytes, queue.as_str(), generation) {
                Decoded::Record(ticket) => {
                    now >= ticket.expires_at_ms
                        || ticket
                            .process
                            .as_ref()
                            .is_some_and(|evidence| self.provably_dead(evidence))
                }
                _ => true,
            };
            if gone {
                let _ = self.backend.remove(&queue, generation);
            }
        }
    }

    /// After a tombstone of `key` landed: rings the waiter it names (`next`: its
    /// ticket). One that names nobody rings every ticket listed then: a waiter may
    /// have queued after the release listed the queue and read the key before the
    /// tombstone landed, and sleeps on its ticket (docs/design-07-performance.md,
    /// "Who is woken: rings"); the queue of a release that named nobody is empty
    /// but for such waiters. Only where waiters sleep on tickets; best effort (a
    /// lost ring costs its waiter at most [`CHANGE_WAIT_MAX`](crate::CHANGE_WAIT_MAX)).
    ///
    /// Also removes `gone` (tickets the release found gone):
    /// after the ring when it names a waiter (off that waiter's path), before the
    /// listing when it names nobody (so that none of them is rung).
    pub(crate) fn ring_after_tombstone(&self, key: &Key, next: Option<u64>, gone: &[u64]) {
        #[cfg(feature = "planted-bugs")]
        let silent = crate::planted::on(&crate::planted::RELEASE_RINGS_NOBODY);
        #[cfg(not(feature = "planted-bugs"))]
        let silent = false;
        if silent || !self.backend.notifies_changes() {
            self.drop_tickets(key, gone);
            return;
        }
        match next {
            Some(ticket) => {
                self.backend.ring(key, ticket);
                self.drop_tickets(key, gone);
            }
            None => {
                self.drop_tickets(key, gone);
                #[cfg(feature = "planted-bugs")]
                if crate::planted::on(&crate::planted::NAMELESS_RELEASE_RINGS_NOBODY) {
                    return;
                }
                for ticket in self.backend.generations(&key.queue()).unwrap_or_default() {
                    self.backend.ring(key, ticket);
                }
            }
        }
    }

    /// Removes tickets `gone` of `key`'s queue, best effort.
    pub(crate) fn drop_tickets(&self, key: &Key, gone: &[u64]) {
        if gone.is_empty() {
            return;
        }
        let queue = key.queue();
        for generation in gone {
            let _ = self.backend.remove(&queue, *generation);
        }
    }
}

/// Planted bug [`crate::planted::DEAD_WAITER_NAMED`]: the dead-waiter check is
/// skipped.
fn dead_named() -> bool {
    #[cfg(feature = "planted-bugs")]
    if crate::planted::on(&crate::planted::DEAD_WAITER_NAMED) {
        return true;
    }
    false
}
