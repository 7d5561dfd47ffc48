//! Not an API. The `fencepost` command line is a binary; this empty library target
//! exists only so that the package can name itself as a dev-dependency with the
//! `test-child` feature, which is how its own tests (and nothing else) get the
//! `fencepost-test-child` binary (tests/child/main.rs).
