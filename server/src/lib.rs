#![doc = include_str!("../README.md")]
//!
//! # As a library
//!
//! The binary is a thin wrapper over [`FencepostServer`]: open it with a
//! [`Config`] and serve it on any rmcp transport; [`Confinement`] is the path check
//! `write` and `file` claims use.

#![warn(missing_docs)]

mod args;
pub mod confine;
mod server;
mod store;
pub mod transport;
mod write;

pub use confine::{Confinement, Refusal};
pub use server::{Config, FencepostServer, StartError};
