"""tiny_common.py — shared pieces of the bundled tiny model family's PyTorch code.

Owns: the target's dimensions (one place), corpus tokenisation into cached
token streams, deterministic batch sampling, bf16 safetensors save/load
helpers, and the training-loop utilities (LR schedule, logging, resumable
checkpoints) the train_*.py scripts share.
Must not: be imported by anything outside scripts/ (Python is never needed at
C build or test time).

Paths: corpus in scratch/corpus (build_corpus.py), token caches and
checkpoints in scratch/tiny (both git-ignored), artefacts in models/.
"""
import json
import math
import os
import sys
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.environ.get("SPECBED_CORPUS", os.path.join(ROOT, "scratch", "corpus"))
WORK = os.environ.get("SPECBED_TINY_WORK", os.path.join(ROOT, "scratch", "tiny"))
MODELS = os.environ.get("SPECBED_MODELS", os.path.join(ROOT, "models"))
DOMAINS = ("code", "prose")

# Target dimensions, chosen from measured CPU throughput (models/README.md).
TARGET = dict(
    vocab_size=4096, hidden_size=256, intermediate_size=768, num_hidden_layers=4,
    num_attention_heads=4, num_key_value_heads=2, head_dim=64, max_position_embeddings=1024,
    rope_theta=10000.0, rms_norm_eps=1e-6, tie_word_embeddings=True, attention_bias=False,
    hidden_act="silu", attention_dropout=0.0, use_sliding_window=False,
)
SEQ_LEN = 512

# The MoE lab target (models/tiny-moe, train_target.py --moe): TARGET's shape with
# every MLP a Qwen3-MoE sparse block. top_k x moe_intermediate_size = TARGET's
# intermediate_size, so a token's active MLP is the dense target's (and its
# dense MLP upcycles exactly: tiny_modules.upcycle_moe); intermediate_size stays
# 768 for dense blocks (the MTP module's MLP).
MOE = dict(
    num_experts=16, num_experts_per_tok=4, moe_intermediate_size=192, norm_topk_prob=True,
    decoder_sparse_step=1, mlp_only_layers=[], output_router_logits=False, router_aux_loss_coef=0.001,
)


def add_precision_arg(ap):
    """--precision for every trainer: bf16 autocast (the recipe the bundled
    models were trained with) or plain f32."""
    ap.add_argument("--precision", choices=("bf16", "f32"), default="bf16",
                    help="bf16: autocast to bfloat16, f32 master weights (the recorded recipe); f32: no autocast. "
                         "On a CPU without AVX-512 torch's bf16 kernels are emulated: train_speed.py measured 100 "
                         "tok/s against 1,846 in f32 for the target on an AVX2-only AMD EPYC (2 threads)")


def autocast(precision):
    """The forward/backward context of --precision, saying once what the CPU
    makes of it (torch's dispatch level: bf16 autocast is fast only where
    torch uses AVX-512 kernels)."""
    cap = torch.backends.cpu.get_cpu_capability()
    if precision == "bf16" and "AVX512" not in cap and not getattr(autocast, "warned", False):
        autocast.warned = True
        print("warning: bf16 autocast on a CPU where torch dispatches %s kernels is emulated and can be 20x "
              "slower than f32; --precision f32 trains on it at full speed (other weights than the recorded "
              "bf16 runs)" % cap, file=sys.stderr, flush=True)
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16")


def setup_torch(seed):
    torch.set_num_threads(int(os.environ.get("SPECBED_THREADS", "2")))
    torch.manual_seed(seed)
    np.random.seed(seed)


def log(msg, fh=None):
    line = "%s %s" % (time.strftime("%H:%M:%S"), msg)
    print(line, flush=True)
    if fh:
        fh.write(line + "\n")
        fh.flush()


def load_tokenizer(path=None):
    from tokenizers import Tokenizer
    return Tokenizer.from_file(path or os.path.join(MODELS, "tiny", "tokenizer.json"))


def special_ids(tok):
    return {k: tok.token_to_id(k) for k in ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|mask|>")}


def token_stream(domain, split):
    """uint16 token ids of a domain's split: each document's tokens then
    <|endoftext|>, documents in the corpus file's order. Cached in WORK/data."""
    cache = os.path.join(WORK, "data", "%s.%s.npy" % (domain, split))
    if os.path.exists(cache):
        return np.load(cache)
    tok = load_tokenizer()
    eos = tok.token_to_id("<|endoftext|>")
    texts = []
    with open(os.path.join(CORPUS, domain, split + ".jsonl"), encoding="utf-8") as f:
        for line in f:
            texts.append(json.loads(line)["text"])
    ids = []
    for i in range(0, len(texts), 256):
        for enc in tok.encode_batch(texts[i:i + 256], add_special_tokens=False):
            ids.extend(enc.ids)
            ids.append(eos)
    arr = np.asarray(ids, dtype=np.uint16)
    os.makedirs(os.path.dirname(cache), exist_ok=True)
    np.save(cache, arr)
    return arr


class Batcher:
    """Random windows of seq_len+1 tokens from the code and prose streams of
    one split, a domain chosen per row in proportion to its token count.
    Deterministic given the seed (own numpy Generator)."""

    def __init__(self, split, seq_len, batch, seed):
        self.streams = [token_stream(d, split) for d in DOMAINS]
        sizes = np.array([len(s) for s in self.streams], dtype=np.float64)
        self.p = sizes / sizes.sum()
        self.seq_len, self.batch = seq_len, batch
        self.rng = np.random.default_rng(seed)

    def next(self):
        rows = []
        for _ in range(self.batch):
            s = self.streams[self.rng.choice(len(self.streams), p=self.p)]
            off = int(self.rng.integers(0, len(s) - self.seq_len - 1))
            rows.append(s[off:off + self.seq_len + 1].astype(np.int64))
        return torch.from_numpy(np.stack(rows))


def eval_windows(domain, split, seq_len, n, seed=1234):
    """n fixed, evenly spaced windows of seq_len+1 tokens (for eval losses)."""
    s = token_stream(domain, split)
    step = max(1, (len(s) - seq_len - 1) // n)
    rows = [s[i * step:i * step + seq_len + 1].astype(np.int64) for i in range(n)]
    return torch.from_numpy(np.stack(rows))


def lr_at(step, total, peak, warmup, floor=0.1, decay_frac=0.2):
    """Warmup-stable-decay: linear warmup, constant peak, then a linear decay
    to floor*peak over the last decay_frac of the steps. Up to the start of
    the decay the LR does not depend on `total`, so a run can be shortened
    (resumed with a smaller --steps) before then and still equal a fresh
    run with that smaller --steps."""
    if step < warmup:
        return peak * (step + 1) / warmup
    start = int(total * (1 - decay_frac))
    if step < start:
        return peak
    t = (step - start) / max(1, total - start)
    return peak * (1 - (1 - floor) * min(1.0, t))


def save_ckpt(path, step, modules, opt, extra=None):
    tmp = path + ".tmp"
    torch.save({"step": step, "modules": {k: m.state_dict() for k, m in modules.items()},
                "opt": opt.state_dict(), "extra": extra or {}}, tmp)
    os.replace(tmp, path)


def load_ckpt(path, modules, opt):
    if not os.path.exists(path):
        return 0, {}
    ck = torch.load(path, map_location="cpu", weights_only=False)
    for k, m in modules.items():
        m.load_state_dict(ck["modules"][k])
    opt.load_state_dict(ck["opt"])
    return ck["step"], ck.get("extra", {})


def bf16_state(sd):
    return {k: v.detach().to(torch.bfloat16).contiguous() for k, v in sd.items()}


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


def load_target(dirpath=None, dtype=torch.float32):
    """The committed target (bf16 on disk) as an HF Qwen3ForCausalLM (or
    Qwen3MoeForCausalLM, as its config.json says) in dtype, frozen, eval mode.
    Extra MTP keys in the file are ignored by HF."""
    import logging
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging
    hf_logging.set_verbosity_error()
    logging.getLogger("transformers").setLevel(logging.ERROR)
    m = AutoModelForCausalLM.from_pretrained(dirpath or os.path.join(MODELS, "tiny"), torch_dtype=dtype)
    m.eval()
    for p in m.parameters():
        p.requires_grad_(False)
    return m


def die(msg):
    sys.exit("%s: %s" % (os.path.basename(sys.argv[0]), msg))
