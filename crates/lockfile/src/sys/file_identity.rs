//! Which file a descriptor or a name refers to, and what kind of file.

/// What the lock's hot path needs to know of a file: which one it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Identity {
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    pub(crate) kind: rustix::fs::FileType,
    /// How many names the file has: 0 once it was unlinked or renamed over.
    pub(crate) links: u64,
    /// Its owner: a file in a shared sticky directory may be planted.
    pub(crate) uid: u32,
    /// Its length in bytes: a regular file longer than any record of ours
    /// is someone else's, whatever its first bytes say.
    pub(crate) size: u64,
}

impl Identity {
    pub(crate) fn is_regular(&self) -> bool {
        self.kind == rustix::fs::FileType::RegularFile
    }

    pub(crate) fn is_dir(&self) -> bool {
        self.kind == rustix::fs::FileType::Directory
    }

    pub(crate) fn same_file(&self, other: &Identity) -> bool {
        self.dev == other.dev && self.ino == other.ino
    }
}

/// The kind of a file that is not a regular file, for error messages.
pub(crate) fn file_kind(kind: rustix::fs::FileType) -> &'static str {
    use rustix::fs::FileType;
    match kind {
        FileType::Directory => "directory",
        FileType::Symlink => "symbolic link",
        FileType::Fifo => "FIFO",
        FileType::Socket => "socket",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        FileType::RegularFile => "regular file",
        _ => "special file",
    }
}
