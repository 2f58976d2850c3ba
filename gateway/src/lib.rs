//! Gateway: the Kubernetes REST API over the crdplane gRPC services
