//! The random token that names one run.

use uuid::Uuid;

/// A fresh random (version 4) token.
///
/// One `getrandom` per thread seeds a 128-bit key; each token then mixes the
/// key with a counter through the SplitMix64 finaliser. Tokens identify runs,
/// they guard no secret, and this keeps a syscall off the lock's hot path.
/// The seed is re-drawn in a forked child, which would otherwise repeat its
/// parent's tokens.
pub(super) fn new_token(pid: u32) -> Uuid {
    use std::cell::Cell;
    thread_local! {
        static STATE: Cell<Option<(u32, u128, u64)>> = const { Cell::new(None) };
    }
    fn mix(mut z: u64) -> u64 {
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    STATE.with(|state| {
        let (key, counter) = match state.get() {
            Some((p, key, counter)) if p == pid => (key, counter.wrapping_add(1)),
            _ => (Uuid::new_v4().as_u128(), 0),
        };
        state.set(Some((pid, key, counter)));
        let step = counter.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let hi = mix((key >> 64) as u64 ^ step);
        let lo = mix((key as u64).wrapping_add(step));
        uuid::Builder::from_random_bytes((u128::from(hi) << 64 | u128::from(lo)).to_be_bytes())
            .into_uuid()
    })
}
