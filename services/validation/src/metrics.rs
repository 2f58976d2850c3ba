//! Validation's Prometheus metrics, beside the gRPC server metrics of
//! `crdplane_transport::metrics` in the process's default registry (served by the service's
//! `--metrics-listen` listener): the size of the compiled-schema cache, read from the cache
//! at each scrape ([`CacheCollector`]), so the request path pays nothing for it.

use crate::server::SchemaCache;
use prometheus::IntGauge;
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use std::sync::Arc;

/// Reports a schema cache's entries, bytes and budget when scraped.
pub struct CacheCollector {
    cache: Arc<SchemaCache>,
    entries: IntGauge,
    bytes: IntGauge,
    budget: IntGauge,
}

impl CacheCollector {
    /// The collector of `cache`.
    pub fn new(cache: Arc<SchemaCache>) -> Self {
        let gauge = |name: &str, help: &str| IntGauge::new(name, help).expect("metric");
        Self {
            cache,
            entries: gauge(
                "crdplane_validation_schema_cache_entries",
                "Schemas (CRD versions of all tenants) in the compiled-schema cache.",
            ),
            bytes: gauge(
                "crdplane_validation_schema_cache_bytes",
                "Estimated heap bytes of the compiled schemas cached.",
            ),
            budget: gauge(
                "crdplane_validation_schema_cache_budget_bytes",
                "The byte budget of the compiled-schema cache (--schema-cache-bytes).",
            ),
        }
    }

    /// Registers the collector in the process's default registry. A second service in the
    /// same process (tests) keeps the first one's: the metrics describe one process.
    pub fn register(self) {
        let _ = prometheus::default_registry().register(Box::new(self));
    }
}

impl Collector for CacheCollector {
    fn desc(&self) -> Vec<&Desc> {
        [&self.entries, &self.bytes, &self.budget]
            .into_iter()
            .flat_map(|g| g.desc())
            .collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        self.entries.set(self.cache.len() as i64);
        self.bytes.set(self.cache.bytes() as i64);
        self.budget.set(self.cache.budget() as i64);
        [&self.entries, &self.bytes, &self.budget]
            .into_iter()
            .flat_map(|g| g.collect())
            .collect()
    }
}
