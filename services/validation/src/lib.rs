//! Validation service: structural schemas, pruning, defaulting, validation (gRPC)
