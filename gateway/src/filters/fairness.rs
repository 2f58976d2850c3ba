//! Fairness seam: eighth layer of the edge stack (`stack.rs`), after authentication
//! and tenant access (it queues by tenant and user) and before authorization, where
//! upstream's `WithPriorityAndFairness`
//! (staging/src/k8s.io/apiserver/pkg/server/filters/priority-and-fairness.go, or
//! `WithMaxInFlightLimit` in maxinflight.go without it) sits.
//!
//! Pass-through today. The fairness issue puts here per-tenant, per-user queues with seats
//! for non-long-running requests and upstream's 429 answer with `Retry-After`
//! ([`crate::http::too_many_requests`]). The concurrent-watch bounds
//! ([`crate::watch_limit`]) stay in the router until then: their slot lives in the watch's
//! response body, and they count per client, which becomes the authenticated user.

super::seam!(
    /// The layer of [`Fairness`].
    FairnessLayer,
    /// Pass-through fairness (see the module docs for what comes here).
    Fairness
);

#[cfg(test)]
mod tests {
    super::super::seam_test!(super::FairnessLayer);
}
