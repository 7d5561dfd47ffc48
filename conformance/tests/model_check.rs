//! The randomized model check (docs/protocol.md §3.1 invariants after every step).
//! Default: 10,000+ operations. Stress: FENCEPOST_MODEL_OPS=1000000.
//! Replay one seed: FENCEPOST_MODEL_SEED=<seed>.

mod model;

const STEPS_PER_SEED: usize = 500;

#[test]
fn protocol_holds_its_invariants_under_random_histories() {
    let (first, seeds) = match std::env::var("FENCEPOST_MODEL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        Some(seed) => (seed, 1),
        None => {
            let ops: u64 = std::env::var("FENCEPOST_MODEL_OPS")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(10_000);
            (1, ops.div_ceil(STEPS_PER_SEED as u64))
        }
    };
    match model::explore(first, seeds, STEPS_PER_SEED) {
        Ok(ops) => {
            assert!(
                ops >= seeds * STEPS_PER_SEED as u64,
                "explored only {ops} operations"
            );
            eprintln!("model check: {ops} operations over {seeds} seeds, invariants held");
        }
        Err(report) => panic!("{report}"),
    }
}

#[test]
fn histories_are_reproducible_from_their_seed() {
    assert_eq!(model::generate(42, 200), model::generate(42, 200));
    assert_ne!(model::generate(42, 200), model::generate(43, 200));
}
