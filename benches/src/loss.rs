//! Loss notice and dead-holder handoff, through the real `fencepost` binary.
//!
//! - **Loss-notice latency**: a `fencepost run --ttl 30000` holds a lock; the bench
//!   ends its tenure from outside (release with its token, as a break or a takeover
//!   would end it) and times from that record landing to `run`'s one-line loss report
//!   on stderr. Without the keepalive's watch this is up to ttl/3 = 10 s.
//! - **Dead-holder handoff**: a `fencepost claim --hold --ttl 60000` holds a lock and
//!   is SIGKILLed; the bench times from the moment the killed process was reaped to a
//!   waiter's `try_acquire` returning the lease. Without dead-holder takeover this is
//!   the remaining ttl (about 60 s).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fencepost::{AcquireOptions, Resource, Store, TryAcquire};
use fencepost_fs::FsStore;

use crate::R;
use crate::stats::{Summary, summarize};

/// Kills and reaps a child when dropped, so a failed round leaves nothing behind.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn fencepost(bin: &Path, store: &Path) -> Command {
    let mut command = Command::new(bin);
    for name in ["FENCEPOST_STORE", "FENCEPOST_OWNER", "FENCEPOST_TOKEN"] {
        command.env_remove(name);
    }
    command.arg("--store").arg(store);
    command
}

/// The first line of `path` once a process wrote it whole (through a rename).
fn line_of(path: &Path) -> R<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            return Ok(text.trim().to_string());
        }
        if Instant::now() > deadline {
            return Err(format!("{} was never written", path.display()).into());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// `rounds` loss-notice latencies.
pub fn notice(bin: &Path, dir: &Path, rounds: usize) -> R<Summary> {
    let store_dir = dir.join("notice");
    let store = Store::new(FsStore::open(&store_dir)?);
    let mut samples = Vec::new();
    for round in 0..rounds {
        let lock = Resource::lock(format!("notice-{round}"));
        // The child reports the token: only then is the lease confirmed (ending a
        // claim that `run` has not confirmed yet just makes it claim again).
        let token_file = dir.join(format!("token-{round}"));
        let mut run = fencepost(bin, &store_dir);
        run.args([
            "run",
            "--lock",
            &lock.target(),
            "--ttl",
            "30000",
            "--grace",
            "0",
        ])
        .args([
            "--",
            "sh",
            "-c",
            r#"echo "$FENCEPOST_TOKEN" > "$0.tmp" && mv "$0.tmp" "$0"; exec sleep 60"#,
        ])
        .arg(&token_file)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
        let mut run = Reaped(run.spawn()?);
        let _token: u64 = line_of(&token_file)?
            .parse()
            .map_err(|_| "the child wrote no token")?;
        let stderr = run.0.stderr.take().ok_or("no stderr")?;
        // An operator's break: the loss `run` must notice (a token alone releases
        // nothing).
        store.break_lease(&lock, "bench", "loss-notice measurement")?;
        let ended = Instant::now();
        let mut line = String::new();
        BufReader::new(stderr).read_line(&mut line)?;
        let noticed = ended.elapsed();
        if !line.contains("lost") {
            let status = run.0.wait()?;
            return Err(format!("run reported no loss: {line:?} ({status})").into());
        }
        samples.push(noticed);
        run.0.wait()?;
    }
    Ok(summarize(samples))
}

/// `rounds` dead-holder handoff times.
pub fn handoff(bin: &Path, dir: &Path, rounds: usize) -> R<Summary> {
    let store_dir = dir.join("handoff");
    let store = Store::new(FsStore::open(&store_dir)?);
    let mut samples = Vec::new();
    for round in 0..rounds {
        let lock = Resource::lock(format!("handoff-{round}"));
        let mut hold = fencepost(bin, &store_dir);
        hold.args([
            "claim",
            "--lock",
            &lock.target(),
            "--ttl",
            "60000",
            "--hold",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
        let mut hold = Reaped(hold.spawn()?);
        let mut line = String::new();
        BufReader::new(hold.0.stdout.take().ok_or("no stdout")?).read_line(&mut line)?;
        // `claim --hold` prints the lease handle, TOKEN.SECRET.
        let dead: u64 = line
            .trim()
            .split_once('.')
            .and_then(|(token, _)| token.parse().ok())
            .ok_or_else(|| format!("no lease handle: {line:?}"))?;
        hold.0.kill()?;
        hold.0.wait()?;
        let killed = Instant::now();
        let options = AcquireOptions::new(30_000)
            .owner("successor")
            .wait_ms(120_000);
        let TryAcquire::Acquired(lease) = store.try_acquire(&lock, &options)? else {
            return Err("the dead holder was not handed over within 120 s".into());
        };
        samples.push(killed.elapsed());
        if lease.token() <= dead || store.check(&lock, dead)? {
            return Err(format!(
                "handoff broke the fence: token {} after {dead}",
                lease.token()
            )
            .into());
        }
        store.release(&lease)?;
    }
    Ok(summarize(samples))
}
