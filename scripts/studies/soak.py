#!/usr/bin/env python3
"""soak.py — a long mixed load against a running `specbed serve`, sampling
the server's health every --sample seconds. Not part of CI.

Clients (threads, --clients of them) loop over a mix: streaming and
non-streaming completions and chat, greedy and sampled, with and without
speculation (spec_depth 0), clients that hang up mid-stream or give up
mid-request, and bad bodies (malformed JSON, wrong types, oversized
values, NUL in strings). Beside them, hostile clients that never finish a
request (issue 38): --tricklers connections that send their headers one
byte a second, --stallers that connect and send nothing, and --body-stallers
that announce a 4 MiB body, send 1 MiB of it and stall; every one of them
reconnects as soon as the server closes it. A prober asks /health once a
second with a 1 s timeout. Every sample line records the server's RSS and
thread count (from /proc/PID), KV pages in use and requests running
(/metrics), the clients' counts of ok / expected-4xx / unexpected answers
and hung requests, the hostile connections open and closed so far, and the
probes answered and missed. Exits non-zero if any answer was unexpected,
any request hung past --hang-s, KV pages were not back to 0 at the end,
RSS grew by more than --rss-growth between the first and last quarter, or
more than 5% of the /health probes went unanswered within 1 s.

usage: soak.py --url http://127.0.0.1:PORT --pid PID [--minutes 30]
               [--clients 32] [--tricklers 200] [--stallers 100]
               [--body-stallers 8] [--sample 10] [--out results/soak.csv]
"""
import argparse, http.client, json, os, random, selectors, socket, sys, threading, time, urllib.parse

def metric(text, name):
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            try:
                return float(line.rsplit(" ", 1)[1])
            except ValueError:
                pass
    return float("nan")

class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.c = {"ok": 0, "bad_expected": 0, "hangup": 0, "unexpected": 0, "hung": 0}
        self.unexpected = []
    def add(self, k, note=None):
        with self.lock:
            self.c[k] += 1
            if note and len(self.unexpected) < 20:
                self.unexpected.append(note)

BAD = [b'{"prompt": "x", "max_tokens": ', b'{"prompt": 5}', b'{"prompt": "x", "max_tokens": -1}',
       b'{"prompt": "ab\\u0000cd"}', b'{"prompt": "x", "temperature": "hot"}', b'[1,2,3]',
       b'{"prompt": "x"} trailing', b'{"messages": "hi"}', b'{"prompt": "x", "n": 3}', b'\xff\xfe']

def client(url, stop_at, st, seed, hang_s):
    rnd = random.Random(seed)
    u = urllib.parse.urlparse(url)
    while time.time() < stop_at:
        kind = rnd.random()
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=hang_s)
        try:
            if kind < 0.15:
                body = rnd.choice(BAD)
                conn.request("POST", rnd.choice(["/v1/completions", "/v1/chat/completions"]), body,
                             {"Content-Type": "application/json"})
                r = conn.getresponse(); r.read()
                st.add("bad_expected" if 400 <= r.status < 500 else "unexpected",
                       None if 400 <= r.status < 500 else f"bad body {body[:30]!r} -> {r.status}")
                continue
            chat = rnd.random() < 0.4
            req = {"max_tokens": rnd.randint(1, 96), "temperature": rnd.choice([0, 0, 0.7, 1.0]),
                   "stream": rnd.random() < 0.5}
            if rnd.random() < 0.3: req["spec_depth"] = 0
            if rnd.random() < 0.2: req["top_k"] = 8
            if rnd.random() < 0.2: req["stop"] = ["\n\n"]
            text = rnd.choice(["def parse(", "The history of", "import numpy as np\n", "Once upon a time"])
            if chat: req["messages"] = [{"role": "user", "content": text}]
            else: req["prompt"] = text
            conn.request("POST", "/v1/chat/completions" if chat else "/v1/completions", json.dumps(req),
                         {"Content-Type": "application/json"})
            r = conn.getresponse()
            if r.status != 200:
                r.read(); st.add("unexpected", f"{req} -> {r.status}"); continue
            if kind < 0.25:            # give up early: hang up mid-answer
                r.read(rnd.randint(0, 64)); conn.sock.shutdown(socket.SHUT_RDWR); st.add("hangup"); continue
            data = r.read()
            if req["stream"]:
                ok = data.rstrip().endswith(b"data: [DONE]")
            else:
                ok = "choices" in json.loads(data)
            st.add("ok" if ok else "unexpected", None if ok else f"incomplete answer to {req}")
        except (socket.timeout, TimeoutError):
            st.add("hung", "a request hung")
        except (ConnectionError, OSError, http.client.HTTPException, json.JSONDecodeError) as e:
            st.add("unexpected", f"{type(e).__name__}: {e}")
        finally:
            conn.close()

class Hostile:
    """Connections that never finish their request; each one the server
    closes is reopened at once (a client that reconnects as fast as it is
    closed). kind: trickle (a header byte a second), stall (nothing), body
    (headers announcing 4 MiB, 1 MiB of body, then nothing)."""
    HEADS = {"trickle": b"GET /health HTTP/1.1\r\nHost: x\r\nX-Trickle: ",
             "stall": b"",
             "body": b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 4194304\r\n\r\n" + b" " * (1 << 20)}
    def __init__(self, host, port):
        self.host, self.port = host, port
        self.sel = selectors.DefaultSelector()
        self.lock = threading.Lock()
        self.closed = 0
        self.refused = 0
    def open(self, kind):
        try:
            s = socket.create_connection((self.host, self.port), timeout=5)
            if self.HEADS[kind]:
                s.sendall(self.HEADS[kind])
            s.setblocking(False)
        except OSError:
            with self.lock: self.refused += 1
            return
        self.sel.register(s, selectors.EVENT_READ, {"kind": kind, "last": time.monotonic()})
    def count(self):
        return len(self.sel.get_map())
    def run(self, kinds, stop_at):
        for kind, n in kinds:
            for _ in range(n):
                self.open(kind)
        while time.time() < stop_at:
            for key, _ in self.sel.select(timeout=0.2):
                try:
                    data = key.fileobj.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    self.sel.unregister(key.fileobj); key.fileobj.close()
                    with self.lock: self.closed += 1
                    self.open(key.data["kind"])
            now = time.monotonic()
            for key in list(self.sel.get_map().values()):
                if key.data["kind"] == "trickle" and now - key.data["last"] >= 1.0:
                    key.data["last"] = now
                    try:
                        key.fileobj.send(b"a")
                    except OSError:
                        pass   # seen as a close by the next select
        for key in list(self.sel.get_map().values()):
            self.sel.unregister(key.fileobj); key.fileobj.close()

def prober(url, stop_at, box):
    u = urllib.parse.urlparse(url)
    while time.time() < stop_at:
        t0 = time.monotonic()
        ok = False
        try:
            c = http.client.HTTPConnection(u.hostname, u.port, timeout=1.0)
            c.request("GET", "/health"); r = c.getresponse(); r.read(); c.close()
            ok = r.status == 200 and time.monotonic() - t0 <= 1.0
        except (OSError, http.client.HTTPException):
            pass
        box["ok" if ok else "missed"] += 1
        time.sleep(max(0.0, 1.0 - (time.monotonic() - t0)))

def proc_stat(pid):
    rss = thr = float("nan")
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"): rss = int(line.split()[1]) / 1024.0
            if line.startswith("Threads:"): thr = int(line.split()[1])
    except OSError:
        pass
    return rss, thr

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True); ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--minutes", type=float, default=30); ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--sample", type=float, default=10); ap.add_argument("--hang-s", type=float, default=120)
    ap.add_argument("--rss-growth", type=float, default=1.25); ap.add_argument("--out", default="results/soak.csv")
    ap.add_argument("--tricklers", type=int, default=200); ap.add_argument("--stallers", type=int, default=100)
    ap.add_argument("--body-stallers", type=int, default=8)
    a = ap.parse_args()
    st = Stats()
    stop_at = time.time() + a.minutes * 60
    ts = [threading.Thread(target=client, args=(a.url, stop_at, st, i, a.hang_s), daemon=True) for i in range(a.clients)]
    for t in ts: t.start()
    u = urllib.parse.urlparse(a.url)
    hostile = Hostile(u.hostname, u.port)
    probes = {"ok": 0, "missed": 0}
    side = [threading.Thread(target=hostile.run, args=([("trickle", a.tricklers), ("stall", a.stallers),
                                                        ("body", a.body_stallers)], stop_at), daemon=True),
            threading.Thread(target=prober, args=(a.url, stop_at, probes), daemon=True)]
    for t in side: t.start()
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    rows, t0 = [], time.time()
    with open(a.out + ".tmp", "w") as f:
        f.write("t_s,rss_mb,threads,kv_pages_used,running,ok,bad_expected,hangup,unexpected,hung,"
                "hostile_open,hostile_closed,health_ok,health_missed\n")
        while any(t.is_alive() for t in ts):
            time.sleep(a.sample)
            rss, thr = proc_stat(a.pid)
            try:
                m = urllib.request.urlopen(a.url + "/metrics", timeout=30).read().decode()
            except Exception:
                m = ""
            with st.lock: c = dict(st.c)
            row = [time.time() - t0, rss, thr, metric(m, "specbed:kv_cache_pages_used"),
                   metric(m, "specbed:num_requests_running"), c["ok"], c["bad_expected"], c["hangup"],
                   c["unexpected"], c["hung"], hostile.count(), hostile.closed, probes["ok"], probes["missed"]]
            rows.append(row)
            f.write(",".join(f"{v:.1f}" if isinstance(v, float) else str(v) for v in row) + "\n"); f.flush()
            print(" ".join(f"{k}={v}" for k, v in zip(["t", "rss_mb", "threads", "kv_pages", "running", "ok",
                  "bad4xx", "hangup", "unexpected", "hung", "hostile_open", "hostile_closed", "health_ok",
                  "health_missed"], [round(x, 1) if isinstance(x, float) else x for x in row])),
                  flush=True)
    os.replace(a.out + ".tmp", a.out)
    time.sleep(2)
    m = urllib.request.urlopen(a.url + "/metrics", timeout=30).read().decode()
    pages = metric(m, "specbed:kv_cache_pages_used")
    q = max(1, len(rows) // 4)
    first = sum(r[1] for r in rows[:q]) / q; last = sum(r[1] for r in rows[-q:]) / q
    fails = []
    if st.c["unexpected"]: fails.append(f"{st.c['unexpected']} unexpected answers: {st.unexpected[:5]}")
    if st.c["hung"]: fails.append(f"{st.c['hung']} hung requests")
    if pages != 0: fails.append(f"KV pages in use at the end: {pages}")
    if last > first * a.rss_growth: fails.append(f"RSS grew {first:.0f} -> {last:.0f} MB")
    n_probes = probes["ok"] + probes["missed"]
    if probes["missed"] > 0.05 * n_probes: fails.append(f"/health missed {probes['missed']} of {n_probes} probes")
    for t in side: t.join(timeout=10)
    print(f"soak: {a.minutes} min, {a.clients} clients: {st.c}; RSS {first:.0f} -> {last:.0f} MB; "
          f"KV pages at the end {pages}; hostile connections closed by the server {hostile.closed} "
          f"(refused {hostile.refused}); /health {probes['ok']}/{n_probes} within 1 s; "
          f"{'FAIL: ' + '; '.join(fails) if fails else 'ok'}")
    return 1 if fails else 0

if __name__ == "__main__":
    import urllib.request
    sys.exit(main())
