//! The library's structured events on stderr (`--log-format text|json`).
//!
//! Their fields carry others' strings: a path another user named, a
//! holder's hostname read from a record or a lease server. So, as for every
//! line we print for a person (see `term`):
//!
//! - `text`: a field value is escaped once, the same way as the human
//!   lines: a string (a job, a hostname) in quotes as the library's messages
//!   quote one (`lockfile::text::quoted`), anything else (a message, a path
//!   the library escaped from its bytes, a number) as [`term::line`], every
//!   control character that is still in it escaped, `\r` and `\n` included,
//!   so that no value can forge a line or move the cursor, and nothing
//!   escaped twice;
//! - `json`: JSON already escapes C0 controls; the writer also writes DEL and
//!   the C1 controls, which JSON lets through raw, as `\u00XX` (the same
//!   string to every JSON reader, and inert on a terminal);
//! - colours only when stderr is a terminal, and never when `NO_COLOR` is
//!   set to anything (<https://no-color.org>): cron mails a job's stderr.

use std::fmt;
use std::io::{self, IsTerminal as _, Write};

use tracing::field::{Field, Visit};
use tracing_subscriber::fmt::format::Writer;

use crate::cli::LogFormat;
use crate::term;

/// Sends the library's `tracing` events to stderr. The level comes from
/// `LOCKFILE_LOG`: a level (`debug`), or targets with levels
/// (`lockfile=debug,warn`); `info` when it is unset or unreadable. (A
/// `Targets` filter, not an `EnvFilter`: the same directives but span and
/// field filters, without a regex engine in every start-up.)
pub(crate) fn init(format: LogFormat) {
    use tracing_subscriber::field::MakeExt as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let filter: tracing_subscriber::filter::Targets = std::env::var("LOCKFILE_LOG")
        .ok()
        .and_then(|directives| directives.parse().ok())
        .unwrap_or_else(|| {
            tracing_subscriber::filter::Targets::new()
                .with_default(tracing::level_filters::LevelFilter::INFO)
        });
    let registry = tracing_subscriber::registry().with(filter);
    match format {
        LogFormat::Json => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(|| JsonControls(io::stderr()))
                    .with_ansi(false)
                    .json()
                    .flatten_event(true),
            )
            .init(),
        LogFormat::Text => {
            let fields = TextFields.delimited(" ");
            registry
                .with(
                    tracing_subscriber::fmt::layer()
                        .with_writer(io::stderr)
                        .with_ansi(colours(
                            io::stderr().is_terminal(),
                            std::env::var_os("NO_COLOR"),
                        ))
                        .fmt_fields(fields),
                )
                .init()
        }
    }
}

/// The fields of a text event, each escaped once (see the module).
struct TextFields;

impl<'w> tracing_subscriber::field::MakeVisitor<Writer<'w>> for TextFields {
    type Visitor = TextVisitor<'w>;

    fn make_visitor(&self, writer: Writer<'w>) -> TextVisitor<'w> {
        TextVisitor {
            writer,
            result: Ok(()),
        }
    }
}

/// Writes one event's fields as [`TextFields`] says.
struct TextVisitor<'w> {
    writer: Writer<'w>,
    result: fmt::Result,
}

impl TextVisitor<'_> {
    fn write(&mut self, field: &Field, value: fmt::Arguments<'_>) {
        if self.result.is_err() {
            return;
        }
        self.result = match field.name() {
            "message" => self.writer.write_fmt(value),
            name => write!(self.writer, "{name}={value}"),
        };
    }
}

impl Visit for TextVisitor<'_> {
    /// A string as it is (no Rust `Debug` quoting, which a second escape
    /// would escape again): quoted and escaped, or a message escaped.
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.write(field, format_args!("{}", term::line(value)));
        } else {
            self.write(field, format_args!("{}", lockfile::text::quoted(value)));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let value = format!("{value:?}");
        self.write(field, format_args!("{}", term::line(&value)));
    }
}

impl tracing_subscriber::field::VisitOutput<fmt::Result> for TextVisitor<'_> {
    fn finish(self) -> fmt::Result {
        self.result
    }
}

impl tracing_subscriber::field::VisitFmt for TextVisitor<'_> {
    fn writer(&mut self) -> &mut dyn fmt::Write {
        &mut self.writer
    }
}

/// Whether the text events are coloured: on a terminal, unless `NO_COLOR`
/// is set (to anything but the empty string, as its definition says).
fn colours(terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    terminal && no_color.is_none_or(|value| value.is_empty())
}

/// A writer of JSON lines that writes DEL and the C1 controls as `\u00XX`.
/// In a JSON text those characters can only stand inside a string (every
/// structural character is ASCII), where the escape means the same
/// character. The formatter hands over one whole event per `write`, so no
/// character is split between two calls.
struct JsonControls<W>(W);

impl<W: Write> Write for JsonControls<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write_all(&json_controls(buf))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// `json` with DEL (`7F`) and every C1 control (`C2 80` to `C2 9F` in
/// UTF-8) written as `\u00XX`.
fn json_controls(json: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    let c1 = |pair: &[u8]| pair[0] == 0xc2 && (0x80..=0x9f).contains(&pair[1]);
    if !json.contains(&0x7f) && !json.windows(2).any(c1) {
        return std::borrow::Cow::Borrowed(json);
    }
    let mut out = Vec::with_capacity(json.len() + 16);
    let mut i = 0;
    while i < json.len() {
        if json[i] == 0x7f {
            out.extend_from_slice(b"\\u007f");
            i += 1;
        } else if i + 1 < json.len() && c1(&json[i..i + 2]) {
            out.extend_from_slice(format!("\\u00{:02x}", json[i + 1]).as_bytes());
            i += 2;
        } else {
            out.push(json[i]);
            i += 1;
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_controls_are_escaped_and_mean_the_same_string() {
        let value = "host\u{9b}2J\u{7f}é\u{85}";
        let line = serde_json::to_vec(&serde_json::json!({ "holder_host": value })).unwrap();
        let escaped = json_controls(&line);
        assert!(escaped.iter().all(|&b| b != 0x7f));
        assert!(!escaped.windows(2).any(|p| p[0] == 0xc2 && p[1] <= 0x9f));
        let back: serde_json::Value = serde_json::from_slice(&escaped).unwrap();
        assert_eq!(back["holder_host"], value);
        // `é` is C3 A9 and stays as it is.
        assert!(
            String::from_utf8(escaped.into_owned())
                .unwrap()
                .contains('é')
        );
    }

    #[test]
    fn colours_only_on_a_terminal_without_no_color() {
        assert!(colours(true, None));
        assert!(colours(true, Some("".into())));
        assert!(!colours(true, Some("1".into())));
        assert!(!colours(false, None));
    }
}
