"""The Python `kubernetes` client against crdplane, for what differs between its releases:
`watch.Watch().stream()` (22.6 sends `watch=True`, newer releases `watch=true`) over
namespaces and custom objects, `patch_namespace` (a dict body goes as a strategic merge
patch), the status subresource, JSON patch, list pagination with `_continue`, and delete
options (propagationPolicy as a V1DeleteOptions body and as a query parameter). Run by tests/tests/python_compat.rs with the gateway URL as argv[1], once per Python
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

# 3. Status subresource: patch_namespaced_custom_object_status (a dict body is a merge patch)
#    changes only status; the main endpoint ignores status.
co.create_namespaced_custom_object(g, v, "py-compat", p, {
    "apiVersion": "compat.example.com/v1", "kind": "Widget",
    "metadata": {"name": "w2", "labels": {"page": "yes"}}, "spec": {"x": 2}})
ext.patch_custom_resource_definition("widgets.compat.example.com", [
    {"op": "add", "path": "/spec/versions/0/subresources", "value": {"status": {}}}])
for _ in range(200):
    try:
        st = co.patch_namespaced_custom_object_status(
            g, v, "py-compat", p, "w2", {"status": {"ready": True}, "spec": {"x": 99}})
        break
    except ApiException as e:
        assert e.status == 404, (e.status, e.body)
        time.sleep(0.05)
else:
    raise AssertionError("the status subresource never appeared")
assert st["status"] == {"ready": True} and st["spec"] == {"x": 2}, st
assert co.get_namespaced_custom_object_status(g, v, "py-compat", p, "w2")["status"] == {"ready": True}
main = co.patch_namespaced_custom_object(g, v, "py-compat", p, "w2", {"status": {"ready": False}})
assert main["status"] == {"ready": True}, main

# 4. JSON patch. Both releases send application/merge-patch+json for custom objects whatever
#    the body; the newest takes `_content_type`, 22.6 lets a default header override it.
ops = [{"op": "test", "path": "/spec/x", "value": 2}, {"op": "replace", "path": "/spec/x", "value": 3}]
if int(kubernetes.__version__.split(".")[0]) >= 30:
    jp = co.patch_namespaced_custom_object(g, v, "py-compat", p, "w2", ops,
                                           _content_type="application/json-patch+json")
else:
    japi = client.ApiClient(cfg)
    japi.set_default_header("Content-Type", "application/json-patch+json")
    jp = client.CustomObjectsApi(japi).patch_namespaced_custom_object(g, v, "py-compat", p, "w2", ops)
assert jp["spec"] == {"x": 3}, jp

# 5. List pagination: limit + _continue walks every item once, in name order.
names, token = [], None
while True:
    kw = {"limit": 1}
    if token:
        kw["_continue"] = token
    page = co.list_namespaced_custom_object(g, v, "py-compat", p, **kw)
    assert len(page["items"]) == 1, page
    names += [i["metadata"]["name"] for i in page["items"]]
    token = page["metadata"].get("continue")
    if not token:
        break
assert names == ["w1", "w2"], names
assert page["metadata"].get("remainingItemCount") is None, page["metadata"]
pages = v1.list_namespace(limit=1)
assert pages.metadata._continue, pages.metadata
rest = v1.list_namespace(limit=100, _continue=pages.metadata._continue)
assert "py-compat" in [n.metadata.name for n in pages.items + rest.items]

# 6. Delete options: a V1DeleteOptions body with propagationPolicy=Foreground returns the
#    object carrying the foregroundDeletion finalizer; the garbage collector removes it.
fg = co.delete_namespaced_custom_object(
    g, v, "py-compat", p, "w2", body=client.V1DeleteOptions(propagation_policy="Foreground"))
assert fg["kind"] == "Widget" and fg["metadata"]["finalizers"] == ["foregroundDeletion"], fg
assert fg["metadata"].get("deletionTimestamp"), fg
for _ in range(400):
    try:
        co.get_namespaced_custom_object(g, v, "py-compat", p, "w2")
        time.sleep(0.05)
    except ApiException as e:
        assert e.status == 404, (e.status, e.body)
        break
else:
    raise AssertionError("foreground deletion never finished")
bg = co.delete_namespaced_custom_object(g, v, "py-compat", p, "w1", propagation_policy="Background")
assert bg["status"] == "Success" and bg["details"]["name"] == "w1", bg
try:
    co.delete_namespaced_custom_object(g, v, "py-compat", p, "w1")
    raise AssertionError("a second delete succeeded")
except ApiException as e:
    assert e.status == 404, (e.status, e.body)

print("all checks passed")
