//! Durability of acknowledged writes, and recovery epochs that keep resourceVersions unique.
//!
//! Where it sits: [`crate::store::Store`] checks the Redis persistence settings when it
//! connects and again whenever the Redis server changed, and builds its write scripts with the
//! revision floor of the current recovery epoch (lua/prelude.lua).
//!
//! Upstream reference: etcd acknowledges a write only after its WAL entry is fsynced
//! (etcd `server/storage/wal/wal.go` `sync`), and kube-apiserver's resourceVersions are etcd
//! revisions, which never go back (`etcdutl snapshot restore --bump-revision` exists to keep
//! that true after a restore; a watcher older than the restore then gets 410 Expired,
//! apiserver `storage/etcd3/watcher.go`). Here:
//!
//! - **Durability modes** ([`Durability`]). `fsync` (default): Redis must run with
//!   `appendonly yes` and `appendfsync always`. Redis then fsyncs the AOF once per event-loop
//!   iteration for every write of every client in it (group commit) *before* it sends the
//!   replies and the pub/sub messages of that iteration, so an acknowledged write, and every
//!   event a watcher saw, is on disk. `everysec`: `appendonly yes` is required; a machine crash
//!   can lose the writes acknowledged in the last ~1–2 s (Redis's documented everysec window).
//!   `memory`: no persistence check at all; a Redis restart loses everything.
//! - **Recovery epochs.** Every time the storage meets a Redis server it has not seen before
//!   (a new `run_id`: restart, failover), one atomic script ([`EPOCH_LUA`]) starts a new epoch:
//!   `max(previous + 1, seconds since 2025-01-01)`, stored with the run id in [`EPOCH_KEY`]. The
//!   On a Redis Cluster the servers are the masters: a master with a run id not seen before
//!   ([`cluster_run`]; a restart or a failover) starts a new epoch for all.
//!   The storage's once-a-second check sees the new master set; a promoted replica without
//!   the current scripts cached answers the first write with NOSCRIPT, which enters the new
//!   epoch before that write runs, as after a restart.
//!   The epoch's revision floor is `epoch × 65,536`: every revision counter is moved to at least
//!   the floor (eagerly by a scan, and by every write script, whose text carries the floor), so
//!   a revision handed out before a crash and lost with unsynced data is never handed out
//!   again, as long as no (tenant, resource) averaged more than 65,536 writes/s over an epoch
//!   (one Redis server does far fewer) and the clock does not go back. Revisions stay below
//!   10^14 (exact in Redis's Lua numbers and in JavaScript) until 2073. A fresh, empty Redis
//!   starts at epoch 0 (floor 0), so a new installation counts from 1.

use std::fmt;
use std::str::FromStr;

/// Hash holding the recovery epoch (`epoch`) and the run id of the Redis server it is for
/// (`run`).
pub const EPOCH_KEY: &str = "cp:epoch";

/// Revisions per second of epoch time: the floor of epoch `e` is `e * FLOOR_PER_EPOCH`.
pub const FLOOR_PER_EPOCH: u64 = 65_536;

/// Starts a new epoch when a Redis server is one no epoch was started for. KEYS:
/// [`EPOCH_KEY`]. ARGV: the servers' run ids, comma-separated ("" = this server's, read
/// here), and whether any key exists ("1"/"0"; "" = this server's DBSIZE) — a cluster passes
/// its masters' run ids ([`cluster_run`]) and key counts, as one master cannot see the others.
/// The hash keeps the last [`KNOWN_RUNS`] run ids seen (`runs`; an older version's single
/// `run` counts as one): an epoch starts only for a run id not among them, so storage
/// replicas that see a cluster differently for a moment (one still routing to a failed
/// master) each add what they saw once, instead of starting epochs in turn. Returns `{epoch,
/// 1 if this call started it else 0}`.
pub const EPOCH_LUA: &str = r#"
local runs = ARGV[1]
if runs == '' then
  runs = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
end
local nonempty = ARGV[2] == '1'
if ARGV[2] == '' then
  nonempty = redis.call('DBSIZE') > 0
end
local cur = redis.call('HMGET', KEYS[1], 'runs', 'epoch', 'run')
local known = {}
local seen = {}
for id in string.gmatch(cur[1] or cur[3] or '', '[^,]+') do
  known[#known + 1] = id
  seen[id] = true
end
local fresh = false
for id in string.gmatch(runs, '[^,]+') do
  if not seen[id] then
    fresh = true
    seen[id] = true
    known[#known + 1] = id
  end
end
if cur[2] and not fresh then
  return {tonumber(cur[2]), 0}
end
while #known > tonumber(ARGV[3]) do
  table.remove(known, 1)
end
local e = 0
if cur[2] or nonempty then
  -- 1735689600 = 2025-01-01T00:00:00Z
  e = math.max(tonumber(cur[2] or '0') + 1, tonumber(redis.call('TIME')[1]) - 1735689600)
end
redis.call('HSET', KEYS[1], 'runs', table.concat(known, ','), 'epoch', e)
redis.call('HDEL', KEYS[1], 'run')
return {e, 1}
"#;

/// Run ids [`EPOCH_LUA`] remembers (the newest; every restart or failover adds one per new
/// master process).
pub const KNOWN_RUNS: usize = 256;

/// Moves one revision counter up to a floor. KEYS: the counter. ARGV: the floor.
pub const RAISE_LUA: &str = r#"
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
if cur < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1])
  return 1
end
return 0
"#;

/// The `run_id` of an `INFO server` reply.
pub fn run_id(info: &str) -> Option<&str> {
    info.lines()
        .find_map(|l| l.trim().strip_prefix("run_id:"))
        .filter(|r| !r.is_empty())
}

/// The run ids of a cluster's masters, sorted and joined, for [`EPOCH_LUA`]: a master
/// restarted or replaced by a failover brings a run id not seen before, and so a new epoch.
pub fn cluster_run(runs: &[&str]) -> String {
    let mut r: Vec<&str> = runs.to_vec();
    r.sort_unstable();
    r.join(",")
}

/// The revision floor of an epoch.
pub fn floor(epoch: u64) -> u64 {
    epoch.saturating_mul(FLOOR_PER_EPOCH)
}

/// How durable a write must be before the storage acknowledges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// On disk (Redis `appendfsync always`): nothing acknowledged is lost on a crash.
    #[default]
    Fsync,
    /// Redis `appendfsync everysec`: a machine crash loses up to ~2 s of acknowledged writes.
    Everysec,
    /// No persistence check: a Redis restart loses everything.
    Memory,
}

impl FromStr for Durability {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fsync" => Ok(Self::Fsync),
            "everysec" => Ok(Self::Everysec),
            "memory" => Ok(Self::Memory),
            _ => Err(format!(
                "unknown durability {s:?} (expected fsync, everysec or memory)"
            )),
        }
    }
}

impl fmt::Display for Durability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Fsync => "fsync",
            Self::Everysec => "everysec",
            Self::Memory => "memory",
        })
    }
}

/// What the storage does about a Redis persistence configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The configuration gives the chosen durability: serve silently.
    Ok,
    /// Serve, but log this warning.
    Warn(String),
    /// Do not serve writes: the configuration cannot give the chosen durability.
    Refuse(String),
}

/// Judges Redis's `appendonly` / `appendfsync` (`None`: CONFIG GET failed, e.g. a managed
/// Redis that disables CONFIG) against the chosen mode.
pub fn judge(mode: Durability, appendonly: Option<&str>, appendfsync: Option<&str>) -> Verdict {
    let fix = "start Redis with --appendonly yes --appendfsync always, or run the storage with \
               --durability everysec (or memory) to accept losing recent writes on a crash";
    match (mode, appendonly, appendfsync) {
        (Durability::Memory, ..) => Verdict::Ok,
        (_, None, _) | (_, _, None) => {
            let msg =
                "cannot read Redis persistence settings (CONFIG GET appendonly/appendfsync failed)";
            match mode {
                Durability::Fsync => Verdict::Refuse(format!(
                    "{msg}: cannot verify that acknowledged writes are on disk; {fix}"
                )),
                _ => Verdict::Warn(format!("{msg}; assuming the AOF is on")),
            }
        }
        (_, Some(ao), _) if ao != "yes" => Verdict::Refuse(format!(
            "Redis runs without AOF persistence (appendonly {ao}): acknowledged writes would be \
             lost on a restart; {fix}"
        )),
        (Durability::Fsync, _, Some("always")) => Verdict::Ok,
        (Durability::Fsync, _, Some(f)) => Verdict::Refuse(format!(
            "Redis runs with appendfsync {f}: writes would be acknowledged before they are on \
             disk; {fix}"
        )),
        (Durability::Everysec, _, Some("always")) => Verdict::Ok,
        (Durability::Everysec, _, Some("everysec")) => Verdict::Warn(
            "durability everysec: a machine crash can lose the writes acknowledged in the last \
             ~2 seconds (resourceVersions are still never reused)"
                .into(),
        ),
        (Durability::Everysec, _, Some(f)) => Verdict::Refuse(format!(
            "Redis runs with appendfsync {f}: the OS decides when data reaches the disk; \
             use appendfsync always or everysec"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts() {
        use Durability::*;
        let ok = |m, a, f| judge(m, a, f) == Verdict::Ok;
        let refused = |m, a, f| matches!(judge(m, a, f), Verdict::Refuse(_));
        let warned = |m, a, f| matches!(judge(m, a, f), Verdict::Warn(_));
        assert!(ok(Fsync, Some("yes"), Some("always")));
        assert!(refused(Fsync, Some("yes"), Some("everysec")));
        assert!(refused(Fsync, Some("yes"), Some("no")));
        assert!(refused(Fsync, Some("no"), Some("always")));
        assert!(refused(Fsync, None, None), "unverifiable is not durable");
        assert!(ok(Everysec, Some("yes"), Some("always")));
        assert!(warned(Everysec, Some("yes"), Some("everysec")));
        assert!(refused(Everysec, Some("yes"), Some("no")));
        assert!(refused(Everysec, Some("no"), Some("everysec")));
        assert!(warned(Everysec, None, None));
        assert!(ok(Memory, Some("no"), Some("no")));
        assert!(ok(Memory, None, None));
    }

    #[test]
    fn modes_parse_and_print() {
        for m in [Durability::Fsync, Durability::Everysec, Durability::Memory] {
            assert_eq!(m.to_string().parse::<Durability>(), Ok(m));
        }
        assert!("always".parse::<Durability>().is_err());
        assert_eq!(Durability::default(), Durability::Fsync);
    }

    #[test]
    fn server_identity() {
        assert_eq!(
            run_id("# Server\r\nredis_version:7.0.15\r\nrun_id:ab12\r\ntcp_port:1\r\n"),
            Some("ab12")
        );
        assert_eq!(run_id("run_id:\r\n"), None);
        assert_eq!(cluster_run(&["c", "a", "b"]), "a,b,c");
        assert_ne!(cluster_run(&["a", "b", "c"]), cluster_run(&["a", "b", "d"]));
    }

    #[test]
    fn floors_stay_exact_in_lua_until_2073() {
        assert_eq!(floor(0), 0);
        // 2073-01-01 is 48 years after the epoch base.
        let secs_2073 = 48 * 365 * 86_400 + 12 * 86_400;
        assert!(floor(secs_2073) < 100_000_000_000_000);
        assert_eq!(floor(u64::MAX), u64::MAX);
    }
}
