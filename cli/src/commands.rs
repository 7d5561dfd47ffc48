//! `claim`, `check`, `renew`, `release`, `break` and `status`: one store operation
//! each.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fencepost::{ClaimState, Error, Lease, Resource, Store};

use crate::Failure;
use crate::args::{BreakArgs, CheckArgs, ClaimArgs, Proof, ReleaseArgs, RenewArgs, StatusArgs};
use crate::output::{
    LeaseJson, VerdictJson, describe_error, emit, emit_json, held_refusal, human_precise,
    loss_reason, now_ms, printable, refusal_holder, refusal_reason, report, resource_name,
    status_table, until_ms,
};
use crate::sys;
use crate::waiting::{self, Acquired, AcquiredAll};

/// An opened store and the string that opens it again (its directory).
pub struct Context {
    pub store: Store,
    pub locator: String,
    /// The rule that picked a directory store (`None`: an etcd store).
    pub scope: Option<fencepost_fs::StoreScope>,
    /// False when the directory store does not exist (yet): it reads as empty.
    pub exists: bool,
    /// For `claim` and `run` of files and directories: the other stores on their
    /// paths, asked after the claim landed.
    pub elsewhere: crate::elsewhere::Elsewhere,
}

/// `lock:NAME` or `file:/abs/path` for `resource`, validating it first so a bad name
/// is an error (exit 1) before anything touches the store.
fn resource_label(resource: &Resource) -> Result<String, Failure> {
    let identity = identity_of(resource)?;
    Ok(resource_name(resource.kind(), &identity.label))
}

/// The resource's identity, with the CLI's own word for a directory given to
/// `--file` (the core refuses it too, without naming flags).
pub fn identity_of(resource: &Resource) -> Result<fencepost::Identity, Failure> {
    if let Resource::File(path) = resource
        && path.is_dir()
    {
        return Err(Failure::Error(format!(
            "{} is a directory, and --file claims one file; claim the directory and \
             everything below it with --dir {}, or a file in it",
            path.display(),
            path.display()
        )));
    }
    Ok(resource.identity()?)
}

pub fn claim(ctx: &Context, args: &ClaimArgs) -> Result<ExitCode, Failure> {
    let resources = args.target.resources();
    if let Some(slots) = args.slots {
        return claim_slot(ctx, args, &resources, slots);
    }
    if resources.len() > 1 {
        return claim_all(ctx, args, &resources);
    }
    let resource = resources
        .into_iter()
        .next()
        .expect("clap requires --lock or --file");
    let name = resource_label(&resource)?;
    // A held lease lives as long as this process: a waiter on this host may take it
    // over once the process is provably gone. A plain claim outlives its process.
    let options = args.timing.options().tied_to_process(args.hold);
    // A session's claim of a file it renamed since claiming it: its tenure under
    // the old name, which no longer leads here, is ended first, as the agent hook
    // does (a breaker: `claim --session` was refused by the session's own old
    // claim until its ttl). Best effort: the claim judges what is left.
    if let (Some(session), Resource::File(_)) = (&args.timing.session, &resource) {
        let _ = crate::hooks::session::end_stale_series(&ctx.store, &resource, session);
    }
    match waiting::try_acquire(&ctx.store, &ctx.elsewhere, &resource, &options)? {
        Acquired::Lease(lease) => {
            if args.hold {
                return hold(ctx, args, vec![lease]);
            }
            print_lease(ctx, args, &lease)?;
            Ok(ExitCode::SUCCESS)
        }
        Acquired::Held(holder, waited_ms, store) => {
            let message = held_refusal(
                &resource,
                &holder,
                args.timing.wait,
                waited_ms,
                store.as_deref(),
            );
            if args.json {
                emit_json(&VerdictJson {
                    ok: false,
                    resource: name,
                    token: None,
                    reason: Some("held"),
                    holder: Some(&holder),
                    message: Some(&message),
                    store: &ctx.locator,
                })?;
            }
            Err(Failure::Code(args.timing.conflict_exit_code, message))
        }
    }
}

/// Why `--slots` was refused for `resources` (not one lock): one line naming what
/// to drop.
pub fn slots_refusal(resources: &[Resource]) -> String {
    if resources.iter().all(|r| matches!(r, Resource::Lock(_))) {
        "--slots applies to one --lock; claim the others with separate commands".into()
    } else {
        "--slots applies only to a --lock (N holders of one name, such as a pool of ports); \
         a file or directory has one holder at a time: drop --slots, or claim with --shared \
         to read it beside other readers"
            .into()
    }
}

/// `claim --lock NAME --slots N`: one free slot; prints `SLOT HANDLE`.
fn claim_slot(
    ctx: &Context,
    args: &ClaimArgs,
    resources: &[Resource],
    slots: u32,
) -> Result<ExitCode, Failure> {
    let [Resource::Lock(name)] = resources else {
        return Err(Failure::Error(slots_refusal(resources)));
    };
    let resource = Resource::lock(name.clone());
    resource_label(&resource)?;
    let options = args.timing.options().tied_to_process(args.hold);
    match waiting::try_acquire_slot(&ctx.store, name, slots, &options)? {
        Acquired::Lease(lease) => {
            if args.hold {
                return hold(ctx, args, vec![lease]);
            }
            print_lease(ctx, args, &lease)?;
            Ok(ExitCode::SUCCESS)
        }
        Acquired::Held(holder, waited_ms, store) => {
            let in_the_way = waiting::slot_in_the_way(&ctx.store, name, slots, &holder);
            let message = format!(
                "all {slots} slots of {} are held; {}",
                printable(name),
                held_refusal(
                    &in_the_way,
                    &holder,
                    args.timing.wait,
                    waited_ms,
                    store.as_deref()
                )
            );
            if args.json {
                emit_json(&VerdictJson {
                    ok: false,
                    resource: resource_label(&resource)?,
                    token: None,
                    reason: Some("held"),
                    holder: Some(&holder),
                    message: Some(&message),
                    store: &ctx.locator,
                })?;
            }
            Err(Failure::Code(args.timing.conflict_exit_code, message))
        }
    }
}

/// `claim` of several resources: all or nothing; one handle per line (JSON: one
/// object with a lease per resource), in the order of [`crate::args::Targets::resources`].
fn claim_all(ctx: &Context, args: &ClaimArgs, resources: &[Resource]) -> Result<ExitCode, Failure> {
    for resource in resources {
        resource_label(resource)?;
    }
    let options = args.timing.options().tied_to_process(args.hold);
    match waiting::try_acquire_all(&ctx.store, &ctx.elsewhere, resources, &options)? {
        AcquiredAll::Leases(leases) => {
            if args.hold {
                return hold(ctx, args, leases);
            }
            print_leases(ctx, args, &leases)?;
            Ok(ExitCode::SUCCESS)
        }
        AcquiredAll::Held(resource, holder, waited_ms, store) => {
            let message = format!(
                "{}; none of the {} resources was claimed (all or nothing)",
                held_refusal(
                    &resource,
                    &holder,
                    args.timing.wait,
                    waited_ms,
                    store.as_deref()
                ),
                resources.len()
            );
            if args.json {
                emit_json(&VerdictJson {
                    ok: false,
                    resource: resource_label(&resource)?,
                    token: None,
                    reason: Some("held"),
                    holder: Some(&holder),
                    message: Some(&message),
                    store: &ctx.locator,
                })?;
            }
            Err(Failure::Code(args.timing.conflict_exit_code, message))
        }
    }
}

/// One lease as `claim` prints it; several: a handle per line, or one JSON object
/// `{"ok": true, "leases": [...], "store": ...}`.
fn print_leases(ctx: &Context, args: &ClaimArgs, leases: &[Lease]) -> Result<(), Failure> {
    if let [lease] = leases {
        return print_lease(ctx, args, lease);
    }
    if args.json {
        let leases: Vec<LeaseJson> = leases
            .iter()
            .map(|lease| LeaseJson::new(lease, &ctx.locator))
            .collect();
        emit_json(&serde_json::json!({"ok": true, "leases": leases, "store": &ctx.locator}))
    } else {
        let lines: Vec<String> = leases.iter().map(|l| l.handle().to_string()).collect();
        emit(&lines.join("\n"))
    }
}

fn print_lease(ctx: &Context, args: &ClaimArgs, lease: &Lease) -> Result<(), Failure> {
    match (args.json, lease.slot()) {
        (true, _) => emit_json(&LeaseJson::new(lease, &ctx.locator)),
        // The slot first: acting on the lease later needs it (`--slot`).
        (false, Some(slot)) => emit(&format!("{slot} {}", lease.handle())),
        (false, None) => emit(&lease.handle().to_string()),
    }
}

/// `claim --hold`: print the handles, keep every lease alive until SIGINT or SIGTERM
/// (Ctrl+C), then release them. A loss meanwhile is reported at once and ends the
/// hold with the conflict exit code.
fn hold(ctx: &Context, args: &ClaimArgs, leases: Vec<Lease>) -> Result<ExitCode, Failure> {
    // Catch the signals before anyone can learn the token and act on it.
    let mut termination = match sys::Termination::install() {
        Ok(termination) => termination,
        Err(error) => {
            for lease in leases.iter().filter(|lease| !lease.reentered()) {
                let _ = ctx.store.release(lease);
            }
            return Err(Failure::Error(format!(
                "cannot catch termination signals for --hold: {error}; nothing is held"
            )));
        }
    };
    // `ended` stops the wait: on a loss, or when a lease was released through its
    // handle (by another process of the holder), which ends the hold without a loss.
    let ended = Arc::new(AtomicBool::new(false));
    let lost = Arc::new(AtomicBool::new(false));
    let kept: Vec<(String, bool, fencepost::Keepalive)> = leases
        .iter()
        .map(|lease| {
            let (ended, lost) = (Arc::clone(&ended), Arc::clone(&lost));
            let target = lease.resource().target();
            let keepalive = ctx.store.keepalive_with(lease.clone(), {
                let target = target.clone();
                move |error| {
                    if !matches!(error, Error::Released { .. }) {
                        report(&crate::in_store(format!(
                            "lease on {target} lost: {}",
                            loss_reason(error)
                        )));
                        lost.store(true, Ordering::SeqCst);
                    }
                    ended.store(true, Ordering::SeqCst);
                }
            });
            (target, lease.reentered(), keepalive)
        })
        .collect();
    // A lease the hold re-entered (its session already held it) is left held: the
    // session's other process still holds it.
    let give_back = |reentered: bool, keepalive: fencepost::Keepalive| {
        if reentered {
            keepalive.stop();
            Ok(())
        } else {
            keepalive.release()
        }
    };
    if let Err(failure) = print_leases(ctx, args, &leases) {
        // Nobody learned the tokens: give the leases back.
        for (_, reentered, keepalive) in kept {
            let _ = give_back(reentered, keepalive);
        }
        return Err(failure);
    }
    termination.wait(&ended, Duration::from_millis(20));
    let mut code = ExitCode::SUCCESS;
    let mut failure = None;
    for (target, reentered, keepalive) in kept {
        match give_back(reentered, keepalive) {
            Ok(()) | Err(Error::Released { .. }) => {}
            Err(
                error @ (Error::Superseded { .. }
                | Error::Expired { .. }
                | Error::NotHolder { .. }
                | Error::Broken { .. }),
            ) => {
                if !lost.load(Ordering::SeqCst) {
                    report(&crate::in_store(format!(
                        "lease on {target} lost: {}",
                        loss_reason(&error)
                    )));
                }
                code = ExitCode::from(args.timing.conflict_exit_code);
            }
            Err(error) => {
                failure.get_or_insert(Failure::Error(format!(
                    "could not release {target} (it expires by itself within {} ms): {}",
                    args.timing.ttl,
                    describe_error(&error)
                )));
            }
        }
    }
    if lost.load(Ordering::SeqCst) {
        return Ok(ExitCode::from(args.timing.conflict_exit_code));
    }
    match failure {
        Some(failure) => Err(failure),
        None => Ok(code),
    }
}

pub fn check(ctx: &Context, args: &CheckArgs) -> Result<ExitCode, Failure> {
    let resource = args.target.resource();
    let name = resource_label(&resource)?;
    let token = args.token.number;
    // A whole handle names a tenure: its secret must be the current tenure's too.
    let tenure = |store: &Store| match &args.token.handle {
        Some(handle) => store.resume(&resource, handle).is_ok(),
        None => true,
    };
    let current = ctx.store.check(&resource, token)?;
    let mut passes = current && tenure(&ctx.store);
    // The number is current here, but the handle is another tenure's.
    let mut foreign = current && !passes;
    let mut at = ctx.locator.clone();
    let mut stranded = None;
    // Current in a store named by --store or FENCEPOST_STORE (as `run` hands its
    // child), while the store the layout picks holds the file too: a second
    // holder, refused as on the located path (a breaker: a `run` child's checks
    // passed beside the holder the plain path named).
    if passes && let Some((layout, holder)) = layout_holder(ctx, &resource) {
        passes = false;
        stranded = Some((ctx.locator.clone(), layout, holder));
    }
    if !passes
        && stranded.is_none()
        && let Some((other, locator)) = current_elsewhere(ctx, &resource, token, &tenure)
    {
        foreign = false;
        // Current in the store it was claimed in before the layout changed: it
        // passes there while the store the layout picks now has no holder of its
        // own (a claim there would meet it); beside one, it is a second holder.
        match ctx.store.holder(&resource)? {
            None => {
                passes = other.check(&resource, token)? && tenure(&other);
                at = locator;
            }
            Some(holder) => stranded = Some((locator, ctx.locator.clone(), holder)),
        }
    }
    let message = (!passes).then(|| match &stranded {
        Some((current_in, layout, holder)) => format!(
            "token {token} of {} is current in {}, but the location rule puts its claims in {}, \
             where it is held by {}. Two holders (the layout changed since one of the claims, or \
             one was made through --store): the lease of token {token} in {} should stop \
             writing and be released",
            resource.target(),
            printable(current_in),
            printable(layout),
            crate::output::describe_holder(holder),
            printable(current_in)
        ),
        None if foreign => format!(
            "token {token} is current for {}, but this handle's secret is not its tenure's: \
             a handle of another tenure (one claimed in another store, or of another \
             resource); pass the handle its claim printed, or the bare token",
            resource.target()
        ),
        None => format!(
            "token {} is not current for {}: {}",
            token,
            resource.target(),
            why_not_current(ctx, &resource, token)
        ),
    });
    if args.json {
        emit_json(&VerdictJson {
            ok: passes,
            resource: name,
            token: Some(token),
            reason: (!passes).then_some("stale"),
            holder: None,
            message: message.as_deref(),
            store: &at,
        })?;
    }
    match message {
        None => Ok(ExitCode::SUCCESS),
        Some(message) => Err(Failure::Refused(message)),
    }
}

/// Best-effort explanation of why `token` does not hold `resource`, from what
/// `status` shows, so the message and `status` agree.
fn why_not_current(ctx: &Context, resource: &Resource, token: u64) -> String {
    let store = &ctx.store;
    let Ok(identity) = resource.identity() else {
        return "the resource is invalid".into();
    };
    let key = identity.key;
    let entries = store.key_status().ok().unwrap_or_default();
    // Held by readers only: `check` judges exclusive tokens, so a shared token
    // never passes it (both a new user and a breaker were told "it has never been
    // claimed" of a resource `status` showed held shared).
    // Its row in `status` when it has shared tenures (held, or how the last one
    // ended), read once.
    let shared_row = (!entries.iter().any(|e| e.key == key && e.live))
        .then(|| store.status().ok())
        .flatten()
        .unwrap_or_default()
        .into_iter()
        .find(|e| {
            e.label == identity.label
                && ((e.live && !e.shared.is_empty()) || e.key.as_str().starts_with("shares-"))
        });
    if let Some(readers) = shared_row.as_ref().filter(|row| row.live) {
        return format!(
            "it is held shared (by {}), and check passes exclusive tokens only; a shared lease shows in `fencepost status`, and its holder renews it with its handle",
            crate::output::printable(&readers.shared.join(", "))
        );
    }
    let entry = entries.iter().find(|e| e.key == key).cloned();
    let Some(entry) = entry else {
        // This link was never claimed, but the file is, through another hard link
        // (a new user was told "it has never been claimed").
        if let Some(file_id) = &identity.file_id
            && let Some(holder) = entries.iter().find(|e| e.key == *file_id && e.live)
        {
            return format!(
                "this link has no claim of its own, and the same file is held through another link, {}, by {} (token {}, expires in {}); a token passes only for the link its claim named",
                printable(&holder.label),
                printable(&holder.who()),
                holder.token,
                human_precise(until_ms(holder.expires_at_ms, now_ms()))
            );
        }
        // A lock claimed only in slots: its handles act with --slot (a new user
        // passed a slot's handle without it and was told to claim it first).
        if let Resource::Lock(name) = resource {
            let slot_of = |e: &fencepost::StatusEntry| {
                e.resource
                    .strip_prefix("slot:")
                    .and_then(|slot| slot.rsplit_once('#'))
                    .is_some_and(|(lock, _)| lock == name)
            };
            if store
                .key_status()
                .is_ok_and(|entries| entries.iter().any(slot_of))
            {
                return format!(
                    "{name} is claimed in slots (claim --slots): a slot's handle acts with --slot N, the number claim printed before it"
                );
            }
        }
        // Held shared only, every reader gone since: `status` shows how the last
        // one ended (a new user was told "it has never been claimed" of a shared
        // token just released).
        if let Some(ended) = shared_row.filter(|row| !row.live) {
            return format!(
                "it was only ever held shared, and check passes exclusive tokens only; its last reader, {}, {} (token {}; `fencepost status` shows it)",
                printable(&ended.owner),
                match ended.state {
                    fencepost::ClaimState::Broken => "was broken",
                    fencepost::ClaimState::Released => "released it",
                    _ => "let it expire",
                },
                ended.token
            );
        }
        // The file was claimed through another hard link, and that claim ended:
        // this link itself never was.
        if let Some(file_id) = &identity.file_id
            && let Some(ended) = entries.iter().find(|e| e.key == *file_id)
        {
            // Its token as that link's own row shows it (the file id numbers its
            // series apart).
            let token = entries
                .iter()
                .find(|e| e.key.as_str().starts_with("file-") && e.label == ended.label)
                .map(|row| format!(" (token {})", row.token))
                .unwrap_or_default();
            return format!(
                "this link has never been claimed itself; the same file was claimed through another link, {}, and that claim has ended{token}; a token passes only for the link its claim named",
                printable(&ended.label),
            );
        }
        return format!("it has never been claimed in the store {}", ctx.locator);
    };
    // The same file held through another hard link: the rival's row in `status` is
    // its own link's path, holding this file's file-id series (issue 19: `check`
    // said "renewed or claimed again meanwhile" while `status` showed it held).
    let through_another_link = identity.file_id.as_ref().and_then(|file_id| {
        let rows = store.key_status().ok()?;
        let rival = rows
            .iter()
            .find(|e| e.key == *file_id && e.live && e.label != entry.label)?;
        // Show the rival as `status` does: its own link's row, with its token.
        let shown = rows
            .iter()
            .find(|e| e.key.as_str().starts_with("file-") && e.live && e.label == rival.label)
            .unwrap_or(rival);
        Some(format!(
            "the same file is held through another link, {}, by {} (pid {}, token {}, \
             expires in {}); a lease on one link no longer covers the file",
            printable(&shown.label),
            printable(&shown.who()),
            shown.pid,
            shown.token,
            human_precise(until_ms(shown.expires_at_ms, now_ms()))
        ))
    });
    if let Some(message) = through_another_link.filter(|_| entry.token == token) {
        return message;
    }
    // Broken through another hard link: the break ended the tenure in the file's
    // file-id series alone, so its own path row still reads held (a new user was
    // told "renewed or claimed again meanwhile").
    let broken_elsewhere = identity.file_id.as_ref().and_then(|file_id| {
        entries.iter().find(|e| {
            e.key == *file_id
                && e.state == ClaimState::Broken
                && (&e.label, &e.owner, e.pid) == (&entry.label, &entry.owner, entry.pid)
        })
    });
    if let Some(broken) = broken_elsewhere.filter(|_| entry.token == token) {
        return match &broken.broken {
            Some(note) => format!(
                "its lease was {} (through another link to the same file)",
                printable(&note.to_string())
            ),
            None => "its lease was broken through another link to the same file".into(),
        };
    }
    // Written around through another name of the file (a hard link of it, or of
    // the file that replaced it) by a claim that has ended since: the path row
    // still reads held (a breaker was told "renewed or claimed again meanwhile").
    let written_around = identity.file_id.as_ref().and_then(|file_id| {
        entries.iter().find(|e| {
            e.key == *file_id
                && (&e.label, &e.owner, e.pid) != (&entry.label, &entry.owner, entry.pid)
        })
    });
    if let Some(rival) =
        written_around.filter(|_| entry.token == token && entry.state == ClaimState::Held)
    {
        return format!(
            "its lease was written around: the same file was claimed through another name, {}, by {} while the lease held it, so this token never passes again; claim the file again for a new token",
            printable(&rival.label),
            printable(&rival.who())
        );
    }
    // A name on the path became a symbolic link after a claim through it: that
    // claim lives under the key the path had before, and a bare token passes for
    // neither through this spelling (a breaker: both holders' checks passed).
    let before_link = resource
        .keys_before_links(&key)
        .into_iter()
        .find_map(|before| entries.iter().find(|e| e.key == before && e.live));
    if let Some(other) =
        before_link.filter(|_| entry.token == token && entry.state == ClaimState::Held)
    {
        return format!(
            "a name on this path became a symbolic link after {} claimed the path through \
             it as {} (pid {}, token {}, expires in {}), and {} is claimed where it leads \
             now, so the path names two claimed files and a token passes for neither \
             through it; `fencepost status` shows both: ask the human to sort out the two \
             claims",
            printable(&other.who()),
            printable(&other.label),
            other.pid,
            other.token,
            human_precise(until_ms(other.expires_at_ms, now_ms())),
            printable(&entry.label),
        );
    }
    let now = now_ms();
    let ago = |at| human_precise(-until_ms(at, now));
    match entry.state {
        ClaimState::Held if entry.token != token => format!(
            "it is held by {} (pid {}, token {}, expires in {})",
            printable(&entry.who()),
            entry.pid,
            entry.token,
            human_precise(until_ms(entry.expires_at_ms, now))
        ),
        ClaimState::Held => "it was renewed or claimed again meanwhile".into(),
        ClaimState::Expired if entry.token == token => {
            format!("its lease expired {} ago", ago(entry.expires_at_ms))
        }
        ClaimState::Released if entry.token == token => "its lease was released".into(),
        ClaimState::Broken if entry.token == token => match &entry.broken {
            Some(note) => format!("its lease was {}", printable(&note.to_string())),
            None => "its lease was broken".into(),
        },
        ClaimState::Unreadable => "the newest record is unreadable".into(),
        // Tokens start at 1 (a new user: token 0 was "superseded by token 5").
        _ if token == 0 => "no lease has token 0: tokens start at 1".into(),
        _ if token > entry.token => format!(
            "no lease with that token was granted (the newest token is {})",
            entry.token
        ),
        _ => format!("it was superseded by token {}", entry.token),
    }
}

pub fn renew(ctx: &Context, args: &RenewArgs) -> Result<ExitCode, Failure> {
    let resource = args.target.resource();
    let name = resource_label(&resource)?;
    let proof = given(&args.handle, &args.session)?;
    let token = proof.token();
    let mut at = ctx.locator.clone();
    let renew_in = |store: &Store, mut lease: Lease| {
        if let Some(ttl) = args.ttl {
            lease.set_ttl_ms(ttl)?;
        }
        store.renew(&mut lease)?;
        Ok(lease)
    };
    let renewed = match resume(ctx, &resource, &proof) {
        Err(error @ Error::NotHolder { .. }) => match resume_elsewhere(ctx, &resource, &proof)? {
            // Renewed where it was claimed only while the store the layout picks
            // now has no holder of its own: beside one, it is a second holder.
            Some((other, locator, lease)) => match ctx.store.holder(&resource)? {
                None => {
                    at = locator;
                    renew_in(&other, lease)
                }
                Some(holder) => {
                    return Err(Failure::Refused(format!(
                        "token {token} holds {} in {}, but the location rule puts its claims \
                         in {}, where it is held by {}. Two holders (the layout changed since \
                         one of the claims, or one was made through --store): this lease was \
                         not renewed; stop writing under it and release it (`fencepost \
                         release` with this handle finds it there)",
                        resource.target(),
                        printable(&locator),
                        ctx.locator,
                        crate::output::describe_holder(&holder)
                    )));
                }
            },
            None => Err(error),
        },
        resumed => {
            if resumed.is_ok()
                && let Some((locator, holder)) = layout_holder(ctx, &resource)
            {
                return Err(Failure::Refused(format!(
                    "token {token} holds {} in the store named by --store or FENCEPOST_STORE, \
                     {}, but the location rule puts its claims in {locator}, where it is held \
                     by {}. Two holders (the layout changed since one of the claims, or one was \
                     made through --store): this lease was not renewed; stop writing under it \
                     and release it",
                    resource.target(),
                    printable(&ctx.locator),
                    crate::output::describe_holder(&holder)
                )));
            }
            resumed.and_then(|lease| renew_in(&ctx.store, lease))
        }
    };
    match renewed {
        Ok(lease) => {
            if args.json {
                emit_json(&LeaseJson::new(&lease, &at))?;
            } else {
                emit(&lease.handle().to_string())?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => Err(refuse(
            ctx,
            args.json,
            (name, &resource, token),
            Some(&proof),
            error,
        )),
    }
}

pub fn release(ctx: &Context, args: &ReleaseArgs) -> Result<ExitCode, Failure> {
    let resource = args.target.resource();
    let name = resource_label(&resource)?;
    let proof = given(&args.handle, &args.session)?;
    let mut token = proof.token();
    let mut at = ctx.locator.clone();
    let mut expired_at_ms = None;
    let mut release_in = |store: &Store, lease: Lease| {
        token = lease.token();
        let expires_at_ms = lease.expires_at_ms();
        store.release(&lease)?;
        expired_at_ms = (expires_at_ms <= now_ms()).then_some(expires_at_ms);
        Ok(())
    };
    let released = match resume(ctx, &resource, &proof) {
        // Ending a lease is always safe, in whichever store it was claimed.
        Err(error @ Error::NotHolder { .. }) => match resume_elsewhere(ctx, &resource, &proof)? {
            Some((other, locator, lease)) => {
                at = locator;
                release_in(&other, lease)
            }
            None => Err(error),
        },
        resumed => resumed.and_then(|lease| release_in(&ctx.store, lease)),
    };
    match released {
        Ok(()) => {
            // Released, since nobody took it meanwhile; but writes made after it
            // expired were not protected by it, and its holder should know.
            if let Some(expired) = expired_at_ms {
                crate::output::report(&format!(
                    "released token {token} of {}, but its lease had expired at {} ({} before \
                     this release): what was written under it since then was not protected",
                    resource.target(),
                    fencepost::utc_timestamp(expired),
                    human_precise(-until_ms(expired, now_ms()))
                ));
            }
            if at != ctx.locator {
                crate::output::report(&format!(
                    "released token {token} of {} in {}, the store it was claimed in before the \
                     layout around it changed",
                    resource.target(),
                    printable(&at)
                ));
            }
            if args.json {
                emit_json(&VerdictJson {
                    ok: true,
                    resource: name,
                    token: Some(token),
                    reason: None,
                    holder: None,
                    message: None,
                    store: &at,
                })?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => Err(refuse(
            ctx,
            args.json,
            (name, &resource, token),
            Some(&proof),
            error,
        )),
    }
}

/// The handle, or else the session, `renew` or `release` acts with.
fn given(handle: &Option<Proof>, session: &Option<String>) -> Result<Proof, Failure> {
    Proof::given(handle, session).ok_or_else(|| {
        Failure::Error(
            "no lease handle given; pass the handle `claim` printed (TOKEN.SECRET), or \
             --session ID for a lease claimed with --session"
                .into(),
        )
    })
}

/// The lease `proof` stands for. A bare token is refused as not the holder, with
/// the live holder (if any) named, so the message can say what to do instead.
fn resume(ctx: &Context, resource: &Resource, proof: &Proof) -> Result<fencepost::Lease, Error> {
    match proof {
        Proof::Handle(handle) => ctx.store.resume(resource, handle),
        Proof::Session(session) => ctx.store.resume_session(resource, session),
        Proof::TokenOnly(token) => Err(Error::NotHolder {
            label: resource.target(),
            token: *token,
            newest: ctx.store.holder(resource)?.map(Box::new),
        }),
    }
}

/// The lease `proof` stands for in another store on the resource's path than
/// `ctx`'s (claimed there before the layout around it changed, and not followed
/// there by the location rule since: a store moved away and back leaves claims in
/// both): that store, its locator, and the lease. `None` for a bare token, or when
/// no other store holds it.
fn resume_elsewhere(
    ctx: &Context,
    resource: &Resource,
    proof: &Proof,
) -> Result<Option<(Store, String, Lease)>, Failure> {
    if matches!(proof, Proof::TokenOnly(_)) {
        return Ok(None);
    }
    // Best effort: other stores that cannot be listed leave the located store's
    // own answer standing.
    for other in ctx.elsewhere.list().unwrap_or_default() {
        let resumed = match proof {
            Proof::Handle(handle) => other.resume(resource, handle),
            Proof::Session(session) => other.resume_session(resource, session),
            Proof::TokenOnly(_) => continue,
        };
        if let Ok(lease) = resumed {
            let locator = other.backend().locator();
            return Ok(Some((other, locator, lease)));
        }
    }
    Ok(None)
}

/// For a file or directory in a store named by `--store` or `FENCEPOST_STORE`:
/// the store the location rule picks for it, when that is another store and holds
/// a live claim of it — whose holder is then a second one beside the named
/// store's. `None` otherwise (best effort: a store that cannot be read holds none).
fn layout_holder(ctx: &Context, resource: &Resource) -> Option<(String, fencepost::Holder)> {
    if ctx.scope != Some(fencepost_fs::StoreScope::Explicit)
        || !matches!(resource, Resource::File(_) | Resource::Dir(_))
    {
        return None;
    }
    let cwd = std::env::current_dir().ok()?;
    let location = fencepost_fs::locate_store(None, Some(resource), &cwd).ok()?;
    let named = fencepost_fs::store_identity(std::path::Path::new(&ctx.locator));
    if fencepost_fs::store_identity(&location.path) == named {
        return None;
    }
    let store = Store::new(fencepost_fs::FsStore::open_existing(&location.path).ok()?);
    let holder = store.holder(resource).ok()??;
    Some((location.path.display().to_string(), holder))
}

/// Another store on the resource's path than `ctx`'s where `token` is the
/// current token of `resource` (of the tenure `tenure` accepts), and its locator
/// (best effort: a store that cannot be read is not one).
fn current_elsewhere(
    ctx: &Context,
    resource: &Resource,
    token: u64,
    tenure: &dyn Fn(&Store) -> bool,
) -> Option<(Store, String)> {
    for other in ctx.elsewhere.list().unwrap_or_default() {
        if other.check(resource, token).unwrap_or(false) && tenure(&other) {
            let locator = other.backend().locator();
            return Some((other, locator));
        }
    }
    None
}

pub fn break_lease(ctx: &Context, args: &BreakArgs) -> Result<ExitCode, Failure> {
    if let Some(session) = &args.session {
        return break_session(ctx, args, session);
    }
    let resource = args.target.resource();
    let name = resource_label(&resource)?;
    let by = breaker(&args.owner);
    match ctx.store.break_lease(&resource, &by, &args.reason) {
        Ok(holder) => {
            // Readers (`Store::readers_in_way` names them "… (shared)"): their
            // handles are told at their next renew or check, but a shared token is
            // no exclusive one, so nothing is promised about the bare token or the
            // next claim's (a breaker: the next exclusive claim got token 1 too).
            let message = if holder.owner.ends_with("(shared)") {
                format!(
                    "broke the shared leases of {} on {name} (token {}); each is told why at its next renew or check with its handle",
                    printable(&holder.who()),
                    holder.token,
                )
            } else {
                // Broken through another hard link: the lease was on the link its
                // holder claimed, named first.
                let on = match holder.in_the_way.as_deref() {
                    Some(link) => format!(
                        "{} (through {name}, another link to the same file)",
                        resource_label(link).unwrap_or_else(|_| link.target())
                    ),
                    None => name.clone(),
                };
                format!(
                    "broke the lease of {} on {on} (token {}, pid {}); that token never passes again, its holder is told why at its next renew, check or write, and the next claim gets a higher token",
                    printable(&holder.who()),
                    holder.token,
                    holder.pid
                )
            };
            if args.json {
                emit_json(&VerdictJson {
                    ok: true,
                    resource: name,
                    token: Some(holder.token),
                    reason: None,
                    holder: Some(&holder),
                    message: Some(&message),
                    store: &ctx.locator,
                })?;
            } else {
                emit(&message)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(error @ Error::NotHeld { .. }) => {
            Err(refuse(ctx, args.json, (name, &resource, 0), None, error))
        }
        Err(error) => Err(Failure::from(error)),
    }
}

/// `break --session TAG|ID`: every lease of the session in the store. The text is
/// taken for a tag as `status` shows it, and then for a session id.
fn break_session(ctx: &Context, args: &BreakArgs, session: &str) -> Result<ExitCode, Failure> {
    let by = breaker(&args.owner);
    let as_id = fencepost::check_session(session).map(|()| fencepost::SessionTag::of(session));
    let tags: Vec<fencepost::SessionTag> = match (fencepost::SessionTag::parse(session), as_id) {
        // Neither a tag nor a session id (empty, control characters): bad input.
        (None, Err(error)) => return Err(Failure::from(error)),
        (tag, id) => tag.into_iter().chain(id.ok()).collect(),
    };
    // An agent hook's session is `AGENT:ID`; a human knows the agent's own id (a new
    // user: `break --session <uuid>` found nothing). Tried after the id as given.
    let hook_tags = (!session.contains(':'))
        .then(|| {
            crate::args::AgentName::ALL
                .map(|agent| fencepost::SessionTag::of(&format!("{}:{session}", agent.name())))
        })
        .into_iter()
        .flatten()
        .filter(|_| fencepost::check_session(session).is_ok());
    let tags: Vec<fencepost::SessionTag> = tags.into_iter().chain(hook_tags).collect();
    let mut outcome = Err(Error::NotHeld {
        label: format!("session {}", printable(session)),
    });
    for tag in &tags {
        outcome = ctx.store.break_session(tag, &by, &args.reason);
        if !matches!(outcome, Err(Error::NotHeld { .. })) {
            break;
        }
    }
    let broken = match outcome {
        Ok(broken) => broken,
        Err(Error::NotHeld { .. }) => {
            let message = format!(
                "session {} holds no live lease in the store {}; nothing was broken (`fencepost status` shows each lease's session tag; an agent hook's session id is AGENT:ID, such as claude-code:ID; a session's claims in another store are broken there, with --store)",
                printable(session),
                printable(&ctx.locator)
            );
            if args.json {
                emit_json(&VerdictJson {
                    ok: false,
                    resource: format!("session:{}", printable(session)),
                    token: None,
                    reason: Some("not_held"),
                    holder: None,
                    message: Some(&message),
                    store: &ctx.locator,
                })?;
                return Ok(ExitCode::from(3));
            }
            return Err(Failure::Refused(message));
        }
        Err(error) => return Err(Failure::from(error)),
    };
    let each: Vec<String> = broken
        .iter()
        .map(|(resource, holder)| {
            format!(
                "{} (token {}, {})",
                printable(resource),
                holder.token,
                printable(&holder.owner)
            )
        })
        .collect();
    let message = format!(
        "broke {} lease{} of session {}: {}; each token never passes again, each holder is told why at its next renew, check or write, and the next claim of each gets a higher token",
        broken.len(),
        if broken.len() == 1 { "" } else { "s" },
        broken[0].1.session.as_deref().map_or("?", |t| t.as_str()),
        each.join(", ")
    );
    if args.json {
        emit_json(&serde_json::json!({
            "ok": true,
            "session": broken[0].1.session.as_deref().map(|t| t.as_str()),
            "broken": broken
                .iter()
                .map(|(resource, holder)| serde_json::json!({"resource": resource, "holder": holder}))
                .collect::<Vec<_>>(),
            "message": message,
            "store": ctx.locator,
        }))?;
    } else {
        emit(&message)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Who breaks: the owner name, and the login name when it says more (from the
/// environment: `USER`, `LOGNAME`, or `USERNAME` on Windows); none set, the user id
/// on POSIX (a new user in a container, `USER` unset, saw "broken by cli", which
/// names nobody).
fn breaker(owner: &str) -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .or_else(|_| std::env::var("USERNAME"))
        .ok()
        .filter(|u| !u.trim().is_empty() && !u.chars().any(char::is_control));
    match user {
        Some(user) if user != owner => format!("{owner} (user {user})"),
        Some(_) => owner.to_string(),
        None => match crate::sys::user_id() {
            Some(id) => format!("{owner} ({id})"),
            None => owner.to_string(),
        },
    }
}

/// Turns a failed renew or release into its exit: a refusal (3, with a JSON verdict
/// when asked) or an error (1, nothing on stdout).
/// The refusal of `renew`, `release` or `break` of `resource` (named `name`) with
/// `token`; `handle_given` when a whole handle (TOKEN.SECRET) was.
fn refuse(
    ctx: &Context,
    json: bool,
    (name, resource, token): (String, &Resource, u64),
    proof: Option<&Proof>,
    error: Error,
) -> Failure {
    let handle_given = matches!(proof, Some(Proof::Handle(_)));
    let Some(reason) = refusal_reason(&error) else {
        return Failure::from(error);
    };
    let message = match &error {
        // A whole handle whose token this series never issued: a handle of another
        // resource, not a lease that ended (a new user was told "Your lease ended:
        // stop writing").
        Error::NotHolder {
            label,
            newest: Some(holder),
            ..
        } if handle_given && token > holder.generation => format!(
            "this handle is not a lease of {label}: {label} never issued token {token} (a handle of another resource? pass the --lock, --file or --dir its claim named); nothing was changed. {label} is held by {}",
            crate::output::describe_holder(holder)
        ),
        // The holder's token with another secret: a handle of another resource
        // with the same number, or a forged one (a new user was told that a
        // handle was needed when it had given one).
        Error::NotHolder {
            label,
            newest: Some(holder),
            ..
        } if handle_given && holder.token == token => format!(
            "this handle's secret is not that of token {token} on {label} (a handle of another resource? pass the --lock, --file or --dir its claim named): {}",
            crate::output::describe_error_for(&error, resource)
        ),
        // Nobody holds it: say what the series shows (never claimed, released,
        // expired, superseded) instead of guessing (issue 19).
        Error::NotHolder { newest: None, .. } => {
            let why = why_not_current(ctx, resource, token);
            let next = if why.contains("--slot") {
                "nothing was changed"
            } else if why.starts_with("it has never been claimed")
                && let Resource::Lock(name) = resource
                && std::path::Path::new(name).exists()
            {
                // A file's path given as a lock name (a new user: `release --lock
                // src/auth.rs` with the file's handle).
                "a file of that name exists: if its claim named the file, pass it as --file"
            } else if why.starts_with("it has never been claimed") {
                // A typo in the name lands here too (a new user was told to claim
                // the misspelled lock): say where the claims that exist are listed.
                "check the name against `fencepost status`, which lists every claim in the store"
            } else {
                "claim it again for a new token"
            };
            match proof {
                // Named by the session, not by a token the user typed (a new user
                // was told "token 3 does not hold" after a second release).
                Some(Proof::Session(session)) => format!(
                    "session {}'s lease of {} (token {token}) is not current: {why}; {next}",
                    printable(session),
                    resource.target()
                ),
                _ => format!(
                    "token {token} does not hold {}: {why}; {next}",
                    resource.target()
                ),
            }
        }
        // Named by the session: say so, not "token N" the user never typed (a new
        // user's second `release --session`).
        Error::Released { label, token } => match proof {
            Some(Proof::Session(session)) => format!(
                "session {}'s lease of {label} (token {token}) was already released by its holder; nothing was changed; claim it with --session for a new lease",
                printable(session)
            ),
            _ => crate::output::describe_error_for(&error, resource),
        },
        _ => crate::output::describe_error_for(&error, resource),
    };
    if json {
        let verdict = VerdictJson {
            ok: false,
            resource: name,
            token: Some(token),
            reason: Some(reason),
            holder: refusal_holder(&error),
            message: Some(&message),
            store: &ctx.locator,
        };
        if let Err(failure) = emit_json(&verdict) {
            return failure;
        }
    }
    Failure::Refused(message)
}

pub fn status(ctx: &Context, args: &StatusArgs) -> Result<ExitCode, Failure> {
    let mut entries = ctx.store.status()?;
    let kept = kept_elsewhere(ctx)?;
    // `--held`: the rows of resources not held now are counted, not listed (a new
    // user's status listed every resource ever claimed, 44 rows after 40 commands).
    let listed = entries.len();
    if args.held {
        entries.retain(|entry| entry.live);
    }
    let not_held = listed - entries.len();
    if args.json {
        // Claims kept in another store carry its path as `store`.
        let mut values = Vec::with_capacity(entries.len());
        for entry in &entries {
            values.push(json_value(entry)?);
        }
        for (store, kept) in &kept {
            for entry in kept {
                let mut value = json_value(entry)?;
                if let serde_json::Value::Object(map) = &mut value {
                    map.insert("store".into(), store.display().to_string().into());
                }
                values.push(value);
            }
        }
        emit_json(&values)?;
        return Ok(ExitCode::SUCCESS);
    }
    let now = now_ms();
    let mut text = if entries.is_empty() && args.held && not_held > 0 {
        format!(
            "nothing held now ({not_held} {} not held, left out by --held) in {}",
            if not_held == 1 {
                "resource"
            } else {
                "resources"
            },
            store_line(ctx)
        )
    } else if entries.is_empty() {
        format!("no claims in {}", store_line(ctx))
    } else if args.held {
        format!(
            "{}\n{not_held} {} not held (released, expired or broken) left out by --held\nstore: {}",
            status_table(&entries, now),
            if not_held == 1 {
                "resource"
            } else {
                "resources"
            },
            store_line(ctx)
        )
    } else {
        format!(
            "{}\nstore: {}",
            status_table(&entries, now),
            store_line(ctx)
        )
    };
    for (store, kept) in &kept {
        text.push_str(&format!(
            "\n\nheld in another store on their path (claimed there before the layout around \
             them changed, or through --store; check, renew and release find them there):\n{}\nstore: {}",
            status_table(kept, now),
            printable(&store.display().to_string())
        ));
    }
    emit(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// For a located directory store: the live claims of its files that the location
/// rule keeps in another store (`crate::elsewhere::kept_for`).
fn kept_elsewhere(
    ctx: &Context,
) -> Result<Vec<(std::path::PathBuf, Vec<fencepost::StatusEntry>)>, Failure> {
    match ctx.scope {
        None | Some(fencepost_fs::StoreScope::Explicit) => Ok(Vec::new()),
        Some(_) => {
            let cwd = std::env::current_dir()
                .map_err(|e| Failure::Error(format!("cannot read the current directory: {e}")))?;
            crate::elsewhere::kept_for(&cwd, std::path::Path::new(&ctx.locator))
                .map_err(Failure::Error)
        }
    }
}

fn json_value(entry: &fencepost::StatusEntry) -> Result<serde_json::Value, Failure> {
    serde_json::to_value(entry)
        .map_err(|e| Failure::Error(format!("cannot encode the JSON output: {e}")))
}

/// The store `status` read, and why it is that one: `/repo/.git/fencepost (the
/// repository's store, shared by all its worktrees)`.
fn store_line(ctx: &Context) -> String {
    // Escaped as every path shown is: a newline in it would split the line (a
    // breaker).
    let locator = printable(&ctx.locator);
    match ctx.scope {
        None => locator,
        Some(_) if !ctx.exists => {
            format!("{locator} (it does not exist yet; the first claim creates it)")
        }
        Some(scope) => format!("{locator} ({scope})"),
    }
}
