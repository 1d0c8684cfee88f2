//! A benchmark's report as it is written: Markdown lines, and the targets
//! the run missed, said together at its end.

use std::time::Duration;

use crate::format::verdict;

/// The report's text so far, and the targets it found missed.
#[derive(Debug, Default)]
pub struct Markdown {
    /// What to print.
    pub text: String,
    missed: Vec<String>,
}

impl Markdown {
    /// Appends `s` and a newline.
    pub fn line(&mut self, s: &str) {
        self.text.push_str(s);
        self.text.push('\n');
    }

    /// The verdict on `value` against `limit` (`met`, `MISSED`, `n/a`);
    /// a miss is kept, named `what`, for [`targets`](Markdown::targets).
    pub fn judge(&mut self, what: impl Into<String>, value: f64, limit: f64) -> &'static str {
        let v = verdict(value, limit);
        if v == "MISSED" {
            self.missed.push(what.into());
        }
        v
    }

    /// The closing lines: every target met, or those missed; and how long
    /// the run took.
    pub fn targets(&mut self, took: Duration) {
        if self.missed.is_empty() {
            self.line("Every target in this run: met.");
        } else {
            let missed = self.missed.join("; ");
            self.line(&format!("Targets missed in this run: {missed}."));
        }
        self.line(&format!("\nThe run took {:.0} s.", took.as_secs_f64()));
    }
}
