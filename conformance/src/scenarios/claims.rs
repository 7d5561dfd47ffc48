//! Scenarios for the kinds of claim (issue 14, docs/design-04-claims.md): sessions.

use std::time::Duration;

use fencepost::{Clock, Error, LeaseStore, ManualClock, Resource, TryAcquire};

use super::{
    KillOnDrop, START_MS, TTL_MS, acquire, check, fail, key_of, newest_generation, opts,
    wait_for_line,
};
use crate::{Failed, Fixture, Job};

/// A claim by the session whose tenure holds the resource returns that tenure (same
/// token, same holder), renewed for the new ttl — for a lock and for an existing
/// file (two keys); another session, or no session, is held.
pub(super) fn session_reclaim_is_reentrant<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let clock = ManualClock::new(START_MS);
    let store = f.store_with_clock(clock.clone());
    let path = f.scratch_file("session.txt");
    std::fs::write(&path, b"x").map_err(|e| fail("write", e))?;
    for resource in [Resource::lock("session-lock"), Resource::file(&path)] {
        let first = acquire(&store, &resource, &opts("a").session("agent-7"))?;
        ensure!(!first.reentered(), "a fresh claim reported re-entry");
        clock.advance_ms(TTL_MS / 2);
        // Another handle on the store: another process of the session.
        let other = f.store_with_clock(clock.clone());
        let mut longer = opts("b").session("agent-7");
        longer.ttl_ms = 2 * TTL_MS;
        let again = acquire(&other, &resource, &longer)?;
        ensure!(
            again.token() == first.token() && again.holder_id() == first.holder_id(),
            "re-entry gave token {} of {}, not the tenure's token {} of {}",
            again.token(),
            again.holder_id(),
            first.token(),
            first.holder_id()
        );
        ensure!(again.reentered(), "a re-entry did not say so");
        ensure!(
            again.generation() > first.generation()
                && again.expires_at_ms() == clock.wall_ms() + 2 * TTL_MS,
            "re-entry was not renewed for the new ttl: {again:?}"
        );
        ensure!(
            again.keys().count() == first.keys().count(),
            "re-entry holds {} keys, the tenure {}",
            again.keys().count(),
            first.keys().count()
        );
        ensure!(
            check(&store, &resource, first.token())?,
            "the tenure's token fails check after re-entry"
        );
        for (who, options) in [
            ("another session", opts("c").session("agent-8")),
            ("a claim without a session", opts("c")),
        ] {
            match store.try_acquire(&resource, &options) {
                Ok(TryAcquire::Held(holder)) if holder.token == first.token() => {}
                other => return Err(format!("{who} was not held: {other:?}").into()),
            }
        }
        store.release(&again).map_err(|e| fail("release", e))?;
        ensure!(
            !check(&store, &resource, first.token())?,
            "the released tenure's token passes check"
        );
    }
    Ok(())
}

/// Any process naming the session acts on its tenure without the handle
/// (`resume_session`): renew keeps the token, release ends it; another session and
/// a tenure claimed without a session are refused with nothing written; an expired
/// session tenure is never revived (a new claim gets a new token).
pub(super) fn session_acts_without_the_handle<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let clock = ManualClock::new(START_MS);
    let store = f.store_with_clock(clock.clone());
    let lock = Resource::lock("session-acts");
    let key = key_of(&lock)?;
    let first = acquire(&store, &lock, &opts("a").session("agent-7"))?;
    let before = newest_generation(f.raw(), &key)?;
    match store.resume_session(&lock, "agent-8") {
        Err(Error::NotSessionHolder {
            newest: Some(h), ..
        }) if h.token == first.token() => {}
        other => return Err(format!("another session resumed the tenure: {other:?}").into()),
    }
    ensure!(
        newest_generation(f.raw(), &key)? == before,
        "a refused session wrote a record"
    );
    clock.advance_ms(TTL_MS / 2);
    let mut resumed = store
        .resume_session(&lock, "agent-7")
        .map_err(|e| fail("resume_session", e))?;
    store.renew(&mut resumed).map_err(|e| fail("renew", e))?;
    ensure!(
        resumed.token() == first.token()
            && resumed.expires_at_ms() == START_MS + TTL_MS / 2 + TTL_MS,
        "the session's renewal changed the token or not the expiry: {resumed:?}"
    );
    let last = store
        .resume_session(&lock, "agent-7")
        .map_err(|e| fail("resume_session", e))?;
    store.release(&last).map_err(|e| fail("release", e))?;
    ensure!(
        !check(&store, &lock, first.token())?,
        "released through the session, the token still passes"
    );
    match store.resume_session(&lock, "agent-7") {
        Err(Error::Released { .. } | Error::NotSessionHolder { .. }) => {}
        other => return Err(format!("a released tenure was resumed: {other:?}").into()),
    }

    // A tenure without a session is no session's.
    let plain = acquire(&store, &lock, &opts("plain"))?;
    ensure!(
        store.resume_session(&lock, "agent-7").is_err(),
        "a session resumed a tenure claimed without one"
    );
    store.release(&plain).map_err(|e| fail("release", e))?;

    // Expired: the session's next claim is a new tenure with a higher token.
    let lapsed = acquire(&store, &lock, &opts("a").session("agent-7"))?;
    clock.advance_ms(TTL_MS);
    let next = acquire(&store, &lock, &opts("a").session("agent-7"))?;
    ensure!(
        !next.reentered() && next.token() > lapsed.token(),
        "an expired session tenure was revived: token {} after {}",
        next.token(),
        lapsed.token()
    );
    Ok(())
}

/// The test through real processes: a worker holds a lock for session
/// `agent-7` (kept alive); this process's claim for the same session keeps the
/// worker's token; another session is refused.
pub(super) fn session_reentry_across_processes<S: LeaseStore + Clone + 'static>(
    f: &Fixture<S>,
) -> Result<(), Failed> {
    let token_file = f.scratch_file("session-token");
    let worker = KillOnDrop(f.spawn_worker(&Job::Hold {
        lock: "session-procs".into(),
        ttl_ms: 60_000,
        token_file: token_file.clone(),
        tied_to_process: true,
        session: Some("agent-7".into()),
    })?);
    let token: u64 = wait_for_line(&token_file, Duration::from_secs(30))?
        .parse()
        .map_err(|_| "bad token from the worker")?;
    let store = f.store();
    let lock = Resource::lock("session-procs");
    match store.try_acquire(&lock, &opts("other").session("agent-8")) {
        Ok(TryAcquire::Held(holder)) if holder.token == token => {}
        other => return Err(format!("another session was not held: {other:?}").into()),
    }
    let again = acquire(&store, &lock, &opts("second").session("agent-7"))?;
    ensure!(
        again.token() == token && again.reentered(),
        "the second process of the session got token {} (re-entered: {}), not {token}",
        again.token(),
        again.reentered()
    );
    drop(worker);
    Ok(())
}
