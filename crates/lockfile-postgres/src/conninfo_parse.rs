//! Reading a connection string by libpq's rules for its form: the
//! `key = value` form and the `postgresql://` URL, into a [`ConnInfo`],
//! refusing what could be read two ways and every parameter tokio-postgres
//! would not take.

use percent_encoding::percent_decode_str;

use crate::conninfo::{ConnInfo, Fault, Form, Host, is_space};

/// The parameters understood: tokio-postgres's, and the TLS files that
/// the TLS parameters (`sslmode.rs`) take out.
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
