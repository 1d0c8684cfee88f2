//! The owner record: who holds (or last held) a lock, for humans and health checks.
//!
//! The record is diagnostics, never enforcement. Exclusion comes from the kernel
//! lock; the record only answers "who, where, since when" and lets `inspect`
//! recognise the litter a dead owner left behind.
//!
//! This module only gathers its parts; each file holds one of them, and they
//! depend on one another in one direction: `owner` on the fields, `document`
//! on `owner`, `decode` on `document`.

mod decode;
mod document;
mod error;
mod fields;
mod owner;
mod read;
mod seconds;
mod slot;
mod token;

#[cfg(test)]
mod fixtures;

pub use decode::decode_record;
pub use document::FORMAT_VERSION;
pub(crate) use document::{LockDocument, RELEASED_FLAG_OFFSET, RELEASED_TRUE, peek};
pub use error::DecodeError;
pub use fields::{Evicted, HeartbeatSource, Release};
pub use owner::OwnerRecord;
pub(crate) use read::{MAX_RECORD_BYTES, SmallRead, read_content};
pub use slot::Slot;

#[cfg(test)]
mod tests;
