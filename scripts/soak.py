#!/usr/bin/env python3
"""soak.py — a long mixed load against a running `specbed serve`, sampling
the server's health every --sample seconds. Not part of CI.

Clients (threads, --clients of them) loop over a mix: streaming and
non-streaming completions and chat, greedy and sampled, with and without
speculation (spec_depth 0), clients that hang up mid-stream or give up
mid-request, and bad bodies (malformed JSON, wrong types, oversized
values, NUL in strings). Every sample line records the server's RSS and
thread count (from /proc/PID), KV pages in use and requests running
(/metrics), and the clients' counts of ok / expected-4xx / unexpected
answers and hung requests. Exits non-zero if any answer was unexpected,
any request hung past --hang-s, KV pages were not back to 0 at the end, or
RSS grew by more than --rss-growth between the first and last quarter.

usage: soak.py --url http://127.0.0.1:PORT --pid PID [--minutes 30]
               [--clients 32] [--sample 10] [--out results/soak.csv]
"""
import argparse, http.client, json, os, random, socket, sys, threading, time, urllib.parse

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
    a = ap.parse_args()
    st = Stats()
    stop_at = time.time() + a.minutes * 60
    ts = [threading.Thread(target=client, args=(a.url, stop_at, st, i, a.hang_s), daemon=True) for i in range(a.clients)]
    for t in ts: t.start()
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    rows, t0 = [], time.time()
    with open(a.out + ".tmp", "w") as f:
        f.write("t_s,rss_mb,threads,kv_pages_used,running,ok,bad_expected,hangup,unexpected,hung\n")
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
                   c["unexpected"], c["hung"]]
            rows.append(row)
            f.write(",".join(f"{v:.1f}" if isinstance(v, float) else str(v) for v in row) + "\n"); f.flush()
            print(" ".join(f"{k}={v}" for k, v in zip(["t", "rss_mb", "threads", "kv_pages", "running", "ok",
                  "bad4xx", "hangup", "unexpected", "hung"], [round(x, 1) if isinstance(x, float) else x for x in row])),
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
    print(f"soak: {a.minutes} min, {a.clients} clients: {st.c}; RSS {first:.0f} -> {last:.0f} MB; "
          f"KV pages at the end {pages}; {'FAIL: ' + '; '.join(fails) if fails else 'ok'}")
    return 1 if fails else 0

if __name__ == "__main__":
    import urllib.request
    sys.exit(main())
