"""The Python `kubernetes` client against crdplane, for what differs between its releases:
`watch.Watch().stream()` (22.6 sends `watch=True`, newer releases `watch=true`) over
namespaces and custom objects, and `patch_namespace` (a dict body goes as a strategic merge
patch). Run by tests/tests/python_compat.rs with the gateway URL as argv[1], once per Python
interpreter that has the client."""
import sys
import time

import kubernetes
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

cfg = client.Configuration()
cfg.host = sys.argv[1]
api = client.ApiClient(cfg)
v1 = client.CoreV1Api(api)
ext = client.ApiextensionsV1Api(api)
co = client.CustomObjectsApi(api)
print("kubernetes client", kubernetes.__version__)

crd = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.compat.example.com"},
    "spec": {
        "group": "compat.example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
        }],
    },
}
ext.create_custom_resource_definition(crd)
g, v, p = "compat.example.com", "v1", "widgets"
v1.create_namespace({"metadata": {"name": "py-compat"}})
for _ in range(200):
    try:
        co.create_namespaced_custom_object(g, v, "py-compat", p, {
            "apiVersion": "compat.example.com/v1", "kind": "Widget",
            "metadata": {"name": "w1"}, "spec": {"x": 1}})
        break
    except ApiException:
        time.sleep(0.05)
else:
    raise AssertionError("widgets never served")


def first_added(func, name, *args):
    """Streams a watch until the ADDED event of `name` (the initial state of a watch without
    resourceVersion); the watch's own timeout bounds the wait."""
    w = watch.Watch()
    for ev in w.stream(func, *args, timeout_seconds=10):
        obj = ev["object"]
        got = obj["metadata"]["name"] if isinstance(obj, dict) else obj.metadata.name
        if ev["type"] == "ADDED" and got == name:
            w.stop()
            return True
    return False


# 1. watch.Watch().stream over namespaces and custom objects yields events.
assert first_added(v1.list_namespace, "py-compat"), "no namespace watch event"
assert first_added(co.list_namespaced_custom_object, "w1", g, v, "py-compat", p), \
    "no custom object watch event"

# 2. patch_namespace: a dict body is a strategic merge patch; null removes a label.
ns = v1.patch_namespace("py-compat", {"metadata": {"labels": {"team": "a", "tier": "x"}}})
assert ns.metadata.labels.get("team") == "a", ns.metadata.labels
ns = v1.patch_namespace("py-compat", {"metadata": {"labels": {"tier": None}}})
assert "tier" not in ns.metadata.labels and ns.metadata.labels["team"] == "a", ns.metadata.labels

print("all checks passed")
