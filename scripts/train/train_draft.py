#!/usr/bin/env python3
"""train_draft.py — distil a small Qwen3ForCausalLM draft model from the frozen target.

Owns: models/tiny-draft/{config.json, model.safetensors, generation_config.json,
tokenizer files}: a 2-layer Qwen3 with the target's width and tokenizer.
Must not: modify the target.

Start: embedding (tied), final norm and the decoder layers are copied from
the target (layers 0 and n-1: the first keeps the token-level features, the
last is the one the final norm and head were trained against). Loss: 0.3 *
CE(data) + 0.7 * CE(target's next-token distribution).

Usage: train_draft.py [--steps N] [--layers L] ...
"""
import argparse
import os
import shutil
import time

import torch
import torch.nn.functional as F

import tiny_common as tc
import tiny_copy


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=tc.SEQ_LEN)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--seed", type=int, default=4)
    ap.add_argument("--copy-frac", type=float, default=0.25, help="share of copy rows (tiny_copy.py)")
    ap.add_argument("--target", default=os.path.join(tc.MODELS, "tiny"))
    ap.add_argument("--out", default=os.path.join(tc.MODELS, "tiny-draft"))
    tiny_copy.add_args(ap)
    tc.add_precision_arg(ap)
    args = ap.parse_args()

    from transformers import Qwen3Config, Qwen3ForCausalLM
    tc.setup_torch(args.seed)
    logf = open(os.path.join(tc.WORK, "draft.log"), "a")
    target = tc.load_target(args.target)
    tcfg = target.config
    d = {k: getattr(tcfg, k) for k in tc.TARGET}
    d["num_hidden_layers"] = args.layers
    cfg = Qwen3Config(**d, bos_token_id=tcfg.bos_token_id, eos_token_id=tcfg.eos_token_id,
                      pad_token_id=tcfg.pad_token_id, attn_implementation="sdpa")
    model = Qwen3ForCausalLM(cfg)
    nt = tcfg.num_hidden_layers
    src = [0, nt - 1] if args.layers == 2 else list(range(args.layers))
    with torch.no_grad():
        model.model.embed_tokens.weight.copy_(target.model.embed_tokens.weight)
        model.model.norm.weight.copy_(target.model.norm.weight)
        for j, i in enumerate(src):
            model.model.layers[j].load_state_dict(target.model.layers[i].state_dict())
    model.train()
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0)
    ckpt = os.path.join(tc.WORK, "draft.ckpt")
    step, _ = tc.load_ckpt(ckpt, {"draft": model}, opt)
    batcher = tiny_copy.mixed(tc.Batcher("train", args.seq, args.batch, seed=args.seed), args.copy_frac, args.seed,
                              split_cue=args.copy_split_cue)
    for _ in range(step):
        batcher.next()
    tc.log("draft: %.2fM params (layers from target %s), %d steps (from %d)" % (
        sum(p.numel() for p in params) / 1e6, src, args.steps, step), logf)
    t0, n0 = time.time(), step
    while step < args.steps:
        lr = tc.lr_at(step, args.steps, args.lr, args.warmup)
        for g in opt.param_groups:
            g["lr"] = lr
        x = batcher.next()
        with tc.autocast(args.precision):
            with torch.no_grad():
                tl = target(input_ids=x[:, :-1]).logits.float()
            logits = model(input_ids=x[:, :-1]).logits.float()
        V = logits.shape[-1]
        ce = F.cross_entropy(logits.reshape(-1, V), x[:, 1:].reshape(-1))
        soft = -(F.softmax(tl, -1) * F.log_softmax(logits, -1)).sum(-1).mean()
        loss = 0.3 * ce + 0.7 * soft
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        if step % 25 == 0:
            agree = (logits.argmax(-1) == tl.argmax(-1)).float().mean().item()
            tc.log("step %d/%d loss %.4f ce %.4f agree %.3f lr %.2e %.2f s/step" % (
                step, args.steps, loss.item(), ce.item(), agree, lr, (time.time() - t0) / (step - n0)), logf)
        if step % 100 == 0 or step == args.steps:
            tc.save_ckpt(ckpt, step, {"draft": model}, opt)
    model.to(torch.bfloat16)
    model.config.torch_dtype = torch.bfloat16
    model.generation_config.do_sample = False
    model.save_pretrained(args.out, safe_serialization=True)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(args.target, f), os.path.join(args.out, f))
    tc.log("wrote %s" % args.out, logf)


if __name__ == "__main__":
    main()
