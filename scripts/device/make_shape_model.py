#!/usr/bin/env python3
"""make_shape_model.py — a model directory with a real model's body and random weights.

For measuring the engine at a real model's size where the real weights are
not at hand (the GPU machine reaches no network): every tensor of a Qwen3
checkpoint at a named shape, bf16, drawn from one fixed seed, with the
bundled tokenizer (models/tiny: its 4,096-token vocabulary, so the vocab
dimension is 4,096, not the real model's 151,936) and a config.json laid out
as transformers 5 writes a Qwen3 config (rope_parameters rather than a
top-level rope_theta, "dtype" rather than "torch_dtype").

    scripts/device/make_shape_model.py qwen3-0.6b OUT_DIR
    scripts/device/make_shape_model.py qwen3-8b OUT_DIR [--seed N]

Shapes (the body of the real models; vocab 4,096):
    qwen3-0.6b  hidden 1024, 28 layers, 16/8 heads, head_dim 128, intermediate 3072, tied head  (~0.89 GB)
    qwen3-8b    hidden 4096, 36 layers, 32/8 heads, head_dim 128, intermediate 12288, own head  (~15.2 GB)
Mixture of experts (Qwen3MoeForCausalLM: every layer sparse, per-expert
tensors as the released checkpoints store them, norm_topk_prob true):
    qwen3-30b-a3b   hidden 2048, 48 layers, 32/4 heads, head_dim 128, 128 experts, top 8,
                    moe_intermediate 768, own head: Qwen3-30B-A3B's config.json  (~58 GB)
    qwen3-moe-small hidden 1024, 16 layers, 16/8 heads, head_dim 128, 64 experts, top 8,
                    moe_intermediate 384, tied head: a 30B-A3B-like layer that fits this
                    machine's memory; 8 × 384 = 3072 active, the 0.6B's MLP  (~2.6 GB)
    qwen3-moe-small-dense  the same body with one dense MLP of 3072: the dense model of
                    equal active size, to compare a verify step against  (~0.6 GB)

Weights: N(0, 0.02²) matrices (transformers' initializer_range), norm gains
N(1, 0.1²), rounded to bf16 (nearest even). To write 15 GB in seconds, the
draws come from one pool of 2²⁶ normal values: each tensor is the pool read
from its own random offset onwards (wrapping round). The weights are
therefore not independent across tensors — irrelevant for speed, and the
CPU, CUDA and HF runs read the same file. Needs numpy only; the
safetensors file is written directly (8-byte little-endian header length,
the JSON header, the tensors' bytes in header order).
"""
import argparse
import json
import os
import shutil
import struct
import sys

import numpy as np

SHAPES = {
    "qwen3-0.6b": dict(hidden_size=1024, num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8,
                       head_dim=128, intermediate_size=3072, tie_word_embeddings=True),
    "qwen3-8b": dict(hidden_size=4096, num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8,
                     head_dim=128, intermediate_size=12288, tie_word_embeddings=False),
    # Qwen/Qwen3-30B-A3B config.json: intermediate_size 6144 is kept as published (no layer reads it:
    # mlp_only_layers is empty and decoder_sparse_step 1)
    "qwen3-30b-a3b": dict(hidden_size=2048, num_hidden_layers=48, num_attention_heads=32, num_key_value_heads=4,
                          head_dim=128, intermediate_size=6144, tie_word_embeddings=False,
                          num_experts=128, num_experts_per_tok=8, moe_intermediate_size=768),
    "qwen3-moe-small": dict(hidden_size=1024, num_hidden_layers=16, num_attention_heads=16, num_key_value_heads=8,
                            head_dim=128, intermediate_size=3072, tie_word_embeddings=True,
                            num_experts=64, num_experts_per_tok=8, moe_intermediate_size=384),
    "qwen3-moe-small-dense": dict(hidden_size=1024, num_hidden_layers=16, num_attention_heads=16,
                                  num_key_value_heads=8, head_dim=128, intermediate_size=3072,
                                  tie_word_embeddings=True),
}
POOL = 1 << 26
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOKENIZER_DIR = os.path.join(ROOT, "models", "tiny")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "generation_config.json")


def to_bf16(f):
    """float32 array -> uint16 bf16 bit patterns, round to nearest even (finite inputs)."""
    u = f.astype(np.float32).view(np.uint32)
    u = u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))
    return (u >> np.uint32(16)).astype(np.uint16)


def tensors(s, vocab):
    """(name, shape, kind) in the order written; kind 'w' matrix, 'g' norm gain."""
    h, hd, i = s["hidden_size"], s["head_dim"], s["intermediate_size"]
    q, kv = s["num_attention_heads"] * hd, s["num_key_value_heads"] * hd
    out = [("model.embed_tokens.weight", (vocab, h), "w")]
    for l in range(s["num_hidden_layers"]):
        p = f"model.layers.{l}."
        out += [(p + "input_layernorm.weight", (h,), "g"),
                (p + "self_attn.q_proj.weight", (q, h), "w"),
                (p + "self_attn.k_proj.weight", (kv, h), "w"),
                (p + "self_attn.v_proj.weight", (kv, h), "w"),
                (p + "self_attn.q_norm.weight", (hd,), "g"),
                (p + "self_attn.k_norm.weight", (hd,), "g"),
                (p + "self_attn.o_proj.weight", (h, q), "w"),
                (p + "post_attention_layernorm.weight", (h,), "g")]
        if "num_experts" in s:   # the router, then each expert's SwiGLU MLP
            mi = s["moe_intermediate_size"]
            out.append((p + "mlp.gate.weight", (s["num_experts"], h), "w"))
            for e in range(s["num_experts"]):
                out += [(p + f"mlp.experts.{e}.gate_proj.weight", (mi, h), "w"),
                        (p + f"mlp.experts.{e}.up_proj.weight", (mi, h), "w"),
                        (p + f"mlp.experts.{e}.down_proj.weight", (h, mi), "w")]
        else:
            out += [(p + "mlp.gate_proj.weight", (i, h), "w"),
                    (p + "mlp.up_proj.weight", (i, h), "w"),
                    (p + "mlp.down_proj.weight", (h, i), "w")]
    out.append(("model.norm.weight", (h,), "g"))
    if not s["tie_word_embeddings"]:
        out.append(("lm_head.weight", (vocab, h), "w"))
    return out


def config(name, s, tiny):
    n_layers = s["num_hidden_layers"]
    c = {
        "architectures": ["Qwen3ForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": tiny.get("bos_token_id"),
        "dtype": "bfloat16",
        "eos_token_id": tiny.get("eos_token_id"),
        "head_dim": s["head_dim"],
        "hidden_act": "silu",
        "hidden_size": s["hidden_size"],
        "initializer_range": 0.02,
        "intermediate_size": s["intermediate_size"],
        "layer_types": ["full_attention"] * n_layers,
        "max_position_embeddings": 40960,
        "max_window_layers": n_layers,
        "model_type": "qwen3",
        "num_attention_heads": s["num_attention_heads"],
        "num_hidden_layers": n_layers,
        "num_key_value_heads": s["num_key_value_heads"],
        "pad_token_id": tiny.get("pad_token_id"),
        "rms_norm_eps": 1e-06,
        "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"},
        "sliding_window": None,
        "tie_word_embeddings": s["tie_word_embeddings"],
        "transformers_version": "5.17.0",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": tiny["vocab_size"],
        "specbed_shape_model": name,
    }
    if "num_experts" in s:   # transformers' Qwen3MoeConfig fields, as Qwen3-30B-A3B's config.json has them
        c.update({"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
                  "num_experts": s["num_experts"], "num_experts_per_tok": s["num_experts_per_tok"],
                  "moe_intermediate_size": s["moe_intermediate_size"], "norm_topk_prob": True,
                  "decoder_sparse_step": 1, "mlp_only_layers": [], "output_router_logits": False,
                  "router_aux_loss_coef": 0.001})
    return c


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("shape", choices=sorted(SHAPES))
    ap.add_argument("out_dir")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    s = SHAPES[a.shape]
    with open(os.path.join(TOKENIZER_DIR, "config.json")) as f:
        tiny = json.load(f)
    vocab = tiny["vocab_size"]
    os.makedirs(a.out_dir, exist_ok=True)

    rng = np.random.default_rng(a.seed)
    pool_w = to_bf16(rng.standard_normal(POOL, dtype=np.float32) * np.float32(0.02))
    pool_g = to_bf16(np.float32(1.0) + rng.standard_normal(1 << 16, dtype=np.float32) * np.float32(0.1))
    plan = tensors(s, vocab)
    header, off = {}, 0
    for name, shape, _ in plan:
        n = int(np.prod(shape)) * 2
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    header["__metadata__"] = {"format": "pt", "specbed_shape_model": a.shape, "seed": str(a.seed)}
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * (-len(hb) % 8)   # the data starts 8-byte aligned
    path = os.path.join(a.out_dir, "model.safetensors")
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for name, shape, kind in plan:
            n = int(np.prod(shape))
            pool = pool_w if kind == "w" else pool_g
            start = int(rng.integers(0, len(pool)))
            while n > 0:   # the pool from start, wrapping round
                k = min(n, len(pool) - start)
                f.write(memoryview(pool[start:start + k]).cast("B"))
                n -= k
                start = 0
    os.replace(path + ".tmp", path)
    with open(os.path.join(a.out_dir, "config.json"), "w") as f:
        json.dump(config(a.shape, s, tiny), f, indent=2)
        f.write("\n")
    for fn in TOKENIZER_FILES:
        src = os.path.join(TOKENIZER_DIR, fn)
        if os.path.exists(src):
            shutil.copyfile(src, os.path.join(a.out_dir, fn))
    print(f"make_shape_model: {a.shape} -> {a.out_dir} ({off / 1e9:.2f} GB of bf16, {len(plan)} tensors, "
          f"seed {a.seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
