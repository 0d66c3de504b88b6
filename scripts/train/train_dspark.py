#!/usr/bin/env python3
"""train_dspark.py — train the DSpark drafter (DeepSpec Qwen3 layout) on the frozen target.

Owns: the DSpark config (DeepSpec's field names), its training loop with
DeepSpec's loss, and models/tiny-dspark/{config.json, model.safetensors,
tokenizer files}. Checkpoint WORK/NAME.ckpt, log WORK/NAME.log (--name,
default dspark).
Must not: modify the target.

Loss (DeepSpec compute_dspark_loss): per block slot k with weight
exp(-k / loss_decay_gamma):
  ce_alpha * CE(corrected logits, true token a+k+1)
+ l1_alpha * ||softmax(corrected) - softmax(target logits at a+k)||_1
+ conf_alpha * BCE(confidence logit, 1 - 0.5 * ||p_d - p_t||_1 (detached))
each term normalised by the sum of weights. The Markov head is teacher-forced
with the true previous tokens (x_0 = anchor), as in DeepSpec.

Chained blocks (--chain-blocks n, a fine-tune from --init; not DeepSpec's,
which trains one block): at depth K > γ the engine chains blocks
(spec/drafter_dspark.h); with n > 1 each anchor also gets blocks 1..n-1,
block b = [x_{a+bγ}, MASK x (γ-1)] at positions a+bγ.., attending to the
ctx < a, to blocks 0..b of its anchor (tiny_modules.DSpark.block_mask) and
predicting x_{a+bγ+1..a+(b+1)γ}. Its slots continue the decay (slot
bγ+k weighs exp(-(bγ+k)/loss_decay_gamma)) and the same three terms.

Initialisation (a choice for a short CPU budget, not DeepSpec's): draft
layer j starts from target layer (n_target - n_draft + j); embed_tokens and
lm_head are frozen copies of the target's tied embedding; norm starts from
the target's final norm; markov_w2 and the confidence head start at zero.

Usage: train_dspark.py [--steps N] [--anchors A] [--layers L] [--rank R] ...
       train_dspark.py --init DIR --chain-blocks 2 --name NAME [--steps N] ...
       train_dspark.py --init DIR --grow --layers 3 ...   (append draft layers to a trained drafter)
"""
import argparse
import copy
import json
import os
import shutil
import time

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

import tiny_common as tc
import tiny_copy
import tiny_modules as tm


def dspark_config(tcfg, args, mask_id):
    cfg = copy.deepcopy(tcfg)
    cfg.architectures = ["Qwen3DSparkModel"]
    cfg.num_target_layers = int(tcfg.num_hidden_layers)
    cfg.num_hidden_layers = args.layers
    cfg.layer_types = ["full_attention"] * args.layers
    cfg.block_size = args.block_size
    cfg.tie_word_embeddings = False
    cfg.mask_token_id = mask_id
    cfg.target_layer_ids = args.target_layer_ids
    cfg.num_anchors = args.anchors
    cfg.enable_confidence_head = True
    cfg.confidence_head_with_markov = True
    cfg.markov_rank = args.rank
    cfg.markov_head_type = "vanilla"
    return cfg


def config_json(cfg, target_dir):
    """The target's config.json with DeepSpec's DSpark fields set (the HF
    fields a loader needs, without PretrainedConfig's runtime extras)."""
    with open(os.path.join(target_dir, "config.json")) as f:
        d = json.load(f)
    d.pop("num_nextn_predict_layers", None)
    d.pop("transformers_version", None)
    for k in ("architectures", "num_target_layers", "num_hidden_layers", "layer_types", "block_size",
              "tie_word_embeddings", "mask_token_id", "target_layer_ids", "num_anchors", "enable_confidence_head",
              "confidence_head_with_markov", "markov_rank", "markov_head_type"):
        d[k] = getattr(cfg, k)
    d["dtype"] = "bfloat16"
    return d


def dspark_loss(model, stack, target, x, args, gen):
    """x [B, T+1]. Returns (loss, parts dict)."""
    T = x.shape[1] - 1
    ids = x[:, :T]
    B = ids.shape[0]
    nb = args.chain_blocks
    g = model.block_size * nb  # slots per anchor: nb chained blocks of block_size
    with torch.no_grad():
        taps, H = stack.taps(ids, model.target_layer_ids)
    # Anchors: A distinct positions in [1, T-g-1] per row so every slot has a label.
    anchors = torch.stack([torch.randperm(T - g - 1, generator=gen)[:args.anchors] + 1 for _ in range(B)]).sort(1).values
    A = anchors.shape[1]
    anchor_tok = ids.gather(1, anchors)
    lab_idx = anchors.unsqueeze(-1) + torch.arange(1, g + 1).view(1, 1, g)  # [B, A, g]
    labels = x.gather(1, lab_idx.view(B, -1)).view(B, A, g)
    # Teacher forcing runs across block boundaries: chained block b starts
    # from (and its Markov chain from) x_{a+b*block_size}, the true token
    # where inference has block b-1's last draft (equal when block b-1 was
    # fully accepted, the only case in which block b's drafts count).
    prev = torch.cat([anchor_tok.unsqueeze(-1), labels[:, :, :-1]], -1)
    starts = prev[:, :, model.block_size::model.block_size] if nb > 1 else None
    with torch.no_grad():
        Hs = H.gather(1, (lab_idx - 1).view(B, -1, 1).expand(-1, -1, H.shape[-1]))
        tlog = target.lm_head(Hs).float().view(B, A, g, -1)
    ctx = model.context(taps)
    bids, bpos = model.block_inputs(anchor_tok, anchors, starts)
    hn = model.backbone(bids, bpos, ctx, model.block_mask(anchors, T, nb)).view(B, A, g, -1)
    U, cor, conf = model.heads(hn, prev)
    cor = cor.float()
    V = cor.shape[-1]
    w = torch.exp(-torch.arange(g).float() / args.decay).view(1, 1, g).expand(B, A, g)
    wsum = w.sum()
    ce = (F.cross_entropy(cor.reshape(-1, V), labels.reshape(-1), reduction="none").view(B, A, g) * w).sum() / wsum
    pd, pt = F.softmax(cor, -1), F.softmax(tlog, -1)
    l1d = (pd - pt).abs().sum(-1)
    l1 = (l1d * w).sum() / wsum
    acc = (1.0 - 0.5 * l1d).clamp(0, 1).detach()
    bce = (F.binary_cross_entropy_with_logits(conf.float(), acc, reduction="none") * w).sum() / wsum
    loss = args.ce_alpha * ce + args.l1_alpha * l1 + args.conf_alpha * bce
    with torch.no_grad():
        agree = (cor.argmax(-1) == tlog.argmax(-1)).float().mean((0, 1))
    return loss, {"ce": ce.item(), "l1": l1.item(), "bce": bce.item(), "agree": agree.tolist(),
                  "acc_rate": acc.mean((0, 1)).tolist()}


def init_from_target(model, target, args):
    nt = target.config.num_hidden_layers
    with torch.no_grad():
        for j, layer in enumerate(model.layers):
            layer.load_state_dict(target.model.layers[nt - args.layers + j].state_dict())
        model.embed_tokens.weight.copy_(target.model.embed_tokens.weight)
        model.lm_head.weight.copy_(target.lm_head.weight)
        model.norm.weight.copy_(target.model.norm.weight)
        torch.nn.init.zeros_(model.markov_head.markov_w2.weight)
        torch.nn.init.normal_(model.markov_head.markov_w1.weight, std=0.02)
        torch.nn.init.zeros_(model.confidence_head.proj.weight)
        torch.nn.init.zeros_(model.confidence_head.proj.bias)
        torch.nn.init.normal_(model.fc.weight, std=0.02)


def grow_from(model, init, target):
    """Load a trained drafter into `model`, which may have more draft layers
    or more target taps (--grow). Extra layers are appended after the
    trained ones as identities: copies of the target's last layer (so their
    K/V projections of ctx start meaningful) with o_proj and down_proj
    zeroed. Extra taps get zero columns in fc. So the grown drafter starts
    as exactly the trained one and the new capacity is what training adds."""
    n = len(init.layers)
    sd = dict(init.state_dict())
    hs = model.fc.weight.shape[0]
    fc = torch.zeros_like(model.fc.weight)
    for j, L in enumerate(init.target_layer_ids):
        i = model.target_layer_ids.index(L)
        fc[:, i * hs:(i + 1) * hs] = sd["fc.weight"][:, j * hs:(j + 1) * hs]
    sd["fc.weight"] = fc
    missing, unexpected = model.load_state_dict(sd, strict=False)
    if unexpected or any(not k.startswith("layers.") for k in missing if not k.startswith("rot.")):
        tc.die("--init: cannot load (missing %s, unexpected %s)" % (missing, unexpected))
    with torch.no_grad():
        for layer in model.layers[n:]:
            layer.load_state_dict(target.model.layers[target.config.num_hidden_layers - 1].state_dict())
            torch.nn.init.zeros_(layer.self_attn.o_proj.weight)
            torch.nn.init.zeros_(layer.mlp.down_proj.weight)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=tc.SEQ_LEN)
    ap.add_argument("--anchors", type=int, default=48)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--block-size", type=int, default=5)
    ap.add_argument("--target-layer-ids", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--final-tap", choices=("raw", "normed"), default=None,
                    help="train on a tap of the target's final layer: its raw output or the final-normed state "
                         "(refused without it, as DeepSpec's evaluator refuses it)")
    ap.add_argument("--rank", type=int, default=64)
    ap.add_argument("--decay", type=float, default=4.0, help="loss_decay_gamma")
    ap.add_argument("--ce-alpha", type=float, default=0.1)
    ap.add_argument("--l1-alpha", type=float, default=0.9)
    ap.add_argument("--conf-alpha", type=float, default=1.0)
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--copy-frac", type=float, default=0.25, help="share of copy rows (tiny_copy.py)")
    ap.add_argument("--chain-blocks", type=int, default=1,
                    help="blocks per anchor, chained as the engine does at depth > block_size (1 = one block)")
    ap.add_argument("--init", default=None, help="continue from this written DSpark checkpoint directory")
    ap.add_argument("--grow", action="store_true",
                    help="with --init: --layers and --target-layer-ids may add to the checkpoint's; "
                         "new layers and taps start as identities")
    ap.add_argument("--name", default="dspark", help="WORK/NAME.ckpt and WORK/NAME.log")
    ap.add_argument("--target", default=os.path.join(tc.MODELS, "tiny"))
    ap.add_argument("--out", default=os.path.join(tc.MODELS, "tiny-dspark"))
    tiny_copy.add_args(ap)
    tc.add_precision_arg(ap)
    args = ap.parse_args()

    tc.setup_torch(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    logf = open(os.path.join(tc.WORK, args.name + ".log"), "a")
    target = tc.load_target(args.target)
    stack = tm.Stack(target)
    nt = target.config.num_hidden_layers
    if max(args.target_layer_ids) >= nt or args.target_layer_ids != sorted(set(args.target_layer_ids)):
        tc.die("target_layer_ids must be increasing decoder layers 0..%d" % (nt - 1))
    # A tap of the final layer means two states in DeepSpec (its evaluator's
    # assert_no_final_target_layer): its target cache hooks the raw decoder-layer
    # output, its evaluation reads HF's hidden_states[L + 1], the final-normed
    # state. So it is refused unless --final-tap says which one to train on
    # (specbed then needs the same --dspark-final-tap to serve it).
    if nt - 1 in args.target_layer_ids and not args.final_tap:
        tc.die("target_layer_ids includes the final layer %d, which DeepSpec's evaluator refuses "
               "(assert_no_final_target_layer); pass --final-tap raw|normed to train on it anyway" % (nt - 1))
    if args.final_tap and nt - 1 not in args.target_layer_ids:
        tc.die("--final-tap: target_layer_ids %s has no final layer %d" % (args.target_layer_ids, nt - 1))
    stack.final_tap = args.final_tap or "normed"
    mask_id = tc.special_ids(tc.load_tokenizer(os.path.join(args.target, "tokenizer.json")))["<|mask|>"]
    cfg = dspark_config(target.config, args, mask_id)
    model = tm.DSpark(cfg)
    if args.init:
        import eval_drafters
        with open(os.path.join(args.init, "config.json")) as f:
            icfg = json.load(f)
        want = config_json(cfg, args.target)
        bad = [k for k in ("num_hidden_layers", "block_size", "target_layer_ids", "markov_rank", "mask_token_id")
               if icfg.get(k) != want[k] and not (args.grow and k in ("num_hidden_layers", "target_layer_ids"))]
        if bad:
            tc.die("--init %s: config differs in %s (pass the matching --layers/--block-size/...)" % (args.init, bad))
        if args.grow and (icfg["num_hidden_layers"] > args.layers
                          or not set(icfg["target_layer_ids"]) <= set(args.target_layer_ids)):
            tc.die("--grow: --init %s (%d layers, taps %s) must be contained in --layers %d --target-layer-ids %s" % (
                args.init, icfg["num_hidden_layers"], icfg["target_layer_ids"], args.layers, args.target_layer_ids))
        grow_from(model, eval_drafters.load_dspark(args.init), target)
    else:
        init_from_target(model, target, args)
    model.embed_tokens.requires_grad_(False)
    model.lm_head.requires_grad_(False)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0)
    ckpt = os.path.join(tc.WORK, args.name + ".ckpt")
    step, extra = tc.load_ckpt(ckpt, {"dspark": model}, opt)
    batcher = tiny_copy.mixed(tc.Batcher("train", args.seq, args.batch, seed=args.seed), args.copy_frac, args.seed,
                              split_cue=args.copy_split_cue)
    for _ in range(step):
        batcher.next()
    if step:
        gen.set_state(extra["gen"])
    tc.log("%s: %.2fM trainable params, %d steps (from %d), config %s" % (
        args.name, sum(p.numel() for p in params) / 1e6, args.steps, step, vars(args)), logf)
    t0, n0 = time.time(), step
    while step < args.steps:
        lr = tc.lr_at(step, args.steps, args.lr, args.warmup)
        for g in opt.param_groups:
            g["lr"] = lr
        x = batcher.next()
        with tc.autocast(args.precision):
            loss, parts = dspark_loss(model, stack, target, x, args, gen)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        if step % 25 == 0:
            dt = time.time() - t0
            tc.log("step %d/%d loss %.4f ce %.3f l1 %.3f bce %.3f agree %s acc %s lr %.2e %.2f s/step" % (
                step, args.steps, loss.item(), parts["ce"], parts["l1"], parts["bce"],
                " ".join("%.2f" % a for a in parts["agree"]), " ".join("%.2f" % a for a in parts["acc_rate"]),
                lr, dt / (step - n0)), logf)
        if step % 100 == 0 or step == args.steps:
            tc.save_ckpt(ckpt, step, {"dspark": model}, opt, {"gen": gen.get_state()})

    os.makedirs(args.out, exist_ok=True)
    save_file(tc.bf16_state(model.hf_state_dict()), os.path.join(args.out, "model.safetensors"),
              metadata={"format": "pt"})
    tc.write_json(os.path.join(args.out, "config.json"), config_json(cfg, args.target))
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(args.target, f), os.path.join(args.out, f))
    tc.log("wrote %s" % args.out, logf)


if __name__ == "__main__":
    main()
