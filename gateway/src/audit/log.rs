//! The log backend: one JSON line per event (`--audit-log-format=json`, upstream's default)
//! appended to `--audit-log-path`, or written to standard output for `-`.
//!
//! Rotation follows upstream's lumberjack logger: a write that would take the file past
//! `--audit-log-maxsize` megabytes (0: lumberjack's 100) first renames it to
//! `<name>-<UTC time 2006-01-02T15-04-05.000><ext>` beside it and starts a new file
//! (mode 0600); then backups beyond `--audit-log-maxbackup` (0: all kept) and older than
//! `--audit-log-maxage` days (0: no limit) are removed, oldest first. A file that exists
//! at start is appended to.
//!
//! In blocking mode (the default) the request's task writes its event itself, under the
//! file's lock, as upstream's blocking backend does: one `write` per event, no thread
//! hand-off (handing each event to a writer thread and waking the request back cost more
//! CPU than the write). In batch mode events gather in memory (at most [`QUEUE`]; more are
//! dropped and counted) and a thread writes them every [`BATCH_WAIT`].

use super::{Counters, Mode};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// lumberjack's size when none is given.
const DEFAULT_MAX_MB: u64 = 100;

/// How many events a batch queue holds (upstream's buffered backend default, 10000).
pub const QUEUE: usize = 10_000;

/// `--audit-log-*`.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// The file; None: standard output (`-`).
    pub path: Option<PathBuf>,
    /// Rotate before a write takes the file past this many bytes.
    pub max_bytes: u64,
    /// How many rotated files to keep (0: all).
    pub max_backups: usize,
    /// How old rotated files may get (None: no limit).
    pub max_age: Option<Duration>,
}

impl Settings {
    /// The settings of the flags (`maxsize` in megabytes, `maxage` in days).
    pub fn from_flags(path: &str, max_size_mb: u64, max_backups: usize, max_age_days: u64) -> Self {
        let mb = if max_size_mb == 0 {
            DEFAULT_MAX_MB
        } else {
            max_size_mb
        };
        Settings {
            path: (path != "-").then(|| PathBuf::from(path)),
            max_bytes: mb * 1024 * 1024,
            max_backups,
            max_age: (max_age_days > 0).then(|| Duration::from_secs(max_age_days * 86_400)),
        }
    }
}

/// A size-rotated file (see the module docs).
pub struct Rotating {
    s: Settings,
    path: PathBuf,
    file: File,
    size: u64,
}

fn open_new(path: &Path) -> std::io::Result<File> {
    let mut o = OpenOptions::new();
    o.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    o.open(path)
}

impl Rotating {
    /// Opens (appending) or creates the file of `s`, which must name one.
    pub fn open(s: Settings) -> std::io::Result<Self> {
        let path = s
            .path
            .clone()
            .ok_or_else(|| std::io::Error::other("no path"))?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let mut o = OpenOptions::new();
        o.append(true).create(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
        let file = o.open(&path)?;
        let size = file.metadata()?.len();
        Ok(Rotating {
            s,
            path,
            file,
            size,
        })
    }

    /// The name a rotation moves the current file to.
    fn backup_name(&self, at: chrono::DateTime<chrono::Utc>) -> PathBuf {
        let stem = self
            .path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let ext = self
            .path
            .extension()
            .map(|e| format!(".{}", e.to_string_lossy()))
            .unwrap_or_default();
        let name = format!("{stem}-{}{ext}", at.format("%Y-%m-%dT%H-%M-%S%.3f"));
        self.path.with_file_name(name)
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        let backup = self.backup_name(chrono::Utc::now());
        std::fs::rename(&self.path, &backup)?;
        self.file = open_new(&self.path)?;
        self.size = 0;
        self.remove_old();
        Ok(())
    }

    /// The rotated files of this log, newest first.
    fn backups(&self) -> Vec<(SystemTime, PathBuf)> {
        let dir = self
            .path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let stem = self
            .path
            .file_stem()
            .map(|s| format!("{}-", s.to_string_lossy()))
            .unwrap_or_default();
        let ext = self
            .path
            .extension()
            .map(|e| format!(".{}", e.to_string_lossy()))
            .unwrap_or_default();
        let mut out: Vec<(SystemTime, PathBuf)> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let ts = name.strip_prefix(&stem)?.strip_suffix(&ext)?;
                let t = chrono::NaiveDateTime::parse_from_str(ts, "%Y-%m-%dT%H-%M-%S%.3f").ok()?;
                Some((SystemTime::from(t.and_utc()), e.path()))
            })
            .collect();
        out.sort_by_key(|b| std::cmp::Reverse(b.0));
        out
    }

    fn remove_old(&self) {
        let now = SystemTime::now();
        for (i, (t, p)) in self.backups().into_iter().enumerate() {
            let too_many = self.s.max_backups > 0 && i >= self.s.max_backups;
            let too_old = self
                .s
                .max_age
                .is_some_and(|age| now.duration_since(t).unwrap_or_default() > age);
            if (too_many || too_old)
                && let Err(e) = std::fs::remove_file(&p)
            {
                tracing::warn!("audit log: removing the old backup {}: {e}", p.display());
            }
        }
    }

    /// Writes `lines` (whole JSON lines), rotating before a line that would not fit.
    pub fn write_lines<'a>(
        &mut self,
        lines: impl Iterator<Item = &'a [u8]>,
    ) -> std::io::Result<()> {
        let mut chunk: Vec<u8> = Vec::new();
        for l in lines {
            let len = l.len() as u64;
            if self.size + chunk.len() as u64 + len > self.s.max_bytes {
                if !chunk.is_empty() {
                    self.file.write_all(&chunk)?;
                    self.size += chunk.len() as u64;
                    chunk.clear();
                }
                if self.size > 0 {
                    self.rotate()?;
                }
            }
            chunk.extend_from_slice(l);
        }
        if !chunk.is_empty() {
            self.file.write_all(&chunk)?;
            self.size += chunk.len() as u64;
        }
        Ok(())
    }
}

/// Where the writer thread writes.
enum Out {
    File(Rotating),
    Stdout,
}

impl Out {
    fn write_lines<'a>(&mut self, lines: impl Iterator<Item = &'a [u8]>) -> std::io::Result<()> {
        match self {
            Out::File(f) => f.write_lines(lines),
            Out::Stdout => {
                let mut o = std::io::stdout().lock();
                for l in lines {
                    o.write_all(l)?;
                }
                o.flush()
            }
        }
    }
}

/// How long batch mode lets events gather before it writes them.
pub const BATCH_WAIT: Duration = Duration::from_millis(100);

/// The log backend of a gateway.
pub(crate) struct LogBackend {
    out: Mutex<Out>,
    mode: Mode,
    /// Batch mode: the events not yet written.
    pending: Mutex<Vec<Arc<[u8]>>>,
    counters: Arc<Counters>,
}

impl LogBackend {
    /// Opens the log; in batch mode also starts the thread that writes what gathered every
    /// [`BATCH_WAIT`].
    pub(crate) fn start(
        s: Settings,
        mode: Mode,
        counters: Arc<Counters>,
    ) -> Result<Arc<Self>, String> {
        let out = match &s.path {
            Some(p) => Out::File(
                Rotating::open(s.clone())
                    .map_err(|e| format!("--audit-log-path {}: {e}", p.display()))?,
            ),
            None => Out::Stdout,
        };
        let b = Arc::new(LogBackend {
            out: Mutex::new(out),
            mode,
            pending: Mutex::new(Vec::new()),
            counters,
        });
        if mode == Mode::Batch {
            let weak = Arc::downgrade(&b);
            std::thread::Builder::new()
                .name("audit-log".into())
                .spawn(move || {
                    while let Some(b) = weak.upgrade() {
                        b.flush();
                        drop(b);
                        std::thread::sleep(BATCH_WAIT);
                    }
                })
                .map_err(|e| format!("starting the audit log writer: {e}"))?;
        }
        Ok(b)
    }

    /// Blocking mode: writes `line` now (the request waits, as upstream's blocking
    /// backend). Batch mode: queues it, or drops and counts it when [`QUEUE`] events wait.
    /// False when a blocking write failed (the error is logged and counted either way).
    pub(crate) fn write(&self, line: &Arc<[u8]>) -> bool {
        match self.mode {
            Mode::Blocking | Mode::BlockingStrict => self.write_lines(std::slice::from_ref(line)),
            Mode::Batch => {
                let mut p = self.pending.lock().expect("audit queue");
                if p.len() < QUEUE {
                    p.push(line.clone());
                } else {
                    drop(p);
                    let n = self.counters.lost("log", 1);
                    if n == 1 || n.is_multiple_of(1000) {
                        tracing::error!(
                            total_lost = n,
                            "audit event dropped: audit buffer queue blocked"
                        );
                    }
                }
                true
            }
        }
    }

    /// The backend's mode.
    pub(crate) fn mode(&self) -> Mode {
        self.mode
    }

    /// Writes what batch mode gathered.
    fn flush(&self) {
        let lines = std::mem::take(&mut *self.pending.lock().expect("audit queue"));
        if !lines.is_empty() {
            let _ = self.write_lines(&lines);
        }
    }

    fn write_lines(&self, lines: &[Arc<[u8]>]) -> bool {
        let r = self
            .out
            .lock()
            .expect("audit log")
            .write_lines(lines.iter().map(|l| &l[..]));
        if let Err(e) = &r {
            let n = self.counters.lost("log", lines.len() as u64);
            tracing::error!(
                lost = lines.len(),
                total_lost = n,
                "audit log: writing events failed: {e}"
            );
        }
        r.is_ok()
    }
}

impl Drop for LogBackend {
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotates_by_size_and_keeps_the_newest_backups() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        std::fs::write(&path, b"old line\n").unwrap();
        let s = Settings {
            path: Some(path.clone()),
            max_bytes: 100,
            max_backups: 2,
            max_age: None,
        };
        let mut r = Rotating::open(s).unwrap();
        // Appended to what was there.
        r.write_lines([&b"a\n"[..]].into_iter()).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"old line\na\n");
        let line = [b'x'; 39]
            .iter()
            .copied()
            .chain([b'\n'])
            .collect::<Vec<u8>>();
        // 11 + 40 + 40 = 91 fits; the next one rotates, and so on: three rotations.
        for _ in 0..8 {
            r.write_lines([&line[..]].into_iter()).unwrap();
            // Backup names carry milliseconds: keep them apart.
            std::thread::sleep(Duration::from_millis(3));
        }
        let current = std::fs::read(&path).unwrap();
        assert!(current.len() <= 100 && !current.is_empty());
        assert!(current.ends_with(b"\n"));
        let backups = r.backups();
        assert_eq!(backups.len(), 2, "{backups:?}");
        for (_, b) in &backups {
            let name = b.file_name().unwrap().to_string_lossy().into_owned();
            assert!(
                name.starts_with("audit-") && name.ends_with(".log"),
                "{name}"
            );
            assert!(std::fs::metadata(b).unwrap().len() <= 100);
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
                0o600
            );
        }
        // Every line written is in exactly one file, whole.
        let mut all = String::new();
        for p in std::fs::read_dir(dir.path()).unwrap() {
            all.push_str(&std::fs::read_to_string(p.unwrap().path()).unwrap());
        }
        assert!(
            all.lines()
                .all(|l| l == "a" || l == "old line" || l.len() == 39)
        );
    }

    #[test]
    fn both_modes_write_every_line() {
        let dir = tempfile::tempdir().unwrap();
        for mode in [Mode::Blocking, Mode::Batch] {
            let path = dir.path().join(format!("{mode:?}.log"));
            let b = LogBackend::start(
                Settings::from_flags(path.to_str().unwrap(), 0, 0, 0),
                mode,
                Arc::new(Counters::get()),
            )
            .unwrap();
            for i in 0..3 {
                b.write(&Arc::from(format!("{{\"n\":{i}}}\n").into_bytes()));
            }
            if mode == Mode::Blocking {
                // Written before write returned.
                assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 3);
            }
            // Batch mode: written by its thread within BATCH_WAIT, or at the latest when the
            // backend goes (the thread may hold the last reference for a moment).
            drop(b);
            let until = std::time::Instant::now() + Duration::from_secs(5);
            while std::fs::read_to_string(&path).unwrap().lines().count() < 3
                && std::time::Instant::now() < until
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            assert_eq!(
                std::fs::read_to_string(&path).unwrap(),
                "{\"n\":0}\n{\"n\":1}\n{\"n\":2}\n"
            );
        }
    }

    #[test]
    fn flags() {
        let s = Settings::from_flags("-", 0, 0, 0);
        assert_eq!(s.path, None);
        assert_eq!(s.max_bytes, 100 * 1024 * 1024);
        assert_eq!(s.max_age, None);
        let s = Settings::from_flags("/var/log/audit.log", 5, 3, 2);
        assert_eq!(s.max_bytes, 5 * 1024 * 1024);
        assert_eq!(s.max_age, Some(Duration::from_secs(2 * 86_400)));
    }
}
