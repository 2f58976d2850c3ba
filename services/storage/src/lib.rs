//! Storage service: objects in Redis, resourceVersions, lists, watch fan-out (gRPC)
