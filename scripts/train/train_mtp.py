#!/usr/bin/env python3
"""train_mtp.py — train the target's DeepSeek-V3-style MTP module on the frozen target.

Owns: the MTP training loop and writing the module into
models/tiny/model.safetensors under DeepSeek-V3 names
(model.layers.{N}.enorm/hnorm/eh_proj + the Qwen3 block's names, N =
num_hidden_layers, plus the module's own trained output norm
model.layers.{N}.shared_head.norm.weight, initialised from the target's
model.norm; the lm_head is the target's), and `num_nextn_predict_layers: 1`
in models/tiny/config.json.
Must not: change any target tensor (they are re-written bit-identically).

Loss per row i (predicting t_{i+2}): 0.3 * CE(data) + 0.7 * CE(target's
distribution for t_{i+2}), i.e. mostly distillation, because greedy
acceptance asks the module to agree with the target, not with the corpus.
The block is initialised from the target's last decoder layer; its MLP stays
dense (DeepSeek-V3's MTP block is a decoder layer of the target's kind, but
the engine and HF need only the names), so on a Qwen3-MoE target
(models/tiny-moe) the block's MLP starts as the last layer's experts merged
back into one dense MLP (dense_from_experts, the inverse of
train_target.upcycle_moe). A share
--copy-frac of the rows are copy rows (tiny_copy.py), as in the target's
stage 2, so the module learns to follow the target's copies.

Usage: train_mtp.py [--steps N] [--batch B] [--seq T] [--lr LR] [--seed S] [--copy-frac F]
                    [--target DIR] [--name NAME]   (log WORK/NAME.log, checkpoint WORK/NAME.ckpt)
"""
import argparse
import json
import os
import time

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

import tiny_common as tc
import tiny_copy
import tiny_modules as tm


def mtp_loss(mtp, target, x):
    """x [B, T+1] tokens. Returns (loss, data CE, target-agreement top1)."""
    T = x.shape[1] - 1
    with torch.no_grad():
        H = target.model(input_ids=x[:, :T]).last_hidden_state  # post final norm
        tl = target.lm_head(H[:, 1:T]).float()  # target's prediction of t_{i+2}
    B = x.shape[0]
    pos = torch.arange(T - 1).unsqueeze(0).expand(B, -1)
    logits, _, _, _ = mtp(target, x[:, 1:T], H[:, :T - 1], pos)
    logits = logits.float()
    V = logits.shape[-1]
    ce = F.cross_entropy(logits.reshape(-1, V), x[:, 2:T + 1].reshape(-1))
    soft = -(F.softmax(tl, -1) * F.log_softmax(logits, -1)).sum(-1).mean()
    agree = (logits.argmax(-1) == tl.argmax(-1)).float().mean()
    return 0.3 * ce + 0.7 * soft, ce, agree


def dense_from_experts(moe_mlp, cfg):
    """{gate,up,down}_proj weights of one dense MLP of cfg.intermediate_size =
    k x moe_intermediate_size neurons from a Qwen3-MoE sparse block: quarter
    q (neurons q*I..(q+1)*I-1) is the mean of the experts e with e mod k = q
    (gate/up rows; down columns divided by k). On an upcycled block
    (train_target.upcycle_moe) whose experts have not moved, this is the
    dense MLP it came from, up to the noise; on any block it is a dense MLP
    of the right shape whose output is the experts' average contribution."""
    k, I = cfg.num_experts_per_tok, cfg.moe_intermediate_size
    if k * I != cfg.intermediate_size or cfg.num_experts % k:
        tc.die("MoE target: intermediate_size %d != num_experts_per_tok %d x moe_intermediate_size %d (or k does "
               "not divide %d experts): no dense MLP for the MTP block to start from" % (
                   cfg.intermediate_size, k, I, cfg.num_experts))
    ex = moe_mlp.experts
    out = {}
    for name, rows in (("gate_proj", True), ("up_proj", True), ("down_proj", False)):
        parts = []
        for q in range(k):
            w = torch.stack([getattr(ex[e], name).weight for e in range(q, cfg.num_experts, k)]).mean(0)
            parts.append(w if rows else w / k)
        out["mlp.%s.weight" % name] = torch.cat(parts, 0 if rows else 1)
    return out


def init_block(mtp, target):
    """The MTP block from the target's last decoder layer (its MLP merged to
    a dense one when that layer is sparse)."""
    cfg = target.config
    last = target.model.layers[cfg.num_hidden_layers - 1]
    sd = {n: v for n, v in last.state_dict().items() if not n.startswith("mlp.")}
    if getattr(cfg, "model_type", "") == "qwen3_moe" and hasattr(last.mlp, "experts"):
        sd.update(dense_from_experts(last.mlp, cfg))
    else:
        sd.update({n: v for n, v in last.state_dict().items() if n.startswith("mlp.")})
    mtp.block.load_state_dict(sd)


def write_mtp(mtp, target_dir, n_layers):
    path = os.path.join(target_dir, "model.safetensors")
    sd = load_file(path)
    pre = "model.layers.%d." % n_layers
    sd = {k: v for k, v in sd.items() if not k.startswith(pre)}
    for k, v in tc.bf16_state(mtp.state_dict_ds(n_layers)).items():
        sd[k] = v
    save_file(sd, path, metadata={"format": "pt"})
    cfg_path = os.path.join(target_dir, "config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    cfg["num_nextn_predict_layers"] = 1
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=tc.SEQ_LEN)
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--seed", type=int, default=2)
    ap.add_argument("--copy-frac", type=float, default=0.25)
    ap.add_argument("--target", default=os.path.join(tc.MODELS, "tiny"))
    ap.add_argument("--name", default="mtp", help="log WORK/NAME.log, checkpoint WORK/NAME.ckpt")
    tiny_copy.add_args(ap)
    tc.add_precision_arg(ap)
    args = ap.parse_args()

    tc.setup_torch(args.seed)
    logf = open(os.path.join(tc.WORK, args.name + ".log"), "a")
    target = tc.load_target(args.target)
    cfg = target.config
    mtp = tm.MTP(cfg)
    init_block(mtp, target)
    mtp.head_norm.load_state_dict(target.model.norm.state_dict())
    params = [p for n, p in mtp.named_parameters()]
    opt = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0)
    ckpt = os.path.join(tc.WORK, args.name + ".ckpt")
    step, extra = tc.load_ckpt(ckpt, {"mtp": mtp}, opt)
    batcher = tiny_copy.mixed(tc.Batcher("train", args.seq, args.batch, seed=args.seed), args.copy_frac, args.seed,
                              split_cue=args.copy_split_cue)
    for _ in range(step):
        batcher.next()
    tc.log("%s: %.2fM params, %d steps (from %d), target %s" % (
        args.name, sum(p.numel() for p in params) / 1e6, args.steps, step, args.target), logf)
    t0, n0 = time.time(), step
    while step < args.steps:
        lr = tc.lr_at(step, args.steps, args.lr, args.warmup)
        for g in opt.param_groups:
            g["lr"] = lr
        x = batcher.next()
        with tc.autocast(args.precision):
            loss, ce, agree = mtp_loss(mtp, target, x)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        if step % 25 == 0:
            dt = time.time() - t0
            tc.log("step %d/%d loss %.4f ce %.4f agree %.3f lr %.2e  %.2f s/step" % (
                step, args.steps, loss.item(), ce.item(), agree.item(), lr, dt / (step - n0)), logf)
        if step % 100 == 0 or step == args.steps:
            tc.save_ckpt(ckpt, step, {"mtp": mtp}, opt)
    write_mtp(mtp, args.target, cfg.num_hidden_layers)
    # The HF class must still load the file (it ignores the MTP keys).
    t2 = tc.load_target(args.target)
    same = all(torch.equal(a, b) for a, b in zip(t2.state_dict().values(), target.state_dict().values()))
    tc.log("wrote MTP into %s; HF reload ok, target tensors unchanged: %s" % (args.target, same), logf)
    if not same:
        tc.die("target tensors changed while writing the MTP module")


if __name__ == "__main__":
    main()
