#!/usr/bin/env python3
"""make_forward_goldens.py — reference outputs of HF transformers for a model
directory, for tests/test_forward.c (which needs no Python to read them).

The reference is the vendor's code, not ours: Qwen3ForCausalLM (or
Qwen3MoeForCausalLM, whose meta.json also gets each prompt's smallest gap
between the k-th and (k+1)-th router probability, min_router_gap) from
transformers, weights upcast to float32 (specbed computes in f32 from
bf16/f16/f32 weights, so f32 HF is the like-for-like reference), eager
attention, one forward over each whole prompt.

Prompts (each 300+ tokens, so every check crosses position 128):
  - random token ids (two prompts, different seeds and lengths);
  - if DIR/tokenizer.json exists, real English text tokenized with it.

Output: OUT/golden.bin (format below, little-endian) and OUT/meta.json
(what produced it, for people; the C test reads only golden.bin).

  header:  char magic[8] = "SBFWDG1\\0"
           int32 n_prompts, vocab, hidden, n_layers
           uint64 weights_fnv1a64   FNV-1a 64 over the bytes of every
                                    *.safetensors file in DIR, sorted by name:
                                    lets the test say "goldens are stale"
  per prompt:
           int32 kind (0 random ids, 1 text), n_tokens, n_logit_pos, n_hidden_pos
           int32 ids[n_tokens]
           int32 argmax[n_tokens]         HF argmax of the logits at each position
           float32 margin[n_tokens]       top1 - top2 logit at each position
           int32 logit_pos[n_logit_pos]
           float32 logits[n_logit_pos][vocab]
           int32 hidden_pos[n_hidden_pos]
           float32 hidden[n_hidden_pos][hidden]   output of decoder layer 0
                                                  (HF hidden_states[1])

With --greedy N it also writes OUT/greedy.json: HF's greedy continuation
(generate, do_sample=False) of N tokens after the first 40 tokens of the
text prompt, with the top1-top2 margin at each step (so a test can see the
path has no near-tie). --random-prompts and --boundary-only shrink the file
for fixtures whose vocabulary makes each logit row large.

Usage: .venv/bin/python scripts/goldens/make_forward_goldens.py --model DIR --out DIR
       [--logit-positions N] [--max-bytes B] [--random-prompts K]
       [--boundary-only] [--greedy N]
"""
import argparse
import json
import os
import struct
import sys

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM

TEXT = (
    "The lighthouse keeper climbed the spiral stairs every evening at dusk, "
    "counting the steps as his father had taught him: one hundred and twelve, "
    "never more and never less. From the lamp room he could see the whole bay, "
    "the fishing boats coming home with their nets folded, the gulls circling "
    "above the harbour wall, and far to the west the dark line of the islands. "
    "He kept a logbook in which he wrote the weather, the ships that passed, "
    "and the passphrase that the harbour master changed each week. This week "
    "it was 'silver kettle forty-one', and he repeated it twice before writing "
    "it down, because a mistake in the log meant a long letter to the board. "
    "In winter the storms came in from the north and the waves broke over the "
    "rocks so hard that the whole tower hummed. On those nights he did not "
    "sleep; he sat by the lamp with a pot of tea and a book about the stars, "
    "checking the mechanism every hour, oiling the gears, trimming the wick. "
    "In summer the visitors arrived with cameras and questions. How old is "
    "the tower? Does the light ever go out? What do you do all day? He "
    "answered them patiently: the tower was built in 1862, the light had gone "
    "out only once, during the great storm of 1953, and all day he did what "
    "needed doing, which was mostly cleaning glass. When the children asked "
    "whether he was lonely he laughed and pointed at the gulls, the boats, "
    "the radio that crackled with the voices of the fishermen. At the end of "
    "the season he walked down to the village to post his reports, buy flour "
    "and lamp oil, and hear the news. The baker told him that the board had "
    "decided to automate the light next spring. He nodded, paid for his bread, "
    "and walked back along the cliff path. That evening he climbed the stairs "
    "again, counting, and when he reached the top he wrote in the log: "
    "'Wind south-west, sea calm, two trawlers and a yacht. Passphrase: silver "
    "kettle forty-one. All well.'"
)


def fnv1a64_dir(model_dir):
    h = 0xCBF29CE484222325
    prime = 0x100000001B3
    mask = 0xFFFFFFFFFFFFFFFF
    for name in sorted(os.listdir(model_dir)):
        if not name.endswith(".safetensors"):
            continue
        with open(os.path.join(model_dir, name), "rb") as f:
            data = f.read()
        # byte loop in numpy-free Python is slow but fine for ~1 MB fixtures
        for b in data:
            h = ((h ^ b) * prime) & mask
    return h


def boundary_positions(n):
    """The first row, both sides of 128 (and 64), the last row."""
    return sorted({p for p in (0, 63, 127, 128, 129, n - 1) if 0 <= p < n})


def sample_positions(n, want):
    """Both sides of 63/64, 127/128/129 and 255/256, the ends, then positions
    spread by repeated halving (n/2, n/4, 3n/4, n/8, ...) up to `want`."""
    pos = {p for p in (0, 1, 2, 63, 64, 127, 128, 129, 255, 256, n - 2, n - 1) if 0 <= p < n}
    k = 2
    while len(pos) < min(want, n) and k < 4 * n:
        for i in range(1, k, 2):
            if len(pos) < want:
                pos.add(int(round(i * (n - 1) / k)))
        k *= 2
    return sorted(pos)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="HF model directory")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--logit-positions", type=int, default=18,
                    help="full logit rows stored per prompt (size: this x vocab x 4 bytes)")
    ap.add_argument("--hidden-positions", type=int, default=8)
    ap.add_argument("--max-bytes", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--random-prompts", type=int, default=2, choices=(0, 1, 2))
    ap.add_argument("--boundary-only", action="store_true",
                    help="logit and hidden rows at 0, 63, 127, 128, 129 and the last position only")
    ap.add_argument("--greedy", type=int, default=0, help="greedy tokens to store in greedy.json")
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32,
                                                 attn_implementation="eager")
    model.eval()
    cfg = model.config
    vocab, hidden = cfg.vocab_size, cfg.hidden_size

    gen = torch.Generator().manual_seed(args.seed)
    prompts = [
        (0, torch.randint(0, vocab, (331,), generator=gen).tolist()),
        (0, torch.randint(0, vocab, (397,), generator=gen).tolist()),
    ][:args.random_prompts]
    tok_path = os.path.join(args.model, "tokenizer.json")
    if os.path.exists(tok_path):
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(tok_path)
        ids = tok.encode(TEXT, add_special_tokens=False).ids
        while len(ids) < 300:
            ids = ids + ids
        prompts.append((1, ids))

    out = bytearray()
    out += b"SBFWDG1\0"
    out += struct.pack("<4i", len(prompts), vocab, hidden, cfg.num_hidden_layers)
    out += struct.pack("<Q", fnv1a64_dir(args.model))
    meta = {"model": os.path.normpath(args.model), "transformers": transformers.__version__,
            "torch": torch.__version__, "dtype": "float32 (weights upcast)",
            "attn_implementation": "eager", "prompts": []}
    moe = getattr(cfg, "num_experts", 0) and getattr(cfg, "num_experts_per_tok", 0)
    for kind, ids in prompts:
        n = len(ids)
        with torch.no_grad():
            res = model(torch.tensor([ids]), output_hidden_states=True, **({"output_router_logits": True} if moe else {}))
        logits = res.logits[0].float().numpy()
        h0 = res.hidden_states[1][0].float().numpy()
        top2 = np.sort(logits, axis=-1)[:, -2:]
        argmax = logits.argmax(axis=-1).astype(np.int32)
        margin = (top2[:, 1] - top2[:, 0]).astype(np.float32)
        lpos = boundary_positions(n) if args.boundary_only else sample_positions(n, args.logit_positions)
        hpos = boundary_positions(n) if args.boundary_only else sample_positions(n, args.hidden_positions)
        out += struct.pack("<4i", kind, n, len(lpos), len(hpos))
        out += np.asarray(ids, dtype="<i4").tobytes()
        out += argmax.astype("<i4").tobytes()
        out += margin.astype("<f4").tobytes()
        out += np.asarray(lpos, dtype="<i4").tobytes()
        out += logits[lpos].astype("<f4").tobytes()
        out += np.asarray(hpos, dtype="<i4").tobytes()
        out += h0[hpos].astype("<f4").tobytes()
        meta["prompts"].append({
            "kind": "text" if kind else "random ids", "n_tokens": n, "logit_positions": lpos,
            "hidden_positions": hpos, "min_margin": float(margin.min()),
            "max_abs_logit": float(np.abs(logits).max())})
        if moe:
            # A Qwen3-MoE model routes each row to its top-k experts by router
            # probability: where the k-th and (k+1)-th are within rounding,
            # another implementation may route the row differently, so the
            # smallest gap says how far the goldens hold (test_forward.c).
            k = cfg.num_experts_per_tok
            gap = min(float((p[:, k - 1] - p[:, k]).min()) for p in
                      (torch.softmax(rl.float(), -1).sort(-1, descending=True).values for rl in res.router_logits))
            meta["prompts"][-1]["min_router_gap"] = gap
            print(f"  smallest gap between router probabilities {k} and {k + 1}: {gap:.3g}")
        print(f"prompt ({'text' if kind else 'random'}): {n} tokens, logit rows at {lpos}, "
              f"min top1-top2 margin {margin.min():.3g}, max |logit| {np.abs(logits).max():.3g}")

    greedy = None
    if args.greedy > 0:
        text = [ids for kind, ids in prompts if kind == 1]
        if not text:
            sys.exit("--greedy needs DIR/tokenizer.json (the text prompt)")
        prompt = text[0][:40]
        with torch.no_grad():
            res = model.generate(torch.tensor([prompt]), max_new_tokens=args.greedy, min_new_tokens=args.greedy,
                                 do_sample=False, output_scores=True, return_dict_in_generate=True,
                                 pad_token_id=0)
        tokens = res.sequences[0, len(prompt):].tolist()
        margins = [float(t[0].topk(2).values[0] - t[0].topk(2).values[1]) for t in res.scores]
        greedy = {"prompt_ids": prompt, "tokens": tokens, "margins": margins}
        print(f"greedy: {len(tokens)} tokens after a {len(prompt)}-token prompt, min margin {min(margins):.3g}")

    if len(out) > args.max_bytes:
        sys.exit(f"golden.bin would be {len(out)} bytes (> {args.max_bytes}); "
                 f"lower --logit-positions")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "golden.bin"), "wb") as f:
        f.write(out)
    with open(os.path.join(args.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    if greedy is not None:
        with open(os.path.join(args.out, "greedy.json"), "w") as f:
            json.dump(greedy, f)
            f.write("\n")
    print(f"wrote {os.path.join(args.out, 'golden.bin')}: {len(out)} bytes")


if __name__ == "__main__":
    main()
