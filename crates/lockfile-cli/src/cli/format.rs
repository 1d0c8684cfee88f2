//! How `inspect` prints (`--format`) and where (`--output`).

use std::path::PathBuf;

use clap::{Args, ValueEnum};

/// How `inspect` prints, and where.
#[derive(Debug, Args)]
pub struct FormatArgs {
    /// How to print: an aligned table (the default), a JSON array with one
    /// object per lock file, or samples in the Prometheus text format (for
    /// node_exporter's textfile collector).
    #[arg(long, value_enum, value_name = "FORMAT", conflicts_with = "json")]
    pub format: Option<Format>,

    /// Write the result to FILE instead of stdout, atomically (a temporary
    /// file, then a rename) and with mode 0644, whatever the exit status.
    /// FILE must be a regular file or absent: a FIFO, symlink or directory
    /// there is refused, and left as it is.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Json,
    Prometheus,
}
