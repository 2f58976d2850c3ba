#!/usr/bin/env python3
"""Garbage collection: time from an owner's deletion to the last of N dependents gone.

The method of the ignored test `gc_measure_10000_dependents` (tests/tests/gc.rs), on a stack
started with `crdplane up` from --bin-dir (a fresh data dir, default durability): a
namespaced `Parent`, N `Child` objects (another CRD) each with an ownerReference to it,
created 8 at a time; then the parent is deleted (default propagation: Background) and the
child collection is listed every 50 ms until it is empty. --runs repeats it on the same stack
(a fresh namespace each time).

Usage: loadtest/gc-dependents.py [--bin-dir target/release] [--dependents 10000] [--runs 3]
"""

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def crd(plural, kind):
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.gc.example.com"},
            "spec": {"group": "gc.example.com", "scope": "Namespaced",
                     "names": {"plural": plural, "singular": kind.lower(), "kind": kind,
                               "listKind": f"{kind}List"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object",
                                       "x-kubernetes-preserve-unknown-fields": True}}}]}}


class Client:
    """Kept-alive HTTP/1.1 connections, one per concurrent caller."""

    def __init__(self, port):
        self.port = port
        self.pool = []

    async def request(self, method, path, body=None):
        conn = self.pool.pop() if self.pool else await asyncio.open_connection(
            "127.0.0.1", self.port)
        r, w = conn
        data = b"" if body is None else json.dumps(body).encode()
        head = (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
                f"Accept: application/json\r\n")
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
        w.write(head.encode() + b"\r\n" + data)
        await w.drain()
        h = await r.readuntil(b"\r\n\r\n")
        status = int(h[9:12])
        length, chunked = 0, False
        for line in h.split(b"\r\n"):
            k, _, v = line.partition(b":")
            if k.lower() == b"content-length":
                length = int(v)
            elif k.lower() == b"transfer-encoding" and b"chunked" in v.lower():
                chunked = True
        if chunked:
            out = b""
            while True:
                n = int((await r.readline()).split(b";")[0], 16)
                out += (await r.readexactly(n + 2))[:-2]
                if n == 0:
                    break
        else:
            out = await r.readexactly(length)
        self.pool.append(conn)
        return status, out


async def wait_status(c, path, want, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if (await c.request("GET", path))[0] == want:
                return True
        except (OSError, asyncio.IncompleteReadError, ValueError):
            c.pool.clear()
        await asyncio.sleep(0.1)
    return False


async def one_run(c, run, n):
    ns = f"gc-{run}"
    st, _ = await c.request("POST", "/api/v1/namespaces",
                            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    assert st == 201, st
    base = f"/apis/gc.example.com/v1/namespaces/{ns}"
    st, body = await c.request("POST", f"{base}/parents",
                               {"apiVersion": "gc.example.com/v1", "kind": "Parent",
                                "metadata": {"name": "p"}})
    assert st == 201, body
    p = json.loads(body)
    ref = {"apiVersion": "gc.example.com/v1", "kind": "Parent", "name": "p",
           "uid": p["metadata"]["uid"]}
    t = time.monotonic()

    async def worker(k):
        for i in range(k, n, 8):
            st, body = await c.request("POST", f"{base}/children",
                                       {"apiVersion": "gc.example.com/v1", "kind": "Child",
                                        "metadata": {"name": f"d{i:05}",
                                                     "ownerReferences": [ref]}})
            assert st == 201, body
    await asyncio.gather(*[worker(k) for k in range(8)])
    created = time.monotonic() - t
    st, body = await c.request("GET", f"{base}/children")
    assert len(json.loads(body)["items"]) == n
    t = time.monotonic()
    st, body = await c.request("DELETE", f"{base}/parents/p")
    assert st == 200, body
    left = n
    while left:
        await asyncio.sleep(0.05)
        st, body = await c.request("GET", f"{base}/children")
        assert st == 200, body
        left = len(json.loads(body)["items"])
    gone = time.monotonic() - t
    res = {"run": run, "dependents": n, "created_s": round(created, 2),
           "owner_deleted_to_last_gone_s": round(gone, 2)}
    print(json.dumps(res), flush=True)
    return res


async def main_async(args):
    work = tempfile.mkdtemp(prefix="crdplane-gc.")
    launcher = subprocess.Popen(
        [os.path.join(args.bin_dir, "crdplane"), "up", "--insecure-http", "--data-dir", os.path.join(work, "data"),
         "--listen", f"127.0.0.1:{args.port}"],
        stdout=open(os.path.join(work, "launcher.log"), "w"), stderr=subprocess.STDOUT)
    try:
        c = Client(args.port)
        assert await wait_status(c, "/readyz", 200, 90), "stack not ready"
        for plural, kind in (("parents", "Parent"), ("children", "Child")):
            st, body = await c.request("POST",
                                       "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                                       crd(plural, kind))
            assert st in (201, 409), body
        assert await wait_status(c, "/apis/gc.example.com/v1/children", 200, 30)
        assert await wait_status(c, "/apis/gc.example.com/v1/parents", 200, 30)
        return [await one_run(c, r, args.dependents) for r in range(1, args.runs + 1)]
    finally:
        launcher.send_signal(signal.SIGTERM)
        try:
            launcher.wait(30)
        except subprocess.TimeoutExpired:
            launcher.kill()
        shutil.rmtree(work, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin-dir", default=os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release"))
    p.add_argument("--dependents", type=int, default=10000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--port", type=int, default=17743)
    args = p.parse_args()
    print(f"machine: {os.cpu_count()} CPUs; binaries {args.bin_dir}; "
          f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}", flush=True)
    res = asyncio.run(main_async(args))
    gone = sorted(r["owner_deleted_to_last_gone_s"] for r in res)
    print(f"owner deletion -> last of {args.dependents} dependents gone: "
          f"min {gone[0]} s, median {gone[len(gone) // 2]} s, max {gone[-1]} s")


if __name__ == "__main__":
    sys.exit(main())
