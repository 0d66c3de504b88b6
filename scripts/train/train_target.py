#!/usr/bin/env python3
"""train_target.py — train the bundled target, an HF Qwen3ForCausalLM, on the corpus.

Owns: the target's training loop (AdamW, warmup + cosine LR, bf16 autocast on
CPU with f32 master weights, grad clip), resumable checkpoints in
WORK/target.ckpt, and writing models/tiny/{config.json, model.safetensors,
generation_config.json} in bf16, then the validation loss per domain of the
written (bf16) weights to WORK/target_eval.json.
Must not: touch the tokenizer files (train_tokenizer.py writes them) or the
MTP keys (train_mtp.py appends them to model.safetensors afterwards).

Usage: train_target.py [--steps N] [--batch B] [--seq T] [--lr LR] [--seed S] [--layers L] [--heads Q,KV]
                       [--init DIR [--grow-layers N]] [--copy-frac F --max-back D --copy-mix R,P,X] [--name NAME]
Stage 2 (--init): continue from a written target with a share F of the rows
edited into copy rows (tiny_copy.py), checkpoint WORK/NAME.ckpt, log
WORK/NAME.log; the evaluation, copy probes included, goes into
WORK/NAME_eval.json (stage 1: target_eval.json). --grow-layers N appends N
decoder layers to the --init target as identities (grow_layers), so the
continued run starts from exactly the trained model with more depth.
"""
import argparse
import os
import time

import torch

import tiny_common as tc
import tiny_copy


def eval_loss(model, seq_len, n, split="val"):
    out = {}
    model.eval()
    with torch.no_grad():
        for dom in tc.DOMAINS:
            x = tc.eval_windows(dom, split, seq_len, n)
            tot, cnt = 0.0, 0
            for i in range(0, n, 8):
                b = x[i:i + 8]
                logits = model(input_ids=b[:, :-1]).logits.float()
                loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), b[:, 1:].reshape(-1),
                                                         reduction="sum")
                tot += loss.item()
                cnt += b[:, 1:].numel()
            out[dom] = tot / cnt
    model.train()
    return out


def grow_layers(model, n):
    """Append n decoder layers that start as identities: copies of the last
    layer (their projections start meaningful) with o_proj and down_proj
    zeroed, so each adds nothing to the residual stream until training
    moves those two (their gradients are non-zero: the inputs are). The
    model's outputs are unchanged; only the depth grows."""
    import copy
    with torch.no_grad():
        for _ in range(n):
            layer = copy.deepcopy(model.model.layers[-1])
            torch.nn.init.zeros_(layer.self_attn.o_proj.weight)
            torch.nn.init.zeros_(layer.mlp.down_proj.weight)
            layer.self_attn.layer_idx = len(model.model.layers)
            model.model.layers.append(layer)
    model.config.num_hidden_layers = len(model.model.layers)
    model.config.layer_types = ["full_attention"] * len(model.model.layers)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=2200)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=tc.SEQ_LEN)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=os.path.join(tc.MODELS, "tiny"))
    ap.add_argument("--init", default=None, help="continue from this written target (stage 2)")
    ap.add_argument("--copy-frac", type=float, default=0.0)
    ap.add_argument("--max-back", type=int, default=900)
    ap.add_argument("--name", default="target")
    ap.add_argument("--grow-layers", type=int, default=0,
                    help="with --init: append this many identity-initialised decoder layers")
    ap.add_argument("--layers", type=int, default=tc.TARGET["num_hidden_layers"],
                    help="decoder layers of a target trained from scratch (without --init)")
    ap.add_argument("--heads", default=None, metavar="Q,KV",
                    help="query and key/value heads of a target trained from scratch; head_dim = hidden / Q "
                         "(default: the bundled %d,%d)" % (tc.TARGET["num_attention_heads"],
                                                          tc.TARGET["num_key_value_heads"]))
    ap.add_argument("--copy-mix", default=",".join(str(v) for v in tiny_copy.MIX),
                    help="recall,repeat,random[,far,perturbed] shares of the copy rows")
    tiny_copy.add_args(ap)
    tc.add_precision_arg(ap)
    args = ap.parse_args()

    from transformers import Qwen3Config, Qwen3ForCausalLM
    tc.setup_torch(args.seed)
    os.makedirs(tc.WORK, exist_ok=True)
    logf = open(os.path.join(tc.WORK, args.name + ".log"), "a")
    tok = tc.load_tokenizer()  # models/tiny/tokenizer.json (train_tokenizer.py), whatever --out is
    sp = tc.special_ids(tok)
    if tok.get_vocab_size() != tc.TARGET["vocab_size"]:
        tc.die("tokenizer vocab %d != %d" % (tok.get_vocab_size(), tc.TARGET["vocab_size"]))
    dims = dict(tc.TARGET, num_hidden_layers=args.layers)
    if args.heads:
        try:
            q, kv = (int(v) for v in args.heads.split(","))
        except ValueError:
            tc.die("--heads wants Q,KV (two integers), got %s" % args.heads)
        if args.init or q < 1 or kv < 1 or q % kv or dims["hidden_size"] % q:
            tc.die("--heads %s: only without --init, KV dividing Q and Q dividing hidden %d" % (
                args.heads, dims["hidden_size"]))
        dims.update(num_attention_heads=q, num_key_value_heads=kv, head_dim=dims["hidden_size"] // q)
    cfg = Qwen3Config(**dims, bos_token_id=sp["<|endoftext|>"], eos_token_id=sp["<|endoftext|>"],
                      pad_token_id=sp["<|endoftext|>"], attn_implementation="sdpa")
    if args.grow_layers and not args.init:
        tc.die("--grow-layers needs --init (the target to grow)")
    if args.init:
        model = tc.load_target(args.init, torch.float32)
        if args.grow_layers:
            grow_layers(model, args.grow_layers)
        for p in model.parameters():
            p.requires_grad_(True)
    else:
        model = Qwen3ForCausalLM(cfg)
    model.train()
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    ckpt = os.path.join(tc.WORK, args.name + ".ckpt")
    step, extra = tc.load_ckpt(ckpt, {"model": model}, opt)
    mix = tuple(float(v) for v in args.copy_mix.split(","))
    if len(mix) == 3:  # stage 2's form
        mix += (0.0, 0.0)
    if len(mix) != 5 or min(mix) < 0 or sum(mix) <= 0:
        tc.die("--copy-mix wants non-negative shares recall,repeat,random[,far,perturbed], got %s" % args.copy_mix)
    batcher = tiny_copy.mixed(tc.Batcher("train", args.seq, args.batch, seed=args.seed), args.copy_frac, args.seed,
                              args.max_back, mix, split_cue=args.copy_split_cue)
    if step:  # replay the sampler so a resumed run sees the same batches
        for _ in range(step):
            batcher.next()
        torch.set_rng_state(extra["torch_rng"])
        tc.log("resumed at step %d" % step, logf)
    tc.log("%s: %.2fM params, %d steps x %d x %d tokens, copy rows %.2f (init %s)" % (
        args.name, sum(p.numel() for p in model.parameters()) / 1e6, args.steps, args.batch, args.seq,
        args.copy_frac, args.init), logf)
    t0, tok_done, ema = time.time(), 0, None
    while step < args.steps:
        lr = tc.lr_at(step, args.steps, args.lr, args.warmup)
        for g in opt.param_groups:
            g["lr"] = lr
        x = batcher.next()
        with tc.autocast(args.precision):
            logits = model(input_ids=x[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        tok_done += x[:, :-1].numel()
        ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
        if step % 25 == 0:
            dt = time.time() - t0
            tc.log("step %d/%d loss %.4f (ema %.4f) lr %.2e  %.0f tok/s  ETA %.1f min" % (
                step, args.steps, loss.item(), ema, lr, tok_done / dt, (args.steps - step) * dt / max(1, tok_done)
                * args.batch * args.seq / 60), logf)
        if step % 250 == 0 or step == args.steps:
            tc.save_ckpt(ckpt, step, {"model": model}, opt, {"torch_rng": torch.get_rng_state()})
        if step % 500 == 0 and step < args.steps:
            with tc.autocast(args.precision):
                tc.log("val loss %s" % eval_loss(model, args.seq, 16), logf)

    # Write the bf16 artefact and measure what is shipped.
    model.to(torch.bfloat16)
    model.config.torch_dtype = torch.bfloat16
    model.generation_config.do_sample = False
    model.save_pretrained(args.out, safe_serialization=True)
    m2 = tc.load_target(args.out, torch.float32)
    ev = eval_loss(m2, tc.SEQ_LEN, 64)  # 512-token windows: comparable across stages
    import math
    res = {"val_loss": ev, "val_ppl": {k: math.exp(v) for k, v in ev.items()}, "steps": args.steps,
           "batch": args.batch, "seq": args.seq, "eval_seq": tc.SEQ_LEN, "tokens_seen": args.steps * args.batch * args.seq,
           "train_tokens": {d: int(len(tc.token_stream(d, "train"))) for d in tc.DOMAINS},
           "val_windows_per_domain": 64, "init": args.init, "copy_frac": args.copy_frac,
           "max_back": args.max_back, "copy_mix": mix, "copy_split_cue": args.copy_split_cue,
           "copy_probes": tiny_copy.copy_eval(m2, tok),
           "copy_token_acc": tiny_copy.copy_token_acc(m2, tok), "span_copy_acc": tiny_copy.span_copy_acc(m2, tok)}
    tc.write_json(os.path.join(tc.WORK, args.name + "_eval.json"), res)
    tc.log("final (bf16 weights) %s" % res, logf)


if __name__ == "__main__":
    main()
