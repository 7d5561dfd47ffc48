//! A claim made beside other stores (docs/protocol.md §5, "Layout changes"): a
//! store locator may give one file different stores as the layout around it
//! changes, and every store numbers its own tokens. A claim made in one of them
//! asks the others, after it landed, for a live claim in its way
//! ([`Store::conflict`]) — write first, read second, so of two claims of one file
//! made in two stores at once at least one sees the other — and gives its own back
//! when one answers.

use std::time::Duration;

use crate::{AcquireOptions, Holder, Lease, Resource, Result, Store};

/// How often (ms) a claim turned away by a claim in another store tries again:
/// that store sends this one no change notification.
pub const BESIDE_POLL_MS: u64 = 100;

/// What [`Store::claim_beside`] came to.
#[derive(Debug)]
pub enum Beside<H> {
    /// Claimed in this store, and no other store holds a live claim in the way.
    Taken(Vec<Lease>),
    /// What the claim in this store reported when it did not get in (held).
    Held(H),
    /// When the wait ended, another store still held a live claim of `resource`
    /// in the way. Nothing is held here: the claims this call made were given back.
    Elsewhere {
        /// The locator of the store that holds it ([`LeaseStore::locator`](crate::LeaseStore::locator)
        /// of its backend; a directory store's path).
        store: String,
        /// The resource whose claim is in the way.
        resource: Resource,
        /// Its holder.
        holder: Holder,
    },
}

impl Store {
    /// Claims with `claim` in this store, then lists the other stores with
    /// `others` and asks each for a live claim in the way of one of `resources`
    /// ([`Store::conflict`], read only). One found: the claims just made are given
    /// back (released; a tenure that was re-entered, held by the session before this
    /// call, is kept) and the claim is made again every [`BESIDE_POLL_MS`] of this
    /// store's clock while `options.wait_ms` lasts, counted from the call, then
    /// reported as [`Beside::Elsewhere`]. `claim` is called with `options` and the
    /// wait left; it returns the leases it took, or what it reports when held here
    /// ([`Beside::Held`], at once). `others` is called after every claim that
    /// landed, never before: a store made while the claim was being made (a
    /// repository initialised, a `.fencepost` directory made) is asked too.
    ///
    /// Once turned away, each later try looks at the other stores first and claims
    /// again only when the way is clear, so a wait burns no tokens and shows no
    /// passing holder here; the look after the claim still decides.
    ///
    /// A claim in the way whose holder's process provably ended (with
    /// `options.dead_holder_takeover`) is fenced in its store — its key claimed
    /// and given back there, so its token never passes again — and is then not in
    /// the way: a killed holder in another store is taken over at once, as one in
    /// this store is.
    ///
    /// Both sides of a race write first and read second, so two claims of one
    /// resource in two stores never both stand; both may give back, and the one
    /// that waits gets in on its next try. Explored by the interleaving checker
    /// (`two_stores`, `store_appears`, `store_below` and `dead_beside`, with the planted bugs
    /// `ELSEWHERE_LOOKED_BEFORE_CLAIM`, `OTHERS_LISTED_BEFORE_CLAIM`,
    /// `ELSEWHERE_NOT_DOWN`, `BESIDE_TRUSTS_ITS_LOOK` and `BESIDE_DEAD_UNFENCED`), pinned
    /// with real git by `cli/tests/store_location.rs` (`layout_changes`).
    ///
    /// # Errors
    ///
    /// What `claim` returns, and what `others` returns or
    /// [`Error::Backend`](crate::Error::Backend) when another store cannot be read
    /// (the claims made are given back first).
    pub fn claim_beside<H>(
        &self,
        resources: &[Resource],
        options: &AcquireOptions,
        mut others: impl FnMut() -> Result<Vec<Store>>,
        mut claim: impl FnMut(&AcquireOptions) -> Result<std::result::Result<Vec<Lease>, H>>,
    ) -> Result<Beside<H>> {
        let started = self.clock.monotonic_ms();
        let mut attempt = options.clone();
        #[cfg(feature = "planted-bugs")]
        let listed_early = if crate::planted::on(&crate::planted::OTHERS_LISTED_BEFORE_CLAIM) {
            Some(others()?)
        } else {
            None
        };
        // Whether the last look found a claim in the way in another store.
        let mut turned_away = false;
        loop {
            // Turned away before: look first, and claim again only once the way
            // is clear. A claim made only to be given back would burn a token and
            // show as a holder here every try while the other holds (a breaker).
            // The look after the claim below still decides.
            let looked = if turned_away {
                elsewhere(&others()?, resources, options)?
            } else {
                None
            };
            let (store, resource, holder) = match looked {
                Some(found) => found,
                None => {
                    #[cfg(feature = "planted-bugs")]
                    if crate::planted::on(&crate::planted::ELSEWHERE_LOOKED_BEFORE_CLAIM) {
                        if let Some((store, resource, holder)) =
                            elsewhere(&others()?, resources, options)?
                        {
                            return Ok(Beside::Elsewhere {
                                store,
                                resource,
                                holder,
                            });
                        }
                        return Ok(match claim(&attempt)? {
                            Ok(leases) => Beside::Taken(leases),
                            Err(held) => Beside::Held(held),
                        });
                    }
                    let leases = match claim(&attempt)? {
                        Ok(leases) => leases,
                        Err(held) => return Ok(Beside::Held(held)),
                    };
                    #[cfg(feature = "planted-bugs")]
                    if turned_away && crate::planted::on(&crate::planted::BESIDE_TRUSTS_ITS_LOOK) {
                        return Ok(Beside::Taken(leases));
                    }
                    #[cfg(feature = "planted-bugs")]
                    let listed = match &listed_early {
                        Some(list) => Ok(list.clone()),
                        None => others(),
                    };
                    #[cfg(not(feature = "planted-bugs"))]
                    let listed = others();
                    let found = match listed.and_then(|list| elsewhere(&list, resources, options)) {
                        Ok(found) => found,
                        Err(error) => {
                            self.give_back_new(&leases);
                            return Err(error);
                        }
                    };
                    let Some(found) = found else {
                        return Ok(Beside::Taken(leases));
                    };
                    self.give_back_new(&leases);
                    found
                }
            };
            // Turned away (by the look, or after the claim): wait and try again,
            // or report the claim in the way when the wait is over.
            turned_away = true;
            attempt = match self.pause_within(started, options) {
                Some(next) => next,
                None => {
                    return Ok(Beside::Elsewhere {
                        store,
                        resource,
                        holder,
                    });
                }
            };
        }
    }

    /// After a claim in another store turned this one away: sleeps up to
    /// [`BESIDE_POLL_MS`] of the wait `options.wait_ms` left since `started`, and
    /// returns the options of the next try with the wait then left; `None` when
    /// the wait is over.
    fn pause_within(&self, started: u64, options: &AcquireOptions) -> Option<AcquireOptions> {
        let waited = self.clock.monotonic_ms().saturating_sub(started);
        let left = options.wait_ms.saturating_sub(waited);
        if left == 0 {
            return None;
        }
        let pause = left.min(BESIDE_POLL_MS);
        self.clock.sleep(Duration::from_millis(pause));
        Some(options.clone().wait_ms(left - pause))
    }

    /// Releases the leases a claim just made, keeping re-entered tenures (the
    /// session held them before; they are not this claim's to end).
    fn give_back_new(&self, leases: &[Lease]) {
        for lease in leases.iter().filter(|lease| !lease.reentered()) {
            let _ = self.release(lease);
        }
    }
}

/// The first live claim in `others` in the way of one of `resources`, with the
/// locator of the store it is in. With `options.dead_holder_takeover`, a claim
/// there whose holder's process provably ended is fenced in its store first
/// (`Store::fence_dead`) and is then not in the way.
fn elsewhere(
    others: &[Store],
    resources: &[Resource],
    options: &AcquireOptions,
) -> Result<Option<(String, Resource, Holder)>> {
    for other in others {
        for resource in resources {
            // A holder there whose process provably ended is fenced there (its key
            // claimed and given back, so its token never passes again) and the
            // look repeated: a killed holder in another store is taken over at
            // once, as one in this store is, not waited out for its ttl.
            let look = || other.conflict_way(resource, options);
            #[cfg(feature = "planted-bugs")]
            let way = if crate::planted::on(&crate::planted::BESIDE_DEAD_UNFENCED) {
                look()?.filter(|way| !(way.dead && options.dead_holder_takeover))
            } else {
                other.look_fencing_dead(options, look)?
            };
            #[cfg(not(feature = "planted-bugs"))]
            let way = other.look_fencing_dead(options, look)?;
            if let Some(way) = way {
                return Ok(Some((
                    other.backend().locator(),
                    resource.clone(),
                    way.holder,
                )));
            }
        }
    }
    Ok(None)
}
