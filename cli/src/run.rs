//! `run`: hold a lease for as long as a command runs (docs/protocol.md §7).
//!
//! Acquire (waiting if asked), keep the lease alive from a background thread
//! (renewing every ttl/3 with the same token), spawn the child with the token in its
//! environment, forward termination signals to it, wait, release. The exit code is
//! the child's, except that a lease lost while the child ran is exit 3: the child's
//! work was not protected, whatever it reported.

use std::ffi::OsString;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use fencepost::{Error, Resource, TryAcquire};

use crate::Failure;
use crate::args::RunArgs;
use crate::commands::Context;
use crate::output::{describe_error, held_refusal, loss_reason, report};
use crate::sys;

pub fn run(ctx: &Context, args: &RunArgs) -> Result<ExitCode, Failure> {
    let resource = args.target.resource();
    let environment = child_environment(&resource)?;
    let lease = match ctx
        .store
        .try_acquire(&resource, &args.timing.options(&ctx.owner))?
    {
        TryAcquire::Acquired(lease) => lease,
        TryAcquire::Held(holder) => {
            return Err(Failure::Refused(held_refusal(
                &resource,
                &holder,
                args.timing.wait,
            )));
        }
    };
    let token = lease.token();

    // The loss is reported the moment the renewal thread sees it, not when the
    // child ends: whoever watches stderr learns at once that the child's writes are
    // no longer fenced.
    let lost = Arc::new(AtomicBool::new(false));
    let keepalive = {
        let lost = Arc::clone(&lost);
        let target = resource.target();
        ctx.store.keepalive_with(lease, move |error| {
            lost.store(true, Ordering::SeqCst);
            report(&format!("lease on {target} lost: {}", loss_reason(error)));
        })
    };

    let forwarder = match sys::SignalForwarder::install() {
        Ok(forwarder) => forwarder,
        Err(error) => {
            let _ = keepalive.release();
            return Err(Failure::Error(format!(
                "cannot set up signal forwarding: {error}"
            )));
        }
    };
    let program = &args.command[0];
    let mut command = std::process::Command::new(program);
    command
        .args(&args.command[1..])
        .env("FENCEPOST_TOKEN", token.to_string())
        .env("FENCEPOST_STORE", &ctx.locator)
        // A nested `run` must not pass the outer resource's variables on.
        .env_remove("FENCEPOST_LOCK")
        .env_remove("FENCEPOST_FILE");
    for (name, value) in environment {
        command.env(name, value);
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(error) => {
            forwarder.finish();
            let released = keepalive.release();
            let mut message = format!(
                "cannot run {}: {error}; check the command name and PATH",
                program.to_string_lossy()
            );
            if let Err(e) = released {
                message.push_str(&format!(" (and the lease was not released: {e})"));
            }
            return Err(Failure::Error(message));
        }
    };
    forwarder.set_child(child.id());
    let status = child.wait();
    forwarder.finish();

    // Stops the renewal thread (after it reported any loss), then releases.
    let released = keepalive.release();
    if lost.load(Ordering::SeqCst) {
        return Ok(ExitCode::from(3));
    }
    match released {
        Ok(()) => {}
        Err(
            error @ (Error::Superseded { .. } | Error::Expired { .. } | Error::NotHolder { .. }),
        ) => {
            // Lost after the last renewal, before the release: still a loss.
            report(&format!(
                "lease on {} lost: {}",
                resource.target(),
                loss_reason(&error)
            ));
            return Ok(ExitCode::from(3));
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

/// FENCEPOST_RESOURCE (`lock:NAME` or `file:/abs/path`) and FENCEPOST_LOCK or
/// FENCEPOST_FILE for the child. Validates the resource (a bad name is exit 1 before
/// anything is claimed). File paths are made absolute here from the path as given,
/// without a detour through text, so a non-UTF-8 path reaches the child intact.
fn child_environment(resource: &Resource) -> Result<Vec<(&'static str, OsString)>, Failure> {
    let identity = resource.identity()?;
    Ok(match resource {
        Resource::File(path) => {
            let absolute = std::path::absolute(path).map_err(|e| {
                Failure::Error(format!("cannot make {} absolute: {e}", path.display()))
            })?;
            let mut tagged = OsString::from("file:");
            tagged.push(absolute.as_os_str());
            vec![
                ("FENCEPOST_RESOURCE", tagged),
                ("FENCEPOST_FILE", absolute.into_os_string()),
            ]
        }
        Resource::Lock(_) => vec![
            (
                "FENCEPOST_RESOURCE",
                OsString::from(format!("lock:{}", identity.label)),
            ),
            ("FENCEPOST_LOCK", OsString::from(identity.label)),
        ],
    })
}
