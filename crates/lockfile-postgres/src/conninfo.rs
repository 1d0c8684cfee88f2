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
//! a URL parser another; here neither guesses.

use std::fmt;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};

/// What stands for a password in every message.
const HIDDEN: &str = "***";

/// The parameters whose value is a secret: libpq's `password`, and
/// `sslpassword` (the client key's).
const SECRET: [&str; 2] = ["password", "sslpassword"];

/// The parameters understood: tokio-postgres's, and the TLS files that
/// [`SslParams`](crate::sslmode::SslParams) takes out.
const KNOWN: [&str; 22] = [
    "user",
    "password",
    "dbname",
    "options",
    "application_name",
    "sslmode",
    "sslnegotiation",
    "host",
    "hostaddr",
    "port",
    "connect_timeout",
    "tcp_user_timeout",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_retries",
    "target_session_attrs",
    "channel_binding",
    "load_balance_hosts",
    "sslrootcert",
    "sslcert",
    "sslkey",
];

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
    form: Form,
    /// The byte offset of the fault in the string given.
    at: usize,
    what: &'static str,
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
    name: String,
    port: Option<String>,
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
    /// Reads `text` by libpq's rules for its form, refusing what could be
    /// read two ways, and every parameter tokio-postgres would not take.
    pub(crate) fn parse(text: &str) -> Result<ConnInfo, Fault> {
        let info = match ["postgresql", "postgres"]
            .into_iter()
            .find(|s| text.strip_prefix(s).is_some_and(|r| r.starts_with("://")))
        {
            Some(scheme) => parse_url(text, scheme)?,
            None => ConnInfo::Keywords(parse_keywords(text)?),
        };
        Ok(info)
    }

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
fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0b' | '\x0c')
}

/// Refuses a parameter that tokio-postgres would not take: by where it
/// stands only, since a key may be the tail of a mistyped password.
fn check_key(form: Form, key: &str, at: usize) -> Result<(), Fault> {
    if KNOWN.contains(&key) {
        Ok(())
    } else {
        Err(Fault {
            form,
            at,
            what: "an unknown parameter (see libpq's list; tokio-postgres takes user, password, host, hostaddr, port, dbname, options, application_name, sslmode, sslrootcert, sslcert, sslkey, channel_binding, target_session_attrs, load_balance_hosts, connect_timeout, tcp_user_timeout and keepalives*)",
        })
    }
}

/// libpq's `key = value` form: keys up to `=` or a blank, blanks around
/// `=`, values bare (a `\` escaping the next character) or in `'…'`.
fn parse_keywords(text: &str) -> Result<Vec<(String, String)>, Fault> {
    let form = Form::Keywords;
    let fault = |at, what| Fault { form, at, what };
    let mut pairs = Vec::new();
    let mut it = text.char_indices().peekable();
    let skip = |it: &mut std::iter::Peekable<std::str::CharIndices<'_>>| {
        while it.next_if(|&(_, c)| is_space(c)).is_some() {}
    };
    loop {
        skip(&mut it);
        let Some(&(start, _)) = it.peek() else { break };
        let mut key = String::new();
        while let Some((_, c)) = it.next_if(|&(_, c)| c != '=' && !is_space(c)) {
            key.push(c);
        }
        skip(&mut it);
        if it.next_if(|&(_, c)| c == '=').is_none() {
            return Err(fault(
                it.peek().map_or(text.len(), |&(i, _)| i),
                "a parameter without `=` (quote a value that holds blanks: password='a b')",
            ));
        }
        if key.is_empty() {
            return Err(fault(start, "a `=` with no parameter name before it"));
        }
        check_key(form, &key, start)?;
        skip(&mut it);
        let mut value = String::new();
        if let Some((open, _)) = it.next_if(|&(_, c)| c == '\'') {
            loop {
                match it.next() {
                    None => {
                        return Err(fault(open, "a quoted value with no closing `'`"));
                    }
                    Some((_, '\'')) => break,
                    Some((_, '\\')) => {
                        if let Some((_, c)) = it.next() {
                            value.push(c);
                        }
                    }
                    Some((_, c)) => value.push(c),
                }
            }
            if it.peek().is_some_and(|&(_, c)| !is_space(c)) {
                let at = it.peek().map_or(text.len(), |&(i, _)| i);
                return Err(fault(
                    at,
                    "text right after a closing `'` (escape a quote inside a value as \\')",
                ));
            }
        } else {
            while let Some((_, c)) = it.next_if(|&(_, c)| !is_space(c)) {
                if c == '\\' {
                    if let Some((_, next)) = it.next() {
                        value.push(next);
                    }
                } else {
                    value.push(c);
                }
            }
        }
        pairs.push((key, value));
    }
    Ok(pairs)
}

/// libpq's URI: `scheme://[user[:password]@][host][:port][,…][/dbname][?k=v&…]`,
/// every part percent-decoded (query keys too: `pass%77ord` is `password`).
fn parse_url(text: &str, scheme: &'static str) -> Result<ConnInfo, Fault> {
    let form = Form::Url(scheme);
    let fault = |at, what| Fault { form, at, what };
    let start = scheme.len() + 3;
    // A URL parser ends the URL at `#`; libpq keeps it. Neither is safe to
    // guess, and the bytes below would be shown decoded otherwise.
    if let Some(i) = text.find('#') {
        return Err(fault(i, "a raw `#` (write it as %23)"));
    }
    if let Some(i) = text.find(|c: char| c.is_control() || c == ' ') {
        return Err(fault(
            i,
            "a raw blank or control character (percent-encode it: a space is %20)",
        ));
    }
    // The host part ends at the first `/` or `?`. An `@` after it would
    // make libpq (which looks for `@` before any `/`) and a URL parser
    // (which stops at `?` too) disagree on where the password ends: the
    // password holds a raw `/`, `?` or `@`.
    let auth_end = text[start..]
        .find(['/', '?'])
        .map_or(text.len(), |i| start + i);
    let authority = &text[start..auth_end];
    let ats: Vec<usize> = text[start..]
        .match_indices('@')
        .map(|(i, _)| start + i)
        .collect();
    if ats.len() > 1 {
        return Err(fault(
            ats[1],
            "a second raw `@` (percent-encode `@`, `/`, `?`, `#` and `%` in a password: %40, %2F, %3F, %23, %25)",
        ));
    }
    if let Some(&at) = ats.first()
        && at >= auth_end
    {
        return Err(fault(
            at,
            "a raw `@` after the host (a password holding `/` or `?` must percent-encode them: %2F, %3F)",
        ));
    }
    let decode = |s: &str, at: usize| decode(form, s, at);
    let (user, password, hosts_at) = match authority.find('@') {
        Some(i) => {
            let userinfo = &authority[..i];
            let (user, password) = match userinfo.split_once(':') {
                Some((u, p)) => (u, Some((p, start + u.len() + 1))),
                None => (userinfo, None),
            };
            let user = (!user.is_empty())
                .then(|| decode(user, start))
                .transpose()?;
            let password = password
                .filter(|(p, _)| !p.is_empty())
                .map(|(p, at)| decode(p, at))
                .transpose()?;
            (user, password, start + i + 1)
        }
        None => (None, None, start),
    };
    let mut hosts = Vec::new();
    let mut at = hosts_at;
    for spec in text[hosts_at..auth_end].split(',') {
        hosts.push(parse_host(form, spec, at)?);
        at += spec.len() + 1;
    }
    if hosts.len() == 1 && hosts[0].name.is_empty() && hosts[0].port.is_none() {
        hosts.clear();
    }
    let (path, query_at) = match text[auth_end..].find('?') {
        Some(q) => (&text[auth_end..auth_end + q], Some(auth_end + q + 1)),
        None => (&text[auth_end..], None),
    };
    let dbname = match path.strip_prefix('/') {
        Some(db) if !db.is_empty() => Some(decode(db, auth_end + 1)?),
        _ => None,
    };
    let mut query = Vec::new();
    if let Some(q) = query_at {
        let mut at = q;
        for pair in text[q..].split('&') {
            if !pair.is_empty() {
                let Some((k, v)) = pair.split_once('=') else {
                    return Err(fault(at, "a query parameter without `=`"));
                };
                if v.contains('=') {
                    return Err(fault(
                        at + k.len() + 1 + v.find('=').unwrap_or(0),
                        "a second `=` in a query parameter (write it as %3D)",
                    ));
                }
                let key = decode(k, at)?;
                check_key(form, &key, at)?;
                query.push((key, decode(v, at + k.len() + 1)?));
            }
            at += pair.len() + 1;
        }
    }
    Ok(ConnInfo::Url {
        scheme,
        user,
        password,
        hosts,
        dbname,
        query,
    })
}

/// One `host[:port]` or `[v6]:port` of a URL, at byte `at`.
fn parse_host(form: Form, spec: &str, at: usize) -> Result<Host, Fault> {
    let fault = |at, what| Fault { form, at, what };
    let (name, port) = if let Some(v6) = spec.strip_prefix('[') {
        let Some(close) = v6.find(']') else {
            return Err(fault(at, "a `[` with no closing `]`"));
        };
        let after = &v6[close + 1..];
        let port = match after.strip_prefix(':') {
            Some(p) => Some((p, at + close + 3)),
            None if after.is_empty() => None,
            None => return Err(fault(at + close + 2, "text after `]` that is not `:port`")),
        };
        (v6[..close].to_owned(), port)
    } else {
        let (name, port) = match spec.split_once(':') {
            Some((n, p)) => (n, Some((p, at + n.len() + 1))),
            None => (spec, None),
        };
        (decode(form, name, at)?, port)
    };
    let port = match port {
        Some((p, p_at)) => {
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) || p.parse::<u16>().is_err() {
                return Err(fault(
                    p_at,
                    "a port that is not a number from 1 to 65535 (or a password holding a raw `/`)",
                ));
            }
            Some(p.to_owned())
        }
        None => None,
    };
    Ok(Host { name, port })
}

/// Percent-decodes `s` (at byte `at` of the string): a `%` not followed by
/// two hex digits, a `%00`, or bytes that are not UTF-8 are refused, as
/// libpq refuses the first two.
fn decode(form: Form, s: &str, at: usize) -> Result<String, Fault> {
    let fault = |at, what| Fault { form, at, what };
    let bytes = s.as_bytes();
    for (i, _) in s.match_indices('%') {
        let hex = bytes.get(i + 1..i + 3);
        if !hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
            return Err(fault(
                at + i,
                "a `%` not followed by two hex digits (write a `%` as %25)",
            ));
        }
        if hex == Some(b"00") {
            return Err(fault(at + i, "a %00 (libpq refuses a NUL)"));
        }
    }
    percent_decode_str(s)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| fault(at, "percent-encoded bytes that are not UTF-8"))
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
            let (rest, _) = info.split(&crate::sslmode::NAMES);
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
