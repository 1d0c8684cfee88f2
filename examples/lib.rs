//! What the examples and the fault tests share: a resource that checks
//! fencing tokens ([`FencedStore`]), whatever engine handed them out.

mod fenced_store;

pub use fenced_store::{FencedStore, FencedWrite, StoreError};
