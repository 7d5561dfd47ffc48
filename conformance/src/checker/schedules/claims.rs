//! Schedules for the kinds of claim (issue 14, docs/design-04-claims.md).

use fencepost::{AcquireOptions, Resource};

use super::super::{Actor, Ctx, Setup};
use super::{TTL_MS, lock};

/// A claim for `session` (none: a plain claim), ttl [`TTL_MS`], waiting `wait_ms`.
fn for_session(ctx: &Ctx, session: Option<&str>, wait_ms: u64) -> AcquireOptions {
    let options = AcquireOptions::new(TTL_MS)
        .owner(ctx.name().to_string())
        .wait_ms(wait_ms);
    match session {
        Some(session) => options.session(session),
        None => options,
    }
}

/// Two processes of session `s` claim one lock: whichever comes second re-enters
/// the first's tenure (same token) and both keep it alive; a release by either
/// ends it for both. A third process of session `t` waits for it. The oracle's
/// "never two tenures promised at one instant" is what re-entry must keep: a
/// second claim of the session that began a new tenure would fence the first
/// while it was promised the lease (planted bug `SESSION_HOLDER_IS_VACANCY`).
pub(super) fn session_reentry(_: &Setup) -> Vec<Actor> {
    let member = |renewals: usize, pause: u64| {
        move |ctx: &Ctx| {
            ctx.sleep(pause);
            let options = for_session(ctx, Some("s"), 2 * TTL_MS);
            if let Some(mut lease) = ctx.acquire_with(&lock(), &options)
                && ctx.keep(&mut lease, renewals)
            {
                ctx.release(&lease);
            }
        }
    };
    vec![
        Actor::new("s-first", member(3, 0)),
        Actor::new("s-second", member(1, TTL_MS / 6)),
        Actor::new("t", |ctx: &Ctx| {
            let options = for_session(ctx, Some("t"), 3 * TTL_MS);
            if let Some(lease) = ctx.acquire_with(&lock(), &options) {
                ctx.check(&lease);
                ctx.release(&lease);
            }
        }),
    ]
}

/// Two claimers take `{a, b}` and `{b, a}` all or nothing, keep every lease for a
/// renewal and release; a third claims `b` alone. Slow creates (in flight for half
/// a ttl) and pauses make the first lease taken lapse before the last is, which an
/// all-or-nothing claim must notice (planted bug `SEVERAL_SKIPS_ALL_LIVE`), and the
/// oracle's "never two tenures promised one key" covers the overlap on `b`.
pub(super) fn several_resources(_: &Setup) -> Vec<Actor> {
    let (a, b) = (Resource::lock("a"), Resource::lock("b"));
    let pair = |resources: Vec<Resource>| {
        move |ctx: &Ctx| {
            let options = for_session(ctx, None, 3 * TTL_MS);
            if let Some(mut leases) = ctx.acquire_all(&resources, &options) {
                for lease in &mut leases {
                    ctx.check(lease);
                    ctx.renew(lease);
                }
                for lease in &leases {
                    ctx.release(lease);
                }
            }
        }
    };
    vec![
        Actor::new("ab", pair(vec![a.clone(), b.clone()])),
        Actor::new("ba", pair(vec![b.clone(), a])),
        Actor::new("b", move |ctx: &Ctx| {
            if let Some(lease) = ctx.acquire(&b, TTL_MS, 3 * TTL_MS) {
                ctx.check(&lease);
                ctx.release(&lease);
            }
        }),
    ]
}

/// Four claimers share the 2 slots of one lock: each takes a slot (waiting), keeps
/// it for a renewal and releases it. The harness judges that never more than 2
/// tenures of the lock's slots are promised at once (planted bug
/// `SLOT_PAST_THE_LAST` lets a third in), and the per-key oracle that no slot has
/// two holders.
pub(super) fn slots(_: &Setup) -> Vec<Actor> {
    let claimer = |ctx: &Ctx| {
        let options = for_session(ctx, None, 3 * TTL_MS);
        if let Some(mut lease) = ctx.acquire_slot("pool", 2, &options)
            && ctx.keep(&mut lease, 1)
        {
            ctx.release(&lease);
        }
    };
    vec![
        Actor::new("w", claimer),
        Actor::new("x", claimer),
        Actor::new("y", claimer),
        Actor::new("z", claimer),
    ]
}

/// Shared claims (docs/design-05-subtrees-and-shared.md §4): two readers share a
/// lock (and the subtree `src/`), keeping it for a renewal; a writer of the lock
/// and a writer of a file below `src/` wait for them; a late reader arrives while
/// the writer may be waiting. The oracle: never a shared and an exclusive tenure of
/// one resource (or of a subtree and a file below it) promised at one instant, and
/// tokens never go down (a shared token above every earlier exclusive one, an
/// exclusive token never below an earlier shared one). Planted bug
/// `SHARED_CHECK_BEFORE_ADMIT_ONLY`: a reader that looks only before admitting
/// itself holds with a writer that claimed in between.
pub(super) fn shared_readers_writer(setup: &Setup) -> Vec<Actor> {
    let src = setup.dir.join("src");
    let file = src.join("lib.rs");
    let reader = move |pause: u64, resource: Resource| {
        move |ctx: &Ctx| {
            ctx.sleep(pause);
            let options = for_session(ctx, None, 3 * TTL_MS).shared(true);
            if let Some(mut lease) = ctx.acquire_with(&resource, &options) {
                ctx.check(&lease);
                if ctx.keep(&mut lease, 1) {
                    ctx.release(&lease);
                }
            }
        }
    };
    let writer = move |pause: u64, resource: Resource| {
        move |ctx: &Ctx| {
            ctx.sleep(pause);
            let options = for_session(ctx, None, 3 * TTL_MS);
            if let Some(lease) = ctx.acquire_with(&resource, &options) {
                ctx.check(&lease);
                ctx.release(&lease);
            }
        }
    };
    vec![
        Actor::new("r1", reader(0, lock())),
        Actor::new("r2", reader(0, Resource::dir(&src))),
        Actor::new("w", writer(0, lock())),
        Actor::new("wf", writer(TTL_MS / 20, Resource::file(&file))),
        Actor::new("late", reader(TTL_MS / 10, lock())),
    ]
}
