//! An etcd endpoint read once, into its parts: `[scheme://][user[:password]@]host[:port][/]`.
//!
//! etcd's client would take credentials in an endpoint for part of its
//! host and never send them; here they are the user to authenticate as, and
//! every message shows the endpoint as rebuilt from its parts, the password
//! replaced. An endpoint whose parts cannot be told apart for certain (a
//! second `@`, an `@` past the host, a `?`, a `#`, a blank) is refused by
//! its position and the byte where it went wrong, never shown.

use std::fmt;

/// What stands for a password in every message.
const HIDDEN: &str = "***";

/// One endpoint's parts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Endpoint {
    /// `http` or `https`, when given.
    scheme: Option<String>,
    /// The credentials in the endpoint, percent-decoded.
    pub(crate) user: Option<(String, String)>,
    /// The host as given (`[…]` around an IPv6 address kept).
    host: String,
    port: Option<u16>,
}

/// Why an endpoint was refused, and where: never the endpoint itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Fault {
    /// Which endpoint of the list, from 1.
    nth: usize,
    /// The byte offset of the fault in that endpoint.
    at: usize,
    what: &'static str,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "etcd endpoint {} (a [http[s]://][user:password@]host:port URL) cannot be read at byte {}: {} (it is not shown, since it may hold a password)",
            self.nth, self.at, self.what
        )
    }
}

impl Endpoint {
    /// Reads the `nth` endpoint (from 1) of a list.
    pub(crate) fn parse(text: &str, nth: usize) -> Result<Endpoint, Fault> {
        let fault = |at, what| Fault { nth, at, what };
        if let Some(i) = text.find(|c: char| c.is_control() || c.is_whitespace()) {
            return Err(fault(i, "a blank or control character"));
        }
        if let Some(i) = text.find(['?', '#']) {
            return Err(fault(
                i,
                "a raw `?` or `#` (in a password, write them as %3F and %23)",
            ));
        }
        let (scheme, start) = match text.find("://") {
            Some(i) => {
                let scheme = &text[..i];
                if scheme != "http" && scheme != "https" {
                    return Err(fault(0, "a scheme other than http:// or https://"));
                }
                (Some(scheme.to_owned()), i + 3)
            }
            None => (None, 0),
        };
        let auth_end = text[start..].find('/').map_or(text.len(), |i| start + i);
        if auth_end < text.len() && auth_end + 1 != text.len() {
            return Err(fault(
                auth_end,
                "a path after the host (a password holding `/` must write it as %2F)",
            ));
        }
        let authority = &text[start..auth_end];
        let ats: Vec<usize> = authority.match_indices('@').map(|(i, _)| i).collect();
        if ats.len() > 1 {
            return Err(fault(
                start + ats[1],
                "a second raw `@` (in a password, write it as %40)",
            ));
        }
        let (user, hostport, host_at) = match ats.first() {
            Some(&i) => {
                let Some((name, password)) = authority[..i].split_once(':') else {
                    return Err(fault(start, "a user without `:password`"));
                };
                let name =
                    decode(name).ok_or_else(|| fault(start, "a bad %-escape in the user"))?;
                let password = decode(password).ok_or_else(|| {
                    fault(start + name.len() + 1, "a bad %-escape in the password")
                })?;
                (Some((name, password)), &authority[i + 1..], start + i + 1)
            }
            None => (None, authority, start),
        };
        let port_at = if hostport.starts_with('[') {
            hostport
                .find(']')
                .ok_or_else(|| fault(host_at, "a `[` with no closing `]`"))?
                + 1
        } else {
            hostport.find(':').unwrap_or(hostport.len())
        };
        let host = &hostport[..port_at];
        if host.is_empty() || host.contains(['%', '[', ']']) && !host.starts_with('[') {
            return Err(fault(
                host_at,
                "no host, or one that is not a name or address",
            ));
        }
        let port = match &hostport[port_at..] {
            "" => None,
            p => Some(
                p.strip_prefix(':')
                    .and_then(|p| p.parse::<u16>().ok())
                    .filter(|&p| p != 0)
                    .ok_or_else(|| {
                        fault(
                            host_at + port_at,
                            "a port that is not a number from 1 to 65535",
                        )
                    })?,
            ),
        };
        Ok(Endpoint {
            scheme,
            user,
            host: host.to_owned(),
            port,
        })
    }

    /// The endpoint for etcd's client: without its credentials.
    pub(crate) fn target(&self) -> String {
        self.with_userinfo("")
    }

    /// The endpoint as every message shows it: rebuilt, the password
    /// replaced.
    pub(crate) fn shown(&self) -> String {
        let userinfo = match &self.user {
            Some((name, _)) => format!(
                "{}:{HIDDEN}@",
                percent_encoding::utf8_percent_encode(name, percent_encoding::NON_ALPHANUMERIC)
            ),
            None => String::new(),
        };
        self.with_userinfo(&userinfo)
    }

    fn with_userinfo(&self, userinfo: &str) -> String {
        let mut out = String::new();
        if let Some(scheme) = &self.scheme {
            out.push_str(scheme);
            out.push_str("://");
        }
        out.push_str(userinfo);
        out.push_str(&self.host);
        if let Some(port) = self.port {
            out.push_str(&format!(":{port}"));
        }
        out
    }
}

/// Percent-decodes `s`; `None` for a `%` not followed by two hex digits or
/// bytes that are not UTF-8.
fn decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let valid = s.match_indices('%').all(|(i, _)| {
        bytes
            .get(i + 1..i + 3)
            .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit))
    });
    if !valid {
        return None;
    }
    percent_encoding::percent_decode_str(s)
        .decode_utf8()
        .ok()
        .map(|s| s.into_owned())
}

/// A list of endpoints with what it shows, for etcd's client, and the one
/// user that their credentials name (all the same, or refused).
pub(crate) struct Endpoints {
    pub(crate) targets: Vec<String>,
    pub(crate) shown: String,
    pub(crate) user: Option<(String, String)>,
}

impl Endpoints {
    pub(crate) fn parse(list: &[String]) -> Result<Endpoints, String> {
        let mut parsed = Vec::new();
        for (i, text) in list.iter().enumerate() {
            parsed.push(Endpoint::parse(text, i + 1).map_err(|e| e.to_string())?);
        }
        let mut user = None;
        for e in &parsed {
            match (&user, &e.user) {
                (_, None) => {}
                (None, Some(u)) => user = Some(u.clone()),
                (Some(a), Some(b)) if a == b => {}
                (Some(_), Some(_)) => {
                    return Err(
                        "the etcd endpoints name different credentials: give one user for the cluster"
                            .to_owned(),
                    );
                }
            }
        }
        Ok(Endpoints {
            targets: parsed.iter().map(Endpoint::target).collect(),
            shown: parsed
                .iter()
                .map(Endpoint::shown)
                .collect::<Vec<_>>()
                .join(","),
            user,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_become_the_user_and_are_never_shown() {
        let list = [
            "http://root:p%40%2F%3F%23%20w@10.0.0.1:2379".to_owned(),
            "https://root:p%40%2F%3F%23%20w@[::1]:2379/".to_owned(),
            "etcd-3:2379".to_owned(),
        ];
        let e = Endpoints::parse(&list).unwrap();
        assert_eq!(
            e.shown,
            "http://root:***@10.0.0.1:2379,https://root:***@[::1]:2379,etcd-3:2379"
        );
        assert_eq!(
            e.targets,
            ["http://10.0.0.1:2379", "https://[::1]:2379", "etcd-3:2379"]
        );
        assert_eq!(e.user, Some(("root".to_owned(), "p@/?# w".to_owned())));
    }

    #[test]
    fn what_could_be_read_two_ways_is_refused_by_position_never_echoed() {
        for (text, at) in [
            ("http://root:Zq@Zq@h:2379", 17),
            ("http://root:Zq/Zq@h:2379", 14),
            ("http://root:Zq?Zq@h:2379", 14),
            ("http://root:Zq#Zq@h:2379", 14),
            ("http://root:Zq Zq@h:2379", 14),
            ("http://root:Zq%zZ@h:2379", 12),
            ("http://h:Zq", 8),
            ("ftp://h:2379", 0),
        ] {
            let err = Endpoint::parse(text, 2).unwrap_err();
            assert_eq!(err.at, at, "{text}: {err}");
            assert!(!err.to_string().contains("Zq"), "{err}");
            assert!(err.to_string().starts_with("etcd endpoint 2 "), "{err}");
        }
        let list = [
            "http://a:x@h1:2379".to_owned(),
            "http://a:y@h2:2379".to_owned(),
        ];
        let err = Endpoints::parse(&list).err().unwrap();
        assert!(!err.contains("a:x") && !err.contains("a:y"), "{err}");
    }
}
