//! The fenced store on its own: no lease, no server.

use lockfile_examples::{FencedStore, StoreError};

#[test]
fn a_paused_holders_late_write_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = FencedStore::new(dir.path().join("report.json"));
    store.write(7, "from holder 7").unwrap();
    store.write(9, "from holder 9").unwrap();
    // Holder 7 wakes up from a long pause and writes: refused.
    let err = store.write(7, "late").unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Fenced {
                token: 7,
                highest: 9,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(store.value().unwrap().as_deref(), Some("from holder 9"));
}

#[test]
fn accepts_equal_and_higher_tokens_and_rejects_lower_ones() {
    let dir = tempfile::tempdir().unwrap();
    let store = FencedStore::new(dir.path().join("s.json"));
    assert_eq!(store.highest_token().unwrap(), 0);
    assert_eq!(store.value().unwrap(), None);
    store.write(5, "a").unwrap();
    store.write(5, "b").unwrap();
    store.write(8, "c").unwrap();
    let err = store.write(6, "late").unwrap_err();
    assert!(
        err.to_string()
            .contains("rejected a write with fencing token 6: it already accepted token 8"),
        "{err}"
    );
    assert_eq!(store.highest_token().unwrap(), 8);
    let tokens: Vec<u64> = store.history().unwrap().iter().map(|w| w.token).collect();
    assert_eq!(tokens, [5, 5, 8]);
}

#[test]
fn busy_while_a_writer_holds_its_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.json");
    let store = FencedStore::new(&path);
    assert!(!store.busy().unwrap());
    let lock = lockfile::LockGuard::acquire(dir.path().join("s.json.lock")).unwrap();
    assert!(store.busy().unwrap());
    drop(lock);
    assert!(!store.busy().unwrap());
    store.write(1, "x").unwrap();
}

#[test]
fn a_corrupt_store_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.json");
    std::fs::write(&path, b"not json").unwrap();
    let err = FencedStore::new(&path).write(1, "x").unwrap_err();
    assert!(matches!(err, StoreError::Io { op: "read", .. }), "{err:?}");
    assert!(
        err.to_string().starts_with("cannot read fenced store `"),
        "{err}"
    );
}
