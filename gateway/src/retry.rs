//! The read-modify-write loop every write of an existing object runs in (update, patch,
//! /status, /scale, /finalize of custom resources, CRDs and namespaces).
//!
//! Follows k8s.io/apiserver pkg/storage/etcd3/store.go `GuaranteedUpdate`: the update
//! function is applied to the current object and the result is written with a
//! compare-and-swap on its resourceVersion; when the swap loses (another write landed
//! between read and write) the object is read again and the function re-applied, for as long
//! as it takes. There is no bound: every lost swap means another write succeeded, so the
//! loop cannot livelock; a precondition the request itself carries (a resourceVersion in a
//! PUT body or in a patch) fails inside the function on the re-read, as upstream's
//! `tryUpdate` does (registry/generic/registry/store.go `Update`), and ends the loop.

use crdplane_core::{ApiError, Reason};
use crdplane_proto::GrpcStatusExt;
use std::future::Future;

/// Why one attempt did not produce a result.
#[derive(Debug)]
pub enum Failure {
    /// The compare-and-swap lost a race: read the object again and re-apply.
    Lost(ApiError),
    /// Anything else, including a precondition of the request: the request's answer.
    Final(ApiError),
}

impl From<ApiError> for Failure {
    fn from(e: ApiError) -> Self {
        Failure::Final(e)
    }
}

impl From<tonic::Status> for Failure {
    fn from(s: tonic::Status) -> Self {
        Failure::Final(ApiError::from_grpc(&s))
    }
}

/// Classifies the error of the conditional write itself: a conflict there is a lost race.
pub fn write_failed(e: ApiError) -> Failure {
    if e.reason == Reason::Conflict {
        Failure::Lost(e)
    } else {
        Failure::Final(e)
    }
}

/// Runs `attempt` (read, apply, conditional write) until it succeeds or fails for a reason
/// other than a lost race.
pub async fn guaranteed_update<T, F, Fut>(mut attempt: F) -> Result<T, ApiError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Failure>>,
{
    loop {
        match attempt().await {
            Ok(v) => return Ok(v),
            Err(Failure::Lost(_)) => continue,
            Err(Failure::Final(e)) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crdplane_core::GroupResource;
    use std::cell::Cell;

    #[tokio::test]
    async fn retries_lost_races_until_done_and_stops_on_other_errors() {
        let gr = GroupResource::new("stable.example.com", "crontabs");
        // Fifty lost races in a row (far more than any fixed bound) still end in success.
        let n = Cell::new(0);
        let r = guaranteed_update(|| {
            n.set(n.get() + 1);
            let k = n.get();
            let gr = gr.clone();
            async move {
                if k <= 50 {
                    Err(write_failed(ApiError::stale(&gr, "x")))
                } else {
                    Ok(k)
                }
            }
        })
        .await;
        assert_eq!(r.unwrap(), 51);
        // A precondition failure is final even though it is a 409.
        let n = Cell::new(0);
        let r: Result<(), _> = guaranteed_update(|| {
            n.set(n.get() + 1);
            let gr = gr.clone();
            async move { Err(Failure::Final(ApiError::stale(&gr, "x"))) }
        })
        .await;
        assert_eq!(r.unwrap_err().code, 409);
        assert_eq!(n.get(), 1);
        // Other write errors are final too.
        let r: Result<(), _> =
            guaranteed_update(|| async { Err(write_failed(ApiError::bad_request("no"))) }).await;
        assert_eq!(r.unwrap_err().code, 400);
    }
}
