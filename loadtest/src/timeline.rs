//! How a run went over time (the report's `timeline`) and the shape of its latency
//! distribution (the report's `latency_histogram`), both as log-spaced latency buckets.
//!
//! This sits beside [`crate::stats`]: each worker's [`Recorder`](crate::stats::Recorder) owns a
//! [`TimelineRecorder`] that accumulates the current second on its own, without locks, and
//! hands each finished second to the [`Timeline`] the run's workers share: one uncontended
//! lock per worker per second, never one per request. The shared timeline keeps at most
//! [`MAX_SLOTS`] slots; when a run outlasts that, neighbouring slots are merged and the slot
//! width doubles, so its memory stays bounded (a few MiB) whatever the run's length or number
//! of workers. Percentiles per slot come from [`LogHist`], a fixed set of
//! [`BUCKETS_PER_DECADE`] buckets per decade, so they are approximate (within about ±6 %, and
//! exact when a slot saw a single latency); the run's overall percentiles still come from the
//! full-resolution HDR histograms in `stats`.

use std::sync::{Arc, LazyLock, Mutex, MutexGuard};
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::stats::MAX_LATENCY_US;

/// Latency buckets per decade (neighbouring bounds differ by 10^(1/20) ≈ 1.12).
pub const BUCKETS_PER_DECADE: u32 = 20;
/// Most slots a [`Timeline`] keeps: one hour at one second per slot; longer runs get slots of
/// 2, 4, 8, ... seconds.
pub const MAX_SLOTS: usize = 3600;

/// Lower bounds of the latency buckets in µs (1, 2, 3, ... 10, 11, 13, ...: 10^(k/20)
/// rounded, duplicates dropped), then the end of the last one (`MAX_LATENCY_US + 1`).
static BOUNDS: LazyLock<Vec<u64>> = LazyLock::new(|| {
    let mut bounds = vec![1u64];
    for k in 1.. {
        let v = 10f64
            .powf(f64::from(k) / f64::from(BUCKETS_PER_DECADE))
            .round() as u64;
        if v > MAX_LATENCY_US {
            break;
        }
        if bounds.last().is_some_and(|&last| v > last) {
            bounds.push(v);
        }
    }
    bounds.push(MAX_LATENCY_US + 1);
    bounds
});

/// Number of latency buckets.
pub fn bucket_count() -> usize {
    BOUNDS.len() - 1
}

/// The bucket holding a latency of `us` µs (out-of-range values go to the first or last).
pub fn bucket_of(us: u64) -> usize {
    BOUNDS
        .partition_point(|&b| b <= us)
        .saturating_sub(1)
        .min(bucket_count() - 1)
}

/// Bucket `i` covers `lo..hi` µs (`hi` excluded).
pub fn bucket_bounds(i: usize) -> (u64, u64) {
    (BOUNDS[i], BOUNDS[i + 1])
}

/// A latency histogram over the fixed log-spaced buckets, plus the exact extremes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LogHist {
    /// Count per bucket; empty until the first sample.
    counts: Vec<u64>,
    total: u64,
    min: u64,
    max: u64,
}

impl LogHist {
    /// Adds one latency in µs.
    pub fn record(&mut self, us: u64) {
        if self.counts.is_empty() {
            self.counts = vec![0; bucket_count()];
            self.min = u64::MAX;
        }
        self.counts[bucket_of(us)] += 1;
        self.total += 1;
        self.min = self.min.min(us);
        self.max = self.max.max(us);
    }

    /// Adds another histogram's samples to these.
    pub fn add(&mut self, other: &LogHist) {
        if other.total == 0 {
            return;
        }
        if self.total == 0 {
            *self = other.clone();
            return;
        }
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
        self.total += other.total;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// Number of samples.
    pub fn len(&self) -> u64 {
        self.total
    }

    /// Whether no sample was recorded.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// The `q` quantile (0..=1): the geometric middle of the bucket holding it, clamped to the
    /// smallest and largest sample; 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                let (lo, hi) = bucket_bounds(i);
                let mid = ((lo as f64) * (hi as f64)).sqrt().round() as u64;
                return mid.clamp(self.min, self.max);
            }
        }
        self.max
    }

    fn clear(&mut self) {
        self.counts.fill(0);
        self.total = 0;
        self.min = u64::MAX;
        self.max = 0;
    }
}

/// What happened in one slot of the timeline.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Slot {
    /// Successful requests that completed in the slot.
    pub ok: u64,
    /// Failed requests that completed in the slot.
    pub errors: u64,
    /// Latencies of the successful ones.
    pub hist: LogHist,
}

impl Slot {
    fn add(&mut self, other: &Slot) {
        self.ok += other.ok;
        self.errors += other.errors;
        self.hist.add(&other.hist);
    }

    fn is_empty(&self) -> bool {
        self.ok == 0 && self.errors == 0
    }
}

/// Requests by completion time: slot `i` covers seconds `i * step ..` `(i + 1) * step` of the
/// measured phase. At most [`MAX_SLOTS`] slots; `step` is 1 s or a power of two beyond.
#[derive(Clone, Debug, PartialEq)]
pub struct Timeline {
    step_s: u64,
    slots: Vec<Slot>,
}

impl Default for Timeline {
    fn default() -> Self {
        Timeline {
            step_s: 1,
            slots: Vec::new(),
        }
    }
}

impl Timeline {
    /// Seconds per slot.
    pub fn step_s(&self) -> u64 {
        self.step_s
    }

    /// The slots, the first starting at the beginning of the measured phase.
    pub fn slots(&self) -> &[Slot] {
        &self.slots
    }

    /// Adds what happened during second `sec` (or a `self.step_s`-aligned span starting there).
    pub fn add_at(&mut self, sec: u64, slot: &Slot) {
        while sec / self.step_s >= MAX_SLOTS as u64 {
            self.coarsen();
        }
        let i = (sec / self.step_s) as usize;
        if self.slots.len() <= i {
            self.slots.resize_with(i + 1, Slot::default);
        }
        self.slots[i].add(slot);
    }

    /// Adds another timeline to this one (at the coarser of the two steps).
    pub fn merge(&mut self, other: &Timeline) {
        while self.step_s < other.step_s {
            self.coarsen();
        }
        for (i, s) in other.slots.iter().enumerate() {
            self.add_at(i as u64 * other.step_s, s);
        }
    }

    /// Doubles the step, merging slots pairwise.
    fn coarsen(&mut self) {
        self.step_s *= 2;
        self.slots = self
            .slots
            .chunks(2)
            .map(|pair| {
                let mut s = pair[0].clone();
                if let Some(b) = pair.get(1) {
                    s.add(b);
                }
                s
            })
            .collect();
    }

    /// The timeline as report points; `elapsed_s` (the length of the measured phase) bounds
    /// the width of the last slot.
    pub fn points(&self, elapsed_s: f64) -> Vec<TimelinePoint> {
        let step = self.step_s as f64;
        self.slots
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let t = i as f64 * step;
                TimelinePoint {
                    t_s: t,
                    dt_s: ((elapsed_s - t).min(step).max(0.001) * 1000.0).round() / 1000.0,
                    ok: s.ok,
                    errors: s.errors,
                    p50_us: s.hist.quantile(0.50),
                    p90_us: s.hist.quantile(0.90),
                    p99_us: s.hist.quantile(0.99),
                }
            })
            .collect()
    }
}

/// One slot of the report's timeline.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TimelinePoint {
    /// Start of the slot, in seconds since the measured phase began.
    pub t_s: f64,
    /// Width of the slot in seconds (1 s unless the run was longer than [`MAX_SLOTS`] s; the
    /// last slot ends with the run).
    pub dt_s: f64,
    /// Successful requests completed in the slot.
    pub ok: u64,
    /// Failed requests completed in the slot.
    pub errors: u64,
    /// Median latency of the slot's successful requests (µs, approximate; 0 if none).
    pub p50_us: u64,
    /// 90th percentile (µs, approximate).
    pub p90_us: u64,
    /// 99th percentile (µs, approximate).
    pub p99_us: u64,
}

/// One non-empty bucket of the report's latency histogram.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct HistogramBucket {
    /// Lower bound in µs (included).
    pub lo_us: u64,
    /// Upper bound in µs (excluded).
    pub hi_us: u64,
    /// Successful requests whose latency fell in the bucket.
    pub count: u64,
}

/// The non-empty log-spaced buckets of an HDR latency histogram (µs), in increasing order.
pub fn histogram_buckets(h: &Histogram<u64>) -> Vec<HistogramBucket> {
    let mut counts = vec![0u64; bucket_count()];
    for v in h.iter_recorded() {
        counts[bucket_of(h.median_equivalent(v.value_iterated_to()))] += v.count_at_value();
    }
    counts
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(i, &count)| {
            let (lo_us, hi_us) = bucket_bounds(i);
            HistogramBucket {
                lo_us,
                hi_us,
                count,
            }
        })
        .collect()
}

fn lock(t: &Mutex<Timeline>) -> MutexGuard<'_, Timeline> {
    // A worker that panicked mid-update leaves counts that are still usable.
    t.lock().unwrap_or_else(|e| e.into_inner())
}

/// A worker's side of the timeline: the current second, kept privately, and the run's shared
/// [`Timeline`] it is handed to when the next second starts.
#[derive(Clone, Debug, Default)]
pub struct TimelineRecorder {
    shared: Arc<Mutex<Timeline>>,
    sec: u64,
    current: Slot,
}

impl TimelineRecorder {
    /// A recorder feeding `shared` (give every worker of a run the same one).
    pub fn new(shared: Arc<Mutex<Timeline>>) -> TimelineRecorder {
        TimelineRecorder {
            shared,
            sec: 0,
            current: Slot::default(),
        }
    }

    /// A success of `us` µs completed `at` after the start of the measured phase.
    pub fn ok(&mut self, at: Duration, us: u64) {
        self.roll(at);
        self.current.ok += 1;
        self.current.hist.record(us);
    }

    /// A failure completed `at` after the start of the measured phase.
    pub fn error(&mut self, at: Duration) {
        self.roll(at);
        self.current.errors += 1;
    }

    fn roll(&mut self, at: Duration) {
        let sec = at.as_secs();
        if sec != self.sec {
            self.flush();
            self.sec = sec;
        }
    }

    /// Hands the current second to the shared timeline.
    pub fn flush(&mut self) {
        if !self.current.is_empty() {
            lock(&self.shared).add_at(self.sec, &self.current);
            self.current.ok = 0;
            self.current.errors = 0;
            self.current.hist.clear();
        }
    }

    /// Takes in another recorder's measurements. Recorders of one run share their timeline,
    /// so only the other's current second moves; a separate timeline is emptied into this
    /// one (so merging several recorders that share one never counts it twice).
    pub fn merge(&mut self, mut other: TimelineRecorder) {
        other.flush();
        if !Arc::ptr_eq(&self.shared, &other.shared) {
            let theirs = std::mem::take(&mut *lock(&other.shared));
            lock(&self.shared).merge(&theirs);
        }
    }

    /// Everything recorded so far: the shared timeline plus the current second.
    pub fn snapshot(&self) -> Timeline {
        let mut t = lock(&self.shared).clone();
        if !self.current.is_empty() {
            t.add_at(self.sec, &self.current);
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_log_spaced_and_cover_the_range() {
        let n = bucket_count();
        // 1 µs ..= 1 h is ~9.6 decades
        assert!((180..=200).contains(&n), "{n}");
        assert_eq!(bucket_bounds(0), (1, 2));
        assert_eq!(bucket_bounds(n - 1).1, MAX_LATENCY_US + 1);
        for i in 0..n {
            let (lo, hi) = bucket_bounds(i);
            assert!(lo < hi);
            assert_eq!(bucket_of(lo), i);
            assert_eq!(bucket_of(hi - 1), i);
            // above 100 µs neighbouring bounds are ~12 % apart (the last one ends at 1 h)
            if lo >= 100 && i + 1 < n {
                let r = hi as f64 / lo as f64;
                assert!((1.10..1.14).contains(&r), "{lo}..{hi}");
            }
        }
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(u64::MAX), n - 1);
        assert_eq!(bucket_bounds(bucket_of(1000)).0, 1000);
    }

    #[test]
    fn log_hist_quantiles_are_close() {
        let mut h = LogHist::default();
        assert_eq!(h.quantile(0.5), 0);
        for us in 1..=10_000u64 {
            h.record(us);
        }
        let near = |v: u64, want: f64| (v as f64 - want).abs() <= want * 0.07;
        assert!(near(h.quantile(0.5), 5000.0), "{}", h.quantile(0.5));
        assert!(near(h.quantile(0.9), 9000.0), "{}", h.quantile(0.9));
        assert!(near(h.quantile(0.99), 9900.0), "{}", h.quantile(0.99));
        assert_eq!(h.quantile(1.0), 10_000);
        // one value: exact, thanks to the clamp to min/max
        let mut one = LogHist::default();
        for _ in 0..5 {
            one.record(1234);
        }
        assert_eq!(one.quantile(0.5), 1234);
        assert_eq!(one.quantile(0.99), 1234);
    }

    #[test]
    fn timeline_buckets_by_second_and_merges_workers() {
        let shared = Arc::new(Mutex::new(Timeline::default()));
        let mut a = TimelineRecorder::new(shared.clone());
        let mut b = TimelineRecorder::new(shared.clone());
        for ms in 0..3000u64 {
            // a: 1 success per ms at 1 ms latency for 3 s
            a.ok(Duration::from_millis(ms), 1000);
        }
        b.ok(Duration::from_millis(500), 50_000);
        b.error(Duration::from_millis(2500));
        b.error(Duration::from_millis(4200)); // a quiet second 3 in between
        let mut total = TimelineRecorder::new(shared.clone());
        total.merge(a);
        total.merge(b);
        let t = total.snapshot();
        assert_eq!(t.step_s(), 1);
        let p = t.points(4.5);
        assert_eq!(p.len(), 5);
        assert_eq!((p[0].ok, p[0].errors), (1001, 0));
        assert_eq!((p[1].ok, p[2].ok, p[2].errors), (1000, 1000, 1));
        assert_eq!((p[3].ok, p[3].errors, p[3].p50_us), (0, 0, 0));
        assert_eq!((p[4].ok, p[4].errors), (0, 1));
        // second 1 saw only 1 ms: exact; second 0 also one 50 ms outlier: within a bucket
        assert_eq!((p[1].p50_us, p[1].p90_us, p[1].p99_us), (1000, 1000, 1000));
        assert!((1000..1122).contains(&p[0].p99_us), "{}", p[0].p99_us);
        assert_eq!(p[1].t_s, 1.0);
        assert_eq!(p[1].dt_s, 1.0);
        assert_eq!(p[4].dt_s, 0.5);
        // recorders sharing a timeline of their own, merged into a third: each counted once
        let sink = Arc::new(Mutex::new(Timeline::default()));
        let mut w1 = TimelineRecorder::new(sink.clone());
        let mut w2 = TimelineRecorder::new(sink);
        w1.ok(Duration::from_millis(100), 10);
        w2.ok(Duration::from_millis(1200), 10);
        let mut sum = TimelineRecorder::default();
        sum.merge(w1);
        sum.merge(w2);
        let oks: Vec<u64> = sum.snapshot().slots().iter().map(|s| s.ok).collect();
        assert_eq!(oks, [1, 1]);
    }

    #[test]
    fn long_runs_coarsen_instead_of_growing() {
        let mut rec = TimelineRecorder::default();
        let secs = 3 * MAX_SLOTS as u64 + 5;
        for s in 0..secs {
            rec.ok(Duration::from_secs(s), 100 + s);
        }
        let t = rec.snapshot();
        assert_eq!(t.step_s(), 4);
        assert!(t.slots().len() <= MAX_SLOTS);
        assert_eq!(t.slots().iter().map(|s| s.ok).sum::<u64>(), secs);
        assert_eq!(t.slots()[0].ok, 4);
        // merging a finer timeline into a coarser one keeps the totals
        let mut fine = Timeline::default();
        fine.add_at(
            7,
            &Slot {
                ok: 3,
                ..Slot::default()
            },
        );
        let mut coarse = t.clone();
        coarse.merge(&fine);
        assert_eq!(coarse.slots()[1].ok, 7);
        let p = t.points(secs as f64);
        assert_eq!(p[1].t_s, 4.0);
        assert_eq!(p[1].dt_s, 4.0);
    }

    #[test]
    fn histogram_export_uses_the_log_buckets() {
        let mut h = crate::stats::new_histogram();
        for _ in 0..10 {
            h.record(1050).unwrap();
        }
        h.record(20_500).unwrap();
        h.record(20_600).unwrap();
        let b = histogram_buckets(&h);
        assert_eq!(b.len(), 2);
        assert_eq!((b[0].lo_us, b[0].hi_us, b[0].count), (1000, 1122, 10));
        assert!(b[1].lo_us <= 20_500 && b[1].hi_us > 20_600, "{:?}", b[1]);
        assert_eq!(b[1].count, 2);
        assert_eq!(b.iter().map(|b| b.count).sum::<u64>(), h.len());
        assert!(histogram_buckets(&crate::stats::new_histogram()).is_empty());
    }
}
