//! The interleaving checker over every schedule (docs/interleaving-checker.md).
//! Default: a budget of seeds per schedule that keeps the whole run to seconds;
//! `FENCEPOST_SCHEDULES=N` explores N seeds per schedule. Replay one run with
//! `FENCEPOST_CHECK_REPLAY='schedule: decisions'` (printed by every failure).

use fencepost_conformance::checker::{self, SCHEDULES};

const DEFAULT_SEEDS: u64 = 60;

fn seeds() -> u64 {
    std::env::var(checker::SCHEDULES_ENV)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SEEDS)
}

#[test]
fn every_schedule_holds_every_oracle() {
    let seeds = seeds();
    let mut total = (0, 0, 0.0);
    for schedule in SCHEDULES {
        match checker::explore(schedule, 0..seeds) {
            Ok(explored) => {
                eprintln!(
                    "{:<20} {} schedules, {} decisions, {:.2}s ({:.0} schedules/s)",
                    schedule.name,
                    explored.schedules,
                    explored.decisions,
                    explored.seconds,
                    explored.schedules as f64 / explored.seconds.max(1e-9)
                );
                total.0 += explored.schedules;
                total.1 += explored.decisions;
                total.2 += explored.seconds;
            }
            Err(failure) => panic!("{failure}"),
        }
    }
    eprintln!(
        "interleaving checker: {} schedules, {} decisions in {:.2}s: {:.0} schedules/s",
        total.0,
        total.1,
        total.2,
        total.0 as f64 / total.2.max(1e-9)
    );
}

#[test]
fn replay() {
    let Ok(spec) = std::env::var(checker::REPLAY_ENV) else {
        return;
    };
    let (name, decisions) = spec.split_once(':').expect("schedule: decisions");
    let schedule = checker::schedule(name.trim()).expect("a schedule of that name");
    let decisions = checker::decode(decisions).expect("a decision list as printed");
    let outcome = checker::replay(schedule, &decisions);
    for line in &outcome.trace {
        eprintln!("  {line}");
    }
    assert!(outcome.violation.is_none(), "{:?}", outcome.violation);
}

#[test]
fn a_seed_is_one_schedule() {
    let schedule = checker::schedule("lock_handover").unwrap();
    let first = checker::run_seed(schedule, 7);
    let again = checker::run_seed(schedule, 7);
    assert_eq!(first.decisions, again.decisions);
    assert_eq!(first.trace, again.trace);
    // Replaying the recorded decisions reproduces the run exactly.
    let replayed = checker::replay(schedule, &first.decisions);
    assert_eq!(first.trace, replayed.trace);
    let other = checker::run_seed(schedule, 8);
    assert_ne!(first.decisions, other.decisions);
}
