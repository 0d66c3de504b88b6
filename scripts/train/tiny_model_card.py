#!/usr/bin/env python3
"""tiny_model_card.py — write models/README.md (the model card) from the pipeline's records.

Owns: models/README.md. Reads scratch/corpus/manifest.json,
scratch/tiny/{target,copy,joint,anneal}_eval.json, scratch/tiny/{eval_drafters,eval_chain,eval_copy}.json,
the training logs in scratch/tiny/*.log and the configs/weights under models/.
Must not: compute anything itself (every number comes from a record the
training/eval scripts wrote), so the card cannot drift from the artefacts.
A target stage whose record is not on this machine (scratch/ is not
committed; stages 1 and 2 ran on an earlier machine) keeps its section from
the committed models/README.md, word for word, rather than losing it.

The MoE lab target's section (models/tiny-moe: scratch/tiny/{moe_eval,eval_moe}.json,
scratch/tiny/{moe,moe_mtp}.log, models/tiny-moe/routing_stats.json) is written by
moe_section; `--moe-only` rewrites just that section (and its row of the table at the
top) in the committed card, for a machine that has only the MoE records.

Usage: tiny_model_card.py [--moe-only]
"""
import argparse
import json
import math
import os
import platform
import re
import subprocess

import tiny_common as tc

M = tc.MODELS

# Measured by hand before the sizes were chosen (full training steps of HF
# Qwen3ForCausalLM, AdamW, vocab 4096, head_dim 64, torch 2.9.1, 2 threads).
THROUGHPUT = """How the dimensions were chosen (training tokens/s, measured before training):

| model | batch | f32 | bf16 autocast |
|---|---|---|---|
| 4 layers, d 256, ffn 768, 4 q / 2 kv heads | 16 × 256 | 3,004 | 6,495 |
| 6 layers, d 256, ffn 768 | 16 × 256 | | 4,930 |
| 4 layers, d 384, ffn 1024, 6 q / 2 kv heads | 16 × 256 | | 4,270 |
| 6 layers, d 384, ffn 1024 | 16 × 256 | | 2,259 |
| 4 layers, d 256 (chosen), another job holding one core: 1 thread / 2 threads / 2 threads + OMP_WAIT_POLICY=PASSIVE | 8 × 512 | | 3,159 / 584 / 2,953 |

The 4-layer d=256 model was the largest whose target training (≈ 9M tokens) plus the three drafters fit
the ~80-minute budget on shared cores; busy-waiting OpenMP threads lost 5× whenever another process held a
core, hence OMP_WAIT_POLICY=PASSIVE in scripts/train/train_tiny.sh.
"""

# Measured by hand (scripts/train/train_speed.py prints it; no record file holds it).
PRECISION_NOTE = """Every trainer takes `--precision bf16|f32` (train_tiny.sh: `PRECISION=`); the bundled models are the bf16
autocast runs. On a CPU where torch dispatches only AVX2 kernels its bf16 is emulated: `OMP_WAIT_POLICY=PASSIVE
.venv/bin/python scripts/train/train_speed.py` (8 × 512 random tokens per AdamW step, 2 threads,
torch 2.9.1; 2 Dec 17:15 UTC, idle: load average 0.26) on an AVX2-only AMD EPYC: the target 100 tok/s with
bf16 autocast, 1,846 in f32; in f32 8 query / 4 KV heads of 32: 2,026, 6 layers: 1,388. There a retrain needs
f32, and the target's four stages (≈ 29M tokens) alone would take ≈ 4.5 hours.
"""


COPY_EXPERIMENTS = (
    'The probes fail where the prior outvotes a weak copy (sil|ver → sil|ent), not where the match is '
    'ambiguous; an 800-step continuation with long-range random runs and perturbed spans lifted the '
    "random row to 0.83–0.94 but prose only to 0.67–0.73 (probes 17 of 39, not adopted; tiny_copy.py's "
    'docstring has the run). Tried on 3 Dec (not adopted): whether more heads bring induction sooner, two '
    'targets from scratch at equal budget, `train_target.py --steps 700 --batch 4 --seq 1024 --copy-frac '
    '0.5 --max-back 900 --seed 11 --heads Q,KV` with 4,2 (the bundled shape) and 8,4 (head_dim 32, the '
    'same weights), 13–14 min each at 3,000–3,660 tok/s (bf16, a slow hour): neither copies yet '
    '(random-id spans 0.00–0.005 at every distance, probes 0 of 39, key-token accuracy 0.006 / 0.012, val '
    'loss code 4.24 / 4.32) — 2.9 M tokens is before the induction onset for both, so the comparison '
    'needs a longer run (the bundled target had 9 M tokens before its copy stage and 11 M in it). Tried '
    'on 3 Dec, later (not adopted): whether depth is what the copy lacks, the bundled target grown to 6 '
    'layers (`train_target.py --grow-layers 2`: two copies of its last layer appended with o_proj and '
    'down_proj zeroed, so the grown model starts with exactly the bundled logits, checked: max difference '
    '0) and continued with the recipe of the 800-step run above, `.venv/bin/python '
    'scripts/train/train_target.py --precision bf16 --init models/tiny --grow-layers 2 --copy-frac 0.5 --max-back '
    '900 --copy-mix 0.15,0.15,0.2,0.35,0.15 --seq 1024 --batch 4 --steps 800 --lr 1e-3 --warmup 50 --seed '
    '8 --name grow6 --out scratch/tiny/grow6` (AMD EPYC, AVX-512 bf16, alone, 17:10–17:29 UTC, 3,060 '
    'tok/s): probes 17 of 39, key-token accuracy 0.940, random spans 0.83–0.94, natural text 0.45–0.73, '
    'val loss code 2.294 / prose 2.989 — the 4-layer run with the same recipe and seed ended at 17 of 39 '
    'and 0.942, so '
    "two more layers bought nothing at this budget. The key's first token (the recall on cue) stays the "
    'weakest (0.74; 10 of 39 first tokens missed, the bundled target 6); where it fails the model\'s '
    'next-token distribution is the prior\'s (top choices " ", " s", " d" at 0.05–0.2), not a wrong copy: '
    'the cue\'s match is not found at all.'
    ' Found 3 Dec, evening: the recall plants had been tokenized apart from their intro (". " + "The", a '
    "sequence no text has; tiny_copy.py's docstring), which is why the recall on cue stayed the weakest "
    'token. With plants tokenized as the text they are (the default now; `--copy-split-cue` keeps the old'
    ' rows, and scripts/train/train_tiny.sh passes it to stage 2, which was trained so), the 800-step recipe'
    ' above (`--name joint4`, from stage 2, 17:55–18:09 UTC, 4,050 tok/s)'
    ' copied 28 of 39 probes (key-token accuracy 0.971, first key token 0.95; val loss code 2.296 / prose'
    ' 2.991), and 1,600 steps copied 34 of 39 (stage 3 below; it ran as `--name joint4long`, from'
    ' models/tiny as it was then, i.e. stage 2). Probes went 17 → 28 → 34 of 39 for 0 → 800 → 1,600 steps'
    ' of joint plants, so the next run was longer: a further 1,600 steps from stage 3 (the same command with'
    ' --init scratch/tiny/joint4long --seed 9 --name joint4more, 01:49:41–02:20:52 UTC, 3583 tok/s, alone)'
    ' copied 29 of 39 (48 1/3, 64 3/3, 96 3/3, 112 2/3, 120 2/3, 136 2/3, 144 2/3, 160 3/3, 192 2/3, 256'
    ' 2/3, 320 3/3, 384 2/3, 480 2/3); key-token accuracy 0.977 (11 of 482 key tokens missed), first key'
    ' token 0.974, median copy probability 0.92; random spans 0.89–0.96, natural text 0.46–0.73; val loss'
    ' code 2.210 / prose 2.885 (not adopted). More steps did not lift the copy (34 → 29 probes, within the'
    ' ±5 the all-or-nothing probes move on noise; key tokens 0.988 → 0.977) while the language model kept'
    ' improving: per-token copying sat at 0.98–0.99 where all probes need about 0.995, so stage 4 changed'
    ' the data and the LR instead of the length.'
)

# Measured against a server (no record file holds it): the goal the stages were trained for.
STAGE4_CANARY = (
    'Less LR and more recall rows did what 1,600 more steps did not: 36 of 39 probes (480 back 3 of 3, '
    '96–192 back 20 of 21 with one miss at 112, one miss each at 48 and 256) and key tokens 0.994. On a '
    "clean server all 8 of the canary's passphrase probes (workloads/copy.jsonl rows 96–192 back) copy: `build/specbed canary "
    '--launch "build/specbed serve --model models/tiny --drafter mtp --port {port}" --out results/canary` '
    'reports `copy_fail_frac` 0 (4 Dec). The validation loss fell too, below every earlier stage.'
)


# The dense target's loss on the upcycled model's step-0 windows (16 validation windows of
# 1024 tokens per domain, bf16 autocast, train_target.eval_loss), measured by hand for the
# recorded run, whose log line predates train_target.py logging it beside the MoE's.
MOE_DENSE_STEP0 = {"code": 2.1472, "prose": 2.8536}

# Runs of train_target.py --moe tried beside the bundled one (records
# scratch/tiny/NAME_eval.json, NAME_routing.json, NAME.log, NAME/config.json).
MOE_TRIED = ("moe_pl", "moe_pl10")
# What the tried runs showed (read off their rows by hand).
MOE_TRIED_NOTE = (
    "Per layer at the bundled coefficient 0.001 the routing hardly moves (16 consecutive tokens touch about 8 "
    "of 16 experts instead of 7, most tokens still take one expert per quarter), so the concentration owes more "
    "to the upcycled start, where a quarter's copies compete for one role, than to HF's pooling. At 0.01 per "
    "layer the router spreads (1–6 cold experts per layer, about 11.6 of 16 experts for 16 tokens, against "
    "15.8 for uniform routing) at +0.06 nats of validation loss after its 150 steps; the runs differ in "
    "length as well (150 against 500 steps), so part of that gap may be the shorter run: it is not the cost "
    "of balancing at equal budget. A lab model whose routing should look like a pretrained MoE's (balanced per layer) would take the "
    "0.01 per-layer recipe for longer, with its MTP module, goldens and card section made again "
    "(`scripts/train/train_tiny.sh --from moe` after adding `--aux-per-layer --aux-coef 0.01` to its moe step)."
)

MOE_HEAD = "## MoE lab target (models/tiny-moe)"
MOE_ROW = "| tiny-moe/ |"


def jload(p):
    with open(p) as f:
        return json.load(f)


def log_span(name):
    """(first time, last time, minutes) of a training log; None if missing."""
    p = os.path.join(tc.WORK, name + ".log")
    if not os.path.exists(p):
        return None
    times = [l.split()[0] for l in open(p) if re.match(r"^\d\d:\d\d:\d\d ", l)]
    if not times:
        return None

    def sec(t):
        h, m, s = map(int, t.split(":"))
        return h * 3600 + m * 60 + s
    dt = (sec(times[-1]) - sec(times[0])) % 86400
    return times[0], times[-1], dt / 60.0


def last_match(name, pat):
    p = os.path.join(tc.WORK, name + ".log")
    if not os.path.exists(p):
        return None
    hits = [l for l in open(p) if re.search(pat, l)]
    return hits[-1].strip() if hits else None


def first_match(name, pat):
    p = os.path.join(tc.WORK, name + ".log")
    if not os.path.exists(p):
        return None
    hits = [l for l in open(p) if re.search(pat, l)]
    return hits[0].strip() if hits else None


def size_mb(path):
    return os.path.getsize(path) / 1e6 if os.path.exists(path) else 0.0


def cpu_name():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        m = re.search(r"Model name:\s*(.*)", out)
        return m.group(1).strip() if m else platform.processor()
    except OSError:
        return platform.processor()


def fence(s):
    return "```\n" + s.replace("```", "'''").rstrip() + "\n```"


def kept_block(card, start, stops):
    """The committed card's lines from the first that starts with `start` up
    to (not including) the next that starts with one of `stops`: the section
    of a stage whose record is not on this machine."""
    lines = card.split("\n")
    i = next((k for k, l in enumerate(lines) if l.startswith(start)), None)
    if i is None:
        tc.die("models/README.md has no line starting %r to keep, and scratch/tiny has not the record "
               "that writes it" % start)
    j = next((k for k in range(i + 1, len(lines)) if any(lines[k].startswith(x) for x in stops)), len(lines))
    return "\n".join(lines[i:j]).rstrip("\n") + "\n"


def copy_tables(w, rec):
    """The passphrase-probe and span-copy tables of one target stage's record."""
    w("Passphrase copies (greedy, the written bf16 weights in f32, the canary's word check; "
      "`tiny_copy.copy_eval`):\n")
    cp = rec["copy_probes"]
    w("| tokens back | " + " | ".join(cp) + " |\n|---|" + "---|" * len(cp))
    w("| passed | " + " | ".join("%d/%d" % (v["pass"], v["of"]) for v in cp.values()) + " |\n")
    ka = rec.get("copy_token_acc")
    if ka:
        w("Teacher-forced key tokens (`copy_token_acc`): %.3f of %d copied (%d missed, %d of them after a "
          "token that occurs once before); the key's first token, the recall on cue, %.3f; median probability "
          "of the copy %.2f.\n" % (ka["acc"], ka["tokens"], ka["misses"], ka["misses_after_unique_token"],
                                 ka["by_key_token"]["0"], ka["p_copy_median"]))
    sc = rec.get("span_copy_acc")
    if sc:
        w("Induction by distance without cue words (`.venv/bin/python scripts/train/tiny_copy.py`, "
          "`span_copy_acc`: a 24-token span repeated d tokens later in a prose validation window, "
          "teacher-forced argmax accuracy over the repeat, 8 windows):\n")
        w("| span \\ tokens back | " + " | ".join(sc["random"]) + " |\n|---|" + "---|" * len(sc["random"]))
        for kind, label in (("random", "random ids"), ("natural", "the window's own prose"),
                            ("perturbed", "prose, 30% of tokens random")):
            w("| %s | " % label + " | ".join("%.2f" % v for v in sc[kind].values()) + " |")
        w("")


def stage_section(w, name, title, intro, prev_card):
    """A continued target stage (train_target.py --init) from its record and
    log; the committed card's section, word for word, where the record is not
    on this machine (the stage ran on another)."""
    p = os.path.join(tc.WORK, name + "_eval.json")
    if not os.path.exists(p):
        w(kept_block(prev_card, "### " + title, ("### ", "## ")))
        return
    rec = jload(p)
    w("### %s\n" % title)
    w(intro % dict(steps=rec["steps"], batch=rec["batch"], seq=rec["seq"], tokens=f"{rec['tokens_seen']:,}",
                   frac=rec["copy_frac"], mix=",".join("%g" % v for v in rec["copy_mix"]),
                   back=rec["max_back"]))
    sp = log_span(name)
    if sp:
        w("Wall time %.0f min (%s–%s). Last log line: `%s`" % (sp[2], sp[0], sp[1],
                                                             last_match(name, r"step \d+/")))
    w("")
    w("| domain | val loss | perplexity |\n|---|---|---|")
    for d in tc.DOMAINS:
        w("| %s | %.3f | %.1f |" % (d, rec["val_loss"][d], rec["val_ppl"][d]))
    w("")
    copy_tables(w, rec)


def moe_row():
    """The tiny-moe row of the table at the top of the card."""
    return ("| tiny-moe/ | MoE lab target: `Qwen3MoeForCausalLM` (16 experts, top-4, the target's active MLP) + its "
            "own MTP module + tokenizer | HF layout, bf16 safetensors (%.1f MB) |"
            % size_mb(os.path.join(M, "tiny-moe", "model.safetensors")))


def moe_section(w):
    """The MoE lab target's section, from its records (module docstring)."""
    d = os.path.join(M, "tiny-moe")
    cfg = jload(os.path.join(d, "config.json"))
    rec = jload(os.path.join(tc.WORK, "moe_eval.json"))
    E, k, I, H = cfg["num_experts"], cfg["num_experts_per_tok"], cfg["moe_intermediate_size"], cfg["hidden_size"]
    nL = cfg["num_hidden_layers"]
    expert_p = nL * E * 3 * H * I
    active_p = nL * k * 3 * H * I
    w(MOE_HEAD + "\n")
    w("`Qwen3MoeForCausalLM` (`model_type` qwen3_moe): the target's shape (the table above: %d layers, hidden %d, "
      "%d/%d heads of %d, vocabulary %d, tied embeddings) with every decoder layer's MLP a sparse block." % (
          nL, H, cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"], cfg["vocab_size"]))
    w("")
    w("| field | value |\n|---|---|")
    for key in ("num_experts", "num_experts_per_tok", "moe_intermediate_size", "norm_topk_prob",
                "decoder_sparse_step", "mlp_only_layers", "router_aux_loss_coef", "output_router_logits",
                "intermediate_size"):
        w("| %s | %s |" % (key, json.dumps(cfg[key])))
    w("")
    w("A token's active MLP is %d × %d = %d neurons, the dense target's intermediate_size, so active parameters "
      "match the dense target's (experts %.2fM in all, %.2fM active per token; routers %d × %d per layer); "
      "intermediate_size %d is only the MTP module's dense MLP. Tensors: the router `model.layers.L.mlp.gate.weight` "
      "[%d, %d] and per-expert `model.layers.L.mlp.experts.E.{gate,up,down}_proj.weight` (HF's names; the engine "
      "also reads transformers 5's fused layout). Routing is HF's Qwen3MoeSparseMoeBlock: softmax of the router "
      "logits in float32, top %d, divided by their sum (norm_topk_prob), and so is the C engine's (engine/moe.h)."
      "\n" % (k, I, k * I, expert_p / 1e6, active_p / 1e6, E, H, cfg["intermediate_size"], E, H, k))
    w("Initialisation: sparse upcycling of models/tiny (Komatsuzaki et al. 2022), fine-grained with virtual groups "
      "(He et al. 2024, arXiv:2410.07524; `train_target.upcycle_moe`): expert e takes quarter e mod %d of the "
      "dense MLP's %d neurons (gate/up rows, down columns) with down ×%d, so %d experts of distinct quarters at "
      "weight 1/%d each are exactly the dense MLP; the router starts small random (std 0.002) with one row per "
      "group of %d experts (e // %d, one of each quarter) shared by the group, so top-%d takes a whole group and "
      "the model starts as the dense target for every token; noise of 1%% of each matrix's std separates the "
      "groups' copies. A router random per expert (the plain recipe) would route each token to %d random experts, "
      "the dense MLP only in expectation: the upcycled logits then agreed with the dense target's argmax at 31%% "
      "of text positions, against 98%% with the groups." % (k, k * I, k, k, k, k, k, k, k))
    s0 = last_match("moe", r"val loss at step 0")
    if s0:
        m = re.findall(r"'(code|prose)': ([0-9.]+)", s0)
        moe0 = {a: float(b) for a, b in m[:2]}
        dense0 = {a: float(b) for a, b in m[2:4]} or MOE_DENSE_STEP0
        w("At step 0 the validation loss (16 windows of 1024 tokens per domain, bf16) was code %.4f / prose %.4f, "
          "the dense target's on the same windows %.4f / %.4f." % (moe0["code"], moe0["prose"], dense0["code"],
                                                                 dense0["prose"]))
    w("")
    w("Reproduce: `scripts/train/train_tiny.sh --from moe` (steps moe, moe_mtp, moe_eval; opt-in, never part of the "
      "default run; models/tiny must exist).\n")
    w("Training (step `moe` of scripts/train/train_tiny.sh): the dense target's last-stage recipe (stage 4, anneal): "
      "%d steps × %d sequences × %d tokens = %s tokens, copy share %.2f, mix %s, max back %d, peak LR 2e-4, "
      "warmup 20, WSD; seed 12; loss = CE + %g × HF's load-balancing loss (transformers' "
      "`load_balancing_loss_func` over all layers' router logits, as Qwen3MoeForCausalLM adds it with "
      "output_router_logits: E · Σ_e f_e P_e, %d when balanced). `.venv/bin/python scripts/train/"
      "train_target.py --moe --init models/tiny --copy-frac 0.5 --max-back 900 --copy-mix 0.4,0.1,0.15,0.25,0.1 "
      "--seq 1024 --batch 4 --steps %d --lr 2e-4 --warmup 20 --seed 12 --name moe --out models/tiny-moe`." % (
          rec["steps"], rec["batch"], rec["seq"], f"{rec['tokens_seen']:,}", rec["copy_frac"],
          ",".join("%g" % v for v in rec["copy_mix"]), rec["max_back"], cfg["router_aux_loss_coef"], k,
          rec["steps"]))
    res = last_match("moe", r"resumed at step")
    first = first_match("moe", r"moe: .* steps x")
    if res and first:
        w("The run started with --steps %s and was stopped at its step-%s checkpoint when its throughput on the "
          "loaded machine showed that those would not fit the 35-minute budget, then resumed with --steps %d "
          "before the LR decay of either began: with the WSD schedule and the seeded sampler that is step for "
          "step the run `--steps %d` gives from scratch." % (
              re.search(r"(\d+) steps x", first).group(1), res.split()[-1], rec["steps"], rec["steps"]))
    sp = log_span("moe")
    if sp:
        w("Wall time %.0f min (%s–%s, a machine shared with other jobs at load 6–8). Last log line: `%s`" % (
            sp[2], sp[0], sp[1], last_match("moe", r"step \d+/")))
    w("")
    iv = rec.get("init_val_loss")
    w("Validation (the written bf16 weights, f32 arithmetic, %d windows of %d tokens per domain, as for the dense "
      "stages):\n" % (rec["val_windows_per_domain"], rec["eval_seq"]))
    if iv:
        w("| domain | dense target (models/tiny) | tiny-moe | difference | tiny-moe perplexity |\n|---|---|---|---|---|")
        for dom in tc.DOMAINS:
            w("| %s | %.3f | %.3f | %+.3f | %.1f |" % (dom, iv[dom], rec["val_loss"][dom],
                                                    rec["val_loss"][dom] - iv[dom], rec["val_ppl"][dom]))
    else:
        w("| domain | val loss | perplexity |\n|---|---|---|")
        for dom in tc.DOMAINS:
            w("| %s | %.3f | %.1f |" % (dom, rec["val_loss"][dom], rec["val_ppl"][dom]))
    w("")
    copy_tables(w, rec)

    w("### Its MTP module\n")
    mcfg_line = last_match("moe_mtp", r"moe_mtp: ")
    w("The dense family's MTP recipe and layout (the MTP section above; `train_mtp.py --target models/tiny-moe "
      "--name moe_mtp`, step `moe_mtp`): frozen target, %s, loss 0.3 CE(data) + 0.7 CE(target distribution), a "
      "quarter copy rows, seed 2; weights `model.layers.%d.*` in models/tiny-moe/model.safetensors, "
      "`num_nextn_predict_layers: 1`. The module's block is a dense Qwen3 block (MLP of intermediate_size %d), as "
      "the MTP block's kind is the module's own choice; it starts from the target's last layer with that layer's "
      "experts merged back into one dense MLP (`train_mtp.dense_from_experts`: quarter q the mean of the experts "
      "e mod %d = q, down ÷ %d, the inverse of the upcycling). HF's Qwen3MoeForCausalLM loads the file and ignores "
      "the module's keys; the engine binds it as it binds the dense target's (a layer index ≥ num_hidden_layers "
      "is never sparse, engine/config.c config_layer_is_sparse), so `--drafter mtp` serves it unchanged." % (
          (mcfg_line or "").split("moe_mtp: ")[-1].split(" (from")[0], nL, cfg["intermediate_size"], k, k))
    f0 = first_match("moe_mtp", r"moe_mtp: .* steps \(from 0\)")
    if f0 and mcfg_line and f0 != mcfg_line:
        w("It ran as --steps %s and was resumed at its step-%s checkpoint with the --steps of the line above "
          "(before either run's LR decay: the same run as one with those steps from the start)." % (
              re.search(r"(\d+) steps", f0).group(1), re.search(r"from (\d+)", mcfg_line).group(1)))
    sp = log_span("moe_mtp")
    if sp:
        w("Wall time %.0f min (%s–%s, the shared machine; the s/step of the log lines shows its load). Last log "
          "line: `%s`" % (sp[2], sp[0], sp[1], last_match("moe_mtp", r"step \d+/")))
    w("")
    evp = os.path.join(tc.WORK, "eval_moe.json")
    if os.path.exists(evp):
        ev = jload(evp)
        K = ev["depth"]
        w("Acceptance on tiny-moe (`eval_drafters.py --target models/tiny-moe --drafters mtp,draft`, greedy, "
          "depth %d, the method of the acceptance table above, whose dense-target rows compare; the draft model is models/tiny-draft, distilled "
          "from the dense target):\n" % K)
        w("| drafter | domain | steps | %s | mean accept length |" % " | ".join("pos %d" % i for i in range(1, K + 1)))
        w("|---|---|---|%s---|" % ("---|" * K))
        for name in ("mtp", "draft"):
            for dom in tc.DOMAINS:
                e = ev["drafters"].get(name, {}).get(dom)
                if e:
                    w("| %s | %s | %d | %s | %.3f |" % (name, dom, e["steps"],
                                                       " | ".join("%.3f" % x for x in e["per_position"]),
                                                       e["mean_accept_length"]))
        w("")
    w("Checks: `test_forward_tiny_moe` (logits and layer-0 hidden states against HF, "
      "tests/golden/forward/tiny-moe from `scripts/goldens/make_forward_goldens.py --model models/tiny-moe --boundary-only "
      "--greedy 48`, whose meta.json records the smallest gap between a row's 4th and 5th router probability) "
      "and `test_moe_bundled` (greedy text equal to HF generate(); greedy spec-on ≡ spec-off with ngram, "
      "models/tiny-draft and this MTP module at depths 1, 3, 8 and batches 1, 8; `test_moe_full`, label slow: "
      "depths 1, 2, 3, 5, 8 × batches 1, 3, 8).\n")

    rsp = os.path.join(d, "routing_stats.json")
    if os.path.exists(rsp):
        rs = jload(rsp)
        w("### Routing on the bundled workloads\n")
        w("`.venv/bin/python scripts/train/moe_routing_stats.py` writes models/tiny-moe/routing_stats.json "
          "(read by this card; meant for the C cost model too): every prompt of workloads/*.jsonl teacher-forced "
          "through HF (f32), each token's top-%d experts per layer by HF's rule. Share = the layer's share of "
          "expert slots that went to an expert (uniform routing: 1/%d = %.4f).\n" % (k, E, 1 / E))
        w("| workload | tokens | %s |" % " | ".join("layer %d max / min share" % l["layer"]
                                                 for l in next(iter(rs["workloads"].values()))["layers"]))
        w("|---|---|%s" % ("---|" * len(rs["sparse_layers"])))
        for wl, v in rs["workloads"].items():
            w("| %s | %s | %s |" % (wl, f"{v['tokens']:,}", " | ".join(
                "%.3f / %.3f" % (l["max_share"], l["min_share"]) for l in v["layers"])))
        w("")
        ns = [1, 2, 3, 4, 6, 8, 12, 16]
        w("Distinct experts touched by n consecutive tokens of one prompt (every window of n tokens counts once; "
          "the mean over the %d layers), i.e. how many experts' weights a verify step of n rows of one sequence "
          "reads per layer, against independent tokens routed uniformly (E·(1 − (1 − k/E)^n): an expert is in a "
          "uniformly random k-subset with probability C(E−1, k−1)/C(E, k) = k/E) and independent tokens with each "
          "layer's measured shares (Σ_e 1 − (1 − k·share_e)^n, mean over layers); routing_stats.json has n = 1..16 "
          "per layer:\n" % len(rs["sparse_layers"]))
        w("| n | %s |" % " | ".join(str(n) for n in ns))
        w("|---|%s" % ("---|" * len(ns)))
        w("| uniform | %s |" % " | ".join("%.2f" % rs["uniform"][n - 1] for n in ns))
        for wl, v in rs["workloads"].items():
            ind = [sum(l["independent"][n - 1] for l in v["layers"]) / len(v["layers"]) for n in ns]
            w("| %s, independent | %s |" % (wl, " | ".join("%.2f" % x for x in ind)))
            w("| **%s, measured** | %s |" % (wl, " | ".join("%.2f" % v["distinct_mean"][n - 1] for n in ns)))
        w("")
        lay = [l for v in rs["workloads"].values() for l in v["layers"]]
        aux = last_match("moe", r"step \d+/")
        w("What the router learned: each layer leaves %d–%d of its %d experts under 1%% of the slots (`cold`), "
          "and %.0f–%.0f%% of a layer's tokens take their %d experts from %d distinct classes e mod %d "
          "(`distinct_mod_k`; a uniformly random %d-subset does so for %.0f%%): the upcycled model kept the dense "
          "MLP's split into quarters and learned mostly which copy of each quarter a token uses, with a few "
          "copies chosen by nearly every token (max share ≈ 1/%d). HF's load-balancing loss cannot see this: "
          "transformers' load_balancing_loss_func concatenates all layers' router logits before it measures "
          "the load (QwenLM/Qwen3 issue 1418), so the load pooled over layers looked balanced (aux %s at the "
          "last step, %d = balanced) while each layer's was not. The curves above are those of this concentrated "
          "router: %.1f–%.1f of %d experts for 16 consecutive tokens, against %.1f for uniform routing, and the "
          "measured curve lies below the independent one (neighbouring tokens share experts)." % (
              min(l["cold"] for l in lay), max(l["cold"] for l in lay), E,
              100 * min(l["distinct_mod_k"] for l in lay), 100 * max(l["distinct_mod_k"] for l in lay), k, k, k, k,
              100 * (E // k) ** k / math.comb(E, k), k,
              re.search(r"aux ([0-9.]+)", aux).group(1) if aux else "?", k,
              min(v["distinct_mean"][15] for v in rs["workloads"].values()),
              max(v["distinct_mean"][15] for v in rs["workloads"].values()), E, rs["uniform"][15]))
        tried = [n for n in MOE_TRIED if os.path.exists(os.path.join(tc.WORK, n + "_eval.json"))
                 and os.path.exists(os.path.join(tc.WORK, n + "_routing.json"))]
        if tried:
            w("")
            w("Tried (not adopted): the same run with the loss per layer (`train_target.py --aux-per-layer`: HF's "
              "function on each layer's router logits alone, averaged over the layers, the Switch Transformer's "
              "definition), seed 12, routing measured as above (`moe_routing_stats.py --model ../scratch/tiny/NAME "
              "--out ../scratch/tiny/NAME_routing.json`):\n")
            w("| run | balancing loss | steps | val loss code / prose | cold experts per layer | tokens with experts "
              "of %d distinct classes | distinct experts, n = 1 / 2 / 4 / 8 / 16 (code; prose) | wall time |" % k)
            w("|---|---|---|---|---|---|---|---|")
            runs = [("moe (bundled)", "pooled (HF), %g" % cfg["router_aux_loss_coef"], rec, rs, "moe")]
            for n in tried:
                ncfg = jload(os.path.join(tc.WORK, n, "config.json"))
                runs.append(("`--name %s`" % n, "per layer, %g" % ncfg["router_aux_loss_coef"],
                             jload(os.path.join(tc.WORK, n + "_eval.json")),
                             jload(os.path.join(tc.WORK, n + "_routing.json")), n))
            for label, loss, pe, pr, n in runs:
                pls = [l for v in pr["workloads"].values() for l in v["layers"]]
                sp = log_span(n)
                w("| %s | %s | %d | %.3f / %.3f | %d–%d | %.0f–%.0f%% | %s | %s |" % (
                    label, loss, pe["steps"], pe["val_loss"]["code"], pe["val_loss"]["prose"],
                    min(l["cold"] for l in pls), max(l["cold"] for l in pls),
                    100 * min(l["distinct_mod_k"] for l in pls), 100 * max(l["distinct_mod_k"] for l in pls),
                    "; ".join(" / ".join("%.2f" % v["distinct_mean"][m - 1] for m in (1, 2, 4, 8, 16))
                              for wl, v in pr["workloads"].items() if wl in tc.DOMAINS),
                    "%.0f min" % sp[2] if sp else "?"))
            w("")
            w(MOE_TRIED_NOTE)
        w("")


def splice_moe(card, section, row):
    """The committed card with the MoE section and its table row replaced
    (or added: the row after the last table row of the top table, the
    section before "## Training machine")."""
    tail = card[len(card.rstrip("\n")):] or "\n"  # the committed card's own ending
    lines = card.rstrip("\n").split("\n")
    lines = [l for l in lines if not l.startswith(MOE_ROW)]
    last_row = max(i for i, l in enumerate(lines[:20]) if l.startswith("| tiny"))
    lines.insert(last_row + 1, row)
    if MOE_HEAD in lines:
        i = lines.index(MOE_HEAD)
        j = next((n for n in range(i + 1, len(lines)) if lines[n].startswith("## ")), len(lines))
        del lines[i:j]
    else:
        i = lines.index("## Training machine")
    return "\n".join(lines[:i] + section.rstrip("\n").split("\n") + [""] + lines[i:]) + tail


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--moe-only", action="store_true", help="rewrite only the tiny-moe section and table row")
    args = ap.parse_args()
    if args.moe_only:
        with open(os.path.join(M, "README.md"), encoding="utf-8") as f:
            card = f.read()
        sec = []
        moe_section(sec.append)
        with open(os.path.join(M, "README.md"), "w", encoding="utf-8") as f:
            f.write(splice_moe(card, "\n".join(sec), moe_row()))
        print("wrote the tiny-moe section of models/README.md")
        return
    man = jload(os.path.join(tc.CORPUS, "manifest.json"))
    tep = os.path.join(tc.WORK, "target_eval.json")
    te = jload(tep) if os.path.exists(tep) else None
    with open(os.path.join(M, "README.md"), encoding="utf-8") as f:
        prev_card = f.read()
    evp = os.path.join(tc.WORK, "eval_drafters.json")
    ev = jload(evp) if os.path.exists(evp) else None
    tcfg = jload(os.path.join(M, "tiny", "config.json"))
    dcfg = jload(os.path.join(M, "tiny-dspark", "config.json")) if os.path.exists(
        os.path.join(M, "tiny-dspark", "config.json")) else None
    rcfg = jload(os.path.join(M, "tiny-draft", "config.json")) if os.path.exists(
        os.path.join(M, "tiny-draft", "config.json")) else None
    import torch
    import transformers
    L = []
    w = L.append
    w("# Bundled tiny models (models/)\n")
    w("Small models trained on this project's own machine from Debian package text, so that specbed's "
      "quickstart and model-level tests run on a laptop CPU with no downloads. They are real (trained) "
      "models, but tiny: expect recognisable code and prose, not sense.\n")
    w("| dir | what | format |\n|---|---|---|")
    w("| tiny/ | target: `Qwen3ForCausalLM` + one DeepSeek-V3-style MTP module (`num_nextn_predict_layers: 1`) "
      "+ tokenizer | HF layout, bf16 safetensors (%.1f MB) |" % size_mb(os.path.join(M, "tiny", "model.safetensors")))
    w("| tiny-dspark/ | DSpark drafter, DeepSpec Qwen3 layout (`Qwen3DSparkModel`) | bf16 safetensors (%.1f MB) |"
      % size_mb(os.path.join(M, "tiny-dspark", "model.safetensors")))
    w("| tiny-draft/ | draft model: `Qwen3ForCausalLM`, %s layers, same tokenizer | bf16 safetensors (%.1f MB) |\n"
      % (rcfg["num_hidden_layers"] if rcfg else "?", size_mb(os.path.join(M, "tiny-draft", "model.safetensors"))))
    if os.path.exists(os.path.join(M, "tiny-moe", "config.json")):
        L[-1] = L[-1].rstrip("\n")
        w(moe_row() + "\n")
    w("Reproduce everything (not part of CI; about three and a half hours on 2 cores: the target's stage 1 "
      "60 min on a loaded machine, stages 2–4 64 min, MTP 12, the 3-layer DSpark's two stages 56 (4 Dec retrain on taps 0 1 2, loaded machine), the draft "
      "model 7, goldens and evaluation 2; the wall times below): `scripts/train/train_tiny.sh`.\n")

    w("## Corpus\n")
    w("Built by `scripts/train/build_corpus.py` from an explicit list of Debian 12 packages (installed by the script), "
      "into scratch/corpus (not committed). Files are chosen in sha1(path) order under a byte cap per source; "
      "documents over %d KB are cut at blank lines; split by document: %s.\n" % (man["chunk_bytes"] // 1024,
                                                                              man["split_rule"]))
    w("| source | domain | package (version) | files used / matching | train / val / test bytes | licence |")
    w("|---|---|---|---|---|---|")
    tot = {"code": [0, 0, 0], "prose": [0, 0, 0]}
    for s in man["sources"]:
        p = man["packages"][s["package"]]
        b = s["bytes"]
        for i, k in enumerate(("train", "val", "test")):
            tot[s["domain"]][i] += b[k]
        w("| %s | %s | %s (%s) | %d / %d | %s / %s / %s | %s |" % (
            s["name"], s["domain"], s["package"], p["version"], s["files_taken"], s["files_matching"],
            f"{b['train']:,}", f"{b['val']:,}", f"{b['test']:,}", p["licence"]))
    for d, t in tot.items():
        w("| **%s total** | | | | %s / %s / %s | |" % (d, f"{t[0]:,}", f"{t[1]:,}", f"{t[2]:,}"))
    w("\nLicence texts: /usr/share/doc/PACKAGE/copyright of each package. The models are trained on this text; "
      "no corpus text is committed except the short prompts in workloads/ (taken from the test split). "
      "models/corpus_manifest.json lists every document (path, chunk, source, split, bytes) and the package versions.\n")
    ap = os.path.join(tc.WORK, "anneal_eval.json")
    if te or os.path.exists(ap):
        tt = (te or jload(ap))["train_tokens"]
        w("Tokens (bundled tokenizer): code train %s, prose train %s.\n" % (f"{tt['code']:,}", f"{tt['prose']:,}"))
    else:
        w(kept_block(prev_card, "Tokens (bundled tokenizer):", ("## ",)))

    w("## Tokenizer\n")
    w("`scripts/train/train_tokenizer.py` on the two train splits: byte-level BPE (HF `tokenizers`), Qwen2 pre-tokenizer "
      "regex, NFC, vocabulary %d including the special tokens `<|endoftext|>` (4092, eos/pad), `<|im_start|>` "
      "(4093), `<|im_end|>` (4094), `<|mask|>` (4095, the DSpark mask token).\n" % tcfg["vocab_size"])

    w("## Target (models/tiny)\n")
    keys = ["num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
            "head_dim", "vocab_size", "max_position_embeddings", "rope_theta", "rms_norm_eps", "tie_word_embeddings"]
    w("| field | value |\n|---|---|")
    for k in keys:
        w("| %s | %s |" % (k, tcfg[k]))
    w("")
    if te:
        sp = log_span("target")
        w("Training: %d steps × %d sequences × %d tokens = %s tokens (≈ %.1f epochs), AdamW (β 0.9/0.95, wd 0.1), "
          "peak LR 2e-3, warmup 100, constant, linear decay over the last 20%% to 10%%; bf16 autocast with f32 "
          "master weights; seed 1; weights written in bf16." % (
              te["steps"], te["batch"], te["seq"], f"{te['tokens_seen']:,}", te["tokens_seen"] / (tt["code"] + tt["prose"])))
        if sp:
            w("Wall time %.0f min (%s–%s)." % (sp[2], sp[0], sp[1]))
        res = last_match("target", r"resumed at step")
        if res:
            w("The run was stopped once and resumed from its checkpoint (`%s`), with --steps raised before the "
              "LR decay began; with the WSD schedule and the seeded batch sampler the resumed run is step-for-step "
              "the run `--steps %d` gives from scratch (the loss at the first logged step after resuming matched "
              "the interrupted run's)." % (res.split(" ", 1)[1], te["steps"]))
        w("")
        w("Validation (the written bf16 weights, f32 arithmetic, %d windows of %d tokens per domain):\n" % (
            te["val_windows_per_domain"], te["seq"]))
        w("| domain | val loss (nats/token) | perplexity |\n|---|---|---|")
        for d in tc.DOMAINS:
            w("| %s | %.3f | %.1f |" % (d, te["val_loss"][d], te["val_ppl"][d]))
        w("")
    else:
        w(kept_block(prev_card, "Training: ", ("### Stage 2",)))
    ce_p = os.path.join(tc.WORK, "copy_eval.json")
    if te and os.path.exists(ce_p):
        c2 = jload(ce_p)
        sp = log_span("copy")
        w("### Stage 2: copy rows\n")
        w("Stage 1 above never learned to copy: greedy continuations of all 36 passphrase probes of "
          "workloads/copy.jsonl failed at every distance (48–384 tokens back). Stage 2 (`train_target.py --init`, "
          "step `copy` of scripts/train/train_tiny.sh) continues the stage-1 weights for %d steps × %d sequences × %d "
          "tokens = %s tokens, a share %.2f of the rows edited into copy rows by scripts/train/tiny_copy.py: 30%% recall "
          "on cue (2–8 planted `CUE KEY.` lines, keys of pool words or random letters and digits, recalled "
          "32–%d tokens later), 30%% span repeats (1–4 spans of 16–256 tokens copied 32–%d tokens later), 40%% "
          "random runs (16–128 random ids written 2–4 times in a row, the textbook induction task). The probe's "
          "passphrase words are never used in training rows. Peak LR 1e-3, warmup 50, same WSD schedule; seed 5. "
          "Sparser copy rows (recall and short repeats only, copy targets 1–5%% of the tokens) were tried first "
          "and taught nothing measurable in 1,000–1,500 steps; the random runs are what formed the induction "
          "behaviour (the probe table below is the measure)."
          % (c2["steps"], c2["batch"], c2["seq"], f"{c2['tokens_seen']:,}", c2["copy_frac"], c2["max_back"],
             c2["max_back"]))
        w("Stage 1 read the corpus built with linux-libc-dev 6.1.192-3; stage 2 and the drafters read it as "
          "rebuilt on a later machine whose Debian mirror had 6.1.187-1 (the manifest below; 3,006 fewer train "
          "bytes in that source), the one difference between the two corpora.")
        if sp:
            w("Wall time %.0f min (%s–%s). Last log line: `%s`" % (sp[2], sp[0], sp[1],
                                                                 last_match("copy", r"step \d+/")))
        w("")
        w("| domain | val loss stage 1 | val loss stage 2 | perplexity stage 2 |\n|---|---|---|---|")
        for d in tc.DOMAINS:
            w("| %s | %.3f | %.3f | %.1f |" % (d, te["val_loss"][d], c2["val_loss"][d], c2["val_ppl"][d]))
        w("")
        copy_tables(w, c2)
    else:
        w(kept_block(prev_card, "### Stage 2", (COPY_EXPERIMENTS[:40], "### ")))
    # The experiments that did not become models/tiny, and why (hand-written: no record file holds them).
    w(COPY_EXPERIMENTS + "\n")
    stage_section(w, "joint", "Stage 3: plants as text, long-range copies",
                  "Stage 3 (step `joint` of scripts/train/train_tiny.sh) continues stage 2 for %(steps)d steps × "
                  "%(batch)d sequences × %(seq)d tokens = %(tokens)s tokens, a share %(frac).2f of them copy rows "
                  "with the recall plants tokenized as the text they are and the mix %(mix)s (recall, repeat, "
                  "random, far, perturbed: far = 1–3 runs of 8–64 random ids written again 32–%(back)d tokens "
                  "later with text in between; perturbed = repeat's spans with 15–50%% of their tokens random in "
                  "both copies, so the copy contradicts the prior). Peak LR 1e-3, warmup 50, WSD; seed 8.", prev_card)
    stage_section(w, "anneal", "Stage 4: anneal (what models/tiny holds)",
                  "Stage 4 (step `anneal`) continues stage 3 for %(steps)d steps × %(batch)d sequences × %(seq)d "
                  "tokens = %(tokens)s tokens at a fifth of its LR (peak 2e-4, warmup 20, WSD) with more recall "
                  "rows, copy share %(frac).2f, mix %(mix)s; seed 10. " + STAGE4_CANARY, prev_card)
    if ev and ev.get("samples"):
        w("### Greedy samples (validation prompts, %d new tokens, `scripts/train/eval_drafters.py`)\n" % ev["gen"])
        for d in tc.DOMAINS:
            for i, s in enumerate(ev["samples"].get(d, [])):
                w("**%s %d** — prompt (last 300 characters) then continuation:\n" % (d, i + 1))
                w(fence(s["prompt"][-300:]))
                w(fence(s["continuation"]))
                w("")

    w("## MTP module (in models/tiny)\n")
    sp = log_span("mtp")
    w("DeepSeek-V3 semantics: row i computes h'_i = eh_proj([enorm(Emb(t_{i+1})); hnorm(h_i)]) (embedding first), "
      "one Qwen3 decoder block at RoPE position i (causal over rows ≤ i), then the module's own output norm "
      "and the target's lm_head, predicting t_{i+2}. Weights: `model.layers.%d.{enorm,hnorm,eh_proj}.weight`, "
      "the block's Qwen3 names under `model.layers.%d.`, and `model.layers.%d.shared_head.norm.weight`, the "
      "module's own trained output norm (DeepSeek-V3's; vLLM and SGLang apply it, and so does specbed, which says "
      "so at startup); no `shared_head.head`, so the lm_head is the target's. HF `Qwen3ForCausalLM` "
      "loads the file and ignores these keys.\n" % ((tcfg["num_hidden_layers"],) * 3))
    w("**h_i is the target's hidden state after the final norm** (the vector its lm_head reads; what vLLM and "
      "SGLang pass to their MTP/EAGLE drafters as the target hidden state). Chaining past depth 1 feeds the "
      "module's own output, after its output norm, back in as h, with the drafted token as t.\n")
    w("Training: frozen target, %s; block initialised from the target's last layer, output norm from the "
      "target's model.norm; loss 0.3 CE(data) + 0.7 CE(target distribution); a quarter of the rows are copy rows "
      "(tiny_copy.py); seed 2." % (last_match("mtp", r"mtp: ") or "").split("mtp: ")[-1].split(" (from")[0])
    w("No position-0 masking: vLLM zeroes the token embedding of the MTP row at position 0 for DeepSeek "
      "checkpoints; this module was trained without that, so an engine must not apply it here.\n")
    if sp:
        w("Wall time %.0f min. Last log line: `%s`\n" % (sp[2], last_match("mtp", r"step \d+/")))

    if dcfg:
        w("## DSpark drafter (models/tiny-dspark)\n")
        w("DeepSpec's Qwen3 DSpark layout and config fields: `block_size` %d, `mask_token_id` %d, "
          "`target_layer_ids` %s (layer L = output of decoder layer L, HF's hidden_states[L + 1]%s), "
          "`markov_rank` %d, `markov_head_type` \"%s\", `enable_confidence_head` true, "
          "`confidence_head_with_markov` true, %d draft layers. Tensors: `embed_tokens`, `layers.N.*` (Qwen3 "
          "names), `norm`, `fc` [hidden, %d·hidden], `hidden_norm`, `lm_head` (copy of the target's tied "
          "embedding), `markov_head.markov_w1` [vocab, r] (an embedding), `markov_head.markov_w2` [vocab, r] "
          "(a Linear r→vocab), `confidence_head.proj` (weight [1, hidden+r], bias [1]).\n" % (
              dcfg["block_size"], dcfg["mask_token_id"], dcfg["target_layer_ids"],
              ("; the final layer's, %d, is the state after the final norm" % (dcfg["num_target_layers"] - 1)
               if dcfg["num_target_layers"] - 1 in dcfg["target_layer_ids"] else "; no final-layer tap, issue 39"),
              dcfg["markov_rank"], dcfg["markov_head_type"], dcfg["num_hidden_layers"],
              len(dcfg["target_layer_ids"])))
        w("Forward (scripts/train/tiny_modules.py `DSpark`): ctx = hidden_norm(fc(concat(taps))); each draft layer's "
          "keys/values are [k/v_proj(ctx) at positions 0..a−1 | k/v_proj(block rows) at a..a+γ−1] (ctx is not "
          "passed through the layer's input_layernorm; k_norm applies to both), queries are the block rows, "
          "attention is non-causal inside the block and sees all ctx positions < a. Block = [anchor, MASK×(γ−1)] "
          "with the anchor (last committed token) at position a; slot k predicts the token at a+k+1. "
          "U_k = lm_head(norm(h_k)); logits_k = U_k + W2(W1[x_{k−1}]) with x_0 = anchor and x_k the token drafted "
          "at slot k; c_k = σ(proj([norm(h_k); W1[x_{k−1}]])).\n")
        w("Training: frozen target; loss 0.1·CE + 0.9·L1(p_d, p_t) + 1.0·BCE(c_k, 1 − ½‖p_d − p_t‖₁), "
          "each slot weighted exp(−k/4); Markov head teacher-forced with the true tokens; %d anchors per "
          "512-token window; a quarter of the rows are copy rows (tiny_copy.py); draft layers initialised "
          "from the target's last layers, embed/lm_head frozen copies; seed 3." % dcfg["num_anchors"])
        if dcfg["num_target_layers"] - 1 in dcfg["target_layer_ids"]:
            w("%d draft layers over %d taps, the final layer's among them (until 3 Dec 2 layers over taps 1 2): "
              "a draft layer makes one content match against the context, so a block copies about one slot per "
              "layer (bench/RECORD.md, \"Why DSpark's slots 2–5 stay low\")." % (
                  dcfg["num_hidden_layers"], len(dcfg["target_layer_ids"])))
            w("Portability: vLLM and SGLang collect a drafter's target taps as the residual stream entering "
              "decoder layer L + 1, inside their layer loop, which has no entry after the final layer; a drafter "
              "that taps the final layer (this one) runs in specbed and in HF-based tools (DeepSpec's training "
              "indexes HF's hidden_states), not in those servers as they stand.")
            w("DeepSpec's own evaluator refuses it too (assert_no_final_target_layer, "
              "deepspec/eval/base_evaluator.py: its target cache hooks the raw decoder-layer output, its "
              "evaluation reads output_hidden_states, whose final-layer entry is the final-normed state), and so "
              "does specbed unless told which state it was trained on: serve, generate, profile and bench_spec "
              "load it with `--dspark-final-tap normed`.")
        else:
            w("%d draft layers over taps %s of %d (no final-layer tap, issue 39): a draft layer makes one content "
              "match against the context, so a block copies about one slot per layer (bench/RECORD.md, \"Why "
              "DSpark's slots 2–5 stay low\")." % (dcfg["num_hidden_layers"],
                                                   " ".join(str(t) for t in dcfg["target_layer_ids"]),
                                                   dcfg["num_target_layers"]))
            w("Portability: vLLM and SGLang collect a drafter's target taps as the residual stream entering "
              "decoder layer L + 1, inside their layer loop; every tap below the final layer has such an entry. "
              "DeepSpec's own evaluator loads it unpatched (`scripts/compare/deepspec_eval.sh DEEPSPEC_DIR` compares its "
              "drafts with specbed's).")
        res = last_match("dspark", r"steps \(from [1-9]")
        if res:
            w("The run was resumed from a checkpoint (`%s`) before any LR decay; by the same WSD argument as for "
              "the target it equals a fresh run with its final --steps." % res.split("dspark: ", 1)[-1][:60])
        sp = log_span("dspark")
        if sp:
            w("Wall time %.0f min. Last log line: `%s`\n" % (sp[2], last_match("dspark", r"step \d+/")))
        ch = last_match("dspark_chain", r"dspark_chain: .*steps \(from 0\)")
        if ch:
            cfg = ch.split("config ", 1)[-1]
            w("Chained fine-tune (the bundled weights): the engine chains blocks at depth K > γ "
              "(spec/drafter_dspark.h), which one-block training never shows the drafter, so the stage above is "
              "continued with `train_dspark.py --init <stage 1> --chain-blocks 2`: per anchor block 0 as above plus "
              "block 1 = [x_{a+γ} (teacher-forced; in serving block 0's last draft), MASK×(γ−1)] at positions "
              "a+γ..a+2γ−1 predicting x_{a+γ+1..a+2γ}, its rows attending to the ctx < a, block 0 and block 1 "
              "(one masked pass equals the engine's pass per block: block 0 never sees block 1; "
              "make_drafter_fixture.py check_chain_mask checks it); block 1's slots continue the decay "
              "(slot γ+k weighted exp(−(γ+k)/4)). %s steps, peak LR %s, seed %s." % (
                  re.search(r"'steps': (\d+)", cfg).group(1), re.search(r"'lr': ([0-9.e-]+)", cfg).group(1),
                  re.search(r"'seed': (\d+)", cfg).group(1)))
            sp = log_span("dspark_chain")
            w("Wall time %.0f min. Last log line: `%s`\n" % (sp[2], last_match("dspark_chain", r"step \d+/")))
        evc = os.path.join(tc.WORK, "eval_chain.json")
        if os.path.exists(evc):
            ec = jload(evc)
            w("Acceptance at depth %d (eval_drafters.py --depth %d, otherwise as the depth-%d table below; DSpark "
              "chains %d blocks, MTP its one module):\n" % (ec["depth"], ec["depth"], ev["depth"] if ev else 5,
                                                             -(-ec["depth"] // dcfg["block_size"])))
            w("| drafter | domain | %s | mean accept length |" % " | ".join("pos %d" % k for k in range(1, ec["depth"] + 1)))
            w("|---|---|%s---|" % ("---|" * ec["depth"]))
            for name in ("dspark", "mtp"):
                for d in tc.DOMAINS:
                    e = ec["drafters"].get(name, {}).get(d)
                    if e:
                        w("| %s | %s | %s | %.3f |" % (name, d, " | ".join("%.3f" % x for x in e["per_position"]),
                                                     e["mean_accept_length"]))
            w("")
    if rcfg:
        w("## Draft model (models/tiny-draft)\n")
        w("`Qwen3ForCausalLM`, %d layers, otherwise the target's dimensions and tokenizer; initialised from the "
          "target (embedding, final norm, decoder layers 0 and %d) and distilled on the corpus: 0.3 CE(data) + "
          "0.7 CE(target distribution); a quarter of the rows are copy rows (tiny_copy.py); seed 4." % (rcfg["num_hidden_layers"], tcfg["num_hidden_layers"] - 1))
        sp = log_span("draft")
        if sp:
            w("Wall time %.0f min. Last log line: `%s`\n" % (sp[2], last_match("draft", r"step \d+/")))

    if ev:
        w("## Drafter acceptance (PyTorch reference, greedy, depth %d)\n" % ev["depth"])
        w("Command: `.venv/bin/python scripts/train/eval_drafters.py` (writes scratch/tiny/eval_drafters.json). "
          "Method: %d validation prompts of %d tokens per domain, each continued greedily by the target for %d "
          "tokens; every position of the continuation is one decode step; a drafter proposes %d tokens from the "
          "committed prefix; accept length = 1 + leading matches with the target's greedy tokens (bonus "
          "included); position k = fraction of steps whose k-th draft is accepted. DSpark runs one block of its "
          "trained size; MTP chains its one module; the draft model runs autoregressively. Caveat: greedy "
          "continuations of a model this small fall into loops within a few dozen tokens (see the samples), and "
          "loops are easy to draft, so these rates are higher than they would be on fresh text; the ordering "
          "(code above prose for MTP, decay with position) is the signal.\n" % (
              ev["prompts"], ev["prompt_len"], ev["gen"], ev["depth"]))
        w("| drafter | domain | steps | pos 1 | pos 2 | pos 3 | pos 4 | pos 5 | mean accept length |")
        w("|---|---|---|---|---|---|---|---|---|")
        for name in ("mtp", "dspark", "draft"):
            for d in tc.DOMAINS:
                e = ev["drafters"].get(name, {}).get(d)
                if e:
                    w("| %s | %s | %d | %s | %.3f |" % (name, d, e["steps"],
                                                       " | ".join("%.3f" % x for x in e["per_position"]),
                                                       e["mean_accept_length"]))
        ds = ev["drafters"].get("dspark", {})
        if any("mean_confidence_per_slot" in v for v in ds.values()):
            w("\nDSpark mean confidence per slot (conditional acceptance estimate): " + "; ".join(
                "%s %s" % (d, " ".join("%.2f" % x for x in v["mean_confidence_per_slot"])) for d, v in ds.items()))
        w("")
    evp = os.path.join(tc.WORK, "eval_copy.json")
    if os.path.exists(evp):
        cp = jload(evp)
        dists = sorted(cp["copy"], key=int)
        names = [n for n in ("mtp", "dspark", "draft") if n in cp["copy"][dists[0]]]
        w("### On a copied span (`eval_drafters.py --copy %s`)\n" % ",".join(dists))
        w("48 random ordinary ids planted in each of 8 prose validation windows and written again d tokens "
          "later; every anchor inside the repeat drafts %d tokens, which only the context predicts (random ids: "
          "no prior, no bigram). Position k = share of anchors whose drafts 1..k all equal the repeat; "
          "\"target\" is the target's own next-token copy rate on the same rows, the ceiling a verify step "
          "accepts from.\n" % cp["depth"])
        w("| tokens back | drafter | %s | target |" % " | ".join("pos %d" % k for k in range(1, cp["depth"] + 1)))
        w("|---|---|%s---|" % ("---|" * cp["depth"]))
        for d in dists:
            for n in names:
                w("| %s | %s | %s | %.3f |" % (d, n, " | ".join("%.3f" % x for x in cp["copy"][d][n]),
                                            cp["copy"][d]["target_next_token"]))
        w("")

    if os.path.exists(os.path.join(tc.WORK, "moe_eval.json")):
        moe_section(w)
    elif MOE_HEAD in prev_card:
        w(kept_block(prev_card, MOE_HEAD, ("## ",)))
    w("## Training machine\n")
    w("%s, 2 cores shared with other build/test jobs (throughput varied with their load), no GPU; "
      "torch %s (CPU), transformers %s, OMP_WAIT_POLICY=PASSIVE, 2 threads.\n" % (
          cpu_name(), torch.__version__, transformers.__version__))
    w(THROUGHPUT)
    w(PRECISION_NOTE)
    w("## Goldens\n")
    w("tests/golden/mtp/ and tests/golden/dspark/ (`scripts/goldens/make_drafter_goldens.py`): f32 forwards of the "
      "committed weights for several validation contexts (one past 128 tokens); each directory's golden.json "
      "says what every tensor means.\n")
    # The corpus itself is not committed; its manifest (every document's id and split) is.
    import shutil
    shutil.copyfile(os.path.join(tc.CORPUS, "manifest.json"), os.path.join(M, "corpus_manifest.json"))
    with open(os.path.join(M, "README.md"), "w") as f:
        f.write("\n".join(L) + "\n")
    print("wrote models/README.md")


if __name__ == "__main__":
    main()
