//! Registry service: CRDs, names, conditions, discovery, OpenAPI (gRPC)
