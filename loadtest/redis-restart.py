#!/usr/bin/env python3
"""Watch recovery after a Redis restart, measured on the real stack.

Starts a private redis-server (TCP on loopback, AOF with `appendfsync always` in a temporary
directory) and `crdplane up --redis-url` on it (default durability: fsync), opens N HTTP/1.1
watches of one namespace's CronTabs (one connection each, from the list's resourceVersion, as
kubectl, the Python client and kube-rs do over http://), and keeps one writer creating CronTabs
(at --rate while it succeeds; after a failure it retries at once, 20 ms apart). Then, --runs
times: SIGKILL redis-server, start it again at once on the same port and AOF, and measure from
the moment Redis answers PING with PONG again (data loaded, accepting commands):

  * ready     - the gateway's /readyz answering 200 again (polled every 10 ms);
  * write     - the writer's first create acknowledged after the restart;
  * first/last watch - the first and the last of the N watches receiving an event of a write
                acknowledged after the restart;
  * 410s, watch streams that ended (a watcher resumes from its last resourceVersion, as a
    reflector does; after 410 Expired it relists), and at the end, after the writer stopped:
    acknowledged writes missing from a watcher, and from the final LIST.

Before each kill, the same first/last spread is measured for an ordinary write ("steady"),
so the client's own delay (all N watches are read by this one Python process) can be told
apart. Everything runs on loopback; the machine's load is part of the figures.

Usage: loadtest/redis-restart.py [--bin-dir target/release] [--watchers 100,1000] [--runs 3]
       [--rate 10] [--listen-port 17543] [--redis-port 17579]
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
NS = "rr"
GROUP_PATH = "/apis/stable.example.com/v1"
COLL = f"{GROUP_PATH}/namespaces/{NS}/crontabs"
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "crontabs.stable.example.com"},
    "spec": {
        "group": "stable.example.com",
        "scope": "Namespaced",
        "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab"},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "schema": {"openAPIV3Schema": {"type": "object",
                                           "x-kubernetes-preserve-unknown-fields": True}},
        }],
    },
}


def now():
    return time.monotonic()


async def request(port, method, path, body=None, timeout=10.0):
    """One HTTP/1.1 request on a fresh connection; returns (status, body bytes)."""
    async def go():
        r, w = await asyncio.open_connection("127.0.0.1", port)
        try:
            data = b"" if body is None else json.dumps(body).encode()
            head = (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                    f"Connection: close\r\nAccept: application/json\r\n")
            if body is not None:
                head += f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
            w.write(head.encode() + b"\r\n" + data)
            await w.drain()
            raw = await r.read()
        finally:
            w.close()
        status = int(raw[9:12]) if raw[:5] == b"HTTP/" else 0
        head, _, rest = raw.partition(b"\r\n\r\n")
        if b"transfer-encoding: chunked" in head.lower():
            out = b""
            while rest:
                size_line, _, rest = rest.partition(b"\r\n")
                n = int(size_line.split(b";")[0] or b"0", 16)
                if n == 0:
                    break
                out += rest[:n]
                rest = rest[n + 2:]
            rest = out
        return status, rest
    try:
        return await asyncio.wait_for(go(), timeout)
    except (OSError, asyncio.TimeoutError, ValueError):
        return 0, b""


async def redis_pong(port):
    try:
        r, w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 1)
        w.write(b"PING\r\n")
        await w.drain()
        line = await asyncio.wait_for(r.readline(), 1)
        w.close()
        return line.startswith(b"+PONG")
    except (OSError, asyncio.TimeoutError):
        return False


class Watcher:
    def __init__(self, i, port, state):
        self.i, self.port, self.state = i, port, state
        self.seen = bytearray()  # seen[k] = 1 once the create of object k arrived
        self.rv = None
        self.first_after = None  # receive time of the first event of a post-restart write
        self.ended = 0
        self.expired = 0
        self.relists = 0
        self.need_relist = False
        self.task = None

    def mark(self, k, t):
        if k >= len(self.seen):
            self.seen.extend(b"\0" * (k + 1 - len(self.seen) + 1024))
        self.seen[k] = 1
        if k >= self.state.marker and self.first_after is None:
            self.first_after = t
        st = self.state.steady_probe
        if st is not None and k == st[0] and st[1].get(self.i) is None:
            st[1][self.i] = t

    async def relist(self):
        while True:
            status, body = await request(self.port, "GET", COLL)
            if status == 200:
                lst = json.loads(body)
                t = now()
                for item in lst.get("items", []):
                    k = index_of(item["metadata"]["name"])
                    if k is not None:
                        self.mark(k, t)
                self.rv = lst["metadata"]["resourceVersion"]
                self.relists += 1
                return
            await asyncio.sleep(0.05)

    async def run(self, rv):
        self.rv = rv
        while True:
            if self.need_relist:
                self.need_relist = False
                await self.relist()
            try:
                await self.stream()
            except (OSError, ValueError, asyncio.IncompleteReadError):
                pass
            self.ended += 1
            await asyncio.sleep(0.02)

    async def stream(self):
        r, w = await asyncio.open_connection("127.0.0.1", self.port)
        try:
            w.write((f"GET {COLL}?watch=1&resourceVersion={self.rv} HTTP/1.1\r\n"
                     f"Host: 127.0.0.1:{self.port}\r\nAccept: application/json\r\n\r\n").encode())
            await w.drain()
            head = await r.readuntil(b"\r\n\r\n")
            if head[9:12] != b"200":
                if head[9:12] == b"410":
                    self.expired += 1
                    self.need_relist = True
                raise ValueError(head[:12])
            buf = b""
            while True:
                size = int((await r.readline()).split(b";")[0], 16)
                if size == 0:
                    return
                chunk = await r.readexactly(size + 2)
                buf += chunk[:-2]
                while b"\n" in buf:
                    line, _, buf = buf.partition(b"\n")
                    if line.strip():
                        self.event(json.loads(line))
        finally:
            w.close()

    def event(self, ev):
        t = now()
        obj = ev.get("object", {})
        if ev.get("type") == "ERROR":
            if obj.get("code") == 410:
                self.expired += 1
                self.need_relist = True
                raise ValueError("expired")
            raise ValueError("error event")
        md = obj.get("metadata", {})
        self.rv = md.get("resourceVersion", self.rv)
        if ev.get("type") == "ADDED":
            k = index_of(md.get("name", ""))
            if k is not None:
                self.mark(k, t)


def index_of(name):
    return int(name[2:]) if name.startswith("w-") and name[2:].isdigit() else None


class State:
    def __init__(self):
        self.marker = 1 << 62  # writes with index >= marker count as "after the restart"
        self.acked = {}  # index -> ack time
        self.ambiguous = 0
        self.steady_probe = None  # (index, {watcher: time}) for the steady-state spread
        self.stop = False
        self.errors = 0
        self.codes = {}  # failed attempts by HTTP status (0: no response within 5 s)


async def writer(port, state, rate):
    k = 0
    retried = False
    next_due = now()
    while not state.stop:
        obj = {"apiVersion": "stable.example.com/v1", "kind": "CronTab",
               "metadata": {"name": f"w-{k}", "namespace": NS},
               "spec": {"cronSpec": "* * * * */5", "image": "img", "replicas": 1}}
        status, _ = await request(port, "POST", COLL, obj, timeout=5)
        t = now()
        if status == 201 or (status == 409 and retried):
            # 409 after a failed attempt: that attempt's write went through unacknowledged.
            state.ambiguous += status == 409
            state.acked[k] = t
            k += 1
            retried = False
            next_due = max(next_due + 1 / rate, t)
            await asyncio.sleep(max(0, next_due - now()))
        else:
            state.errors += 1
            state.codes[status] = state.codes.get(status, 0) + 1
            retried = True
            await asyncio.sleep(0.02)


def start_redis(bin_, port, d):
    return subprocess.Popen(
        [bin_, "--port", str(port), "--bind", "127.0.0.1", "--dir", d, "--appendonly", "yes",
         "--appendfsync", "always", "--save", "", "--daemonize", "no", "--loglevel", "warning"],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "redis.log"), "a"))


async def wait_until(pred, timeout, step=0.01):
    deadline = now() + timeout
    while now() < deadline:
        if await pred():
            return True
        await asyncio.sleep(step)
    return False


async def one_size(args, n):
    work = tempfile.mkdtemp(prefix="crdplane-redis-restart.")
    rdir = os.path.join(work, "redis")
    os.makedirs(rdir)
    redis_bin = os.environ.get("CRDPLANE_REDIS_SERVER", "redis-server")
    redis = start_redis(redis_bin, args.redis_port, rdir)
    launcher = None
    results = []
    try:
        assert await wait_until(lambda: redis_pong(args.redis_port), 20), "redis did not start"
        launcher = subprocess.Popen(
            [os.path.join(args.bin_dir, "crdplane"), "up", "--insecure-http", "--data-dir", os.path.join(work, "data"),
             "--listen", f"127.0.0.1:{args.listen_port}",
             "--redis-url", f"redis://127.0.0.1:{args.redis_port}"],
            stdout=open(os.path.join(work, "launcher.log"), "w"), stderr=subprocess.STDOUT)
        port = args.listen_port

        async def ready():
            return (await request(port, "GET", "/readyz", timeout=1))[0] == 200
        assert await wait_until(ready, 90), "stack not ready"
        status, body = await request(port, "POST",
                                     "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD)
        assert status in (201, 409), body
        await request(port, "POST", "/api/v1/namespaces",
                      {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})

        async def listed():
            return (await request(port, "GET", COLL, timeout=2))[0] == 200
        assert await wait_until(listed, 30, 0.05), "collection not served"
        _, body = await request(port, "GET", COLL)
        rv = json.loads(body)["metadata"]["resourceVersion"]

        state = State()
        watchers = [Watcher(i, port, state) for i in range(n)]
        for w in watchers:
            w.task = asyncio.ensure_future(w.run(rv))
        wtask = asyncio.ensure_future(writer(port, state, args.rate))
        readyz = []  # (time, ok) at each change of /readyz, polled every 10 ms
        rtask = asyncio.ensure_future(poll_readyz(port, readyz, state))
        # All watches established and delivering: wait until every watcher saw write 0.
        assert await wait_until(lambda: _all_seen(watchers, 0), 60, 0.05), "watches not delivering"

        for run in range(1, args.runs + 1):
            await asyncio.sleep(3)
            # Steady state: the spread of one ordinary write's arrival over the N watches.
            k = max(state.acked) + 2  # k - 1 may be on its way already
            state.steady_probe = (k, {})
            await wait_until(lambda: _probe_done(state, n), 10, 0.01)
            await wait_until(lambda: _acked(state, k), 10, 0.01)
            probe = state.steady_probe
            state.steady_probe = None
            steady = None
            if probe[0] in state.acked and len(probe[1]) == n:
                ta = state.acked[probe[0]]
                steady = (min(probe[1].values()) - ta, max(probe[1].values()) - ta)
            ended0 = sum(w.ended for w in watchers)
            expired0 = sum(w.expired for w in watchers)
            # The restart. Writes acknowledged from here on were made by the new Redis (the
            # 50 ms let replies already on their way from the old one arrive first).
            redis.send_signal(signal.SIGKILL)
            redis.wait()
            t_kill = now()
            await asyncio.sleep(0.05)
            state.marker = max(state.acked) + 1
            for w in watchers:
                w.first_after = None
            redis = start_redis(redis_bin, args.redis_port, rdir)
            assert await wait_until(lambda: redis_pong(args.redis_port), 30, 0.002), "redis back?"
            t_up = now()
            deadline = t_up + 60
            while now() < deadline:
                if all(w.first_after for w in watchers):
                    break
                await asyncio.sleep(0.01)
            await wait_until(lambda: _ready_back(readyz, t_kill), 30, 0.01)
            t_ready = ready_ok(readyz, t_kill)
            went_unready = any(t > t_kill and not ok for t, ok in readyz)
            if not went_unready:
                t_ready = t_up  # it never reported the outage
            firsts = [w.first_after for w in watchers if w.first_after]
            acked_after = [t for i, t in state.acked.items() if i >= state.marker]
            res = {
                "watchers": n, "run": run,
                "down_s": t_up - t_kill,
                "ready_s": t_ready - t_up if t_ready else None,
                "readyz_failed_meanwhile": went_unready,
                "first_write_s": min(acked_after) - t_up if acked_after else None,
                "first_watch_s": min(firsts) - t_up if firsts else None,
                "last_watch_s": max(firsts) - t_up if len(firsts) == n else None,
                "watches_reached": len(firsts),
                "steady_first_s": steady[0] if steady else None,
                "steady_last_s": steady[1] if steady else None,
                "ended": sum(w.ended for w in watchers) - ended0,
                "expired_410": sum(w.expired for w in watchers) - expired0,
            }
            results.append(res)
            print(json.dumps(res), flush=True)

        # The end: stop writing, let the watches catch up, count what is missing.
        await asyncio.sleep(2)
        state.stop = True
        await wtask
        await rtask
        acked = sorted(state.acked)
        await wait_until(lambda: _all_seen(watchers, acked[-1]), 20, 0.05)
        missed = sum(1 for w in watchers for k in acked if k >= len(w.seen) or not w.seen[k])
        _, body = await request(port, "GET", COLL, timeout=30)
        names = {it["metadata"]["name"] for it in json.loads(body)["items"]}
        lost = sum(1 for k in acked if f"w-{k}" not in names)
        summary = {"watchers": n, "acknowledged_writes": len(acked),
                   "ambiguous_writes": state.ambiguous, "failed_attempts": state.errors,
                   "failed_by_status": state.codes,
                   "missed_deliveries": missed, "lost_acknowledged_writes": lost,
                   "relists": sum(w.relists for w in watchers)}
        print(json.dumps(summary), flush=True)
        for w in watchers:
            w.task.cancel()
        return results, summary
    finally:
        if launcher:
            launcher.send_signal(signal.SIGTERM)
            try:
                launcher.wait(30)
            except subprocess.TimeoutExpired:
                launcher.kill()
        redis.kill()
        redis.wait()
        if args.keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


async def poll_readyz(port, out, state):
    last = None
    while not state.stop:
        ok = (await request(port, "GET", "/readyz", timeout=2))[0] == 200
        if ok != last:
            out.append((now(), ok))
            last = ok
        await asyncio.sleep(0.01)


def ready_ok(readyz, t_kill):
    """When /readyz answered 200 again after the kill: the first 200 after a failure seen
    after the kill, else (no failure seen) the first observation after it."""
    after = [(t, ok) for t, ok in readyz if t > t_kill]
    if any(not ok for _, ok in after):
        fail = next(i for i, (_, ok) in enumerate(after) if not ok)
        return next((t for t, ok in after[fail:] if ok), None)
    return None


async def _ready_back(readyz, t_kill):
    after = [ok for t, ok in readyz if t > t_kill]
    return not after or after[-1]


async def _all_seen(watchers, k):
    return all(k < len(w.seen) and w.seen[k] for w in watchers)


async def _acked(state, k):
    return k in state.acked


async def _probe_done(state, n):
    return len(state.steady_probe[1]) == n


def spread(r):
    if r["steady_first_s"] is None:
        return None
    return r["steady_last_s"] - r["steady_first_s"]


def ms(v):
    return "-" if v is None else f"{v * 1000:.0f}"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin-dir", default=os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release"))
    p.add_argument("--watchers", default="100,1000")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--rate", type=float, default=10.0)
    p.add_argument("--listen-port", type=int, default=17543)
    p.add_argument("--redis-port", type=int, default=17579)
    p.add_argument("--keep", action="store_true", help="keep the work dir (logs)")
    args = p.parse_args()
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    print(f"machine: {os.cpu_count()} CPUs; binaries {args.bin_dir}; "
          f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}", flush=True)
    table = []
    for n in [int(x) for x in args.watchers.split(",")]:
        table.append(asyncio.run(one_size(args, n)))
    print("\nms from Redis answering PONG again; steady = last - first arrival of one ordinary "
          "write over the watches before the kill (this client's own spread)")
    print(f"{'watches':>7} {'run':>3} {'down':>6} {'readyz':>6} {'write':>6} {'first':>6} "
          f"{'last':>6} {'steady':>11} {'ended':>5} {'410':>4}")
    for results, summary in table:
        for r in results:
            print(f"{r['watchers']:>7} {r['run']:>3} {ms(r['down_s']):>6} {ms(r['ready_s']):>6} "
                  f"{ms(r['first_write_s']):>6} {ms(r['first_watch_s']):>6} "
                  f"{ms(r['last_watch_s']):>6} "
                  f"{ms(spread(r)):>11} "
                  f"{r['ended']:>5} {r['expired_410']:>4}")
        print(f"{'':>7} acknowledged writes {summary['acknowledged_writes']}, missed deliveries "
              f"{summary['missed_deliveries']}, lost {summary['lost_acknowledged_writes']}, "
              f"ambiguous {summary['ambiguous_writes']}, relists {summary['relists']}, "
              f"failed attempts by status {summary['failed_by_status']}")
    bad = any(s["missed_deliveries"] or s["lost_acknowledged_writes"] for _, s in table)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
