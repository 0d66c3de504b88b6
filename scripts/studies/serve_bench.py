#!/usr/bin/env python3
"""serve_bench.py — a small closed-loop load driver for `specbed serve` (or
any OpenAI-compatible server), used for the serving numbers in
bench/RECORD.md until `specbed load` is wired into the binary. Standard
library only.

For each concurrency C it keeps C streaming /v1/completions requests in
flight (greedy, ignore_eos, fixed max_tokens) until `--requests` (default
max(4C, 16)) have finished, timing every SSE chunk. It prints one row per
concurrency and writes CSV with vLLM bench field names:
  concurrency, requests, duration_s, output_throughput (tok/s),
  mean/p50/p99 TTFT ms, mean/p50/p99 ITL ms (gaps between chunks: several
  tokens committed by one speculative step arrive as one chunk), mean TPOT
  ms ((e2e - ttft) / (tokens - 1)), accept length from /metrics deltas.

usage: scripts/studies/serve_bench.py --url http://127.0.0.1:8000 --workload workloads/code.jsonl \
           --concurrency 1,2,4,8,16,32 --max-tokens 128 [--spec-depth K] [--out FILE.csv]
"""
import argparse
import csv
import http.client
import json
import statistics
import sys
import threading
import time
import urllib.parse


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100.0
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def one_request(host, port, body):
    """Returns (ttft_s, chunk_gaps_s, e2e_s, completion_tokens)."""
    conn = http.client.HTTPConnection(host, port, timeout=600)
    t0 = time.perf_counter()
    conn.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:200]!r}")
    first, last, gaps, tokens = None, None, [], 0
    while True:
        line = resp.readline()
        if not line:
            break
        line = line.strip()
        if not line.startswith(b"data: "):
            continue
        data = line[6:]
        if data == b"[DONE]":
            break
        ev = json.loads(data)
        if ev.get("usage"):
            tokens = ev["usage"]["completion_tokens"]
        if ev.get("choices") and ev["choices"][0].get("text"):
            now = time.perf_counter()
            if first is None:
                first = now
            else:
                gaps.append(now - last)
            last = now
    e2e = time.perf_counter() - t0
    conn.close()
    return (first - t0 if first else float("nan")), gaps, e2e, tokens


def metrics(host, port):
    conn = http.client.HTTPConnection(host, port, timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    out = {}
    for ln in text.splitlines():
        if ln and not ln.startswith("#") and "{" not in ln:
            k, v = ln.split(" ", 1)
            out[k] = float(v)
    return out


def run_level(host, port, prompts, c, n_req, args):
    lock = threading.Lock()
    results, errors, next_i = [], [], [0]

    def worker():
        while True:
            with lock:
                if next_i[0] >= n_req:
                    return
                i = next_i[0]
                next_i[0] += 1
            req = {"prompt": prompts[i % len(prompts)], "max_tokens": args.max_tokens, "temperature": 0,
                   "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
            if args.spec_depth is not None:
                req["spec_depth"] = args.spec_depth
            try:
                r = one_request(host, port, json.dumps(req))
                with lock:
                    results.append(r)
            except Exception as e:  # noqa: BLE001 - report and go on
                with lock:
                    errors.append(str(e))

    m0 = metrics(host, port)
    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(c)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    dur = time.perf_counter() - t0
    m1 = metrics(host, port)
    steps = m1.get("specbed:spec_decode_num_verify_steps_total", 0) - m0.get("specbed:spec_decode_num_verify_steps_total", 0)
    comm = m1.get("specbed:spec_decode_num_committed_tokens_total", 0) - m0.get("specbed:spec_decode_num_committed_tokens_total", 0)
    ttft = [r[0] * 1e3 for r in results]
    itl = [g * 1e3 for r in results for g in r[1]]
    tpot = [(r[2] - r[0]) / (r[3] - 1) * 1e3 for r in results if r[3] > 1]
    toks = sum(r[3] for r in results)
    return {
        "concurrency": c, "requests": len(results), "errors": len(errors), "duration_s": round(dur, 3),
        "output_throughput": round(toks / dur, 1),
        "mean_ttft_ms": round(statistics.mean(ttft), 2) if ttft else "", "p50_ttft_ms": round(pct(ttft, 50), 2),
        "p99_ttft_ms": round(pct(ttft, 99), 2),
        "mean_itl_ms": round(statistics.mean(itl), 3) if itl else "", "p50_itl_ms": round(pct(itl, 50), 3),
        "p99_itl_ms": round(pct(itl, 99), 3),
        "mean_tpot_ms": round(statistics.mean(tpot), 3) if tpot else "",
        "specbed_acceptance_length": round(comm / steps, 2) if steps else "",
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True)
    ap.add_argument("--workload", required=True, help="JSONL with a 'prompt' field per line")
    ap.add_argument("--concurrency", default="1,2,4,8,16,32")
    ap.add_argument("--requests", type=int, default=0, help="per level (default max(4C, 16))")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--spec-depth", type=int, default=None)
    ap.add_argument("--max-prompt-chars", type=int, default=1200)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    u = urllib.parse.urlparse(args.url)
    prompts = []
    with open(args.workload) as f:
        for ln in f:
            if ln.strip():
                prompts.append(json.loads(ln)["prompt"][: args.max_prompt_chars])
    rows = []
    for c in [int(x) for x in args.concurrency.split(",")]:
        n = args.requests or max(4 * c, 16)
        row = run_level(u.hostname, u.port, prompts, c, n, args)
        rows.append(row)
        print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    if args.out:
        with open(args.out, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    return 0 if all(r["errors"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
