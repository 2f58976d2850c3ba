"""The Python `kubernetes` client discovers crdplane's built-in types: the core group's
resource list (`CoreV1Api().get_api_resources()`, `/api/v1`) names configmaps, secrets,
serviceaccounts and events, the `coordination.k8s.io`, `events.k8s.io` and
`rbac.authorization.k8s.io` groups are listed by `ApisApi().get_api_versions()`, and the RBAC
types are served through the typed `RbacAuthorizationV1Api`. Run by tests/tests/builtin_discovery.rs with the
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
for g in ["coordination.k8s.io", "events.k8s.io", "rbac.authorization.k8s.io"]:
    assert g in groups, sorted(groups)
    assert groups[g].preferred_version.group_version == g + "/v1", groups[g]

leases = client.CoordinationV1Api(api).get_api_resources()
assert [r.name for r in leases.resources] == ["leases"], leases

# The generated name of rbac/v1 Subject changed with the client's release.
SUBJECT = getattr(client, "RbacV1Subject", None) or getattr(client, "V1Subject")
rbac = client.RbacAuthorizationV1Api(api)
scopes = {r.name: r.namespaced for r in rbac.get_api_resources().resources}
assert scopes == {"clusterrolebindings": False, "clusterroles": False,
                  "rolebindings": True, "roles": True}, scopes
rbac.create_cluster_role(client.V1ClusterRole(
    metadata=client.V1ObjectMeta(name="py-reader"),
    rules=[client.V1PolicyRule(verbs=["get"], api_groups=[""], resources=["configmaps"])]))
rbac.create_cluster_role_binding(client.V1ClusterRoleBinding(
    metadata=client.V1ObjectMeta(name="py-reader"),
    role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="ClusterRole",
                              name="py-reader"),
    subjects=[SUBJECT(kind="User", name="jane", api_group="rbac.authorization.k8s.io")]))
crb = rbac.read_cluster_role_binding("py-reader")
assert crb.subjects[0].name == "jane" and crb.role_ref.name == "py-reader", crb
assert crb.metadata.namespace is None, crb
rbac.delete_cluster_role_binding("py-reader")
rbac.delete_cluster_role("py-reader")
print("all checks passed")
