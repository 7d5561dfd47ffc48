//! Slots: at most N holders of a lock at once, each slot a separate fenced tenure
//! (docs/design-04-claims.md, "Slots").

use crate::protocol::{AcquireOptions, BACKOFF_START_MS, Lease, Store, TryAcquire};
use crate::{Error, Holder, Resource, Result};

/// Most slots one lock may have: each is a series a claim may read every round.
pub const SLOTS_MAX: u32 = 1_024;

impl Store {
    /// Acquires one of the `slots` slots of the lock `name` (e.g. one of 4 dev
    /// servers), waiting up to `options.wait_ms` while all are held. The lease is
    /// that of [`Resource::Slot`] `(name, slot)`, a separate fenced tenure with its
    /// own series and tokens; [`Lease::slot`] says which slot (1 to `slots`).
    ///
    /// Each round looks at every slot (reads only) and tries the free ones lowest
    /// first, with no wait; a slot a rival took meanwhile is skipped. At most
    /// `slots` claimers hold the lock at once because each slot is an exclusive
    /// claim. Claimers should agree on `slots`: slots are numbered, not counted, so
    /// one claimer with a larger count can use the slots above the others'. A
    /// session's claim re-enters the slot its session already holds
    /// ([`AcquireOptions::session`]). A slot is not the plain lock `name`: an
    /// exclusive claim of `name` does not conflict with its slots.
    ///
    /// # Errors
    ///
    /// - [`Error::Held`] when every slot was still held when the wait ended
    ///   (`holder`: the one whose lease ends first).
    /// - [`Error::InvalidArgument`] for 0 slots or more than [`SLOTS_MAX`].
    /// - As [`Store::acquire`] otherwise.
    pub fn acquire_slot(&self, name: &str, slots: u32, options: &AcquireOptions) -> Result<Lease> {
        match self.try_acquire_slot(name, slots, options)? {
            TryAcquire::Acquired(lease) => Ok(lease),
            TryAcquire::Held(holder) => Err(Error::Held {
                label: format!("{} (all {slots} slots)", name.trim()),
                holder,
            }),
        }
    }

    /// Like [`Store::acquire_slot`], but every slot still held when the wait ends is
    /// reported as [`TryAcquire::Held`] (the holder whose lease ends first).
    ///
    /// # Errors
    ///
    /// As [`Store::acquire_slot`], except [`Error::Held`].
    pub fn try_acquire_slot(
        &self,
        name: &str,
        slots: u32,
        options: &AcquireOptions,
    ) -> Result<TryAcquire> {
        self.try_acquire_slot_observed(name, slots, options, &mut |_, _| {})
    }

    /// Like [`Store::try_acquire_slot`], and calls `on_wait(holder, waited_ms)` each
    /// time it backs off because every slot is held (`holder`: the one whose lease
    /// ends first).
    ///
    /// # Errors
    ///
    /// As [`Store::try_acquire_slot`].
    pub fn try_acquire_slot_observed(
        &self,
        name: &str,
        slots: u32,
        options: &AcquireOptions,
        on_wait: &mut dyn FnMut(&Holder, u64),
    ) -> Result<TryAcquire> {
        if options.shared {
            return Err(Error::InvalidArgument(
                "slots are exclusive: drop --shared, or claim the lock itself shared".into(),
            ));
        }
        if slots == 0 || slots > SLOTS_MAX {
            return Err(Error::InvalidArgument(format!(
                "the number of slots must be from 1 to {SLOTS_MAX}, got {slots}"
            )));
        }
        #[cfg(feature = "planted-bugs")]
        let slots = if crate::planted::on(&crate::planted::SLOT_PAST_THE_LAST) {
            slots + 1
        } else {
            slots
        };
        let all: Vec<Resource> = (1..=slots).map(|i| Resource::slot(name, i)).collect();
        // Validates the name once, before anything is read.
        all[0].identity()?;
        let started = self.clock.monotonic_ms();
        let deadline = started.saturating_add(options.wait_ms);
        let now_options = options.clone().wait_ms(0);
        let mut backoff_ms = BACKOFF_START_MS;
        loop {
            // Over at once when the caller gave up (`AcquireOptions::cancel`).
            let deadline = options.deadline(deadline);
            // A slot the session already holds is re-entered, not a second one taken.
            if let Some(session) = &options.session {
                for slot in &all {
                    if self.resume_session(slot, session).is_ok()
                        && let TryAcquire::Acquired(lease) = self.try_acquire(slot, &now_options)?
                    {
                        return Ok(TryAcquire::Acquired(lease));
                    }
                }
            }
            // Look first; then try the free slots, lowest first.
            let mut soonest: Option<Holder> = None;
            for slot in &all {
                if let Some(holder) = self.holder_in_the_way(slot, Some(options))? {
                    if soonest
                        .as_ref()
                        .is_none_or(|s| holder.expires_at_ms < s.expires_at_ms)
                    {
                        soonest = Some(holder);
                    }
                    continue;
                }
                match self.try_acquire(slot, &now_options)? {
                    TryAcquire::Acquired(lease) => return Ok(TryAcquire::Acquired(lease)),
                    TryAcquire::Held(holder) => {
                        if soonest
                            .as_ref()
                            .is_none_or(|s| holder.expires_at_ms < s.expires_at_ms)
                        {
                            soonest = Some(holder);
                        }
                    }
                }
            }
            let mono = self.clock.monotonic_ms();
            let holder = soonest.unwrap_or_else(|| Holder {
                owner: "a claim still being written".into(),
                holder_id: String::new(),
                pid: 0,
                token: 0,
                generation: 0,
                expires_at_ms: 0,
                in_the_way: None,
                waiting: false,
                session: None,
            });
            if mono >= deadline {
                return Ok(TryAcquire::Held(holder));
            }
            on_wait(&holder, mono.saturating_sub(started));
            self.back_off(&mut backoff_ms, deadline, mono);
        }
    }
}
