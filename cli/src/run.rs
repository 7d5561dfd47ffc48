//! `run`: hold a lease for as long as a command runs (docs/protocol.md §7).
//!
//! Acquire (waiting if asked, with the waiting line on a terminal), keep the lease
//! alive from a background thread (renewing every ttl/3 with the same token, and
//! watching it in between), spawn the child in its own process tree with the token
//! in its environment, forward termination signals to the tree, wait, release. The
//! exit code is the child's, except that a lease lost while the child ran is exit 3
//! (or `--conflict-exit-code`): the child's work was not protected, whatever it
//! reported. On a loss the child's whole tree is stopped (`--on-loss`, `--grace`),
//! so it does not go on writing unfenced.

use std::ffi::OsString;
use std::io;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fencepost::{Error, Resource};

use crate::Failure;
use crate::args::{OnLoss, RunArgs};
use crate::commands::Context;
use crate::output::{describe_error, held_refusal, human_precise, loss_reason, printable, report};
use crate::sys::{self, ProcessTree, StopOnDeath};
use crate::waiting::{self, Acquired};

/// How often a stopping tree is looked at during the grace period.
const GRACE_POLL: Duration = Duration::from_millis(20);

/// How long the command's group may outlive its first process before `run` says
/// why it has not ended.
const GROUP_WAIT_NOTICE: Duration = Duration::from_secs(1);

/// How long `run`, ending, waits for its loss line to be written.
const REPORT_WAIT: Duration = Duration::from_secs(1);

pub fn run(ctx: &Context, args: &RunArgs) -> Result<ExitCode, Failure> {
    let resource = args.target.resource();
    // clap's `requires = "lock"` on --slots is met by the target group, whichever
    // of its members is given (a new user: `run --dir src --slots 3` ran without a
    // slot, FENCEPOST_SLOT unset).
    if args.slots.is_some() && !matches!(resource, Resource::Lock(_)) {
        return Err(Failure::Error(crate::commands::slots_refusal(
            std::slice::from_ref(&resource),
        )));
    }
    let mut environment = child_environment(&resource)?;
    let conflict = args.timing.conflict_exit_code;
    // The lease lives exactly as long as this process keeps it alive.
    // Tied to this process, and to the command's group once it runs: until the
    // group is named (below), the records say one is to come, so a `run` killed
    // in between is never taken over while its command runs.
    let options = args
        .timing
        .options()
        .tied_to_process(true)
        .group_to_come(true);
    let acquired = match (args.slots, &resource) {
        (Some(slots), Resource::Lock(name)) => {
            waiting::try_acquire_slot(&ctx.store, name, slots, &options)?
        }
        _ => waiting::try_acquire(&ctx.store, &ctx.elsewhere, &resource, &options)?,
    };
    let lease = match acquired {
        Acquired::Lease(lease) => lease,
        Acquired::Held(holder, waited_ms, store) => {
            let message = match (args.slots, &resource) {
                (Some(slots), Resource::Lock(name)) => format!(
                    "all {slots} slots of {} are held; {}",
                    printable(name),
                    held_refusal(
                        &waiting::slot_in_the_way(&ctx.store, name, slots, &holder),
                        &holder,
                        args.timing.wait,
                        waited_ms,
                        store.as_deref()
                    )
                ),
                _ => held_refusal(
                    &resource,
                    &holder,
                    args.timing.wait,
                    waited_ms,
                    store.as_deref(),
                ),
            };
            return Err(Failure::Code(conflict, message));
        }
    };
    // The forwarded signals are caught from here on, first thing: one that
    // arrives before the command runs is kept and given to it as it starts, so it
    // ends and `run` releases. Installed later, after the keepalive, a SIGTERM or
    // Ctrl+C in between killed `run` with the lease held for its whole ttl (a
    // breaker: 2 of 60 runs signalled just after their claim).
    let forwarder = match sys::SignalForwarder::install() {
        Ok(forwarder) => forwarder,
        Err(error) => {
            if !lease.reentered() {
                let _ = ctx.store.release(&lease);
            }
            return Err(Failure::Error(format!(
                "cannot set up signal forwarding: {error}"
            )));
        }
    };
    pause_for_tests("FENCEPOST_TEST_PAUSE_AFTER_CLAIM_MS");
    if args.slots.is_some() {
        // The slot taken: the child learns which (FENCEPOST_SLOT).
        environment = child_environment(lease.resource())?;
    }
    let token = lease.token();
    let handle = lease.handle().to_string();
    // A lease this run re-entered (its session already held it) is left held when
    // the child ends: the session's other process still holds it.
    let reentered = lease.reentered();
    let sessioned = args.timing.session.is_some();
    let give_back = move |keepalive: fencepost::Keepalive| {
        if reentered {
            keepalive.stop();
            Ok(())
        } else {
            keepalive.release()
        }
    };

    // The loss is reported the moment the keepalive sees it, not when the child
    // ends, and the child's tree is stopped: whoever watches stderr learns at once
    // that the child's writes are no longer fenced, and the child stops making them.
    let stopper = Arc::new(Stopper::new(
        args.on_loss,
        Duration::from_millis(args.grace),
    ));
    let keepalive = {
        let stopper = Arc::clone(&stopper);
        let target = resource.target();
        let policy = describe_policy(args.on_loss, args.grace);
        ctx.store.keepalive_with(lease, move |error| {
            // The child was given the handle and released the lease itself: its
            // choice, not a loss. Not so for a lease of a session: any process
            // of the session releases it with the same proof (the one that began
            // it, as it ends; `release --session`), indistinguishable from the
            // child, and this run's command must not write on unfenced and exit 0
            // (two breakers); its child's own release ends the session's tenure
            // for all of them, and is reported the same way.
            if matches!(error, Error::Released { .. }) && !reentered && !sessioned {
                return;
            }
            // The stop first, then the line: a write to a stderr nobody reads (a
            // full pipe, which the command itself may have filled) blocks, and
            // held up the stop while a rival wrote (a breaker).
            stopper.lost();
            stopper.report(crate::in_store(format!(
                "lease on {target} lost: {}; {policy}",
                loss_reason(error)
            )));
        })
    };

    let program = &args.command[0];
    let mut command = std::process::Command::new(program);
    command
        .args(&args.command[1..])
        .env("FENCEPOST_TOKEN", token.to_string())
        // The proof of holding, so the child can renew or release its own lease.
        .env("FENCEPOST_LEASE", &handle)
        .env("FENCEPOST_STORE", &ctx.locator)
        // A nested `run` must not pass the outer resource's variables on.
        .env_remove("FENCEPOST_LOCK")
        .env_remove("FENCEPOST_SLOT")
        .env_remove("FENCEPOST_FILE")
        .env_remove("FENCEPOST_DIR")
        .env_remove("FENCEPOST_SHARED");
    for (name, value) in environment {
        command.env(name, value);
    }
    // A reader's lease: its command may read, and a claim of it to write waits for
    // every reader, this run's too (its refusals say so).
    if args.timing.shared {
        command.env("FENCEPOST_SHARED", "1");
    }
    // The child acts for the same session: its own claims re-enter this lease.
    if let Some(session) = &args.timing.session {
        command.env("FENCEPOST_SESSION", session);
    }
    // The guard that stops the command's tree if `run` dies or falls silent is
    // forked before the command, which names its group to it: a `run` killed at
    // any point after the command exists still has it stopped.
    let stop = (args.on_loss != OnLoss::Keep).then(|| StopOnDeath {
        kill_after: (args.on_loss == OnLoss::Term).then(|| Duration::from_millis(args.grace)),
        ttl: Duration::from_millis(args.timing.ttl),
    });
    let mut prepared = ProcessTree::prepare(&mut command, stop.as_ref());
    if let Some(error) = prepared.guard_error() {
        report(&format!(
            "warning: the child's process tree will not be stopped if this `fencepost run` is killed: {error}"
        ));
    }
    if stopper.is_lost() {
        // Lost before the child started: do not start it.
        prepared.abandon();
        forwarder.finish();
        let _ = give_back(keepalive);
        // The loss line, written meanwhile.
        stopper.finish();
        return Ok(ExitCode::from(conflict));
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(error) => {
            prepared.abandon();
            forwarder.finish();
            let released = give_back(keepalive);
            // The shell's codes: 127 not found, 126 found but not executable; the
            // next step differs too (a PATH fix does not help a file without `x`).
            let (code, next_step) = if error.kind() == io::ErrorKind::NotFound {
                (127, "check the command name and PATH")
            } else if error.kind() == io::ErrorKind::PermissionDenied {
                (
                    126,
                    "make it executable (chmod +x) or run it through its interpreter",
                )
            } else {
                (126, "check that it is a program this system can execute")
            };
            let mut message = format!(
                "cannot run {}: {error}; {next_step}",
                program.to_string_lossy()
            );
            if let Err(e) = released {
                message.push_str(&format!(" (and the lease was not released: {e})"));
            }
            return Err(Failure::Code(code, message));
        }
    };
    forwarder.set_child(child.id());
    pause_for_tests("FENCEPOST_TEST_PAUSE_AFTER_SPAWN_MS");
    match ProcessTree::adopt(&child, prepared) {
        Ok(tree) => {
            // The lease's holder is gone only once `run` and the child's whole
            // group are: a waiter must not take over while a killed `run`'s
            // command still runs (its guard stops it within --grace; a breaker saw
            // both commands write at once). Renewed at once, so the records say
            // so; until then they say a group is to come (the options above).
            // A renewal that finds the lease already gone (broken, taken over,
            // or released by the child) is no warning: the keepalive's watch
            // reports a loss, and a release is the child's.
            if let Some(group) = tree.group()
                && let Err(error) = keepalive.tie_to_group(group)
                && !error.is_loss()
            {
                report(&format!(
                    "warning: the lease's records do not name the child's process group yet ({}); if this `fencepost run` is killed before its next renewal, its lease is taken over only after its ttl",
                    crate::output::describe_error(&error)
                ));
            }
            stopper.adopt(tree)
        }
        Err(error) => report(&format!(
            "warning: the child's process tree cannot be stopped on a loss: {error}"
        )),
    }
    let status = child.wait();
    // The command is its whole process group, not its first process: a `sh -c`
    // wrapper ended by a forwarded Ctrl+C while the real command cleans up, or a
    // process it left running in the background, still writes. The lease is kept
    // (and signals forwarded) until the group is gone, as after a loss (a breaker:
    // a waiting rival got the lease while the command wrote on).
    stopper.wait_for_group();
    forwarder.finish();
    // A stop under way goes on until the whole tree is gone (or was killed).
    stopper.finish();

    // Stops the renewal thread (after it reported any loss), then releases.
    let released = give_back(keepalive);
    if stopper.is_lost() {
        return Ok(ExitCode::from(conflict));
    }
    match released {
        // Released by the child, through the handle it was given.
        Ok(()) | Err(Error::Released { .. }) => {}
        Err(
            error @ (Error::Superseded { .. }
            | Error::Expired { .. }
            | Error::NotHolder { .. }
            | Error::Broken { .. }),
        ) => {
            // Lost after the last look, before the release: still a loss.
            report(&crate::in_store(format!(
                "lease on {} lost: {}",
                resource.target(),
                loss_reason(&error)
            )));
            return Ok(ExitCode::from(conflict));
        }
        Err(error) => report(&format!(
            "warning: could not release {} (it expires by itself within {} ms): {}",
            resource.target(),
            args.timing.ttl,
            describe_error(&error)
        )),
    }
    let status = status.map_err(|e| {
        Failure::Error(format!(
            "cannot wait for {}: {e}",
            program.to_string_lossy()
        ))
    })?;
    Ok(sys::exit_code(status))
}

/// Test seams, in debug builds only: the variable `name` holds `run` for that many
/// milliseconds at one point, so a test can signal it there.
/// `FENCEPOST_TEST_PAUSE_AFTER_SPAWN_MS`: right after its command started, before
/// the lease names the command's group
/// (`cli/tests/run.rs::a_run_killed_before_naming_its_group_is_not_taken_over_early`);
/// `FENCEPOST_TEST_PAUSE_AFTER_CLAIM_MS`: right after its claim, before its command
/// exists (`cli/tests/run.rs::a_signal_just_after_the_claim_releases_it`).
fn pause_for_tests(name: &str) {
    #[cfg(debug_assertions)]
    if let Some(ms) = std::env::var(name).ok().and_then(|ms| ms.parse().ok()) {
        std::thread::sleep(Duration::from_millis(ms));
    }
    #[cfg(not(debug_assertions))]
    let _ = name;
}

/// What happens to the child on a loss, for the loss report.
fn describe_policy(policy: OnLoss, grace_ms: u64) -> String {
    let grace = human_precise(i64::try_from(grace_ms).unwrap_or(i64::MAX));
    match policy {
        OnLoss::Term | OnLoss::Signal if cfg!(windows) => {
            "stopping the command (its job object is terminated)".into()
        }
        OnLoss::Term => {
            format!("stopping the command (SIGTERM to its process group, SIGKILL after {grace})")
        }
        OnLoss::Signal => "sent SIGTERM to the command's process group".into(),
        OnLoss::Keep => {
            "the command keeps running (--on-loss keep); its writes are not fenced".into()
        }
    }
}

/// Stops the child's tree once the lease is lost and the tree is known, whichever
/// comes last, exactly once, on its own thread.
struct Stopper {
    policy: OnLoss,
    grace: Duration,
    tree: OnceLock<Arc<ProcessTree>>,
    lost: AtomicBool,
    started: AtomicBool,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// The loss line, written on a thread of its own: done when it was written.
    reported: Mutex<Option<std::sync::mpsc::Receiver<()>>>,
}

impl Stopper {
    fn new(policy: OnLoss, grace: Duration) -> Stopper {
        Stopper {
            policy,
            grace,
            tree: OnceLock::new(),
            lost: AtomicBool::new(false),
            started: AtomicBool::new(false),
            thread: Mutex::new(None),
            reported: Mutex::new(None),
        }
    }

    /// Writes the loss line on a thread of its own, so that a stderr nobody reads
    /// holds up neither the stop nor the keepalive; [`Stopper::finish`] waits a
    /// little for it.
    fn report(&self, line: String) {
        let (done, written) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("fencepost-report".into())
            .spawn(move || {
                report(&line);
                let _ = done.send(());
            });
        if spawned.is_ok() {
            *self.reported.lock().unwrap_or_else(|e| e.into_inner()) = Some(written);
        }
    }

    /// After the command's first process ended: waits while the rest of its group
    /// runs, unless the lease was lost (the stop sees to the group then). Says so
    /// once when the wait goes on for a while.
    fn wait_for_group(&self) {
        let Some(tree) = self.tree.get() else {
            return;
        };
        let started = Instant::now();
        let mut said = false;
        while tree.is_alive() && !self.is_lost() {
            // Only if stderr takes it now: a full pipe nobody reads blocked `run`
            // here, renewing the lease for ever after the group was gone (a
            // breaker).
            if !said && started.elapsed() >= GROUP_WAIT_NOTICE {
                said = true;
                if sys::stderr_takes_a_line() {
                    report(
                        "the command's first process has ended; its lease is kept until the rest \
                     of its process group ends too (processes it left running may still write): \
                     end them (SIGTERM to this `fencepost run` is passed on to them; a script's \
                         background processes ignore Ctrl+C), or start what should outlive \
                     the command in a process group of its own (setsid)",
                    );
                }
            }
            std::thread::sleep(GRACE_POLL);
        }
    }

    fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// The lease is lost.
    fn lost(&self) {
        self.lost.store(true, Ordering::SeqCst);
        self.start_if_ready();
    }

    /// The child's tree exists.
    fn adopt(&self, tree: ProcessTree) {
        let _ = self.tree.set(Arc::new(tree));
        self.start_if_ready();
    }

    fn start_if_ready(&self) {
        if self.policy == OnLoss::Keep || !self.is_lost() {
            return;
        }
        let Some(tree) = self.tree.get() else {
            return;
        };
        if self.started.swap(true, Ordering::SeqCst) {
            return;
        }
        let (policy, grace) = (self.policy, self.grace);
        let thread = {
            let tree = Arc::clone(tree);
            std::thread::Builder::new()
                .name("fencepost-stop".into())
                .spawn(move || stop(&tree, policy, grace))
        };
        match thread {
            Ok(thread) => {
                *self.thread.lock().unwrap_or_else(|e| e.into_inner()) = Some(thread);
            }
            Err(error) => {
                report(&format!(
                    "cannot start stopping the command: {error}; killing it"
                ));
                tree.kill();
            }
        }
    }

    /// Waits for a stop under way, then hands the terminal back; waits a little
    /// for the loss line (a stderr nobody reads must not keep `run` from ending).
    fn finish(&self) {
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
        let reported = self
            .reported
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(written) = reported {
            let _ = written.recv_timeout(REPORT_WAIT);
        }
        if let Some(tree) = self.tree.get() {
            tree.finish();
        }
    }
}

/// SIGTERM to the tree; with `term`, SIGKILL once `grace` passed and something of
/// the tree still runs.
fn stop(tree: &ProcessTree, policy: OnLoss, grace: Duration) {
    tree.terminate();
    if policy != OnLoss::Term {
        return;
    }
    let deadline = Instant::now() + grace;
    while tree.is_alive() {
        if Instant::now() >= deadline {
            tree.kill();
            return;
        }
        std::thread::sleep(GRACE_POLL);
    }
}

/// FENCEPOST_RESOURCE (`lock:NAME`, `file:/abs/path` or `dir:/abs/path`) and
/// FENCEPOST_LOCK, FENCEPOST_FILE or FENCEPOST_DIR for the child. Validates the resource (a bad name is exit 1 before
/// anything is claimed). File paths are made absolute here from the path as given,
/// without a detour through text, so a non-UTF-8 path reaches the child intact.
fn child_environment(resource: &Resource) -> Result<Vec<(&'static str, OsString)>, Failure> {
    let identity = crate::commands::identity_of(resource)?;
    let tagged = resource_variable(resource, &identity);
    Ok(match resource {
        // The resolved path (no `..`, symbolic links resolved), as `status` shows it.
        Resource::Dir(_) | Resource::File(_) => {
            let resolved = identity
                .path
                .expect("a file or directory identity has its resolved path");
            let named = if matches!(resource, Resource::Dir(_)) {
                "FENCEPOST_DIR"
            } else {
                "FENCEPOST_FILE"
            };
            vec![
                ("FENCEPOST_RESOURCE", tagged),
                (named, resolved.into_os_string()),
            ]
        }
        Resource::Lock(_) => vec![
            ("FENCEPOST_RESOURCE", tagged),
            ("FENCEPOST_LOCK", OsString::from(identity.label)),
        ],
        Resource::Slot(name, slot) => {
            let lock = crate::commands::identity_of(&Resource::lock(name.clone()))?;
            vec![
                ("FENCEPOST_RESOURCE", tagged),
                ("FENCEPOST_LOCK", OsString::from(lock.label)),
                ("FENCEPOST_SLOT", OsString::from(slot.to_string())),
            ]
        }
    })
}

/// FENCEPOST_RESOURCE for `resource` resolved as `identity`: `lock:NAME`,
/// `slot:NAME#N`, `file:/abs/path` or `dir:/abs/path` (the path exact, even where
/// it is not UTF-8). Also how a command's claim recognises the `run` it runs under.
pub(crate) fn resource_variable(resource: &Resource, identity: &fencepost::Identity) -> OsString {
    let (kind, path) = match resource {
        Resource::Lock(_) => return OsString::from(format!("lock:{}", identity.label)),
        Resource::Slot(..) => return OsString::from(format!("slot:{}", identity.label)),
        Resource::File(_) => ("file:", &identity.path),
        Resource::Dir(_) => ("dir:", &identity.path),
    };
    let mut tagged = OsString::from(kind);
    match path {
        Some(path) => tagged.push(path.as_os_str()),
        None => tagged.push(&identity.label),
    }
    tagged
}
