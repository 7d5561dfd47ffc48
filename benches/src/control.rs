//! The CPU control: a fixed piece of work that runs no fencepost code, timed beside
//! the memory rows so that RESULTS.md shows how fast the CPU was while they ran.
//!
//! Why: the memory rows are pure CPU, and on the 2-core VM the bench was written on
//! the CPU has spells (from milliseconds to over a second; in a fresh process that
//! did no disk work too, with nothing else running in the VM) in which code that
//! loads from memory, branches or allocates runs slower while a loop in registers
//! does not: most likely the physical core is shared outside the VM. A spell over
//! half of the cold acquire + release row moves its p50 well past its target (the
//! row's note in RESULTS.md gives the figures of each run). What the fs rows leave
//! behind was ruled
//! out: their stores' removal threads are joined before the memory rows (the process
//! has one thread then), and a thread writing and fsyncing on the other core, or
//! streaming through 32 MiB, does not slow the row. So the bench times this control
//! before the first row, at every step and after every block of the memory row, and
//! RESULTS.md says what it saw (`rows::Weather`).

use std::cell::RefCell;
use std::time::{Duration, Instant};

use crate::stats::summarize;

/// Entries of the control's random cycle (8 bytes each: 512 KiB).
const CYCLE: usize = 1 << 16;

/// Runs of the control in a reference block.
pub const BLOCK: usize = 100;

/// The control: a sort of 256 numbers and 500 steps of a random walk through
/// 512 KiB. It allocates nothing once built, so it leaves the rows' heap as it was.
pub struct Control {
    next: Vec<usize>,
    numbers: [u32; 256],
    x: u64,
    at: usize,
    /// The fastest block p50 seen so far in this run.
    fastest: Option<Duration>,
    /// How many blocks were timed.
    blocks: usize,
}

impl Control {
    fn new() -> Control {
        let mut control = Control {
            next: vec![0; CYCLE],
            numbers: [0; 256],
            x: 0x9e37_79b9_7f4a_7c15,
            at: 0,
            fastest: None,
            blocks: 0,
        };
        let mut cycle: Vec<usize> = (0..CYCLE).collect();
        for i in (1..CYCLE).rev() {
            let j = (control.random() % (i as u64 + 1)) as usize;
            cycle.swap(i, j);
        }
        for w in 0..CYCLE {
            control.next[cycle[w]] = cycle[(w + 1) % CYCLE];
        }
        control
    }

    fn random(&mut self) -> u64 {
        self.x ^= self.x << 13;
        self.x ^= self.x >> 7;
        self.x ^= self.x << 17;
        self.x
    }

    /// One timed run.
    pub fn run(&mut self) -> Duration {
        let start = Instant::now();
        for i in 0..self.numbers.len() {
            self.numbers[i] = self.random() as u32;
        }
        self.numbers.sort_unstable();
        for _ in 0..500 {
            self.at = self.next[self.at];
        }
        std::hint::black_box((&self.numbers, self.at));
        start.elapsed()
    }

    /// `n` timed runs as one block: their p50, which also counts towards
    /// [`Control::fastest`].
    pub fn block(&mut self, n: usize) -> (Duration, Vec<Duration>) {
        let samples: Vec<Duration> = (0..n).map(|_| self.run()).collect();
        let p50 = summarize(samples.clone()).p50;
        self.fastest = Some(self.fastest.map_or(p50, |f| f.min(p50)));
        self.blocks += 1;
        (p50, samples)
    }

    /// The fastest block p50 so far, and how many blocks were timed.
    pub fn fastest(&self) -> (Option<Duration>, usize) {
        (self.fastest, self.blocks)
    }
}

thread_local! {
    static CONTROL: RefCell<Option<Control>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's control (built on first use).
pub fn with<T>(f: impl FnOnce(&mut Control) -> T) -> T {
    CONTROL.with(|c| f(c.borrow_mut().get_or_insert_with(Control::new)))
}

/// One reference block, e.g. at each step of the run.
pub fn sample() {
    with(|c| c.block(BLOCK));
}
