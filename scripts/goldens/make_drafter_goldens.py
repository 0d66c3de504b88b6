#!/usr/bin/env python3
"""make_drafter_goldens.py — MTP and DSpark forward goldens for the C drafters' tests.

Owns: tests/golden/mtp/{golden.safetensors,golden.json} and
tests/golden/dspark/{golden.safetensors,golden.json}, computed by the
PyTorch reference forwards in tiny_modules.py from the committed bf16
weights (models/tiny, models/tiny-dspark), in f32.
Must not: exceed 1 MB per golden file; need anything at test time.

Format: safetensors with F32 tensors only (the C reader takes F32/BF16/F16;
token ids are stored as exact F32 integers). golden.json lists the contexts
and says what every tensor means. Contexts come from the validation split,
one of them longer than 128 tokens so RoPE positions past 128 are covered.

Usage: make_drafter_goldens.py [--out tests/golden]
"""
import argparse
import json
import os
import sys

import torch
from safetensors.torch import save_file

# The reference forwards and the drafters' evaluation live with the training
# code, in scripts/train/.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "train"))
import eval_drafters as ev  # noqa: E402
import tiny_common as tc  # noqa: E402
import tiny_modules as tm  # noqa: E402

K = 5


def contexts(lengths):
    """(name, tokens) pairs: code and prose validation text, evenly placed."""
    out = []
    for i, n in enumerate(lengths):
        dom = tc.DOMAINS[i % 2]
        s = tc.token_stream(dom, "val")
        off = (len(s) // (len(lengths) + 1)) * (i + 1)
        out.append(("c%d" % i, dom, torch.from_numpy(s[off:off + n].astype("int64"))))
    return out


def f32(x):
    return x.detach().float().contiguous()


def mtp_golden(target, outdir, lengths, args):
    mtp = ev.load_mtp(target, args.target)
    L = target.config.num_hidden_layers
    tensors, doc = {}, {"contexts": []}
    with torch.no_grad():
        for name, dom, x in contexts(lengths):
            n = x.shape[0] - 1  # x = x_0..x_n, x_n the last committed token
            H = target.model(input_ids=x.unsqueeze(0)).last_hidden_state[0]
            pos = torch.arange(n).unsqueeze(0)
            logits, g, _, _ = mtp(target, x[1:].unsqueeze(0), H[:n].unsqueeze(0), pos)
            rows = sorted({0, n // 2, n - 1} | ({127, 128} & set(range(n))))
            drafts = ev.mtp_drafts(mtp, target, x, H, torch.tensor([n]), K)[0]
            # Chained logits, recomputed step by step (same path as mtp_drafts, kept here for the values).
            chain = [logits[0, n - 1]]
            nxt, hs = list(x[1:].tolist()), [H[i] for i in range(n)]
            for j in range(1, K):
                nxt.append(int(drafts[j - 1]))
                hs.append(g[0, -1] if j == 1 else g2[0, -1])
                lg2, g2, _, _ = mtp(target, torch.tensor(nxt).unsqueeze(0), torch.stack(hs).unsqueeze(0),
                                    torch.arange(len(nxt)).unsqueeze(0))
                chain.append(lg2[0, -1])
            chain = torch.stack(chain)
            if not torch.equal(chain.argmax(-1), drafts):
                raise SystemExit("mtp golden: chained recompute disagrees with mtp_drafts")
            tensors.update({
                name + ".tokens": f32(x), name + ".h": f32(H), name + ".rows": f32(torch.tensor(rows)),
                name + ".row_logits": f32(logits[0, rows]), name + ".draft_tokens": f32(drafts),
                name + ".draft_logits": f32(chain)})
            doc["contexts"].append({"name": name, "domain": dom, "n_tokens": n + 1, "rows": rows,
                                    "draft_tokens": drafts.tolist()})
    doc.update({
        "model": "models/tiny (MTP module model.layers.%d.*)" % L,
        "depth": K,
        "tensors": {
            "<c>.tokens": "[n+1] x_0..x_n, x_n the last committed token",
            "<c>.h": "[n+1, hidden] target hidden states AFTER the final norm (the lm_head input), f32",
            "<c>.rows": "[r] MTP row indices i sampled from the causal pass",
            "<c>.row_logits": "[r, vocab] MTP logits of row i: input [enorm(Emb(x_{i+1})); hnorm(h_i)], "
                              "RoPE position i, causal over rows 0..i; predicts x_{i+2}",
            "<c>.draft_tokens": "[depth] greedy chained drafts d_1..d_depth for the step after x_n: "
                                "d_1 = argmax of row n-1; row n-1+j takes [Emb(d_j); g_{n-2+j}] where g is the "
                                "module's own output after the target's final norm, at RoPE position n-1+j, "
                                "attending rows 0..n-1 and the earlier chained rows",
            "<c>.draft_logits": "[depth, vocab] logits that produced each draft token"},
        "command": "scripts/goldens/make_drafter_goldens.py",
        "precision": "f32 arithmetic from the committed bf16 weights; compare with a tolerance (~1e-3 relative)"})
    save_file(tensors, os.path.join(outdir, "golden.safetensors"), metadata={"format": "pt"})
    tc.write_json(os.path.join(outdir, "golden.json"), doc)


def dspark_golden(target, outdir, lengths, args):
    ds = ev.load_dspark(args.dspark)
    stack = tm.Stack(target)
    g = ds.block_size
    tensors, doc = {}, {"contexts": []}
    with torch.no_grad():
        for ci, (name, dom, x) in enumerate(contexts(lengths)):
            a = x.shape[0] - 1  # anchor position = last committed token
            taps, _ = stack.taps(x.unsqueeze(0), ds.target_layer_ids)
            ctx = ds.context(taps)
            toks, base, cor, conf = ds.draft(ctx, torch.tensor([[a]]), x[a].view(1, 1))
            # Independent check: the same block alone with the context cut at a.
            ctx2 = ds.context(taps[:, :a])
            bids, bpos = ds.block_inputs(x[a].view(1, 1), torch.tensor([[a]]))
            hn = ds.backbone(bids, bpos, ctx2, torch.ones(1, g, a + g, dtype=torch.bool))
            if (ds.lm_head(hn)[0] - base[0, 0]).abs().max() > 1e-3:
                raise SystemExit("dspark golden: masked and truncated forwards disagree")
            tensors.update({
                name + ".tokens": f32(x), name + ".taps": f32(taps[0, :a]),
                name + ".draft_tokens": f32(toks[0, 0]), name + ".corrected_logits": f32(cor[0, 0]),
                name + ".confidence": f32(torch.sigmoid(conf[0, 0]))})
            if ci == len(lengths) - 1:
                tensors[name + ".base_logits"] = f32(base[0, 0])
            doc["contexts"].append({"name": name, "domain": dom, "n_tokens": a + 1, "anchor_position": a,
                                    "draft_tokens": toks[0, 0].tolist(),
                                    "has_base_logits": ci == len(lengths) - 1})
    doc.update({
        "model": "models/tiny-dspark with target models/tiny",
        "block_size": g, "target_layer_ids": ds.target_layer_ids, "mask_token_id": ds.mask_token_id,
        "tensors": {
            "<c>.tokens": "[a+1] x_0..x_a; the anchor is x_a at position a",
            "<c>.taps": "[a, n_taps*hidden] concat of the outputs of target decoder layers target_layer_ids "
                        "(layer L = output of decoder layer L, before any final norm) at positions 0..a-1",
            "<c>.draft_tokens": "[block_size] greedy drafts; slot k predicts the token at position a+k+1",
            "<c>.corrected_logits": "[block_size, vocab] U_k + W2(W1[x_{k-1}]), x_0 = anchor, x_k = draft k",
            "<c>.confidence": "[block_size] sigmoid(proj([norm(h_k); W1[x_{k-1}]]) + b)",
            "<c>.base_logits": "[block_size, vocab] U_k = lm_head(norm(h_k)) (last context only)"},
        "command": "scripts/goldens/make_drafter_goldens.py",
        "precision": "f32 arithmetic from the committed bf16 weights; compare with a tolerance (~1e-3 relative)"})
    save_file(tensors, os.path.join(outdir, "golden.safetensors"), metadata={"format": "pt"})
    tc.write_json(os.path.join(outdir, "golden.json"), doc)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(tc.ROOT, "tests", "golden"))
    ap.add_argument("--target", default=os.path.join(tc.MODELS, "tiny"))
    ap.add_argument("--dspark", default=os.path.join(tc.MODELS, "tiny-dspark"))
    args = ap.parse_args()
    tc.setup_torch(0)
    target = tc.load_target(args.target)
    for sub, fn, lengths in (("mtp", mtp_golden, (24, 90, 160)), ("dspark", dspark_golden, (20, 60, 140))):
        d = os.path.join(args.out, sub)
        os.makedirs(d, exist_ok=True)
        fn(target, d, lengths, args)
        size = os.path.getsize(os.path.join(d, "golden.safetensors"))
        print("%s: %d bytes" % (d, size))
        if size > 1 << 20:
            raise SystemExit("%s golden is over 1 MB" % sub)


if __name__ == "__main__":
    main()
