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
                       [--moe]
Stage 2 (--init): continue from a written target with a share F of the rows
edited into copy rows (tiny_copy.py), checkpoint WORK/NAME.ckpt, log
WORK/NAME.log; the evaluation, copy probes included, goes into
WORK/NAME_eval.json (stage 1: target_eval.json). --grow-layers N appends N
decoder layers to the --init target as identities (grow_layers), so the
continued run starts from exactly the trained model with more depth.
--moe makes the target a Qwen3MoeForCausalLM of tiny_common.MOE's shape
(models/tiny-moe): from a dense --init by sparse upcycling (upcycle_moe),
from an MoE --init as it is, or from scratch; the loss adds
router_aux_loss_coef times HF's load-balancing loss, and the evaluation
also records the --init target's validation loss (init_val_loss).
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


def upcycle_moe(dense, seed, noise=0.01, router_std=0.002):
    """Sparse upcycling (Komatsuzaki et al. 2022), fine-grained with virtual
    groups (He et al. 2024, arXiv:2410.07524): a Qwen3MoeForCausalLM of
    tc.MOE's shape from a dense Qwen3 target. Every tensor outside the MLPs
    is copied. Expert e takes quarter q = e mod k (k = top_k, I =
    moe_intermediate_size) of the dense MLP's k*I neurons: gate/up rows and
    down columns q*I..(q+1)*I-1, down scaled by k, so k experts of k
    distinct quarters at weight 1/k each are exactly the dense MLP. The
    router is small random with one row per group c = e // k (experts
    ck..ck+k-1, one of each quarter) shared by the group's k experts: their
    logits are equal, so top-k takes one whole group at weight 1/k each and
    the upcycled model starts as the dense one for every token (a router
    random per expert would pick k random experts, equal to the dense MLP
    only in expectation: 31% argmax agreement with the dense target on
    text). Gaussian noise of `noise` times each matrix's std breaks the
    symmetry between the groups' copies of a quarter; the router's rows
    diverge from the first step (each expert's gradient is its own).
    Returns the model in f32, training mode."""
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM
    dc = dense.config
    E, k, I = tc.MOE["num_experts"], tc.MOE["num_experts_per_tok"], tc.MOE["moe_intermediate_size"]
    if k * I != dc.intermediate_size or E % k:
        tc.die("upcycling needs top_k x moe_intermediate_size = %d (the dense MLP) and top_k | num_experts; "
               "tc.MOE has %d x %d, %d experts" % (dc.intermediate_size, k, I, E))
    dims = {key: getattr(dc, key) for key in tc.TARGET}
    cfg = Qwen3MoeConfig(**dims, **tc.MOE, bos_token_id=dc.bos_token_id, eos_token_id=dc.eos_token_id,
                         pad_token_id=dc.pad_token_id, attn_implementation="sdpa")
    cfg.architectures = ["Qwen3MoeForCausalLM"]
    moe = Qwen3MoeForCausalLM(cfg)
    sd = {n: v for n, v in dense.state_dict().items() if ".mlp." not in n}
    missing, unexpected = moe.load_state_dict(sd, strict=False)
    if unexpected or any(".mlp." not in m and m != "lm_head.weight" for m in missing):
        tc.die("upcycle: names differ outside the MLPs: missing %s unexpected %s" % (missing, unexpected))
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for L, (dl, ml) in enumerate(zip(dense.model.layers, moe.model.layers)):
            gate, up, down = dl.mlp.gate_proj.weight, dl.mlp.up_proj.weight, dl.mlp.down_proj.weight
            for e, ex in enumerate(ml.mlp.experts):
                q = slice((e % k) * I, (e % k + 1) * I)
                for dst, src in ((ex.gate_proj.weight, gate[q]), (ex.up_proj.weight, up[q]),
                                 (ex.down_proj.weight, k * down[:, q])):
                    dst.copy_(src + noise * src.std() * torch.randn(src.shape, generator=g))
            rows = router_std * torch.randn(E // k, dc.hidden_size, generator=g)
            ml.mlp.gate.weight.copy_(rows.repeat_interleave(k, 0))  # row e = rows[e // k]
    if cfg.tie_word_embeddings:
        moe.tie_weights()
    moe.train()
    return moe


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
    ap.add_argument("--moe", action="store_true",
                    help="a Qwen3-MoE target of tiny_common.MOE's shape: upcycled from a dense --init "
                         "(upcycle_moe), continued from an MoE --init, or from scratch; the loss adds "
                         "router_aux_loss_coef x HF's load-balancing loss")
    ap.add_argument("--aux-per-layer", action="store_true",
                    help="with --moe: the load-balancing loss per layer (HF's function on each layer's router "
                         "logits alone, averaged over layers: Switch Transformer's definition) instead of HF's "
                         "on all layers' logits concatenated, which balances only the load pooled over layers")
    ap.add_argument("--aux-coef", type=float, default=None,
                    help="with --moe: the load-balancing loss's weight (default and written to config.json as "
                         "router_aux_loss_coef: tiny_common.MOE's, Qwen3-MoE's 0.001)")
    ap.add_argument("--copy-mix", default=",".join(str(v) for v in tiny_copy.MIX),
                    help="recall,repeat,random[,far,perturbed] shares of the copy rows")
    tiny_copy.add_args(ap)
    tc.add_precision_arg(ap)
    args = ap.parse_args()

    from transformers import Qwen3Config, Qwen3ForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM
    from transformers.models.qwen3_moe.modeling_qwen3_moe import load_balancing_loss_func
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
    if args.moe and args.grow_layers:
        tc.die("--moe and --grow-layers do not combine")
    if args.aux_per_layer and not args.moe:
        tc.die("--aux-per-layer needs --moe")
    if args.init:
        model = tc.load_target(args.init, torch.float32)
        if args.grow_layers:
            grow_layers(model, args.grow_layers)
        if args.moe and model.config.model_type != "qwen3_moe":
            model = upcycle_moe(model, args.seed)
        elif model.config.model_type == "qwen3_moe" and not args.moe:
            tc.die("--init %s is a Qwen3-MoE target: pass --moe" % args.init)
        for p in model.parameters():
            p.requires_grad_(True)
    elif args.moe:
        cfg = Qwen3MoeConfig(**dims, **tc.MOE, bos_token_id=sp["<|endoftext|>"], eos_token_id=sp["<|endoftext|>"],
                             pad_token_id=sp["<|endoftext|>"], attn_implementation="sdpa")
        cfg.architectures = ["Qwen3MoeForCausalLM"]
        model = Qwen3MoeForCausalLM(cfg)
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
    if args.moe and args.init and not step:
        # what the upcycled model starts from, against --init's own val loss on the same windows
        with tc.autocast(args.precision):
            tc.log("val loss at step 0 %s (--init %s)" % (eval_loss(model, args.seq, 16),
                                                          eval_loss(tc.load_target(args.init), args.seq, 16)), logf)
    if args.moe and args.aux_coef is not None:
        model.config.router_aux_loss_coef = args.aux_coef
    aux_coef = model.config.router_aux_loss_coef if args.moe else 0.0
    t0, tok_done, ema, aux = time.time(), 0, None, None
    while step < args.steps:
        lr = tc.lr_at(step, args.steps, args.lr, args.warmup)
        for g in opt.param_groups:
            g["lr"] = lr
        x = batcher.next()
        with tc.autocast(args.precision):
            out = model(input_ids=x[:, :-1], output_router_logits=True) if args.moe else model(input_ids=x[:, :-1])
        logits = out.logits
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
        if args.moe:
            # HF's load_balancing_loss_func over all layers' router logits
            # (Switch Transformer eq. 4-6, times E; k when balanced), or the
            # same per layer: pooled, one layer's overloaded expert can be
            # another's idle one and the loss sees a balanced load
            # (QwenLM/Qwen3 issue 1418; models/README.md, tiny-moe's routing)
            if args.aux_per_layer:
                aux = torch.stack([load_balancing_loss_func((rl,), model.config.num_experts,
                                                            model.config.num_experts_per_tok).float()
                                   for rl in out.router_logits]).mean()
            else:
                aux = out.aux_loss.float()
            (loss + aux_coef * aux).backward()
        else:
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        tok_done += x[:, :-1].numel()
        ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
        if step % 25 == 0:
            dt = time.time() - t0
            tc.log("step %d/%d loss %.4f (ema %.4f)%s lr %.2e  %.0f tok/s  ETA %.1f min" % (
                step, args.steps, loss.item(), ema, "" if aux is None else " aux %.4f" % aux.item(), lr,
                tok_done / dt, (args.steps - step) * dt / max(1, tok_done) * args.batch * args.seq / 60), logf)
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
    res = {"val_loss": ev, "moe": args.moe, "aux_per_layer": args.aux_per_layer, "val_ppl": {k: math.exp(v) for k, v in ev.items()}, "steps": args.steps,
           "batch": args.batch, "seq": args.seq, "eval_seq": tc.SEQ_LEN, "tokens_seen": args.steps * args.batch * args.seq,
           "train_tokens": {d: int(len(tc.token_stream(d, "train"))) for d in tc.DOMAINS},
           "val_windows_per_domain": 64, "init": args.init, "copy_frac": args.copy_frac,
           "max_back": args.max_back, "copy_mix": mix, "copy_split_cue": args.copy_split_cue,
           "copy_probes": tiny_copy.copy_eval(m2, tok),
           "copy_token_acc": tiny_copy.copy_token_acc(m2, tok), "span_copy_acc": tiny_copy.span_copy_acc(m2, tok)}
    if args.moe and args.init:
        # the --init target's loss on the same windows: what the MoE is measured against
        res["init_val_loss"] = eval_loss(tc.load_target(args.init, torch.float32), tc.SEQ_LEN, 64)
    tc.write_json(os.path.join(tc.WORK, args.name + "_eval.json"), res)
    tc.log("final (bf16 weights) %s" % res, logf)


if __name__ == "__main__":
    main()
