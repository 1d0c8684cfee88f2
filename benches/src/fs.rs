//! The filesystem the lock files of a run live on, for the reports'
//! headers.

use std::io;
use std::path::Path;

/// The filesystem at `path`: its type from the mount table when it can be
/// found (else from the statfs magic number, for the common ones), and the
/// magic number itself, which is what the kernel reports.
///
/// # Errors
///
/// When statfs fails on `path`.
pub fn filesystem_of(path: &Path) -> io::Result<String> {
    let magic = rustix::fs::statfs(path)?.f_type as u64;
    let name = mount_type(path).unwrap_or_else(|| {
        match magic {
            0xef53 => "ext4",
            0x0102_1994 => "tmpfs",
            0x5846_5342 => "xfs",
            0x9123_683e => "btrfs",
            0x794c_7630 => "overlayfs",
            _ => "a filesystem",
        }
        .to_owned()
    });
    Ok(format!("{name} (statfs magic {magic:#x})"))
}

/// The type of the mount that holds `path`: the longest mount point that is
/// a prefix of it in /proc/self/mounts.
fn mount_type(path: &Path) -> Option<String> {
    let path = path.canonicalize().ok()?;
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts
        .lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let (_dev, point, kind) = (f.next()?, f.next()?, f.next()?);
            path.starts_with(point)
                .then(|| (point.len(), kind.to_owned()))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, kind)| kind)
}
