//! The Prometheus text exposition format, as node_exporter's textfile
//! collector reads it: writing families and samples, reading back the
//! samples of a file we wrote.
//!
//! Samples never carry a timestamp: the collector refuses a whole file that
//! has one. Times are exported as values instead (`*_timestamp_seconds`), so
//! that an alert reads `time() - x > N`.

use std::fmt::Write as _;
use std::time::SystemTime;

/// Whether a metric family counts up or goes up and down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Gauge,
    Counter,
}

/// A metric family: its name, its `# HELP` text and its `# TYPE`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Family {
    pub(crate) name: &'static str,
    pub(crate) help: &'static str,
    pub(crate) kind: Kind,
}

impl Family {
    /// A gauge named `name`, described by `help`.
    pub(crate) const fn gauge(name: &'static str, help: &'static str) -> Family {
        Family {
            name,
            help,
            kind: Kind::Gauge,
        }
    }

    /// A counter named `name`, described by `help`.
    pub(crate) const fn counter(name: &'static str, help: &'static str) -> Family {
        Family {
            name,
            help,
            kind: Kind::Counter,
        }
    }
}

/// Text in the exposition format, built one family at a time: every sample
/// of a family must follow its `# HELP` and `# TYPE` lines, before the next
/// family starts.
#[derive(Debug, Default)]
pub(crate) struct Exposition {
    text: String,
}

impl Exposition {
    /// Starts `family`'s samples.
    pub(crate) fn family(&mut self, family: &Family) {
        let kind = match family.kind {
            Kind::Gauge => "gauge",
            Kind::Counter => "counter",
        };
        let _ = writeln!(
            self.text,
            "# HELP {} {}\n# TYPE {} {kind}",
            family.name,
            escape_help(family.help),
            family.name
        );
    }

    /// A whole family with its samples; nothing when there are none (a
    /// family without samples would only say that nothing is true).
    pub(crate) fn family_of(&mut self, family: &Family, samples: Vec<(Vec<(&str, &str)>, f64)>) {
        if samples.is_empty() {
            return;
        }
        self.family(family);
        for (labels, value) in samples {
            self.sample(family.name, &labels, value);
        }
    }

    /// One sample of the current family.
    pub(crate) fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (label, value)) in labels.iter().enumerate() {
                if i > 0 {
                    self.text.push(',');
                }
                let _ = write!(self.text, "{label}=\"{}\"", escape_label(value));
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {}", number(value));
    }

    pub(crate) fn into_string(self) -> String {
        self.text
    }
}

/// A label value, escaped as the format wants: backslash, double quote and
/// line feed.
pub(crate) fn escape_label(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// A `# HELP` text, escaped: backslash and line feed.
fn escape_help(text: &str) -> String {
    text.replace('\\', "\\\\").replace('\n', "\\n")
}

/// A value as the format spells it: integers without a fraction, special
/// values as Go's parser reads them.
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_owned()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.to_owned()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// Seconds since the epoch, to the millisecond; 0 for a time before it.
pub(crate) fn timestamp(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_millis() as f64 / 1000.0)
}

/// One sample read back from a file: its name, labels and value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Sample {
    pub(crate) name: String,
    pub(crate) labels: Vec<(String, String)>,
    pub(crate) value: f64,
}

impl Sample {
    pub(crate) fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(l, _)| l == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The samples of `text`, in order. Comments, blank lines and lines that do
/// not parse (a file edited by hand) are left out.
pub(crate) fn parse(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(parse_line)
        .collect()
}

fn parse_line(line: &str) -> Option<Sample> {
    let line = line.trim();
    let name_end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(line.len());
    let (name, mut rest) = line.split_at(name_end);
    if name.is_empty() {
        return None;
    }
    let mut labels = Vec::new();
    if let Some(after) = rest.strip_prefix('{') {
        rest = after;
        loop {
            rest = rest.trim_start_matches([' ', ',']);
            if let Some(after) = rest.strip_prefix('}') {
                rest = after;
                break;
            }
            let eq = rest.find('=')?;
            let label = rest[..eq].trim().to_owned();
            let (value, after) = unescape_quoted(rest[eq + 1..].trim_start())?;
            labels.push((label, value));
            rest = after;
        }
    }
    // A value, and nothing after it: a timestamp would make the file ours
    // to refuse, as the collector would.
    let mut fields = rest.split_whitespace();
    let value = parse_value(fields.next()?)?;
    fields.next().is_none().then(|| Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

/// A quoted label value at the start of `s`, unescaped, and what follows it.
fn unescape_quoted(s: &str) -> Option<(String, &str)> {
    let mut chars = s.strip_prefix('"')?.char_indices();
    let mut out = String::new();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((out, &s[i + 2..])),
            '\\' => match chars.next()?.1 {
                'n' => out.push('\n'),
                c => out.push(c),
            },
            c => out.push(c),
        }
    }
    None
}

fn parse_value(s: &str) -> Option<f64> {
    match s {
        "+Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        _ => s.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_read_back_as_written() {
        let mut e = Exposition::default();
        let family = Family {
            name: "x_total",
            help: "Back\\slash and\nnewline.",
            kind: Kind::Counter,
        };
        e.family(&family);
        let odd = "a \"quoted\" \\ path\nwith a newline, {braces} and = signs";
        e.sample("x_total", &[("lock", odd), ("job", "")], 3.0);
        e.sample("x_total", &[], 0.25);
        let text = e.into_string();
        assert!(
            text.starts_with(
                "# HELP x_total Back\\\\slash and\\nnewline.\n# TYPE x_total counter\n"
            )
        );
        let samples = parse(&text);
        assert_eq!(samples.len(), 2);
        assert_eq!(samples[0].label("lock"), Some(odd));
        assert_eq!(samples[0].label("job"), Some(""));
        assert_eq!(samples[0].value, 3.0);
        assert_eq!(samples[1].value, 0.25);
        assert!(samples[1].labels.is_empty());
    }

    #[test]
    fn values_are_spelled_as_the_format_wants() {
        assert_eq!(number(3.0), "3");
        assert_eq!(number(1_764_582_000.125), "1764582000.125");
        assert_eq!(number(f64::NAN), "NaN");
        assert_eq!(number(f64::INFINITY), "+Inf");
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_micros(1_500_999);
        assert_eq!(timestamp(t), 1.5);
    }

    #[test]
    fn broken_lines_and_timestamps_are_left_out() {
        let text = "ok 1\nstamped 1 1700000000000\nbroken{a=\"x} 1\n{a=\"b\"} 1\nnovalue\n";
        let names: Vec<String> = parse(text).into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["ok"]);
    }
}
