//! The schedules the checker explores: each names its actors (what every thread
//! does with the protocol) and the faults it injects. To add one, write a function
//! returning its actors and add a [`Schedule`] to [`SCHEDULES`]
//! (docs/interleaving-checker.md walks through it).

use std::fs;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use fencepost::{
    AcquireOptions, Lease, LeaseHandle, Liveness, ProcessEvidence, Resource, Secret, Verdict,
};

use super::{Actor, CreateProcedure, FaultMix, Schedule, Setup};

mod claims;

/// The lease duration every schedule uses, in (virtual) milliseconds.
pub const TTL_MS: u64 = 300;

/// How long a slow or half-written create is in flight, unless a schedule says.
const INFLIGHT_MS: u64 = 20;

/// Every schedule, in the order the default run explores them.
pub const SCHEDULES: &[Schedule] = &[
    Schedule {
        name: "lock_handover",
        about: "two holders keep one lock alive (renewing every ttl/3) and hand it over; a third waits",
        snapshot_listing: true,
        mix: FaultMix::EVERYTHING,
        max_steps: 900,
        inflight_ms: INFLIGHT_MS,
        actors: lock_handover,
    },
    Schedule {
        name: "torn_renewal",
        about: "a holder renews while waiters read its renewals half-written",
        snapshot_listing: true,
        mix: FaultMix {
            half_written: 300,
            slow: 50,
            advance: 60,
            ..FaultMix::NONE
        },
        max_steps: 700,
        inflight_ms: INFLIGHT_MS,
        actors: torn_renewal,
    },
    Schedule {
        name: "slow_renewal",
        about: "a holder whose creates are slow while time passes inside them; a waiter",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 300,
            advance: 150,
            ..FaultMix::NONE
        },
        max_steps: 700,
        inflight_ms: TTL_MS * 5 / 6,
        actors: slow_renewal,
    },
    Schedule {
        name: "clock_step_back_renewals",
        about: "a holder keeps a lock while the wall clock steps back by a ttl, then by ten: nobody else touches it, so the holder never loses it",
        snapshot_listing: true,
        mix: FaultMix::NONE,
        max_steps: 2000,
        inflight_ms: INFLIGHT_MS,
        actors: clock_step_back_renewals,
    },
    Schedule {
        name: "clock_step_acquire",
        about: "two acquirers stall inside acquire while the wall clock steps both ways",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 100,
            advance: 120,
            step_wall: 40,
            ..FaultMix::NONE
        },
        max_steps: 700,
        inflight_ms: INFLIGHT_MS,
        actors: clock_step_acquire,
    },
    Schedule {
        name: "swept_recreate",
        about: "three contenders whose slow creates land after their generation was superseded and swept",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 250,
            half_written: 80,
            advance: 80,
            ..FaultMix::NONE
        },
        max_steps: 900,
        inflight_ms: INFLIGHT_MS,
        actors: swept_recreate,
    },
    Schedule {
        name: "power_cut",
        about: "holders and releases, a power cut with filesystem semantics, then a fresh process",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 60,
            half_written: 60,
            advance: 60,
            power_cut: 500,
            crash: 5,
            ..FaultMix::NONE
        },
        max_steps: 900,
        inflight_ms: INFLIGHT_MS,
        actors: power_cut,
    },
    // One power-cut schedule per durable-create procedure of the fs backend
    // (docs/design-07-performance.md): the power cut falls between its steps.
    Schedule {
        name: "power_cut_link_then_flush",
        about: "power cuts between the steps of the fs backend's POSIX create: link, flush file, flush directory",
        snapshot_listing: true,
        mix: FaultMix {
            advance: 60,
            power_cut: 700,
            crash: 5,
            procedure: CreateProcedure::LinkThenFlush,
            ..FaultMix::NONE
        },
        max_steps: 900,
        inflight_ms: INFLIGHT_MS,
        actors: power_cut_handover,
    },
    Schedule {
        name: "power_cut_flush_then_link",
        about: "power cuts between the steps of the fs backend's Windows create: flush staged file, link, flush directory",
        snapshot_listing: true,
        mix: FaultMix {
            advance: 60,
            power_cut: 700,
            crash: 5,
            procedure: CreateProcedure::FlushThenLink,
            ..FaultMix::NONE
        },
        max_steps: 900,
        inflight_ms: INFLIGHT_MS,
        actors: power_cut_handover,
    },
    Schedule {
        name: "power_cut_in_place",
        about: "power cuts between the steps of the fs backend's create without hard links: name, write, flush file, flush directory",
        snapshot_listing: true,
        mix: FaultMix {
            advance: 60,
            power_cut: 700,
            crash: 5,
            procedure: CreateProcedure::InPlace,
            ..FaultMix::NONE
        },
        max_steps: 900,
        inflight_ms: INFLIGHT_MS,
        actors: power_cut_handover,
    },
    // The wait path on change notifications (docs/design-07-performance.md,
    // "Waiting"): waiters sleep on a watch of the key, woken by every record that
    // lands in it, reading again after CHANGE_WAIT_MAX at the latest.
    Schedule {
        name: "notified_handover",
        about: "a holder renews and hands one lock over while waiters sleep on change notifications, with slow and half-written creates",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 40,
            half_written: 40,
            advance: 60,
            crash: 3,
            notify: true,
            ..FaultMix::NONE
        },
        max_steps: 900,
        inflight_ms: INFLIGHT_MS,
        actors: notified_handover,
    },
    // Turns (docs/design-07-performance.md, "Who is woken: turns"): waiters asleep
    // on notifications queue; a contended release names the oldest in its
    // tombstone and the others hold back for at most TURN_MS. Waiters crash (a
    // named waiter that never claims) and give up (a turn for a waiter already
    // gone), so turns lapse and waiters are passed over.
    Schedule {
        name: "turn_handover",
        about: "waiters queue on a notified lock, releases name the next in line; named waiters crash or give up, so turns lapse",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 30,
            half_written: 30,
            advance: 60,
            crash: 6,
            notify: true,
            ..FaultMix::NONE
        },
        max_steps: 1200,
        inflight_ms: INFLIGHT_MS,
        actors: turn_handover,
    },
    // Turns when reads fail: a list, read or remove of the key or its queue
    // fails now and then, so a waiter's join can fail between its ticket's create
    // and the read that confirms it (docs/design-07-performance.md, "A ticket
    // number is never given twice": such a ticket is removed, not left behind).
    Schedule {
        name: "turn_read_errors",
        about: "turn_handover with failing lists, reads and removes: a join whose confirming read fails leaves no ticket behind",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 30,
            advance: 60,
            io_error: 40,
            notify: true,
            ..FaultMix::NONE
        },
        max_steps: 1200,
        inflight_ms: INFLIGHT_MS,
        actors: turn_handover,
    },
    // Turns with a process table (docs/design-07-performance.md, "A waiter whose
    // process ended is passed over at once"): waiters tied to their model
    // processes die while queued, and a release must pass over a ticket whose
    // process it can see ended; a holder that dies is taken over at once.
    Schedule {
        name: "dead_waiter_turn",
        about: "waiters queued on a notified lock die (their processes end); releases pass over their tickets and name a live waiter",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 30,
            half_written: 30,
            advance: 60,
            crash: 12,
            notify: true,
            ..FaultMix::NONE
        },
        max_steps: 1200,
        inflight_ms: INFLIGHT_MS,
        actors: dead_waiter_turn,
    },
    Schedule {
        name: "stalled_sweep",
        about: "claimers stall between confirming and sweeping while others claim and release; then a power cut",
        snapshot_listing: true,
        mix: FaultMix {
            stall: 150,
            advance: 30,
            power_cut: 700,
            ..FaultMix::NONE
        },
        max_steps: 900,
        inflight_ms: TTL_MS * 3 / 2,
        actors: stalled_sweep,
    },
    Schedule {
        name: "cursor_listing",
        about: "a backend whose listing is a cursor scan (not a snapshot): a holder renews while a waiter lists",
        snapshot_listing: false,
        mix: FaultMix {
            advance: 60,
            half_written: 40,
            ..FaultMix::NONE
        },
        max_steps: 900,
        inflight_ms: INFLIGHT_MS,
        actors: torn_renewal,
    },
    Schedule {
        name: "hard_link_revival",
        about: "A claims new.txt before it exists; the file is created and hard-linked as other.txt; B claims other.txt",
        snapshot_listing: true,
        mix: FaultMix {
            advance: 60,
            ..FaultMix::NONE
        },
        max_steps: 900,
        inflight_ms: INFLIGHT_MS,
        actors: hard_link_revival,
    },
    Schedule {
        name: "break_through_another_link",
        about: "A holds a.txt, hard-linked as b.txt; an operator breaks b.txt (A's tenure ends in the file-id series alone); A checks and renews; B claims b.txt",
        snapshot_listing: true,
        mix: FaultMix {
            advance: 60,
            ..FaultMix::NONE
        },
        max_steps: 900,
        inflight_ms: INFLIGHT_MS,
        actors: break_through_another_link,
    },
    Schedule {
        name: "rename_revival",
        about: "A claims a.txt; it is replaced by rename (new inode) and linked as b.txt; B claims b.txt",
        snapshot_listing: true,
        mix: FaultMix {
            advance: 60,
            ..FaultMix::NONE
        },
        max_steps: 900,
        inflight_ms: INFLIGHT_MS,
        actors: rename_revival,
    },
    Schedule {
        name: "dead_holder",
        about: "dead-holder takeover: a holder on this host dies holding, one on another host keeps renewing; a waiter here takes over only the dead one",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 60,
            half_written: 60,
            advance: 80,
            ..FaultMix::NONE
        },
        max_steps: 1200,
        inflight_ms: INFLIGHT_MS,
        actors: dead_holder,
    },
    Schedule {
        name: "forged_handle",
        about: "a holder keeps a lock; a second process of the holder renews it through its handle; a third presents the public token with a wrong secret",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 60,
            half_written: 60,
            stall: 20,
            error_after_landing: 15,
            advance: 60,
            ..FaultMix::NONE
        },
        max_steps: 1200,
        inflight_ms: INFLIGHT_MS,
        actors: forged_handle,
    },
    Schedule {
        name: "stale_handle",
        about: "a holder stalls past its ttl and renews, releases and resumes with its stale lease while a new tenure claims; a mixer pairs the new token with the stale secret",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 60,
            half_written: 60,
            stall: 20,
            advance: 60,
            step_wall: 5,
            ..FaultMix::NONE
        },
        max_steps: 1200,
        inflight_ms: INFLIGHT_MS,
        actors: stale_handle,
    },
    Schedule {
        name: "break_race",
        about: "an operator breaks a lock while its holder renews and a claimer waits; a power cut; a fresh process checks the broken token and claims",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 60,
            half_written: 60,
            stall: 20,
            create_error: 10,
            error_after_landing: 15,
            advance: 50,
            power_cut: 500,
            ..FaultMix::NONE
        },
        max_steps: 1200,
        inflight_ms: INFLIGHT_MS,
        actors: break_race,
    },
    Schedule {
        name: "break_renewal",
        about: "an operator's slow break races a holder's renewals: the renewal may take the generation the break wanted",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 250,
            advance: 40,
            ..FaultMix::NONE
        },
        max_steps: 1200,
        inflight_ms: TTL_MS / 4,
        actors: break_renewal,
    },
    Schedule {
        name: "break_swept",
        about: "break_renewal with a break slower than two renewals: its tombstone lands on a generation the renewals created and swept, below the renewal that holds",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 250,
            advance: 40,
            ..FaultMix::NONE
        },
        max_steps: 1200,
        inflight_ms: TTL_MS,
        actors: break_renewal,
    },
    Schedule {
        name: "subtree_race",
        about: "a subtree claim of src/, a claim of a file below it that does not exist yet, and a subtree claim of the directory above, all at once; a power cut; a fresh process claims the subtree",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 60,
            half_written: 60,
            stall: 20,
            advance: 50,
            power_cut: 200,
            ..FaultMix::NONE
        },
        max_steps: 1500,
        inflight_ms: INFLIGHT_MS,
        actors: subtree_race,
    },
    Schedule {
        name: "file_contention",
        about: "two tenures contend for one existing file through two hard links (path and file-id keys)",
        snapshot_listing: true,
        mix: FaultMix::EVERYTHING,
        max_steps: 1200,
        inflight_ms: INFLIGHT_MS,
        actors: file_contention,
    },
    Schedule {
        name: "session_reentry",
        about: "two processes of one session claim one lock (the second re-enters the first's tenure) and keep it; another session waits",
        snapshot_listing: true,
        mix: FaultMix::EVERYTHING,
        max_steps: 1200,
        inflight_ms: INFLIGHT_MS,
        actors: claims::session_reentry,
    },
    Schedule {
        name: "session_file_race",
        about: "two processes of one session claim one file (two keys) at once without waiting; neither may be refused by its own session; another session waits",
        snapshot_listing: true,
        mix: FaultMix::NONE,
        max_steps: 1200,
        inflight_ms: INFLIGHT_MS,
        actors: claims::session_file_race,
    },
    Schedule {
        name: "session_file_reentry",
        about: "three processes of one session claim one file (two keys) at once without waiting, with stalled reads: a give-back must not end a tenure a sibling re-entered",
        snapshot_listing: true,
        mix: FaultMix {
            stall: 150,
            ..FaultMix::NONE
        },
        max_steps: 1500,
        inflight_ms: INFLIGHT_MS,
        actors: claims::session_file_reentry,
    },
    Schedule {
        name: "session_several",
        about: "two processes of one session claim {a, b} all or nothing at once without waiting, a third re-enters a alone, another session holds b; stalled reads: a give-back must not end a tenure a sibling re-entered",
        snapshot_listing: true,
        mix: FaultMix {
            stall: 150,
            ..FaultMix::NONE
        },
        max_steps: 1500,
        inflight_ms: INFLIGHT_MS,
        actors: claims::session_several,
    },
    Schedule {
        name: "several_resources",
        about: "two claimers take {a, b} and {b, a} all or nothing, with slow creates and pauses; a third claims b alone",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 150,
            advance: 150,
            half_written: 60,
            ..FaultMix::NONE
        },
        max_steps: 1500,
        inflight_ms: TTL_MS / 2,
        actors: claims::several_resources,
    },
    Schedule {
        name: "two_stores",
        about: "a layout change between two claims of one file: one claimer's store is the model store, the other's a second store, each claiming beside the other's (claim_beside), twice, with slow creates; never both hold",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 100,
            half_written: 60,
            ..FaultMix::NONE
        },
        max_steps: 2000,
        inflight_ms: INFLIGHT_MS,
        actors: claims::two_stores,
    },
    Schedule {
        name: "store_appears",
        about: "a store made while a claim of one file is being made (git init racing a claim): the second claimer makes its store, then claims there beside the model store; the first claims in the model store and lists the other stores as they are when it asks (claim_beside); twice each, with slow creates; never both hold",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 100,
            half_written: 60,
            ..FaultMix::NONE
        },
        max_steps: 2000,
        inflight_ms: INFLIGHT_MS,
        actors: claims::store_appears,
    },
    Schedule {
        name: "store_below",
        about: "a subtree claim over a nested repository: one claimer takes dir src/ in the model store beside the nested repository's store, the other takes src/vendor/b.rs in that store beside the model store (claim_beside); twice each, with slow creates; never both hold",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 100,
            half_written: 60,
            ..FaultMix::NONE
        },
        max_steps: 2000,
        inflight_ms: INFLIGHT_MS,
        actors: claims::store_below,
    },
    Schedule {
        name: "slots",
        about: "four claimers share the 2 slots of a lock, keeping and releasing them, with slow creates and pauses",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 100,
            advance: 120,
            half_written: 80,
            ..FaultMix::NONE
        },
        max_steps: 1500,
        inflight_ms: INFLIGHT_MS,
        actors: claims::slots,
    },
    Schedule {
        name: "shared_readers_writer",
        about: "two shared claimers of a lock and of a subtree, a writer of the lock and one of a file below the subtree, and a reader arriving while the writer waits; slow and half-written creates, pauses",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 80,
            advance: 100,
            half_written: 60,
            ..FaultMix::NONE
        },
        max_steps: 2000,
        inflight_ms: INFLIGHT_MS,
        actors: claims::shared_readers_writer,
    },
    Schedule {
        name: "shared_exclusive_race",
        about: "a shared claimer and an exclusive claimer of one free lock, at once and neither waiting; they may not both be refused",
        snapshot_listing: true,
        mix: FaultMix::NONE,
        max_steps: 1500,
        inflight_ms: INFLIGHT_MS,
        actors: claims::shared_exclusive_race,
    },
    Schedule {
        name: "same_path",
        about: "a subtree claim and a file claim of one path (neither exists yet) race, and a shared reader of the file arrives; slow and half-written creates, pauses",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 80,
            advance: 60,
            half_written: 60,
            ..FaultMix::NONE
        },
        max_steps: 1500,
        inflight_ms: INFLIGHT_MS,
        actors: claims::same_path,
    },
    Schedule {
        name: "dead_subtree_holder",
        about: "a subtree holder dies (SIGKILL) while a file and a subtree below it wait; its orphaned child keeps checking the subtree's token",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 60,
            half_written: 40,
            ..FaultMix::NONE
        },
        max_steps: 1500,
        inflight_ms: INFLIGHT_MS,
        actors: claims::dead_subtree_holder,
    },
    Schedule {
        name: "shared_crash",
        about: "two tied readers of a lock die at any call (crash points between index entry and record, while holding, after giving back) while a tied writer waits",
        snapshot_listing: true,
        mix: FaultMix {
            crash: 5,
            slow: 300,
            half_written: 40,
            advance: 30,
            ..FaultMix::NONE
        },
        max_steps: 2000,
        inflight_ms: TTL_MS / 2,
        actors: claims::shared_crash,
    },
    Schedule {
        name: "dead_intent",
        about: "a writer waiting for a reader dies at any call; a reader arriving after its death must not be kept out by its intent",
        snapshot_listing: true,
        mix: FaultMix {
            crash: 40,
            slow: 60,
            half_written: 40,
            ..FaultMix::NONE
        },
        max_steps: 2000,
        inflight_ms: INFLIGHT_MS,
        actors: claims::dead_intent,
    },
    Schedule {
        name: "dead_exclusive_reader",
        about: "a lock holder and a subtree holder die holding (SIGKILL) while readers of the lock and of a file below wait; the orphans keep checking their tokens",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 60,
            half_written: 40,
            ..FaultMix::NONE
        },
        max_steps: 3000,
        inflight_ms: INFLIGHT_MS,
        actors: claims::dead_exclusive_reader,
    },
    Schedule {
        name: "break_shared",
        about: "a break of a lock held by two readers that keep checking and renewing: every reader's token stops passing once the break returned",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 60,
            stall: 20,
            half_written: 40,
            ..FaultMix::NONE
        },
        max_steps: 2000,
        inflight_ms: INFLIGHT_MS,
        actors: claims::break_shared,
    },
    Schedule {
        name: "shared_cleanup",
        about: "readers of a lock end (released, broken, expired by a pause) while a writer waits; its look removes their entries and series while their stale handles renew and release",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 60,
            stall: 20,
            half_written: 30,
            ..FaultMix::NONE
        },
        max_steps: 2500,
        inflight_ms: INFLIGHT_MS,
        actors: claims::shared_cleanup,
    },
    Schedule {
        name: "dead_run_group",
        about: "a tied holder names its command's process group, is SIGKILLed, and its command writes on until its guard stops the group; a tied waiter may take over only then",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 60,
            half_written: 40,
            ..FaultMix::NONE
        },
        max_steps: 2000,
        inflight_ms: INFLIGHT_MS,
        actors: claims::dead_run_group,
    },
    Schedule {
        name: "session_end_by_key",
        about: "a session's end releases its claim of a file key by key (as for a file it renamed) while the holder renews, the session claims again and another session waits: only the session's tenures end",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 60,
            half_written: 40,
            ..FaultMix::NONE
        },
        max_steps: 2000,
        inflight_ms: INFLIGHT_MS,
        actors: claims::session_end_by_key,
    },
    Schedule {
        name: "dead_beside",
        about: "a tied holder of a file in one store is SIGKILLed; a claim of the file made in another store beside it waits: it must fence the dead holder there and get in before its ttl, and never while it lives",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 60,
            half_written: 40,
            ..FaultMix::NONE
        },
        max_steps: 2000,
        inflight_ms: INFLIGHT_MS,
        actors: claims::dead_beside,
    },
    Schedule {
        name: "break_session",
        about: "an operator breaks a session's claims while one of them is released and taken by another session: only the session's tenures are broken",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 60,
            half_written: 40,
            ..FaultMix::NONE
        },
        max_steps: 2000,
        inflight_ms: INFLIGHT_MS,
        actors: claims::break_session,
    },
    Schedule {
        name: "session_simultaneous",
        about: "two processes of one session claim a lock at the same instant: exactly one says it began the tenure",
        snapshot_listing: true,
        mix: FaultMix::NONE,
        max_steps: 2000,
        inflight_ms: INFLIGHT_MS,
        actors: claims::session_simultaneous,
    },
    Schedule {
        name: "session_sibling",
        about: "a tied process of a session keeps a lock, a sibling re-enters it for three ttls, the first process renews and dies: no waiter may hold before the sibling's promise ends",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 60,
            half_written: 40,
            ..FaultMix::NONE
        },
        max_steps: 2000,
        inflight_ms: INFLIGHT_MS,
        actors: claims::session_sibling,
    },
    Schedule {
        name: "session_sibling_file",
        about: "session_sibling for a file (two series: path and file id), the waiter claiming it through another hard link: the first process's renewals keep the sibling's end in every series",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 60,
            half_written: 40,
            ..FaultMix::NONE
        },
        max_steps: 2000,
        inflight_ms: INFLIGHT_MS,
        actors: claims::session_sibling_file,
    },
    Schedule {
        name: "session_sibling_replaced",
        about: "session_sibling_file with the file replaced (a new file id) before the sibling re-enters, the waiter claiming a hard link of the new file: adopting the new file id keeps the sibling's end",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 60,
            half_written: 40,
            ..FaultMix::NONE
        },
        max_steps: 2000,
        inflight_ms: INFLIGHT_MS,
        actors: claims::session_sibling_replaced,
    },
    Schedule {
        name: "session_fenced_reclaim",
        about: "a session's file is replaced and claimed by another session through a hard link of the new file, which then releases it: the first session's next claim ends its written-around tenure and gets a new token, instead of being kept out by it until its ttl",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 60,
            half_written: 40,
            ..FaultMix::NONE
        },
        max_steps: 2000,
        inflight_ms: INFLIGHT_MS,
        actors: claims::session_fenced_reclaim,
    },
    Schedule {
        name: "subtree_readers_writer",
        about: "a writer of a file waits for a reader of the subtree around it while another reader of the subtree arrives: the writer's intent keeps the late reader out, and the writer gets the file once the first reader is done",
        snapshot_listing: true,
        mix: FaultMix::NONE,
        max_steps: 4000,
        inflight_ms: INFLIGHT_MS,
        actors: claims::subtree_readers_writer,
    },
    Schedule {
        name: "several_readers",
        about: "a claim of {a, b} waits for a reader of b while another reader of b arrives: the set's intent keeps the late reader out, and the set gets both once the first reader is done",
        snapshot_listing: true,
        mix: FaultMix::NONE,
        max_steps: 4000,
        inflight_ms: INFLIGHT_MS,
        actors: claims::several_readers,
    },
    Schedule {
        name: "cancelled_wait",
        about: "a waiter whose caller gives up a ttl before the lock comes free stops waiting and gives its place in the queue back: it never gets the lock, and a claim with no wait after the release does",
        snapshot_listing: true,
        mix: FaultMix::NONE,
        max_steps: 3000,
        inflight_ms: INFLIGHT_MS,
        actors: claims::cancelled_wait,
    },
    Schedule {
        name: "link_claim_after_save",
        about: "a session's file is replaced by an editor's save and the new file hard-linked: claims through the link are refused while the session holds the file under its name, though its tenure has not taken the new file id in",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 60,
            half_written: 40,
            ..FaultMix::NONE
        },
        max_steps: 3000,
        inflight_ms: INFLIGHT_MS,
        actors: claims::link_claim_after_save,
    },
    Schedule {
        name: "session_sibling_short",
        about: "a process of a session keeps a lock while a sibling re-enters it again and again with a much shorter ttl: the first process's renewals must extend the tenure",
        snapshot_listing: true,
        mix: FaultMix::NONE,
        max_steps: 3000,
        inflight_ms: INFLIGHT_MS,
        actors: claims::session_sibling_short,
    },
    Schedule {
        name: "dead_run_spawning",
        about: "a tied holder whose command's group is still to be named is SIGKILLed while its command runs; a tied waiter may take over only after the ttl",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 60,
            half_written: 40,
            ..FaultMix::NONE
        },
        max_steps: 2000,
        inflight_ms: INFLIGHT_MS,
        actors: claims::dead_run_spawning,
    },
    Schedule {
        name: "subtree_intent",
        about: "two streams claim files below src/ back to back while a subtree claim of src/ waits one ttl: its intent must get it in",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 60,
            half_written: 40,
            ..FaultMix::NONE
        },
        max_steps: 4000,
        inflight_ms: INFLIGHT_MS,
        actors: claims::subtree_intent,
    },
    // A claimant paused between the read that finds a create in progress and its
    // clock reading: the pause is no time the create was seen in progress.
    Schedule {
        name: "torn_pause",
        about: "three contenders, long waits; creates are half written for less than CREATE_GRACE_MS while pauses fall between a read and the clock reading after it",
        snapshot_listing: true,
        mix: FaultMix {
            half_written: 400,
            advance: 450,
            ..FaultMix::NONE
        },
        max_steps: 1500,
        inflight_ms: 2 * TTL_MS,
        actors: torn_pause,
    },
    // The sweep's removals deferred, as the fs backend's removal thread makes them
    // (docs/design-07-performance.md, "What was built: a removal thread"): each
    // lands at any later point of the process that handed it over, or never (the
    // process dies, the power is cut), and is hidden from that process at once.
    Schedule {
        name: "deferred_sweep",
        about: "power_cut with the sweep's removals deferred: they land late, fail, or die with their process",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 60,
            half_written: 60,
            advance: 60,
            power_cut: 500,
            crash: 5,
            io_error: 10,
            defer: 700,
            ..FaultMix::NONE
        },
        max_steps: 1200,
        inflight_ms: INFLIGHT_MS,
        actors: power_cut,
    },
    Schedule {
        name: "deferred_swept_recreate",
        about: "swept_recreate with deferred removals: a removal queued long ago lands after a slow create took its generation's name again",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 250,
            half_written: 80,
            advance: 80,
            defer: 800,
            ..FaultMix::NONE
        },
        max_steps: 1200,
        inflight_ms: INFLIGHT_MS,
        actors: swept_recreate,
    },
    Schedule {
        name: "deferred_turns",
        about: "turn_handover with deferred removals: waiters judge a key whose superseded records linger for everyone but their remover",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 30,
            half_written: 30,
            advance: 60,
            crash: 6,
            notify: true,
            defer: 700,
            ..FaultMix::NONE
        },
        max_steps: 1500,
        inflight_ms: INFLIGHT_MS,
        actors: turn_handover,
    },
    Schedule {
        name: "deferred_shared",
        about: "shared_readers_writer with deferred removals, the participant index's healing among them",
        snapshot_listing: true,
        mix: FaultMix {
            slow: 80,
            advance: 100,
            half_written: 60,
            defer: 700,
            ..FaultMix::NONE
        },
        max_steps: 2500,
        inflight_ms: INFLIGHT_MS,
        actors: claims::shared_readers_writer,
    },
];

/// The schedule named `name`.
pub fn schedule(name: &str) -> Option<&'static Schedule> {
    SCHEDULES.iter().find(|s| s.name == name)
}

fn lock() -> Resource {
    Resource::lock("checker")
}

fn lock_handover(_: &Setup) -> Vec<Actor> {
    vec![
        Actor::new("A", |ctx| {
            ctx.hold(&lock(), 0, 3);
        }),
        Actor::new("B", |ctx| {
            ctx.hold(&lock(), 2 * TTL_MS, 2);
        }),
        Actor::new("C", |ctx| {
            if let Some(lease) = ctx.acquire(&lock(), TTL_MS, 2 * TTL_MS) {
                ctx.check(&lease);
                ctx.release(&lease);
            }
        }),
    ]
}

fn torn_renewal(_: &Setup) -> Vec<Actor> {
    vec![
        Actor::new("holder", |ctx| {
            ctx.hold(&lock(), 0, 5);
        }),
        Actor::new("waiter", |ctx| {
            ctx.sleep(TTL_MS / 10);
            for _ in 0..2 {
                if let Some(lease) = ctx.acquire(&lock(), TTL_MS, TTL_MS / 2) {
                    ctx.check(&lease);
                    ctx.release(&lease);
                }
            }
        }),
    ]
}

fn slow_renewal(_: &Setup) -> Vec<Actor> {
    vec![
        Actor::new("holder", |ctx| {
            ctx.hold(&lock(), 0, 4);
        }),
        Actor::new("waiter", |ctx| {
            if let Some(lease) = ctx.acquire(&lock(), TTL_MS, 3 * TTL_MS) {
                ctx.check(&lease);
                ctx.release(&lease);
            }
        }),
    ]
}

/// A holder keeps a lock, and another an existing file (two series: its path and
/// its file id), with their renewals while the host's wall clock steps back, first
/// by a ttl, then by ten: nobody else touches them, so neither may lose its lease. A renewal judged the record it had just stamped by the clock the
/// holder had before the step, so that record looked a step older than it was, and
/// a step of 2/3 ttl ended every kept-alive lease at its next renewal (found by a
/// breaker: `run` stopped its command). Without faults, so that a loss can only be
/// the protocol's. Planted bug `OWN_STAMP_JUDGED_BY_HOLDER_CLOCK`.
fn clock_step_back_renewals(setup: &Setup) -> Vec<Actor> {
    let file = setup.dir.join("ntp.rs");
    let _ = std::fs::write(&file, b"x");
    let holder = |resource: Resource| {
        move |ctx: &super::Ctx| {
            let Some(mut lease) = ctx.acquire(&resource, TTL_MS, 0) else {
                return;
            };
            if ctx.keep(&mut lease, 8) {
                ctx.release(&lease);
            } else {
                ctx.violate(format!(
                    "the holder of {resource} lost its lease though nobody else touched it and \
                     the wall clock only stepped back"
                ));
            }
        }
    };
    vec![
        Actor::new("lock-holder", holder(lock())),
        Actor::new("file-holder", holder(Resource::file(&file))),
        Actor::new("ntp", |ctx: &super::Ctx| {
            ctx.sleep(TTL_MS / 2);
            ctx.step_wall_back(TTL_MS);
            ctx.sleep(TTL_MS);
            ctx.step_wall_back(10 * TTL_MS);
        }),
    ]
}

fn clock_step_acquire(_: &Setup) -> Vec<Actor> {
    let contender = |ctx: &super::Ctx| {
        if let Some(lease) = ctx.acquire(&lock(), TTL_MS, 2 * TTL_MS) {
            ctx.check(&lease);
            ctx.sleep(TTL_MS / 4);
            ctx.check(&lease);
            ctx.release(&lease);
        }
    };
    vec![Actor::new("A", contender), Actor::new("B", contender)]
}

fn swept_recreate(_: &Setup) -> Vec<Actor> {
    let contender = |ctx: &super::Ctx| {
        for _ in 0..2 {
            if let Some(lease) = ctx.acquire(&lock(), TTL_MS, TTL_MS) {
                ctx.check(&lease);
                ctx.release(&lease);
            }
        }
    };
    vec![
        Actor::new("A", contender),
        Actor::new("B", contender),
        Actor::new("C", contender),
    ]
}

fn torn_pause(_: &Setup) -> Vec<Actor> {
    let contender = |ctx: &super::Ctx| {
        for _ in 0..2 {
            // A ttl past CREATE_GRACE_MS: a claim handed out is still promised
            // when a paused claimant judges its torn create abandoned.
            if let Some(lease) = ctx.acquire(&lock(), 10 * TTL_MS, 30 * TTL_MS) {
                ctx.check(&lease);
                // Holding a while: a claim over its torn create lands in time.
                ctx.sleep(5 * TTL_MS);
                ctx.check(&lease);
                ctx.release(&lease);
            }
        }
    };
    vec![
        Actor::new("A", contender),
        Actor::new("B", contender),
        Actor::new("C", contender),
    ]
}

fn power_cut(_: &Setup) -> Vec<Actor> {
    vec![
        Actor::new("A", |ctx| {
            ctx.hold(&lock(), TTL_MS, 2);
        }),
        Actor::new("B", |ctx| {
            for _ in 0..2 {
                if let Some(lease) = ctx.acquire(&lock(), TTL_MS, TTL_MS) {
                    ctx.release(&lease);
                }
            }
        }),
        Actor::late("restart", |ctx| {
            if let Some(lease) = ctx.acquire(&lock(), TTL_MS, 3 * TTL_MS) {
                ctx.check(&lease);
                ctx.release(&lease);
            }
        }),
    ]
}

/// Two holders that renew and hand one lock over (so claims, renewals, tombstones
/// and sweeps share one key directory, whose flushes make each other's names
/// durable), and a fresh process after the power cut that must get a higher token.
fn power_cut_handover(_: &Setup) -> Vec<Actor> {
    let holder = |ctx: &super::Ctx| {
        for _ in 0..2 {
            ctx.hold(&lock(), TTL_MS, 1);
        }
    };
    vec![
        Actor::new("A", holder),
        Actor::new("B", holder),
        Actor::late("restart", |ctx| {
            if let Some(lease) = ctx.acquire(&lock(), TTL_MS, 3 * TTL_MS) {
                ctx.check(&lease);
                ctx.release(&lease);
            }
        }),
    ]
}

/// One holder that keeps the lock across a renewal, releases and claims again;
/// two waiters that wait on notifications for it, each releasing at once.
fn notified_handover(_: &Setup) -> Vec<Actor> {
    let waiter = |ctx: &super::Ctx| {
        for _ in 0..2 {
            if let Some(lease) = ctx.acquire(&lock(), TTL_MS, 3 * TTL_MS) {
                ctx.check(&lease);
                ctx.release(&lease);
            }
        }
    };
    vec![
        Actor::new("holder", |ctx| {
            for _ in 0..2 {
                ctx.hold(&lock(), 3 * TTL_MS, 1);
            }
        }),
        Actor::new("W1", waiter),
        Actor::new("W2", waiter),
    ]
}

fn turn_handover(_: &Setup) -> Vec<Actor> {
    // Short tenures, so that releases find waiters queued; one waiter gives up
    // soon, so a turn may name a waiter that has left.
    let waiter = |wait_ms: u64| {
        move |ctx: &super::Ctx| {
            for _ in 0..2 {
                if let Some(lease) = ctx.acquire(&lock(), TTL_MS, wait_ms) {
                    ctx.check(&lease);
                    ctx.release(&lease);
                }
            }
        }
    };
    vec![
        Actor::new("A", waiter(3 * TTL_MS)),
        Actor::new("B", waiter(3 * TTL_MS)),
        Actor::new("C", waiter(3 * TTL_MS)),
        Actor::new("D", waiter(fencepost::TURN_MS)),
    ]
}

/// A holder (pid 3) hands a lock over twice while three waiters (pids 4 to 6),
/// each in its own model process, queue for it; any of them may die at any call
/// (a crash fault ends its process). The dead-waiter oracle: a tombstone never
/// names a waiter whose process ended before the release listed the queue.
/// Planted bug `DEAD_WAITER_NAMED`: the release names such a waiter.
fn dead_waiter_turn(_: &Setup) -> Vec<Actor> {
    let running = Arc::new(Mutex::new(HashSet::from([3, 4, 5, 6])));
    let actor = |name: &'static str, pid: u32, rounds: usize, renewals: usize| {
        let running = Arc::clone(&running);
        Actor::new(name, move |ctx| {
            let probe = ModelLiveness {
                this: evidence("local-host", pid),
                running: Arc::clone(&running),
            };
            let ctx = ctx.with_store(ctx.store.clone().with_liveness(probe));
            let _dies = claims::DiesWith {
                ctx: ctx.with_store(ctx.store.clone()),
                pid,
                running,
            };
            for _ in 0..rounds {
                let options = AcquireOptions::new(TTL_MS)
                    .owner(ctx.name().to_string())
                    .tied_to_process(true)
                    .wait_ms(3 * TTL_MS);
                if let Some(mut lease) = ctx.acquire_with(&lock(), &options) {
                    ctx.check(&lease);
                    if ctx.keep(&mut lease, renewals) {
                        ctx.release(&lease);
                    }
                }
            }
        })
    };
    vec![
        actor("holder", 3, 2, 1),
        actor("W4", 4, 1, 0),
        actor("W5", 5, 1, 0),
        actor("W6", 6, 1, 0),
    ]
}

fn stalled_sweep(_: &Setup) -> Vec<Actor> {
    let claimer = |ctx: &super::Ctx| {
        for _ in 0..3 {
            if let Some(lease) = ctx.acquire(&lock(), TTL_MS, TTL_MS) {
                ctx.release(&lease);
                ctx.sleep(TTL_MS);
            }
        }
    };
    vec![
        Actor::new("A", claimer),
        Actor::new("B", claimer),
        Actor::late("restart", |ctx| {
            if let Some(lease) = ctx.acquire(&lock(), TTL_MS, 3 * TTL_MS) {
                ctx.check(&lease);
                ctx.release(&lease);
            }
        }),
    ]
}

/// Claims `resource` at once and keeps it for `rounds` renewals, checking its
/// token before each; a renewal refused ends it with one more check (a fenced
/// token must not pass), else it releases.
fn checked_rounds(ctx: &super::Ctx, resource: &Resource, rounds: usize) {
    let Some(mut lease) = ctx.acquire(resource, TTL_MS, 0) else {
        return;
    };
    for _ in 0..rounds {
        ctx.check(&lease);
        ctx.sleep(TTL_MS / 4);
        if !ctx.renew(&mut lease) {
            ctx.check(&lease);
            return;
        }
    }
    ctx.release(&lease);
}

fn hard_link_revival(setup: &Setup) -> Vec<Actor> {
    let new = setup.dir.join("new.txt");
    let other = setup.dir.join("other.txt");
    let (new_a, new_e, other_e) = (new.clone(), new, other.clone());
    vec![
        Actor::new("A", move |ctx| {
            checked_rounds(ctx, &Resource::file(&new_a), 5)
        }),
        Actor::new("files", move |ctx| {
            ctx.sleep(TTL_MS / 20);
            ctx.env("create new.txt", || fs::write(&new_e, b"x"));
            ctx.env("hard-link new.txt as other.txt", || {
                fs::hard_link(&new_e, &other_e)
            });
        }),
        Actor::new("B", move |ctx| {
            ctx.sleep(TTL_MS / 10);
            if let Some(lease) = ctx.acquire(&Resource::file(&other), TTL_MS, TTL_MS) {
                ctx.check(&lease);
                ctx.sleep(TTL_MS / 3);
                ctx.release(&lease);
            }
        }),
    ]
}

/// A break through another hard link: found by a new user (the broken holder's
/// bare token passed `check` until the next claim).
fn break_through_another_link(setup: &Setup) -> Vec<Actor> {
    let a = setup.dir.join("a.txt");
    let b = setup.dir.join("b.txt");
    let _ = fs::write(&a, b"x");
    let _ = fs::hard_link(&a, &b);
    let (b_broken, b_claimed) = (b.clone(), b);
    vec![
        Actor::new("A", move |ctx| checked_rounds(ctx, &Resource::file(&a), 4)),
        Actor::new("operator", move |ctx| {
            ctx.sleep(TTL_MS / 3);
            ctx.break_lease(&Resource::file(&b_broken));
        }),
        Actor::new("B", move |ctx| {
            ctx.sleep(TTL_MS / 2);
            if let Some(lease) = ctx.acquire(&Resource::file(&b_claimed), TTL_MS, TTL_MS) {
                ctx.check(&lease);
                ctx.release(&lease);
            }
        }),
    ]
}

fn rename_revival(setup: &Setup) -> Vec<Actor> {
    let a = setup.dir.join("a.txt");
    let b = setup.dir.join("b.txt");
    let tmp = setup.dir.join("a.txt.tmp");
    let _ = fs::write(&a, b"old");
    let (a_a, a_e, b_e) = (a.clone(), a, b.clone());
    vec![
        Actor::new("A", move |ctx| {
            checked_rounds(ctx, &Resource::file(&a_a), 5)
        }),
        Actor::new("files", move |ctx| {
            ctx.sleep(TTL_MS / 20);
            ctx.env("write a.txt.tmp", || fs::write(&tmp, b"new"));
            ctx.env("rename a.txt.tmp over a.txt (new inode)", || {
                fs::rename(&tmp, &a_e)
            });
            ctx.env("hard-link a.txt as b.txt", || fs::hard_link(&a_e, &b_e));
        }),
        Actor::new("B", move |ctx| {
            ctx.sleep(TTL_MS / 10);
            if let Some(lease) = ctx.acquire(&Resource::file(&b), TTL_MS, TTL_MS) {
                ctx.check(&lease);
                ctx.sleep(TTL_MS / 3);
                ctx.release(&lease);
            }
        }),
    ]
}

fn file_contention(setup: &Setup) -> Vec<Actor> {
    let a = setup.dir.join("a.txt");
    let b = setup.dir.join("b.txt");
    let _ = fs::write(&a, b"x");
    let _ = fs::hard_link(&a, &b);
    let contender = |path: std::path::PathBuf, renewals: usize| {
        move |ctx: &super::Ctx| {
            ctx.hold(&Resource::file(&path), TTL_MS, renewals);
        }
    };
    vec![
        Actor::new("via-a", contender(a, 2)),
        Actor::new("via-b", contender(b, 1)),
    ]
}

/// The processes running on the local host of the `dead_holder` schedule, and a
/// probe that answers like the operating system would: a pid it does not know is
/// gone (it cannot know another host's pids, which is why the protocol must compare
/// hosts first).
#[derive(Debug)]
struct ModelLiveness {
    this: ProcessEvidence,
    running: Arc<Mutex<HashSet<u32>>>,
}

impl Liveness for ModelLiveness {
    fn this_process(&self) -> Option<ProcessEvidence> {
        Some(self.this.clone())
    }
    fn verdict(&self, evidence: &ProcessEvidence) -> Verdict {
        let running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        if running.contains(&evidence.pid) {
            Verdict::Running
        } else {
            Verdict::Gone
        }
    }
    // Process groups share the table with pids: a group runs while its id is in it.
    fn group_verdict(&self, group: u32) -> Verdict {
        let running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        if running.contains(&group) {
            Verdict::Running
        } else {
            Verdict::Gone
        }
    }
}

fn evidence(host: &str, pid: u32) -> ProcessEvidence {
    ProcessEvidence {
        host: host.into(),
        boot: "boot-1".into(),
        pid,
        start: 1,
        group: None,
    }
}

fn dead_holder(_: &Setup) -> Vec<Actor> {
    // Local pids 3 (the holder that dies) and 4 (the waiter) run; pid 2 runs on
    // another host, so the local process table does not have it.
    let running = Arc::new(Mutex::new(HashSet::from([3, 4])));
    let probe = |host: &str, pid: u32, running: &Arc<Mutex<HashSet<u32>>>| ModelLiveness {
        this: evidence(host, pid),
        running: Arc::clone(running),
    };
    let tied = |ctx: &super::Ctx| {
        AcquireOptions::new(TTL_MS)
            .owner(ctx.name().to_string())
            .tied_to_process(true)
    };
    let (remote, local, waiter) = (
        probe("remote-host", 2, &running),
        probe("local-host", 3, &running),
        probe("local-host", 4, &running),
    );
    let dying = Arc::clone(&running);
    vec![
        Actor::new("remote", move |ctx| {
            // Alive on its own host, renewing: never to be taken over early.
            let ctx = ctx.with_store(ctx.store.clone().with_liveness(remote));
            let Some(mut lease) = ctx.acquire_with(&lock(), &tied(&ctx)) else {
                return;
            };
            if ctx.keep(&mut lease, 4) {
                ctx.release(&lease);
            }
        }),
        Actor::new("local", move |ctx| {
            let ctx = ctx.with_store(ctx.store.clone().with_liveness(local));
            let options = tied(&ctx).wait_ms(4 * TTL_MS);
            let Some(mut lease) = ctx.acquire_with(&lock(), &options) else {
                return;
            };
            if ctx.keep(&mut lease, 1) {
                // SIGKILL: the process is gone, its lease is not released.
                dying.lock().unwrap_or_else(|e| e.into_inner()).remove(&3);
                ctx.die(&lease);
            }
        }),
        Actor::new("waiter", move |ctx| {
            let ctx = ctx.with_store(ctx.store.clone().with_liveness(waiter));
            for _ in 0..3 {
                let options = tied(&ctx).wait_ms(3 * TTL_MS);
                if let Some(lease) = ctx.acquire_with(&lock(), &options) {
                    ctx.check(&lease);
                    ctx.release(&lease);
                }
            }
        }),
    ]
}

/// A lease one actor hands to others: its token is public (status shows it), its
/// handle only to the holder's own processes.
type Slot = Arc<Mutex<Option<Lease>>>;

fn publish(slot: &Slot, lease: &Lease) {
    *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(lease.clone());
}

fn published(slot: &Slot) -> Option<Lease> {
    slot.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// A handle with `token` and a secret that is not that tenure's.
fn forged(token: u64, secret: &Secret) -> LeaseHandle {
    LeaseHandle::new(token, secret.clone())
}

fn wrong_secret() -> Secret {
    "5".repeat(32).parse().expect("32 hex digits are a secret")
}

fn forged_handle(_: &Setup) -> Vec<Actor> {
    let slot: Slot = Arc::default();
    let (second, forger) = (Arc::clone(&slot), Arc::clone(&slot));
    vec![
        Actor::new("holder", move |ctx| {
            let Some(mut lease) = ctx.acquire(&lock(), TTL_MS, 0) else {
                return;
            };
            publish(&slot, &lease);
            if ctx.keep(&mut lease, 4) {
                ctx.release(&lease);
            }
        }),
        // Another process of the same holder (a CLI `renew` given the handle).
        Actor::new("second", move |ctx| {
            ctx.sleep(TTL_MS / 5);
            let Some(handle) = published(&second).map(|l| l.handle()) else {
                return;
            };
            if let Some(mut lease) = ctx.resume(&lock(), &handle) {
                ctx.renew(&mut lease);
                ctx.sleep(TTL_MS / 3);
                ctx.renew(&mut lease);
            }
        }),
        // Someone who saw the token in `status` and makes up a secret.
        Actor::new("forger", move |ctx| {
            for _ in 0..3 {
                ctx.sleep(TTL_MS / 4);
                let Some(token) = published(&forger).map(|l| l.token()) else {
                    continue;
                };
                if let Some(mut lease) = ctx.resume(&lock(), &forged(token, &wrong_secret())) {
                    ctx.renew(&mut lease);
                    ctx.release(&lease);
                }
            }
        }),
    ]
}

fn stale_handle(_: &Setup) -> Vec<Actor> {
    let (old_slot, new_slot): (Slot, Slot) = (Arc::default(), Arc::default());
    let (old_mixer, new_mixer) = (Arc::clone(&old_slot), Arc::clone(&new_slot));
    vec![
        Actor::new("old", move |ctx| {
            let Some(mut lease) = ctx.acquire(&lock(), TTL_MS, 0) else {
                return;
            };
            publish(&old_slot, &lease);
            // Stalls past its ttl (a suspended laptop), then acts on what it has.
            ctx.sleep(TTL_MS + TTL_MS / 5);
            ctx.check(&lease);
            ctx.renew(&mut lease);
            ctx.release(&lease);
            if let Some(mut resumed) = ctx.resume(&lock(), &lease.handle()) {
                ctx.renew(&mut resumed);
                ctx.release(&resumed);
            }
        }),
        Actor::new("new", move |ctx| {
            ctx.sleep(TTL_MS / 10);
            let Some(mut lease) = ctx.acquire(&lock(), TTL_MS, 2 * TTL_MS) else {
                return;
            };
            publish(&new_slot, &lease);
            if ctx.keep(&mut lease, 3) {
                ctx.release(&lease);
            }
        }),
        // The current token with the stale tenure's secret.
        Actor::new("mixer", move |ctx| {
            for _ in 0..4 {
                ctx.sleep(TTL_MS / 3);
                let (Some(old), Some(new)) = (published(&old_mixer), published(&new_mixer)) else {
                    continue;
                };
                let handle = forged(new.token(), old.secret());
                if let Some(mut lease) = ctx.resume(&lock(), &handle) {
                    ctx.renew(&mut lease);
                    ctx.release(&lease);
                }
            }
        }),
    ]
}

fn break_race(_: &Setup) -> Vec<Actor> {
    let slot: Slot = Arc::default();
    let late = Arc::clone(&slot);
    vec![
        Actor::new("holder", move |ctx| {
            let Some(mut lease) = ctx.acquire(&lock(), TTL_MS, 0) else {
                return;
            };
            publish(&slot, &lease);
            if ctx.keep(&mut lease, 4) {
                ctx.release(&lease);
            } else {
                ctx.check(&lease);
            }
        }),
        Actor::new("operator", |ctx| {
            ctx.sleep(TTL_MS / 3);
            ctx.break_lease(&lock());
            ctx.sleep(TTL_MS / 2);
            ctx.break_lease(&lock());
        }),
        Actor::new("claimer", |ctx| {
            ctx.sleep(TTL_MS / 4);
            if let Some(mut lease) = ctx.acquire(&lock(), TTL_MS, 2 * TTL_MS) {
                ctx.check(&lease);
                if ctx.keep(&mut lease, 1) {
                    ctx.release(&lease);
                }
            }
        }),
        // A fresh process after a power cut (or once everyone finished): the
        // broken token must not pass again, and numbering continues above it.
        Actor::late("restart", move |ctx| {
            if let Some(broken) = published(&late) {
                ctx.check(&broken);
            }
            if let Some(lease) = ctx.acquire(&lock(), TTL_MS, 2 * TTL_MS) {
                ctx.check(&lease);
                ctx.release(&lease);
            }
        }),
    ]
}

fn break_renewal(_: &Setup) -> Vec<Actor> {
    vec![
        // Claims again after each break, so every break has a tenure to race.
        Actor::new("holder", |ctx| {
            for _ in 0..3 {
                let Some(mut lease) = ctx.acquire(&lock(), TTL_MS, TTL_MS) else {
                    continue;
                };
                if ctx.keep(&mut lease, 3) {
                    ctx.release(&lease);
                } else {
                    ctx.check(&lease);
                }
            }
        }),
        Actor::new("operator", |ctx| {
            for _ in 0..3 {
                ctx.sleep(TTL_MS / 3);
                ctx.break_lease(&lock());
            }
        }),
    ]
}

fn subtree_race(setup: &Setup) -> Vec<Actor> {
    let src = setup.dir.join("src");
    let file = src.join("auth").join("new.rs");
    let (src_tree, src_late, top) = (src.clone(), src, setup.dir.clone());
    vec![
        Actor::new("tree", move |ctx| {
            ctx.hold(&Resource::dir(&src_tree), 2 * TTL_MS, 2);
        }),
        Actor::new("file", move |ctx| {
            ctx.hold(&Resource::file(&file), 2 * TTL_MS, 2);
        }),
        Actor::new("outer", move |ctx| {
            ctx.sleep(TTL_MS / 10);
            if let Some(lease) = ctx.acquire(&Resource::dir(&top), TTL_MS, TTL_MS) {
                ctx.check(&lease);
                ctx.release(&lease);
            }
        }),
        Actor::late("restart", move |ctx| {
            if let Some(lease) = ctx.acquire(&Resource::dir(&src_late), TTL_MS, 2 * TTL_MS) {
                ctx.check(&lease);
                ctx.release(&lease);
            }
        }),
    ]
}
