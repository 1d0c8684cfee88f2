//! The server a URL names: what the client connects to, and how every
//! message shows it (`redis://user:***@host:port/db`: never the password).

use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo};

/// The server of a `redis://` or `rediss://` URL.
#[derive(Clone)]
pub(crate) struct Server {
    /// What the client connects with, credentials included.
    pub(crate) info: ConnectionInfo,
    /// The URL rebuilt without its password, for messages.
    pub(crate) shown: String,
    /// Whether the connection is TLS.
    pub(crate) tls: bool,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the credentials.
        f.write_str(&self.shown)
    }
}

impl Server {
    /// The server `url` names, authenticating with `password` when the URL
    /// carries none.
    ///
    /// # Errors
    ///
    /// A sentence saying what is wrong with the URL, which never quotes it
    /// (it may hold a password).
    pub(crate) fn parse(url: &str, password: Option<&str>) -> Result<Server, String> {
        let scheme = url.split_once("://").map(|(s, _)| s);
        let tls = match scheme {
            Some("redis") => false,
            Some("rediss") => true,
            _ => {
                return Err(
                    "the URL must start with redis:// or rediss:// (TLS); Cluster, Sentinel \
                     and Unix sockets are not supported"
                        .to_owned(),
                );
            }
        };
        let info = url.into_connection_info().map_err(|e| {
            // redis-rs's reasons name a part ("Invalid database number"),
            // never the URL; a password is still never let through.
            let reason = e.to_string();
            match url_password(url) {
                Some(p) if !p.is_empty() && reason.contains(p) => {
                    "the URL cannot be read".to_owned()
                }
                _ => format!("the URL cannot be read: {reason}"),
            }
        })?;
        let (host, port) = match info.addr() {
            ConnectionAddr::Tcp(host, port) => (host.clone(), *port),
            ConnectionAddr::TcpTls {
                host,
                port,
                insecure,
                ..
            } => {
                if *insecure {
                    return Err(
                        "#insecure turns off the check of the server's certificate: \
                                give the CA that signs it instead (--redis-ca)"
                            .to_owned(),
                    );
                }
                (host.clone(), *port)
            }
            ConnectionAddr::Unix(_) => return Err("Unix sockets are not supported".to_owned()),
            _ => return Err("this kind of address is not supported".to_owned()),
        };
        let mut settings = info.redis_settings().clone();
        let db = settings.db();
        let user = settings.username().map(str::to_owned);
        if settings.password().is_none()
            && let Some(password) = password
        {
            settings = settings.set_password(password);
        }
        let secret = if settings.password().is_some() {
            ":***"
        } else {
            ""
        };
        let info = info.set_redis_settings(settings);
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host
        };
        // As every engine shows a URL: the password replaced, never left
        // out, so that a reader sees that one was given.
        let user = match (user, secret) {
            (None, "") => String::new(),
            (user, secret) => format!("{}{secret}@", user.unwrap_or_default()),
        };
        let db = if db == 0 {
            String::new()
        } else {
            format!("/{db}")
        };
        let scheme = if tls { "rediss" } else { "redis" };
        Ok(Server {
            info,
            shown: format!("{scheme}://{user}{host}:{port}{db}"),
            tls,
        })
    }
}

/// The password part of `url`, as written, if it has one.
fn url_password(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let userinfo = authority.rsplit_once('@')?.0;
    Some(userinfo.split_once(':')?.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shown_url_has_the_user_and_never_the_password() {
        let s = Server::parse("redis://jobs:s3cret@redis-1:6380/2", None).unwrap();
        assert_eq!(s.shown, "redis://jobs:***@redis-1:6380/2");
        assert!(!format!("{s:?}").contains("s3cret"));
        assert_eq!(s.info.redis_settings().password(), Some("s3cret"));
        let s = Server::parse("rediss://h", Some("from-env")).unwrap();
        assert_eq!(s.shown, "rediss://:***@h:6379");
        assert!(s.tls);
        assert_eq!(s.info.redis_settings().password(), Some("from-env"));
        // The URL's password wins over the environment's.
        let s = Server::parse("redis://:inurl@h", Some("from-env")).unwrap();
        assert_eq!(s.info.redis_settings().password(), Some("inurl"));
        assert_eq!(s.shown, "redis://:***@h:6379");
        let s = Server::parse("redis://jobs@h", None).unwrap();
        assert_eq!(s.shown, "redis://jobs@h:6379");
    }

    #[test]
    fn urls_that_cannot_keep_the_promise_are_refused_without_being_quoted() {
        for url in [
            "http://h:6379",
            "redis+unix:///tmp/r.sock",
            "rediss://u:pw0rd@h/#insecure",
            "redis://u:pw0rd@h/notadb",
            "h:6379",
        ] {
            let e = Server::parse(url, None).unwrap_err();
            assert!(!e.contains("pw0rd"), "{url}: {e}");
        }
    }
}
