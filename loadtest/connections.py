#!/usr/bin/env python3
"""Connections the gateway holds at its default limits, measured on the real stack.

Starts `crdplane up` on a fresh data dir with the gateway's default edge flags (its
`--max-connections` / `--max-connections-per-client` follow the open-files limit the launcher
raises to the hard limit; `--request-header-timeout` 32 s, `--idle-timeout` 90 s), raises this
client's own soft open-files limit to the hard one, and then:

  1. one client (127.0.0.1) opens kept-alive connections, each making one request
     (`GET /livez`) and then idling, as a client's connection pool does, until the gateway
     refuses one; reports how many it holds, what the next connection gets, the gateway's RSS,
     and that requests from another address (a GET and a create) and over a held connection
     still succeed;
  2. many clients (127.0.0.2, 127.0.0.3, ... at most --per-address connections each) open more
     until the total bound refuses one; the same reports (a new connection now gets refused,
     whatever its address; held connections keep working);
  3. closes --release connections and checks that a new client is served again;
  4. with --idle-check, waits out the idle timeout and counts the held connections the gateway
     closed.

Usage: loadtest/connections.py [--bin-dir target/release] [--port 17643] [--per-address 1000]
       [--release 1000] [--idle-check]
"""

import argparse
import asyncio
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ORIGINAL_NOFILE = None
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Spare:
    """Descriptors kept in reserve: this client holds as many sockets as the gateway allows,
    so each measurement (a probe, a request, reading /proc) first gives one back."""

    def __init__(self, n=64):
        self.fds = [os.open("/dev/null", os.O_RDONLY) for _ in range(n)]

    def __enter__(self):
        os.close(self.fds.pop())

    def __exit__(self, *exc):
        self.fds.append(os.open("/dev/null", os.O_RDONLY))


SPARE = None


def rss_kib(pid):
    with SPARE, open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def nofile_of(pid):
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                return int(line.split()[3])
    return None


def open_fds(pid):
    with SPARE:
        return len(os.listdir(f"/proc/{pid}/fd"))


class Conn:
    """A kept-alive HTTP/1.1 connection."""

    def __init__(self, r, w):
        self.r, self.w = r, w

    async def request(self, port, method, path, body=None):
        data = b"" if body is None else json.dumps(body).encode()
        head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: application/json\r\n"
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
        self.w.write(head.encode() + b"\r\n" + data)
        await self.w.drain()
        head = await self.r.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        length = 0
        chunked = False
        for line in head.split(b"\r\n"):
            k, _, v = line.partition(b":")
            if k.lower() == b"content-length":
                length = int(v)
            if k.lower() == b"transfer-encoding" and b"chunked" in v.lower():
                chunked = True
        if chunked:
            while True:
                n = int((await self.r.readline()).split(b";")[0], 16)
                await self.r.readexactly(n + 2)
                if n == 0:
                    break
        else:
            await self.r.readexactly(length)
        return status

    def close(self):
        self.w.close()


async def connect(port, src, first_path="/livez"):
    """A new connection from `src` that made one request; None if the gateway refused it."""
    try:
        local = None if src == "127.0.0.1" else (src, 0)
        r, w = await asyncio.open_connection("127.0.0.1", port, local_addr=local)
    except OSError as e:
        if e.errno == 24:
            raise  # this client's own limit, not the gateway's answer
        return None, f"connect failed: {e.strerror or e}"
    c = Conn(r, w)
    try:
        status = await asyncio.wait_for(c.request(port, "GET", first_path), 30)
        return c, status
    except asyncio.IncompleteReadError:
        c.close()
        return None, "closed at once without a response"
    except ConnectionResetError:
        c.close()
        return None, "reset without a response"
    except (OSError, asyncio.TimeoutError) as e:
        c.close()
        return None, f"error: {e!r}"


async def fill(port, addrs, per_address, held, expect, batch=400):
    """Opens connections from each address in `addrs` (at most per_address each) until one is
    refused; returns (opened, the refusal's description). Near `expect` (the bound the
    gateway should enforce, as a count of held connections) it opens one at a time, so this
    client never holds more sockets than it needs to show the refusal."""
    opened = 0
    for src in addrs:
        n_src = 0
        while per_address is None or n_src < per_address:
            k = batch if per_address is None else min(batch, per_address - n_src)
            k = max(1, min(k, expect - len(held)))
            res = await asyncio.gather(*[connect(port, src) for _ in range(k)])
            refused = None
            for c, how in res:
                if c is not None and how == 200:
                    held.append(c)
                    opened += 1
                    n_src += 1
                elif c is not None:
                    c.close()
                    refused = f"HTTP {how}"
                else:
                    refused = how
            if refused:
                return opened, refused
    return opened, None


async def probe_next(port, src):
    with SPARE:
        return await _probe_next(port, src)


async def _probe_next(port, src):
    t = time.monotonic()
    c, how = await connect(port, src)
    ms = (time.monotonic() - t) * 1000
    if c:
        c.close()
        return f"accepted (HTTP {how}) in {ms:.1f} ms"
    return f"{how} after {ms:.1f} ms"


async def normal_requests(port, src, held, tag):
    with SPARE:
        return await _normal_requests(port, src, held, tag)


async def _normal_requests(port, src, held, tag):
    out = {}
    c, how = await connect(port, src, "/api/v1/namespaces")
    if c is None:
        out["new connection from " + src] = how
    else:
        t = time.monotonic()
        st = await c.request(port, "POST", "/api/v1/namespaces",
                             {"apiVersion": "v1", "kind": "Namespace",
                              "metadata": {"name": f"conn-{tag}"}})
        out["new connection from " + src] = (f"GET namespaces {how}, create namespace {st} "
                                            f"in {(time.monotonic() - t) * 1000:.1f} ms")
        c.close()
    if held:
        t = time.monotonic()
        try:
            st = await held[0].request(port, "GET", "/api/v1/namespaces/default")
            out["over a held connection"] = (f"GET namespace {st} in "
                                             f"{(time.monotonic() - t) * 1000:.1f} ms")
        except (OSError, asyncio.IncompleteReadError) as e:
            out["over a held connection"] = f"failed: {e!r}"
    return out


async def closed_by_server(conn):
    try:
        data = await asyncio.wait_for(conn.r.read(1), 0.05)
        return data == b""
    except asyncio.TimeoutError:
        return False
    except OSError:
        return True


async def main_async(args):
    work = tempfile.mkdtemp(prefix="crdplane-conns.")
    launcher = subprocess.Popen(
        [os.path.join(args.bin_dir, "crdplane"), "up", "--insecure-http", "--data-dir", os.path.join(work, "data"),
         "--listen", f"127.0.0.1:{args.port}"],
        stdout=open(os.path.join(work, "launcher.log"), "w"), stderr=subprocess.STDOUT,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, ORIGINAL_NOFILE))
    held = []
    report = {}
    try:
        deadline = time.monotonic() + 90
        while True:
            c, how = await connect(args.port, "127.0.0.1", "/readyz")
            if c:
                c.close()
                if how == 200:
                    break
            assert time.monotonic() < deadline, "stack not ready"
            await asyncio.sleep(0.1)
        gw = int(subprocess.check_output(
            ["pgrep", "-P", str(launcher.pid), "-f", "crdplane-gateway"]).split()[0])
        nofile = nofile_of(gw)
        total = max(nofile - 128, 64)
        per = max(total - total // 8, 1)
        report["gateway open-files limit"] = nofile
        report["bounds (total, per client address)"] = [total, per]
        report["gateway RSS before, MiB"] = round(rss_kib(gw) / 1024, 1)
        print(json.dumps(report), file=sys.stderr, flush=True)

        t0 = time.monotonic()
        n1, how = await fill(args.port, ["127.0.0.1"], None, held, per)
        report["one client: connections held"] = n1
        report["one client: the next one"] = await probe_next(args.port, "127.0.0.1")
        report["one client: gateway RSS, MiB"] = round(rss_kib(gw) / 1024, 1)
        report["one client: gateway open fds"] = open_fds(gw)
        report["one client: meanwhile"] = await normal_requests(args.port, "127.0.0.2", held, "a")
        print(json.dumps(report), file=sys.stderr, flush=True)

        addrs = [f"127.0.{b}.{c}" for b in range(0, 4) for c in range(2, 255)]
        n2, how = await fill(args.port, addrs, args.per_address, held, total)
        print(f"phase 2: {len(held)} held, the refusal: {how}", file=sys.stderr, flush=True)
        used = (n2 + args.per_address - 1) // args.per_address
        report["many clients: connections held in total"] = len(held)
        report["many clients: addresses used besides 127.0.0.1"] = used
        report["many clients: the next one (fresh address)"] = await probe_next(args.port,
                                                                                "127.0.3.254")
        report["many clients: gateway RSS, MiB"] = round(rss_kib(gw) / 1024, 1)
        report["many clients: gateway open fds"] = open_fds(gw)
        report["many clients: meanwhile"] = await normal_requests(args.port, "127.0.3.253",
                                                                  held, "b")
        report["seconds to open them all"] = round(time.monotonic() - t0, 1)
        print(json.dumps(report), file=sys.stderr, flush=True)

        for c in held[-args.release:]:
            c.close()
        del held[-args.release:]
        await asyncio.sleep(0.2)
        report[f"after closing {args.release}"] = await normal_requests(args.port, "127.0.3.252",
                                                                       held, "c")
        print(json.dumps(report), file=sys.stderr, flush=True)

        if args.idle_check:
            wait = 95 - (time.monotonic() - t0)
            await asyncio.sleep(max(wait, 0))
            sample = held[:: max(len(held) // 500, 1)]
            closed = sum(await asyncio.gather(*[closed_by_server(c) for c in sample]))
            report["after the idle timeout: of a sample, closed by the gateway"] = (
                f"{closed} of {len(sample)}")
            report["after the idle timeout: gateway open fds"] = open_fds(gw)
            report["after the idle timeout: gateway RSS, MiB"] = round(rss_kib(gw) / 1024, 1)
        for c in held:
            c.close()
        return report
    finally:
        launcher.send_signal(signal.SIGTERM)
        try:
            launcher.wait(30)
        except subprocess.TimeoutExpired:
            launcher.kill()
        if args.keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin-dir", default=os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release"))
    p.add_argument("--port", type=int, default=17643)
    p.add_argument("--per-address", type=int, default=1000)
    p.add_argument("--release", type=int, default=1000)
    p.add_argument("--idle-check", action="store_true")
    p.add_argument("--keep", action="store_true")
    args = p.parse_args()
    # The stack gets this shell's limits (the launcher raises its soft limit to the hard one);
    # this client needs more descriptors than the gateway may hold, so it raises its own
    # beyond the hard limit where it may (root), else to the hard limit.
    global ORIGINAL_NOFILE
    ORIGINAL_NOFILE = resource.getrlimit(resource.RLIMIT_NOFILE)
    hard = ORIGINAL_NOFILE[1]
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (2 * hard + 1024, 2 * hard + 1024))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    print(f"machine: {os.cpu_count()} CPUs; client open-files limit {hard}; binaries "
          f"{args.bin_dir}; {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}", flush=True)
    global SPARE
    SPARE = Spare()
    report = asyncio.run(main_async(args))
    print()
    for k, v in report.items():
        print(f"{k}: {v}")


if __name__ == "__main__":
    main()
