//! Schedules for the kinds of claim (issue 14, docs/design-04-claims.md).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use fencepost::{AcquireOptions, Resource};

use super::super::{Actor, Ctx, Setup};
use super::{ModelLiveness, TTL_MS, evidence, lock};

/// The model's process table of the local host, holding `pids`, and a liveness
/// probe for any pid on it (the schedules remove a pid to kill its process).
fn local_processes(pids: &[u32]) -> (Arc<Mutex<HashSet<u32>>>, impl Fn(u32) -> ModelLiveness) {
    let running = Arc::new(Mutex::new(pids.iter().copied().collect::<HashSet<u32>>()));
    let table = Arc::clone(&running);
    let probe = move |pid: u32| ModelLiveness {
        this: evidence("local-host", pid),
        running: Arc::clone(&table),
    };
    (running, probe)
}

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

/// A process of session `s` keeps a lock tied to its life (pid 3); a sibling of
/// the session re-enters the tenure for three ttls, untied; the first process
/// renews twice more and is SIGKILLed. The sibling was promised the lease for
/// three ttls from its claim: neither the first process's renewals (with its own,
/// shorter ttl and its evidence) nor its death may hand the lease to a waiter of
/// session `t` (tied, pid 4) before then. Judged by the schedule itself (the
/// oracle follows the records, which the first process rewrote). Planted bug
/// `SIBLING_RENEWAL_IGNORED`: the first process renews as if it had written the
/// sibling's record, and the waiter takes over once it dies (found by a breaker).
pub(super) fn session_sibling(_: &Setup) -> Vec<Actor> {
    sibling_actors(lock(), lock(), None)
}

/// As `session_sibling`, for an existing file, which a tenure holds in two series
/// (its path and its file id), with the waiter claiming it through another hard
/// link (another path key, the same file-id key; where the filesystem gives no
/// file id, by its own path). The first process's renewals
/// must keep the sibling's later end in *every* series: one that kept it only in
/// the path series cut the file-id series short to its own ttl, and the waiter
/// got the file through the link while the session held it (found by a breaker;
/// planted bug `OTHER_KEYS_CUT_SHORT`).
pub(super) fn session_sibling_file(setup: &Setup) -> Vec<Actor> {
    let file = setup.dir.join("sibling.rs");
    let link = setup.dir.join("sibling-link.rs");
    let _ = std::fs::write(&file, b"x");
    let _ = std::fs::hard_link(&file, &link);
    // Where the filesystem gives no file id (Wine), the two links are two
    // resources: the waiter then claims the file itself, by its path.
    let file_id = |path: &std::path::Path| {
        Resource::file(path)
            .identity()
            .ok()
            .and_then(|identity| identity.file_id)
    };
    let shared_id = file_id(&file).is_some() && file_id(&file) == file_id(&link);
    let waited = Resource::file(if shared_id { &link } else { &file });
    sibling_actors(Resource::file(&file), waited, None)
}

/// As `session_sibling_file`, with the file replaced (an editor's save: a new file
/// renamed over it, so a new file id) after the first process claimed it and before
/// the sibling re-enters, and the waiter claiming it through a hard link of the new
/// file. Each renewal adopts the new file id into the tenure; an adoption must keep
/// the tenure's later end as a renewal does (found by a breaker; planted bug
/// `ADOPTED_KEY_CUT_SHORT`).
pub(super) fn session_sibling_replaced(setup: &Setup) -> Vec<Actor> {
    let file = setup.dir.join("replaced.rs");
    let _ = std::fs::write(&file, b"x");
    let replace = Replace {
        tmp: setup.dir.join("replaced.rs.tmp"),
        link: setup.dir.join("replaced-link.rs"),
        file: file.clone(),
    };
    // Where the filesystem gives no file id (Wine), the link is another resource:
    // the waiter then claims the file by its own path.
    let with_ids = Resource::file(&file)
        .identity()
        .is_ok_and(|identity| identity.file_id.is_some());
    let waited = Resource::file(if with_ids { &replace.link } else { &file });
    sibling_actors(Resource::file(&file), waited, Some(replace))
}

/// A file replaced by a new one renamed over it, then hard-linked as `link`.
struct Replace {
    file: std::path::PathBuf,
    tmp: std::path::PathBuf,
    link: std::path::PathBuf,
}

/// The actors of `session_sibling`: the session holds `held`, the waiter claims
/// `waited` (the same resource, or another name of it); with `replace`, the file
/// is replaced between the first process's claim and the sibling's re-entry.
fn sibling_actors(held: Resource, waited: Resource, replace: Option<Replace>) -> Vec<Actor> {
    let (running, probe) = local_processes(&[3, 4]);
    let held_too = held.clone();
    let (first_probe, waiter_probe, table) = (probe(3), probe(4), Arc::clone(&running));
    // The end (true time) of what the sibling was promised, once it re-entered.
    let promised = Arc::new(Mutex::new(None::<u64>));
    let judged = Arc::clone(&promised);
    let mut actors = Vec::new();
    if let Some(Replace { file, tmp, link }) = replace {
        actors.push(Actor::new("editor", move |ctx: &Ctx| {
            ctx.sleep(TTL_MS / 12);
            ctx.env("write the new file beside it", || {
                std::fs::write(&tmp, b"y")
            });
            ctx.env("rename it over the file (a new file id)", || {
                std::fs::rename(&tmp, &file)
            });
            ctx.env("hard-link the new file", || {
                std::fs::hard_link(&file, &link)
            });
        }));
    }
    actors.extend([
        Actor::new("s-first", move |ctx: &Ctx| {
            let ctx = ctx.with_store(ctx.store.clone().with_liveness(first_probe));
            let options = for_session(&ctx, Some("s"), 0).tied_to_process(true);
            let Some(mut lease) = ctx.acquire_with(&held, &options) else {
                return;
            };
            if ctx.keep(&mut lease, 2) {
                // SIGKILL, holding.
                lock_set(&table).remove(&3);
                ctx.die(&lease);
            }
        }),
        Actor::new("s-second", move |ctx: &Ctx| {
            ctx.sleep(TTL_MS / 6);
            let began = ctx.world.now();
            let options = AcquireOptions {
                ttl_ms: 3 * TTL_MS,
                ..for_session(ctx, Some("s"), 0)
            };
            if let Some(lease) = ctx.acquire_with(&held_too, &options)
                && lease.reentered()
            {
                *promised.lock().unwrap_or_else(|e| e.into_inner()) = Some(began + 3 * TTL_MS);
                ctx.sleep(TTL_MS);
                ctx.check(&lease);
            }
        }),
        Actor::new("t", move |ctx: &Ctx| {
            let ctx = ctx.with_store(ctx.store.clone().with_liveness(waiter_probe));
            ctx.sleep(TTL_MS / 3);
            let options = for_session(&ctx, Some("t"), 5 * TTL_MS).tied_to_process(true);
            if let Some(lease) = ctx.acquire_with(&waited, &options) {
                let now = ctx.world.now();
                let until = *judged.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(until) = until.filter(|until| now < *until) {
                    ctx.violate(format!(
                        "t holds token {} at +{now}ms while the session's sibling was promised the tenure until +{until}ms",
                        lease.token()
                    ));
                }
                ctx.release(&lease);
            }
        }),
    ]);
    actors
}

/// A process of session `s` keeps a lock (a `run --session s`) while a sibling of
/// the session — its command — claims the lock again and again with a much
/// shorter ttl, each re-entry keeping the tenure's end. The first process's
/// renewals must extend the tenure: a renewal that found a sibling's record above
/// its own (its own landed on a generation the sibling's sweep had freed) took that
/// record, which kept the old end, for its renewal, and the tenure ran out under
/// the `run` with nobody else about (found by a breaker: `run` stopped its command).
/// Without faults, so that a loss can only be the protocol's. Planted bug
/// `SIBLING_RECORD_TAKEN_AS_RENEWAL`.
pub(super) fn session_sibling_short(_: &Setup) -> Vec<Actor> {
    vec![
        Actor::new("s-run", move |ctx: &Ctx| {
            let options = for_session(ctx, Some("s"), 0);
            let Some(mut lease) = ctx.acquire_with(&lock(), &options) else {
                return;
            };
            if !ctx.keep(&mut lease, 6) {
                ctx.violate(
                    "the session's first process lost its lease though only its own session \
                     touched the lock"
                        .to_string(),
                );
            }
        }),
        Actor::new("s-child", move |ctx: &Ctx| {
            for _ in 0..8 {
                ctx.sleep(TTL_MS / 5);
                let options = AcquireOptions {
                    ttl_ms: TTL_MS / 10,
                    ..for_session(ctx, Some("s"), 0)
                };
                let _ = ctx.acquire_with(&lock(), &options);
            }
        }),
    ]
}

/// Session `s` claims a file; an editor writes its new version beside it and
/// hard-links that new file, session `t` claims it through the link, and the
/// editor renames the new file over the one `s` claimed (a save: a new file id,
/// which `s`'s tenure never took in); `t` then releases it. The tenure of `s` was
/// written around: fenced for good. `s` claims the file again, with a wait shorter
/// than its old tenure's ttl: it must get a new tenure (a new token), not be kept
/// out by its own ended tenure, still the newest record of the path's series, until
/// that ttl (found by a breaker; planted bug `FENCED_SESSION_TENURE_KEPT`). (`t`
/// claims before the rename: after it, `t`'s claim finds `s` holding the file under
/// its name, `link_claim_after_save`.) Where the filesystem gives no file id (Wine)
/// the link is another resource and nothing is written around: `s` re-enters.
pub(super) fn session_fenced_reclaim(setup: &Setup) -> Vec<Actor> {
    let file = setup.dir.join("fenced.rs");
    let _ = std::fs::write(&file, b"x");
    let tmp = setup.dir.join("fenced.rs.tmp");
    let link = setup.dir.join("fenced-link.rs");
    let with_ids = Resource::file(&file)
        .identity()
        .is_ok_and(|identity| identity.file_id.is_some());
    // Whether `t` held the file through the link, and the steps done so far.
    let written_around = Arc::new(AtomicBool::new(false));
    let (linked, t_claimed) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (renamed, t_done) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (around_s, done_s) = (Arc::clone(&written_around), Arc::clone(&t_done));
    let (linked_e, claimed_e, renamed_e) = (
        Arc::clone(&linked),
        Arc::clone(&t_claimed),
        Arc::clone(&renamed),
    );
    let (file_s, file_e, link_e, link_t) = (file.clone(), file.clone(), link.clone(), link);
    vec![
        Actor::new("s", move |ctx: &Ctx| {
            // Long enough to be live still when `s` claims again: what keeps the
            // session out is its own tenure's record, not an expired one.
            let options = AcquireOptions {
                ttl_ms: 20 * TTL_MS,
                ..for_session(ctx, Some("s"), 0)
            };
            let Some(lease) = ctx.acquire_with(&Resource::file(&file_s), &options) else {
                return;
            };
            if !until(ctx, &done_s) {
                return;
            }
            let options = for_session(ctx, Some("s"), TTL_MS / 4);
            let again = ctx.acquire_with(&Resource::file(&file_s), &options);
            match again {
                None => ctx.violate(
                    "session s was kept out of its own file by its own tenure, which t had \
                     written around through a hard link and then released"
                        .to_string(),
                ),
                Some(again) => {
                    if around_s.load(Ordering::SeqCst) && again.token() <= lease.token() {
                        ctx.violate(format!(
                            "session s got token {} again for a tenure t wrote around",
                            again.token()
                        ));
                    }
                    ctx.release(&again);
                }
            }
        }),
        Actor::new("editor", move |ctx: &Ctx| {
            ctx.sleep(TTL_MS / 20);
            ctx.env("write the new file beside it", || {
                std::fs::write(&tmp, b"y")
            });
            ctx.env("hard-link the new file", || {
                std::fs::hard_link(&tmp, &link_e)
            });
            linked_e.store(true, Ordering::SeqCst);
            until(ctx, &claimed_e);
            ctx.env("rename it over the file (a new file id)", || {
                std::fs::rename(&tmp, &file_e)
            });
            renamed_e.store(true, Ordering::SeqCst);
        }),
        Actor::new("t", move |ctx: &Ctx| {
            if until(ctx, &linked) {
                let options = for_session(ctx, Some("t"), 0);
                let lease = ctx.acquire_with(&Resource::file(&link_t), &options);
                t_claimed.store(true, Ordering::SeqCst);
                if let Some(lease) = lease {
                    until(ctx, &renamed);
                    if with_ids {
                        written_around.store(true, Ordering::SeqCst);
                    }
                    ctx.release(&lease);
                }
            }
            t_done.store(true, Ordering::SeqCst);
        }),
    ]
}

/// Waits (bounded: 400 sleeps of a hundredth of a ttl, well within a long tenure)
/// for `flag`; whether it was set.
fn until(ctx: &Ctx, flag: &AtomicBool) -> bool {
    for _ in 0..400 {
        if flag.load(Ordering::SeqCst) {
            return true;
        }
        ctx.sleep(TTL_MS / 100);
    }
    flag.load(Ordering::SeqCst)
}

/// Session `s` claims a file; an editor's save replaces it (a new file id, which
/// `s`'s tenure has not taken in: it renews nothing meanwhile) and the new file is
/// hard-linked; session `t` claims the file through the link. The file id is free,
/// but the file's other name is held: `t` must be refused while `s`'s tenure is
/// live (planted bug `OTHER_NAMES_NOT_LOOKED_FOR`: `t` got in, writing around `s`),
/// and so must a reader, `r`, through the link. A second claimant, `u`, claims the link with a wait while `s` releases: it gets
/// the file once `s` has let it go, never before. Only claims that began once `s`'s
/// claim had returned are held to it: a claim of the link made while `s`'s claim
/// was still landing can find nothing of it yet, and `s`'s tenure, which took the
/// old file id, is then written around and fenced (its token fails `check`), as
/// the look is no exclusive create. Where the filesystem gives no file id (Wine)
/// the link is another resource: nothing to check.
pub(super) fn link_claim_after_save(setup: &Setup) -> Vec<Actor> {
    let file = setup.dir.join("saved.rs");
    let _ = std::fs::write(&file, b"x");
    let tmp = setup.dir.join("saved.rs.tmp");
    let link = setup.dir.join("saved-link.rs");
    let with_ids = Resource::file(&file)
        .identity()
        .is_ok_and(|identity| identity.file_id.is_some());
    // `s` holds the file (set once its claim returned, cleared before it releases),
    // and the link exists.
    let s_holds = Arc::new(AtomicBool::new(false));
    let linked = Arc::new(AtomicBool::new(false));
    let (holds_t, holds_u, holds_e, holds_r) = (
        Arc::clone(&s_holds),
        Arc::clone(&s_holds),
        Arc::clone(&s_holds),
        Arc::clone(&s_holds),
    );
    let (linked_t, linked_u, linked_r) = (
        Arc::clone(&linked),
        Arc::clone(&linked),
        Arc::clone(&linked),
    );
    let (file_s, file_e, link_t, link_u, link_r) = (
        file.clone(),
        file.clone(),
        link.clone(),
        link.clone(),
        link.clone(),
    );
    vec![
        Actor::new("s", move |ctx: &Ctx| {
            let options = AcquireOptions {
                ttl_ms: 20 * TTL_MS,
                ..for_session(ctx, Some("s"), 0)
            };
            let Some(lease) = ctx.acquire_with(&Resource::file(&file_s), &options) else {
                return;
            };
            s_holds.store(true, Ordering::SeqCst);
            ctx.sleep(TTL_MS / 2);
            s_holds.store(false, Ordering::SeqCst);
            ctx.release(&lease);
        }),
        Actor::new("editor", move |ctx: &Ctx| {
            // The save comes once `s` holds the file (a save before the claim is a
            // file id the claim takes).
            until(ctx, &holds_e);
            ctx.env("write the new file beside it", || {
                std::fs::write(&tmp, b"y")
            });
            ctx.env("rename it over the file (a new file id)", || {
                std::fs::rename(&tmp, &file_e)
            });
            ctx.env("hard-link the saved file", || {
                std::fs::hard_link(&file_e, &link)
            });
            linked.store(true, Ordering::SeqCst);
        }),
        Actor::new("t", move |ctx: &Ctx| {
            if !until(ctx, &linked_t) {
                return;
            }
            // Only a claim that began while `s` held the file must be refused.
            let began_held = holds_t.load(Ordering::SeqCst);
            let options = for_session(ctx, Some("t"), 0);
            if let Some(lease) = ctx.acquire_with(&Resource::file(&link_t), &options) {
                if with_ids && began_held && holds_t.load(Ordering::SeqCst) {
                    ctx.violate(
                        "t claimed the file through a hard link while s held it under its \
                         name (s's tenure had not taken in the saved file's id)"
                            .to_string(),
                    );
                }
                ctx.release(&lease);
            }
        }),
        Actor::new("r", move |ctx: &Ctx| {
            if !until(ctx, &linked_r) {
                return;
            }
            // A reader through the link is refused as well: `s` writes the file.
            let began_held = holds_r.load(Ordering::SeqCst);
            let options = for_session(ctx, None, 0).shared(true);
            if let Some(lease) = ctx.acquire_with(&Resource::file(&link_r), &options) {
                if with_ids && began_held && holds_r.load(Ordering::SeqCst) {
                    ctx.violate(
                        "r read the file through a hard link while s held it under its name"
                            .to_string(),
                    );
                }
                ctx.release(&lease);
            }
        }),
        Actor::new("u", move |ctx: &Ctx| {
            if !until(ctx, &linked_u) {
                return;
            }
            let began_held = holds_u.load(Ordering::SeqCst);
            let options = for_session(ctx, Some("u"), 2 * TTL_MS);
            if let Some(lease) = ctx.acquire_with(&Resource::file(&link_u), &options) {
                if with_ids && began_held && holds_u.load(Ordering::SeqCst) {
                    ctx.violate(
                        "u claimed the file through a hard link while s held it under its name"
                            .to_string(),
                    );
                }
                ctx.release(&lease);
            }
        }),
    ]
}

/// Two processes of session `s` claim one lock at the same instant, as two
/// `fencepost run --session s` started together: one begins the tenure, the other
/// re-enters it (same token). Judged by the schedule itself: when both got the
/// same token, exactly one must say it began it, since only that one releases it
/// at its end (`run`, `claim --hold`); a claim that took its tenure for lost
/// because its sibling had already renewed it made both say "re-entered", and the
/// lock stayed held for its ttl with nobody behind it (a breaker; planted bug
/// `SIBLING_CLAIM_IGNORED`). Without faults, as `session_file_race`.
pub(super) fn session_simultaneous(_: &Setup) -> Vec<Actor> {
    simultaneous_members(lock())
}

fn simultaneous_members(resource: Resource) -> Vec<Actor> {
    let outcomes = Arc::new(Mutex::new(Vec::<(u64, bool)>::new()));
    let member = |outcomes: Arc<Mutex<Vec<(u64, bool)>>>, resource: Resource| {
        move |ctx: &Ctx| {
            let options = for_session(ctx, Some("s"), 2 * TTL_MS);
            if let Some(mut lease) = ctx.acquire_with(&resource, &options) {
                outcomes
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((lease.token(), lease.reentered()));
                if ctx.keep(&mut lease, 1) && !lease.reentered() {
                    ctx.release(&lease);
                }
            }
        }
    };
    let judged = Arc::clone(&outcomes);
    vec![
        Actor::new("s-a", member(Arc::clone(&outcomes), resource.clone())),
        Actor::new("s-b", member(outcomes, resource)),
        Actor::new("judge", move |ctx: &Ctx| {
            ctx.sleep(3 * TTL_MS);
            let outcomes = judged.lock().unwrap_or_else(|e| e.into_inner()).clone();
            if let [(a, a_reentered), (b, b_reentered)] = outcomes[..]
                && a == b
                && a_reentered == b_reentered
            {
                ctx.violate(format!(
                    "both processes of the session got token {a} and both said {} it",
                    if a_reentered {
                        "they re-entered"
                    } else {
                        "they began"
                    }
                ));
            }
        }),
    ]
}

/// Two processes of session `s` claim one existing file (two keys: its path and
/// its file id) at the same instant, without waiting, and keep it; a process of
/// session `t` waits for it. Besides the oracle's safety rules, the schedule judges
/// that no process of `s` is refused by `s` itself: one finding the file's other
/// key taken by its sibling, before the sibling took the path, must re-enter once
/// that claim settles, not report its own session as the holder (found by a
/// breaker; planted bug `OWN_SESSION_NO_GRACE`). Without faults, so that a refusal
/// can only be the protocol's (a sibling paused or crashed mid-claim could leave
/// the session's tenure legitimately out of reach).
pub(super) fn session_file_race(setup: &Setup) -> Vec<Actor> {
    let file = setup.dir.join("edit.rs");
    let _ = std::fs::write(&file, b"x");
    let member = |file: std::path::PathBuf| {
        move |ctx: &Ctx| {
            let options = for_session(ctx, Some("s"), 0);
            match ctx.acquire_or_holder(&Resource::file(&file), &options) {
                Ok(mut lease) => {
                    if ctx.keep(&mut lease, 1) {
                        ctx.release(&lease);
                    }
                }
                Err(Some(holder))
                    if holder.session.as_deref() == Some(&fencepost::SessionTag::of("s")) =>
                {
                    ctx.violate(format!(
                        "{} was refused by its own session's tenure (token {})",
                        ctx.name(),
                        holder.token
                    ));
                }
                Err(_) => {}
            }
        }
    };
    let rival = file.clone();
    vec![
        Actor::new("s-one", member(file.clone())),
        Actor::new("s-two", member(file)),
        Actor::new("t", move |ctx: &Ctx| {
            let options = for_session(ctx, Some("t"), 3 * TTL_MS);
            if let Some(lease) = ctx.acquire_with(&Resource::file(&rival), &options) {
                ctx.check(&lease);
                ctx.release(&lease);
            }
        }),
    ]
}

/// A session's end, key by key (`release_session_series`, what the agent hook's
/// SessionEnd does for a file the session renamed or deleted): a process of
/// session `s` claims an existing file (two keys) and keeps it; the session's end
/// releases its file-id key and then its path key, twice (the second time after
/// another session may hold); a later process of `s` claims again; a process of
/// session `t` waits for the file. The oracles judge that a release by key ends
/// only tenures of its session (the secret oracle: a tombstone written over
/// another session's tenure) and never lets two hold. Planted bug
/// `SERIES_RELEASE_WITHOUT_PROOF` (a release by key that ends whatever is newest).
pub(super) fn session_end_by_key(setup: &Setup) -> Vec<Actor> {
    let file = setup.dir.join("renamed.rs");
    let _ = std::fs::write(&file, b"x");
    let identity = Resource::file(&file).identity().ok();
    // File-id key first, as the session's end reaches it (after the path's).
    let keys: Vec<fencepost::Key> = identity
        .map(|i| i.file_id.into_iter().chain([i.key]).collect())
        .unwrap_or_default();
    let (holder_file, again_file, waiter_file) = (file.clone(), file.clone(), file);
    vec![
        Actor::new("s-holder", move |ctx: &Ctx| {
            let options = for_session(ctx, Some("s"), 0);
            if let Some(mut lease) = ctx.acquire_with(&Resource::file(&holder_file), &options) {
                ctx.keep(&mut lease, 3);
            }
        }),
        Actor::new("s-end", move |ctx: &Ctx| {
            for pause in [TTL_MS / 3, TTL_MS] {
                ctx.sleep(pause);
                for key in &keys {
                    ctx.release_session_series(key, "s");
                }
            }
        }),
        Actor::new("s-again", move |ctx: &Ctx| {
            ctx.sleep(TTL_MS / 2);
            let options = for_session(ctx, Some("s"), TTL_MS);
            if let Some(mut lease) = ctx.acquire_with(&Resource::file(&again_file), &options)
                && ctx.keep(&mut lease, 1)
            {
                ctx.release(&lease);
            }
        }),
        Actor::new("t", move |ctx: &Ctx| {
            ctx.sleep(TTL_MS / 6);
            let options = for_session(ctx, Some("t"), 3 * TTL_MS);
            if let Some(mut lease) = ctx.acquire_with(&Resource::file(&waiter_file), &options)
                && ctx.keep(&mut lease, 2)
            {
                ctx.release(&lease);
            }
        }),
    ]
}

/// Three processes of session `s` claim one existing file (two keys) at once,
/// without waiting, and keep it for a renewal; reads and listings may stall. A
/// process that finds the first key taken by a sibling re-enters that sibling's
/// tenure (resumed from the first key, the file-id key adopted) while the sibling
/// is still claiming the second key; the sibling, finding that key taken (by its
/// own tenure) or its create landed below the re-entry's renewal, gives back what
/// it took. The oracle's "never two tenures promised at one instant" judges that
/// give-back: it must not end the tenure the re-entering process was told it holds
/// (planted bug `GIVE_BACK_OVER_RENEWAL`).
pub(super) fn session_file_reentry(setup: &Setup) -> Vec<Actor> {
    let file = setup.dir.join("edit.rs");
    let _ = std::fs::write(&file, b"x");
    let member = |file: std::path::PathBuf| {
        move |ctx: &Ctx| {
            let options = for_session(ctx, Some("s"), 0);
            if let Some(mut lease) = ctx.acquire_with(&Resource::file(&file), &options)
                && ctx.keep(&mut lease, 1)
            {
                ctx.release(&lease);
            }
        }
    };
    vec![
        Actor::new("s-one", member(file.clone())),
        Actor::new("s-two", member(file.clone())),
        Actor::new("s-three", member(file)),
    ]
}

/// Two processes of session `s` claim `{a, b}` all or nothing at once, without
/// waiting, and keep what they get for a renewal; a third process of `s` claims
/// `a` alone, a process of session `t` holds `b` for a while, and one of session `u`
/// waits for `a`. A claim of the
/// pair that took `a` and found `b` held gives `a` back, but not once a process of
/// its session re-entered it (the third, or the other pair claimer) and was told
/// it holds it: the oracle's "never two tenures promised at one instant" judges
/// that give-back (planted bug `GIVE_BACK_OVER_RENEWAL`, as in
/// `session_file_reentry`). Reads and listings may stall.
pub(super) fn session_several(_: &Setup) -> Vec<Actor> {
    let (a, b) = (Resource::lock("a"), Resource::lock("b"));
    let pair = |resources: Vec<Resource>| {
        move |ctx: &Ctx| {
            let options = for_session(ctx, Some("s"), 0);
            if let Some(mut leases) = ctx.acquire_all(&resources, &options) {
                let mut kept = true;
                for lease in &mut leases {
                    kept &= ctx.keep(lease, 1);
                }
                if kept {
                    for lease in &leases {
                        ctx.release(lease);
                    }
                }
            }
        }
    };
    let alone = a.clone();
    let waiter = a.clone();
    let rival = b.clone();
    vec![
        Actor::new("s-pair", pair(vec![a.clone(), b.clone()])),
        Actor::new("s-pair2", pair(vec![b, a])),
        Actor::new("s-alone", move |ctx: &Ctx| {
            let options = for_session(ctx, Some("s"), 0);
            if let Some(mut lease) = ctx.acquire_with(&alone, &options)
                && ctx.keep(&mut lease, 1)
            {
                ctx.release(&lease);
            }
        }),
        Actor::new("t", move |ctx: &Ctx| {
            let options = for_session(ctx, Some("t"), 0);
            if let Some(lease) = ctx.acquire_with(&rival, &options) {
                ctx.sleep(TTL_MS / 2);
                ctx.release(&lease);
            }
        }),
        Actor::new("u", move |ctx: &Ctx| {
            let options = for_session(ctx, Some("u"), 2 * TTL_MS);
            if let Some(lease) = ctx.acquire_with(&waiter, &options) {
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

/// A shared claimer and an exclusive claimer of one free lock, at the same instant
/// and neither waiting (from a breaker's trial of `shared, exclusive, shared`, in
/// which about 1 in 40 all three were refused). Each side writes first and reads
/// the other second, so each can see the other's claim and give back. The schedule
/// judges that they are not both refused: the lock was free, nobody else claims
/// it, and without faults a refusal can only be the protocol's. A claimer that
/// found its rival only after its own claim landed looks again before it reports
/// it (planted bug `RACE_REFUSED_AT_ONCE`: it reports the rival at once, which may
/// have given back as well — both refused, each naming a claimer that holds
/// nothing).
pub(super) fn shared_exclusive_race(_: &Setup) -> Vec<Actor> {
    // (finished, refused) over the two claimers.
    let tally = Arc::new(Mutex::new((0usize, 0usize)));
    let claimer = |shared: bool, tally: Arc<Mutex<(usize, usize)>>| {
        move |ctx: &Ctx| {
            let options = for_session(ctx, None, 0).shared(shared);
            let refused = match ctx.acquire_or_holder(&lock(), &options) {
                Ok(mut lease) => {
                    if ctx.keep(&mut lease, 1) {
                        ctx.release(&lease);
                    }
                    false
                }
                Err(_) => true,
            };
            let mut tally = tally.lock().unwrap_or_else(|e| e.into_inner());
            tally.0 += 1;
            tally.1 += usize::from(refused);
            if *tally == (2, 2) {
                ctx.violate(
                    "both claimers of a free lock were refused, each by a claimer that gave \
                     back too"
                        .to_string(),
                );
            }
        }
    };
    vec![
        Actor::new("r", claimer(true, tally.clone())),
        Actor::new("w", claimer(false, tally)),
    ]
}

/// A subtree covers its own path: a subtree claim of `zz` and a file claim of `zz`
/// (neither exists yet) race, and a shared reader of the file `zz` arrives. The
/// oracle counts `dir:zz` as covering `file:zz`. Planted bug `SAME_PATH_UNCHECKED`:
/// neither side looks at the other kind's key of its own path, so both hold.
pub(super) fn same_path(setup: &Setup) -> Vec<Actor> {
    let zz = setup.dir.join("zz");
    let (dir, file, read) = (zz.clone(), zz.clone(), zz);
    vec![
        Actor::new("dir", move |ctx: &Ctx| {
            ctx.hold(&Resource::dir(&dir), 2 * TTL_MS, 2);
        }),
        Actor::new("file", move |ctx: &Ctx| {
            ctx.hold(&Resource::file(&file), 2 * TTL_MS, 2);
        }),
        Actor::new("reader", move |ctx: &Ctx| {
            ctx.sleep(TTL_MS / 10);
            let options = for_session(ctx, None, 2 * TTL_MS).shared(true);
            if let Some(mut lease) = ctx.acquire_with(&Resource::file(&read), &options) {
                ctx.check(&lease);
                if ctx.keep(&mut lease, 1) {
                    ctx.release(&lease);
                }
            }
        }),
    ]
}

/// A tied claim (dead-holder takeover applies) for `ctx`, waiting `wait_ms`.
fn tied(ctx: &Ctx, wait_ms: u64) -> AcquireOptions {
    for_session(ctx, None, wait_ms).tied_to_process(true)
}

/// A subtree holder (local pid 3) dies holding `src/` while a file below it and a
/// subtree below it wait (pids 4 and 5); the dead holder's child, left running,
/// keeps presenting the subtree's token. A covered claim takes a dead holder in
/// its way over as a direct claim would: it fences the dead tenure first, so the
/// token no longer passes `check` once a covered claim is promised (the checker's
/// oracle for subtree tokens). Planted bug `COVERED_DEAD_NOT_FENCED`: the covered
/// claim ignores the dead holder without fencing it, and the orphan's token keeps
/// passing while the file is held.
pub(super) fn dead_subtree_holder(setup: &Setup) -> Vec<Actor> {
    let (running, probe) = local_processes(&[3, 4, 5]);
    let (tree_probe, file_probe, inner_probe) = (probe(3), probe(4), probe(5));
    let src = setup.dir.join("src");
    let (file, inner) = (src.join("a.rs"), src.join("inner"));
    let dying = Arc::clone(&running);
    vec![
        Actor::new("tree", move |ctx: &Ctx| {
            let ctx = ctx.with_store(ctx.store.clone().with_liveness(tree_probe));
            let Some(mut lease) = ctx.acquire_with(&Resource::dir(&src), &tied(&ctx, TTL_MS))
            else {
                return;
            };
            if ctx.keep(&mut lease, 1) {
                // SIGKILL: the process is gone, its lease is not released.
                dying.lock().unwrap_or_else(|e| e.into_inner()).remove(&3);
                ctx.die(&lease);
                // Its child process, left running, still presents the token.
                for _ in 0..4 {
                    ctx.sleep(TTL_MS / 8);
                    ctx.check(&lease);
                }
            }
        }),
        Actor::new("file", move |ctx: &Ctx| {
            let ctx = ctx.with_store(ctx.store.clone().with_liveness(file_probe));
            for _ in 0..2 {
                if let Some(mut lease) =
                    ctx.acquire_with(&Resource::file(&file), &tied(&ctx, 3 * TTL_MS))
                {
                    ctx.check(&lease);
                    if ctx.keep(&mut lease, 1) {
                        ctx.release(&lease);
                    }
                }
            }
        }),
        Actor::new("inner", move |ctx: &Ctx| {
            let ctx = ctx.with_store(ctx.store.clone().with_liveness(inner_probe));
            ctx.sleep(TTL_MS / 10);
            if let Some(lease) = ctx.acquire_with(&Resource::dir(&inner), &tied(&ctx, 3 * TTL_MS)) {
                ctx.check(&lease);
                ctx.release(&lease);
            }
        }),
    ]
}

/// Marks its actor's process dead when the actor dies (a crash fault unwinds
/// through it): the model's process table forgets the pid and every promise made
/// to the actor ends.
pub(super) struct DiesWith {
    pub(super) ctx: Ctx,
    pub(super) pid: u32,
    pub(super) running: Arc<Mutex<HashSet<u32>>>,
}

impl Drop for DiesWith {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.running
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&self.pid);
            self.ctx.process_ended(self.pid);
        }
    }
}

/// Crash points in shared claims: two tied readers of a lock may die at any call
/// (between their participant-index entry and their record, while holding, or
/// between giving back and the sweep of their entry), and a tied writer waits for
/// them. A dead reader's entry is swept, a live reader's never before its record
/// could land. The oracle: never a reader and the writer promised at one instant.
/// Planted bug `SHARES_SWEEP_UNWRITTEN`: an entry whose record is not written yet
/// is swept although its writer lives, and a writer that arrived meanwhile holds
/// together with the reader.
pub(super) fn shared_crash(_: &Setup) -> Vec<Actor> {
    let (running, probe) = local_processes(&[5, 6, 7]);
    // A reader (pid) that may die at any call, after `pause`, keeping its lease
    // for `renewals` renewals.
    let reader = |pid: u32, pause: u64, renewals: usize| {
        let (probe, running) = (probe(pid), Arc::clone(&running));
        move |ctx: &Ctx| {
            let ctx = ctx.with_store(ctx.store.clone().with_liveness(probe));
            let _dies = DiesWith {
                ctx: ctx.with_store(ctx.store.clone()),
                pid,
                running,
            };
            ctx.sleep(pause);
            for _ in 0..2 {
                let options = tied(&ctx, 2 * TTL_MS).shared(true);
                if let Some(mut lease) = ctx.acquire_with(&lock(), &options) {
                    ctx.check(&lease);
                    if ctx.keep(&mut lease, renewals) {
                        ctx.release(&lease);
                    }
                }
            }
        }
    };
    let writer_probe = probe(7);
    vec![
        Actor::new("r5", reader(5, 0, 1)),
        Actor::new("r6", reader(6, TTL_MS / 40, 0)),
        Actor::new("w", move |ctx: &Ctx| {
            let ctx = ctx.with_store(ctx.store.clone().with_liveness(writer_probe));
            ctx.sleep(TTL_MS / 20);
            for _ in 0..3 {
                if let Some(mut lease) = ctx.acquire_with(&lock(), &tied(&ctx, 3 * TTL_MS)) {
                    ctx.check(&lease);
                    if ctx.keep(&mut lease, 1) {
                        ctx.release(&lease);
                    }
                }
            }
        }),
    ]
}

/// A waiting writer dies (a crash at any call) while a reader holds: a reader
/// that arrives after its death must not be kept out by the dead waiter's
/// intent, which decides fairness only (design-05 §4.3). The writer claims as the
/// CLI's plain `claim --wait` does (not tied to its process), so its intent is
/// recognisable as dead only because intents are always tied to their waiter.
/// Judged by the schedule itself: the late reader, refused while the writer was
/// already dead, names the writer's intent. Planted bugs `DEAD_INTENT_HONOURED`
/// (a shared claimer honours an intent whose waiter provably died) and
/// `INTENT_UNTIED` (an intent carries its waiter's process evidence only when the
/// claim is tied to its process).
pub(super) fn dead_intent(_: &Setup) -> Vec<Actor> {
    let (running, probe) = local_processes(&[5, 6, 7]);
    // Set when the writer's body ends, by a crash or normally.
    let writer_gone = Arc::new(AtomicBool::new(false));
    let (r1_probe, r2_probe, w_probe) = (probe(5), probe(6), probe(7));
    let (w_running, gone) = (Arc::clone(&running), Arc::clone(&writer_gone));
    vec![
        Actor::new("r1", move |ctx: &Ctx| {
            let ctx = ctx.with_store(ctx.store.clone().with_liveness(r1_probe));
            let options = tied(&ctx, 0).shared(true);
            if let Some(mut lease) = ctx.acquire_with(&lock(), &options)
                && ctx.keep(&mut lease, 3)
            {
                ctx.release(&lease);
            }
        }),
        Actor::new("w", move |ctx: &Ctx| {
            let ctx = ctx.with_store(ctx.store.clone().with_liveness(w_probe));
            let _gone = SetsOnEnd(gone);
            let _dies = DiesWith {
                ctx: ctx.with_store(ctx.store.clone()),
                pid: 7,
                running: w_running,
            };
            ctx.sleep(TTL_MS / 20);
            if let Some(lease) = ctx.acquire_with(&lock(), &for_session(&ctx, None, 3 * TTL_MS)) {
                ctx.check(&lease);
                ctx.release(&lease);
            }
        }),
        Actor::new("r2", move |ctx: &Ctx| {
            let ctx = ctx.with_store(ctx.store.clone().with_liveness(r2_probe));
            for _ in 0..200 {
                if writer_gone.load(Ordering::SeqCst) {
                    break;
                }
                ctx.sleep(TTL_MS / 20);
            }
            if !writer_gone.load(Ordering::SeqCst) {
                return;
            }
            let options = tied(&ctx, TTL_MS / 4).shared(true);
            match ctx.acquire_or_holder(&lock(), &options) {
                Ok(lease) => {
                    ctx.check(&lease);
                    ctx.release(&lease);
                }
                // Only the writer ever waits for an exclusive claim here.
                Err(Some(holder)) if holder.waiting => ctx.violate(format!(
                    "r2: refused by the intent of the writer, whose process had died before r2 claimed: {}",
                    holder.owner
                )),
                Err(_) => {}
            }
        }),
    ]
}

/// Exclusive holders die holding (SIGKILL) while readers wait: a tied holder of a
/// lock (local pid 3) and a tied subtree holder of `src/` (pid 4); a shared claim
/// of the lock (pid 5) and a shared claim of a file below `src/` (pid 6) arrive
/// after the deaths. Each dead holder's child, left running, keeps presenting its
/// token. A shared claimer takes a dead holder in its way over as an exclusive
/// claimer would: it fences the dead tenure first, so that token no longer passes
/// `check` once the reader is promised (the oracle), and the reader gets in within
/// its wait, well before the dead leases' ttl (the schedule's own judgement).
/// Planted bug `SHARED_DEAD_NOT_FENCED`: the reader ignores the dead holder
/// without fencing it, and the orphan's token keeps passing while the reader holds.
pub(super) fn dead_exclusive_reader(setup: &Setup) -> Vec<Actor> {
    let src = setup.dir.join("src");
    let file = src.join("a.rs");
    let (running, probe) = local_processes(&[3, 4, 5, 6]);
    let died = Arc::new(Mutex::new(HashSet::new()));
    // A holder (pid) of `resource` that dies after one renewal; its orphan checks on.
    let dying = |pid: u32, resource: Resource| {
        let (probe, running, died) = (probe(pid), Arc::clone(&running), Arc::clone(&died));
        move |ctx: &Ctx| {
            let ctx = ctx.with_store(ctx.store.clone().with_liveness(probe));
            // Long enough that a reader kept out by the dead tenure is refused
            // (its wait and the race grace end first).
            let options = AcquireOptions {
                ttl_ms: 10 * TTL_MS,
                ..tied(&ctx, 0)
            };
            let Some(mut lease) = ctx.acquire_with(&resource, &options) else {
                lock_set(&died).insert(pid);
                return;
            };
            if ctx.keep(&mut lease, 1) {
                lock_set(&running).remove(&pid);
                ctx.die(&lease);
                lock_set(&died).insert(pid);
                for _ in 0..4 {
                    ctx.sleep(TTL_MS / 4);
                    ctx.check(&lease);
                }
            } else {
                lock_set(&died).insert(pid);
            }
        }
    };
    // A reader (pid) of `resource` that claims once `after` is gone.
    let reader = |pid: u32, after: u32, resource: Resource| {
        let (probe, died) = (probe(pid), Arc::clone(&died));
        move |ctx: &Ctx| {
            let ctx = ctx.with_store(ctx.store.clone().with_liveness(probe));
            for _ in 0..100 {
                if lock_set(&died).contains(&after) {
                    break;
                }
                ctx.sleep(TTL_MS / 20);
            }
            let options = tied(&ctx, TTL_MS).shared(true);
            match ctx.acquire_or_holder(&resource, &options) {
                Ok(lease) => {
                    ctx.check(&lease);
                    ctx.sleep(TTL_MS / 2);
                    ctx.release(&lease);
                }
                Err(Some(holder))
                    if holder.expires_at_ms > ctx.store.clock().wall_ms() + TTL_MS =>
                {
                    ctx.violate(format!(
                        "{}: a shared claim waited out its whole wait (one ttl) for {}, whose lease runs on for more than a ttl (a dead holder kept a reader out)",
                        ctx.name(),
                        holder.owner
                    ))
                }
                Err(_) => {}
            }
        }
    };
    vec![
        Actor::new("w", dying(3, lock())),
        Actor::new("tree", dying(4, Resource::dir(&src))),
        Actor::new("r-lock", reader(5, 3, lock())),
        Actor::new("r-file", reader(6, 4, Resource::file(&file))),
    ]
}

fn lock_set(set: &Mutex<HashSet<u32>>) -> std::sync::MutexGuard<'_, HashSet<u32>> {
    set.lock().unwrap_or_else(|e| e.into_inner())
}

/// A break of a lock held by two readers breaks both: each reader keeps checking
/// and renewing, and a breaker breaks the lock meanwhile. Judged by the schedule
/// itself: once the break returned, a reader whose lease began before the break
/// was called never passes `check` again (the oracle judges the records each break
/// wrote; this judges that every reader got one). Planted bug
/// `BREAK_FIRST_READER_ONLY`: the break ends one reader and reports success, and
/// the other keeps passing.
pub(super) fn break_shared(_: &Setup) -> Vec<Actor> {
    // When the break that returned was called (model monotonic ms).
    let broke: Arc<Mutex<Option<u64>>> = Arc::new(Mutex::new(None));
    let reader = |pause: u64| {
        let broke = Arc::clone(&broke);
        move |ctx: &Ctx| {
            ctx.sleep(pause);
            let options = for_session(ctx, None, TTL_MS).shared(true);
            let options = AcquireOptions {
                ttl_ms: 3 * TTL_MS,
                ..options
            };
            let Some(mut lease) = ctx.acquire_with(&lock(), &options) else {
                return;
            };
            let acquired = ctx.store.clock().monotonic_ms();
            for _ in 0..6 {
                let broken_before = *broke.lock().unwrap_or_else(|e| e.into_inner());
                let passed = ctx.check(&lease);
                if let Some(called) = broken_before.filter(|called| acquired < *called)
                    && passed
                {
                    ctx.violate(format!(
                        "{}: shared token {} passed check after a break of the lock (called at {called} ms, after this lease began) returned",
                        ctx.name(),
                        lease.token()
                    ));
                }
                ctx.sleep(TTL_MS / 4);
                if !ctx.renew(&mut lease) {
                    return;
                }
            }
            ctx.release(&lease);
        }
    };
    vec![
        Actor::new("r1", reader(0)),
        Actor::new("r2", reader(TTL_MS / 20)),
        Actor::new("breaker", move |ctx: &Ctx| {
            ctx.sleep(TTL_MS / 2);
            let called = ctx.store.clock().monotonic_ms();
            if ctx.break_lease(&lock()).is_some() {
                *broke.lock().unwrap_or_else(|e| e.into_inner()) = Some(called);
            }
        }),
    ]
}

/// Ended participants cleaned away, and their stale handles
/// (docs/design-05-subtrees-and-shared.md §4.2): four readers of a lock are
/// admitted in turn (entries 1 to 4 of its participant index, the last one never
/// removed). `released` holds briefly, releases, and later renews through its
/// stale lease (its remembered record) and releases again; `broken` renews every
/// quarter ttl until a break of the lock ends it, and renews on after it;
/// `paused` stalls past its ttl (expired) and then renews and releases; `last`
/// holds briefly and releases. A writer waits for them all: its look removes the
/// entry and the series of every ended participant but the last, lowest record
/// first, while the stale handles renew and release. A stale renewal must never
/// be acknowledged: the oracles "two holders at one instant" (a shared tenure
/// renewed over the writer's) and "renew after it was fenced" (after the break)
/// judge it. Planted bugs `STALE_RENEWAL_REVIVES_REMOVED_SERIES` (a renewal
/// landing in an emptied series is acknowledged) and
/// `PARTICIPANT_REMOVED_NEWEST_FIRST` (the series removed newest first, the entry
/// last).
pub(super) fn shared_cleanup(_: &Setup) -> Vec<Actor> {
    let shared = |ctx: &Ctx| for_session(ctx, None, TTL_MS).shared(true);
    vec![
        Actor::new("released", move |ctx: &Ctx| {
            let Some(mut lease) = ctx.acquire_with(&lock(), &shared(ctx)) else {
                return;
            };
            ctx.sleep(TTL_MS / 5);
            ctx.release(&lease);
            ctx.sleep(TTL_MS / 4);
            if ctx.renew(&mut lease) {
                ctx.release(&lease);
            }
        }),
        Actor::new("broken", move |ctx: &Ctx| {
            ctx.sleep(TTL_MS / 40);
            let Some(mut lease) = ctx.acquire_with(&lock(), &shared(ctx)) else {
                return;
            };
            let mut failed = 0;
            for _ in 0..8 {
                ctx.sleep(TTL_MS / 6);
                if !ctx.renew(&mut lease) {
                    failed += 1;
                    if failed == 2 {
                        break;
                    }
                }
            }
            ctx.release(&lease);
        }),
        Actor::new("paused", move |ctx: &Ctx| {
            ctx.sleep(TTL_MS / 20);
            let Some(mut lease) = ctx.acquire_with(&lock(), &shared(ctx)) else {
                return;
            };
            // A suspended laptop: past its ttl, then it acts on what it has.
            ctx.sleep(TTL_MS + TTL_MS / 5);
            ctx.renew(&mut lease);
            ctx.release(&lease);
        }),
        Actor::new("last", move |ctx: &Ctx| {
            ctx.sleep(TTL_MS / 10);
            if let Some(lease) = ctx.acquire_with(&lock(), &shared(ctx)) {
                ctx.sleep(TTL_MS / 10);
                ctx.release(&lease);
            }
        }),
        Actor::new("breaker", move |ctx: &Ctx| {
            ctx.sleep(TTL_MS / 2);
            ctx.break_lease(&lock());
        }),
        Actor::new("writer", move |ctx: &Ctx| {
            ctx.sleep(TTL_MS / 8);
            if let Some(mut lease) = ctx.acquire(&lock(), TTL_MS, 3 * TTL_MS)
                && ctx.keep(&mut lease, 3)
            {
                ctx.release(&lease);
            }
        }),
    ]
}

/// `fencepost run` killed while its command runs on: a tied holder (local pid 3)
/// names its command's process group (30) in its records and is then SIGKILLed;
/// the command, still promised the lease, goes on for half a ttl until the guard
/// stops its group (the promise ends then). A tied waiter (pid 4) takes the lease
/// over only once the group is gone: the oracle's "never two holders promised at
/// one instant" holds the command's promise against it. Planted bug
/// `GROUP_IGNORED`: takeover looks at the process alone, and the waiter holds
/// while the command still writes.
pub(super) fn dead_run_group(_: &Setup) -> Vec<Actor> {
    let (running, probe) = local_processes(&[3, 30, 4]);
    let (run_probe, waiter_probe, table) = (probe(3), probe(4), Arc::clone(&running));
    vec![
        Actor::new("run", move |ctx: &Ctx| {
            let ctx = ctx.with_store(ctx.store.clone().with_liveness(run_probe));
            let options = AcquireOptions {
                ttl_ms: 4 * TTL_MS,
                ..tied(&ctx, 0)
            };
            let Some(mut lease) = ctx.acquire_with(&lock(), &options) else {
                return;
            };
            // The child's group, named in the records by a renewal at once.
            lease.tie_to_group(30);
            if !ctx.renew(&mut lease) {
                return;
            }
            ctx.sleep(TTL_MS / 4);
            // SIGKILL: `run` is gone; its command is not, and still holds.
            lock_set(&table).remove(&3);
            ctx.sleep(TTL_MS / 2);
            ctx.check(&lease);
            // The guard stops the group: the command's promise ends with it.
            ctx.die(&lease);
            lock_set(&table).remove(&30);
        }),
        Actor::new("waiter", move |ctx: &Ctx| {
            let ctx = ctx.with_store(ctx.store.clone().with_liveness(waiter_probe));
            ctx.sleep(TTL_MS / 8);
            if let Some(lease) = ctx.acquire_with(&lock(), &tied(&ctx, 3 * TTL_MS)) {
                ctx.check(&lease);
                ctx.release(&lease);
            }
        }),
    ]
}

/// `fencepost run` killed after starting its command, before naming the command's
/// process group (30) in its records: its claim says a group is to come
/// ([`fencepost::AcquireOptions::group_to_come`]), so a tied waiter (pid 4) may not
/// take it over once `run` (pid 3) is gone, only after the ttl. The command, still
/// promised the lease, goes on for half a ttl until the guard stops its group.
/// Planted bug `GROUP_TO_COME_IGNORED`: takeover looks at the process alone, and
/// the waiter holds while the command still writes.
pub(super) fn dead_run_spawning(_: &Setup) -> Vec<Actor> {
    let (running, probe) = local_processes(&[3, 30, 4]);
    let (run_probe, waiter_probe, table) = (probe(3), probe(4), Arc::clone(&running));
    vec![
        Actor::new("run", move |ctx: &Ctx| {
            let ctx = ctx.with_store(ctx.store.clone().with_liveness(run_probe));
            let options = AcquireOptions {
                ttl_ms: 2 * TTL_MS,
                ..tied(&ctx, 0)
            }
            .group_to_come(true);
            let Some(lease) = ctx.acquire_with(&lock(), &options) else {
                return;
            };
            // The command starts in group 30; SIGKILL lands before `run` names it.
            ctx.sleep(TTL_MS / 4);
            lock_set(&table).remove(&3);
            ctx.sleep(TTL_MS / 2);
            ctx.check(&lease);
            // The guard stops the group: the command's promise ends with it.
            ctx.die(&lease);
            lock_set(&table).remove(&30);
        }),
        Actor::new("waiter", move |ctx: &Ctx| {
            let ctx = ctx.with_store(ctx.store.clone().with_liveness(waiter_probe));
            ctx.sleep(TTL_MS / 8);
            if let Some(lease) = ctx.acquire_with(&lock(), &tied(&ctx, 3 * TTL_MS)) {
                ctx.check(&lease);
                ctx.release(&lease);
            }
        }),
    ]
}

/// Sets its flag when dropped: when its actor's body ends, by a crash or not.
struct SetsOnEnd(Arc<AtomicBool>);

impl Drop for SetsOnEnd {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Writer starvation with subtrees: two streams claim files below `src/` back to
/// back (each held a quarter ttl, for a ttl and a half), so a file below it is nearly
/// always held; a subtree claim of `src/` arrives meanwhile and waits one ttl. Its
/// intent keeps the streams' later claims out, so it holds within its wait —
/// while the streams still run. Judged by the schedule itself: a subtree claim
/// that times out while covered claims kept arriving was starved. Planted bug
/// `COVERED_IGNORES_INTENT`: covered claims ignore the intent and the subtree
/// claimer is starved.
pub(super) fn subtree_intent(setup: &Setup) -> Vec<Actor> {
    let src = setup.dir.join("src");
    let stream = |file: std::path::PathBuf, pause: u64| {
        move |ctx: &Ctx| {
            ctx.sleep(pause);
            for _ in 0..6 {
                if let Some(lease) = ctx.acquire(&Resource::file(&file), TTL_MS, TTL_MS) {
                    ctx.sleep(TTL_MS / 4);
                    ctx.release(&lease);
                }
            }
        }
    };
    vec![
        Actor::new("s0", stream(src.join("a.rs"), 0)),
        Actor::new("s1", stream(src.join("b.rs"), TTL_MS / 8)),
        Actor::new("tree", move |ctx: &Ctx| {
            ctx.sleep(TTL_MS / 4);
            match ctx.acquire(&Resource::dir(&src), TTL_MS, TTL_MS) {
                Some(lease) => {
                    ctx.check(&lease);
                    ctx.release(&lease);
                }
                None => ctx.violate(
                    "tree: a subtree claim waited out its whole wait (one ttl) while covered file claims kept arriving (starved)".into(),
                ),
            }
        }),
    ]
}

/// An operator's break of every claim of session `s` (`Store::break_session`, the
/// override for an agent whose CLI crashed) while `s` releases one of them and a
/// process of session `t` that waited takes it: "s-lock" claims lock `a` and
/// releases it as the first break runs, "s-keep" claims lock `b` and keeps it, "t" waits
/// for `a`; "operator" breaks session `s` twice. Its own oracle: every holder the
/// break reports broken is of session `s` (a tenure `t` began after the break
/// listed the store is never broken). Planted bug `BREAK_SESSION_UNFILTERED`.
pub(super) fn break_session(_: &Setup) -> Vec<Actor> {
    let tag = fencepost::SessionTag::of("s");
    vec![
        Actor::new("s-lock", |ctx: &Ctx| {
            let options = for_session(ctx, Some("s"), 0);
            if let Some(lease) = ctx.acquire_with(&Resource::lock("a"), &options) {
                // Released as the operator's first break runs: the break may list
                // `a` held by `s` and reach it after `t` took it.
                ctx.sleep(TTL_MS / 4);
                ctx.release(&lease);
            }
        }),
        Actor::new("s-keep", |ctx: &Ctx| {
            let options = for_session(ctx, Some("s"), 0);
            if let Some(mut lease) = ctx.acquire_with(&Resource::lock("b"), &options) {
                ctx.keep(&mut lease, 3);
            }
        }),
        Actor::new("t", |ctx: &Ctx| {
            ctx.sleep(TTL_MS / 6);
            let options = for_session(ctx, Some("t"), 2 * TTL_MS);
            if let Some(mut lease) = ctx.acquire_with(&Resource::lock("a"), &options)
                && ctx.keep(&mut lease, 2)
            {
                ctx.release(&lease);
            }
        }),
        Actor::new("operator", move |ctx: &Ctx| {
            for pause in [TTL_MS / 4, TTL_MS / 4] {
                ctx.sleep(pause);
                ctx.world.log("operator: break session s");
                match ctx.store.break_session(&tag, "operator", "agent crashed") {
                    Ok(broken) => {
                        for (resource, holder) in broken {
                            ctx.world.log(format!(
                                "operator: broke {resource} (token {}, {})",
                                holder.token, holder.owner
                            ));
                            if holder.session.as_deref() != Some(&tag) {
                                ctx.violate(format!(
                                    "a break of session s broke {resource} held by {} (token {}), not of session s",
                                    holder.owner, holder.token
                                ));
                            }
                        }
                    }
                    Err(e) => ctx.world.log(format!("operator: break -> {e}")),
                }
            }
        }),
    ]
}

/// A killed holder in another store (`Store::claim_beside`): "holder" claims a
/// file in the model store tied to its process (pid 3), renews once and is
/// SIGKILLed. "beside" claims the file in a second store, asking the model store
/// (as after a layout change), tied to pid 4 and waiting two ttls. Its own
/// oracles: it never holds while the holder lives; once it holds, the dead
/// holder's token fails `check` in the model store (the dead tenure was fenced
/// there, not passed over); and it does not wait out the dead holder's ttl when
/// the holder died a poll and more before its lease would have ended. Planted bug
/// `BESIDE_DEAD_UNFENCED` (the dead holder passed over without a fence).
pub(crate) fn dead_beside(setup: &Setup) -> Vec<Actor> {
    let file = Resource::file(setup.dir.join("dead.txt"));
    let _ = std::fs::write(setup.dir.join("dead.txt"), b"x");
    let (running, probe) = local_processes(&[3, 4]);
    let (holder_probe, beside_probe, side_probe) = (probe(3), probe(4), probe(4));
    let table = Arc::clone(&running);
    // The holder's state as "beside" judges it: (alive and holding, token, when
    // it died, when its lease ends), on the model clock.
    #[derive(Default)]
    struct Held {
        holding: bool,
        token: u64,
        died_at: Option<u64>,
        expires_at: u64,
    }
    let held: Arc<Mutex<Held>> = Arc::default();
    let judged = Arc::clone(&held);
    let holder_file = file.clone();
    vec![
        Actor::new("holder", move |ctx: &Ctx| {
            let ctx = ctx.with_store(ctx.store.clone().with_liveness(holder_probe));
            let options = for_session(&ctx, None, 0).tied_to_process(true);
            let Some(mut lease) = ctx.acquire_with(&holder_file, &options) else {
                return;
            };
            {
                let mut held = held.lock().unwrap_or_else(|e| e.into_inner());
                held.holding = true;
                held.token = lease.token();
                held.expires_at = lease.expires_at_ms();
            }
            if ctx.keep(&mut lease, 1) {
                let mut held = held.lock().unwrap_or_else(|e| e.into_inner());
                held.expires_at = lease.expires_at_ms();
                held.holding = false;
                held.died_at = Some(ctx.world.now());
                lock_set(&table).remove(&3);
                drop(held);
                ctx.die(&lease);
            } else {
                held.lock().unwrap_or_else(|e| e.into_inner()).holding = false;
            }
        }),
        Actor::new("beside", move |ctx: &Ctx| {
            ctx.sleep(TTL_MS / 6);
            let side = super::super::side::side_store(&ctx.world).with_liveness(side_probe);
            let model = ctx.store.clone().with_liveness(beside_probe);
            let options = AcquireOptions::new(TTL_MS)
                .owner("beside")
                .wait_ms(2 * TTL_MS)
                .tied_to_process(true);
            let outcome = side.claim_beside(
                std::slice::from_ref(&file),
                &options,
                || Ok(vec![model.clone()]),
                |options| {
                    Ok(match side.try_acquire(&file, options)? {
                        fencepost::TryAcquire::Acquired(lease) => Ok(vec![lease]),
                        fencepost::TryAcquire::Held(holder) => Err(holder),
                    })
                },
            );
            let now = ctx.world.now();
            let held = judged.lock().unwrap_or_else(|e| e.into_inner());
            match outcome {
                Ok(fencepost::Beside::Taken(leases)) => {
                    ctx.world
                        .log(format!("beside: holds (token {})", leases[0].token()));
                    if held.holding {
                        ctx.violate(format!(
                            "beside holds {} while the holder (token {}) lives and holds it in the other store",
                            file.target(),
                            held.token
                        ));
                    }
                    if held.token > 0 {
                        let token = held.token;
                        drop(held);
                        if matches!(ctx.store.check(&file, token), Ok(true)) {
                            ctx.violate(format!(
                                "beside holds {} while the dead holder's token {token} still passes check in its store (never fenced)",
                                file.target()
                            ));
                        }
                        let held = judged.lock().unwrap_or_else(|e| e.into_inner());
                        if let Some(died) = held.died_at
                            && died + 2 * fencepost::BESIDE_POLL_MS <= held.expires_at
                            && now >= held.expires_at
                        {
                            ctx.violate(format!(
                                "beside waited until +{now}ms, past the dead holder's lease end (+{}ms), though it died at +{died}ms",
                                held.expires_at
                            ));
                        }
                    }
                }
                Ok(fencepost::Beside::Held(holder))
                | Ok(fencepost::Beside::Elsewhere { holder, .. }) => {
                    ctx.world.log(format!("beside: held by {}", holder.owner));
                }
                Err(e) => ctx.world.log(format!("beside: error {e}")),
            }
        }),
    ]
}

/// Two claims of one file made in two stores, as after a layout change (a
/// repository initialised around the file between the two claims): "old-layout"
/// claims in the model store beside the second store, "new-layout" in the second
/// store beside the model store (`Store::claim_beside`), each twice, holding a
/// while. Their own oracle: never both hold at once. No time passes but the
/// claimers' own (no pauses), so a lease never expires while held and holding is
/// exactly the span between the grant and the release.
pub(crate) fn two_stores(setup: &Setup) -> Vec<Actor> {
    let file = Resource::file(setup.dir.join("a.txt"));
    beside_actors(file.clone(), file, false)
}

/// As [`two_stores`], but the second store does not exist until "new-layout" makes
/// it (a scheduling point of its own, before its first claim): "old-layout" lists
/// the other stores when its `claim_beside` asks for them, and finds the second
/// store only once it was made (`git init` racing a claim).
pub(crate) fn store_appears(setup: &Setup) -> Vec<Actor> {
    let file = Resource::file(setup.dir.join("a.txt"));
    beside_actors(file.clone(), file, true)
}

/// A subtree claim over a nested repository: "old-layout" claims the directory
/// `src/` in the model store, asking the second store (the store of a repository
/// nested at `src/vendor/`, which the fs locator lists for a subtree claim with
/// `stores_below`); "new-layout" claims the file src/vendor/b.rs in that store,
/// asking the model store (the store on the file's path); each twice. Never both
/// hold: the directory's claim must find the file's below it in the other store.
pub(crate) fn store_below(setup: &Setup) -> Vec<Actor> {
    let src = setup.dir.join("src");
    beside_actors(
        Resource::dir(&src),
        Resource::file(src.join("vendor/b.rs")),
        false,
    )
}

/// The two claimers of [`two_stores`], [`store_appears`] and [`store_below`]:
/// "old-layout" claims `old` in the model store beside the second store,
/// "new-layout" claims `new` in the second store beside the model store (made
/// first when `appears`).
fn beside_actors(old: Resource, new: Resource, appears: bool) -> Vec<Actor> {
    let side: Arc<std::sync::OnceLock<fencepost::Store>> = Arc::default();
    let made = Arc::new(std::sync::atomic::AtomicBool::new(!appears));
    let holding: Arc<Mutex<Option<&'static str>>> = Arc::default();
    let claimer = |name: &'static str, own_is_side: bool| {
        let file = if own_is_side {
            new.clone()
        } else {
            old.clone()
        };
        let both = format!("{} and {}", old.target(), new.target());
        let (side, holding) = (Arc::clone(&side), Arc::clone(&holding));
        let made = Arc::clone(&made);
        Actor::new(name, move |ctx: &Ctx| {
            let side = side
                .get_or_init(|| super::super::side::side_store(&ctx.world))
                .clone();
            if own_is_side && !made.load(std::sync::atomic::Ordering::SeqCst) {
                ctx.env("new-layout: the second store is made", || {
                    made.store(true, std::sync::atomic::Ordering::SeqCst);
                    Ok(())
                });
            }
            let (own, other) = if own_is_side {
                (side, ctx.store.clone())
            } else {
                (ctx.store.clone(), side)
            };
            // The other stores as a locator would list them now: the second store
            // only once it exists.
            let list = || -> fencepost::Result<Vec<fencepost::Store>> {
                if own_is_side {
                    return Ok(vec![other.clone()]);
                }
                let mut exists = false;
                ctx.env("old-layout: lists the other stores", || {
                    exists = made.load(std::sync::atomic::Ordering::SeqCst);
                    Ok(())
                });
                Ok(if exists {
                    vec![other.clone()]
                } else {
                    Vec::new()
                })
            };
            for _ in 0..2 {
                let options = AcquireOptions::new(TTL_MS).owner(name).wait_ms(TTL_MS / 2);
                let outcome =
                    own.claim_beside(std::slice::from_ref(&file), &options, &list, |options| {
                        Ok(match own.try_acquire(&file, options)? {
                            fencepost::TryAcquire::Acquired(lease) => Ok(vec![lease]),
                            fencepost::TryAcquire::Held(holder) => Err(holder),
                        })
                    });
                let lease = match outcome {
                    Ok(fencepost::Beside::Taken(mut leases)) => leases.remove(0),
                    Ok(fencepost::Beside::Held(holder)) => {
                        ctx.world
                            .log(format!("{name}: held here by {}", holder.owner));
                        continue;
                    }
                    Ok(fencepost::Beside::Elsewhere { holder, .. }) => {
                        ctx.world.log(format!(
                            "{name}: held in the other store by {}",
                            holder.owner
                        ));
                        continue;
                    }
                    Err(e) => {
                        ctx.world.log(format!("{name}: error {e}"));
                        continue;
                    }
                };
                {
                    let mut holding = holding.lock().unwrap_or_else(|e| e.into_inner());
                    if let Some(other) = *holding {
                        ctx.violate(format!(
                            "{name} and {other} both hold, each in its own store: {both}"
                        ));
                    }
                    *holding = Some(name);
                }
                ctx.world.log(format!(
                    "{name}: holds {} (token {})",
                    file.target(),
                    lease.token()
                ));
                ctx.sleep(TTL_MS / 10);
                *holding.lock().unwrap_or_else(|e| e.into_inner()) = None;
                let _ = own.release(&lease);
            }
        })
    };
    vec![claimer("old-layout", false), claimer("new-layout", true)]
}

/// A holder keeps a lock for a ttl; a waiter waits for it (three ttls, queued)
/// and its caller gives up a tenth of a ttl in (`AcquireOptions::cancel`); after
/// the holder released, a third claimant claims with no wait. The cancelled waiter
/// must not get the lock (it stops waiting within a round, and gives its place in
/// the queue back), and the third claimant must: the release names no one in line
/// for it. Planted bug `CANCEL_IGNORED` (the cancellation never read: the waiter
/// waits on and takes the lock, and the release keeps it for its turn).
pub(super) fn cancelled_wait(_: &Setup) -> Vec<Actor> {
    let gave_up = Arc::new(AtomicBool::new(false));
    let released = Arc::new(AtomicBool::new(false));
    let (gave_up_w, gave_up_c) = (Arc::clone(&gave_up), Arc::clone(&gave_up));
    let released_c = Arc::clone(&released);
    vec![
        Actor::new("holder", move |ctx: &Ctx| {
            if let Some(lease) = ctx.acquire_with(&lock(), &for_session(ctx, None, 0)) {
                ctx.sleep(TTL_MS);
                ctx.release(&lease);
            }
            released.store(true, Ordering::SeqCst);
        }),
        Actor::new("waiter", move |ctx: &Ctx| {
            ctx.sleep(TTL_MS / 20);
            let flag = Arc::clone(&gave_up_w);
            let options = for_session(ctx, None, 3 * TTL_MS)
                .cancel(fencepost::Cancel::new(move || flag.load(Ordering::SeqCst)));
            if let Some(lease) = ctx.acquire_with(&lock(), &options) {
                if gave_up_w.load(Ordering::SeqCst) {
                    ctx.violate(format!(
                        "the waiter got token {} after its caller gave up, a ttl before the \
                         lock came free",
                        lease.token()
                    ));
                }
                ctx.release(&lease);
            }
        }),
        Actor::new("caller", move |ctx: &Ctx| {
            ctx.sleep(TTL_MS / 10);
            gave_up_c.store(true, Ordering::SeqCst);
        }),
        Actor::new("third", move |ctx: &Ctx| {
            ctx.sleep(TTL_MS / 10);
            for _ in 0..100 {
                if released_c.load(Ordering::SeqCst) {
                    break;
                }
                ctx.sleep(TTL_MS / 20);
            }
            match ctx.acquire_with(&lock(), &for_session(ctx, None, 0)) {
                Some(lease) => ctx.release(&lease),
                None if released_c.load(Ordering::SeqCst) => ctx.violate(
                    "the lock, released, was refused to a claim with no wait: kept for a \
                     waiter whose caller gave up"
                        .to_string(),
                ),
                None => {}
            }
        }),
    ]
}

/// An actor that claims `resource` shared after `pause` ms and, if admitted, keeps
/// it for `renewals` keepalive periods and releases it.
fn shared_reader(name: &'static str, resource: Resource, pause: u64, renewals: usize) -> Actor {
    Actor::new(name, move |ctx: &Ctx| {
        if pause > 0 {
            ctx.sleep(pause);
        }
        let options = for_session(ctx, None, 0).shared(true);
        if let Some(mut lease) = ctx.acquire_with(&resource, &options)
            && ctx.keep(&mut lease, renewals)
        {
            ctx.release(&lease);
        }
    })
}

/// A reader holds lock `b` for one renewal; a claim of `{a, b}` all or nothing
/// waits three ttls for it; a second reader of `b` arrives while the set waits and,
/// if admitted, reads for four ttls. The set's intent on `b` must keep that reader
/// out, so the set gets both locks once the first reader is done (planted bug
/// `SET_WAITS_WITHOUT_INTENT`: the second reader is admitted and the set waits out
/// its wait; a breaker found it with a stream of readers).
pub(super) fn several_readers(_: &Setup) -> Vec<Actor> {
    let (a, b) = (Resource::lock("a"), Resource::lock("b"));
    let (b_first, b_second) = (b.clone(), b.clone());
    vec![
        shared_reader("reader", b_first, 0, 1),
        Actor::new("set", move |ctx: &Ctx| {
            ctx.sleep(TTL_MS / 20);
            let options = for_session(ctx, None, 3 * TTL_MS);
            match ctx.acquire_all(&[a.clone(), b.clone()], &options) {
                Some(leases) => {
                    for lease in &leases {
                        ctx.release(lease);
                    }
                }
                None => ctx.violate(
                    "the claim of {a, b} waited out its wait: a reader of b was admitted while \
                     it waited"
                        .to_string(),
                ),
            }
        }),
        shared_reader("late-reader", b_second, TTL_MS / 5, 12),
    ]
}

/// A reader holds the subtree `src/` for one renewal; a writer of `src/lib.rs`
/// waits three ttls for it; a second reader of `src/` arrives while the writer
/// waits and, if admitted, reads for four ttls. The writer's intent must keep that
/// reader out, so the writer gets the file once the first reader is done (planted
/// bug `READERS_IGNORE_INTENTS_BELOW`: the second reader is admitted and the writer
/// waits out its wait; a breaker found it with a stream of subtree readers).
pub(super) fn subtree_readers_writer(setup: &Setup) -> Vec<Actor> {
    let src = setup.dir.join("src");
    let file = Resource::file(src.join("lib.rs"));
    let (dir_first, dir_second) = (Resource::dir(&src), Resource::dir(&src));
    vec![
        shared_reader("reader", dir_first, 0, 1),
        Actor::new("writer", move |ctx: &Ctx| {
            ctx.sleep(TTL_MS / 20);
            match ctx.acquire_with(&file, &for_session(ctx, None, 3 * TTL_MS)) {
                Some(lease) => ctx.release(&lease),
                None => ctx.violate(
                    "the writer of src/lib.rs waited out its wait: a reader of src/ was \
                     admitted while it waited"
                        .to_string(),
                ),
            }
        }),
        shared_reader("late-reader", dir_second, TTL_MS / 5, 12),
    ]
}
