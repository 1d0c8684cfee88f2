//! The aligned tables of `inspect`, for lock files and for leases alike.

use std::fmt::Write as _;

/// Rows as left-aligned columns, each followed by its note lines. Cells and
/// notes hold others' data (hosts, jobs, paths, process names), which the
/// caller escaped as it put them in (`term::escape`, `term::path`, the
/// library's messages): each is a line for the terminal (`term::line`).
pub(crate) fn aligned<const N: usize>(rows: &[[String; N]], notes: &[Vec<String>]) -> String {
    let rows: Vec<[String; N]> = rows
        .iter()
        .map(|row| {
            row.clone()
                .map(|cell| crate::term::line(&cell).into_owned())
        })
        .collect();
    let widths: Vec<usize> = (0..N)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut text = String::new();
    for (i, row) in rows.iter().enumerate() {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        let _ = writeln!(text, "{}", line.join("  ").trim_end());
        for note in notes.get(i).into_iter().flatten() {
            let _ = writeln!(text, "{}", crate::term::line(note));
        }
    }
    text
}
