#!/usr/bin/env python3
"""moe_regimes.py — the depth law's three regimes on one GPU, through
`specbed simulate` (issue 41): a dense model, the same active size as a
mixture of experts on the device, and that MoE with its experts in host
memory (read across the bus each step).

No GPU measures these here, so the cost tables are PREDICTIONS from the
roofline, written as `specbed profile` JSON (common/cost_curve.h):
  step seconds(rows) = max(bytes read / HBM bandwidth, FLOPs / tensor rate)
                       + a fixed step overhead,
for a Qwen3-30B-A3B-shaped model (48 layers, hidden 2048, 32/4 heads,
head_dim 128, 128 experts top-8 of intermediate 768, vocab 151,936, bf16)
and its dense twin (the same attention and head, one MLP of intermediate
6,144 = 8 × 768: the same active bytes at one row). A verify step of r rows
of one sequence reads the union of the experts its rows route to: D(r)
experts per layer, from one of two routing curves —
  independent: E·(1 − (1 − k/E)^r), every row routed at random (an upper
               bound: real routers are correlated token to token);
  lab:         k + f(r)·(independent − k), f(r) the share of the uniform
               excess that models/tiny-moe's trained router shows on the
               workload (routing_stats.json, measured on the bundled
               workloads, averaged over layers) — the bundled model's
               measured correlation carried to 128 experts;
  shareS:      k + S·(independent − k) for each --shares S: where between
               the two the decision turns (a sensitivity, not a measurement).
Across n sequences the experts are taken as independent between sequences
(cost_curve.h's rule). Experts on host: the on-device MoE table plus
`simulate --experts-on-host GBPS`, which adds each step's experts over the
bus. Acceptance: models/tiny-moe's own MTP head, measured (models/README.md,
eval_drafters.py, greedy, depth 5). The drafter's cost: one MTP module (an
attention layer, one dense MLP of the active size, the lm_head) per drafted
token, shared by the sequences drafting together.

Usage: scripts/studies/moe_regimes.py [--specbed build/specbed] [--out DIR]
       [--hbm-gbs 4100] [--bus-gbs 55] [--tflops 500] [--overhead-us 50]
Prints one table (the depth each regime picks per workload and load) and
leaves the tables, acceptance and each run's simulate.{json,md} in DIR.
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Qwen3-30B-A3B as published (config.json), bf16
L, H, NH, NKV, HD, E, K, I_MOE, V = 48, 2048, 32, 4, 128, 128, 8, 768, 151936
B = 2   # bytes a parameter
ATTN = (H * NH * HD + 2 * H * NKV * HD + NH * HD * H) * B   # q, k, v, o per layer
ROUTER = H * E * B
EXPERT = 3 * H * I_MOE * B                                  # gate, up, down
HEAD = V * H * B                                            # lm_head: every step
ACTIVE_PARAMS = L * (ATTN + ROUTER + K * EXPERT) / B + V * H
# MTP rates of models/tiny-moe (models/README.md, "Acceptance on tiny-moe")
ACCEPT = {"code": [0.876, 0.732, 0.623, 0.535, 0.465], "prose": [0.782, 0.637, 0.530, 0.462, 0.401]}
ROWS = list(range(1, 17))
SEQS = [1, 2, 4, 8, 16]


def independent(r):
    return E * (1 - (1 - K / E) ** r)


def lab_share(workload):
    """f(r): the share of the uniform excess tiny-moe's router shows, r = 1..16."""
    st = json.load(open(os.path.join(ROOT, "models", "tiny-moe", "routing_stats.json")))
    k, uni = st["top_k"], st["uniform"]
    layers = st["workloads"][workload]["layers"]
    f = []
    for i, _ in enumerate(st["window"]):
        d = sum(l["distinct"][i] for l in layers) / len(layers)
        f.append(0.0 if uni[i] <= k else (d - k) / (uni[i] - k))
    return f


def step_seconds(rows, experts_per_layer, a):
    """Roofline: weights read once per step, FLOPs of every row, plus the overhead."""
    bytes_read = L * (ATTN + ROUTER + experts_per_layer * EXPERT) + HEAD
    flops = 2.0 * ACTIVE_PARAMS * rows
    return max(bytes_read / (a.hbm_gbs * 1e9), flops / (a.tflops * 1e12)) + a.overhead_us * 1e-6


def table(kind, curve, a, source):
    """A profile-shaped cost table; curve(r) = distinct experts per layer for one sequence of r rows."""
    def d(seqs, r):
        if kind == "dense":
            return K   # the dense twin reads its whole MLP, K experts' worth, whatever the rows
        one = curve(r)
        return E * (1 - (1 - one / E) ** seqs)
    main = [step_seconds(r, d(min(r, 8), r / min(r, 8)), a) for r in ROWS]
    t = {"model": f"qwen3-30b-a3b shape ({kind}), roofline prediction", "source_note": source,
         "history": 0, "rows": ROWS, "seconds_per_step": main,
         "by_sequences": [{"sequences": n, "rows": [n * r for r in ROWS],
                           "seconds_per_step": [step_seconds(n * r, d(n, r), a) for r in ROWS]} for n in SEQS]}
    # MTP: an attention layer, one dense MLP of the active size and the lm_head per drafted token,
    # one pass for every sequence drafting (their weights read once)
    mtp = (ATTN + K * EXPERT + HEAD) / (a.hbm_gbs * 1e9)
    t["drafter"] = "mtp"
    t["draft_seconds_per_token"] = mtp
    t["draft_by_sequences"] = [{"sequences": n, "seconds_per_step": 0.0, "seconds_per_token": mtp / n} for n in SEQS]
    if kind != "dense":
        t["moe"] = {"experts": E, "top_k": K, "sparse_layers": L, "expert_bytes": EXPERT, "text": source,
                    "rows": ROWS, "distinct_experts_per_layer": [curve(r) for r in ROWS]}
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--specbed", default=os.path.join(ROOT, "build", "specbed"))
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "moe-regimes"))
    ap.add_argument("--hbm-gbs", type=float, default=4100, help="device bandwidth (H200 copy, measured 4 Dec: 4,091-4,176)")
    ap.add_argument("--bus-gbs", type=float, default=55, help="host-to-device bus (PCIe 5.0 x16: ~55 GB/s, assumed)")
    ap.add_argument("--tflops", type=float, default=500, help="bf16 tensor-core rate reached (assumed; H200 peak ~990)")
    ap.add_argument("--overhead-us", type=float, default=50, help="fixed time per step (assumed)")
    ap.add_argument("--concurrency", default="1,8")
    ap.add_argument("--shares", default="0.25,0.5",
                    help="also routing curves at these shares of the uniform excess (sensitivity; '' none)")
    a = ap.parse_args()
    a.shares = [float(x) for x in a.shares.split(",") if x]
    os.makedirs(a.out, exist_ok=True)
    acc_path = os.path.join(a.out, "accept.json")
    json.dump(ACCEPT, open(acc_path, "w"), indent=1)
    runs = []   # (label, workload, table path, extra args)
    for w in ("code", "prose"):
        f = lab_share(w)
        curves = {"independent": independent, "lab": lambda r, f=f: K + f[int(r) - 1] * (independent(r) - K)}
        kinds = [("dense", None), ("moe", "independent"), ("moe", "lab")]
        for sh in a.shares:   # sensitivity: routing between the two
            curves[f"share{sh:g}"] = lambda r, sh=sh: K + sh * (independent(r) - K)
            kinds.append(("moe", f"share{sh:g}"))
        for kind, cname in kinds:
            name = kind if kind == "dense" else f"moe-{cname}"
            src = ("a dense MLP: no routing" if cname is None else
                   "routing independent across rows" if cname == "independent" else
                   f"routing: models/tiny-moe's measured share of the uniform excess on {w}" if cname == "lab" else
                   f"routing: {cname[5:]} of the uniform excess (a sensitivity, not a measurement)")
            t = table(kind, curves[cname] if cname else independent, a, src)
            path = os.path.join(a.out, f"cost-{name}-{w}.json")
            json.dump(t, open(path, "w"), indent=1)
            runs.append((name + " on device", w, path, [], 0.0))
            if kind == "moe":   # the bus time of one row's experts, for the table's first column
                bus1 = L * EXPERT * t["moe"]["distinct_experts_per_layer"][0] / (a.bus_gbs * 1e9)
                runs.append((name + f" experts on host ({a.bus_gbs:g} GB/s)", w, path,
                             ["--experts-on-host", f"{a.bus_gbs:g}"], bus1))
    rows = []
    for label, w, path, extra, bus1 in runs:
        out = os.path.join(a.out, "sim-" + os.path.basename(path)[5:-5] + ("-host" if extra else ""))
        cmd = [a.specbed, "simulate", "--accept", acc_path, "--workloads", w, "--drafter", "mtp", "--cost-table", path,
               "--depths", "0-5", "--concurrency", a.concurrency, "--repeats", "3", "--duration", "300",
               "--out", out] + extra
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            sys.exit(f"moe_regimes: {' '.join(cmd)} failed:\n{r.stderr}")
        sim = json.load(open(os.path.join(out, "simulate.json")))
        t = json.load(open(path))
        for dcs in sim["decisions"]:
            rows.append((label, w, dcs["load"], (t["seconds_per_step"][0] + bus1) * 1e3, dcs["best_depth"],
                         dcs["recommended_depth"], dcs.get("gain_vs_off")))
    print(f"| regime (predicted cost) | workload | load | step ms at 1 row | best depth | recommended | gain vs off |")
    print("|---|---|---|---:|---:|---:|---:|")
    for label, w, load, ms1, best, rec, gain in rows:
        g = f"{gain:.2f}x" if isinstance(gain, (int, float)) else "-"
        print(f"| {label} | {w} | {load} | {ms1:.2f} | {best} | **{rec}** | {g} |")


if __name__ == "__main__":
    main()
