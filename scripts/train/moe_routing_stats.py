#!/usr/bin/env python3
"""moe_routing_stats.py — how a Qwen3-MoE target routes the bundled workloads.

Owns: DIR/routing_stats.json (default models/tiny-moe), the record the model
card's MoE section and the C cost model read. For every prompt of
workloads/{code,prose,structured,copy}.jsonl (its tokens, teacher-forced: one
HF forward, weights in f32) and every sparse layer it takes each token's
top-k experts exactly as HF's Qwen3MoeSparseMoeBlock does (softmax in f32 over
the router logits, torch.topk) and reports
  - share[e]: the share of the layer's k x tokens expert slots that went to
    expert e (uniform routing: 1/E each), and its max and min;
  - distinct[n-1], n = 1..16: the mean number of distinct experts that n
    consecutive tokens of one prompt touch in that layer (every window of n
    tokens inside a prompt counts once), i.e. how many experts' weights a
    verify step of n rows of one sequence reads;
  - distinct_mod_k: the share of tokens whose k experts fall in k distinct
    classes e mod k (an upcycled model's experts e mod k = q start from
    quarter q of the dense MLP: train_target.upcycle_moe), and cold: how
    many experts got under 1% of the slots;
and two baselines for the same n:
  - uniform[n-1] = E (1 - (1 - k/E)^n): tokens routed independently to a
    uniformly random k-subset. A given expert is in one token's subset with
    probability C(E-1, k-1)/C(E, k) = k/E, so it is missed by n independent
    tokens with probability (1 - k/E)^n, and the count's expectation is the
    sum over the E experts of 1 - (1 - k/E)^n;
  - independent[n-1] = sum_e 1 - (1 - k share[e])^n: tokens independent but
    with the layer's measured shares (k share[e] is the probability that a
    token picks e), which separates what the imbalance explains from what
    the correlation of neighbouring tokens does.
Must not: train or change the model.

Usage: moe_routing_stats.py [--model DIR] [--max-tokens T] [--out FILE]
"""
import argparse
import json
import os

import numpy as np
import torch

import tiny_common as tc

WORKLOADS = ("code", "prose", "structured", "copy")
MAX_WINDOW = 16


def routes(model, ids):
    """ids: list of token ids -> [n_sparse_layers, T, k] selected experts (HF's rule)."""
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids]), output_router_logits=True)
    k = model.config.num_experts_per_tok
    sel = []
    for rl in out.router_logits:  # one [T, E] per sparse layer
        p = torch.softmax(rl.float(), dim=-1)
        sel.append(torch.topk(p, k, dim=-1).indices.numpy())
    return np.stack(sel)


def distinct_curve(sel_layer, E, counts, windows):
    """sel_layer [T, k] of one prompt: adds, per window n, (sum of distinct, number of windows) to counts."""
    T = sel_layer.shape[0]
    onehot = np.zeros((T, E), dtype=bool)
    np.put_along_axis(onehot, sel_layer, True, axis=1)
    for n in range(1, windows + 1):
        if T < n:
            break
        # union over every window of n consecutive rows: a running OR via cumulative counts
        c = np.concatenate([np.zeros((1, E), dtype=np.int64), np.cumsum(onehot, 0)])
        union = (c[n:] - c[:-n]) > 0  # [T-n+1, E]
        counts[n - 1][0] += union.sum()
        counts[n - 1][1] += union.shape[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(tc.MODELS, "tiny-moe"))
    ap.add_argument("--max-tokens", type=int, default=1024, help="a prompt's last T tokens at most")
    ap.add_argument("--out", default=None, help="default MODEL/routing_stats.json")
    args = ap.parse_args()
    tc.setup_torch(0)
    model = tc.load_target(args.model)
    cfg = model.config
    if cfg.model_type != "qwen3_moe":
        tc.die("%s is not a Qwen3-MoE model (model_type %s)" % (args.model, cfg.model_type))
    E, k = cfg.num_experts, cfg.num_experts_per_tok
    sparse = [L for L in range(cfg.num_hidden_layers) if L not in cfg.mlp_only_layers and
              (L + 1) % cfg.decoder_sparse_step == 0]
    tok = tc.load_tokenizer(os.path.join(args.model, "tokenizer.json"))
    n_range = list(range(1, MAX_WINDOW + 1))
    rec = {"model": os.path.relpath(args.model, tc.ROOT), "num_experts": E, "top_k": k, "sparse_layers": sparse,
           "method": "prompt tokens teacher-forced (one HF forward per prompt, f32); per sparse layer the top-k "
                     "of softmax(router logits) in f32, as HF's Qwen3MoeSparseMoeBlock",
           "window": n_range,
           "uniform": [E * (1 - (1 - k / E) ** n) for n in n_range],
           "uniform_formula": "E*(1-(1-k/E)^n): an expert is in a uniformly random k-subset with probability "
                              "C(E-1,k-1)/C(E,k) = k/E; n independent tokens all miss it with (1-k/E)^n",
           "workloads": {}}
    for wl in WORKLOADS:
        path = os.path.join(tc.ROOT, "workloads", wl + ".jsonl")
        if not os.path.exists(path):
            continue
        share = np.zeros((len(sparse), E))
        mod_k = np.zeros(len(sparse))
        dist = [[[0, 0] for _ in n_range] for _ in sparse]
        n_tok = n_prompts = 0
        with open(path, encoding="utf-8") as f:
            for line in f:
                ids = tok.encode(json.loads(line)["prompt"], add_special_tokens=False).ids[-args.max_tokens:]
                if not ids:
                    continue
                sel = routes(model, ids)
                for li in range(len(sparse)):
                    np.add.at(share[li], sel[li].reshape(-1), 1)
                    distinct_curve(sel[li], E, dist[li], MAX_WINDOW)
                    mod_k[li] += sum(len(set(r)) == k for r in (sel[li] % k).tolist())
                n_tok += len(ids)
                n_prompts += 1
        layers = []
        for li, L in enumerate(sparse):
            s = share[li] / (k * n_tok)
            curve = [a / b if b else None for a, b in dist[li]]
            layers.append({"layer": L, "share": [round(float(v), 5) for v in s],
                           "max_share": float(s.max()), "min_share": float(s.min()),
                           "cold": int((s < 0.01).sum()), "distinct_mod_k": float(mod_k[li] / n_tok),
                           "distinct": curve,
                           "independent": [float(sum(1 - (1 - k * s) ** n)) for n in n_range]})
        mean = [float(np.mean([l["distinct"][i] for l in layers])) for i in range(len(n_range))]
        rec["workloads"][wl] = {"prompts": n_prompts, "tokens": n_tok, "layers": layers, "distinct_mean": mean}
        tc.log("%s: %d prompts, %d tokens; distinct experts for n = 1, 2, 4, 8, 16 (mean over layers): %s "
               "(uniform %s)" % (wl, n_prompts, n_tok, " ".join("%.2f" % mean[n - 1] for n in (1, 2, 4, 8, 16)),
                                 " ".join("%.2f" % rec["uniform"][n - 1] for n in (1, 2, 4, 8, 16))))
    out = args.out or os.path.join(args.model, "routing_stats.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(rec, f, indent=1)
        f.write("\n")
    tc.log("wrote %s" % out)


if __name__ == "__main__":
    main()
