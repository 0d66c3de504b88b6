#!/usr/bin/env python3
"""ngram_replay.py — how the ngram drafter's length rule pays, replayed offline.

Owns: choosing the ngram drafter's defaults (spec/drafter_ngram.h: n_max,
n_min, spec_factor) from the target's own greedy text and a measured verify
cost curve, over many more prompts than a timed bench_spec run can afford.
Must not: be needed by tests, or stand in for bench_spec's timed
measurement (bench/RECORD.md records both).

Method: the target's greedy continuation of each workload prompt (HF
transformers, greedy; specbed's greedy output equals it token for token) is
the exact sequence greedy speculation commits whatever it drafts. Replaying
the decode loop over it — draft from the committed context by the
drafter's rule (most recent match of the longest suffix, continuation
copied past the end of the context from the drafts themselves, at most
min(K, ceil(factor * match length)) tokens), accept the leading drafts
equal to the continuation, commit them plus one — gives every step's draft
count and accept length exactly. Cost of a step with k drafts: the
1-sequence row of `specbed profile`'s table at k + 1 rows, plus
--overhead-ms, an offset fitted so that depth 1 predicts what bench_spec
measures on the same prompts (the replay's accept lengths equal
bench_spec's exactly; its step costs do not: on the 2-core EPYC of 4 Dec
bench_spec's multi-row steps cost relatively more than profile's, and
-0.02 ms fitted). Predicted speed-up = tokens / (steps' cost / 1-row cost),
the quantity bench_spec measures; the ranking of the options, not the
level, is what the replay is for.

A last row per workload is the survival-optimal length: per step the
number of drafts that maximises expected tokens per cost, from the
survival rate of each (match length, position) on these same prompts —
the best any rule that sees only the match length and the position can do.

Usage: ngram_replay.py --cost-table cost.json [--model models/tiny]
                       [--workloads code,prose] [--prompts N] [--max-tokens G]
                       [--factors 0,1,1.5,2,3] [--n-max 3] [--n-min 1]
                       [--overhead-ms MS] [--greedy-cache FILE.json]
"""
import argparse
import json
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def greedy_continuations(model_dir, workloads, n_prompts, max_tokens):
    import torch
    from tokenizers import Tokenizer
    from transformers import AutoModelForCausalLM
    m = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32).eval()
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    out = []
    for w in workloads:
        with open(os.path.join(ROOT, "workloads", w + ".jsonl")) as f:
            for i, line in enumerate(f):
                if i >= n_prompts:
                    break
                j = json.loads(line)
                text = j.get("prompt") or j["turns"][0]
                ids = tok.encode(text, add_special_tokens=False).ids
                with torch.no_grad():
                    g = m.generate(torch.tensor([ids]), max_new_tokens=max_tokens, do_sample=False,
                                   eos_token_id=None, pad_token_id=m.config.pad_token_id)
                out.append({"workload": w, "prompt": ids, "gen": g[0, len(ids):].tolist()})
    return out


def propose(t, k_max, n_max, n_min, factor):
    """spec/drafter_ngram.c's rule, written independently (test_drafter_ngram
    checks the C). Returns (drafts, match length)."""
    n = len(t)
    for L in range(n_max, n_min - 1, -1):
        if L >= n:
            continue
        suffix = t[n - L:]
        i = next((i for i in range(n - L - 1, -1, -1) if t[i:i + L] == suffix), -1)
        if i < 0:
            continue
        limit = k_max if factor <= 0 else min(k_max, math.ceil(factor * L))
        ext = list(t)
        for m in range(limit):
            ext.append(ext[i + L + m])
        return ext[n:], L
    return [], 0


def replay(seqs, workload, k_max, n_max, n_min, factor, step_cost, length=None, survival=None):
    """Accept length and predicted speed-up. length(drafts, L): how many of
    the uncapped drafts to keep (None: the factor's cap). survival: a dict
    (L, j) -> [reached, accepted] filled with every uncapped draft's fate."""
    tokens = steps = 0
    cost = 0.0
    for s in seqs:
        if s["workload"] != workload:
            continue
        g = s["gen"]
        ctx = s["prompt"] + g[:1]   # the first token comes from prefill, as in bench_spec
        pos = 1
        while pos < len(g):
            d, L = propose(ctx, k_max, n_max, n_min, 0 if length or survival is not None else factor)
            if survival is not None:
                for j, tok in enumerate(d):
                    if pos + j >= len(g):
                        break
                    cell = survival.setdefault((L, j), [0, 0])
                    cell[0] += 1
                    if tok != g[pos + j]:
                        break
                    cell[1] += 1
            if length:
                d = d[:length(d, L)]
            a = 0
            while a < len(d) and pos + a < len(g) and d[a] == g[pos + a]:
                a += 1
            n = min(a + 1, len(g) - pos)
            ctx += g[pos:pos + n]
            pos += n
            tokens += n
            steps += 1
            cost += step_cost(len(d) + 1)
    return tokens / steps, tokens / cost


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cost-table", required=True, help="`specbed profile` JSON (its 1-sequence rows are used)")
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "tiny"))
    ap.add_argument("--workloads", default="code,prose")
    ap.add_argument("--prompts", type=int, default=61)
    ap.add_argument("--max-tokens", type=int, default=80)
    ap.add_argument("--factors", default="0,1,1.5,2,3")
    ap.add_argument("--n-max", type=int, default=3)
    ap.add_argument("--n-min", type=int, default=1)
    ap.add_argument("--depths", type=int, default=7)   # profile times 1..8 rows
    ap.add_argument("--overhead-ms", type=float, default=0.0)
    ap.add_argument("--greedy-cache", help="reuse (or write) the greedy continuations here")
    a = ap.parse_args()

    table = json.load(open(a.cost_table))
    one = next(b for b in table["by_sequences"] if b["sequences"] == 1)
    rows = dict(zip(one["rows"], one["seconds_per_step"]))
    need = a.depths + 1
    if any(r not in rows for r in range(1, need + 1)):
        sys.exit(f"ngram_replay: {a.cost_table} has no 1-sequence cost for 1..{need} rows (profile --max-rows {need})")
    over = a.overhead_ms / 1e3
    base = rows[1] + over

    def step_cost(r):
        return (rows[r] + over) / base

    workloads = a.workloads.split(",")
    if a.greedy_cache and os.path.exists(a.greedy_cache):
        seqs = json.load(open(a.greedy_cache))
    else:
        seqs = greedy_continuations(a.model, workloads, a.prompts, a.max_tokens)
        if a.greedy_cache:
            tmp = a.greedy_cache + ".tmp"
            json.dump(seqs, open(tmp, "w"))
            os.replace(tmp, a.greedy_cache)
    print("verify step cost / 1-row step: " + " ".join(f"{r}:{step_cost(r):.2f}" for r in range(1, need + 1)))
    def show(name, cells):
        best = max(range(len(cells)), key=lambda i: cells[i][1])
        print(f"  {name:<16}" + "".join(f" {t:.2f}/{s:.2f}x" for t, s in cells) + f"   best K={best + 1} {cells[best][1]:.2f}x")

    for w in workloads:
        n = sum(1 for s in seqs if s["workload"] == w)
        print(f"\n{w}: {n} prompts; cells: accept length / predicted speed-up, K = 1..{a.depths}")
        for f in (float(x) for x in a.factors.split(",")):
            cells = [replay(seqs, w, k, a.n_max, a.n_min, f, step_cost) for k in range(1, a.depths + 1)]
            show(f"factor {f:<4g}", cells)
        # The best any length rule that sees the match length and the draft
        # position can do: per step, the k that maximises expected tokens per
        # cost under the survival rates of these very prompts (in-sample, so
        # an upper bound for such rules).
        surv = {}
        replay(seqs, w, a.depths, a.n_max, a.n_min, 0, step_cost, survival=surv)
        rate = {key: acc / reached for key, (reached, acc) in surv.items()}

        def best_len(d, L):
            best, best_v, p, e = 0, 1 / step_cost(1), 1.0, 1.0
            for k in range(1, len(d) + 1):
                p *= rate.get((L, k - 1), 0.0)
                e += p
                if e / step_cost(k + 1) > best_v:
                    best, best_v = k, e / step_cost(k + 1)
            return best
        cells = [replay(seqs, w, k, a.n_max, a.n_min, 0, step_cost, length=best_len) for k in range(1, a.depths + 1)]
        show("survival-optimal", cells)
        print("  survival by match length, position 1..: " + "; ".join(
            f"{L}: " + " ".join(f"{rate[(L, j)]:.2f}" for j in range(a.depths) if (L, j) in rate)
            for L in range(a.n_max, a.n_min - 1, -1)))


if __name__ == "__main__":
    main()
