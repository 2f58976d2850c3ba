"""The Python `kubernetes` client against crdplane: CRD and custom objects through the
client's own APIs, exact Status texts surfaced as ApiException. Run by
tests/tests/python_client.rs with the gateway URL as argv[1]."""
import json
import sys
import time

from kubernetes import client
from kubernetes.client.rest import ApiException

cfg = client.Configuration()
cfg.host = sys.argv[1]
api = client.ApiClient(cfg)
ext = client.ApiextensionsV1Api(api)
co = client.CustomObjectsApi(api)
core = client.CoreV1Api(api)

crd = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "crontabs.stable.example.com"},
    "spec": {
        "group": "stable.example.com",
        "scope": "Namespaced",
        "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "shortNames": ["ct"]},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": {
                "cronSpec": {"type": "string"}, "image": {"type": "string"},
                "replicas": {"type": "integer", "minimum": 1, "maximum": 10}}}}}},
        }],
    },
}


def expect_error(fn, status, message):
    try:
        fn()
    except ApiException as e:
        assert e.status == status, (e.status, e.body)
        body = json.loads(e.body)
        assert body["message"] == message, body["message"]
        return body
    raise AssertionError("expected ApiException %d" % status)


# CRD through the typed client (body as a dict is sent as JSON).
created = ext.create_custom_resource_definition(crd)
assert created.metadata.name == "crontabs.stable.example.com"
conds = {c.type: c.status for c in created.status.conditions}
assert conds.get("Established") == "True", conds
assert [n.metadata.name for n in core.list_namespace().items] == ["default", "kube-public", "kube-system"]

g, v, p = "stable.example.com", "v1", "crontabs"
obj = {"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": "py"},
       "spec": {"cronSpec": "* * * * */5", "image": "img", "replicas": 1}}
made = co.create_namespaced_custom_object(g, v, "default", p, obj)
assert made["metadata"]["generation"] == 1 and made["metadata"]["uid"]
got = co.get_namespaced_custom_object(g, v, "default", p, "py")
assert got["spec"]["image"] == "img"
listed = co.list_namespaced_custom_object(g, v, "default", p)
assert [i["metadata"]["name"] for i in listed["items"]] == ["py"]
assert listed["kind"] == "CronTabList"
# The client's patch sends application/merge-patch+json for custom objects.
patched = co.patch_namespaced_custom_object(g, v, "default", p, "py", {"spec": {"replicas": 3}})
assert patched["spec"]["replicas"] == 3 and patched["metadata"]["generation"] == 2
expect_error(lambda: co.create_namespaced_custom_object(g, v, "default", p, obj), 409,
             'crontabs.stable.example.com "py" already exists')
bad = expect_error(lambda: co.patch_namespaced_custom_object(g, v, "default", p, "py", {"spec": {"replicas": 15}}), 422,
                   'CronTab.stable.example.com "py" is invalid: spec.replicas: Invalid value: 15: '
                   'spec.replicas in body should be less than or equal to 10')
assert bad["details"]["causes"][0]["field"] == "spec.replicas"
stale = dict(got)
expect_error(lambda: co.replace_namespaced_custom_object(g, v, "default", p, "py", stale), 409,
             'Operation cannot be fulfilled on crontabs.stable.example.com "py": the object has been modified; '
             'please apply your changes to the latest version and try again')
expect_error(lambda: co.get_namespaced_custom_object(g, v, "default", p, "nope"), 404,
             'crontabs.stable.example.com "nope" not found')
status = co.delete_namespaced_custom_object(g, v, "default", p, "py")
assert status["status"] == "Success", status
ext.delete_custom_resource_definition("crontabs.stable.example.com")
# Like upstream, the CRD is finalized in the background (its objects are deleted first); wait
# until it is gone, then its endpoint is a plain 404.
deadline = time.time() + 20
while time.time() < deadline:
    try:
        ext.read_custom_resource_definition("crontabs.stable.example.com")
    except ApiException as e:
        assert e.status == 404, e
        break
    time.sleep(0.05)
else:
    raise AssertionError("the CRD was not finalized within 20 s")
# No CRD serves the path any more: upstream's not-found handler, plain text.
try:
    co.list_namespaced_custom_object(g, v, "default", p)
    raise AssertionError("expected ApiException 404")
except ApiException as e:
    assert (e.status, e.body) == (404, "404 page not found\n"), (e.status, e.body)
print("python kubernetes client: all checks passed")
