//! A connection string read once, into its parts, by libpq's rules: a
//! `postgresql://` (or `postgres://`) URL, or the `key = value` form. Every
//! message shows the string as rebuilt from those parts, with the password
//! replaced: never the text that was given, which no scrubbing can make
//! safe (a password may hold any byte that the scrubber takes for the end
//! of it).
//!
//! A string whose parts cannot be told apart for certain is refused, with
//! its form and the byte where it went wrong, and never shown: a raw `#`,
//! a second `@`, a raw `@` past the host (a password holding `/` or `?`
//! unencoded), an unterminated quote. libpq reads some of those one way and
//! a URL parser another; here neither guesses. How each form is read is
//! `conninfo_parse.rs`.

use std::fmt;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// What stands for a password in every message.
const HIDDEN: &str = "***";

/// The parameters whose value is a secret: libpq's `password`, and
/// `sslpassword` (the client key's).
const SECRET: [&str; 2] = ["password", "sslpassword"];

/// Everything but RFC 3986's unreserved characters is percent-encoded in a
/// rebuilt URL's user, host and database.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// A query value may also keep `/` and `:` (file paths, times), which
/// cannot end it.
const QUERY_VALUE: &AsciiSet = &COMPONENT.remove(b'/').remove(b':');

/// Which of libpq's two forms a string is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Form {
    /// `postgresql://…` or `postgres://…` (the scheme as given).
    Url(&'static str),
    /// `key = value …`.
    Keywords,
}

impl fmt::Display for Form {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Form::Url(scheme) => write!(f, "{scheme}:// URL"),
            Form::Keywords => f.write_str("key=value string"),
        }
    }
}

/// Why a string was refused, and where: never the string itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Fault {
    pub(crate) form: Form,
    /// The byte offset of the fault in the string given.
    pub(crate) at: usize,
    pub(crate) what: &'static str,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the PostgreSQL connection string (a {}) cannot be read at byte {}: {} (it is not shown, since it may hold a password)",
            self.form, self.at, self.what
        )
    }
}

/// One host of a URL, and its port if it names one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Host {
    pub(crate) name: String,
    pub(crate) port: Option<String>,
}

/// A connection string's parts, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ConnInfo {
    /// The URL form.
    Url {
        scheme: &'static str,
        user: Option<String>,
        password: Option<String>,
        hosts: Vec<Host>,
        dbname: Option<String>,
        query: Vec<(String, String)>,
    },
    /// The `key = value` form, in order.
    Keywords(Vec<(String, String)>),
}

impl ConnInfo {
    /// Every parameter as libpq's keyword and its value, in the order
    /// given (the last of a repeated one counts).
    pub(crate) fn pairs(&self) -> Vec<(String, String)> {
        match self {
            ConnInfo::Keywords(pairs) => pairs.clone(),
            ConnInfo::Url {
                user,
                password,
                hosts,
                dbname,
                query,
                ..
            } => {
                let mut out = Vec::new();
                let mut put = |k: &str, v: &Option<String>| {
                    if let Some(v) = v {
                        out.push((k.to_owned(), v.clone()));
                    }
                };
                put("user", user);
                put("password", password);
                let names: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
                if names.iter().any(|n| !n.is_empty()) {
                    put("host", &Some(names.join(",")));
                }
                if hosts.iter().any(|h| h.port.is_some()) {
                    let ports: Vec<&str> = hosts
                        .iter()
                        .map(|h| h.port.as_deref().unwrap_or(""))
                        .collect();
                    put("port", &Some(ports.join(",")));
                }
                put("dbname", dbname);
                out.extend(query.iter().cloned());
                out
            }
        }
    }

    /// The string rebuilt from its parts, every secret replaced by `***`:
    /// what every message shows.
    pub(crate) fn shown(&self) -> String {
        match self {
            ConnInfo::Keywords(pairs) => pairs
                .iter()
                .map(|(k, v)| {
                    if SECRET.contains(&k.as_str()) {
                        format!("{k}={HIDDEN}")
                    } else {
                        format!("{k}={}", quote(v))
                    }
                })
                .collect::<Vec<_>>()
                .join(" "),
            ConnInfo::Url {
                scheme,
                user,
                password,
                hosts,
                dbname,
                query,
            } => {
                let enc = |s: &str| utf8_percent_encode(s, COMPONENT).to_string();
                let mut out = format!("{scheme}://");
                if let Some(user) = user {
                    out.push_str(&enc(user));
                }
                if password.is_some() {
                    out.push(':');
                    out.push_str(HIDDEN);
                }
                if user.is_some() || password.is_some() {
                    out.push('@');
                }
                let hosts: Vec<String> = hosts
                    .iter()
                    .map(|h| {
                        let mut s = if h.name.contains(':') {
                            format!("[{}]", h.name)
                        } else {
                            enc(&h.name)
                        };
                        if let Some(port) = &h.port {
                            s.push(':');
                            s.push_str(port);
                        }
                        s
                    })
                    .collect();
                out.push_str(&hosts.join(","));
                if let Some(db) = dbname {
                    out.push('/');
                    out.push_str(&enc(db));
                }
                for (i, (k, v)) in query.iter().enumerate() {
                    out.push(if i == 0 { '?' } else { '&' });
                    out.push_str(&enc(k));
                    out.push('=');
                    if SECRET.contains(&k.as_str()) {
                        out.push_str(HIDDEN);
                    } else {
                        out.push_str(&utf8_percent_encode(v, QUERY_VALUE).to_string());
                    }
                }
                out
            }
        }
    }

    /// The parameters other than `names`, as a `key='value'` string that
    /// tokio-postgres's parser reads back exactly (every value quoted, `'`
    /// and `\` escaped); and the values of `names` that were given, in
    /// order.
    pub(crate) fn split(&self, names: &[&str]) -> (String, Vec<(String, String)>) {
        let mut rest = Vec::new();
        let mut taken = Vec::new();
        for (k, v) in self.pairs() {
            if names.contains(&k.as_str()) {
                taken.push((k, v));
            } else {
                let escaped = v.replace('\\', "\\\\").replace('\'', "\\'");
                rest.push(format!("{k}='{escaped}'"));
            }
        }
        (rest.join(" "), taken)
    }

    /// A fault at no byte in particular: for a value refused after
    /// parsing (by the driver or by the TLS parameters).
    pub(crate) fn describe(&self) -> String {
        format!("the PostgreSQL connection string `{}`", self.shown())
    }
}

/// `value` as it stands in a rebuilt `key=value` string: bare when it is
/// plain, else quoted with `'` and `\` escaped.
fn quote(value: &str) -> String {
    let plain = !value.is_empty()
        && !value
            .chars()
            .any(|c| is_space(c) || c == '\'' || c == '\\' || c.is_control());
    if plain {
        return value.to_owned();
    }
    let mut out = String::from("'");
    for c in value.chars() {
        match c {
            '\'' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// libpq's separators in the `key = value` form: C's `isspace`.
pub(crate) fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0b' | '\x0c')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each string with its secret, and how it must be shown.
    #[test]
    fn a_password_is_never_shown_whatever_it_holds() {
        for (url, secret, shown) in [
            (
                "postgres://app:s3cret@db:5432/jobs",
                "s3cret",
                "postgres://app:***@db:5432/jobs",
            ),
            (
                "postgresql://app:p%40ss%2F%3F%23%20x%0Ay@db/jobs?sslmode=require",
                "p@ss/?# x\ny",
                "postgresql://app:***@db/jobs?sslmode=require",
            ),
            (
                "postgres://db/jobs?user=app&password=s3cret&sslmode=require",
                "s3cret",
                "postgres://db/jobs?user=app&password=***&sslmode=require",
            ),
            (
                "postgres://db/jobs?user=app&pass%77ord=s3cret",
                "s3cret",
                "postgres://db/jobs?user=app&password=***",
            ),
            (
                "postgres://db/jobs?password=a%2Fb%3Fc%26d",
                "a/b?c&d",
                "postgres://db/jobs?password=***",
            ),
            (
                "host=db user=app password=s3cret dbname=jobs",
                "s3cret",
                "host=db user=app password=*** dbname=jobs",
            ),
            (
                "host=db\npassword=s3cret\tdbname=jobs",
                "s3cret",
                "host=db password=*** dbname=jobs",
            ),
            (
                "host=db password = 'it\\'s a / ? @ # %2F \\\\ \n secret' dbname=jobs",
                "it's a / ? @ # %2F \\ \n secret",
                "host=db password=*** dbname=jobs",
            ),
        ] {
            let info = ConnInfo::parse(url).unwrap();
            assert_eq!(info.shown(), shown, "{url}");
            let pairs = info.pairs();
            assert!(
                pairs
                    .iter()
                    .any(|(k, v)| SECRET.contains(&k.as_str()) && v == secret),
                "{url}: {pairs:?}"
            );
            assert!(!info.shown().contains(secret));
            // What tokio-postgres is given reads back as the same values.
            // With the TLS parameters taken out, as they are for the driver.
            let (rest, _) = info.split(&["sslmode", "sslrootcert", "sslcert", "sslkey"]);
            let config: tokio_postgres::Config = rest.parse().unwrap();
            if let Some(pw) = config.get_password() {
                assert_eq!(pw, secret.as_bytes(), "{url}");
            }
        }
    }

    #[test]
    fn what_could_be_read_two_ways_is_refused_by_position_never_echoed() {
        for (url, at) in [
            // A raw `@` in the password.
            ("postgresql://app:Zq@Zq@db/jobs", 22),
            // A raw `#`.
            ("postgresql://app:Zq#Zq@db/jobs", 19),
            // A raw `/` or `?` in the password: the `@` comes after the host.
            ("postgresql://app:Zq/Zq@db/jobs", 22),
            ("postgresql://app:Zq?Zq@db/jobs", 22),
            // A raw newline, a bad escape.
            ("postgresql://app:Zq\nZq@db/jobs", 19),
            ("postgresql://app:Zq%zz@db/jobs", 19),
            // An unknown parameter, named by position only.
            ("postgresql://db/jobs?pass%77ord=Zq&Zqmode=require", 35),
            // An unterminated quote, a word without `=`.
            ("host=db password='Zq dbname=jobs", 17),
            ("host=db password=Zq Zq dbname=jobs", 23),
            ("host=db password=x Zq=y", 19),
            ("host=db sslpassword=Zq", 8),
        ] {
            let err = ConnInfo::parse(url).unwrap_err();
            assert_eq!(err.at, at, "{url}: {err}");
            let message = err.to_string();
            assert!(!message.contains("Zq"), "{url}: {message}");
        }
        let err = ConnInfo::parse("postgresql://app:Zq@Zq@db/jobs").unwrap_err();
        assert!(err.to_string().contains("postgresql:// URL"), "{err}");
        assert!(err.to_string().contains("byte 22"), "{err}");
    }

    #[test]
    fn hosts_ports_and_names_are_libpqs() {
        let info = ConnInfo::parse(
            "postgresql://me@h1:5433,[::1]:6432,%2Frun%2Fpg/my%20db?application_name=a%20b",
        )
        .unwrap();
        assert_eq!(
            info.pairs(),
            [
                ("user", "me"),
                ("host", "h1,::1,/run/pg"),
                ("port", "5433,6432,"),
                ("dbname", "my db"),
                ("application_name", "a b"),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
        );
        assert_eq!(
            info.shown(),
            "postgresql://me@h1:5433,[::1]:6432,%2Frun%2Fpg/my%20db?application_name=a%20b"
        );
        assert_eq!(
            ConnInfo::parse("postgresql:///jobs").unwrap().pairs().len(),
            1
        );
        assert_eq!(
            ConnInfo::parse("host='/run/my pg' dbname=")
                .unwrap()
                .shown(),
            "host='/run/my pg' dbname=''"
        );
    }
}
