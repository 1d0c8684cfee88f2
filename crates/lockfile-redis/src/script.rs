//! The lease's operations as Lua scripts, each one atomic on the server:
//! sent by their SHA-1 (`EVALSHA`), and whole (`EVAL`) when the server
//! does not know them yet (`NOSCRIPT`: a restart, a `SCRIPT FLUSH`). No
//! `SCRIPT LOAD`, so that the ACL a job needs stays small.
//!
//! Every value a script returns that another client could have written
//! is bounded: an owner record or a run history up to [`MAX_VALUE`] bytes
//! (a larger one is reported by its size, never read into memory), a token,
//! a counter, a version or a TTL up to 20 bytes, a key up to the longest
//! of ours.

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
// Every check comes before the first write: a script that fails halfway
// keeps what it wrote (Redis has no rollback). Values another client may
// have written are returned only when short (`small`: at most 20 bytes,
// a u64's digits), so that a reply stays small whatever is stored.
//
// Answers {1, token} when taken; {0, token or "", owner or "", size,
// pttl} when held; {2} when the history changed since it was read; {3,
// counter or ""} when the counter (written by another client) is not a
// number below 2^53, past which a double's `+ 1` no longer rises (NaN,
// infinity, a huge or a long value): a token is never drawn from it.
script!(
    ACQUIRE,
    r#"
local function small(key, field)
  if redis.call('HSTRLEN', key, field) <= 20 then return redis.call('HGET', key, field) or '' end
  return ''
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  local token = small(KEYS[1], 'token')
  local size = redis.call('HSTRLEN', KEYS[1], 'owner')
  local owner = ''
  if size <= tonumber(ARGV[5]) then owner = redis.call('HGET', KEYS[1], 'owner') or '' end
  return {0, token, owner, size, redis.call('PTTL', KEYS[1])}
end
local claim = ARGV[3] ~= ''
if claim then
  local version = redis.call('HGET', KEYS[3], 'version') or '0'
  if version ~= ARGV[3] then return {2} end
end
if redis.call('STRLEN', KEYS[2]) > 20 then return {3, ''} end
local stored = redis.call('GET', KEYS[2])
local last = tonumber(stored or '0') or 0
if last ~= last or last >= 9007199254740992 then return {3, stored} end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local token = string.format('%.0f', math.max(last + 1, now))
redis.call('SET', KEYS[2], token)
redis.call('HSET', KEYS[1], 'token', token, 'owner', ARGV[1], 'ttl', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if claim then
  redis.call('HSET', KEYS[3], 'version', string.format('%d', tonumber(ARGV[3]) + 1), 'doc', ARGV[4])
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
// bytes). Answers {type, version ("" when too long), doc or "", size,
// seconds, microseconds}.
script!(
    READ_HISTORY,
    r#"
local kind = redis.call('TYPE', KEYS[1]).ok
local time = redis.call('TIME')
if kind ~= 'hash' then return {kind, '0', '', 0, time[1], time[2]} end
local version = '0'
if redis.call('HEXISTS', KEYS[1], 'version') == 1 then
  version = ''
  if redis.call('HSTRLEN', KEYS[1], 'version') <= 20 then version = redis.call('HGET', KEYS[1], 'version') end
end
local size = redis.call('HSTRLEN', KEYS[1], 'doc')
local doc = ''
if size <= tonumber(ARGV[1]) then doc = redis.call('HGET', KEYS[1], 'doc') or '' end
return {kind, version, doc, size, time[1], time[2]}
"#
);

// Writes the run history if its version is still the one read (KEYS:
// history; ARGV: version, doc), which the caller checked is a number of
// at most 15 digits. Answers 1 when written.
script!(
    WRITE_HISTORY,
    r#"
local version = redis.call('HGET', KEYS[1], 'version') or '0'
if version ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'version', string.format('%d', tonumber(version) + 1), 'doc', ARGV[2])
return 1
"#
);

// What inspect reads of a lease (KEYS: lease; ARGV: most bytes). Answers
// {type, token or "", owner or "", size, pttl, ttl granted in ms or ""}.
script!(
    READ_LEASE,
    r#"
local function small(key, field)
  if redis.call('HSTRLEN', key, field) <= 20 then return redis.call('HGET', key, field) or '' end
  return ''
end
local kind = redis.call('TYPE', KEYS[1]).ok
if kind ~= 'hash' then return {kind, '', '', 0, redis.call('PTTL', KEYS[1]), ''} end
local token = small(KEYS[1], 'token')
local size = redis.call('HSTRLEN', KEYS[1], 'owner')
local owner = ''
if size <= tonumber(ARGV[1]) then owner = redis.call('HGET', KEYS[1], 'owner') or '' end
local ttl = small(KEYS[1], 'ttl')
return {kind, token, owner, size, redis.call('PTTL', KEYS[1]), ttl}
"#
);

// One page of the names under the prefix (ARGV: cursor, pattern, longest
// key): `SCAN` from the cursor, keys longer than any of ours left out, so
// that a page's reply stays small. Answers {cursor, key...}.
script!(
    LIST,
    r#"
local page = redis.call('SCAN', ARGV[1], 'MATCH', ARGV[2], 'COUNT', 1000)
local out = {page[1]}
for _, key in ipairs(page[2]) do
  if #key <= tonumber(ARGV[3]) then out[#out + 1] = key end
end
return out
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
