//! The crate's one error type. Every message names the operation and the path.

// Its parts, each in a file of its own: the variants of `Error` together
// with `EvictionRefused`, which a contention error carries and which carries
// an error in turn (one type, in two enums); the `Operation` a message
// names; what a caller asks of an error; and the way between `io::Error`
// and this one.

mod io;
mod operation;
mod query;
mod variants;
mod wording;

pub use operation::Operation;
pub use variants::{Error, EvictionRefused};

/// A `Result` whose error is this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests;
