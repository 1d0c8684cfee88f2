//! The lease's operations as Lua scripts, each one atomic on the server:
//! sent by their SHA-1 (`EVALSHA`), and whole (`EVAL`) when the server
//! does not know them yet (`NOSCRIPT`: a restart, a `SCRIPT FLUSH`). No
//! `SCRIPT LOAD`, so that the ACL a job needs stays small.
//!
//! Every value a script returns that another client could have written
//! (an owner record, a run history) is returned only up to [`MAX_VALUE`]
//! bytes: a larger one is reported by its size, never read into memory.

use std::sync::LazyLock;
use std::time::Duration;

use redis::Value;

use crate::conn::{Conn, Connection};
use crate::{Operation, Result};

/// The most bytes of an owner record or a run history read back: ours are
/// under 2 KiB.
pub(crate) const MAX_VALUE: usize = 64 << 10;

/// One script: its source, and its SHA-1 as Redis names it.
pub(crate) struct Script {
    source: &'static str,
    sha: LazyLock<String>,
}

macro_rules! script {
    ($name:ident, $source:expr) => {
        pub(crate) static $name: Script = Script {
            source: $source,
            sha: LazyLock::new(|| sha1_hex($source)),
        };
    };
}

fn sha1_hex(source: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, source.as_bytes());
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

// Takes the lease if its key is free, drawing the fencing token, and with
// a tick to claim writes the run history if its version is still the one
// read (KEYS: lease, token, history; ARGV: owner, ttl in ms, version or
// "", history or "", most bytes). The token is the larger of the stored
// counter plus one and the server's clock in microseconds: a server that
// lost its data (no persistence, a restart) starts its counter again at
// nothing, and its clock still carries the tokens above every earlier one.
// Lua's numbers are doubles: exact to 2^53, which microseconds since 1970
// pass in the year 2255; `%.0f` writes them without an exponent.
//
// Answers {1, token} when taken; {0, token, owner or "", size, pttl} when
// held; {2} when the history changed since it was read; {3, counter} when
// the counter (written by another client) is 2^53 or more, past which a
// double's `+ 1` no longer rises: a token is never drawn from it.
script!(
    ACQUIRE,
    r#"
if redis.call('EXISTS', KEYS[1]) == 1 then
  local token = redis.call('HGET', KEYS[1], 'token') or ''
  local size = redis.call('HSTRLEN', KEYS[1], 'owner')
  local owner = ''
  if size <= tonumber(ARGV[5]) then owner = redis.call('HGET', KEYS[1], 'owner') or '' end
  return {0, token, owner, size, redis.call('PTTL', KEYS[1])}
end
if ARGV[3] ~= '' then
  local version = redis.call('HGET', KEYS[3], 'version') or '0'
  if version ~= ARGV[3] then return {2} end
end
local stored = redis.call('GET', KEYS[2])
local last = tonumber(stored or '0') or 0
if last >= 9007199254740992 then return {3, stored} end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local token = string.format('%.0f', math.max(last + 1, now))
redis.call('SET', KEYS[2], token)
redis.call('HSET', KEYS[1], 'token', token, 'owner', ARGV[1], 'ttl', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[3], 'version', tostring(tonumber(ARGV[3]) + 1), 'doc', ARGV[4])
end
return {1, token}
"#
);

// Renews the lease if its key still holds our token (KEYS: lease; ARGV:
// token, ttl in ms). Answers 1 when renewed, 0 when not ours.
script!(
    RENEW,
    r#"
if redis.call('HGET', KEYS[1], 'token') == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"#
);

// Deletes the lease if its key still holds our token, and tells the
// waiters (KEYS: lease; ARGV: token, channel). Answers 1 when deleted.
script!(
    RELEASE,
    r#"
if redis.call('HGET', KEYS[1], 'token') == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], ARGV[1])
  return 1
end
return 0
"#
);

// Reads the run history and the server's clock (KEYS: history; ARGV: most
// bytes). Answers {type, version, doc or "", size, seconds, microseconds}.
script!(
    READ_HISTORY,
    r#"
local kind = redis.call('TYPE', KEYS[1]).ok
local time = redis.call('TIME')
if kind ~= 'hash' then return {kind, '0', '', 0, time[1], time[2]} end
local version = redis.call('HGET', KEYS[1], 'version') or '0'
local size = redis.call('HSTRLEN', KEYS[1], 'doc')
local doc = ''
if size <= tonumber(ARGV[1]) then doc = redis.call('HGET', KEYS[1], 'doc') or '' end
return {kind, version, doc, size, time[1], time[2]}
"#
);

// Writes the run history if its version is still the one read (KEYS:
// history; ARGV: version, doc). Answers 1 when written.
script!(
    WRITE_HISTORY,
    r#"
local version = redis.call('HGET', KEYS[1], 'version') or '0'
if version ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'version', tostring(tonumber(version) + 1), 'doc', ARGV[2])
return 1
"#
);

// What inspect reads of a lease (KEYS: lease; ARGV: most bytes). Answers
// {type, token, owner or "", size, pttl, ttl granted in ms or ""}.
script!(
    READ_LEASE,
    r#"
local kind = redis.call('TYPE', KEYS[1]).ok
if kind ~= 'hash' then return {kind, '', '', 0, redis.call('PTTL', KEYS[1]), ''} end
local token = redis.call('HGET', KEYS[1], 'token') or ''
local size = redis.call('HSTRLEN', KEYS[1], 'owner')
local owner = ''
if size <= tonumber(ARGV[1]) then owner = redis.call('HGET', KEYS[1], 'owner') or '' end
local ttl = redis.call('HGET', KEYS[1], 'ttl') or ''
return {kind, token, owner, size, redis.call('PTTL', KEYS[1]), ttl}
"#
);

impl Script {
    /// The script's Lua source, as sent by `EVAL`.
    pub(crate) fn source(&self) -> &'static str {
        self.source
    }

    /// Runs the script on `c` with `keys` and `args`, within `limit`.
    pub(crate) async fn run(
        &self,
        conn: &Conn,
        c: &mut Connection,
        op: Operation,
        limit: Duration,
        keys: &[&str],
        args: &[&[u8]],
    ) -> Result<Value> {
        let call = |verb: &str, body: &str| {
            let mut cmd = redis::cmd(verb);
            cmd.arg(body).arg(keys.len()).arg(keys);
            for arg in args {
                cmd.arg(*arg);
            }
            cmd
        };
        let start = tokio::time::Instant::now();
        let by_sha = call("EVALSHA", &self.sha);
        let answer = tokio::time::timeout(limit, by_sha.query_async::<Value>(c)).await;
        match answer {
            Ok(Err(e))
                if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
            {
                let left = limit.saturating_sub(start.elapsed());
                conn.call(op, left, call("EVAL", self.source).query_async::<Value>(c))
                    .await
            }
            Ok(Err(e)) if e.is_timeout() => Err(conn.unanswered(op, limit)),
            Ok(Err(e)) => Err(conn.error(op, e)),
            Ok(Ok(value)) => Ok(value),
            Err(_) => Err(conn.unanswered(op, limit)),
        }
    }
}

/// The reply of a script as its fields, or an error naming what came.
pub(crate) fn fields(conn: &Conn, op: Operation, value: Value) -> Result<Vec<Value>> {
    match value {
        Value::Array(fields) => Ok(fields),
        other => Err(conn.error(op, format!("the script answered {other:?}, not a list"))),
    }
}

/// Field `i` of a reply as bytes (a string or a number).
pub(crate) fn bytes(fields: &[Value], i: usize) -> Vec<u8> {
    match fields.get(i) {
        Some(Value::BulkString(b)) => b.clone(),
        Some(Value::SimpleString(s)) => s.clone().into_bytes(),
        Some(Value::Int(n)) => n.to_string().into_bytes(),
        _ => Vec::new(),
    }
}

/// Field `i` of a reply as a number.
pub(crate) fn int(fields: &[Value], i: usize) -> Option<i64> {
    match fields.get(i) {
        Some(Value::Int(n)) => Some(*n),
        Some(Value::BulkString(b)) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}
