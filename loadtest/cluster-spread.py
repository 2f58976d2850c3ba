#!/usr/bin/env python3
"""How evenly tenants spread over a Redis Cluster's masters.

Starts `crdplane up --insecure-http --redis-cluster MASTERS` on a temporary data dir, creates
TENANTS tenants, CRDS CRDs in each and OBJECTS custom resources per CRD through the gateway
(plain HTTP, WORKERS client threads), then reads from every master its keys (DBSIZE), the
memory its data took (INFO memory `used_memory`, minus what it used before the load) and the
commands it ran (INFO stats `total_commands_processed`, minus before), and prints each
master's share against the mean. Every (tenant, resource) is one hash tag, so the spread is
the hash function's: the target is every master within +-15 % of the mean. One hot
(tenant, resource) is the limit of this layout: all its keys are on one slot, so one master.

Usage: loadtest/cluster-spread.py  (knobs in the environment: TENANTS 1000, CRDS 3, OBJECTS 3,
MASTERS 3, WORKERS 16, BIN_DIR target/release, LISTEN 127.0.0.1:6460)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TENANTS = int(os.environ.get("TENANTS", "1000"))
CRDS = int(os.environ.get("CRDS", "3"))
OBJECTS = int(os.environ.get("OBJECTS", "3"))
MASTERS = int(os.environ.get("MASTERS", "3"))
WORKERS = int(os.environ.get("WORKERS", "16"))
BIN = os.environ.get("BIN_DIR", os.path.join(ROOT, "target", "release"))
LISTEN = os.environ.get("LISTEN", "127.0.0.1:6460")
BASE = f"http://{LISTEN}"


def call(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(BASE + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    for attempt in range(20):
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            if e.code in (409,):
                return e.code, e.read()
            if e.code in (404, 429, 503) and attempt < 19:
                time.sleep(0.2)
                continue
            raise RuntimeError(f"{method} {path}: {e.code} {e.read()[:300]!r}")
    raise RuntimeError(f"{method} {path}: gave up")


def crd(i):
    group = f"spread{i}.example.com"
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"things.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
            "versions": [{"name": "v1", "served": True, "storage": True,
                          "schema": {"openAPIV3Schema": {
                              "type": "object",
                              "x-kubernetes-preserve-unknown-fields": True}}}],
        },
    }


def fill(t):
    tenant = f"spread-{t}"
    call("POST", "/clusters/root/apis/crdplane.io/v1alpha1/tenants",
         {"apiVersion": "crdplane.io/v1alpha1", "kind": "Tenant", "metadata": {"name": tenant}})
    for i in range(CRDS):
        call("POST", f"/clusters/{tenant}/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
             crd(i))
    for i in range(CRDS):
        for o in range(OBJECTS):
            call("POST",
                 f"/clusters/{tenant}/apis/spread{i}.example.com/v1/namespaces/default/things",
                 {"apiVersion": f"spread{i}.example.com/v1", "kind": "Thing",
                  "metadata": {"name": f"thing-{o}"}, "spec": {"n": o, "pad": "x" * 200}})


def cli(port, password, *args):
    env = dict(os.environ, REDISCLI_AUTH=password)
    return subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port), *args],
                          check=True, capture_output=True, text=True, env=env).stdout


def info_field(text, name):
    for line in text.splitlines():
        if line.startswith(name + ":"):
            return int(line.split(":", 1)[1])
    raise KeyError(name)


def masters(ports, password):
    return [p for p in ports if cli(p, password, "ROLE").startswith("master")]


def snapshot(ms, password):
    out = {}
    for p in ms:
        out[p] = {
            "keys": int(cli(p, password, "DBSIZE").strip()),
            "memory": info_field(cli(p, password, "INFO", "memory"), "used_memory"),
            "commands": info_field(cli(p, password, "INFO", "stats"), "total_commands_processed"),
        }
    return out


def main():
    work = tempfile.mkdtemp(prefix="crdplane-spread.")
    up = subprocess.Popen([os.path.join(BIN, "crdplane"), "up", "--insecure-http",
                           "--redis-cluster", str(MASTERS), "--data-dir", work,
                           "--listen", LISTEN],
                          stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "up.log"), "w"))
    try:
        for _ in range(600):
            try:
                if urllib.request.urlopen(BASE + "/readyz", timeout=2).status == 200:
                    break
            except Exception:
                time.sleep(0.1)
        else:
            sys.exit("the stack did not start; see " + os.path.join(work, "up.log"))
        cdir = os.path.join(work, "redis-cluster")
        password = open(os.path.join(cdir, "password")).read().strip()
        ports = [int(p) for p in open(os.path.join(cdir, "ports")).read().split()][0::2]
        ms = masters(ports, password)
        before = snapshot(ms, password)
        started = time.time()
        with ThreadPoolExecutor(WORKERS) as pool:
            list(pool.map(fill, range(TENANTS)))
        took = time.time() - started
        after = snapshot(ms, password)
        print(f"{TENANTS} tenants x {CRDS} CRDs x {OBJECTS} objects on {len(ms)} masters "
              f"in {took:.0f} s ({os.cpu_count()} CPUs, {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())})")
        worst = 0.0
        for what in ("keys", "memory", "commands"):
            vals = {p: after[p][what] - (0 if what == "keys" else before[p][what]) for p in ms}
            mean = sum(vals.values()) / len(vals)
            devs = {p: (v - mean) / mean * 100 if mean else 0.0 for p, v in vals.items()}
            worst = max(worst, max(abs(d) for d in devs.values()))
            print(f"  {what:>8}: mean {mean:,.0f}; " + ", ".join(
                f"master :{p} {vals[p]:,} ({devs[p]:+.1f} %)" for p in ms))
        print(f"largest deviation from the mean: {worst:.1f} % "
              f"({'within' if worst <= 15 else 'OUTSIDE'} +-15 %)")
    finally:
        up.terminate()
        up.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
