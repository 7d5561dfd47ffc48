//! Several resources at once: all or nothing, in one canonical order, given back
//! when any is held (docs/design-04-claims.md, "Several resources at once").

use super::shared::Intent;
use crate::proof::Secret;
use crate::protocol::{AcquireOptions, BACKOFF_START_MS, Lease, Store, new_holder_id};
use crate::{Error, Holder, Resource, Result};

/// Who holds a waiting set's intents: a holder id, its pid and a secret, made the
/// first time the set waits.
type Waiter = (String, u32, Secret);

/// How many rounds in a row may lapse (every resource taken, but the first one's
/// claim already expired by the time the last was confirmed) after the wait is
/// over before the acquire reports it, as for one resource.
const LAPSE_RETRIES: usize = 2;

/// The outcome of [`Store::try_acquire_all`]: one lease per resource, or the first
/// resource found held and who holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TryAcquireAll {
    /// Every resource, one lease each (its own tenure and token), in the order the
    /// resources were given.
    Acquired(Vec<Lease>),
    /// Still held by someone else when the wait ended; nothing is held.
    Held {
        /// The resource found held (as it was given).
        resource: Resource,
        /// Who holds it.
        holder: Holder,
    },
}

impl Store {
    /// Acquires every resource in `resources`, or none: one lease per resource (each
    /// its own tenure, token and handle), in the order given. Waits up to
    /// `options.wait_ms` while any is held.
    ///
    /// The resources are taken in one canonical order (by key, whatever order they
    /// were given in), each as [`Store::try_acquire`] would with no wait; when one is
    /// held, the ones already taken are given back (tombstones) before backing off,
    /// so nothing is held while waiting. No claimer ever waits while holding, so two
    /// claimers of overlapping sets cannot deadlock; the common order makes them meet
    /// on the same first resource, where one proceeds and the other waits without
    /// taking anything. While waiting, each round first looks at every resource
    /// (reads only) and takes nothing while one is held. A session's claim re-enters
    /// what the session already holds ([`AcquireOptions::session`]); a re-entered
    /// lease is never given back on a conflict (its session still holds it).
    ///
    /// Every returned lease is live: if taking them took a full ttl (a pause), all
    /// are given back and the round is retried, as for one resource.
    ///
    /// # Errors
    ///
    /// - [`Error::Held`] when a resource was still held when the wait ended.
    /// - [`Error::InvalidArgument`] for a shared claim ([`AcquireOptions::shared`]:
    ///   several resources are claimed exclusively only), an empty list, a ttl of 0, or two entries
    ///   that are one resource (the same lock spelled twice, one file by two paths
    ///   or hard links), or a subtree and something inside it.
    /// - As [`Store::acquire`] otherwise; on an error nothing is left held (best
    ///   effort, as a crashed holder's claims expire with their ttl).
    pub fn acquire_all(
        &self,
        resources: &[Resource],
        options: &AcquireOptions,
    ) -> Result<Vec<Lease>> {
        match self.try_acquire_all(resources, options)? {
            TryAcquireAll::Acquired(leases) => Ok(leases),
            TryAcquireAll::Held { resource, holder } => Err(Error::Held {
                label: resource.target(),
                holder,
            }),
        }
    }

    /// Like [`Store::acquire_all`], but still held when the wait ends is reported
    /// as [`TryAcquireAll::Held`] instead of as an error.
    ///
    /// # Errors
    ///
    /// As [`Store::acquire_all`], except [`Error::Held`].
    pub fn try_acquire_all(
        &self,
        resources: &[Resource],
        options: &AcquireOptions,
    ) -> Result<TryAcquireAll> {
        self.try_acquire_all_observed(resources, options, &mut |_, _, _| {})
    }

    /// Like [`Store::try_acquire_all`], and calls `on_wait(resource, holder,
    /// waited_ms)` each time it backs off because `holder` holds `resource`.
    ///
    /// # Errors
    ///
    /// As [`Store::try_acquire_all`].
    pub fn try_acquire_all_observed(
        &self,
        resources: &[Resource],
        options: &AcquireOptions,
        on_wait: &mut dyn FnMut(&Resource, &Holder, u64),
    ) -> Result<TryAcquireAll> {
        // Refused, not composed: a set's look step and give-back judge exclusive
        // tenures only (docs/design-04-claims.md, "Several resources at once").
        if options.shared {
            return Err(Error::InvalidArgument(
                "a claim of several resources at once is exclusive; claim each resource on its own with --shared (shared), or drop --shared".into(),
            ));
        }
        let order = canonical_order(resources)?;
        // While the set waits for a member, an intent on that member keeps new
        // shared claimers of it (and, for a subtree, new claims below it) out, as a
        // single waiting writer's does (design-05 §4.3): readers that kept arriving
        // starved the set (a breaker). Given back whatever the outcome.
        let mut intents: Vec<Option<Intent>> = resources.iter().map(|_| None).collect();
        let mut waiter: Option<Waiter> = None;
        let outcome = self.acquire_all_rounds(
            resources,
            &order,
            options,
            on_wait,
            (&mut intents, &mut waiter),
        );
        if let Some((_, _, secret)) = &waiter {
            for intent in intents {
                self.drop_intent(intent, secret);
            }
        }
        outcome
    }

    /// The rounds of [`Store::try_acquire_all_observed`], holding an intent on each
    /// member waited for (in `intents`, by its place in `resources`, made by
    /// `waiter`: a holder id, its pid and a secret, made the first time).
    fn acquire_all_rounds(
        &self,
        resources: &[Resource],
        order: &[usize],
        options: &AcquireOptions,
        on_wait: &mut dyn FnMut(&Resource, &Holder, u64),
        (intents, waiter): (&mut [Option<Intent>], &mut Option<Waiter>),
    ) -> Result<TryAcquireAll> {
        let started = self.clock.monotonic_ms();
        let deadline = started.saturating_add(options.wait_ms);
        let now_options = options.clone().wait_ms(0);
        let mut backoff_ms = BACKOFF_START_MS;
        let mut lapses = 0;
        loop {
            // Over at once when the caller gave up (`AcquireOptions::cancel`).
            let deadline = options.deadline(deadline);
            let round = self.clock.monotonic_ms();
            // Look first: a waiter writes nothing while something is held.
            let mut held = self.first_held(resources, order, options)?;
            let mut taken: Vec<(usize, Lease)> = Vec::new();
            if held.is_none() {
                for &i in order {
                    match self.try_acquire(&resources[i], &now_options) {
                        Ok(crate::TryAcquire::Acquired(lease)) => taken.push((i, lease)),
                        Ok(crate::TryAcquire::Held(holder)) => {
                            held = Some((i, holder));
                            break;
                        }
                        Err(error) => {
                            self.give_back_leases(&taken);
                            return Err(error);
                        }
                    }
                }
            }
            // Taken: the intents go back before the final liveness check, as a
            // single writer's does (design-05 §4.3); given back after it, a slow
            // give-back returned leases whose ttl had run out (the checker's
            // `several_resources`, seed 231).
            #[cfg(feature = "planted-bugs")]
            let early = !crate::planted::on(&crate::planted::SET_INTENTS_GIVEN_BACK_LATE);
            #[cfg(not(feature = "planted-bugs"))]
            let early = true;
            if held.is_none()
                && early
                && let Some((_, _, secret)) = waiter.as_ref()
            {
                for intent in intents.iter_mut() {
                    self.drop_intent(intent.take(), secret);
                }
            }
            let mono = self.clock.monotonic_ms();
            if held.is_none() {
                // Every lease live on the monotonic clock from before the round: the
                // first one taken expires first.
                #[cfg(feature = "planted-bugs")]
                let round = if crate::planted::on(&crate::planted::SEVERAL_SKIPS_ALL_LIVE) {
                    mono
                } else {
                    round
                };
                if mono.saturating_sub(round) < options.ttl_ms {
                    taken.sort_by_key(|(i, _)| *i);
                    return Ok(TryAcquireAll::Acquired(
                        taken.into_iter().map(|(_, lease)| lease).collect(),
                    ));
                }
                self.give_back_leases(&taken);
                lapses += 1;
                if mono >= deadline && lapses > LAPSE_RETRIES {
                    return Err(Error::ClaimLapsed {
                        label: resources[order[0]].target(),
                        ttl_ms: options.ttl_ms,
                    });
                }
            } else {
                self.give_back_leases(&taken);
            }
            if let Some((i, holder)) = held {
                if mono >= deadline {
                    return Ok(TryAcquireAll::Held {
                        resource: resources[i].clone(),
                        holder,
                    });
                }
                #[cfg(feature = "planted-bugs")]
                let hold = !crate::planted::on(&crate::planted::SET_WAITS_WITHOUT_INTENT);
                #[cfg(not(feature = "planted-bugs"))]
                let hold = true;
                if hold {
                    let (id, pid, secret) = waiter.get_or_insert_with(|| {
                        let (id, pid) = new_holder_id(&options.owner);
                        (id, pid, Secret::generate())
                    });
                    let identity = resources[i].identity()?;
                    self.hold_intent(
                        &mut intents[i],
                        &identity.key,
                        &identity.label,
                        (id, *pid),
                        secret,
                        options,
                    )?;
                }
                on_wait(&resources[i], &holder, mono.saturating_sub(started));
            }
            self.back_off(&mut backoff_ms, deadline, mono);
        }
    }

    /// The first resource, in canonical order, that someone other than this claim's
    /// session holds live, shared holders included (reads only, but for a reader
    /// whose process provably died, fenced as the single acquire's look fences it).
    fn first_held(
        &self,
        resources: &[Resource],
        order: &[usize],
        options: &AcquireOptions,
    ) -> Result<Option<(usize, Holder)>> {
        for &i in order {
            let mut found = self.holder_in_the_way(&resources[i], Some(options))?;
            // Readers of it too: unseen by this look, they were met only by the
            // take, so a set waiting for a reader-held member took and gave back the
            // members before it every round (a breaker: hundreds of tokens in
            // seconds, and others refused by those passing claims).
            if found.is_none() {
                for key in resources[i].identity()?.keys() {
                    found = self.look_participants(&key, "", options)?;
                    if found.is_some() {
                        break;
                    }
                }
            }
            let Some(holder) = found else {
                continue;
            };
            let ours = match &options.session {
                Some(session) => self.resume_session(&resources[i], session).is_ok(),
                None => false,
            };
            if !ours {
                return Ok(Some((i, holder)));
            }
        }
        Ok(None)
    }

    /// Gives back leases an all-or-nothing claim took, best effort; a re-entered
    /// lease is left to its session, and so is a lease this claim began that
    /// another process of its session has re-entered since (a key whose newest
    /// record is no longer the claim made here: `Store::give_back_claim`).
    fn give_back_leases(&self, taken: &[(usize, Lease)]) {
        for (_, lease) in taken.iter().filter(|(_, lease)| !lease.reentered()) {
            // The other keys first, as a release gives them.
            for held in &lease.others {
                self.give_back_claim(
                    &held.key,
                    &lease.label,
                    (held.token, held.generation),
                    &lease.secret,
                );
            }
            self.give_back_claim(
                &lease.key,
                &lease.label,
                (lease.token, lease.generation),
                &lease.secret,
            );
        }
    }
}

/// The indices of `resources` sorted by their keys (the canonical order), after
/// checking that no two of them share a key.
fn canonical_order(resources: &[Resource]) -> Result<Vec<usize>> {
    if resources.is_empty() {
        return Err(Error::InvalidArgument(
            "no resource to claim; name at least one".into(),
        ));
    }
    let mut keyed = Vec::with_capacity(resources.len());
    // Each file's or directory's resolved path, from the same identity.
    let mut paths = Vec::with_capacity(resources.len());
    for (i, resource) in resources.iter().enumerate() {
        let identity = resource.identity()?;
        keyed.push((identity.keys(), i));
        paths.push(match resource {
            Resource::Dir(_) | Resource::File(_) => identity.path,
            _ => None,
        });
    }
    let mut seen = std::collections::HashMap::new();
    for (keys, i) in &keyed {
        for key in keys {
            if let Some(first) = seen.insert(key.clone(), *i) {
                return Err(Error::InvalidArgument(format!(
                    "{} and {} are one resource (the same lock or file, spelled or linked twice); name it once",
                    resources[first].target(),
                    resources[*i].target()
                )));
            }
        }
    }
    #[cfg(feature = "planted-bugs")]
    if crate::planted::on(&crate::planted::SEVERAL_NESTED_UNCHECKED) {
        keyed.sort();
        return Ok(keyed.into_iter().map(|(_, i)| i).collect());
    }
    // One path named as a directory and as a file: the two claims exclude each
    // other, so the set would meet its own claim (a breaker: `--dir zz --file zz`).
    for (i, resource) in resources.iter().enumerate() {
        if let Resource::Dir(_) = resource
            && let Some(j) = (0..resources.len()).find(|&j| {
                matches!(resources[j], Resource::File(_))
                    && paths[j].is_some()
                    && paths[j] == paths[i]
            })
        {
            return Err(Error::InvalidArgument(format!(
                "{} and {} name one path as a directory and as a file, and the two claims \
                 exclude each other; claim it as one of them",
                resources[i].target(),
                resources[j].target()
            )));
        }
    }
    // A subtree covers what is below it: taking both in one claim would meet its
    // own subtree claim as another tenure's and give everything back, round after
    // round (a breaker: `claim --dir d --file d/f` blamed itself and burnt a token
    // per round until its wait ran out, or forever).
    for (i, resource) in resources.iter().enumerate() {
        for key in resource.subtree_keys_above()? {
            if let Some(&dir) = seen.get(&key) {
                return Err(Error::InvalidArgument(format!(
                    "{} is inside {}, which this claim also names, and a subtree claim covers \
                     everything below it; name {} alone, or claim {} on its own",
                    resources[i].target(),
                    resources[dir].target(),
                    resources[dir].target(),
                    resources[i].target()
                )));
            }
        }
    }
    keyed.sort();
    Ok(keyed.into_iter().map(|(_, i)| i).collect())
}
