#!/usr/bin/env python3
"""deepspec_eval.py — DeepSpec's own DSpark evaluator against specbed's drafts
on the bundled models (run by scripts/compare/deepspec_eval.sh; not part of CI).

Owns: driving DeepSpec's evaluator (deepspec/eval/dspark/evaluator.py,
Qwen3DSparkEvaluator) as it is, from a DeepSpec checkout given by path, on
workload prompts, and comparing what it drafts and accepts with `specbed
generate --drafter dspark` on the same prompts.
Must not: edit, copy or monkey-patch DeepSpec's code (it is imported from
the checkout); fetch anything.

What runs of DeepSpec's: Qwen3DSparkEvaluator.build_models (its model
loading, and its assert_no_final_target_layer, which refuses a checkpoint
that taps the target's final layer: then this script prints DeepSpec's
message and exits 3) and generate_one_sample (DeepSpec's drafting,
verification and acceptance loop, greedy: temperature 0). Its __init__ is
skipped because it starts torch.distributed on CUDA; the evaluator is made
with __new__ and given the attributes __init__ would set (args, device,
models). build_models loads both models in bf16; they are then cast to f32
(exact: the weights are bf16) so that both sides compute in f32, as specbed
does, and a greedy tie is not decided by rounding.

Comparison, per prompt (the prompt tokenized without special tokens, no
chat template; no stop tokens, specbed with --ignore-eos): DeepSpec runs
with max_new_tokens = N + block_size + 1, so its steps cover specbed's
budget of N completion tokens; specbed runs at --depth block_size (one
block per step, as DeepSpec drafts). Then
  - the completion tokens must be equal (both are the target's greedy
    continuation);
  - DeepSpec's per-step accepted draft counts are replayed under specbed's
    budget (a step drafts k = min(block_size, tokens left - 1), 0 = a step
    without drafts; it commits min(accepted, k) + 1) and must give specbed's
    --stats-json counts exactly: drafts, accepted tokens and accepted tokens
    at each position (per-position rate x drafts).
Exit 0 when every prompt agrees, 1 when one does not, 3 when DeepSpec
refuses the checkpoint, 2 on a usage error.

Usage: deepspec_eval.py --deepspec DIR --specbed BIN [--target models/tiny]
         [--draft models/tiny-dspark] [--workloads code,prose] [--num-prompts 4]
         [--max-tokens 64] [--specbed-args "..."]
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from types import SimpleNamespace

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def prompts(workloads, n):
    out = []
    for w in workloads.split(","):
        with open(os.path.join(ROOT, "workloads", w + ".jsonl"), encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
        out += [(r["id"], r["prompt"]) for r in rows[:n]]
    return out


def replay(accepted, budget, G):
    """DeepSpec's per-step accepted counts under specbed's budget of
    `budget` completion tokens (the first comes from the prefill)."""
    left, drafts, acc, pos = budget - 1, 0, 0, [0] * G
    for a in accepted:
        if left <= 0:
            break
        k = min(G, left - 1)
        got = min(a, k)
        if k > 0:
            drafts += 1
            acc += got
            for i in range(got):
                pos[i] += 1
        left -= got + 1
    return drafts, acc, pos


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--deepspec", required=True, help="a DeepSpec checkout (its root, holding deepspec/)")
    ap.add_argument("--specbed", required=True, help="the specbed binary")
    ap.add_argument("--target", default=os.path.join(ROOT, "models", "tiny"))
    ap.add_argument("--draft", default=os.path.join(ROOT, "models", "tiny-dspark"))
    ap.add_argument("--workloads", default="code,prose")
    ap.add_argument("--num-prompts", type=int, default=4, help="per workload")
    ap.add_argument("--max-tokens", type=int, default=64, help="completion tokens (specbed --max-tokens)")
    ap.add_argument("--specbed-args", default="", help="extra `specbed generate` arguments")
    args = ap.parse_args()
    if not os.path.isfile(os.path.join(args.deepspec, "deepspec", "eval", "dspark", "evaluator.py")):
        print("deepspec_eval: %s is not a DeepSpec checkout (no deepspec/eval/dspark/evaluator.py)" % args.deepspec,
              file=sys.stderr)
        return 2
    sys.path.insert(0, os.path.abspath(args.deepspec))
    import torch
    from deepspec.eval.dspark import Qwen3DSparkEvaluator

    torch.set_num_threads(int(os.environ.get("SPECBED_THREADS", "2")))
    ev = Qwen3DSparkEvaluator.__new__(Qwen3DSparkEvaluator)
    ev.args = SimpleNamespace(target_name_or_path=args.target, draft_name_or_path=args.draft, temperature=0.0,
                              confidence_threshold=0.0, max_new_tokens=args.max_tokens, tensorboard_dir=None,
                              step=None, seed=0, tasks=[])
    ev.device = torch.device("cpu")
    ev.global_rank, ev.world_size, ev.tasks, ev.metrics_rows = 0, 1, [], []
    try:
        ev.target_model, ev.draft_model, ev.tokenizer = ev.build_models()
    except AssertionError as e:
        print("deepspec_eval: DeepSpec's evaluator refuses %s: AssertionError: %s" % (args.draft, e))
        return 3
    ev.target_model.float()
    ev.draft_model.float()
    ev.confidence_head_recorder = None   # calibration records only; nothing drafted depends on it
    G = ev.max_proposal_tokens
    ev.args.max_new_tokens = args.max_tokens + G + 1
    print("deepspec_eval: DeepSpec %s loads %s (target_layer_ids %s, block_size %d); greedy, %d completion tokens" % (
        args.deepspec, args.draft, list(ev.draft_model.target_layer_ids), G, args.max_tokens))

    bad = 0
    tot = {"ds_drafts": 0, "ds_acc": 0, "sb_drafts": 0, "sb_acc": 0}
    with tempfile.TemporaryDirectory() as tmp:
        for pid, text in prompts(args.workloads, args.num_prompts):
            ids = ev.tokenizer(text, add_special_tokens=False, return_tensors="pt").input_ids
            with torch.no_grad():
                r = ev.generate_one_sample(input_ids=ids, stop_token_ids=None)
            ds_out = r.output_ids[0, r.num_input_tokens:r.num_input_tokens + args.max_tokens].tolist()
            pf, sj = os.path.join(tmp, "prompt.txt"), os.path.join(tmp, "stats.json")
            with open(pf, "w", encoding="utf-8") as f:
                f.write(text)
            cmd = [args.specbed, "generate", "--model", args.target, "--prompt-file", pf, "--max-tokens",
                   str(args.max_tokens), "--ignore-eos", "--drafter", "dspark", "--draft-model", args.draft,
                   "--depth", str(G), "--stats-json", sj] + shlex.split(args.specbed_args)
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode:
                print("deepspec_eval: %s: specbed failed (%d): %s" % (pid, p.returncode, p.stderr.strip()[-2000:]))
                return 1
            with open(sj) as f:
                s = json.load(f)
            sb_pos = [round(x * s["spec_decode_num_drafts"]) for x in s["spec_decode_per_position_acceptance_rates"]]
            want = replay(r.accepted_draft_lengths, args.max_tokens, G)
            got = (s["spec_decode_num_drafts"], s["spec_decode_accepted_tokens"], sb_pos[:G])
            same_tokens = s["completion_ids"] == ds_out and s["prompt_tokens"] == ids.shape[1]
            ok = same_tokens and tuple(want) == tuple(got)
            bad += not ok
            tot["ds_drafts"] += want[0]
            tot["ds_acc"] += want[1]
            tot["sb_drafts"] += got[0]
            tot["sb_acc"] += got[1]
            print("%-10s %s  tokens %s  DeepSpec drafts %d accepted %d per position %s | specbed %d %d %s" % (
                pid, "same" if ok else "DIFFERENT", "equal" if same_tokens else "differ", want[0], want[1], want[2],
                got[0], got[1], got[2]))
    n = len(prompts(args.workloads, args.num_prompts))
    print("deepspec_eval: %d of %d prompts agree; accepted per draft step DeepSpec %.3f, specbed %.3f" % (
        n - bad, n, tot["ds_acc"] / max(tot["ds_drafts"], 1), tot["sb_acc"] / max(tot["sb_drafts"], 1)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
