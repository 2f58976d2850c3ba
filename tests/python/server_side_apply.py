"""Server-side apply through the Python `kubernetes` client's DynamicClient
(`resources.get(...).server_side_apply(body=..., field_manager=..., force_conflicts=...)`):
a CRD applied and watched until Established, a custom resource applied twice (managedFields:
manager, operation Apply, the applied fields), a second manager's change answered with
upstream's 409 Conflict (an ApiException with status 409 and reason Conflict, the Status
with its FieldManagerConflict cause), then forced; a ConfigMap the same way. Run by
tests/tests/python_server_side_apply.rs with the gateway URL as argv[1], once per Python
interpreter that has the client.

Releases differ in how they send a dict with `application/apply-patch+yaml`: 22.6's REST
layer only serializes bodies whose content type says json and refuses a dict otherwise
("Cannot prepare a request message"), so for it the body goes as YAML text with the name
and namespace given; newer releases (`rest.contenttype_matches`) send the dict as JSON."""
import json
import sys

import kubernetes
from kubernetes import client, dynamic
from kubernetes.client import rest
from kubernetes.client.rest import ApiException

cfg = client.Configuration()
cfg.host = sys.argv[1]
dyn = dynamic.DynamicClient(client.ApiClient(cfg))
print("kubernetes client", kubernetes.__version__)
DICT_BODIES = hasattr(rest, "contenttype_matches")


def to_yaml(obj, indent=0):
    """Block YAML of plain dicts, lists and scalars (scalars as JSON, which is YAML)."""
    pad = "  " * indent
    lines = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(v, (dict, list)) and v:
                lines.append("%s%s:" % (pad, k))
                lines.append(to_yaml(v, indent + 1))
            else:
                lines.append("%s%s: %s" % (pad, k, json.dumps(v)))
    else:
        for v in obj:
            if isinstance(v, dict) and v:
                inner = to_yaml(v, indent + 1).split("\n")
                lines.append("%s- %s" % (pad, inner[0].strip()))
                lines.extend(inner[1:])
            else:
                lines.append("%s- %s" % (pad, json.dumps(v)))
    return "\n".join(lines)


def apply(resource, obj, manager, force=None, as_text=False):
    kw = {"field_manager": manager}
    if force is not None:
        kw["force_conflicts"] = force
    meta = obj["metadata"]
    if as_text or not DICT_BODIES:
        kw["name"] = meta["name"]
        if resource.namespaced:
            kw["namespace"] = meta.get("namespace", "default")
        body = to_yaml(obj) + "\n"
    else:
        body = obj
    return resource.server_side_apply(body=body, **kw).to_dict()


def managers(o):
    return [(e.get("manager"), e["operation"], e["fieldsV1"]) for e in o["metadata"].get("managedFields", [])]


def conflict(fn, message):
    try:
        fn()
    except ApiException as e:
        assert e.status == 409, (e.status, e.body)
        assert e.reason == "Conflict", e.reason
        body = json.loads(e.body)
        assert (body["kind"], body["status"], body["reason"], body["code"]) == ("Status", "Failure", "Conflict", 409), body
        assert body["message"] == message, body["message"]
        return body
    raise AssertionError("expected a 409 Conflict")


# ---- the CRD, applied and watched until Established ----
crds = dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
crd = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.pyssa.example.com"},
    "spec": {
        "group": "pyssa.example.com",
        "scope": "Namespaced",
        "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": {
                "x": {"type": "string"}, "y": {"type": "integer"},
                "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                          "items": {"type": "object", "required": ["name"], "properties": {
                              "name": {"type": "string"}, "port": {"type": "integer"}}}}}}}}},
        }],
    },
}
made = apply(crds, crd, "py-manager")
assert managers(made)[0][:2] == ("py-manager", "Apply"), managers(made)
established = False
for ev in crds.watch(name="gadgets.pyssa.example.com", timeout=30):
    conds = {c["type"]: c["status"] for c in (ev["raw_object"].get("status") or {}).get("conditions") or []}
    if conds.get("Established") == "True":
        established = True
        break
assert established, "the CRD never became Established"

# ---- a custom resource ----
gadgets = dyn.resources.get(api_version="pyssa.example.com/v1", kind="Gadget")


def gadget(spec):
    return {"apiVersion": "pyssa.example.com/v1", "kind": "Gadget",
            "metadata": {"name": "g1", "namespace": "default"}, "spec": spec}


first = apply(gadgets, gadget({"x": "a", "y": 1, "ports": [{"name": "http", "port": 80}]}), "py-manager")
assert first["spec"] == {"x": "a", "y": 1, "ports": [{"name": "http", "port": 80}]}, first
assert managers(first) == [("py-manager", "Apply", {"f:spec": {
    "f:x": {}, "f:y": {}, "f:ports": {'k:{"name":"http"}': {".": {}, "f:name": {}, "f:port": {}}}}})], managers(first)
second = apply(gadgets, gadget({"x": "b", "y": 1, "ports": [{"name": "http", "port": 80}]}), "py-manager")
assert second["spec"]["x"] == "b"
assert second["metadata"]["resourceVersion"] != first["metadata"]["resourceVersion"]
assert second["metadata"]["generation"] == 2
assert [m[:2] for m in managers(second)] == [("py-manager", "Apply")], managers(second)
# The same configuration again writes nothing.
third = apply(gadgets, gadget({"x": "b", "y": 1, "ports": [{"name": "http", "port": 80}]}), "py-manager", as_text=True)
assert third["metadata"]["resourceVersion"] == second["metadata"]["resourceVersion"]

st = conflict(lambda: apply(gadgets, gadget({"x": "c"}), "py-other"),
              'Apply failed with 1 conflict: conflict with "py-manager": .spec.x')
assert st["details"]["causes"] == [{"reason": "FieldManagerConflict", "message": 'conflict with "py-manager"',
                                    "field": ".spec.x"}], st["details"]
assert dyn.get(gadgets, name="g1", namespace="default").to_dict()["spec"]["x"] == "b"
# Two fields of one manager: upstream's plural form.
conflict(lambda: apply(gadgets, gadget({"x": "c", "y": 2}), "py-other"),
         'Apply failed with 2 conflicts: conflicts with "py-manager":\n- .spec.x\n- .spec.y')
forced = apply(gadgets, gadget({"x": "c"}), "py-other", force=True)
assert forced["spec"]["x"] == "c"
owners = {m: f for m, _, f in managers(forced)}
assert owners["py-other"] == {"f:spec": {"f:x": {}}}, owners
assert "f:x" not in owners["py-manager"]["f:spec"], owners

# ---- a ConfigMap ----
cms = dyn.resources.get(api_version="v1", kind="ConfigMap")
cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "py-cm", "namespace": "default"},
      "data": {"k": "1", "other": "x"}}
made = apply(cms, cm, "py-manager", as_text=True)
assert made["data"] == {"k": "1", "other": "x"}
assert managers(made) == [("py-manager", "Apply", {"f:data": {"f:k": {}, "f:other": {}}})], managers(made)
cm2 = dict(cm, data={"k": "2"})
conflict(lambda: apply(cms, cm2, "py-other"),
         'Apply failed with 1 conflict: conflict with "py-manager": .data.k')
taken = apply(cms, cm2, "py-other", force=True)
assert taken["data"] == {"k": "2", "other": "x"}, taken["data"]

print("all checks passed")
