"""The Python kubernetes client over HTTPS (HTTP/1.1 through urllib3) against a gateway
serving TLS, run by tests/tests/authn.rs.

argv: KUBECONFIG (the launcher's: admin client certificate) CA_FILE SERVER TOKEN.
Checks: the kubeconfig's client certificate works for reads, writes and a watch; a
configuration with a bearer token from the gateway's token file works; a wrong token and
no credentials at all both get upstream's 401 Status."""
import json
import sys

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

kubeconfig, ca_file, server, token = sys.argv[1:5]


def check(cond, what):
    if not cond:
        print("FAILED:", what)
        sys.exit(1)
    print("ok:", what)


# 1. The generated kubeconfig, unmodified: client certificate authentication.
admin = config.new_client_from_config(config_file=kubeconfig)
core = client.CoreV1Api(admin)
names = [n.metadata.name for n in core.list_namespace().items]
check("default" in names, "admin lists namespaces over https")
cm = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="tls-py"), data={"a": "1"})
core.create_namespaced_config_map("default", cm)
got = core.read_namespaced_config_map("tls-py", "default")
check(got.data == {"a": "1"}, "admin creates and reads a ConfigMap")
w = watch.Watch()
seen = []
for ev in w.stream(core.list_namespaced_config_map, "default", timeout_seconds=5):
    seen.append((ev["type"], ev["object"].metadata.name))
    if ev["object"].metadata.name == "tls-py":
        w.stop()
check(("ADDED", "tls-py") in seen, "a watch over HTTP/1.1 and TLS delivers the ConfigMap")


def token_client(tok):
    c = client.Configuration()
    c.host = server
    c.ssl_ca_cert = ca_file
    if tok is not None:
        c.api_key = {"authorization": tok}
        c.api_key_prefix = {"authorization": "Bearer"}
    return client.CoreV1Api(client.ApiClient(c))


# 2. A bearer token from --token-auth-file.
got = token_client(token).read_namespaced_config_map("tls-py", "default")
check(got.metadata.name == "tls-py", "a token-file user reads the ConfigMap")

# 3. Bad credentials and none at all: 401 with upstream's Status.
for label, tok in (("a wrong token", "not-" + token), ("no credentials", None)):
    try:
        token_client(tok).list_namespace()
        check(False, label + " is refused")
    except ApiException as e:
        body = json.loads(e.body)
        check(
            e.status == 401
            and body
            == {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": "Unauthorized",
                "reason": "Unauthorized",
                "code": 401,
            },
            label + " gets 401 Unauthorized",
        )

print("all checks passed")
