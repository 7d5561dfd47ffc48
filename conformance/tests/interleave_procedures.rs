//! The durable-create procedures of the fs backend, each modelled step by step with
//! POSIX power-cut semantics (docs/design-07-performance.md): the ones the backend
//! uses hold every oracle with power cuts falling between their steps (schedules
//! `power_cut_link_then_flush`, `power_cut_flush_then_link`, `power_cut_in_place`
//! in the default run, `interleave.rs`), and the planted ones, each leaving out a
//! flush the design note says is needed, are caught.

use fencepost_conformance::checker::{self, CreateProcedure};

/// Seeds explored looking for a planted procedure (the default budget).
const BUDGET: u64 = 300;

/// `base` with its procedure replaced by `planted` must fail within the budget, and
/// its shrunk decisions must replay to a violation.
fn caught(base: &str, planted: CreateProcedure) -> String {
    let mut schedule = *checker::schedule(base).expect("a schedule of that name");
    schedule.mix.procedure = planted;
    let failure = checker::explore(&schedule, 0..BUDGET)
        .expect_err("the planted procedure went unnoticed by the checker's default budget");
    eprintln!("{failure}");
    let replayed = checker::replay(&schedule, &failure.shrunk.decisions);
    assert!(
        replayed.violation.is_some(),
        "the shrunk schedule did not replay the failure"
    );
    failure.shrunk.violation.expect("a failure has a violation")
}

#[test]
fn leaving_out_the_directory_flush_is_caught() {
    // Acknowledged once the file is flushed (one journal commit on ext4, but POSIX
    // does not promise the name): a power cut loses the claim's name.
    let violation = caught(
        "power_cut_link_then_flush",
        CreateProcedure::PlantedNoDirFlush,
    );
    assert!(
        violation.contains("must survive") || violation.contains("token"),
        "{violation}"
    );
}

#[test]
fn leaving_out_the_file_flush_is_caught() {
    // Acknowledged once the directory is flushed: the name survives, its bytes not.
    let violation = caught(
        "power_cut_link_then_flush",
        CreateProcedure::PlantedNoFileFlush,
    );
    assert!(violation.contains("must survive"), "{violation}");
}

/// The procedure schedules are not vacuous: within the default budget, power cuts
/// fall between the steps of a flushed create (after its name appeared, before it
/// was acknowledged), for every procedure the backend uses.
#[test]
fn power_cuts_fall_between_the_steps_of_each_procedure() {
    for name in [
        "power_cut_link_then_flush",
        "power_cut_flush_then_link",
        "power_cut_in_place",
    ] {
        let schedule = checker::schedule(name).expect("a schedule of that name");
        let mid_create = (0..BUDGET).any(|seed| {
            let outcome = checker::run_seed(schedule, seed);
            assert!(
                outcome.violation.is_none(),
                "{name} seed {seed}: {:?}",
                outcome.violation
            );
            outcome.trace.windows(2).any(|w| {
                w[1].contains("POWER CUT")
                    && (w[0].contains(": name linked")
                        || w[0].contains(": written")
                        || w[0].contains(": file flushed"))
            })
        });
        assert!(
            mid_create,
            "{name}: no power cut fell inside a flushed create"
        );
    }
}

/// The deferred schedules defer for real: a removal handed to the model's removal
/// thread lands after another actor acted, one dies with its process or the power
/// cut, and its own actor reads it as removed meanwhile — each in some run of the
/// default budget, every run holding every oracle.
#[test]
fn deferred_removals_land_late_die_and_hide() {
    let (mut late, mut died, mut hidden) = (false, false, false);
    for name in [
        "deferred_sweep",
        "deferred_swept_recreate",
        "deferred_turns",
        "deferred_shared",
    ] {
        let schedule = checker::schedule(name).expect("a schedule of that name");
        for seed in 0..BUDGET {
            let outcome = checker::run_seed(schedule, seed);
            assert!(
                outcome.violation.is_none(),
                "{name} seed {seed}: {:?}",
                outcome.violation
            );
            let trace = &outcome.trace;
            // The actor a line is by: the field before the second colon.
            let who = |line: &str| {
                line.split(':')
                    .next()
                    .unwrap_or("")
                    .rsplit(' ')
                    .next()
                    .unwrap_or("")
                    .to_string()
            };
            for (i, line) in trace.iter().enumerate() {
                let Some(what) = line.split("hand the removal of ").nth(1) else {
                    continue;
                };
                let what = what.split(" to the removal thread").next().unwrap_or("");
                let by = who(line);
                if let Some(landed) = trace[i + 1..].iter().position(|l| {
                    who(l) == by && l.contains(&format!("the removal thread removes {what}"))
                }) {
                    late |= trace[i + 1..i + 1 + landed]
                        .iter()
                        .any(|l| who(l) != by && who(l) != "--");
                }
            }
            died |= trace.iter().any(|l| l.contains("die with the process"))
                || trace
                    .windows(2)
                    .any(|w| w[1].contains("POWER CUT") && w[0].contains("hand the removal"));
            hidden |= trace.iter().any(|l| l.contains("hidden from its handle"));
        }
    }
    assert!(late, "no deferred removal landed after another actor acted");
    assert!(died, "no deferred removal died with its process");
    assert!(hidden, "no read of a record whose removal was queued");
}
