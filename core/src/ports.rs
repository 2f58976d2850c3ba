//! Default addresses of the crdplane components, written once: each binary's `--listen`
//! default and every other component's default endpoint for it come from here (the
//! gateway's `--storage`, the registry's `--validation`, …), so they cannot disagree.
//! Not on the request path; read only by the binaries' clap configurations.

/// The gateway (kube-apiserver's secure port number).
pub const GATEWAY_LISTEN: &str = "127.0.0.1:6443";
/// The storage service.
pub const STORAGE_LISTEN: &str = "127.0.0.1:7001";
/// The registry service.
pub const REGISTRY_LISTEN: &str = "127.0.0.1:7002";
/// The validation service.
pub const VALIDATION_LISTEN: &str = "127.0.0.1:7003";

/// Default gRPC endpoint of the storage service (its default listen address).
pub const STORAGE_ENDPOINT: &str = "http://127.0.0.1:7001";
/// Default gRPC endpoint of the registry service.
pub const REGISTRY_ENDPOINT: &str = "http://127.0.0.1:7002";
/// Default gRPC endpoint of the validation service.
pub const VALIDATION_ENDPOINT: &str = "http://127.0.0.1:7003";

/// Checks a `--listen` value: `HOST:PORT` (the host may be a name, an IPv4 address or a
/// bracketed IPv6 address; port 0 picks a free port).
pub fn check_listen(flag: &str, v: &str) -> Result<(), String> {
    let bad = || format!("{flag}: {v:?} is not HOST:PORT");
    let (host, port) = v.rsplit_once(':').ok_or_else(bad)?;
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(bad());
    }
    Ok(())
}

/// Checks a service endpoint flag: an `http://` or `https://` URL with a host, or a name
/// to resolve, `dns:///host:port`.
pub fn check_endpoint(flag: &str, list: &str) -> Result<(), String> {
    // A flag may name several replicas of a service, comma-separated.
    for v in list.split(',') {
        check_one_endpoint(flag, v)?;
    }
    Ok(())
}

fn check_one_endpoint(flag: &str, v: &str) -> Result<(), String> {
    if let Some(name) = v.strip_prefix("dns:") {
        let bad = || format!("{flag}: {v:?} is not dns:///HOST:PORT");
        let (host, port) = name
            .strip_prefix("///")
            .and_then(|n| n.rsplit_once(':'))
            .ok_or_else(bad)?;
        if host.is_empty() || host.contains('/') || port.parse::<u16>().is_err() {
            return Err(bad());
        }
        return Ok(());
    }
    let rest = v
        .strip_prefix("http://")
        .or_else(|| v.strip_prefix("https://"))
        .ok_or_else(|| {
            format!("{flag}: {v:?} is not an http:// or https:// URL (or dns:///HOST:PORT)")
        })?;
    if rest.is_empty() || rest.starts_with('/') {
        return Err(format!("{flag}: {v:?} has no host"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_the_listen_addresses() {
        for (listen, endpoint) in [
            (STORAGE_LISTEN, STORAGE_ENDPOINT),
            (REGISTRY_LISTEN, REGISTRY_ENDPOINT),
            (VALIDATION_LISTEN, VALIDATION_ENDPOINT),
        ] {
            assert_eq!(format!("http://{listen}"), endpoint);
        }
        let mut ports: Vec<&str> = [
            GATEWAY_LISTEN,
            STORAGE_LISTEN,
            REGISTRY_LISTEN,
            VALIDATION_LISTEN,
        ]
        .iter()
        .map(|l| l.rsplit_once(':').unwrap().1)
        .collect();
        ports.sort();
        ports.dedup();
        assert_eq!(ports.len(), 4, "every component has its own port");
    }

    #[test]
    fn listen_and_endpoint_checks() {
        let listen = [
            ("127.0.0.1:7001", true),
            ("0.0.0.0:0", true),
            ("[::1]:6443", true),
            ("localhost:80", true),
            ("127.0.0.1", false),
            (":7001", false),
            ("127.0.0.1:70000", false),
            ("127.0.0.1:x", false),
        ];
        for (v, ok) in listen {
            assert_eq!(check_listen("--listen", v).is_ok(), ok, "{v}");
        }
        assert_eq!(
            check_listen("--listen", "x").unwrap_err(),
            "--listen: \"x\" is not HOST:PORT"
        );
        let endpoints = [
            ("http://127.0.0.1:7001", true),
            ("https://storage:7001", true),
            ("127.0.0.1:7001", false),
            ("http://", false),
            ("grpc://x:1", false),
            ("dns:///crdplane-storage:7001", true),
            ("http://a:1,dns:///b:2", true),
            ("dns:///storage", false),
            ("dns://10.0.0.10/storage:7001", false),
            ("dns:///:7001", false),
            ("dns:storage:7001", false),
        ];
        for (v, ok) in endpoints {
            assert_eq!(check_endpoint("--storage", v).is_ok(), ok, "{v}");
        }
    }
}
