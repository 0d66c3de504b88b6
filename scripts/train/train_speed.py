"""train_speed.py — training throughput of target-shaped models on this CPU,
per precision, before committing to a training run (models/README.md cites
it). Random tokens, no corpus: AdamW steps of --batch × --seq tokens, the
first step untimed.

Usage: .venv/bin/python scripts/train/train_speed.py [--steps 3] [--batch 8] [--seq 512]
Owns nothing; writes nothing."""
import argparse
import time

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

import tiny_common as tc

SHAPES = (("target (4 layers, d 256, 4 q / 2 kv heads of 64)", {}),
          ("8 q / 4 kv heads of 32", dict(num_attention_heads=8, num_key_value_heads=4, head_dim=32)),
          ("6 layers", dict(num_hidden_layers=6)))


def tok_per_s(over, precision, steps, batch, seq):
    cfg = dict(tc.TARGET)
    cfg.update(over)
    model = Qwen3ForCausalLM(Qwen3Config(**cfg))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randint(0, cfg["vocab_size"] - 4, (batch, seq))

    def step():
        with tc.autocast(precision):
            loss = model(input_ids=x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    step()
    t = time.time()
    for _ in range(steps):
        step()
    return batch * seq * steps / (time.time() - t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    args = ap.parse_args()
    tc.setup_torch(0)
    print("torch %s, %d threads, CPU kernels %s" % (torch.__version__, torch.get_num_threads(),
                                                     torch.backends.cpu.get_cpu_capability()))
    for precision in ("bf16", "f32"):
        for i, (name, over) in enumerate(SHAPES):
            if precision == "bf16" and i > 0:
                continue   # bf16's cost is the question for the target; the shapes compare in f32
            print("%-50s %-4s %7.0f tok/s" % (name, precision, tok_per_s(over, precision, args.steps, args.batch,
                                                                            args.seq)), flush=True)


if __name__ == "__main__":
    main()
