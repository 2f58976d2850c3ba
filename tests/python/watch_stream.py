"""The Python `kubernetes` client's watch helper against crdplane: `watch.Watch().stream()`
over CustomObjectsApi.list_namespaced_custom_object sees ADDED/MODIFIED/DELETED (replayed
from a resourceVersion and live), and its 410 handling of our ERROR event: without
timeout_seconds it retries once with the same resourceVersion, then raises ApiException
410 with reason "Expired: too old resource version: N (M)"; with timeout_seconds it raises
at once (kubernetes/base/watch/watch.py). Run by tests/tests/python_watch.rs with the
gateway URL as argv[1]; that stack's storage keeps a short history."""
import functools
import re
import sys
import threading
import time

from kubernetes import client, watch
from kubernetes.client.rest import ApiException

cfg = client.Configuration()
cfg.host = sys.argv[1]
api = client.ApiClient(cfg)
ext = client.ApiextensionsV1Api(api)
co = client.CustomObjectsApi(api)

crd = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "crontabs.stable.example.com"},
    "spec": {
        "group": "stable.example.com",
        "scope": "Namespaced",
        "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab"},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
        }],
    },
}
ext.create_custom_resource_definition(crd)
g, v, p, ns = "stable.example.com", "v1", "crontabs", "default"


def obj(name, image):
    return {"apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": name}, "spec": {"image": image}}


for _ in range(200):
    try:
        # A first object, so the list's resourceVersion is not "0" ("any" for a watch).
        co.create_namespaced_custom_object(g, v, ns, p, obj("seed", "s"))
        break
    except ApiException:
        time.sleep(0.05)
else:
    raise AssertionError("crontabs never served")
start_rv = co.list_namespaced_custom_object(g, v, ns, p)["metadata"]["resourceVersion"]


# 1. Replay from a resourceVersion: the three event types, in order.
co.create_namespaced_custom_object(g, v, ns, p, obj("a", "i1"))
co.patch_namespaced_custom_object(g, v, ns, p, "a", {"spec": {"image": "i2"}})
co.delete_namespaced_custom_object(g, v, ns, p, "a")
w = watch.Watch()
seen = []
for ev in w.stream(co.list_namespaced_custom_object, g, v, ns, p,
                   resource_version=start_rv, timeout_seconds=10):
    seen.append((ev["type"], ev["object"]["metadata"]["name"], ev["object"].get("spec", {}).get("image")))
    if len(seen) == 3:
        w.stop()
assert seen == [("ADDED", "a", "i1"), ("MODIFIED", "a", "i2"), ("DELETED", "a", "i2")], seen
# The helper tracked the last resourceVersion from the objects.
assert int(w.resource_version) > int(start_rv), w.resource_version

# 2. Live: a watch from now sees writes made while it runs.
def write_later():
    time.sleep(0.5)
    co.create_namespaced_custom_object(g, v, ns, p, obj("b", "x"))
    co.patch_namespaced_custom_object(g, v, ns, p, "b", {"spec": {"image": "y"}})
    co.delete_namespaced_custom_object(g, v, ns, p, "b")


rv_now = co.list_namespaced_custom_object(g, v, ns, p)["metadata"]["resourceVersion"]
t = threading.Thread(target=write_later)
t.start()
w = watch.Watch()
live = []
for ev in w.stream(co.list_namespaced_custom_object, g, v, ns, p,
                   resource_version=rv_now, timeout_seconds=15):
    live.append(ev["type"])
    if len(live) == 3:
        w.stop()
t.join()
assert live == ["ADDED", "MODIFIED", "DELETED"], live

# 3. 410: push the first revisions out of the (short) history.
for i in range(400):
    co.create_namespaced_custom_object(g, v, ns, p, obj("f%d" % i, "z"))

calls = []


@functools.wraps(co.list_namespaced_custom_object)
def counted(*args, **kwargs):
    calls.append(kwargs.get("resource_version"))
    return co.list_namespaced_custom_object(*args, **kwargs)


pattern = re.compile(r"^Expired: too old resource version: 1 \((\d+)\)$")
try:
    for ev in watch.Watch().stream(counted, g, v, ns, p, resource_version="1"):
        raise AssertionError("unexpected event %s" % ev["type"])
    raise AssertionError("no ApiException")
except ApiException as e:
    assert e.status == 410, e.status
    m = pattern.match(e.reason or "")
    assert m and int(m.group(1)) > 1, e.reason
# It retried exactly once, with the same resourceVersion.
assert calls == ["1", "1"], calls

# With timeout_seconds the helper does not retry: one request, then the exception.
calls.clear()
try:
    for ev in watch.Watch().stream(counted, g, v, ns, p, resource_version="1", timeout_seconds=5):
        raise AssertionError("unexpected event %s" % ev["type"])
    raise AssertionError("no ApiException")
except ApiException as e:
    assert e.status == 410 and pattern.match(e.reason), (e.status, e.reason)
assert calls == ["1"], calls

print("all checks passed")
