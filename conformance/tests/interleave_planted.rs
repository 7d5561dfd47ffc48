//! The interleaving checker must catch each planted interleaving bug (feature
//! `planted-bugs` of the core) within its default budget, print a shrunk trace
//! that replays, and keep the seed that found it as a regression case. The switches
//! are process-wide, so this binary runs one bug at a time and no other test turns
//! them on.
//!
//! Not built for Windows (so not run under Wine): the checker drives the protocol over
//! its in-memory model store, so nothing here touches Windows beyond the scratch
//! paths, which the `interleave` schedules exercise under Wine; its 17 × 300 seeds
//! took 3 of the Windows job's 12 minutes there (docs/windows.md).
#![cfg(not(windows))]

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use fencepost::planted;
use fencepost_conformance::checker;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Seeds each schedule explores looking for a planted bug (the default budget).
const BUDGET: u64 = 300;

struct Planted(&'static AtomicBool);

impl Planted {
    fn on(switch: &'static AtomicBool) -> Self {
        switch.store(true, Ordering::SeqCst);
        Planted(switch)
    }
}

impl Drop for Planted {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// Explores `schedule` with `switch` on: the bug must be found within the budget,
/// the shrunk decisions must replay to a violation, the kept `seed` must still find
/// it, and with the switch off the same seed and the shrunk schedule must pass.
fn catches(switch: &'static AtomicBool, schedule: &str, seed: u64) {
    catches_within(switch, schedule, seed, BUDGET);
}

/// The kept `seed` of `schedule` finds the bug with `switch` on, and holds every
/// oracle with it off: for a bug so rare in `schedule` that exploring up to its
/// first seed would slow every test run (the survey finds it).
fn catches_at_seed(switch: &'static AtomicBool, schedule: &str, seed: u64) {
    let _guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let schedule = checker::schedule(schedule).expect("a schedule of that name");
    let planted = Planted::on(switch);
    let kept = checker::run_seed(schedule, seed);
    assert!(
        kept.violation.is_some(),
        "regression seed {seed} no longer finds the bug"
    );
    drop(planted);
    let fixed = checker::run_seed(schedule, seed);
    assert!(fixed.violation.is_none(), "{:?}", fixed.violation);
}

/// [`catches`] with a budget of `budget` seeds, for a bug whose interleaving is
/// rare (several creates in flight in one order).
fn catches_within(switch: &'static AtomicBool, schedule: &str, seed: u64, budget: u64) {
    catches_beside(switch, &[], schedule, seed, budget);
}

/// [`catches_within`], with the planted bugs `beside` on throughout, the checks
/// with `switch` off included: for a bug that another defence masks, which
/// `beside` takes away (the bug must be caught, and the protocol without that
/// defence must still hold every oracle).
fn catches_beside(
    switch: &'static AtomicBool,
    beside: &[&'static AtomicBool],
    schedule: &str,
    seed: u64,
    budget: u64,
) {
    let _guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let _beside: Vec<Planted> = beside.iter().map(|other| Planted::on(other)).collect();
    let schedule = checker::schedule(schedule).expect("a schedule of that name");
    let planted = Planted::on(switch);
    let failure = checker::explore(schedule, 0..budget)
        .expect_err("the planted bug went unnoticed by the checker's default budget");
    eprintln!("{failure}");
    let replayed = checker::replay(schedule, &failure.shrunk.decisions);
    assert!(
        replayed.violation.is_some(),
        "the shrunk schedule did not replay the failure"
    );
    // The kept seeds are found on Unix, where this runs: on Windows the scratch
    // paths are spelt otherwise, so the keys hash otherwise and a seed orders the
    // steps otherwise (under Wine the subtree schedules' kept seeds missed the bug
    // the search still found).
    let kept = checker::run_seed(schedule, seed);
    assert!(
        kept.violation.is_some(),
        "regression seed {seed} no longer finds the bug (the search found seed {})",
        failure.seed
    );
    drop(planted);
    let fixed = checker::run_seed(schedule, seed);
    assert!(fixed.violation.is_none(), "{:?}", fixed.violation);
    let fixed = checker::replay(schedule, &failure.shrunk.decisions);
    assert!(fixed.violation.is_none(), "{:?}", fixed.violation);
}

#[test]
fn catches_acquire_skipping_its_confirm_read() {
    catches(&planted::ACQUIRE_SKIPS_CONFIRM, "swept_recreate", 0);
}

#[test]
fn catches_a_sweep_that_lists_afresh() {
    catches(&planted::SWEEP_LISTS_AFRESH, "stalled_sweep", 0);
}

#[test]
fn catches_renew_without_its_post_create_check() {
    catches(&planted::RENEW_SKIPS_POST_CREATE_CHECK, "slow_renewal", 64);
}

#[test]
fn catches_a_renewal_from_the_written_record_that_trusts_its_create() {
    // The renewal without a read first: the operator's break and the next claim
    // (which sweeps the break's tombstone and the holder's record) free the
    // generation above the holder's record; its renewal lands there, below the new
    // claim, and only the confirming listing shows it.
    // Also masked by the rule that refuses a renewal into a removed series (the
    // record it renewed is no longer listed: the newer claim swept it), so that
    // rule is taken away here.
    catches_beside(
        &planted::RENEW_WRITTEN_SKIPS_CONFIRM,
        &[&planted::STALE_RENEWAL_REVIVES_REMOVED_SERIES],
        "break_race",
        17,
        BUDGET,
    );
}

#[test]
fn catches_a_late_renewal_that_reads_over_its_own_record() {
    // A renewal from the record written that lands late and is the newest must be
    // given up; handed to the read path instead, it is found live and renewed on top.
    // (It was caught at `break_renewal` seed 62 through a break tombstone that
    // landed below the top, which the oracle wrongly took to fence the tenure; the
    // revival itself hides there behind the late record it renewed on top of.)
    // Seed 383 of 400 until the look removed ended participants' series too
    // (more calls, other interleavings per seed): seed 414 since.
    catches_within(
        &planted::LATE_RENEWAL_READ_OVER_OURS,
        "shared_crash",
        414,
        500,
    );
}

#[test]
fn catches_a_torn_newest_record_judged_as_vacancy() {
    catches(&planted::TORN_NEWEST_IS_VACANCY, "torn_renewal", 5);
}

#[test]
fn catches_a_dead_holder_takeover_that_ignores_the_host() {
    catches(&planted::TAKEOVER_IGNORES_HOST, "dead_holder", 4);
}

#[test]
fn catches_a_session_claim_that_starts_a_new_tenure_over_its_own() {
    catches(&planted::SESSION_HOLDER_IS_VACANCY, "session_reentry", 6);
}

#[test]
fn catches_a_session_refused_by_its_own_tenure() {
    catches(&planted::OWN_SESSION_NO_GRACE, "session_file_race", 75);
}

#[test]
fn catches_a_give_back_over_a_siblings_renewal() {
    // Moved from 1314 when an adoption of a file id began to read the primary
    // series (one step more on that path), then from 1869 to 15597 when a loss in
    // a file's file-id series to a claim of the same name began to read the path
    // series for its message: the survey (25,000 seeds) finds it at 15597 and
    // 19843. Exploring that far would add a minute to every test run, so the kept
    // seed is replayed alone; `session_several` still explores for it.
    catches_at_seed(
        &planted::GIVE_BACK_OVER_RENEWAL,
        "session_file_reentry",
        15597,
    );
}

#[test]
fn catches_a_give_back_of_a_pair_over_a_siblings_renewal() {
    // Moved from 1153 when the set's look began to read its members' readers.
    catches_within(
        &planted::GIVE_BACK_OVER_RENEWAL,
        "session_several",
        1637,
        1700,
    );
}

#[test]
fn catches_a_race_reported_as_a_holder() {
    catches_within(
        &planted::RACE_REFUSED_AT_ONCE,
        "shared_exclusive_race",
        425,
        BUDGET * 2,
    );
}

#[test]
fn catches_a_forged_secret_accepted_as_proof_of_holding() {
    catches(&planted::PROOF_IGNORED, "forged_handle", 0);
}

#[test]
fn catches_a_stale_secret_accepted_with_the_current_token() {
    catches(&planted::PROOF_IGNORED, "stale_handle", 3);
}

#[test]
fn catches_a_break_whose_tombstone_a_power_cut_drops() {
    catches(&planted::BREAK_UNFLUSHED, "break_race", 128);
}

#[test]
fn catches_a_break_that_trusts_its_lost_create() {
    catches(&planted::BREAK_TRUSTS_LOST_CREATE, "break_renewal", 0);
}

#[test]
fn catches_a_lost_wake_up_without_the_fallback() {
    // The notified wait path: a watch made after the read that found the key held,
    // and no read again before the deadline, sleeps through a release.
    catches(&planted::WAIT_WITHOUT_FALLBACK, "notified_handover", 2);
}

#[test]
fn catches_a_turn_that_never_lapses() {
    // A named waiter that crashed or gave up keeps everyone else asleep.
    catches(&planted::TURN_NEVER_LAPSES, "turn_handover", 9);
}

#[test]
fn catches_a_named_waiter_that_honours_its_own_turn() {
    catches(&planted::TURN_FOR_NOBODY, "turn_handover", 13);
}

#[test]
fn catches_a_release_that_rings_nobody() {
    // Queued waiters sleep on their own tickets: a release that lands its
    // tombstone and rings nobody leaves the waiter it names asleep on its turn.
    catches(&planted::RELEASE_RINGS_NOBODY, "turn_handover", 0);
}

#[test]
fn catches_a_lapsed_turn_cleared_after_the_final_liveness_check() {
    // The clean-up after a lapsed turn reads and removes tickets: made after the
    // final liveness check, a slow one hands out a lease past its ttl.
    catches(
        &planted::CLEAR_LAPSED_AFTER_CONFIRM,
        "notified_handover",
        185,
    );
}

#[test]
fn catches_a_nameless_release_that_rings_nobody() {
    // A waiter that queued after the release listed the queue, and read before
    // its tombstone (naming nobody) landed, sleeps on its ticket: only a listing
    // after the tombstone finds it.
    catches(
        &planted::NAMELESS_RELEASE_RINGS_NOBODY,
        "notified_handover",
        0,
    );
}

#[test]
fn catches_a_ticket_watch_slept_on_without_reading_again() {
    // A release that listed the queue before the waiter's ticket landed names
    // nobody; if its tombstone lands before the ticket's watch is made, only a read
    // after the watch sees it. Planted on the join made before that read.
    catches(
        &planted::TICKET_WATCH_WITHOUT_REREAD,
        "notified_handover",
        13,
    );
}

#[test]
fn catches_a_waiter_that_trusts_its_ticket_without_looking() {
    // A waiter may skip looking for its ticket only on the round right after it
    // joined (its watch, made on a ticket that was there, hears a removal since);
    // one that never looks, once passed over, sleeps on a ticket nobody rings.
    catches(
        &planted::TICKET_TRUSTED_WITHOUT_LOOKING,
        "notified_handover",
        23,
    );
}

#[test]
fn catches_a_ticket_number_given_twice() {
    // A waiter passed over (its turn lapsed, the claim over it removed its
    // ticket) finds its number given to a waiter that queued after: known by its
    // number alone, that ticket is taken for its own, and it sleeps on it, rung
    // only for the other's turn. Rare: the lapse, the removal emptying the queue
    // and the new join must fall between two of its rounds.
    catches_within(&planted::TICKET_NUMBER_RESTARTS, "turn_handover", 566, 600);
}

#[test]
fn catches_a_stale_join_numbered_without_a_second_read() {
    // A join that read the key, was descheduled, and created its ticket under the
    // number of an expired ticket a release removed meanwhile; that ticket's own
    // waiter, leaving late, removes the new one. Only a second read of the key after
    // the create notices the join is stale. Rare: one seed in 3000.
    catches_within(
        &planted::TICKET_NUMBER_UNCONFIRMED,
        "turn_handover",
        1738,
        1800,
    );
}

#[test]
fn catches_a_ticket_left_behind_when_its_confirming_read_fails() {
    // The join's second read of the key fails after its ticket landed: the waiter
    // goes on ticketless, and its ticket is still queued when it releases.
    catches(
        &planted::TICKET_LEFT_ON_FAILED_CONFIRM,
        "turn_read_errors",
        18,
    );
}

#[test]
fn catches_a_torn_record_aged_by_a_reading_after_a_pause() {
    // A pause between the read that finds a create in progress and the clock
    // reading after it, counted as time the create was in progress: a create that
    // completed in the pause, quickly, and was handed out is claimed over.
    catches(&planted::TORN_AGED_AFTER_THE_READ, "torn_pause", 291);
}

#[test]
fn catches_a_break_that_trusts_its_create() {
    // A break slower than two renewals lands its tombstone on a generation they
    // created and swept: trusted, it reports a break while the holder renews on.
    catches(&planted::BREAK_SKIPS_CONFIRM, "break_swept", 64);
}

#[test]
fn catches_a_release_by_key_that_ends_another_sessions_tenure() {
    // A session's end by key (a file it renamed) that ends whatever is newest:
    // its second round lands on another session's tenure of the file.
    catches(
        &planted::SERIES_RELEASE_WITHOUT_PROOF,
        "session_end_by_key",
        0,
    );
}

#[test]
fn catches_a_dead_holder_in_another_store_passed_over_unfenced() {
    // A claim made beside another store ignores a dead holder there without
    // fencing it: the dead tenure's token still passes `check` in its store.
    catches(&planted::BESIDE_DEAD_UNFENCED, "dead_beside", 0);
}

#[test]
fn catches_a_session_break_that_breaks_another_sessions_tenure() {
    // A break of session s's claims that breaks whatever is newest in each series
    // it listed: t, which took `a` after s released it, is broken too.
    catches(&planted::BREAK_SESSION_UNFILTERED, "break_session", 13);
}

#[test]
fn catches_tickets_removed_by_a_removal_thread() {
    // Tickets removed through `remove_superseded`, which the model defers as the
    // fs backend's removal thread does: a ticket whose waiter left the queue stays
    // queued for the other processes.
    catches(&planted::TICKET_REMOVAL_DEFERRED, "deferred_turns", 3);
}

#[test]
fn catches_a_tree_check_made_only_before_claiming() {
    catches(&planted::TREE_CHECK_BEFORE_CLAIM_ONLY, "subtree_race", 13);
}

#[test]
fn catches_a_claim_beside_another_store_that_looks_before_claiming() {
    // Two claims of one file in two stores (a layout change between them), each
    // asking the other store before claiming: both look, then both claim.
    catches(&planted::ELSEWHERE_LOOKED_BEFORE_CLAIM, "two_stores", 0);
}

#[test]
fn catches_a_file_claim_that_skips_its_check_up() {
    catches(&planted::FILE_SKIPS_CHECK_UP, "subtree_race", 4);
}

#[test]
fn catches_a_subtree_claim_that_skips_its_check_down() {
    catches(&planted::SUBTREE_SKIPS_CHECK_DOWN, "subtree_race", 28);
}

#[test]
fn catches_several_resources_returned_without_checking_all_are_live() {
    catches(&planted::SEVERAL_SKIPS_ALL_LIVE, "several_resources", 0);
}

#[test]
fn catches_a_slot_claim_that_tries_one_slot_past_the_last() {
    catches(&planted::SLOT_PAST_THE_LAST, "slots", 73);
}

/// Which schedules find which planted bug, and at which first seed (a survey for
/// choosing regression seeds): `cargo test --test interleave_planted survey --
/// --ignored --nocapture`.
#[test]
#[ignore = "a survey, not a check"]
fn survey() {
    let _guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let seeds = std::env::var(checker::SCHEDULES_ENV)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(BUDGET);
    for (name, switch) in [
        ("ACQUIRE_SKIPS_CONFIRM", &planted::ACQUIRE_SKIPS_CONFIRM),
        ("SWEEP_LISTS_AFRESH", &planted::SWEEP_LISTS_AFRESH),
        (
            "RENEW_SKIPS_POST_CREATE_CHECK",
            &planted::RENEW_SKIPS_POST_CREATE_CHECK,
        ),
        (
            "RENEW_WRITTEN_SKIPS_CONFIRM",
            &planted::RENEW_WRITTEN_SKIPS_CONFIRM,
        ),
        (
            "LATE_RENEWAL_READ_OVER_OURS",
            &planted::LATE_RENEWAL_READ_OVER_OURS,
        ),
        ("TORN_NEWEST_IS_VACANCY", &planted::TORN_NEWEST_IS_VACANCY),
        ("TAKEOVER_IGNORES_HOST", &planted::TAKEOVER_IGNORES_HOST),
        ("PROOF_IGNORED", &planted::PROOF_IGNORED),
        ("BREAK_UNFLUSHED", &planted::BREAK_UNFLUSHED),
        (
            "BREAK_TRUSTS_LOST_CREATE",
            &planted::BREAK_TRUSTS_LOST_CREATE,
        ),
        ("WAIT_WITHOUT_FALLBACK", &planted::WAIT_WITHOUT_FALLBACK),
        (
            "SESSION_HOLDER_IS_VACANCY",
            &planted::SESSION_HOLDER_IS_VACANCY,
        ),
        ("OWN_SESSION_NO_GRACE", &planted::OWN_SESSION_NO_GRACE),
        ("RACE_REFUSED_AT_ONCE", &planted::RACE_REFUSED_AT_ONCE),
        ("GIVE_BACK_OVER_RENEWAL", &planted::GIVE_BACK_OVER_RENEWAL),
        ("SEVERAL_SKIPS_ALL_LIVE", &planted::SEVERAL_SKIPS_ALL_LIVE),
        ("SLOT_PAST_THE_LAST", &planted::SLOT_PAST_THE_LAST),
        ("SAME_PATH_UNCHECKED", &planted::SAME_PATH_UNCHECKED),
        ("COVERED_DEAD_NOT_FENCED", &planted::COVERED_DEAD_NOT_FENCED),
        ("SHARES_SWEEP_UNWRITTEN", &planted::SHARES_SWEEP_UNWRITTEN),
        (
            "STALE_RENEWAL_REVIVES_REMOVED_SERIES",
            &planted::STALE_RENEWAL_REVIVES_REMOVED_SERIES,
        ),
        (
            "PARTICIPANT_REMOVED_NEWEST_FIRST",
            &planted::PARTICIPANT_REMOVED_NEWEST_FIRST,
        ),
        ("DEAD_INTENT_HONOURED", &planted::DEAD_INTENT_HONOURED),
        ("INTENT_UNTIED", &planted::INTENT_UNTIED),
        ("SHARED_DEAD_NOT_FENCED", &planted::SHARED_DEAD_NOT_FENCED),
        ("BREAK_FIRST_READER_ONLY", &planted::BREAK_FIRST_READER_ONLY),
        ("BREAK_READS_UNSETTLED", &planted::BREAK_READS_UNSETTLED),
        ("BREAK_REREADS_UNSETTLED", &planted::BREAK_REREADS_UNSETTLED),
        ("GROUP_IGNORED", &planted::GROUP_IGNORED),
        ("GROUP_TO_COME_IGNORED", &planted::GROUP_TO_COME_IGNORED),
        ("SIBLING_RENEWAL_IGNORED", &planted::SIBLING_RENEWAL_IGNORED),
        ("SIBLING_CLAIM_IGNORED", &planted::SIBLING_CLAIM_IGNORED),
        ("OTHER_KEYS_CUT_SHORT", &planted::OTHER_KEYS_CUT_SHORT),
        ("ADOPTED_KEY_CUT_SHORT", &planted::ADOPTED_KEY_CUT_SHORT),
        ("LEASE_END_FROM_PRIMARY", &planted::LEASE_END_FROM_PRIMARY),
        (
            "SIBLING_RECORD_TAKEN_AS_RENEWAL",
            &planted::SIBLING_RECORD_TAKEN_AS_RENEWAL,
        ),
        (
            "FENCED_SESSION_TENURE_KEPT",
            &planted::FENCED_SESSION_TENURE_KEPT,
        ),
        (
            "OWN_STAMP_JUDGED_BY_HOLDER_CLOCK",
            &planted::OWN_STAMP_JUDGED_BY_HOLDER_CLOCK,
        ),
        (
            "OTHER_NAMES_NOT_LOOKED_FOR",
            &planted::OTHER_NAMES_NOT_LOOKED_FOR,
        ),
        ("CANCEL_IGNORED", &planted::CANCEL_IGNORED),
        (
            "SET_WAITS_WITHOUT_INTENT",
            &planted::SET_WAITS_WITHOUT_INTENT,
        ),
        (
            "READERS_IGNORE_INTENTS_BELOW",
            &planted::READERS_IGNORE_INTENTS_BELOW,
        ),
        (
            "SET_INTENTS_GIVEN_BACK_LATE",
            &planted::SET_INTENTS_GIVEN_BACK_LATE,
        ),
        ("COVERED_IGNORES_INTENT", &planted::COVERED_IGNORES_INTENT),
        (
            "TICKET_TRUSTED_WITHOUT_LOOKING",
            &planted::TICKET_TRUSTED_WITHOUT_LOOKING,
        ),
        ("TURN_NEVER_LAPSES", &planted::TURN_NEVER_LAPSES),
        ("TURN_FOR_NOBODY", &planted::TURN_FOR_NOBODY),
        (
            "TICKET_KEPT_WHILE_HOLDING",
            &planted::TICKET_KEPT_WHILE_HOLDING,
        ),
        ("DEAD_WAITER_NAMED", &planted::DEAD_WAITER_NAMED),
        ("TICKET_NUMBER_RESTARTS", &planted::TICKET_NUMBER_RESTARTS),
        (
            "TICKET_NUMBER_UNCONFIRMED",
            &planted::TICKET_NUMBER_UNCONFIRMED,
        ),
        (
            "TICKET_LEFT_ON_FAILED_CONFIRM",
            &planted::TICKET_LEFT_ON_FAILED_CONFIRM,
        ),
        ("TICKET_REMOVAL_DEFERRED", &planted::TICKET_REMOVAL_DEFERRED),
        (
            "TORN_AGED_AFTER_THE_READ",
            &planted::TORN_AGED_AFTER_THE_READ,
        ),
        ("BREAK_SKIPS_CONFIRM", &planted::BREAK_SKIPS_CONFIRM),
        (
            "SERIES_RELEASE_WITHOUT_PROOF",
            &planted::SERIES_RELEASE_WITHOUT_PROOF,
        ),
        ("BESIDE_DEAD_UNFENCED", &planted::BESIDE_DEAD_UNFENCED),
        (
            "BREAK_SESSION_UNFILTERED",
            &planted::BREAK_SESSION_UNFILTERED,
        ),
    ] {
        if let Ok(only) = std::env::var("FENCEPOST_PLANTED")
            && only != name
        {
            continue;
        }
        let _planted = Planted::on(switch);
        for schedule in checker::SCHEDULES {
            if let Ok(only) = std::env::var("FENCEPOST_SCHEDULE")
                && only != schedule.name
            {
                continue;
            }
            let found: Vec<u64> = (0..seeds)
                .filter(|seed| checker::run_seed(schedule, *seed).violation.is_some())
                .take(3)
                .collect();
            eprintln!("{name:<32} {:<20} {found:?}", schedule.name);
        }
    }
}

#[test]
fn catches_a_shared_claim_that_checks_only_before_admitting() {
    // Moved from 36 when shared subtree claims began to read the intents of
    // writers waiting below them.
    catches(
        &planted::SHARED_CHECK_BEFORE_ADMIT_ONLY,
        "shared_readers_writer",
        30,
    );
}

#[test]
fn catches_a_subtree_and_a_file_of_one_path_both_granted() {
    catches(&planted::SAME_PATH_UNCHECKED, "same_path", 19);
}

#[test]
fn catches_a_dead_subtree_holder_ignored_without_fencing() {
    catches(&planted::COVERED_DEAD_NOT_FENCED, "dead_subtree_holder", 0);
}

#[test]
fn catches_a_participant_entry_swept_before_its_record() {
    // Needs a reader's record in flight across a whole other reader's tenure and
    // the writer's look, and the writer's claim in flight across the reader's
    // check: found first at seed 666 of 1000; at seed 623 since the look removes
    // ended participants' series too (more calls, other interleavings per seed).
    catches_within(&planted::SHARES_SWEEP_UNWRITTEN, "shared_crash", 623, 1000);
}

#[test]
fn catches_a_stale_renewal_that_revives_a_removed_participant() {
    catches_within(
        &planted::STALE_RENEWAL_REVIVES_REMOVED_SERIES,
        "shared_cleanup",
        0,
        200,
    );
}

#[test]
fn catches_a_participant_series_removed_newest_first() {
    catches_within(
        &planted::PARTICIPANT_REMOVED_NEWEST_FIRST,
        "shared_cleanup",
        10,
        200,
    );
}

#[test]
fn catches_a_dead_waiters_intent_that_keeps_readers_out() {
    catches(&planted::DEAD_INTENT_HONOURED, "dead_intent", 9);
}

#[test]
fn catches_a_shared_claim_that_ignores_a_dead_holder_without_fencing() {
    catches(&planted::SHARED_DEAD_NOT_FENCED, "dead_exclusive_reader", 0);
}

#[test]
fn catches_a_break_that_skips_a_reader() {
    catches(&planted::BREAK_FIRST_READER_ONLY, "break_shared", 0);
}

#[test]
fn catches_a_break_that_takes_a_renewal_in_progress_for_an_ended_tenure() {
    // Needs a reader's renewal half written over a swept record while the break
    // reads it: found first at seed 1433.
    catches_within(&planted::BREAK_READS_UNSETTLED, "break_shared", 1433, 1500);
}

#[test]
fn catches_a_break_that_lands_over_a_claim_in_progress() {
    // Needs the claimer's create half written across the break's lost create and
    // its re-read: found first at seed 1014.
    catches_within(&planted::BREAK_REREADS_UNSETTLED, "break_race", 1014, 1100);
}

#[test]
fn catches_a_takeover_that_ignores_the_holders_process_group() {
    catches(&planted::GROUP_IGNORED, "dead_run_group", 0);
}

#[test]
fn catches_a_takeover_of_a_holder_whose_group_is_still_to_come() {
    catches(&planted::GROUP_TO_COME_IGNORED, "dead_run_spawning", 0);
}

#[test]
fn catches_a_renewal_that_cuts_short_a_siblings_promise() {
    catches(&planted::SIBLING_RENEWAL_IGNORED, "session_sibling", 0);
}

#[test]
fn catches_a_renewal_that_cuts_short_a_siblings_promise_in_the_file_id_series() {
    // A claim through another link looks for the file's other names and finds the
    // session's claim of its name, which masks this bug; a claimant that does not
    // look (a fencepost from before that look, sharing the store: mixed versions)
    // meets only the file-id series, which must keep the promise on its own.
    catches_beside(
        &planted::OTHER_KEYS_CUT_SHORT,
        &[&planted::OTHER_NAMES_NOT_LOOKED_FOR],
        "session_sibling_file",
        0,
        BUDGET,
    );
}

#[test]
fn catches_an_adopted_file_id_that_cuts_short_a_siblings_promise() {
    // As above: the look at the file's other names taken away.
    catches_beside(
        &planted::ADOPTED_KEY_CUT_SHORT,
        &[&planted::OTHER_NAMES_NOT_LOOKED_FOR],
        "session_sibling_replaced",
        0,
        BUDGET,
    );
}

#[test]
fn catches_a_lease_that_reports_its_primary_keys_later_end() {
    catches(&planted::LEASE_END_FROM_PRIMARY, "session_file_reentry", 0);
}

#[test]
fn catches_a_renewal_that_takes_a_siblings_shorter_record_for_its_own() {
    catches(
        &planted::SIBLING_RECORD_TAKEN_AS_RENEWAL,
        "session_sibling_short",
        0,
    );
}

#[test]
fn catches_a_session_kept_out_by_its_own_written_around_tenure() {
    catches(
        &planted::FENCED_SESSION_TENURE_KEPT,
        "session_fenced_reclaim",
        0,
    );
}

#[test]
fn catches_subtree_readers_that_ignore_a_writer_waiting_below() {
    catches(
        &planted::READERS_IGNORE_INTENTS_BELOW,
        "subtree_readers_writer",
        0,
    );
}

#[test]
fn catches_a_set_that_gives_its_intents_back_after_its_last_check() {
    // Found by the checker at seed 231; moved to 504 when the set's look began to
    // read its members' readers.
    catches_within(
        &planted::SET_INTENTS_GIVEN_BACK_LATE,
        "several_resources",
        504,
        600,
    );
}

#[test]
fn catches_a_set_that_waits_for_readers_without_an_intent() {
    catches(&planted::SET_WAITS_WITHOUT_INTENT, "several_readers", 0);
}

#[test]
fn catches_a_wait_that_ignores_its_cancellation() {
    catches(&planted::CANCEL_IGNORED, "cancelled_wait", 0);
}

#[test]
fn catches_a_claim_through_a_link_that_does_not_look_for_the_files_other_names() {
    catches(
        &planted::OTHER_NAMES_NOT_LOOKED_FOR,
        "link_claim_after_save",
        0,
    );
}

#[test]
fn catches_a_renewal_that_judges_its_own_fresh_record_by_the_clock_before_a_step() {
    catches(
        &planted::OWN_STAMP_JUDGED_BY_HOLDER_CLOCK,
        "clock_step_back_renewals",
        0,
    );
}

#[test]
fn catches_a_claim_that_takes_its_siblings_reentry_for_a_loss() {
    catches(&planted::SIBLING_CLAIM_IGNORED, "session_simultaneous", 84);
}

#[test]
fn catches_an_intent_not_tied_to_its_waiter() {
    catches(&planted::INTENT_UNTIED, "dead_intent", 9);
}

#[test]
fn catches_covered_claims_that_ignore_a_waiting_subtree_claimer() {
    catches(&planted::COVERED_IGNORES_INTENT, "subtree_intent", 0);
}

#[test]
fn catches_a_ticket_kept_while_holding() {
    // A holder's ticket left in the queue until after its release's tombstone can
    // be named by the next holder's release: a turn for a waiter that already
    // held, which every claimant waits out.
    catches(&planted::TICKET_KEPT_WHILE_HOLDING, "turn_handover", 1);
}

#[test]
fn catches_a_dead_waiter_named() {
    // A release that names the oldest ticket although its waiter's process ended
    // hands the lock to nobody for a turn, which every claimant waits out.
    catches(&planted::DEAD_WAITER_NAMED, "dead_waiter_turn", 7);
}

#[test]
fn catches_a_check_that_ignores_a_break_through_another_link() {
    catches(
        &planted::FILE_ID_TOMBSTONE_IGNORED,
        "break_through_another_link",
        25,
    );
}

#[test]
fn catches_a_claim_beside_stores_listed_before_it_claimed() {
    // A store made while a claim of a file was being made (`git init` racing the
    // claim): the claimer listed the other stores before it claimed, so it never
    // asks the new one, where the second claimer holds the file.
    catches(&planted::OTHERS_LISTED_BEFORE_CLAIM, "store_appears", 1);
}

#[test]
fn catches_a_claim_beside_stores_that_does_not_look_below_its_directory() {
    // A subtree claim over a nested repository asks that repository's store only
    // about its own keys and the subtrees above it: a file held there, below the
    // directory, stands beside the subtree claim.
    catches(&planted::ELSEWHERE_NOT_DOWN, "store_below", 0);
}

#[test]
fn catches_a_claim_beside_stores_that_trusts_its_look_before_claiming() {
    // Turned away once, a claimer looks at the other store before it claims
    // again; trusting that look (not asking again once its claim landed), it holds
    // beside a claim made in the other store between its look and its claim.
    catches(&planted::BESIDE_TRUSTS_ITS_LOOK, "two_stores", 95);
}
