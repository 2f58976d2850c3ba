//! The `grpc.health.v1` service every crdplane service process serves next to its own.
//!
//! Where it sits: in front of the service in [`crate::serve_one`] / [`crate::serve_with_health`]:
//! requests under `/grpc.health.v1.Health/` go to tonic-health's implementation, everything
//! else to the process's service (one path-prefix comparison per request). Clients —
//! [`crate::Channel`] with several endpoints, Envoy, Kubernetes gRPC probes — use `Watch` or
//! `Check` to leave an endpoint out while it reports NOT_SERVING (gRPC health checking
//! protocol, `grpc/doc/health-checking.md`). The empty service name is the server's overall
//! status; the service's own name (e.g. `crdplane.v1.Storage`) is kept equal to it.

use std::convert::Infallible;
use std::task::{Context, Poll};

use futures::future::Either;
use tonic::body::Body;
use tonic_health::pb::health_server::HealthServer;
use tonic_health::server::{HealthReporter, HealthService};

pub use tonic_health::ServingStatus;

/// Path prefix of the health service's methods.
pub const PATH_PREFIX: &str = "/grpc.health.v1.Health/";

/// The health status of one process, and the service that reports it.
#[derive(Clone)]
pub struct Health {
    reporter: HealthReporter,
    name: &'static str,
}

impl std::fmt::Debug for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Health").field("name", &self.name).finish()
    }
}

impl Health {
    /// Health of a process serving the gRPC service `name`, initially `serving` or not.
    pub async fn new(name: &'static str, serving: bool) -> Self {
        let h = Self {
            reporter: HealthReporter::new(),
            name,
        };
        h.set(serving).await;
        h
    }

    /// Reports the process (and its service) as SERVING or NOT_SERVING; watchers hear of
    /// a change at once.
    pub async fn set(&self, serving: bool) {
        let status = if serving {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        };
        self.reporter.set_service_status("", status).await;
        self.reporter.set_service_status(self.name, status).await;
    }

    /// The gRPC service answering `Check` and `Watch`.
    pub fn service(&self) -> HealthServer<HealthService> {
        HealthServer::new(HealthService::from_health_reporter(self.reporter.clone()))
    }
}

/// A service with the health service beside it (see the module docs).
#[derive(Clone)]
pub struct WithHealth<S> {
    main: S,
    health: HealthServer<HealthService>,
}

impl<S> WithHealth<S> {
    /// `main` with `health` served beside it.
    pub fn new(main: S, health: &Health) -> Self {
        Self {
            main,
            health: health.service(),
        }
    }
}

type HealthFuture<B> = <HealthServer<HealthService> as tower::Service<http::Request<B>>>::Future;

impl<S, B> tower::Service<http::Request<B>> for WithHealth<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<Body>, Error = Infallible>,
    B: http_body::Body + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Either<S::Future, HealthFuture<B>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.main.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if req.uri().path().starts_with(PATH_PREFIX) {
            Either::Right(tower::Service::call(&mut self.health, req))
        } else {
            Either::Left(self.main.call(req))
        }
    }
}
