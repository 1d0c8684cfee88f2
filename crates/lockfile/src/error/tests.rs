use super::*;

use std::io;
use std::path::Path;

#[test]
fn messages_name_the_operation_and_the_path() {
    let e = Error::from_io(
        Operation::Write,
        Path::new("/x/y.lock"),
        io::Error::from_raw_os_error(libc::ENOSPC),
    );
    assert_eq!(
        e.to_string(),
        "cannot write owner record to `/x/y.lock`: no space left on the filesystem"
    );
    let e = Error::from_io(
        Operation::Open,
        Path::new("/no/such/dir/y.lock"),
        io::Error::from_raw_os_error(libc::ENOENT),
    );
    assert!(matches!(e, Error::DirectoryNotFound { .. }), "{e:?}");
    assert!(
        e.to_string().contains("`/no/such/dir` does not exist"),
        "{e}"
    );
    let e = Error::from_io(
        Operation::Open,
        Path::new("/etc/passwd/x.lock"),
        io::Error::from_raw_os_error(libc::ENOTDIR),
    );
    assert!(matches!(e, Error::NotADirectory { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "cannot open lock file `/etc/passwd/x.lock`: `/etc/passwd` is not a directory (a lock file's directory must be one)"
    );
    let e = Error::from_io(
        Operation::Open,
        Path::new("/proc/y.lock"),
        io::Error::from_raw_os_error(libc::EACCES),
    );
    assert!(e.to_string().contains("permission denied for euid"), "{e}");
    assert_eq!(e.path(), Path::new("/proc/y.lock"));
    let e = Error::from_io(
        Operation::Lock,
        Path::new("/nfs/y.lock"),
        io::Error::from_raw_os_error(libc::ENOLCK),
    );
    assert!(matches!(e, Error::LockUnsupported { .. }));
    assert!(!e.is_contended());
}

#[test]
fn every_error_from_the_kernel_keeps_it_as_its_source() {
    use std::error::Error as _;
    for errno in [
        libc::ENOENT,
        libc::EACCES,
        libc::EROFS,
        libc::ENOSPC,
        libc::ENOLCK,
        libc::ELOOP,
        libc::EIO,
    ] {
        let e = Error::from_io(
            Operation::Open,
            Path::new("/x/y.lock"),
            io::Error::from_raw_os_error(errno),
        );
        let source = e.source().and_then(|s| s.downcast_ref::<io::Error>());
        assert_eq!(
            source.and_then(io::Error::raw_os_error),
            Some(errno),
            "{e:?}"
        );
    }
}

#[test]
fn an_error_converts_into_an_io_error_of_the_closest_kind() {
    let e = Error::from_io(
        Operation::Write,
        Path::new("/x/y.lock"),
        io::Error::from_raw_os_error(libc::ENOSPC),
    );
    let message = e.to_string();
    let io: io::Error = e.into();
    assert_eq!(io.kind(), io::ErrorKind::StorageFull);
    assert_eq!(io.to_string(), message);
    let contended: io::Error = Error::Contended {
        path: "/x/y.lock".into(),
        owner: None,
        holders: Vec::new(),
        not_evicted: None,
    }
    .into();
    assert_eq!(contended.kind(), io::ErrorKind::WouldBlock);
}
