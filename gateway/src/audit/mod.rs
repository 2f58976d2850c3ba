//! Audit backends: where the audit layer's events go (kube-apiserver's `--audit-log-*` and
//! `--audit-webhook-*` flags). The policy and the event are `crdplane_apiserver::audit`'s;
//! the layer that builds events is `filters/audit.rs`; this module writes them.
//!
//! - [`log`]: JSON lines to a file (or standard output for `-`), rotated by size like
//!   upstream's lumberjack logger (`--audit-log-maxsize` MB, `--audit-log-maxbackup`
//!   files, `--audit-log-maxage` days).
//! - [`webhook`]: `EventList` batches POSTed to the server a kubeconfig names
//!   (`--audit-webhook-config-file`).
//!
//! In `blocking` mode (the log's default, as upstream) a request waits until its event is
//! written: the log is written by the request's own task, the webhook's POST by its thread
//! while the request waits. In `batch` mode (the webhook's default) the request does not
//! wait; events gather (at most 10,000 per backend) and a thread sends them; an event that
//! finds the queue full is dropped, counted in `apiserver_audit_error_total` and logged,
//! as upstream's buffered backend does. Nothing fails silently: a write error is logged
//! with its cause and counted.

pub mod log;
pub mod webhook;

use crdplane_apiserver::audit::event::Event;
use crdplane_apiserver::audit::policy::{Attributes, Decision, Policy};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// How a backend hands events over (upstream `--audit-log-mode`, `--audit-webhook-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The request waits until its event is written.
    Blocking,
    /// As [`Mode::Blocking`], and a request whose `RequestReceived` event could not be
    /// written fails (500, "failed to store audit event") instead of going on unaudited.
    BlockingStrict,
    /// Events are queued and written in batches; a full queue drops them.
    Batch,
}

impl Mode {
    /// Parses a mode flag (upstream's modes and message).
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "blocking" => Ok(Mode::Blocking),
            "blocking-strict" => Ok(Mode::BlockingStrict),
            "batch" => Ok(Mode::Batch),
            _ => Err(format!(
                "invalid audit mode {s}, allowed modes are \"batch,blocking,blocking-strict\""
            )),
        }
    }

    /// Whether the request waits for its event.
    pub fn blocks(self) -> bool {
        matches!(self, Mode::Blocking | Mode::BlockingStrict)
    }
}

/// One queued event line, with the waiter of a blocking backend.
pub(crate) struct Queued {
    pub(crate) line: Arc<[u8]>,
    /// Told whether the line was stored.
    pub(crate) done: Option<oneshot::Sender<bool>>,
}

/// A backend as the auditor sees it.
pub(crate) enum Backend {
    /// The log, written by the request itself or gathered for its thread.
    Log(Arc<log::LogBackend>),
    /// The webhook: a bounded queue to its thread.
    Webhook {
        mode: Mode,
        tx: mpsc::Sender<Queued>,
    },
}

impl Backend {
    fn name(&self) -> &'static str {
        match self {
            Backend::Log(_) => "log",
            Backend::Webhook { .. } => "webhook",
        }
    }
}

/// What happened to the events, in the process's default registry (served at the gateway's
/// `/metrics`) under upstream's names: `apiserver_audit_event_total` (events handed to a
/// backend) and `apiserver_audit_error_total{plugin}` (events dropped because a batch queue
/// was full, or lost to a write error).
#[derive(Debug, Clone)]
pub struct Counters {
    /// Events handed to the backends.
    pub events: prometheus::IntCounter,
    errors: prometheus::IntCounterVec,
}

impl Counters {
    /// The process's counters (registered once).
    pub fn get() -> Self {
        static C: std::sync::OnceLock<Counters> = std::sync::OnceLock::new();
        C.get_or_init(|| {
            let events = prometheus::IntCounter::new(
                "apiserver_audit_event_total",
                "Counter of audit events generated and sent to the audit backend.",
            )
            .expect("metric");
            let errors = prometheus::IntCounterVec::new(
                prometheus::Opts::new(
                    "apiserver_audit_error_total",
                    "Counter of audit events that failed to be audited properly. Plugin identifies the plugin affected by the error.",
                ),
                &["plugin"],
            )
            .expect("metric");
            let _ = prometheus::register(Box::new(events.clone()));
            let _ = prometheus::register(Box::new(errors.clone()));
            Counters { events, errors }
        })
        .clone()
    }

    /// Counts `n` events lost by `plugin`; the total lost by it so far.
    pub fn lost(&self, plugin: &str, n: u64) -> u64 {
        let c = self.errors.with_label_values(&[plugin]);
        c.inc_by(n);
        c.get()
    }
}

/// The policy and the backends of one gateway.
pub struct Auditor {
    policy: Policy,
    backends: Vec<Backend>,
    /// What happened to the events.
    pub counters: Arc<Counters>,
}

impl std::fmt::Debug for Auditor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auditor")
            .field(
                "backends",
                &self.backends.iter().map(Backend::name).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// What the audit flags say, files not yet opened.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `--audit-policy-file`.
    pub policy: Policy,
    /// `--audit-log-path` and its rotation.
    pub log: Option<log::Settings>,
    /// `--audit-log-mode`.
    pub log_mode: Mode,
    /// `--audit-webhook-config-file` and its batching.
    pub webhook: Option<webhook::Settings>,
    /// `--audit-webhook-mode`.
    pub webhook_mode: Mode,
}

impl Auditor {
    /// Opens the backends (the log file is opened here, so an unwritable path fails the
    /// start) and starts their threads.
    pub fn start(s: Settings) -> Result<Self, String> {
        let counters = Arc::new(Counters::get());
        let mut backends = Vec::new();
        if let Some(l) = s.log {
            backends.push(Backend::Log(log::LogBackend::start(
                l,
                s.log_mode,
                counters.clone(),
            )?));
        }
        if let Some(w) = s.webhook {
            let tx = webhook::start(w, s.webhook_mode, counters.clone())?;
            backends.push(Backend::Webhook {
                mode: s.webhook_mode,
                tx,
            });
        }
        Ok(Self {
            policy: s.policy,
            backends,
            counters,
        })
    }

    /// What the policy says of a request.
    pub fn decide(&self, a: &Attributes<'_>) -> Decision {
        if self.backends.is_empty() {
            return Decision::NONE;
        }
        self.policy.evaluate(a)
    }

    /// Hands `ev` to every backend; returns once every blocking backend wrote it. False
    /// when a `blocking-strict` backend could not store it (upstream's `ProcessEvents`; the
    /// other modes ignore their errors here, as upstream's wrappers do).
    pub async fn emit(&self, ev: &Event) -> bool {
        let line: Arc<[u8]> = ev.line().into();
        let mut stored = true;
        for b in &self.backends {
            self.counters.events.inc();
            match b {
                Backend::Log(l) => {
                    if !l.write(&line) && l.mode() == Mode::BlockingStrict {
                        stored = false;
                    }
                }
                Backend::Webhook { mode, tx } if mode.blocks() => {
                    let (done, written) = oneshot::channel();
                    let q = Queued {
                        line: line.clone(),
                        done: Some(done),
                    };
                    let ok = if tx.send(q).await.is_ok() {
                        written.await.unwrap_or(false)
                    } else {
                        self.lost("webhook", "its writer has stopped");
                        false
                    };
                    if !ok && *mode == Mode::BlockingStrict {
                        stored = false;
                    }
                }
                Backend::Webhook { tx, .. } => self.offer(tx, line.clone()),
            }
        }
        stored
    }

    /// Hands `ev` to every backend without waiting for the webhook (for the end of a
    /// response body, which cannot wait); a blocking log is written at once.
    pub fn emit_now(&self, ev: &Event) {
        let line: Arc<[u8]> = ev.line().into();
        for b in &self.backends {
            self.counters.events.inc();
            match b {
                Backend::Log(l) => {
                    let _ = l.write(&line);
                }
                Backend::Webhook { tx, .. } => self.offer(tx, line.clone()),
            }
        }
    }

    fn offer(&self, tx: &mpsc::Sender<Queued>, line: Arc<[u8]>) {
        match tx.try_send(Queued { line, done: None }) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.lost("webhook", "audit buffer queue blocked")
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                self.lost("webhook", "its writer has stopped")
            }
        }
    }

    fn lost(&self, backend: &str, why: &str) {
        let n = self.counters.lost(backend, 1);
        // One line for the first loss and then one per thousand: a stuck backend must not
        // flood the log it may share.
        if n == 1 || n.is_multiple_of(1000) {
            tracing::error!(backend, total_lost = n, "audit event dropped: {why}");
        }
    }
}
