//! The behaviour suite every fencepost [`LeaseStore`] backend runs: the executable
//! form of docs/protocol.md §3–§4.
//!
//! A backend author describes the backend once and hands it to [`run`], from a test
//! target with `harness = false`. Each scenario becomes one named test (filterable
//! like any `cargo test` name); a scenario the backend cannot run (for example a
//! cross-process one for an in-process backend) is listed as **ignored, not
//! applicable** with the capability it lacks, so nothing passes by being absent.
//!
//! ```toml
//! # Cargo.toml of your backend
//! [[test]]
//! name = "conformance"
//! harness = false
//! ```
//!
//! ```no_run
//! // tests/conformance.rs: the whole suite for a backend shared across processes.
//! # mod my_backend { pub use fencepost_memory::MemoryStore as Store;
//! #   pub fn open(_: &str) -> Result<Store, fencepost::BackendError> { Ok(Store::new()) } }
//! use fencepost_conformance::{Backend, run};
//! fn main() {
//!     run(Backend::shared("my-backend", my_backend::open));
//! }
//! ```
//!
//! [`Backend::shared`] gives every scenario a fresh store: the suite passes `open` a
//! locator naming an empty scratch directory (override it with
//! [`Backend::with_fresh_locator`] for stores that are not directories), and worker
//! processes re-run the same test binary and `open` the same locator. An in-process
//! backend uses [`Backend::in_process`] instead. Capabilities such as power-cut
//! simulation are declared with builder methods.
//!
//! Every scenario must fail against a broken backend; the crate's own tests run the
//! suite against mutant backends (a create that is not exclusive, a backend that
//! loses the newest record, one that reorders listings) and show which scenario
//! catches each.

#![warn(missing_docs)]

pub mod checker;
mod scenarios;
mod worker;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use fencepost::{BackendError, Clock, LeaseStore, Store};
pub use libtest_mimic::Failed;

pub use scenarios::{SCENARIOS, Scenario, ScenarioFn};

/// Environment variable that puts a re-executed test binary in worker mode.
pub const WORKER_ENV: &str = "FENCEPOST_CONFORMANCE_WORKER";

/// What a backend offers. Scenarios that need a capability the backend lacks are
/// reported as not applicable, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Capabilities {
    /// Separate processes opening the same locator see one store (process
    /// contention, hard kill, kill during a claim).
    pub shared_across_processes: bool,
    /// The suite can simulate a power cut that drops unflushed creates.
    pub power_cut: bool,
}

/// One capability, as named in "not applicable" reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requirement {
    /// Runs on every backend.
    None,
    /// Needs [`Capabilities::shared_across_processes`].
    SharedAcrossProcesses,
    /// Needs [`Capabilities::power_cut`].
    PowerCut,
}

type OpenFn<S> = Arc<dyn Fn(&str) -> Result<S, BackendError> + Send + Sync>;
type FreshFn = Arc<dyn Fn(&Path) -> String + Send + Sync>;
type PowerCutFn<S> = Arc<dyn Fn(&S) -> usize + Send + Sync>;

/// How the suite creates, opens and (optionally) power-cuts a backend.
pub struct Backend<S> {
    name: String,
    open: OpenFn<S>,
    fresh: FreshFn,
    capabilities: Capabilities,
    power_cut: Option<PowerCutFn<S>>,
    in_process: Option<Arc<dyn Fn() -> S + Send + Sync>>,
}

impl<S> Clone for Backend<S> {
    fn clone(&self) -> Self {
        Backend {
            name: self.name.clone(),
            open: Arc::clone(&self.open),
            fresh: Arc::clone(&self.fresh),
            capabilities: self.capabilities,
            power_cut: self.power_cut.clone(),
            in_process: self.in_process.clone(),
        }
    }
}

impl<S: LeaseStore + Clone + 'static> Backend<S> {
    /// A backend shared across processes: `open(locator)` opens the store named by
    /// `locator`, in this process or in a worker. By default a fresh locator is the
    /// path of a not-yet-existing directory inside the scenario's scratch directory.
    pub fn shared(
        name: impl Into<String>,
        open: impl Fn(&str) -> Result<S, BackendError> + Send + Sync + 'static,
    ) -> Self {
        Backend {
            name: name.into(),
            open: Arc::new(open),
            fresh: Arc::new(|scratch: &Path| scratch.join("store").display().to_string()),
            capabilities: Capabilities {
                shared_across_processes: true,
                power_cut: false,
            },
            power_cut: None,
            in_process: None,
        }
    }

    /// A backend that lives in one process: `create()` makes a fresh, empty store;
    /// clones of it are the "other handles" scenarios open.
    pub fn in_process(
        name: impl Into<String>,
        create: impl Fn() -> S + Send + Sync + 'static,
    ) -> Self {
        let name = name.into();
        let reopen_name = name.clone();
        Backend {
            name,
            open: Arc::new(move |locator: &str| {
                Err(BackendError::new(
                    "open",
                    locator,
                    std::io::Error::other(format!("{reopen_name} is an in-process backend")),
                ))
            }),
            fresh: Arc::new(|_: &Path| String::new()),
            capabilities: Capabilities::default(),
            power_cut: None,
            in_process: Some(Arc::new(create)),
        }
    }

    /// Overrides how a fresh locator is made (for stores that are not directories:
    /// an etcd prefix, a database schema). `fresh(scratch)` must name an empty store.
    pub fn with_fresh_locator(
        mut self,
        fresh: impl Fn(&Path) -> String + Send + Sync + 'static,
    ) -> Self {
        self.fresh = Arc::new(fresh);
        self
    }

    /// Declares power-cut simulation: `cut(store)` drops every create made without
    /// a flush and returns how many it dropped.
    pub fn with_power_cut(mut self, cut: impl Fn(&S) -> usize + Send + Sync + 'static) -> Self {
        self.power_cut = Some(Arc::new(cut));
        self.capabilities.power_cut = true;
        self
    }

    /// The backend's declared capabilities.
    pub fn capabilities(&self) -> Capabilities {
        self.capabilities
    }

    fn lacks(&self, requirement: Requirement) -> Option<&'static str> {
        match requirement {
            Requirement::None => None,
            Requirement::SharedAcrossProcesses if !self.capabilities.shared_across_processes => {
                Some("not applicable: the backend is not shared across processes")
            }
            Requirement::PowerCut if !self.capabilities.power_cut => {
                Some("not applicable: the backend has no power-cut simulation")
            }
            _ => None,
        }
    }

    fn fixture(&self) -> Result<Fixture<S>, Failed> {
        let scratch = tempfile::tempdir().map_err(|e| format!("scratch directory: {e}"))?;
        let (store, locator) = match &self.in_process {
            Some(create) => (create(), None),
            None => {
                let locator = (self.fresh)(scratch.path());
                let store =
                    (self.open)(&locator).map_err(|e| format!("opening a fresh store: {e}"))?;
                (store, Some(locator))
            }
        };
        Ok(Fixture {
            backend: self.clone(),
            store,
            locator,
            scratch,
        })
    }
}

/// One scenario's world: a fresh store, a second way to reach it, and a scratch
/// directory for logs.
pub struct Fixture<S> {
    backend: Backend<S>,
    store: S,
    locator: Option<String>,
    scratch: tempfile::TempDir,
}

impl<S: LeaseStore + Clone + 'static> Fixture<S> {
    /// The protocol over this scenario's store, with the system clock.
    pub fn store(&self) -> Store {
        Store::new(self.store.clone())
    }

    /// The protocol over this scenario's store, with `clock`.
    pub fn store_with_clock(&self, clock: impl Clock + 'static) -> Store {
        Store::with_clock(self.store.clone(), clock)
    }

    /// The raw backend, for planting records the protocol would never write.
    pub fn raw(&self) -> &S {
        &self.store
    }

    /// A second, independently opened handle on the same store (a fresh `open` of
    /// the locator for shared backends; a clone for in-process ones).
    pub fn reopen(&self) -> Result<S, Failed> {
        match &self.locator {
            Some(locator) => {
                (self.backend.open)(locator).map_err(|e| format!("reopen: {e}").into())
            }
            None => Ok(self.store.clone()),
        }
    }

    /// Simulates a power cut, if the backend declared one.
    pub fn power_cut(&self) -> Option<usize> {
        self.backend.power_cut.as_ref().map(|cut| cut(&self.store))
    }

    /// The scenario's scratch directory (deleted afterwards).
    pub fn scratch(&self) -> &Path {
        self.scratch.path()
    }

    /// Starts a worker process (this test binary, re-executed) running `job` against
    /// this store.
    pub fn spawn_worker(&self, job: &worker::Job) -> Result<std::process::Child, Failed> {
        let locator = self
            .locator
            .as_ref()
            .ok_or("worker processes need a backend shared across processes")?;
        worker::spawn(locator, job)
    }

    /// A path inside the scratch directory.
    pub fn scratch_file(&self, name: &str) -> PathBuf {
        self.scratch.path().join(name)
    }
}

/// Runs the whole suite for `backend` and exits: one named test per scenario, with
/// libtest's usual filtering and flags (`cargo test -- contention`,
/// `--list`, `--ignored`). In a worker process (re-executed by a cross-process
/// scenario) runs the worker job instead.
pub fn run<S: LeaseStore + Clone + 'static>(backend: Backend<S>) -> ! {
    if let Ok(job) = std::env::var(WORKER_ENV) {
        worker::run_job(&job, |locator| {
            (backend.open)(locator).map(|s| Store::new(s))
        });
    }
    let arguments = libtest_mimic::Arguments::from_args();
    let trials = trials(&backend);
    libtest_mimic::run(&arguments, trials).exit()
}

/// Runs `trials` (from [`trials`], for one or several backends) with libtest's usual
/// flags, and exits. A binary that mixes backends must still call [`run`] for its
/// shared backend first when [`WORKER_ENV`] is set, so worker processes work.
pub fn run_trials(trials: Vec<libtest_mimic::Trial>) -> ! {
    libtest_mimic::run(&libtest_mimic::Arguments::from_args(), trials).exit()
}

/// The suite as trials, for callers that combine it with their own tests or run it
/// under another runner.
pub fn trials<S: LeaseStore + Clone + 'static>(backend: &Backend<S>) -> Vec<libtest_mimic::Trial> {
    SCENARIOS
        .iter()
        .map(|scenario| {
            let name = format!("{}::{}", backend.name, scenario.name);
            let reason = backend.lacks(scenario.requirement);
            let backend = backend.clone();
            let body = scenario.run::<S>();
            libtest_mimic::Trial::ignorable_test(name, move || {
                if let Some(reason) = reason {
                    return Ok(libtest_mimic::Completion::ignored_with(reason));
                }
                let fixture = backend.fixture()?;
                body(&fixture).map(|()| libtest_mimic::Completion::Completed)
            })
        })
        .collect()
}

/// Runs one scenario by name against `backend` and returns its outcome; `Ok(false)`
/// when it is not applicable. Used by the crate's mutant tests.
pub fn run_scenario<S: LeaseStore + Clone + 'static>(
    backend: &Backend<S>,
    name: &str,
) -> Result<bool, Failed> {
    let scenario = SCENARIOS
        .iter()
        .find(|s| s.name == name)
        .ok_or_else(|| format!("no scenario named {name}"))?;
    if backend.lacks(scenario.requirement).is_some() {
        return Ok(false);
    }
    let fixture = backend.fixture()?;
    (scenario.run::<S>())(&fixture).map(|()| true)
}

pub use worker::Job;
