//! End-to-end and integration tests: real redis-server, real service binaries, real kubectl
