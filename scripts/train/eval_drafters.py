#!/usr/bin/env python3
"""eval_drafters.py — PyTorch reference acceptance of the bundled drafters (greedy).

Owns: measuring, for the MTP module, the DSpark drafter and the draft model,
per-position acceptance and mean accept length (bonus included) at depth K
on code and prose validation text, plus the target's validation loss and
greedy samples that models/README.md quotes.
Must not: be needed by tests (numbers go into models/README.md by hand).

Method (greedy speculative decoding, simulated exactly): for each domain take
N prompts of P tokens from the validation split, let the target continue
each greedily for G tokens (HF generate, no sampling). In the resulting
sequence every position n of the continuation is one decode step: committed
tokens x_0..x_n, the target's greedy next tokens are x_{n+1}..x_{n+K}.
Each drafter proposes d_1..d_K from x_0..x_n (and the target hidden states
it is entitled to: MTP h_{n-1}, DSpark the taps at positions < n);
accept length = 1 + number of leading d_k == x_{n+k}; position rate k =
fraction of steps with at least k accepted. DSpark runs its trained block
(γ = block_size) from anchor x_n, chained blocks (spec/drafter_dspark.h's
rule, DSpark.draft with n_blocks > 1) for K > γ; MTP chains its one module on its own
output; the draft model runs autoregressively with its own KV.

With --copy D1,D2,..: instead, per-position drafting inside a span of random
ids repeated D tokens back (copy_eval): what each drafter can copy from its
context, with no prior or bigram to lean on.

Usage: eval_drafters.py [--prompts N] [--prompt-len P] [--gen G] [--depth K] [--drafters mtp,dspark,draft]
                        [--dspark DIR] [--copy D1,D2,..] [--out FILE]
"""
import argparse
import json
import math
import os

import numpy as np
import torch

import tiny_common as tc
import tiny_modules as tm
from safetensors.torch import load_file


def load_mtp(target, tdir):
    mtp = tm.MTP(target.config)
    mtp.load_ds(load_file(os.path.join(tdir, "model.safetensors")), target.config.num_hidden_layers)
    return mtp.float().eval()


def load_dspark(ddir):
    from transformers import Qwen3Config
    with open(os.path.join(ddir, "config.json")) as f:
        d = json.load(f)
    cfg = Qwen3Config(**{k: v for k, v in d.items() if k not in ("architectures", "dtype")})
    for k in ("block_size", "mask_token_id", "target_layer_ids", "markov_rank", "markov_head_type",
              "num_target_layers", "enable_confidence_head", "confidence_head_with_markov"):
        setattr(cfg, k, d[k])
    m = tm.DSpark(cfg)
    sd = {k: v.float() for k, v in load_file(os.path.join(ddir, "model.safetensors")).items()}
    missing, unexpected = m.load_state_dict(sd, strict=False)
    missing = [k for k in missing if not k.startswith("rot.")]
    if missing or unexpected:
        raise KeyError("dspark: missing %s unexpected %s" % (missing, unexpected))
    return m.eval()


def prompts_for(domain, n, plen, split="val"):
    """n prompts of plen tokens, evenly spaced through the split, each
    starting right after an <|endoftext|> or at a line start."""
    s = tc.token_stream(domain, split)
    step = (len(s) - plen - 1) // n
    return [torch.from_numpy(s[i * step:i * step + plen].astype("int64")) for i in range(n)]


def mtp_drafts(mtp, target, seq, H, anchors, K):
    """seq [T] tokens, H [T, hidden] target post-norm hidden. For each anchor n
    (last committed token x_n) returns drafts [A, K]."""
    T = seq.shape[0]
    pos = torch.arange(T - 1).unsqueeze(0)
    logits, g, k0, v0 = mtp(target, seq[1:].unsqueeze(0), H[:-1].unsqueeze(0), pos)
    # Row n-1 of the causal pass drafts d_1 for anchor n.
    A = anchors.shape[0]
    d = logits[0, anchors - 1].argmax(-1)
    out = [d]
    h = g[0, anchors - 1].unsqueeze(1)
    kx = torch.zeros(A, 0, *k0.shape[2:])
    vx = torch.zeros(A, 0, *v0.shape[2:])
    kt = k0.expand(A, -1, -1, -1)
    vt = v0.expand(A, -1, -1, -1)
    for j in range(1, K):
        p = (anchors - 1 + j).unsqueeze(1)
        mask = tm.chain_mask(anchors, T - 1, kx.shape[1] + 1)  # true rows < n (rows 0..n-1)
        lg, h, k, v = mtp.step(target, d.unsqueeze(1), h, p, torch.cat([kt, kx], 1), torch.cat([vt, vx], 1), mask)
        kx, vx = torch.cat([kx, k], 1), torch.cat([vx, v], 1)
        d = lg[:, 0].argmax(-1)
        out.append(d)
    return torch.stack(out, 1)


def stack_drafts(stack, seq, anchors, K):
    """Autoregressive draft model with its own KV: drafts [A, K]."""
    T = seq.shape[0]
    logits, ks, vs = stack.causal(seq.unsqueeze(0))
    A = anchors.shape[0]
    d = logits[0, anchors].argmax(-1)
    out = [d]
    kx = [torch.zeros(A, 0, *k.shape[2:]) for k in ks]
    vx = [torch.zeros(A, 0, *v.shape[2:]) for v in vs]
    for j in range(1, K):
        p = (anchors + j).unsqueeze(1)
        mask = tm.chain_mask(anchors + 1, T, kx[0].shape[1] + 1)  # true positions <= n
        kp = [torch.cat([k.expand(A, -1, -1, -1), e], 1) for k, e in zip(ks, kx)]
        vp = [torch.cat([v.expand(A, -1, -1, -1), e], 1) for v, e in zip(vs, vx)]
        lg, kn, vn = stack.step(d.unsqueeze(1), p, kp, vp, mask)
        kx = [torch.cat([e, k], 1) for e, k in zip(kx, kn)]
        vx = [torch.cat([e, v], 1) for e, v in zip(vx, vn)]
        d = lg[:, 0].argmax(-1)
        out.append(d)
    return torch.stack(out, 1)


def dspark_drafts(ds, taps, seq, anchors, K):
    ctx = ds.context(taps.unsqueeze(0))
    # chained blocks for K > γ, as the engine runs that depth
    toks, _, _, conf = ds.draft(ctx, anchors.unsqueeze(0), seq[anchors].unsqueeze(0), -(-K // ds.block_size))
    return toks[0, :, :K], torch.sigmoid(conf[0, :, :K])


def score(drafts, seq, anchors, K):
    """drafts [A, K] vs the target's greedy tokens seq[n+1..n+K]."""
    idx = anchors.unsqueeze(1) + torch.arange(1, K + 1).unsqueeze(0)
    ok = (drafts == seq[idx]).int().cumprod(1)
    return ok.sum(1)  # accepted drafts per step


def drafts_of(name, dr, target, tstack, seq, anchors, K):
    """drafts [A, K] (and DSpark's confidences or None) of drafter `name` at
    each anchor of seq, the committed prefix being seq[..anchor]."""
    if name == "mtp":
        H = target.model(input_ids=seq.unsqueeze(0)).last_hidden_state[0]
        return mtp_drafts(dr, target, seq, H, anchors, K), None
    if name == "draft":
        return stack_drafts(dr, seq, anchors, K), None
    taps, _ = tstack.taps(seq.unsqueeze(0), dr.target_layer_ids)
    return dspark_drafts(dr, taps[0], seq, anchors, K)


def copy_rows(n, d, span, hi, seed=0):
    """n prose validation windows with a span of `span` random ordinary ids
    (256..hi-1: no byte tokens, no special tokens) planted at position 50 and
    written again d tokens later, as tiny_copy.span_copy_acc builds them."""
    if 50 + d + span + 1 > 1024:
        tc.die("--copy: %d tokens back does not fit a 1024-token window with a %d-token span" % (d, span))
    rng = np.random.default_rng(seed)
    x = tc.eval_windows("prose", "val", 1024, n)
    rows = []
    for i in range(n):
        r = x[i].numpy().copy()[:50 + d + span + 1]
        s = rng.integers(256, hi, size=span)
        r[50:50 + span] = s
        r[50 + d:50 + d + span] = s
        rows.append(torch.from_numpy(r.astype("int64")))
    return rows


def copy_eval(drafters, target, tstack, K, distances, hi, span=48, n=8):
    """Per-slot drafting on a copied span: the anchor is inside the repeat,
    so the next K tokens are a copy of tokens d back that nothing but the
    context predicts (random ids: no prior, no bigram). Position k = share of
    anchors whose drafts 1..k equal the repeat; the target's own argmax on
    the same rows is the ceiling (what a verify step would accept)."""
    out = {}
    for d in distances:
        rows = copy_rows(n, d, span, hi)
        a0, a1 = 50 + d + 2, 50 + d + span - K - 1   # anchors whose K next tokens lie in the repeat
        anchors = torch.arange(a0, a1)
        with torch.no_grad():
            tgt = torch.stack([target(input_ids=r.unsqueeze(0)).logits[0].argmax(-1) for r in rows])
        out[str(d)] = {"target_next_token": round(float(np.mean(
            [(tgt[i, a0:a1 + K - 1] == rows[i][a0 + 1:a1 + K]).float().mean().item() for i in range(n)])), 3)}
        for name, dr in drafters.items():
            acc = torch.cat([score(drafts_of(name, dr, target, tstack, r, anchors, K)[0], r, anchors, K) for r in rows])
            out[str(d)][name] = [round((acc >= k).float().mean().item(), 3) for k in range(1, K + 1)]
            print("copy d=%-4d %-6s per-position %s   (target's next-token copy %.3f)" % (
                d, name, " ".join("%.3f" % v for v in out[str(d)][name]), out[str(d)]["target_next_token"]), flush=True)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--depth", type=int, default=5)
    ap.add_argument("--target", default=os.path.join(tc.MODELS, "tiny"))
    ap.add_argument("--dspark", default=os.path.join(tc.MODELS, "tiny-dspark"))
    ap.add_argument("--draft", default=os.path.join(tc.MODELS, "tiny-draft"))
    ap.add_argument("--samples", type=int, default=3)
    ap.add_argument("--drafters", default="mtp,dspark,draft", help="comma-separated subset to evaluate")
    ap.add_argument("--copy", default=None, metavar="D1,D2,..",
                    help="instead: per-slot drafting on random-id spans repeated D tokens back (copy_eval)")
    ap.add_argument("--out", default=os.path.join(tc.WORK, "eval_drafters.json"))
    args = ap.parse_args()
    tc.setup_torch(0)
    K = args.depth
    tok = tc.load_tokenizer(os.path.join(args.target, "tokenizer.json"))
    target = tc.load_target(args.target)
    tstack = tm.Stack(target)
    drafters = {}
    want = args.drafters.split(",")
    if "mtp" in want and os.path.exists(os.path.join(args.target, "model.safetensors")) and \
            getattr(target.config, "num_nextn_predict_layers", 0):
        drafters["mtp"] = load_mtp(target, args.target)
    if "dspark" in want and os.path.exists(os.path.join(args.dspark, "model.safetensors")):
        drafters["dspark"] = load_dspark(args.dspark)
        if drafters["dspark"].block_size != K:
            print("note: dspark block_size %d != depth %d" % (drafters["dspark"].block_size, K))
    if "draft" in want and os.path.exists(os.path.join(args.draft, "model.safetensors")):
        drafters["draft"] = tm.Stack(tc.load_target(args.draft))
    if args.copy:
        with torch.no_grad():
            res = {"depth": K, "copy": copy_eval(drafters, target, tstack, K, [int(v) for v in args.copy.split(",")],
                                                        tok.token_to_id("<|endoftext|>"))}
        tc.write_json(args.out, res)
        print("wrote %s" % args.out)
        return
    res = {"depth": K, "prompts": args.prompts, "prompt_len": args.prompt_len, "gen": args.gen,
           "drafters": {}, "samples": {}}
    with torch.no_grad():
        for dom in tc.DOMAINS:
            seqs = []
            for i, p in enumerate(prompts_for(dom, args.prompts, args.prompt_len)):
                out = target.generate(p.unsqueeze(0), max_new_tokens=args.gen, do_sample=False,
                                      eos_token_id=None, pad_token_id=tok.token_to_id("<|endoftext|>"))
                seqs.append(out[0])
                if i < args.samples:
                    res["samples"].setdefault(dom, []).append(
                        {"prompt": tok.decode(p.tolist()), "continuation": tok.decode(out[0, len(p):].tolist())})
            for name, dr in drafters.items():
                acc = []
                confs = []
                for seq in seqs:
                    P = args.prompt_len
                    anchors = torch.arange(P - 1, seq.shape[0] - K - 1)
                    d, c = drafts_of(name, dr, target, tstack, seq, anchors, K)
                    if c is not None:
                        confs.append(c)
                    acc.append(score(d, seq, anchors, K))
                acc = torch.cat(acc)
                per_pos = [(acc >= k).float().mean().item() for k in range(1, K + 1)]
                entry = {"steps": int(acc.numel()), "per_position": per_pos,
                         "mean_accept_length": 1.0 + acc.float().mean().item(),
                         "acceptance_rate": acc.float().mean().item() / K}
                if confs:
                    entry["mean_confidence_per_slot"] = torch.cat(confs).mean(0).tolist()
                res["drafters"].setdefault(name, {})[dom] = entry
                print("%-6s %-5s accept_len %.3f per-position %s" % (
                    name, dom, entry["mean_accept_length"], " ".join("%.3f" % x for x in per_pos)), flush=True)
    tc.write_json(args.out, res)
    print("wrote %s" % args.out)


if __name__ == "__main__":
    main()
