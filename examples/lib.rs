//! What the examples and the fault tests share: a resource that checks
//! fencing tokens ([`FencedStore`]), whatever engine handed them out; and
//! a service that leads through an election and writes through a fence
//! ([`service`]).

mod fenced_store;
pub mod service;

pub use fenced_store::{FencedStore, FencedWrite, StoreError};
