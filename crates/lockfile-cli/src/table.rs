//! The aligned tables of `inspect`, for lock files and for leases alike.

/// Prints rows as left-aligned columns, each followed by its note lines.
pub(crate) fn print_aligned<const N: usize>(rows: &[[String; N]], notes: &[Vec<String>]) {
    let widths: Vec<usize> = (0..N)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    for (i, row) in rows.iter().enumerate() {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        outln!("{}", line.join("  ").trim_end());
        for note in notes.get(i).into_iter().flatten() {
            outln!("{note}");
        }
    }
}
