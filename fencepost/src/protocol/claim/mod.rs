//! The composition of keys into a claim (docs/design-04-claims.md).

mod acquire;
mod end;
mod renew;
mod session;

pub use session::check_session;
mod verify;
