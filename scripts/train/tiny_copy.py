"""tiny_copy.py — synthetic copy rows for the target's training, and the copy evaluation.

Owns: turning corpus windows into rows that reward recalling earlier text
(recall on cue and plain span repeats, 32..900 tokens back), and measuring
greedy passphrase copies of workloads/copy.jsonl per distance.
Must not: use the probe's passphrase words (tiny_workloads.WORDS) in training
rows, so that the probes measure copying, not memorised words.

Why: induction (find the earlier occurrence of the current context, emit
what followed it) is the mechanism behind long-range copies and behind most
of what n-gram and model drafters accept on real traffic. A 4-layer model
trained on 9M tokens of 512-token windows never learned it (all canary
passphrase probes failed); small transformers learn it readily when the data
asks for it, so a share of rows asks for it explicitly.

Row kinds (each a corpus window of T+1 tokens, edited in place):
- recall: 2..8 "CUE KEY." plants (KEY = 2..5 items: words ranked 300..12,300
  by frequency in the prose train text, or random letters and digits), each recalled later as "CUE" followed by KEY, the
  recall d tokens after the plant, d log-uniform in [32, max_back];
- repeat: 1..4 spans of 16..256 tokens, each copied d tokens later (plain
  induction on natural text, no cue);
- random: a run of 16..128 random token ids written 2..4 times in a row
  (the textbook induction task);
- far: 1..3 runs of 8..64 random ids, each written again 32..max_back
  tokens later with text in between (share 0 by default; see below);
- perturbed: repeat's spans with 15..50% of their tokens random ids in
  both copies (share 0 by default; see below).
Copy rows are 30% recall, 30% repeat, 40% random by default (MIX,
train_target.py --copy-mix). Why so dense: with copy
targets ~1-5% of the tokens (recall and short repeats only) 1,500 steps
taught the stage-1 model nothing measurable (on a span of natural text
repeated 128 tokens back its predictions stayed the prior's, not the copy;
checked by hand during training, no committed diagnostic).

Tried and not adopted (2 Dec): a stage 3 continuing the bundled target for
2,700 more steps with half of the copy rows recall rows (--copy-mix
0.5,0.25,0.25, seed 7, 42 min) ended at 11 of 39 greedy probes (stage 2:
15) and a teacher-forced key-token accuracy (copy_token_acc) of 0.919
(stage 2: 0.923); mid-run checkpoints at peak LR read 19-21 probes, so
the 39 all-or-nothing probes move by +-5 on noise alone. The errors are
spread over the key, not ambiguity or distance: the probe words are 3-5
tokens each (zephyr = z|ep|h|y|r), a 4-word key is ~12 tokens, and ~0.92
per token gives 0.92^12 ~ 0.37, the pass rate seen; the first token (the
recall on cue) is the weakest, 0.82-0.85. The model copies a word's first
pieces and lets the prior finish it (maple -> major, meadow -> mosow).
All probes passing needs per-token copying near 0.99: a stronger
induction circuit than this 4-layer model formed from 11M copy-mixed
tokens.

Where the copy is weak (2 Dec, span_copy_acc below; `python tiny_copy.py
[MODEL]` prints all three measures): the bundled target repeats a span of
random ids 0.91 of the time 24 tokens later but 0.74 at 200 and 0.19 at
800 (random_repeat's runs are adjacent, so long-range copying of
prior-free tokens was never asked for), and a span of its own prose only
0.66-0.69 at any distance up to 400: on natural text the prior outvotes
the copy. The probe misses are that: sil|ver -> sil|ent, qu|artz ->
qu|ant, m|eadow -> m|ed; 28 of the 37 missed key tokens follow a token
that occurs only once before (the match is not ambiguous), and the copy's
probability is low throughout: median 0.80 over all key tokens
(copy_token_acc's misses_after_unique_token and p_copy_median). Tried and not adopted: 800 more
steps from the bundled target with two more row kinds, random_far (random
runs copied 32..900 back) and perturbed (repeat's spans with 15-50% of
their tokens random, so the copy contradicts the prior), --copy-mix
0.15,0.15,0.2,0.35,0.15, seed 8, 31 min on a 2-core Xeon (1,800-2,100
tok/s while it ran alone, steps 1-450; the emulator's build and test ran
beside it after that): random spans 0.91-0.94 to 400 back and 0.83 at 800, perturbed
0.63-0.78, but natural text 0.67-0.73 (barely moved), copy_token_acc
0.942 (0.923), probes 17 of 39 (15, within the +-5 noise), validation
loss +0.014 code / +0.016 prose. Long-range induction is learnable here;
trusting the copy over the prior on natural text is what the 4-layer,
256-wide model does not learn at this budget.

Found 3 Dec, evening: a recall plant's intro and cue were tokenized
apart, so every training plant read [".", " ", "The", " pass", ...] where
the probes' plant (and any text) reads [".", " The", " pass", ...]; the
key's first token, the recall on cue, was the weakest (0.74–0.85) and
its misses were the prior's distribution, not a wrong copy. Plants are now
tokenized as the text they are (split_cue=False; --copy-split-cue keeps
the old rows, bit for bit, which is how the bundled family was trained).
The 800-step recipe above (--copy-mix 0.15,0.15,0.2,0.35,0.15, seed 8)
with joint plants: probes 17 -> 28 of 39, copy_token_acc 0.942 -> 0.971,
first key token 0.74 -> 0.95 (models/README.md has the command and the
longer run).

Adopted 4 Dec (models/tiny, scripts/train/train_tiny.sh steps joint and
anneal): 1,600 steps of that recipe from stage 2 (34 of 39 probes), then
500 steps at a fifth of the LR with recall rows 40% of the copy rows
(--copy-mix 0.4,0.1,0.15,0.25,0.1): 36 of 39, key tokens 0.994, the key's
first token 1.00, and every canary probe (96-192 back) passes on a clean
server. 1,600 more steps at the full LR instead had given 29 of 39: the
lever was the LR and the data, not the length.
"""
import json
import math
import os
import re

import numpy as np
import torch

import tiny_common as tc

MIX = (0.3, 0.3, 0.4, 0.0, 0.0)   # recall, repeat, random, far, perturbed: stage 2's proportions (the default)
CUES = ("The passphrase is:", "The password is:", "Remember the code word:", "Key:", "The secret is:",
        "Token =", "The answer is:", "Name:", "ID:", "The magic words are:")
INTROS = ("Remember this. ", "Note: ", "", "Important. ", "Keep this in mind. ")


def word_pool(n=12000, skip=300, exclude=()):
    """Lowercase alphabetic words (4..10 letters) of the prose train text by
    frequency, ranks skip..skip+n (the commonest are guessable from context
    alone), minus `exclude`. Cached in WORK/data/copy_words.json."""
    cache = os.path.join(tc.WORK, "data", "copy_words.json")
    if os.path.exists(cache):
        with open(cache, encoding="utf-8") as f:
            words = json.load(f)
    else:
        counts = {}
        with open(os.path.join(tc.CORPUS, "prose", "train.jsonl"), encoding="utf-8") as f:
            for line in f:
                for w in re.findall(r"\b[a-z]{4,10}\b", json.loads(line)["text"]):
                    counts[w] = counts.get(w, 0) + 1
        words = [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:skip + n + 200]]
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        with open(cache, "w", encoding="utf-8") as f:
            json.dump(words, f)
    ex = set(exclude)
    return [w for w in words[skip:] if w not in ex][:n]


class CopyRows:
    """Edits corpus windows into copy rows; deterministic given the seed."""

    def __init__(self, tok, seed, max_back=900, exclude=(), mix=MIX, split_cue=False):
        self.tok = tok
        self.mix = np.cumsum(mix) / np.sum(mix)
        self.rng = np.random.default_rng(seed + 7919)
        self.max_back = max_back
        self.words = word_pool(exclude=exclude)
        self.cues = [tok.encode(c, add_special_tokens=False).ids for c in CUES]
        self.intros = [tok.encode("\n\n" + i, add_special_tokens=False).ids for i in INTROS]
        # A plant's intro and cue are one text ("Remember this. The passphrase
        # is:"), tokenized as such: ". The" is [".", " The"]. split_cue
        # tokenizes them apart ([".", " ", "The"], a sequence no text has):
        # what models/tiny and its drafters were trained with (see SPLIT_CUE_NOTE).
        self.split_cue = split_cue
        self.intro_cue = [[tok.encode("\n\n" + i + c, add_special_tokens=False).ids for c in CUES] for i in INTROS]
        self.sep = tok.encode(".\n\n", add_special_tokens=False).ids
        self.nl = tok.encode("\n\n", add_special_tokens=False).ids
        self.nl_arr = np.asarray(self.nl, dtype=np.int64)
        self.vocab_ordinary = tok.token_to_id("<|endoftext|>")  # special ids start here

    def _dist(self, lo, hi):
        return int(round(math.exp(self.rng.uniform(math.log(lo), math.log(hi)))))

    def _item(self):
        """A pool word (most of them several tokens long), or 30% of the time a
        random letters-and-digits string that no prior can guess."""
        if self.rng.random() < 0.7:
            return self.words[int(self.rng.integers(len(self.words)))]
        alpha = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
        return "".join(alpha[int(i)] for i in self.rng.integers(0, len(alpha), size=int(self.rng.integers(3, 9))))

    def _key(self):
        ws = [self._item() for _ in range(int(self.rng.integers(2, 6)))]
        return self.tok.encode(" " + " ".join(ws), add_special_tokens=False).ids

    def recall(self, row):
        """1..3 plant/recall pairs spliced into the window (row: int64 array)."""
        T = len(row)
        out = row.copy()
        used = np.zeros(T, dtype=bool)
        for _ in range(int(self.rng.integers(2, 9))):
            c = int(self.rng.integers(len(self.cues)))
            key = self._key()
            i = int(self.rng.integers(len(self.intros)))
            plant = (self.intros[i] + self.cues[c] if self.split_cue else self.intro_cue[i][c]) + key + self.sep
            back = self.nl + self.cues[c] + key + self.sep
            span = len(plant) + len(back)
            hi = min(self.max_back, T - span - 2)
            if hi <= 32:
                break
            d = self._dist(32, hi)  # tokens from the plant's key to the recall's key
            p = int(self.rng.integers(0, T - (d + len(back) + len(plant)) + 1))
            q = p + len(plant) - len(self.sep) - len(key) + d - len(self.nl) - len(self.cues[c])
            if q < p + len(plant) or q + len(back) > T or used[p:p + len(plant)].any() or used[q:q + len(back)].any():
                continue
            out[p:p + len(plant)] = plant
            out[q:q + len(back)] = back
            used[p:p + len(plant)] = True
            used[q:q + len(back)] = True
        return out

    def _spans(self, T, n_max, s_min, s_max):
        """(p, d, s) for 1..n_max spans of s_min..s_max tokens at p, each to
        be written again d tokens later (d log-uniform in [32, max_back],
        both copies inside the T-token window); fewer when one does not fit."""
        for _ in range(int(self.rng.integers(1, n_max + 1))):
            s = int(self.rng.integers(s_min, s_max + 1))
            hi = min(self.max_back, T - 2 * s - 1)
            if hi <= 32:
                return
            d = self._dist(32, hi)
            yield int(self.rng.integers(0, T - d - s + 1)), d, s

    def repeat(self, row):
        """1..4 spans of 16..256 tokens, each copied d tokens later."""
        out = row.copy()
        for p, d, s in self._spans(len(row), 4, 16, 256):
            out[p + d:p + d + s] = out[p:p + s]
        return out

    def random_repeat(self, row):
        """A run of 16..128 random ordinary token ids, written 2..4 times in a
        row at a random place of the window: the textbook induction task,
        where only copying predicts anything after the first run."""
        T = len(row)
        out = row.copy()
        n = int(self.rng.integers(16, 129))
        reps = int(self.rng.integers(2, 5))
        run = self.rng.integers(256, self.vocab_ordinary, size=n)
        blk = np.concatenate([self.nl_arr] + [run] * reps + [self.nl_arr])[:T]
        p = int(self.rng.integers(0, T - len(blk) + 1))
        out[p:p + len(blk)] = blk
        return out

    def random_far(self, row):
        """1..3 runs of 8..64 random ordinary ids, each written again d
        tokens later (d log-uniform in [32, max_back]) with natural text in
        between: induction at the distances the probes ask for, where only
        copying predicts the second run (random_repeat's runs are adjacent)."""
        out = row.copy()
        for p, d, s in self._spans(len(row), 3, 8, 64):
            run = self.rng.integers(256, self.vocab_ordinary, size=s)
            out[p:p + s] = run
            out[p + d:p + d + s] = run
        return out

    def perturbed(self, row):
        """repeat's spans with a share 0.15..0.5 of their tokens replaced by
        random ids in both copies: the copy contradicts the prior at those
        tokens (the probes fail where a word's first pieces make the prior
        finish it differently: sil|ver -> sil|ent)."""
        out = row.copy()
        for p, d, s in self._spans(len(row), 3, 16, 128):
            span = out[p:p + s].copy()
            mask = self.rng.random(s) < self.rng.uniform(0.15, 0.5)
            span[mask] = self.rng.integers(256, self.vocab_ordinary, size=int(mask.sum()))
            out[p:p + s] = span
            out[p + d:p + d + s] = span
        return out

    def edit(self, row):
        u = self.rng.random()
        kinds = (self.recall, self.repeat, self.random_repeat, self.random_far, self.perturbed)
        for k, f in enumerate(kinds):
            if u < self.mix[k] or k == len(kinds) - 1:
                return f(row)


class MixedBatcher:
    """tc.Batcher rows, a `copy_frac` share of them edited into copy rows."""

    def __init__(self, batcher, rows, copy_frac, seed):
        self.b, self.rows, self.frac = batcher, rows, copy_frac
        self.rng = np.random.default_rng(seed + 104729)

    def next(self):
        x = self.b.next().numpy()
        for i in range(x.shape[0]):
            if self.rng.random() < self.frac:
                x[i] = self.rows.edit(x[i])
        return torch.from_numpy(x)


SPLIT_CUE_NOTE = ("tokenize a recall plant's intro and cue apart, as models/tiny, its MTP module, "
                  "models/tiny-dspark and models/tiny-draft were trained (the recorded recipe; the default "
                  "tokenizes them as the text they are, which took the copy probes from 17 to 28 of 39)")


def add_args(ap):
    """The copy-row options every trainer shares."""
    ap.add_argument("--copy-split-cue", action="store_true", help=SPLIT_CUE_NOTE)


def mixed(batcher, copy_frac, seed, max_back=900, mix=MIX, split_cue=False):
    """`batcher` with a copy_frac share of copy rows (itself when 0), of the
    kinds recall/repeat/random in the proportions `mix`; the probe words are
    never used."""
    if copy_frac <= 0:
        return batcher
    from tiny_workloads import WORDS
    return MixedBatcher(batcher, CopyRows(tc.load_tokenizer(), seed, max_back=max_back, exclude=WORDS, mix=mix,
                                          split_cue=split_cue),
                        copy_frac, seed)


def copy_eval(model, tok, path=None, max_new=16):
    """Greedy continuations of workloads/copy.jsonl (HF model, f32): pass
    share per n_back, with the check the canary uses (every expected word
    reproduced in order, punctuation ignored)."""
    path = path or os.path.join(tc.ROOT, "workloads", "copy.jsonl")
    by_n = {}
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(l) for l in f if l.strip()]
    model.eval()
    with torch.no_grad():
        for r in rows:
            ids = torch.tensor([tok.encode(r["prompt"], add_special_tokens=False).ids])
            out = model.generate(ids, max_new_tokens=max_new, do_sample=False, pad_token_id=0)
            text = tok.decode(out[0, ids.shape[1]:].tolist())
            ok = words_match(text, r["expected"])
            n = int(r["category"].split("-n")[1])
            p, t = by_n.get(n, (0, 0))
            by_n[n] = (p + ok, t + 1)
    return {str(n): {"pass": p, "of": t} for n, (p, t) in sorted(by_n.items())}


def copy_token_acc(model, tok, path=None):
    """Teacher-forced accuracy on the probes' key tokens (HF model,
    f32): the share of key tokens that are the argmax given the prompt and
    the key so far, overall, per n_back and per key token index (the last
    bucket "12+"). Less noisy than copy_eval's all-or-nothing greedy check
    (≈ 500 tokens against 39 probes), and it says where inside the key the
    copy fails. Also: the median probability of the key token (the copy),
    and how many missed key tokens follow a token that occurs only once
    before it (in the plant: the earlier match is unambiguous, so the miss
    is the prior outvoting the copy, not a wrong match)."""
    path = path or os.path.join(tc.ROOT, "workloads", "copy.jsonl")
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(l) for l in f if l.strip()]
    by_n, by_i, hit, tot, p_copy, misses, unique_misses = {}, {}, 0, 0, [], 0, 0
    model.eval()
    with torch.no_grad():
        for r in rows:
            a = tok.encode(r["prompt"], add_special_tokens=False).ids
            # the key without its final period: the plant's ".\n\n" is one
            # token, so a faithful copy does not emit the lone "." here
            b = tok.encode(r["prompt"] + r["expected"].rstrip("."), add_special_tokens=False).ids
            if b[:len(a)] != a:
                raise ValueError("%s: the prompt's tokens change when the expected text follows" % r["id"])
            probs = model(input_ids=torch.tensor([b])).logits[0].float().softmax(-1)
            pred = probs.argmax(-1)
            n = int(r["category"].split("-n")[1])
            for i in range(len(a), len(b)):
                ok = int(pred[i - 1] == b[i])
                p_copy.append(probs[i - 1, b[i]].item())
                if not ok:
                    misses += 1
                    unique_misses += b[:i - 1].count(b[i - 1]) <= 1
                k = str(i - len(a)) if i - len(a) < 12 else "12+"
                for d, key in ((by_n, str(n)), (by_i, k)):
                    h, t = d.get(key, (0, 0))
                    d[key] = (h + ok, t + 1)
                hit, tot = hit + ok, tot + 1
    frac = lambda d: {k: round(h / t, 4) for k, (h, t) in d.items()}
    return {"acc": round(hit / tot, 4), "tokens": tot, "by_n_back": frac(by_n), "by_key_token": frac(by_i),
            "p_copy_median": round(float(np.median(p_copy)), 3), "misses": misses,
            "misses_after_unique_token": unique_misses}


def words_match(text, expected):
    """bench/canary/canary_checks.c cc_copy_ok: the expected words, in order, as the
    first words of text (trailing punctuation of each word ignored)."""
    strip = lambda w: w.rstrip(".,;:!?\"'")
    want = [strip(w) for w in expected.split()]
    got = [strip(w) for w in text.split()]
    return int(bool(want) and got[:len(want)] == want)


def span_copy_acc(model, tok, distances=(24, 100, 200, 400, 800), span=24, n=8, seed=0):
    """Teacher-forced induction by distance, without cue words: a span of
    `span` tokens planted at position 50 of a prose validation window and
    written again d tokens later; the share of the repeat's tokens 2..span
    that are the argmax, for three spans: random ordinary ids (the prior
    knows nothing), the window's own text (the prior competes with the
    copy), and that text with 30% of its tokens replaced by random ids (the
    copy contradicts the prior). {kind: {d: acc}}."""
    rng = np.random.default_rng(seed)
    x = tc.eval_windows("prose", "val", 1024, n)
    hi = tok.token_to_id("<|endoftext|>")
    out = {}
    model.eval()
    for kind in ("random", "natural", "perturbed"):
        out[kind] = {}
        for d in distances:
            rows = []
            for i in range(n):
                r = x[i].numpy().copy()[:50 + d + span + 1]
                s = r[50:50 + span].copy()
                if kind == "random":
                    s = rng.integers(256, hi, size=span)
                elif kind == "perturbed":
                    m = rng.random(span) < 0.3
                    s[m] = rng.integers(256, hi, size=int(m.sum()))
                r[50:50 + span] = s
                r[50 + d:50 + d + span] = s
                rows.append(r)
            t = torch.from_numpy(np.stack(rows))
            with torch.no_grad():
                pred = model(input_ids=t).logits.argmax(-1)
            a = 50 + d + 1   # tokens a..a+span-2 of the repeat, each predicted from the one before
            out[kind][str(d)] = round((pred[:, a - 1:a + span - 2] == t[:, a:a + span - 1]).float().mean().item(), 3)
    return out


if __name__ == "__main__":
    # tiny_copy.py [MODEL_DIR | CKPT]: the copy measures of a written target
    # (default models/tiny) or of a train_target.py checkpoint
    import sys
    m = tc.load_target(None, torch.float32)
    if len(sys.argv) > 1 and os.path.isfile(sys.argv[1]):
        m.load_state_dict(torch.load(sys.argv[1], map_location="cpu", weights_only=False)["modules"]["model"])
    elif len(sys.argv) > 1:
        m = tc.load_target(sys.argv[1], torch.float32)
    t = tc.load_tokenizer()
    print(json.dumps({"copy_probes": copy_eval(m, t), "copy_token_acc": copy_token_acc(m, t),
                      "span_copy_acc": span_copy_acc(m, t)}, indent=1))
