#!/usr/bin/env python3
"""make_draft_vocab.py — a reduced draft vocabulary (EAGLE-3's d2t map,
FR-Spec's frequency-ranked subset) for a drafter checkpoint: counts token
frequencies on the drafter's training corpus, keeps the N most frequent ids,
and writes a COPY of the checkpoint with the map (spec/draft_vocab.h).

Counting (--corpus):
  bundled   the bundled tiny family's training corpus: the train split of
            both domains (scratch/corpus from scripts/train/build_corpus.py,
            tokenized by tiny_common.token_stream, the streams
            scripts/train_*.py train on; models/corpus_manifest.json lists
            its documents)
  fixture   the fixture drafters' training data: the fixture target's
            greedy continuations that scripts/goldens/make_drafter_fixture.py
            trains tests/fixtures/qwen3-tied-mtp and dspark-tiny on (its
            sequences(), same count, lengths and seed)
Ties in the count go to the lower id. The map is EAGLE-3's: the kept ids
sorted ascending, d2t = ids − arange(N) (int64, target id = draft id +
d2t[draft id]) and t2d = bool [V], true at the kept ids, saved as
draft_vocab.safetensors in the output directory.

Checkpoints (one of):
  --dspark SRC  a DSpark checkpoint directory. The copy's config.json gets
                EAGLE-3's "draft_vocab_size": N. If SRC has lm_head.weight
                [V, H], the copy stores it reduced, [N, H] in draft-id order
                (EAGLE-3's lm_head [draft_vocab_size, H]), and every other
                tensor unchanged; without one, the drafter gathers the
                target's rows at load, unless --store-head TARGET stores
                TARGET's lm_head rows reduced (a second shard).
  --mtp SRC     a target directory with MTP modules: the copy is SRC's
                files plus draft_vocab.safetensors (the drafter gathers each
                module's head rows at load; nothing else changes).
Files that do not change are relative symlinks to SRC's, so the copy is
small; SRC itself is never written. Output goes to --out (default under
results/draft-vocab/); writing into models/ is refused.

Usage:
  .venv/bin/python scripts/train/make_draft_vocab.py --n 1024 --dspark models/tiny-dspark
  .venv/bin/python scripts/train/make_draft_vocab.py --n 1024 --mtp models/tiny
  # the committed test fixtures (tests/test_drafter_vocab.c):
  .venv/bin/python scripts/train/make_draft_vocab.py --fixtures
"""
import argparse
import json
import os
import shutil
import sys

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = os.path.join(ROOT, "models")
FIX = os.path.join(ROOT, "tests", "fixtures")
FIXTURE_N = 512   # of the fixture's 4096: the lossless tests still see drafts accepted (printed coverage)


def die(msg):
    sys.exit("make_draft_vocab.py: " + msg)


# ---------------------------------------------------------------- counting

def counts_bundled(vocab):
    import tiny_common as tc
    c = np.zeros(vocab, dtype=np.int64)
    for domain in tc.DOMAINS:
        if not os.path.exists(os.path.join(tc.CORPUS, domain, "train.jsonl")) and \
                not os.path.exists(os.path.join(tc.WORK, "data", "%s.train.npy" % domain)):
            die("no training corpus at %s; build it with scripts/train/build_corpus.py" % tc.CORPUS)
        s = tc.token_stream(domain, "train")
        c += np.bincount(s.astype(np.int64), minlength=vocab)[:vocab]
        print("corpus %s/train: %d tokens" % (domain, len(s)))
    return c


def counts_fixture(vocab):
    import make_drafter_fixture as mdf
    from transformers import Qwen3ForCausalLM
    torch.set_num_threads(2)
    target = Qwen3ForCausalLM.from_pretrained(mdf.TARGET, torch_dtype=torch.float32).eval()
    # make_drafter_fixture.main(): data = sequences(target, 512, 24, 168, gen) with a fresh gen of seed 5
    data = mdf.sequences(target, 512, 24, 168, torch.Generator().manual_seed(5))
    print("fixture training data: %d sequences of %d tokens" % tuple(data.shape))
    return np.bincount(data.reshape(-1).numpy(), minlength=vocab)[:vocab].astype(np.int64)


def top_ids(counts, n):
    order = np.lexsort((np.arange(len(counts)), -counts))   # count descending, then id ascending
    ids = np.sort(order[:n])
    cov = counts[ids].sum() / max(1, counts.sum())
    print("top %d of %d ids cover %.2f%% of the corpus tokens (%d ids occur at all)"
          % (n, len(counts), 100 * cov, int((counts > 0).sum())))
    return ids


def vocab_tensors(ids, vocab):
    ids = torch.from_numpy(ids.astype(np.int64))
    d2t = ids - torch.arange(len(ids), dtype=torch.int64)
    t2d = torch.zeros(vocab, dtype=torch.bool)
    t2d[ids] = True
    return {"d2t": d2t.contiguous(), "t2d": t2d}


# ---------------------------------------------------------------- writing

def save(tensors, path):
    save_file(tensors, path, metadata={"format": "pt"})
    os.chmod(path, 0o644)


def fresh_dir(out):
    real = os.path.realpath(out)
    if real == os.path.realpath(MODELS) or real.startswith(os.path.realpath(MODELS) + os.sep):
        die("refusing to write into models/ (%s): pick an --out under results/ or scratch/" % out)
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)


def link(src_dir, name, out):
    src = os.path.join(src_dir, name)
    os.symlink(os.path.relpath(os.path.realpath(src), os.path.realpath(out)), os.path.join(out, name))


def shard_files(d):
    idx = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(idx):
        with open(idx) as f:
            return sorted(set(json.load(f)["weight_map"].values()))
    return ["model.safetensors"]


def read_all(d):
    out = {}
    for sh in shard_files(d):
        with safe_open(os.path.join(d, sh), "pt") as f:
            for k in f.keys():
                out[k] = f.get_tensor(k)
    return out


def target_lm_head(target_dir):
    t = read_all(target_dir)
    return t.get("lm_head.weight", t["model.embed_tokens.weight"])   # tied: the embedding


def write_dspark(src, out, ids, vocab, store_head=None):
    fresh_dir(out)
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    if cfg.get("vocab_size") != vocab:
        die("%s/config.json: vocab_size %s, the counts cover %d" % (src, cfg.get("vocab_size"), vocab))
    cfg["draft_vocab_size"] = int(len(ids))
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    save(vocab_tensors(ids, vocab), os.path.join(out, "draft_vocab.safetensors"))
    sel = torch.from_numpy(ids.astype(np.int64))
    names = shard_files(src)
    with safe_open(os.path.join(src, names[0]), "pt") as f:
        has_head = len(names) == 1 and "lm_head.weight" in f.keys()
    if has_head:
        t = read_all(src)
        t["lm_head.weight"] = t["lm_head.weight"][sel].contiguous()
        save(t, os.path.join(out, "model.safetensors"))
        how = "lm_head.weight stored reduced %s" % list(t["lm_head.weight"].shape)
    elif store_head:
        if len(names) != 1:
            die("--store-head needs a single-file checkpoint")
        # in the target's dtype: the very rows the drafter would otherwise gather
        head = target_lm_head(store_head)[sel].contiguous()
        shards = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
        os.symlink(os.path.relpath(os.path.realpath(os.path.join(src, names[0])), os.path.realpath(out)),
                   os.path.join(out, shards[0]))
        save({"lm_head.weight": head}, os.path.join(out, shards[1]))
        with safe_open(os.path.join(src, names[0]), "pt") as f:
            wmap = {k: shards[0] for k in f.keys()}
        wmap["lm_head.weight"] = shards[1]
        with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": dict(sorted(wmap.items()))}, f, indent=2)
            f.write("\n")
        how = "lm_head.weight stored reduced %s from %s's lm_head" % (list(head.shape), store_head)
    else:
        for sh in names:
            link(src, sh, out)
        if len(names) > 1:
            link(src, "model.safetensors.index.json", out)
        how = "no lm_head in the checkpoint: the drafter gathers the target's rows at load"
    for name in ("tokenizer.json", "tokenizer_config.json"):
        if os.path.exists(os.path.join(src, name)):
            link(src, name, out)
    print("wrote %s: draft vocabulary %d of %d, %s" % (os.path.relpath(out, ROOT), len(ids), vocab, how))


def write_mtp(src, out, ids, vocab):
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    if not cfg.get("num_nextn_predict_layers"):
        die("%s/config.json: no MTP module (num_nextn_predict_layers)" % src)
    if cfg.get("vocab_size") != vocab:
        die("%s/config.json: vocab_size %s, the counts cover %d" % (src, cfg.get("vocab_size"), vocab))
    fresh_dir(out)
    for name in sorted(os.listdir(src)):
        if name != "draft_vocab.safetensors":
            link(src, name, out)
    save(vocab_tensors(ids, vocab), os.path.join(out, "draft_vocab.safetensors"))
    print("wrote %s: %s plus a draft vocabulary of %d of %d" % (os.path.relpath(out, ROOT), src, len(ids), vocab))


def fixtures():
    """The committed fixtures of tests/test_drafter_vocab.c (KBs; the rest are links)."""
    vocab = 4096
    ids = top_ids(counts_fixture(vocab), FIXTURE_N)
    write_mtp(os.path.join(FIX, "qwen3-tied-mtp"), os.path.join(FIX, "qwen3-tied-mtp-d2t"), ids, vocab)
    write_dspark(os.path.join(FIX, "dspark-tiny"), os.path.join(FIX, "dspark-tiny-d2t"), ids, vocab)
    write_dspark(os.path.join(FIX, "dspark-tiny"), os.path.join(FIX, "dspark-tiny-d2t-head"), ids, vocab,
                 store_head=os.path.join(FIX, "qwen3-tied"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, help="draft vocabulary size N (the most frequent N ids)")
    ap.add_argument("--corpus", choices=("bundled", "fixture"), default="bundled")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--dspark", metavar="SRC", help="DSpark checkpoint directory to copy with the map")
    g.add_argument("--mtp", metavar="SRC", help="target directory with MTP modules to copy with the map")
    g.add_argument("--fixtures", action="store_true", help="write the committed test fixtures")
    ap.add_argument("--store-head", metavar="TARGET",
                    help="DSpark without lm_head: store TARGET's lm_head rows reduced in the copy")
    ap.add_argument("--out", help="output directory (default results/draft-vocab/<name>-d2t<N>)")
    a = ap.parse_args()
    if a.fixtures:
        fixtures()
        return
    src = a.dspark or a.mtp
    if not src or a.n is None:
        ap.error("--n and one of --dspark / --mtp (or --fixtures) are required")
    with open(os.path.join(src, "config.json")) as f:
        vocab = json.load(f)["vocab_size"]
    if not 1 <= a.n <= vocab:
        die("--n %d: must be 1..%d (the vocabulary)" % (a.n, vocab))
    out = a.out or os.path.join(ROOT, "results", "draft-vocab",
                                "%s-d2t%d" % (os.path.basename(os.path.normpath(src)), a.n))
    real = os.path.realpath(out)
    if real == os.path.realpath(MODELS) or real.startswith(os.path.realpath(MODELS) + os.sep):
        die("refusing to write into models/ (%s): pick an --out under results/ or scratch/" % out)
    ids = top_ids(counts_bundled(vocab) if a.corpus == "bundled" else counts_fixture(vocab), a.n)
    if a.dspark:
        write_dspark(src, out, ids, vocab, a.store_head)
    else:
        write_mtp(src, out, ids, vocab)


if __name__ == "__main__":
    main()
