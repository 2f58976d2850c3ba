"""The Python `kubernetes` client discovers crdplane's built-in types: the core group's
resource list (`CoreV1Api().get_api_resources()`, `/api/v1`) names configmaps, secrets,
serviceaccounts and events, and the `coordination.k8s.io` and `events.k8s.io` groups are
listed by `ApisApi().get_api_versions()`. Run by tests/tests/builtin_discovery.rs with the
gateway URL as argv[1]."""
import sys

from kubernetes import client

cfg = client.Configuration()
cfg.host = sys.argv[1]
api = client.ApiClient(cfg)

resources = {r.name: r for r in client.CoreV1Api(api).get_api_resources().resources}
for name, kind, short in [("configmaps", "ConfigMap", ["cm"]), ("secrets", "Secret", None),
                          ("serviceaccounts", "ServiceAccount", ["sa"]), ("events", "Event", ["ev"])]:
    assert name in resources, (name, sorted(resources))
    r = resources[name]
    assert r.kind == kind and r.namespaced, r
    assert r.short_names == short, r
    assert "watch" in r.verbs and "deletecollection" in r.verbs, r

groups = {g.name: g for g in client.ApisApi(api).get_api_versions().groups}
for g in ["coordination.k8s.io", "events.k8s.io"]:
    assert g in groups, sorted(groups)
    assert groups[g].preferred_version.group_version == g + "/v1", groups[g]

leases = client.CoordinationV1Api(api).get_api_resources()
assert [r.name for r in leases.resources] == ["leases"], leases
print("all checks passed")
