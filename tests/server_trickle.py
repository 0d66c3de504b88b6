#!/usr/bin/env python3
"""server_trickle.py — slow and hostile clients against a running `specbed
serve` (tests/server_trickle.sh starts it), on raw sockets from the same
address as the probes (the hardest case: a per-address limit alone would
lock the probes out too). One scenario per call; exits 1 with a message on
failure. Standard library only.

  flood URL PID HDR_S     600 connections trickle their headers one byte a
                          second (under the idle timeout): /health answers
                          >= 19 of 20 probes within 1 s, a completion
                          succeeds, and every trickler is closed by the
                          total header deadline (+2 s)
  reconnect URL PID       512 clients (the default table) reconnect as soon
                          as they are closed:
                          the same two checks
  body URL PID BODY_S     3 clients send their headers and trickle the body:
                          closed by the body deadline (+2 s)
  reserve URL PID N       N fresh connections (not yet evictable) fill
                          --max-connections N: /health and /metrics answer
                          200 within 1 s on the reserve, and a completion
                          takes a slot once one has stalled for 1 s
  memory URL PID MIB      100 unauthenticated uploads announce 4 MiB - 1 and
                          send 3 MiB, then stall: the server's RSS grows by
                          less than MIB (the body memory bound) + 60 MiB
"""
import http.client, json, os, resource, selectors, socket, sys, threading, time, urllib.parse

def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)

def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")

class Tricklers:
    """n sockets that each sent `head` and then send one more byte every
    `every` seconds; a closed one is noted (and reopened if `reconnect`)."""
    def __init__(self, host, port, n, head, every=1.0, reconnect=False):
        self.host, self.port, self.head, self.every, self.reconnect = host, port, head, every, reconnect
        self.sel = selectors.DefaultSelector()
        self.opened = 0
        self.closed_after = []          # seconds each closed connection had lived
        self.refused = 0
        for _ in range(n):
            self.open()
    def open(self):
        try:
            s = socket.create_connection((self.host, self.port), timeout=2)
            s.sendall(self.head)
            s.setblocking(False)
        except OSError:
            self.refused += 1
            return
        self.opened += 1
        self.sel.register(s, selectors.EVENT_READ, {"t0": time.monotonic(), "last": time.monotonic()})
    def step(self, budget_s):
        end = time.monotonic() + budget_s
        while True:
            left = end - time.monotonic()
            if left <= 0:
                break
            for key, _ in self.sel.select(timeout=min(left, 0.05)):
                try:
                    data = key.fileobj.recv(4096)
                except OSError:
                    data = b""
                if not data:
                    self.close(key)
            now = time.monotonic()
            for key in list(self.sel.get_map().values()):
                if now - key.data["last"] >= self.every:
                    key.data["last"] = now
                    try:
                        key.fileobj.send(b"a")
                    except OSError:
                        self.close(key)
    def close(self, key):
        self.closed_after.append(time.monotonic() - key.data["t0"])
        self.sel.unregister(key.fileobj)
        key.fileobj.close()
        if self.reconnect:
            self.open()
    def still_open(self):
        return len(self.sel.get_map())
    def shut(self):
        for key in list(self.sel.get_map().values()):
            self.sel.unregister(key.fileobj)
            key.fileobj.close()

def probe(host, port):
    """One /health on a fresh connection; True if 200 within 1 s."""
    t0 = time.monotonic()
    try:
        c = http.client.HTTPConnection(host, port, timeout=1.0)
        c.request("GET", "/health")
        r = c.getresponse()
        r.read()
        c.close()
        return r.status == 200 and time.monotonic() - t0 <= 1.0
    except OSError:
        return False

def completion(host, port):
    try:
        c = http.client.HTTPConnection(host, port, timeout=30)
        c.request("POST", "/v1/completions", json.dumps({"prompt": "hi", "max_tokens": 4, "temperature": 0}),
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        body = r.read()
        return r.status == 200 and b"choices" in body, f"{r.status} {body[:200]!r}"
    except OSError as e:
        return False, repr(e)

def probes_under(t, host, port, n=20, gap=0.25):
    ok = 0
    for _ in range(n):
        box = []
        th = threading.Thread(target=lambda: box.append(probe(host, port)))
        th.start()
        t.step(gap)                  # keep trickling while the probe runs
        th.join()
        ok += box[0]
    return ok

def main():
    mode, url, pid = sys.argv[1], sys.argv[2], int(sys.argv[3])
    arg = float(sys.argv[4]) if len(sys.argv) > 4 else 0
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    u = urllib.parse.urlparse(url)
    host, port = u.hostname, u.port
    head = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Trickle: "
    if mode in ("flood", "reconnect"):
        t0 = time.monotonic()
        t = Tricklers(host, port, 600 if mode == "flood" else 512, head, reconnect=mode == "reconnect")
        print(f"{mode}: {t.opened} connections open ({t.refused} refused) after {time.monotonic() - t0:.1f} s")
        t.step(1.5)                  # past the eviction grace: the table is as full as it gets
        ok = probes_under(t, host, port)
        done, what = completion(host, port)
        print(f"{mode}: /health {ok}/20 within 1 s; completion {'ok' if done else 'FAILED: ' + what}; "
              f"{len(t.closed_after)} trickling connections closed so far, {t.still_open()} open, "
              f"server RSS {rss_mib(pid):.0f} MiB")
        if ok < 19:
            fail(f"{mode}: /health answered {ok} of 20 probes within 1 s (want >= 19)")
        if not done:
            fail(f"{mode}: a completion under the {mode} failed: {what}")
        if mode == "flood":
            left = arg + 2 - (time.monotonic() - t0)
            t.step(max(left, 0))
            if t.still_open():
                fail(f"flood: {t.still_open()} trickling connections still open {arg + 2:.0f} s after they "
                     f"connected (header deadline {arg:.0f} s)")
            print(f"flood: all {t.opened} trickling connections closed; the last after "
                  f"{max(t.closed_after):.1f} s (header deadline {arg:.0f} s)")
        t.shut()
    elif mode == "body":
        body_head = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000\r\n\r\n{")
        t = Tricklers(host, port, 3, body_head)
        t.step(arg + 2)
        if t.still_open():
            fail(f"body: {t.still_open()} of 3 body tricklers still open after {arg + 2:.0f} s "
                 f"(body deadline {arg:.0f} s)")
        print(f"body: 3 body tricklers closed after {', '.join(f'{x:.1f}' for x in t.closed_after)} s "
              f"(body deadline {arg:.0f} s)")
    elif mode == "reserve":
        n = int(arg)
        t0 = time.monotonic()
        t = Tricklers(host, port, n, head)     # fresh: not evictable for a second
        got = {}
        for path in ("/health", "/metrics"):
            t1 = time.monotonic()
            try:
                c = http.client.HTTPConnection(host, port, timeout=1.0)
                c.request("GET", path); r = c.getresponse(); r.read(); c.close()
                got[path] = (r.status, time.monotonic() - t1)
            except OSError as e:
                got[path] = (repr(e), time.monotonic() - t1)
        fresh = time.monotonic() - t0
        done, what = completion(host, port)    # on the reserve: takes a slot once one is stale enough
        print(f"reserve: {t.opened} fresh connections fill --max-connections {n}; /health {got['/health'][0]} in "
              f"{got['/health'][1]:.2f} s, /metrics {got['/metrics'][0]} in {got['/metrics'][1]:.2f} s "
              f"({fresh:.2f} s after they connected); a completion {'ok' if done else what}")
        t.shut()
        if fresh >= 1.0:
            print("reserve: SKIP the reserve checks: the probes came too late to find the table full")
        else:
            for path, (st, dt) in got.items():
                if st != 200 or dt > 1.0:
                    fail(f"reserve: {path} got {st} after {dt:.2f} s with the table full of fresh connections")
        if not done:
            fail(f"reserve: a completion with the table full of fresh connections failed: {what}")
    elif mode == "memory":
        r0 = rss_mib(pid)
        n, cl, sent = 100, (4 << 20) - 1, 3 << 20
        chunk = b"x" * (1 << 16)
        socks, answered = [], 0
        def upload(_):
            nonlocal answered
            try:
                s = socket.create_connection((host, port), timeout=5)
            except OSError:
                return
            socks.append(s)
            try:
                s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\n\r\n" % cl)
                for _ in range(sent // len(chunk)):
                    s.sendall(chunk)
            except OSError:
                answered += 1        # refused (503) and closed before the body was all sent
        ths = [threading.Thread(target=upload, args=(i,)) for i in range(n)]
        for th in ths: th.start()
        for th in ths: th.join(timeout=60)
        time.sleep(1.0)
        r1 = rss_mib(pid)
        grew = r1 - r0
        print(f"memory: {n} stalled uploads of 3 of 4 MiB ({answered} cut short): server RSS {r0:.0f} -> "
              f"{r1:.0f} MiB (+{grew:.0f}); bound {arg:.0f} MiB of bodies")
        ok = probe(host, port)
        for s in socks: s.close()
        if grew > arg + 60:
            fail(f"memory: RSS grew by {grew:.0f} MiB with {n} stalled uploads (bound {arg:.0f} MiB + 60)")
        if not ok:
            fail("memory: /health did not answer within 1 s while uploads stalled")
    else:
        fail(f"unknown mode {mode}")

if __name__ == "__main__":
    main()
