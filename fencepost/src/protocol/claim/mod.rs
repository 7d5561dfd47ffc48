//! The composition of keys into a claim (docs/design-04-claims.md).

mod acquire;
mod beside;
mod end;
mod links;
mod participants;
mod renew;
mod session;
mod several;
mod shared;
mod slots;
mod subtree;
mod verify;

pub use beside::{BESIDE_POLL_MS, Beside};
pub use session::check_session;
pub use several::TryAcquireAll;
pub use slots::SLOTS_MAX;
