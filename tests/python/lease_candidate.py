"""A leader-election candidate of the Python `kubernetes` client (its Lease-based
`leaderelection` with `LeaseLock`): `lease_candidate.py <kubeconfig> <identity>`.

Prints `LEADER <identity>` (flushed) when it starts leading and `STOPPED <identity>` if it
loses the lease; runs until killed. Used by tests/tests/builtin_types.rs.
"""
import sys
import threading

from kubernetes import config
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

kubeconfig, identity = sys.argv[1], sys.argv[2]
config.load_kube_config(config_file=kubeconfig)


def started():
    print(f"LEADER {identity}", flush=True)
    # Keep leading (the election loop renews in its own thread) until killed.
    threading.Event().wait()


def stopped():
    print(f"STOPPED {identity}", flush=True)


lock = LeaseLock("crdplane-test-election", "default", identity)
cfg = electionconfig.Config(
    lock,
    lease_duration=4,
    renew_deadline=3,
    retry_period=1,
    onstarted_leading=started,
    onstopped_leading=stopped,
)
print(f"CANDIDATE {identity}", flush=True)
leaderelection.LeaderElection(cfg).run()
