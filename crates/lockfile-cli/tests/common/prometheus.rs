//! Prometheus's tools for the tests: `promtool check metrics`, a real
//! node_exporter serving the textfile collector, and a reader of samples.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Fails the test unless `promtool check metrics` accepts `path`.
pub(crate) fn promtool_accepts(path: &Path) {
    let text = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
            "promtool is not installed: install Debian's `prometheus` package \
             (apt-get install prometheus; scripts/test.sh does it)"
        ),
        Err(e) => panic!("cannot run promtool: {e}"),
    };
    child.stdin.take().unwrap().write_all(&text).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics refuses `{}`: {}{}\n{}",
        path.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&text)
    );
}

/// One sample: name, labels, value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sample {
    pub(crate) name: String,
    pub(crate) labels: BTreeMap<String, String>,
    pub(crate) value: f64,
}

/// The samples of a text in the exposition format (comments left out).
pub(crate) fn samples(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(parse_sample)
        .collect()
}

pub(crate) fn parse_sample(line: &str) -> Sample {
    let (name, mut rest) = line.split_at(line.find(['{', ' ']).unwrap());
    let mut labels = BTreeMap::new();
    if let Some(mut r) = rest.strip_prefix('{') {
        loop {
            r = r.trim_start_matches(',');
            if let Some(after) = r.strip_prefix('}') {
                rest = after;
                break;
            }
            let (label, after) = r
                .split_once("=\"")
                .unwrap_or_else(|| panic!("a label in {line}"));
            let mut value = String::new();
            let mut chars = after.char_indices();
            let end = loop {
                match chars.next().unwrap_or_else(|| panic!("a quote in {line}")) {
                    (i, '"') => break i + 1,
                    (_, '\\') => value.push(match chars.next().unwrap().1 {
                        'n' => '\n',
                        c => c,
                    }),
                    (_, c) => value.push(c),
                }
            };
            labels.insert(label.to_owned(), value);
            r = &after[end..];
        }
    }
    let value = match rest.trim() {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v
            .parse()
            .unwrap_or_else(|e| panic!("value `{v}` in {line}: {e}")),
    };
    Sample {
        name: name.to_owned(),
        labels,
        value,
    }
}

pub(crate) fn file_samples(path: &Path) -> Vec<Sample> {
    samples(&std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

/// The value of the one sample named `name` whose labels include `labels`.
pub(crate) fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let found: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.name == name)
        .filter(|s| {
            labels
                .iter()
                .all(|(l, v)| s.labels.get(*l).map(String::as_str) == Some(*v))
        })
        .collect();
    assert!(found.len() <= 1, "{name} {labels:?} twice: {found:?}");
    found.first().map(|s| s.value)
}

/// A real node_exporter on a loopback port, serving the textfile collector
/// only; killed on drop.
pub(crate) struct NodeExporter {
    child: std::process::Child,
    port: u16,
}

impl NodeExporter {
    pub(crate) fn start(textfile_dir: &Path) -> NodeExporter {
        for _ in 0..5 {
            // A free port, given up just before node_exporter takes it: a
            // race with another process is possible, hence the retries.
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let child = Command::new("prometheus-node-exporter")
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .arg("--collector.disable-defaults")
                .arg("--collector.textfile")
                .arg(format!(
                    "--collector.textfile.directory={}",
                    textfile_dir.display()
                ))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn();
            let mut child = match child {
                Ok(child) => child,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
                    "prometheus-node-exporter is not installed: install Debian's \
                     `prometheus-node-exporter` package (scripts/test.sh does it)"
                ),
                Err(e) => panic!("cannot run prometheus-node-exporter: {e}"),
            };
            let mut exporter = None;
            for _ in 0..500 {
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    exporter = Some(port);
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            match exporter {
                Some(port) => return NodeExporter { child, port },
                None => {
                    let _ = child.kill();
                    let _ = child.wait();
                }
            }
        }
        panic!("prometheus-node-exporter did not start listening");
    }

    pub(crate) fn scrape(&self) -> String {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        stream
            .write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
            .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        assert!(
            head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
            "{head}"
        );
        body.to_owned()
    }
}

impl Drop for NodeExporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The alert rules the package installs, beside their `promtool` tests.
pub(crate) fn rules_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/prometheus")
}

/// Every metric name the alert rules' expressions use.
pub(crate) fn rule_metrics() -> std::collections::BTreeSet<String> {
    let text = std::fs::read_to_string(rules_dir().join("lockfile-rules.yml")).unwrap();
    let mut names = std::collections::BTreeSet::new();
    for line in text.lines() {
        let Some(expr) = line.trim().strip_prefix("expr:") else {
            continue;
        };
        let mut rest = expr;
        while let Some(at) = rest.find("lockfile_") {
            let name: String = rest[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            rest = &rest[at + name.len()..];
            names.insert(name);
        }
    }
    assert!(
        names.len() >= 5,
        "the rules name too few metrics: {names:?}"
    );
    names
}

/// Every metric name with a sample in `text`, an exposition.
pub(crate) fn sample_names(text: &str) -> std::collections::BTreeSet<String> {
    samples(text).into_iter().map(|s| s.name).collect()
}
