"""The Python kubernetes client with a service-account token from the TokenRequest API,
run by tests/tests/rbac.rs.

argv: CA_FILE SERVER TOKEN NAMESPACE.
Checks: the token (bound to `edit` in NAMESPACE) creates, reads and lists ConfigMaps there,
requests a token for itself through the client's TokenRequest API (create_namespaced_
service_account_token is what in-cluster controllers call), and is refused namespaces at
cluster scope with upstream's 403 Status."""
import json
import sys

from kubernetes import client
from kubernetes.client.rest import ApiException

ca_file, server, token, ns = sys.argv[1:5]


def check(cond, what):
    if not cond:
        print("FAILED:", what)
        sys.exit(1)
    print("ok:", what)


c = client.Configuration()
c.host = server
c.ssl_ca_cert = ca_file
c.api_key = {"authorization": token}
c.api_key_prefix = {"authorization": "Bearer"}
core = client.CoreV1Api(client.ApiClient(c))

cm = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="from-py-sa"), data={"k": "v"})
core.create_namespaced_config_map(ns, cm)
got = core.read_namespaced_config_map("from-py-sa", ns)
check(got.data == {"k": "v"}, "the service account creates and reads a ConfigMap")
names = [i.metadata.name for i in core.list_namespaced_config_map(ns).items]
check("from-py-sa" in names, "the service account lists ConfigMaps")

tr = client.AuthenticationV1TokenRequest(
    spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=600)
)
out = core.create_namespaced_service_account_token("builder", ns, tr)
check(out.status.token.count(".") == 2, "TokenRequest through the client gives a JWT")

try:
    core.list_namespace()
    check(False, "namespaces at cluster scope are refused")
except ApiException as e:
    body = json.loads(e.body)
    check(
        e.status == 403
        and body["message"]
        == 'namespaces is forbidden: User "system:serviceaccount:%s:builder" cannot list '
        'resource "namespaces" in API group "" at the cluster scope' % ns,
        "namespaces at cluster scope are refused with upstream's 403",
    )
print("all checks passed")
