//! Schedules for the kinds of claim (issue 14, docs/design-04-claims.md).

use fencepost::AcquireOptions;

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
