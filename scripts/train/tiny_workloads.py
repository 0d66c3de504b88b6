#!/usr/bin/env python3
"""tiny_workloads.py — write the prompt suites in workloads/ from the corpus TEST split.

Owns: workloads/{code,prose,structured,copy}.jsonl and the token-budget
table printed for workloads/README.md.
Must not: read the train or validation splits (prompts must be unseen text).

Format (DESIGN §3): one JSON object per line with "prompt", "category",
"max_tokens", "id"; extra fields ("source", and for copy.jsonl "expected"
and "n_back") are informational and ignored by loaders.

- code / prose: 64 prompts each, cut from TEST-split documents at line
  starts, 120..400 characters, documents chosen by hash so every source of
  the split is represented.
- structured: 40 prompts of JSON records / tool-call markup / XML whose
  continuation is the next, highly regular, record; values from a seeded RNG.
- copy: 39 prompts; a passphrase planted so that its first token lies exactly
  n_back tokens before the end of the prompt (n_back in
  {48,64,96,112,120,136,144,160,192,256,320,384,480}, 3 prompts each), then filler
  prose from the test split, then "The passphrase is:" again; the continuation
  must reproduce the passphrase ("expected").

Usage: tiny_workloads.py [--out workloads]
"""
import argparse
import hashlib
import json
import os
import random
import statistics

import tiny_common as tc

WORDS = ("amber falcon quartz meadow cobalt lantern orchid granite velvet harbor "
         "saffron thistle juniper copper willow cinder marble violet tundra ember "
         "maple onyx pepper raven silver topaz walnut zephyr indigo lotus").split()


def docs(domain):
    out = []
    with open(os.path.join(tc.CORPUS, domain, "test.jsonl"), encoding="utf-8") as f:
        for line in f:
            out.append(json.loads(line))
    return out


def h(s):
    return int(hashlib.sha1(s.encode()).hexdigest(), 16)


def cut(text, key, lo=120, hi=400):
    """A prompt from text: starts at a line start chosen by hash, ends at a
    line end, lo..hi characters; None if the document has no such span."""
    starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n" and i + 1 < len(text)]
    starts = [s for s in starts if text[s:s + 1].strip()]  # non-blank line start
    if not starts:
        return None
    rng = random.Random(h(key))
    for _ in range(20):
        s = rng.choice(starts)
        end = s
        while True:
            nl = text.find("\n", end + 1)
            if nl < 0 or nl - s > hi:
                break
            end = nl
        if end - s >= lo:
            return text[s:end + 1]
    return None


def completion_suite(domain, n, max_tokens):
    ds = docs(domain)
    by_src = {}
    for d in ds:
        by_src.setdefault(d["source"], []).append(d)
    srcs = sorted(by_src)
    out, i = [], 0
    # Round-robin over sources, documents in hash order, one prompt per document.
    queues = {s: sorted(by_src[s], key=lambda d: h("wl:" + d["id"])) for s in srcs}
    while len(out) < n and any(queues.values()):
        s = srcs[i % len(srcs)]
        i += 1
        if not queues[s]:
            continue
        d = queues[s].pop(0)
        p = cut(d["text"], "cut:" + d["id"])
        if p:
            out.append({"id": "%s-%03d" % (domain, len(out) + 1), "category": s, "prompt": p,
                        "max_tokens": max_tokens, "source": d["id"]})
    return out


def structured_suite(n):
    rng = random.Random(7)
    names = ["alice", "bruno", "chen", "dana", "emil", "farah", "goran", "hana", "ivan", "jun"]
    cities = ["Paris", "Oslo", "Lima", "Cairo", "Kyoto", "Quito", "Perth", "Turin", "Accra", "Hanoi"]
    tools = [("get_weather", "city"), ("lookup_user", "username"), ("convert_currency", "amount"),
             ("search_docs", "query"), ("read_file", "path")]
    out = []
    for i in range(n):
        kind = i % 4
        if kind == 0:  # JSON array of records
            recs = [{"id": 100 + j, "name": rng.choice(names), "city": rng.choice(cities),
                     "active": rng.random() < 0.5} for j in range(rng.randint(2, 4))]
            body = ",\n".join("  " + json.dumps(r) for r in recs)
            prompt = "[\n" + body + ",\n  {\"id\": %d, \"name\": \"" % (100 + len(recs))
            cat = "json"
        elif kind == 1:  # tool calls, ChatML-style markup
            calls = []
            for j in range(rng.randint(1, 3)):
                t, arg = rng.choice(tools)
                val = rng.choice(cities) if arg == "city" else rng.choice(names) if arg == "username" else \
                    rng.randint(1, 999) if arg == "amount" else "/etc/" + rng.choice(names) + ".conf"
                calls.append("<tool_call>\n%s\n</tool_call>" % json.dumps({"name": t, "arguments": {arg: val}}))
            t, arg = rng.choice(tools)
            prompt = ("<|im_start|>assistant\n" + "\n".join(calls) + "\n<tool_call>\n{\"name\": \"%s\", "
                      "\"arguments\": {\"%s\": " % (t, arg))
            cat = "tool_call"
        elif kind == 2:  # JSON config object
            keys = ["timeout", "retries", "port", "workers", "verbose", "log_level", "cache_size"]
            rng.shuffle(keys)
            obj = {}
            for k in keys[:rng.randint(3, 5)]:
                obj[k] = rng.choice([True, False]) if k == "verbose" else rng.choice(["debug", "info", "warn"]) \
                    if k == "log_level" else rng.randint(1, 9000)
            prompt = "{\n  \"server\": " + json.dumps(obj, indent=4).replace("\n", "\n  ") + ",\n  \"client\": {\n    \""
            cat = "json"
        else:  # XML-ish records
            rows = ["  <user id=\"%d\" name=\"%s\" city=\"%s\"/>" % (j + 1, rng.choice(names), rng.choice(cities))
                    for j in range(rng.randint(2, 4))]
            prompt = "<users>\n" + "\n".join(rows) + "\n  <user id=\"%d\" name=\"" % (len(rows) + 1)
            cat = "xml"
        out.append({"id": "structured-%03d" % (i + 1), "category": cat, "prompt": prompt, "max_tokens": 64})
    return out


def copy_suite(tok, per_n=3, ns=(48, 64, 96, 112, 120, 136, 144, 160, 192, 256, 320, 384, 480)):
    filler_docs = [d for d in docs("prose")]
    filler_docs.sort(key=lambda d: h("filler:" + d["id"]))
    rng = random.Random(11)
    out = []
    fi = 0
    for n in ns:
        for r in range(per_n):
            phrase = " ".join(rng.sample(WORDS, 4))
            head = "Remember this. The passphrase is: %s.\n\n" % phrase
            tail = "\n\nThe passphrase is:"
            # Filler: whole lines of test-split prose, trimmed token-exactly.
            text = filler_docs[fi % len(filler_docs)]["text"]
            fi += 1
            k_head = len(tok.encode(head).ids)
            k_phrase_start = len(tok.encode("Remember this. The passphrase is:").ids)
            k_tail = len(tok.encode(tail).ids)
            want_filler = n - (k_head - k_phrase_start) - k_tail
            if want_filler < 1:
                raise SystemExit("n_back %d too small" % n)
            fids = tok.encode(text).ids
            while len(fids) < want_filler + 8:
                fids += tok.encode("\n" + filler_docs[(fi + 7) % len(filler_docs)]["text"]).ids
                fi += 1
            best, best_nb = None, None
            for m in range(max(1, want_filler - 24), want_filler + 25):
                filler = tok.decode(fids[:m])
                prompt = head + filler + tail
                nb = len(tok.encode(prompt).ids) - k_phrase_start
                if best is None or abs(nb - n) < abs(best_nb - n):
                    best, best_nb = prompt, nb
                if nb == n:
                    break
            if abs(best_nb - n) > 2:
                raise SystemExit("could not get near n_back %d (closest %d)" % (n, best_nb))
            out.append({"id": "copy-n%03d-%d" % (n, r + 1), "category": "copy-n%d" % n, "prompt": best,
                        "max_tokens": 16, "expected": " " + phrase + ".", "n_back": best_nb})
    return out


def budgets(tok, rows):
    lens = [len(tok.encode(r["prompt"]).ids) for r in rows]
    return {"prompts": len(rows), "prompt_tokens_min": min(lens), "prompt_tokens_mean": round(statistics.mean(lens), 1),
            "prompt_tokens_max": max(lens), "max_tokens": sorted({r["max_tokens"] for r in rows}),
            "categories": {c: sum(1 for r in rows if r["category"] == c) for c in sorted({r["category"] for r in rows})}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(tc.ROOT, "workloads"))
    args = ap.parse_args()
    tok = tc.load_tokenizer()
    suites = {"code": completion_suite("code", 64, 128), "prose": completion_suite("prose", 64, 128),
              "structured": structured_suite(40), "copy": copy_suite(tok)}
    os.makedirs(args.out, exist_ok=True)
    table = {}
    for name, rows in suites.items():
        with open(os.path.join(args.out, name + ".jsonl"), "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        table[name] = budgets(tok, rows)
    print(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
