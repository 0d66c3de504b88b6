#!/usr/bin/env python3
"""make_moe_fixture.py — the tiny random Qwen3-MoE checkpoints the tests load,
and their HF goldens.

  tests/fixtures/qwen3-moe-tiny/         Qwen3MoeForCausalLM, bf16, tied embeddings,
                                         3 layers: 0 and 2 sparse (8 experts, top-2,
                                         moe_intermediate_size 32), 1 dense
                                         (mlp_only_layers [1]); norm_topk_prob true.
                                         Per-expert tensors, as the released
                                         checkpoints store them, in 2 shards:
                                         model-00001 everything but the experts,
                                         model-00002 the experts.
  tests/fixtures/qwen3-moe-tiny-fused/   the same weights with the experts as
                                         transformers 5 keeps them (fused 3-D
                                         mlp.experts.gate_up_proj [E, 2I, H], gate
                                         rows first, and mlp.experts.down_proj
                                         [E, H, I]; conversion_mapping.py
                                         "qwen2_moe", which qwen3_moe copies);
                                         model-00001 is a link to the per-expert one's
  tests/fixtures/qwen3-moe-tiny-nonorm/  the same weights, norm_topk_prob false and
                                         top-3 (both shards links): with 3 experts a
                                         row's sum depends on its order, which top-2
                                         from zero does not show
  tests/golden/forward/qwen3-moe-tiny{,-nonorm}/   HF goldens
                                         (scripts/goldens/make_forward_goldens.py, boundary
                                         rows only, and greedy.json for the first)

Sizes: hidden 32 (2 heads × 16, 1 kv head) keeps the 4096-row embedding,
the one large tensor, at 256 KB in bf16, so everything committed stays
under 1 MB. The tokenizer files are links to tests/fixtures/tokenizer/.
Weights are drawn as make_fixture.py draws them (unit-variance activations
through every matrix); the script prints the smallest gap between the
k-th and (k+1)-th router probability over the golden prompts, which says
how far the routing is from a tie that rounding could flip.

Usage: .venv/bin/python scripts/goldens/make_moe_fixture.py [--seed S]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import torch
from safetensors.torch import save_file
from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixture import init_weights, median_gap, tokenizer_info  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIX = os.path.join(ROOT, "tests/fixtures")
GOLD = os.path.join(ROOT, "tests/golden/forward")
TOK = os.path.join(FIX, "tokenizer/tokenizer.json")
SHARD1, SHARD2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"


def make_config(vocab, eos, norm):
    return Qwen3MoeConfig(
        vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
        num_attention_heads=2, num_key_value_heads=1, head_dim=16,
        max_position_embeddings=1024, rope_theta=10000.0, rms_norm_eps=1e-6,
        tie_word_embeddings=True, bos_token_id=None, eos_token_id=eos,
        num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
        decoder_sparse_step=1, mlp_only_layers=[1], norm_topk_prob=norm,
        architectures=["Qwen3MoeForCausalLM"])


def fresh_dir(path):
    if os.path.isdir(path):
        shutil.rmtree(path)
    os.makedirs(path)


def link(dst_dir, name, target):
    os.symlink(target, os.path.join(dst_dir, name))


def write_config(model, out):
    model.config.save_pretrained(out)
    for f in ("generation_config.json",):
        p = os.path.join(out, f)
        if os.path.exists(p):
            os.remove(p)


def write_shards(out, dense, experts, link_dense_from=None):
    """dense, experts: name -> bf16 tensor. Writes the two shards (shard 1
    as a link when link_dense_from is given) and the index."""
    if link_dense_from:
        link(out, SHARD1, os.path.join("..", link_dense_from, SHARD1))
    else:
        save_file(dense, os.path.join(out, SHARD1), metadata={"format": "pt"})
    save_file(experts, os.path.join(out, SHARD2), metadata={"format": "pt"})
    size = sum(t.numel() * t.element_size() for t in list(dense.values()) + list(experts.values()))
    index = {"metadata": {"total_size": size},
             "weight_map": {**{k: SHARD1 for k in sorted(dense)}, **{k: SHARD2 for k in sorted(experts)}}}
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")


def link_tokenizer(out):
    for f in ("tokenizer.json", "tokenizer_config.json"):
        if os.path.exists(os.path.join(os.path.dirname(TOK), f)):
            link(out, f, os.path.join("..", "tokenizer", f))


def router_gap(model, vocab, gen):
    """Smallest p_k - p_(k+1) over the router rows of a random prompt."""
    gaps = []

    def hook(_m, _inp, out):
        p = torch.softmax(out.float(), dim=-1).sort(dim=-1, descending=True).values
        k = model.config.num_experts_per_tok
        gaps.append((p[:, k - 1] - p[:, k]).min().item())

    hs = [layer.mlp.gate.register_forward_hook(hook) for layer in model.model.layers
          if hasattr(layer.mlp, "gate") and isinstance(layer.mlp.gate, torch.nn.Linear)]
    with torch.no_grad():
        model(torch.randint(0, vocab, (1, 400), generator=gen))
    for h in hs:
        h.remove()
    return min(gaps)


def goldens(model_dir, out, extra):
    cmd = [sys.executable, os.path.join(ROOT, "scripts/goldens/make_forward_goldens.py"), "--model", model_dir,
           "--out", out, "--boundary-only"] + extra
    print(" ".join(os.path.relpath(c, ROOT) if c.startswith(ROOT) else c for c in cmd))
    subprocess.run(cmd, check=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=4141)
    args = ap.parse_args()
    info = tokenizer_info(TOK)
    if not info:
        raise SystemExit(f"{TOK} is missing")
    vocab, eos = info
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    model = Qwen3MoeForCausalLM(make_config(vocab, eos, True)).float().eval()
    init_weights(model, gen)
    model.to(torch.bfloat16).to(torch.float32)   # the values the bf16 files hold
    med, lo, sd = median_gap(model, vocab, torch.Generator().manual_seed(args.seed + 7))
    print(f"logit std {sd:.2f}, top1-top2 gap median {med:.3f}, min {lo:.4f} (64 random tokens); "
          f"router k-th vs (k+1)-th probability gap min {router_gap(model, vocab, torch.Generator().manual_seed(1)):.2e}")

    sd_all = {k: v.to(torch.bfloat16).contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    dense = {k: v for k, v in sd_all.items() if ".mlp.experts." not in k}
    experts = {k: v for k, v in sd_all.items() if ".mlp.experts." in k}
    fused = {}
    cfg = model.config
    for layer in range(cfg.num_hidden_layers):
        p = f"model.layers.{layer}.mlp.experts."
        if p + "0.gate_proj.weight" not in experts:
            continue
        E = cfg.num_experts
        gate = torch.stack([experts[f"{p}{e}.gate_proj.weight"] for e in range(E)])   # [E, I, H]
        up = torch.stack([experts[f"{p}{e}.up_proj.weight"] for e in range(E)])
        fused[p + "gate_up_proj"] = torch.cat([gate, up], dim=1).contiguous()        # [E, 2I, H]
        fused[p + "down_proj"] = torch.stack([experts[f"{p}{e}.down_proj.weight"] for e in range(E)]).contiguous()

    main_dir = os.path.join(FIX, "qwen3-moe-tiny")
    fresh_dir(main_dir)
    write_config(model, main_dir)
    write_shards(main_dir, dense, experts)
    link_tokenizer(main_dir)

    fused_dir = os.path.join(FIX, "qwen3-moe-tiny-fused")
    fresh_dir(fused_dir)
    write_config(model, fused_dir)
    write_shards(fused_dir, dense, fused, link_dense_from="qwen3-moe-tiny")
    link_tokenizer(fused_dir)

    nonorm_dir = os.path.join(FIX, "qwen3-moe-tiny-nonorm")
    fresh_dir(nonorm_dir)
    model.config.norm_topk_prob = False
    model.config.num_experts_per_tok = 3
    write_config(model, nonorm_dir)
    model.config.norm_topk_prob = True
    model.config.num_experts_per_tok = 2
    link(nonorm_dir, SHARD1, os.path.join("..", "qwen3-moe-tiny", SHARD1))
    link(nonorm_dir, SHARD2, os.path.join("..", "qwen3-moe-tiny", SHARD2))
    shutil.copy(os.path.join(main_dir, "model.safetensors.index.json"), nonorm_dir)
    link_tokenizer(nonorm_dir)

    goldens(main_dir, os.path.join(GOLD, "qwen3-moe-tiny"), ["--random-prompts", "1", "--greedy", "40"])
    goldens(nonorm_dir, os.path.join(GOLD, "qwen3-moe-tiny-nonorm"), ["--random-prompts", "0"])
    total = 0
    for d in (main_dir, fused_dir, nonorm_dir, os.path.join(GOLD, "qwen3-moe-tiny"),
              os.path.join(GOLD, "qwen3-moe-tiny-nonorm")):
        for f in os.listdir(d):
            p = os.path.join(d, f)
            if not os.path.islink(p):
                total += os.path.getsize(p)
    print(f"committed bytes (links not counted): {total}")
    if total > 1_000_000:
        raise SystemExit(f"{total} bytes; the MoE fixtures must stay under 1 MB")


if __name__ == "__main__":
    main()
