//! When requests are issued: the shared ticket dispenser that ends the run by request count
//! or deadline, and, for `--rate`, the open-loop schedule (request `i` is due at
//! `start + i / rate`). Latency of an open-loop request is measured from its due time, so a
//! server that falls behind shows up in the percentiles instead of silently slowing the
//! generator (no coordinated omission). Also a tiny deterministic PRNG for the workers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Offset of ticket `i` from the start of an open-loop run at `rate` requests/second.
pub fn due_offset(ticket: u64, rate: f64) -> Duration {
    let secs = ticket as f64 / rate;
    if secs.is_finite() && secs >= 0.0 {
        Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX)
    } else {
        Duration::MAX
    }
}

/// One permission to send a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticket {
    /// Position of the request in the run (0-based, across all workers).
    pub index: u64,
    /// Open loop: when the request is due (latency is measured from here).
    pub due: Option<Instant>,
}

/// The shared schedule of one run.
#[derive(Debug)]
pub struct Schedule {
    start: Instant,
    deadline: Option<Instant>,
    requests: Option<u64>,
    rate: Option<f64>,
    next: AtomicU64,
}

impl Schedule {
    /// A schedule starting at `start` that ends after `duration` and/or `requests` tickets,
    /// open loop at `rate` requests/second when given (a non-positive rate = closed loop).
    pub fn new(
        start: Instant,
        duration: Option<Duration>,
        requests: Option<u64>,
        rate: Option<f64>,
    ) -> Schedule {
        Schedule {
            start,
            deadline: duration.and_then(|d| start.checked_add(d)),
            requests,
            rate: rate.filter(|r| r.is_finite() && *r > 0.0),
            next: AtomicU64::new(0),
        }
    }

    /// When the measured phase started.
    pub fn start(&self) -> Instant {
        self.start
    }

    /// Hands out the next ticket, or None when the run is over (deadline reached, request
    /// budget spent, or — open loop — the next due time falls after the deadline).
    pub fn next(&self, now: Instant) -> Option<Ticket> {
        if self.deadline.is_some_and(|d| now >= d) {
            return None;
        }
        let index = self.next.fetch_add(1, Ordering::Relaxed);
        if self.requests.is_some_and(|n| index >= n) {
            return None;
        }
        let due = match self.rate {
            None => None,
            Some(r) => {
                let due = self.start.checked_add(due_offset(index, r))?;
                if self.deadline.is_some_and(|d| due >= d) {
                    return None;
                }
                Some(due)
            }
        };
        Some(Ticket { index, due })
    }

    /// Tickets handed out so far (including the refused ones past the budget).
    pub fn issued(&self) -> u64 {
        self.next.load(Ordering::Relaxed)
    }
}

/// SplitMix64: a small, fast, deterministic generator; good enough to pick operations and
/// working-set objects uniformly.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator whose sequence is fixed by `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform-ish index in `0..n` (n > 0; returns 0 for n == 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_offsets_are_evenly_spaced() {
        assert_eq!(due_offset(0, 100.0), Duration::ZERO);
        assert_eq!(due_offset(1, 100.0), Duration::from_millis(10));
        assert_eq!(due_offset(250, 100.0), Duration::from_millis(2500));
        assert_eq!(due_offset(3, 0.5), Duration::from_secs(6));
        // 1e6/s: microsecond spacing
        assert_eq!(due_offset(7, 1_000_000.0), Duration::from_micros(7));
        assert_eq!(due_offset(1, 0.0), Duration::MAX);
    }

    #[test]
    fn open_loop_stops_at_the_deadline() {
        let t0 = Instant::now();
        // 10/s for 1 s: tickets 0..=9 are due at 0, 100 ms, ..., 900 ms; ticket 10 (at 1 s) is not
        let s = Schedule::new(t0, Some(Duration::from_secs(1)), None, Some(10.0));
        let mut dues = Vec::new();
        while let Some(t) = s.next(t0) {
            dues.push(t.due.unwrap() - t0);
            assert!(dues.len() <= 10);
        }
        assert_eq!(dues.len(), 10);
        assert_eq!(dues[0], Duration::ZERO);
        assert_eq!(dues[9], Duration::from_millis(900));
    }

    #[test]
    fn request_budget_is_exact_across_threads() {
        let s = std::sync::Arc::new(Schedule::new(Instant::now(), None, Some(1000), None));
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let s = s.clone();
                std::thread::spawn(move || {
                    let mut n = 0;
                    while s.next(Instant::now()).is_some() {
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        let total: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(total, 1000);
    }

    #[test]
    fn closed_loop_stops_by_duration() {
        let t0 = Instant::now();
        let s = Schedule::new(t0, Some(Duration::from_secs(5)), None, None);
        let t = s.next(t0 + Duration::from_secs(4)).unwrap();
        assert_eq!(
            t,
            Ticket {
                index: 0,
                due: None
            }
        );
        assert!(s.next(t0 + Duration::from_secs(5)).is_none());
        // whichever comes first: budget of 2 within the duration
        let s = Schedule::new(t0, Some(Duration::from_secs(5)), Some(2), None);
        assert!(s.next(t0).is_some());
        assert!(s.next(t0).is_some());
        assert!(s.next(t0).is_none());
    }

    #[test]
    fn rng_is_deterministic_and_spreads() {
        let mut a = Rng::new(42);
        let mut b = Rng::new(42);
        assert_eq!(a.next_u64(), b.next_u64());
        let mut counts = [0u32; 10];
        for _ in 0..100_000 {
            counts[a.below(10) as usize] += 1;
        }
        assert!(
            counts.iter().all(|c| (9_000..11_000).contains(c)),
            "{counts:?}"
        );
        assert_eq!(a.below(0), 0);
    }
}
