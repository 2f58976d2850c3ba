#!/usr/bin/env bash
# Creates the Secrets the manifests of deploy/ mount, from the files `crdplane pki` wrote:
#   deploy/kubernetes/secrets.sh PKI_DIR [NAMESPACE] [extra kubectl flags...]
# e.g. deploy/kubernetes/secrets.sh pki crdplane, or with `--dry-run=client -o yaml` to see
# them. KUBECTL names the kubectl to use (default: kubectl).
#   crdplane-services-tls  the services CA and each process's certificate (mutual TLS)
#   crdplane-gateway       the users' CA, the serving certificate, the service-account key
#                          pair and the encryption configuration
#   crdplane-envoy         the users' CA and the Envoy health checker's client certificate
set -euo pipefail
pki=${1:?usage: secrets.sh PKI_DIR [NAMESPACE] [kubectl flags...]}
ns=${2:-crdplane}
shift $(( $# >= 2 ? 2 : 1 ))
k=${KUBECTL:-kubectl}
"$k" -n "$ns" create secret generic crdplane-services-tls \
  --from-file="$pki/services-ca.crt" --from-file="$pki/services/" "$@"
"$k" -n "$ns" create secret generic crdplane-gateway \
  --from-file="$pki/ca.crt" --from-file="$pki/apiserver.crt" --from-file="$pki/apiserver.key" \
  --from-file="$pki/sa.key" --from-file="$pki/sa.pub" --from-file="$pki/encryption-config.yaml" "$@"
"$k" -n "$ns" create secret generic crdplane-envoy \
  --from-file=ca.crt="$pki/ca.crt" --from-file=health.crt="$pki/envoy-health.crt" \
  --from-file=health.key="$pki/envoy-health.key" "$@"
