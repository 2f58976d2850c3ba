//! Load tool: drives the gateway over HTTP and services over gRPC, reports HDR percentiles
