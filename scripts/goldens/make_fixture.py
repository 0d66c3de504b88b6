#!/usr/bin/env python3
"""make_fixture.py — writes the tiny random Qwen3 checkpoints the tests load.

  tests/fixtures/qwen3-tied/     f32,  tie_word_embeddings=true  (no lm_head.weight)
  tests/fixtures/qwen3-untied/   bf16, tie_word_embeddings=false
  tests/fixtures/qwen3-sharded/  f16,  the untied model's (bf16-rounded) weights in
                                  2 shards + model.safetensors.index.json, so it
                                  computes the same function as qwen3-untied

Together they cover the three dtypes the loader accepts and both checkpoint
layouts. Each is a real HF checkpoint (Qwen3ForCausalLM.save_pretrained with
safe_serialization=True), GQA (4 heads, 2 kv heads, head_dim 16), with a copy
of the fixture tokenizer so a directory is a complete model.

Why not HF's default init: std 0.02 on a 64-wide model gives nearly uniform
logits, so greedy/argmax tests would hinge on near-ties. Weights here are
drawn with std gain/sqrt(fan_in) (unit-variance activations through every
matrix), embeddings with a std that puts logits a few units apart, and norm
weights 1 + noise. The script prints the median top1-top2 logit gap over a
random prompt so a reader can see margins are clear.

Usage: .venv/bin/python scripts/goldens/make_fixture.py [--tokenizer PATH] [--vocab N]
       [--out DIR] [--seed S]
"""
import argparse
import json
import math
import os
import shutil
import sys

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def tokenizer_info(path):
    """(vocab size incl. added tokens, eos id or None), or None if absent."""
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        tok = json.load(f)
    ids = list(tok["model"]["vocab"].values()) + [t["id"] for t in tok.get("added_tokens", [])]
    eos = None
    cfg_path = os.path.join(os.path.dirname(path), "tokenizer_config.json")
    if os.path.exists(cfg_path):
        with open(cfg_path, encoding="utf-8") as f:
            eos_str = json.load(f).get("eos_token")
        for t in tok.get("added_tokens", []):
            if t["content"] == eos_str:
                eos = t["id"]
    return max(ids) + 1, eos


def init_weights(model, gen, gain=1.0, embed_std=0.5):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            elif "embed_tokens" in name or name == "lm_head.weight":
                p.copy_(embed_std * torch.randn(p.shape, generator=gen))
            elif p.dim() == 2:
                p.copy_(gain / math.sqrt(p.shape[1]) * torch.randn(p.shape, generator=gen))
            else:
                raise SystemExit(f"unexpected parameter {name} {tuple(p.shape)}")


def median_gap(model, vocab, gen, n=64):
    prompt = torch.randint(0, vocab, (1, n), generator=gen)
    with torch.no_grad():
        logits = model(prompt).logits[0].float()
    top2 = logits.topk(2, dim=-1).values
    gaps = (top2[:, 0] - top2[:, 1]).sort().values
    return gaps[n // 2].item(), gaps[0].item(), logits.std().item()


def copy_tokenizer(tok_path, out_dir):
    if not os.path.exists(tok_path):
        return
    src = os.path.dirname(tok_path)
    shutil.copy(tok_path, os.path.join(out_dir, "tokenizer.json"))
    tc = os.path.join(src, "tokenizer_config.json")
    if os.path.exists(tc):
        shutil.copy(tc, os.path.join(out_dir, "tokenizer_config.json"))


def save(model, out_dir, dtype, tok_path, **kw):
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    model.to(dtype).save_pretrained(out_dir, safe_serialization=True, **kw)
    model.to(torch.float32)
    copy_tokenizer(tok_path, out_dir)
    size = sum(os.path.getsize(os.path.join(out_dir, f)) for f in os.listdir(out_dir))
    print(f"{os.path.relpath(out_dir, ROOT)}: {dtype}, {size / 1e6:.2f} MB, "
          f"files: {', '.join(sorted(os.listdir(out_dir)))}")
    if size > 2_000_000:
        raise SystemExit(f"{out_dir} is {size} bytes; fixtures must stay under 2 MB")


def make_config(vocab, eos, tied):
    return Qwen3Config(
        vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        max_position_embeddings=1024, rope_theta=10000.0, rms_norm_eps=1e-6,
        tie_word_embeddings=tied, bos_token_id=None, eos_token_id=eos,
        architectures=["Qwen3ForCausalLM"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokenizer", default=os.path.join(ROOT, "tests/fixtures/tokenizer/tokenizer.json"))
    ap.add_argument("--vocab", type=int, default=None,
                    help="vocab size when the tokenizer file is absent (default 4100)")
    ap.add_argument("--out", default=os.path.join(ROOT, "tests/fixtures"))
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()

    info = tokenizer_info(args.tokenizer)
    if info:
        vocab, eos = info
        if args.vocab is not None and args.vocab != vocab:
            raise SystemExit(f"--vocab {args.vocab} contradicts {args.tokenizer} ({vocab})")
    else:
        print(f"warning: {args.tokenizer} not found; no tokenizer copied", file=sys.stderr)
        vocab, eos = (args.vocab or 4100), None
    torch.manual_seed(args.seed)

    for tied in (True, False):
        gen = torch.Generator().manual_seed(args.seed + int(tied))
        model = Qwen3ForCausalLM(make_config(vocab, eos, tied)).float().eval()
        init_weights(model, gen)
        if not tied:
            # Round to bf16 first, so qwen3-untied (bf16) and qwen3-sharded (f16)
            # hold the same values: bf16 -> f16 is exact at these magnitudes
            # except for the few weights below f16's normal range (~6e-5).
            model.to(torch.bfloat16).to(torch.float32)
        med, lo, sd = median_gap(model, vocab, torch.Generator().manual_seed(args.seed + 7))
        print(f"{'tied' if tied else 'untied'}: vocab {vocab}, logit std {sd:.2f}, "
              f"top1-top2 gap median {med:.3f}, min {lo:.4f} (64 random tokens)")
        if tied:
            save(model, os.path.join(args.out, "qwen3-tied"), torch.float32, args.tokenizer)
        else:
            save(model, os.path.join(args.out, "qwen3-untied"), torch.bfloat16, args.tokenizer)
            # Same weights, f16, split by HF's own sharding into 2 files.
            save(model, os.path.join(args.out, "qwen3-sharded"), torch.float16, args.tokenizer,
                 max_shard_size="700KB")
            n = len([f for f in os.listdir(os.path.join(args.out, "qwen3-sharded"))
                     if f.endswith(".safetensors")])
            if n != 2:
                raise SystemExit(f"qwen3-sharded has {n} shards, expected 2")


if __name__ == "__main__":
    main()
