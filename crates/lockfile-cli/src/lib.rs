//! The `lockfile` command's definition: its clap command line (`cli/`) and
//! its exit statuses (`exit.rs`).
//!
//! A library so that the workspace's documentation generator
//! (`crates/lockfile-docgen`) makes the man page and the shell completions
//! from the very definition that prints `--help`, while the `lockfile`
//! binary carries no generator. It is not an API: the command (`main.rs`)
//! is its one user, and it changes with the command. Use the `lockfile`
//! crate for locks.

pub mod cli;
pub mod exit;
