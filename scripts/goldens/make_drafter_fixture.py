#!/usr/bin/env python3
"""make_drafter_fixture.py — small MTP and DSpark drafters for the fixture
target tests/fixtures/qwen3-tied, and their forward goldens, so the C
drafters' tests run without the bundled models.

Writes:
  tests/fixtures/qwen3-tied-mtp/   the qwen3-tied target plus one MTP module
      (config.json with num_nextn_predict_layers 1; a two-shard checkpoint
      whose first shard is a symlink to ../qwen3-tied/model.safetensors and
      whose second holds model.layers.2.{enorm,hnorm,eh_proj,<block>} in f32;
      tokenizer files are symlinks too)
  tests/fixtures/dspark-tiny/      a DSpark drafter (DeepSpec Qwen3 layout,
      bf16, 2 layers, block_size 4, target_layer_ids [0], markov rank 16,
      confidence head) WITHOUT embed_tokens/lm_head: DeepSpec initialises
      them as frozen copies of the target's, and the C loader falls back to
      the target's when a checkpoint omits them (this fixture covers that path)
  tests/golden/mtp-fixture/, tests/golden/dspark-fixture/   goldens in the
      format of make_drafter_goldens.py (same tensor names and golden.json),
      plus, for DSpark, the chained drafts for depth 2γ (see dspark_chain).

The modules are trained briefly (a few hundred Adam steps, CE only) on the
fixture target's own greedy continuations, so their drafts are accepted
often enough for lossless tests to exercise the acceptance path; the
numbers they reach are printed. Forwards are tiny_modules.py's (the
reference); this script only adds the K > γ chaining rule of
spec/drafter_dspark.h, which the reference does not define.

With --mtp2 it writes only the two-module MTP fixture and its golden,
leaving every file above as it is:
  tests/fixtures/qwen3-tied-mtp2/  the qwen3-tied target plus two MTP
      modules (num_nextn_predict_layers 2): module 0 (model.layers.2.*) IS
      the committed one-module fixture's (its shard is a symlink to
      ../qwen3-tied-mtp/model-00002-of-00002.safetensors); module 1
      (model.layers.3.*, f32, with its own shared_head.norm) starts from
      module 0 plus noise and is trained --mtp2-steps Adam steps on the
      chained step-1 input [Emb(t_{i+1}); g0_{i-1}]
  tests/golden/mtp2-fixture/  chained drafts and logits at depth
      MTP2_DEPTH under the step-mod-n rule (mtp_chain_multi), in
      mtp-fixture's format
The first module's causal rows and one-module chain are checked against
the committed tests/golden/mtp-fixture first (the reference must reproduce
it), and the golden records how far the step-mod-n chain is from chaining
module 0 alone, so a test can tell the two rules apart.

With --final-tap it writes only a DSpark drafter that taps the target's
final layer, and two goldens for it, leaving every file above as it is:
  tests/fixtures/dspark-tiny-final/  dspark-tiny's shape with
      target_layer_ids [0, 1] of the 2-layer qwen3-tied: layer 1 is the
      final one, which DeepSpec's evaluator refuses
      (assert_no_final_target_layer: its target cache hooks the raw layer
      output, its evaluation reads the final-normed state) and specbed
      refuses unless --dspark-final-tap says which state was trained on;
      trained --final-steps Adam steps on the raw state (DeepSpec's cache)
  tests/golden/dspark-final-raw/, tests/golden/dspark-final-normed/  its
      goldens (dspark-fixture's format) with the final layer tapped raw
      (before the final norm) and normed (after it): the same weights, two
      inputs, so a test can tell which state the C drafter fed.

With --bundled-chain it writes only tests/golden/dspark-chain/: the same
chained-drafting golden for the bundled models/tiny-dspark (validation
contexts as make_drafter_goldens.py picks them), which that script's
goldens do not cover.

Both DSpark paths first run check_chain_mask: the one masked pass in which
train_dspark.py --chain-blocks trains chained blocks must equal dspark_chain.

Usage: .venv/bin/python scripts/goldens/make_drafter_fixture.py [--steps N] [--seed S] [--bundled-chain]
       .venv/bin/python scripts/goldens/make_drafter_fixture.py --final-tap [--final-steps N] [--seed S]
       .venv/bin/python scripts/goldens/make_drafter_fixture.py --mtp2 [--mtp2-steps N] [--seed S]
"""
import argparse
import json
import math
import os
import shutil
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import save_file, load_file
from transformers import Qwen3Config, Qwen3ForCausalLM

# tiny_modules (the reference forwards) lives with the training code, in scripts/train/.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "train"))
import tiny_modules as tm  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGET = os.path.join(ROOT, "tests", "fixtures", "qwen3-tied")
MTP_DIR = os.path.join(ROOT, "tests", "fixtures", "qwen3-tied-mtp")
MTP2_DIR = os.path.join(ROOT, "tests", "fixtures", "qwen3-tied-mtp2")
DS_DIR = os.path.join(ROOT, "tests", "fixtures", "dspark-tiny")
DS_FINAL_DIR = os.path.join(ROOT, "tests", "fixtures", "dspark-tiny-final")
GOLD = os.path.join(ROOT, "tests", "golden")
MTP_DEPTH = 5
MTP2_DEPTH = 6   # steps 0..5: modules 0 1 0 1 0 1 (depth beyond n chains on)
BLOCK = 4
MASK_ID = 4095


def scaled_init(module, gen, skip=()):
    """Unit-variance activations through every matrix, norms 1 + noise (as make_fixture.py);
    parameters whose names start with one of `skip` are left alone (no RNG draws)."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.startswith(tuple(skip)):
                continue
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            elif p.dim() == 2:
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[1]))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))


def sequences(target, n, plen, total, gen):
    """n sequences of `total` tokens: a prompt of plen tokens (half repetitive,
    half random) then the target's greedy continuation (generated 64 at a time)."""
    V = target.config.vocab_size
    prompts = []
    for i in range(n):
        if i % 2:
            prompts.append(torch.randint(0, V - 4, (plen,), generator=gen))
        else:
            period = 3 + i % 7
            base = torch.randint(0, V - 4, (period,), generator=gen)
            prompts.append(base.repeat(plen // period + 1)[:plen])
    out = []
    for i in range(0, n, 64):
        p = torch.stack(prompts[i:i + 64])
        with torch.no_grad():
            out.append(target.generate(p, attention_mask=torch.ones_like(p), max_new_tokens=total - plen,
                                       do_sample=False, eos_token_id=None, pad_token_id=0))
    return torch.cat(out)


def final_hidden(target, ids):
    with torch.no_grad():
        return target.model(input_ids=ids).last_hidden_state


# ---------------------------------------------------------------- MTP

def train_mtp(target, data, steps, gen):
    # This fixture has no shared_head.norm (the engine's fallback to the
    # target's model.norm is what it tests): the output norm is the target's,
    # frozen, and is not written.
    mtp = tm.MTP(target.config)
    scaled_init(mtp, gen, skip=("head_norm.",))
    with torch.no_grad():
        mtp.head_norm.weight.copy_(target.model.norm.weight)
    mtp.head_norm.requires_grad_(False)
    H = final_hidden(target, data)
    opt = torch.optim.Adam(mtp.parameters(), lr=3e-3)
    T = data.shape[1]
    pos = torch.arange(T - 2).unsqueeze(0).expand(data.shape[0], -1)
    for s in range(steps):
        idx = torch.randint(0, data.shape[0], (32,), generator=gen)
        x = data[idx]
        logits, _, _, _ = mtp(target, x[:, 1:-1], H[idx, :-2], pos[:32])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 2:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if s % 100 == 0 or s == steps - 1:
            print("mtp step %d loss %.3f" % (s, loss.item()))
    return mtp.eval()


def mtp_chain(mtp, target, x, H, K):
    """Greedy chained drafts after x_0..x_n (tiny_modules' path, eval_drafters.mtp_drafts)."""
    n = x.shape[0] - 1
    logits, g, k0, v0 = mtp(target, x[1:].unsqueeze(0), H[:n].unsqueeze(0), torch.arange(n).unsqueeze(0))
    lg = [logits[0, n - 1]]
    d = [int(lg[0].argmax())]
    h = g[:, n - 1:n]
    kx, vx = k0, v0
    for j in range(1, K):
        mask = torch.ones(1, 1, kx.shape[1] + 1, dtype=torch.bool)
        l2, h, k, v = mtp.step(target, torch.tensor([[d[-1]]]), h, torch.tensor([[n - 1 + j]]), kx, vx, mask)
        kx, vx = torch.cat([kx, k], 1), torch.cat([vx, v], 1)
        lg.append(l2[0, 0])
        d.append(int(l2[0, 0].argmax()))
    return logits[0], torch.tensor(d), torch.stack(lg)


def write_mtp(target, mtp, ctxs):
    if os.path.isdir(MTP_DIR):
        shutil.rmtree(MTP_DIR)
    os.makedirs(MTP_DIR)
    L = target.config.num_hidden_layers
    with open(os.path.join(TARGET, "config.json")) as f:
        cfg = json.load(f)
    cfg["num_nextn_predict_layers"] = 1
    with open(os.path.join(MTP_DIR, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        os.symlink(os.path.join("..", "qwen3-tied", name), os.path.join(MTP_DIR, name))
    shard1, shard2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
    os.symlink(os.path.join("..", "qwen3-tied", "model.safetensors"), os.path.join(MTP_DIR, shard1))
    sd = {k: v.detach().float().contiguous() for k, v in mtp.state_dict_ds(L).items() if ".shared_head." not in k}
    save_file(sd, os.path.join(MTP_DIR, shard2), metadata={"format": "pt"})
    wmap = {k: shard1 for k in load_file(os.path.join(TARGET, "model.safetensors"))}
    wmap.update({k: shard2 for k in sd})
    with open(os.path.join(MTP_DIR, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": dict(sorted(wmap.items()))}, f, indent=2)

    out = os.path.join(GOLD, "mtp-fixture")
    os.makedirs(out, exist_ok=True)
    tensors, doc = {}, {"contexts": []}
    with torch.no_grad():
        for name, x in ctxs:
            n = x.shape[0] - 1
            H = final_hidden(target, x.unsqueeze(0))[0]
            logits, drafts, chain = mtp_chain(mtp, target, x, H, MTP_DEPTH)
            rows = sorted({0, n // 2, n - 1} | ({127, 128} & set(range(n))))
            tensors.update({name + ".tokens": x.float(), name + ".h": H.float().contiguous(),
                            name + ".rows": torch.tensor(rows).float(),
                            name + ".row_logits": logits[rows].float().contiguous(),
                            name + ".draft_tokens": drafts.float(), name + ".draft_logits": chain.float()})
            doc["contexts"].append({"name": name, "n_tokens": n + 1, "rows": rows, "draft_tokens": drafts.tolist()})
    doc.update({"model": "tests/fixtures/qwen3-tied-mtp (MTP module model.layers.%d.*)" % L,
                "depth": MTP_DEPTH,
                "tensors": "as tests/golden/mtp/golden.json (scripts/goldens/make_drafter_goldens.py)",
                "command": "scripts/goldens/make_drafter_fixture.py",
                "precision": "f32 weights and arithmetic"})
    save_file(tensors, os.path.join(out, "golden.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(out, "golden.json"), "w") as f:
        json.dump(doc, f, indent=1)


# ---------------------------------------------------------------- DSpark

def dspark_config(tcfg_json):
    d = dict(tcfg_json)
    d.pop("num_nextn_predict_layers", None)
    d.pop("transformers_version", None)
    d.update({"architectures": ["Qwen3DSparkModel"], "num_target_layers": d["num_hidden_layers"],
              "num_hidden_layers": 2, "layer_types": ["full_attention"] * 2, "block_size": BLOCK,
              "tie_word_embeddings": False, "mask_token_id": MASK_ID, "target_layer_ids": [0],
              "num_anchors": 16, "enable_confidence_head": True, "confidence_head_with_markov": True,
              "markov_rank": 16, "markov_head_type": "vanilla", "dtype": "bfloat16"})
    return d


def dspark_module(d):
    cfg = Qwen3Config(**{k: v for k, v in d.items() if k not in ("architectures", "dtype")})
    for k in ("block_size", "mask_token_id", "target_layer_ids", "markov_rank", "markov_head_type",
              "num_target_layers", "enable_confidence_head", "confidence_head_with_markov"):
        setattr(cfg, k, d[k])
    return tm.DSpark(cfg)


def train_dspark(ds, target, stack, data, steps, gen, final="normed"):
    with torch.no_grad():
        taps, _ = stack.taps(data, ds.target_layer_ids, final=final)
    params = [p for n, p in ds.named_parameters() if not n.startswith(("embed_tokens", "lm_head"))]
    opt = torch.optim.Adam(params, lr=3e-3)
    B, T = data.shape
    g = ds.block_size
    for s in range(steps):
        idx = torch.randint(0, B, (8,), generator=gen)
        x = data[idx]
        anchors = torch.stack([torch.randperm(T - g - 2, generator=gen)[:16] + 1 for _ in range(8)]).sort(1).values
        anchor_tok = x.gather(1, anchors)
        lab_idx = anchors.unsqueeze(-1) + torch.arange(1, g + 1).view(1, 1, g)
        labels = x.gather(1, lab_idx.view(8, -1)).view(8, -1, g)
        prev = torch.cat([anchor_tok.unsqueeze(-1), labels[:, :, :-1]], -1)
        ctx = ds.context(taps[idx])
        bids, bpos = ds.block_inputs(anchor_tok, anchors)
        hn = ds.backbone(bids, bpos, ctx, ds.block_mask(anchors, T)).view(8, -1, g, ctx.shape[-1])
        _, cor, conf = ds.heads(hn, prev)
        ce = F.cross_entropy(cor.reshape(-1, cor.shape[-1]), labels.reshape(-1))
        hit = (cor.argmax(-1) == labels).float()
        bce = F.binary_cross_entropy_with_logits(conf, hit)
        loss = ce + bce
        opt.zero_grad()
        loss.backward()
        opt.step()
        if s % 100 == 0 or s == steps - 1:
            print("dspark step %d ce %.3f bce %.3f slot agreement %s" % (
                s, ce.item(), bce.item(), " ".join("%.2f" % v for v in hit.mean((0, 1)).tolist())))
    return ds.eval()


def dspark_chain(ds, ctx, a, anchor_tok, K):
    """Greedy drafts for depth K > γ under spec/drafter_dspark.h's chaining
    rule: block b (b = 0, 1, ...) = [x_b, MASK x (γ-1)] at positions
    a+bγ .. a+bγ+γ-1, x_0 = the anchor, x_b = the last draft of block b-1.
    Its queries attend to the context rows 0..a-1, every earlier block's
    rows (their keys/values as computed in those blocks' own passes) and
    its own block (non-causal). The Markov head restarts from x_b.
    Returns tokens [K], corrected logits [K, V], confidences [K]."""
    g = ds.block_size
    T = ctx.shape[1]
    cc, sc = ds.rot(torch.arange(T).unsqueeze(0))
    kpre = []
    vpre = []
    for layer in ds.layers:
        k, v = layer.self_attn.kv_of(ctx, cc, sc)
        kpre.append(k)
        vpre.append(v)
    toks, cors, confs = [], [], []
    x0 = anchor_tok
    b = 0
    while len(toks) < K:
        ids = torch.full((1, g), ds.mask_token_id, dtype=torch.long)
        ids[0, 0] = x0
        pos = (a + b * g + torch.arange(g)).unsqueeze(0)
        cq, sq = ds.rot(pos)
        x = ds.embed_tokens(ids)
        for li, layer in enumerate(ds.layers):
            mask = torch.ones(1, g, kpre[li].shape[1] + g, dtype=torch.bool)
            x, k, v = layer(x, cq, sq, kpre[li], vpre[li], mask)
            kpre[li] = torch.cat([kpre[li], k], 1)
            vpre[li] = torch.cat([vpre[li], v], 1)
        hn = ds.norm(x)[0]
        prev = torch.tensor(x0)
        for k in range(g):
            if len(toks) == K:
                break
            _, cor, conf = ds.heads(hn[k], prev)
            prev = cor.argmax(-1)
            toks.append(int(prev))
            cors.append(cor)
            confs.append(torch.sigmoid(conf))
        x0 = toks[-1]
        b += 1
    return torch.tensor(toks), torch.stack(cors), torch.stack(confs)


def check_chain_mask(ds, stack, x, anchors):
    """train_dspark.py --chain-blocks 2 trains block 1 in ONE pass over both
    blocks of many anchors (tiny_modules.DSpark.block_mask, full-length ctx
    masked at each anchor, block 1 started from the true token); the engine
    runs one pass per block (dspark_chain). They agree iff no row sees a later
    block or another anchor's rows, so blocks 0..b-1 keep the keys/values of
    their own passes. Checks that on these anchors (f32: measured ~1e-5 on
    logits; a block 1 blind to block 0 is off by whole units), and that
    DSpark.draft with n_blocks=2 (eval_drafters at depth > γ) drafts the same tokens."""
    g = ds.block_size
    T = x.shape[0] - 1
    taps, _ = stack.taps(x[:T].unsqueeze(0), ds.target_layer_ids)
    ctx = ds.context(taps)
    ref = [dspark_chain(ds, ctx[:, :a], a, int(x[a]), 2 * g) for a in anchors]
    rtok, rcor = torch.stack([r[0] for r in ref]), torch.stack([r[1] for r in ref])
    an = torch.tensor([anchors])
    ids, pos = ds.block_inputs(x[an], an, rtok[:, g - 1].view(1, -1, 1))
    hn = ds.backbone(ids, pos, ctx, ds.block_mask(an, T, 2)).view(len(anchors), 2 * g, -1)
    _, cor, _ = ds.heads(hn, torch.cat([x[an][0].unsqueeze(1), rtok[:, :-1]], 1))
    ctok, _, ccor, _ = ds.draft(ctx, an, x[an], 2)
    d1, d2 = (cor - rcor).abs().max().item(), (ccor[0] - rcor).abs().max().item()
    print("dspark chain mask vs dspark_chain, anchors %s: max |Δ logit| %.2g (training pass), %.2g (draft, 2 blocks)"
          % (anchors, d1, d2))
    if d1 > 1e-3 or d2 > 1e-3 or not torch.equal(ctok[0], rtok):
        raise SystemExit("dspark: the masked chained pass disagrees with dspark_chain")


def dspark_context_golden(ds, stack, name, x, last, tensors, doc, final="normed"):
    """One context's DSpark golden (anchor = x's last token): the block's
    drafts, corrected logits and confidences, the depth-2γ chain, and for the
    last context also U_k and the chain's logits. Adds to tensors and doc."""
    g = ds.block_size
    a = x.shape[0] - 1
    taps, _ = stack.taps(x.unsqueeze(0), ds.target_layer_ids, final=final)
    ctx = ds.context(taps[:, :a])
    toks, base, cor, conf = ds.draft(ctx, torch.tensor([[a]]), x[a].view(1, 1))
    ctoks, ccor, cconf = dspark_chain(ds, ctx, a, int(x[a]), 2 * g)
    if not torch.equal(ctoks[:g], toks[0, 0]) or (ccor[:g] - cor[0, 0]).abs().max() > 1e-3:
        raise SystemExit("dspark golden: the chain's first block disagrees with DSpark.draft")
    tensors.update({
        name + ".tokens": x.float(), name + ".taps": taps[0, :a].float().contiguous(),
        name + ".draft_tokens": toks[0, 0].float(), name + ".corrected_logits": cor[0, 0].float(),
        name + ".confidence": torch.sigmoid(conf[0, 0]).float(),
        name + ".chain_tokens": ctoks.float(), name + ".chain_confidence": cconf.float()})
    if last:
        tensors[name + ".base_logits"] = base[0, 0].float()
        tensors[name + ".chain_logits"] = ccor.float()
    doc["contexts"].append({"name": name, "n_tokens": a + 1, "anchor_position": a,
                            "draft_tokens": toks[0, 0].tolist(), "chain_tokens": ctoks.tolist(),
                            "has_base_logits": last})


def write_dspark(target, stack, ds, dcfg, ctxs):
    if os.path.isdir(DS_DIR):
        shutil.rmtree(DS_DIR)
    os.makedirs(DS_DIR)
    with open(os.path.join(DS_DIR, "config.json"), "w") as f:
        json.dump(dcfg, f, indent=2)
    # bf16 as DeepSpec saves; the goldens are computed from the rounded weights.
    sd = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in ds.hf_state_dict().items()
          if not k.startswith(("embed_tokens.", "lm_head."))}
    save_file(sd, os.path.join(DS_DIR, "model.safetensors"), metadata={"format": "pt"})
    with torch.no_grad():
        for k, v in ds.named_parameters():
            if k in sd:
                v.copy_(sd[k].float())

    out = os.path.join(GOLD, "dspark-fixture")
    os.makedirs(out, exist_ok=True)
    g = ds.block_size
    tensors, doc = {}, {"contexts": []}
    with torch.no_grad():
        check_chain_mask(ds, stack, ctxs[-1][1], [1, 40, 41, 97, ctxs[-1][1].shape[0] - 2])
        for ci, (name, x) in enumerate(ctxs):
            dspark_context_golden(ds, stack, name, x, ci == len(ctxs) - 1, tensors, doc)
    doc.update({"model": "tests/fixtures/dspark-tiny with target tests/fixtures/qwen3-tied",
                "block_size": g, "target_layer_ids": ds.target_layer_ids, "mask_token_id": ds.mask_token_id,
                "tensors": "as tests/golden/dspark/golden.json (scripts/goldens/make_drafter_goldens.py), plus "
                           "<c>.chain_tokens [2γ] / <c>.chain_confidence [2γ] / <c>.chain_logits [2γ, vocab] "
                           "(last context): greedy drafts at depth 2γ under spec/drafter_dspark.h's chaining rule",
                "command": "scripts/goldens/make_drafter_fixture.py",
                "precision": "f32 arithmetic from bf16 weights"})
    save_file(tensors, os.path.join(out, "golden.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(out, "golden.json"), "w") as f:
        json.dump(doc, f, indent=1)


def main_final_tap(args):
    """tests/fixtures/dspark-tiny-final and its raw and normed goldens (the
    module docstring)."""
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed + 300)
    target = Qwen3ForCausalLM.from_pretrained(TARGET, torch_dtype=torch.float32).eval()
    for p in target.parameters():
        p.requires_grad_(False)
    L = target.config.num_hidden_layers
    data = sequences(target, 128, 24, 168, gen)
    held = sequences(target, 4, 16, 170, torch.Generator().manual_seed(args.seed + 100))
    with open(os.path.join(TARGET, "config.json")) as f:
        dcfg = dspark_config(json.load(f))
    dcfg["target_layer_ids"] = list(range(L))   # [0, 1]: the final layer among them
    ds = dspark_module(dcfg)
    scaled_init(ds, gen)
    with torch.no_grad():
        ds.embed_tokens.weight.copy_(target.model.embed_tokens.weight)
        ds.lm_head.weight.copy_(target.lm_head.weight)
        torch.nn.init.zeros_(ds.markov_head.markov_w2.weight)
    stack = tm.Stack(target)
    ds = train_dspark(ds, target, stack, data, args.final_steps, gen, final="raw")
    if os.path.isdir(DS_FINAL_DIR):
        shutil.rmtree(DS_FINAL_DIR)
    os.makedirs(DS_FINAL_DIR)
    with open(os.path.join(DS_FINAL_DIR, "config.json"), "w") as f:
        json.dump(dcfg, f, indent=2)
    sd = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in ds.hf_state_dict().items()
          if not k.startswith(("embed_tokens.", "lm_head."))}
    save_file(sd, os.path.join(DS_FINAL_DIR, "model.safetensors"), metadata={"format": "pt"})
    with torch.no_grad():
        for k, v in ds.named_parameters():
            if k in sd:
                v.copy_(sd[k].float())
    ctxs = [("c0", held[3, :20]), ("c2", held[2, :140])]
    drafts = {}
    for final in ("raw", "normed"):
        out = os.path.join(GOLD, "dspark-final-" + final)
        os.makedirs(out, exist_ok=True)
        tensors, doc = {}, {"contexts": []}
        with torch.no_grad():
            for ci, (name, x) in enumerate(ctxs):
                dspark_context_golden(ds, stack, name, x, ci == len(ctxs) - 1, tensors, doc, final=final)
        drafts[final] = [c["chain_tokens"] for c in doc["contexts"]]
        doc.update({"model": "tests/fixtures/dspark-tiny-final with target tests/fixtures/qwen3-tied",
                    "block_size": ds.block_size, "target_layer_ids": ds.target_layer_ids,
                    "mask_token_id": ds.mask_token_id, "final_tap": final,
                    "final_tap_means": "layer %d (the final one) tapped %s" % (
                        L - 1, "as its raw decoder-layer output, before the final norm (DeepSpec's target cache; "
                               "specbed --dspark-final-tap raw)" if final == "raw" else
                               "after the final norm (HF output_hidden_states[%d]; specbed --dspark-final-tap "
                               "normed)" % L),
                    "tensors": "as tests/golden/dspark-fixture/golden.json",
                    "command": "scripts/goldens/make_drafter_fixture.py --final-tap",
                    "precision": "f32 arithmetic from bf16 weights"})
        save_file(tensors, os.path.join(out, "golden.safetensors"), metadata={"format": "pt"})
        with open(os.path.join(out, "golden.json"), "w") as f:
            json.dump(doc, f, indent=1)
        size = os.path.getsize(os.path.join(out, "golden.safetensors"))
        print("%s: %d bytes, chained drafts %s" % (os.path.relpath(out, ROOT), size, drafts[final]))
        if size > 1 << 20:
            raise SystemExit("%s is over 1 MB" % out)
    if drafts["raw"] == drafts["normed"]:
        raise SystemExit("dspark-final: raw and normed taps give the same drafts; the goldens cannot tell them apart")


def bundled_chain_golden():
    """tests/golden/dspark-chain: the bundled models/tiny-dspark on two
    validation contexts (one anchor past 128), in the fixture golden's
    format: one block (as make_drafter_goldens.py) plus the depth-2γ chain."""
    import eval_drafters as ev
    import make_drafter_goldens as mg
    import tiny_common as tc
    target = tc.load_target(os.path.join(tc.MODELS, "tiny"))
    stack = tm.Stack(target)
    ds = ev.load_dspark(os.path.join(tc.MODELS, "tiny-dspark"))
    g = ds.block_size
    out = os.path.join(GOLD, "dspark-chain")
    os.makedirs(out, exist_ok=True)
    tensors, doc = {}, {"contexts": []}
    ctxs = mg.contexts((60, 140))
    with torch.no_grad():
        check_chain_mask(ds, stack, ctxs[-1][2], [1, 40, 41, 97, ctxs[-1][2].shape[0] - 2])
        for ci, (name, dom, x) in enumerate(ctxs):
            dspark_context_golden(ds, stack, name, x, ci == len(ctxs) - 1, tensors, doc)
            doc["contexts"][-1]["domain"] = dom
    doc.update({"model": "models/tiny-dspark with target models/tiny", "block_size": g,
                "target_layer_ids": ds.target_layer_ids, "mask_token_id": ds.mask_token_id,
                "tensors": "as tests/golden/dspark-fixture/golden.json",
                "command": "scripts/goldens/make_drafter_fixture.py --bundled-chain",
                "precision": "f32 arithmetic from the committed bf16 weights"})
    save_file(tensors, os.path.join(out, "golden.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(out, "golden.json"), "w") as f:
        json.dump(doc, f, indent=1)
    size = os.path.getsize(os.path.join(out, "golden.safetensors"))
    print("%s: %d bytes" % (os.path.relpath(out, ROOT), size))
    if size > 1 << 20:
        raise SystemExit("dspark-chain golden is over 1 MB")


# ---------------------------------------------------------------- MTP, several modules

def mtp_chain_multi(mods, target, x, H, K):
    """Greedy drafts after x_0..x_n by the step-mod-n rule (spec/drafter_mtp.h,
    vLLM deepseek_mtp.py spec_step_idx % num_mtp_layers): draft step k uses
    module k mod len(mods). Every module runs every row, each with its own
    K/V cache: the true rows (row i = [Emb(x_{i+1}); H_i] at position i) and
    each chained row (step k: [Emb(d_k); g of step k-1] at position n-1+k);
    only module k mod n's output is read at step k. Returns (module 0's true-
    row logits [n, V], drafts [K], their logits [K, V])."""
    n = x.shape[0] - 1
    kx, vx = [], []
    for j, mod in enumerate(mods):
        logits, g, k, v = mod(target, x[1:].unsqueeze(0), H[:n].unsqueeze(0), torch.arange(n).unsqueeze(0))
        kx.append(k)
        vx.append(v)
        if j == 0:
            rows, lg, h = logits[0], [logits[0, n - 1]], g[:, n - 1:n]
    d = [int(lg[0].argmax())]
    for step in range(1, K):
        m = step % len(mods)
        for j, mod in enumerate(mods):
            mask = torch.ones(1, 1, kx[j].shape[1] + 1, dtype=torch.bool)
            l2, g2, k, v = mod.step(target, torch.tensor([[d[-1]]]), h, torch.tensor([[n - 1 + step]]), kx[j], vx[j], mask)
            kx[j], vx[j] = torch.cat([kx[j], k], 1), torch.cat([vx[j], v], 1)
            if j == m:
                lm, gm = l2, g2
        h = gm
        lg.append(lm[0, 0])
        d.append(int(lm[0, 0].argmax()))
    return rows, torch.tensor(d), torch.stack(lg)


def train_mtp_second(target, mod0, data, steps, gen):
    """Module 1: module 0's weights plus noise (10% of each tensor's spread,
    the output norm from the target's model.norm), then `steps` Adam steps
    on what chained step 1 sees: row i = [Emb(t_{i+1}); g0_{i-1}] at
    position i (g0 = module 0's final-normed output), predicting t_{i+2}."""
    mod1 = tm.MTP(target.config)
    with torch.no_grad():
        own = dict(mod1.named_parameters())
        for name, p in mod0.named_parameters():
            if name.startswith("head_norm."):
                continue  # set below, from the target's norm
            noise = torch.randn(p.shape, generator=gen) * 0.1 * (p.std() if p.numel() > 1 else 0.1)
            own[name].copy_(p + noise)
        mod1.head_norm.weight.copy_(target.model.norm.weight * (1 + 0.1 * torch.randn(mod1.head_norm.weight.shape,
                                                                                        generator=gen)))
        H = final_hidden(target, data)
        T = data.shape[1]
        pos = torch.arange(T - 2).unsqueeze(0).expand(data.shape[0], -1)
        _, g0, _, _ = mod0(target, data[:, 1:-1], H[:, :-2], pos)   # g0_i, rows 0..T-3
    opt = torch.optim.Adam(mod1.parameters(), lr=3e-3)
    p1 = torch.arange(1, T - 2).unsqueeze(0)
    for s in range(steps):
        idx = torch.randint(0, data.shape[0], (32,), generator=gen)
        x = data[idx]
        logits, _, _, _ = mod1(target, x[:, 2:-1], g0[idx, :-1], p1.expand(32, -1))
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 3:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if s % 20 == 0 or s == steps - 1:
            print("mtp module 1 step %d loss %.3f" % (s, loss.item()))
    return mod1.eval()


def check_against_mtp_golden(target, mod0):
    """The reference reproduces the committed one-module golden (module 0 is
    the same weights), so both goldens come from one convention."""
    g = load_file(os.path.join(GOLD, "mtp-fixture", "golden.safetensors"))
    with open(os.path.join(GOLD, "mtp-fixture", "golden.json")) as f:
        doc = json.load(f)
    worst = 0.0
    with torch.no_grad():
        for c in doc["contexts"]:
            name = c["name"]
            x = g[name + ".tokens"].long()
            rows, drafts, lg = mtp_chain_multi([mod0], target, x, g[name + ".h"], doc["depth"])
            if drafts.tolist() != c["draft_tokens"]:
                raise SystemExit("mtp2: the reference's one-module drafts differ from tests/golden/mtp-fixture")
            worst = max(worst, (lg - g[name + ".draft_logits"]).abs().max().item(),
                        (rows[c["rows"]] - g[name + ".row_logits"]).abs().max().item())
    print("mtp2: reference vs tests/golden/mtp-fixture (one module): max |Δ| %.3g" % worst)
    if worst > 1e-4:
        raise SystemExit("mtp2: the reference does not reproduce tests/golden/mtp-fixture")


def write_mtp2(target, mods, ctxs, steps, seed):
    if os.path.isdir(MTP2_DIR):
        shutil.rmtree(MTP2_DIR)
    os.makedirs(MTP2_DIR)
    L = target.config.num_hidden_layers
    with open(os.path.join(TARGET, "config.json")) as f:
        cfg = json.load(f)
    cfg["num_nextn_predict_layers"] = len(mods)
    with open(os.path.join(MTP2_DIR, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        os.symlink(os.path.join("..", "qwen3-tied", name), os.path.join(MTP2_DIR, name))
    shards = ["model-%05d-of-00003.safetensors" % i for i in (1, 2, 3)]
    os.symlink(os.path.join("..", "qwen3-tied", "model.safetensors"), os.path.join(MTP2_DIR, shards[0]))
    mod0_file = os.path.join(MTP_DIR, "model-00002-of-00002.safetensors")
    os.symlink(os.path.join("..", "qwen3-tied-mtp", "model-00002-of-00002.safetensors"),
               os.path.join(MTP2_DIR, shards[1]))
    sd = {k: v.detach().float().contiguous() for k, v in mods[1].state_dict_ds(L + 1).items()}
    save_file(sd, os.path.join(MTP2_DIR, shards[2]), metadata={"format": "pt"})
    wmap = {k: shards[0] for k in load_file(os.path.join(TARGET, "model.safetensors"))}
    wmap.update({k: shards[1] for k in load_file(mod0_file)})
    wmap.update({k: shards[2] for k in sd})
    with open(os.path.join(MTP2_DIR, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": dict(sorted(wmap.items()))}, f, indent=2)

    out = os.path.join(GOLD, "mtp2-fixture")
    os.makedirs(out, exist_ok=True)
    tensors, doc = {}, {"contexts": []}
    apart = float("inf")
    with torch.no_grad():
        for name, x in ctxs:
            n = x.shape[0] - 1
            H = final_hidden(target, x.unsqueeze(0))[0]
            logits, drafts, chain = mtp_chain_multi(mods, target, x, H, MTP2_DEPTH)
            _, _, chain0 = mtp_chain_multi(mods[:1], target, x, H, MTP2_DEPTH)
            # the first draft is module 0's either way; from step 1 on the rules differ
            apart = min(apart, (chain[1:] - chain0[1:]).abs().amax(-1).min().item())
            rows = sorted({0, n - 1} | ({127, 128} & set(range(n))))
            tensors.update({name + ".tokens": x.float(), name + ".h": H.float().contiguous(),
                            name + ".rows": torch.tensor(rows).float(),
                            name + ".row_logits": logits[rows].float().contiguous(),
                            name + ".draft_tokens": drafts.float(), name + ".draft_logits": chain.float()})
            doc["contexts"].append({"name": name, "n_tokens": n + 1, "rows": rows, "draft_tokens": drafts.tolist(),
                                    "draft_modules": [k % len(mods) for k in range(MTP2_DEPTH)]})
    print("mtp2: step-mod-n vs module 0 alone, chained steps: min over steps of max |Δ logit| %.3g" % apart)
    doc.update({"model": "tests/fixtures/qwen3-tied-mtp2 (MTP modules model.layers.%d.*, model.layers.%d.*)"
                         % (L, L + 1),
                "depth": MTP2_DEPTH, "n_modules": len(mods),
                "rule": "draft step k (0-based) uses module k mod n; every module's K/V cache holds every row "
                        "(true and chained); the hidden chained is g after the drafting module's final norm "
                        "(module 1: its own shared_head.norm)",
                "first_module_only_min_step_diff": apart,
                "tensors": "as tests/golden/mtp/golden.json (scripts/goldens/make_drafter_goldens.py); row_logits are "
                           "module 0's causal rows",
                "command": "scripts/goldens/make_drafter_fixture.py --mtp2 --mtp2-steps %d --seed %d" % (steps, seed),
                "precision": "f32 weights and arithmetic"})
    save_file(tensors, os.path.join(out, "golden.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(out, "golden.json"), "w") as f:
        json.dump(doc, f, indent=1)
    for d in (MTP2_DIR, out):
        size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)
                   if not os.path.islink(os.path.join(d, f)))
        print("%s: %d bytes" % (os.path.relpath(d, ROOT), size))
        if size > 1 << 19:
            raise SystemExit("%s is over 512 KB" % d)


def main_mtp2(args):
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed + 200)
    target = Qwen3ForCausalLM.from_pretrained(TARGET, torch_dtype=torch.float32).eval()
    for p in target.parameters():
        p.requires_grad_(False)
    mod0 = tm.MTP(target.config)
    mod0.load_ds(load_file(os.path.join(MTP_DIR, "model-00002-of-00002.safetensors")), target.config.num_hidden_layers,
                 target.model.norm.weight)
    mod0 = mod0.float().eval()
    for p in mod0.parameters():
        p.requires_grad_(False)
    check_against_mtp_golden(target, mod0)
    data = sequences(target, 128, 24, 168, gen)
    held = sequences(target, 4, 16, 170, torch.Generator().manual_seed(args.seed + 100))
    mod1 = train_mtp_second(target, mod0, data, args.mtp2_steps, gen)
    with torch.no_grad():
        hits = [0, 0]
        for i in range(held.shape[0]):
            for a in range(20, held.shape[1] - MTP2_DEPTH - 1, 9):
                _, d, _ = mtp_chain_multi([mod0, mod1], target, held[i, :a + 1],
                                          final_hidden(target, held[i:i + 1, :a + 1])[0], 2)
                hits[0] += int(d[0] == held[i, a + 1])
                hits[1] += int(d[0] == held[i, a + 1] and d[1] == held[i, a + 2])
        print("mtp2 held-out: first draft right %d, first two right %d" % tuple(hits))
    write_mtp2(target, [mod0, mod1], [("c0", held[0, :24]), ("c2", held[2, :160])], args.mtp2_steps, args.seed)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--bundled-chain", action="store_true",
                    help="only write tests/golden/dspark-chain from the bundled models/tiny-dspark")
    ap.add_argument("--mtp2", action="store_true",
                    help="only write tests/fixtures/qwen3-tied-mtp2 and tests/golden/mtp2-fixture")
    ap.add_argument("--mtp2-steps", type=int, default=60, help="Adam steps for the second MTP module")
    ap.add_argument("--final-tap", action="store_true",
                    help="only write tests/fixtures/dspark-tiny-final and tests/golden/dspark-final-{raw,normed}")
    ap.add_argument("--final-steps", type=int, default=200, help="Adam steps for the final-tap DSpark fixture")
    args = ap.parse_args()
    if args.final_tap:
        torch.set_num_threads(2)
        main_final_tap(args)
        return
    if args.mtp2:
        torch.set_num_threads(2)
        main_mtp2(args)
        return
    if args.bundled_chain:
        torch.set_num_threads(2)
        bundled_chain_golden()
        return
    torch.manual_seed(args.seed)
    torch.set_num_threads(2)
    gen = torch.Generator().manual_seed(args.seed)
    target = Qwen3ForCausalLM.from_pretrained(TARGET, torch_dtype=torch.float32).eval()
    for p in target.parameters():
        p.requires_grad_(False)
    data = sequences(target, 512, 24, 168, gen)
    held = sequences(target, 4, 16, 170, torch.Generator().manual_seed(args.seed + 100))

    mtp = train_mtp(target, data, args.steps, gen)
    with torch.no_grad():
        T = held.shape[1]
        lg, _, _, _ = mtp(target, held[:, 1:-1], final_hidden(target, held)[:, :-2],
                          torch.arange(T - 2).unsqueeze(0).expand(held.shape[0], -1))
        print("mtp held-out next-next-token accuracy %.3f" % (lg.argmax(-1) == held[:, 2:]).float().mean().item())
    mtp_ctx = [("c0", held[0, :24]), ("c1", held[1, :90]), ("c2", held[2, :160])]
    write_mtp(target, mtp, mtp_ctx)

    with open(os.path.join(TARGET, "config.json")) as f:
        dcfg = dspark_config(json.load(f))
    ds = dspark_module(dcfg)
    scaled_init(ds, gen)
    with torch.no_grad():
        ds.embed_tokens.weight.copy_(target.model.embed_tokens.weight)
        ds.lm_head.weight.copy_(target.lm_head.weight)
        torch.nn.init.zeros_(ds.markov_head.markov_w2.weight)
    stack = tm.Stack(target)
    ds = train_dspark(ds, target, stack, data, args.steps, gen)
    with torch.no_grad():
        hits = []
        for i in range(held.shape[0]):
            for a in range(20, held.shape[1] - BLOCK - 1, 7):
                t, _ = stack.taps(held[i:i + 1, :a], ds.target_layer_ids)
                toks, _, _, _ = ds.draft(ds.context(t), torch.tensor([[a]]), held[i, a].view(1, 1))
                hits.append((toks[0, 0] == held[i, a + 1:a + 1 + BLOCK]).float())
        print("dspark held-out slot agreement %s" % " ".join("%.2f" % v for v in torch.stack(hits).mean(0).tolist()))
    ds_ctx = [("c0", held[3, :20]), ("c1", held[1, :60]), ("c2", held[2, :140])]
    write_dspark(target, stack, ds, dcfg, ds_ctx)

    for d in (MTP_DIR, DS_DIR, os.path.join(GOLD, "mtp-fixture"), os.path.join(GOLD, "dspark-fixture")):
        size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)
                   if not os.path.islink(os.path.join(d, f)))
        print("%s: %d bytes" % (os.path.relpath(d, ROOT), size))
        if size > 1 << 20:
            raise SystemExit("%s is over 1 MB" % d)


if __name__ == "__main__":
    main()
