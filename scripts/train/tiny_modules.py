"""tiny_modules.py — the PyTorch reference forwards of the bundled drafters.

Owns: one Qwen3 decoder block written out (same parameter names and the same
arithmetic as HF's Qwen3DecoderLayer, but with the attention's keys/values
and mask explicit, so one block serves causal, chained and DSpark
non-causal use), the DeepSeek-V3 MTP module, the DeepSpec-layout DSpark
drafter, and a block stack for the draft model. These definitions ARE the
reference the C drafters are checked against (make_drafter_goldens.py).
Must not: carry training logic (train_*.py) or file formats beyond
state_dict names.

Conventions fixed here (models/README.md repeats them):
- MTP (DeepSeek-V3 semantics): row i takes [enorm(Emb(t_{i+1})); hnorm(h_i)]
  (embedding first), eh_proj, one Qwen3 block at RoPE position i, then the
  module's own output norm (shared_head.norm) and the target's lm_head; it predicts t_{i+2}. h_i is the target's
  hidden state AFTER the final norm (the vector the target's lm_head reads,
  what vLLM/SGLang hand their MTP/EAGLE drafters). Chaining feeds the module's
  own output after the same final norm back as h.
- DSpark (DeepSpec Qwen3 layout): ctx = hidden_norm(fc(concat of the outputs
  of decoder layers target_layer_ids)); each draft layer's keys/values are
  [k/v_proj(ctx) at positions 0..a-1 | k/v_proj(block) at a..a+γ-1], ctx NOT
  passed through the layer's input_layernorm, k_norm on both; block queries
  see every ctx position < a and the whole block (non-causal). Block =
  [anchor, MASK x (γ-1)]; slot k predicts the token at a+k+1. U_k =
  lm_head(norm(h_k)); Markov: logits_k = U_k + W2(W1[x_{k-1}]), x_0 =
  anchor, x_k the token drafted (or, in training, the true token) at slot k;
  confidence c_k = sigmoid(proj([norm(h_k); W1[x_{k-1}]])).
"""
import math

import torch
import torch.nn.functional as F
from torch import nn
from transformers.models.qwen3.modeling_qwen3 import Qwen3MLP, Qwen3RMSNorm, Qwen3RotaryEmbedding, rotate_half
from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock


def rope(x, cos, sin):
    """x [B, S, H, D]; cos/sin [B, S, D] (HF rotate_half convention)."""
    return x * cos.unsqueeze(2) + rotate_half(x) * sin.unsqueeze(2)


class Attn(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.h, self.kv, self.d = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        hs = cfg.hidden_size
        self.q_proj = nn.Linear(hs, self.h * self.d, bias=False)
        self.k_proj = nn.Linear(hs, self.kv * self.d, bias=False)
        self.v_proj = nn.Linear(hs, self.kv * self.d, bias=False)
        self.o_proj = nn.Linear(self.h * self.d, hs, bias=False)
        self.q_norm = Qwen3RMSNorm(self.d, eps=cfg.rms_norm_eps)
        self.k_norm = Qwen3RMSNorm(self.d, eps=cfg.rms_norm_eps)

    def kv_of(self, x, cos, sin):
        """Keys (k_norm, RoPE) and values of rows x [B, S, hidden]."""
        B, S, _ = x.shape
        k = self.k_norm(self.k_proj(x).view(B, S, self.kv, self.d))
        v = self.v_proj(x).view(B, S, self.kv, self.d)
        return rope(k, cos, sin), v

    def forward(self, x, cos, sin, k_pre=None, v_pre=None, mask=None, causal=False):
        """x [B, L, hidden] (already input-normed). Keys = [k_pre | own rows].
        mask [B, L, S_total] bool, True = may attend. Returns (out, k_own, v_own)."""
        B, L, _ = x.shape
        q = rope(self.q_norm(self.q_proj(x).view(B, L, self.h, self.d)), cos, sin)
        k, v = self.kv_of(x, cos, sin)
        k_all = k if k_pre is None else torch.cat([k_pre, k], 1)
        v_all = v if v_pre is None else torch.cat([v_pre, v], 1)
        rep = self.h // self.kv
        qh = q.transpose(1, 2)
        kh = k_all.transpose(1, 2).repeat_interleave(rep, 1)
        vh = v_all.transpose(1, 2).repeat_interleave(rep, 1)
        if causal and mask is None:
            o = F.scaled_dot_product_attention(qh, kh, vh, is_causal=True, scale=1.0 / math.sqrt(self.d))
        else:
            o = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask.unsqueeze(1), scale=1.0 / math.sqrt(self.d))
        return self.o_proj(o.transpose(1, 2).reshape(B, L, self.h * self.d)), k, v


class SparseMLP(Qwen3MoeSparseMoeBlock):
    """HF's Qwen3-MoE sparse block (same names: gate, experts.E.*; same
    routing) returning only its output, so a Block can hold it as its mlp."""

    def forward(self, x):
        return super().forward(x)[0]


def layer_is_sparse(cfg, layer):
    """HF Qwen3MoeDecoderLayer's rule (a dense config has no experts)."""
    return bool(getattr(cfg, "num_experts", 0)) and layer not in (cfg.mlp_only_layers or []) and \
        (layer + 1) % cfg.decoder_sparse_step == 0


class Block(nn.Module):
    """Qwen3 decoder block; attribute names = HF's (self_attn, mlp, input_layernorm, post_attention_layernorm).
    sparse: the MLP is a Qwen3-MoE sparse block (a Qwen3-MoE target's layer)."""

    def __init__(self, cfg, sparse=False):
        super().__init__()
        self.self_attn = Attn(cfg)
        self.mlp = SparseMLP(cfg) if sparse else Qwen3MLP(cfg)
        self.input_layernorm = Qwen3RMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps)
        self.post_attention_layernorm = Qwen3RMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps)

    def forward(self, x, cos, sin, k_pre=None, v_pre=None, mask=None, causal=False):
        a, k, v = self.self_attn(self.input_layernorm(x), cos, sin, k_pre, v_pre, mask, causal)
        x = x + a
        return x + self.mlp(self.post_attention_layernorm(x)), k, v


class Rotary(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.r = Qwen3RotaryEmbedding(cfg)

    def forward(self, pos, dtype=torch.float32):
        """pos [B, S] long -> cos, sin [B, S, head_dim]."""
        dummy = torch.empty(0, dtype=dtype)
        return self.r(dummy, pos)


def chain_mask(lim, T, n_extra, device=None):
    """[A, 1, T + n_extra] bool: true-context key j < lim[a], all extra keys."""
    A = lim.shape[0]
    ctx = torch.arange(T).view(1, 1, T) < lim.view(A, 1, 1)
    return torch.cat([ctx, torch.ones(A, 1, n_extra, dtype=torch.bool)], 2)


class MTP(nn.Module):
    """DeepSeek-V3 MTP module (one). It owns its output norm (DeepSeek-V3's
    shared_head.norm, which vLLM and SGLang apply); the embedding and the
    lm_head are the frozen target's, passed in as `target`."""

    def __init__(self, cfg):
        super().__init__()
        hs = cfg.hidden_size
        self.enorm = Qwen3RMSNorm(hs, eps=cfg.rms_norm_eps)
        self.hnorm = Qwen3RMSNorm(hs, eps=cfg.rms_norm_eps)
        self.eh_proj = nn.Linear(2 * hs, hs, bias=False)
        self.block = Block(cfg)
        self.head_norm = Qwen3RMSNorm(hs, eps=cfg.rms_norm_eps)
        self.rot = Rotary(cfg)

    def fuse(self, target, next_ids, h):
        e = target.model.embed_tokens(next_ids)
        return self.eh_proj(torch.cat([self.enorm(e), self.hnorm(h)], -1))

    def forward(self, target, next_ids, h, pos):
        """Causal pass. next_ids [B, S] = t_{i+1}; h [B, S, hidden] = h_i; pos [B, S] = i.
        Returns (logits [B,S,V], g = head-normed output [B,S,hidden], k, v)."""
        x = self.fuse(target, next_ids, h)
        cos, sin = self.rot(pos)
        y, k, v = self.block(x, cos, sin, causal=True)
        g = self.head_norm(y)
        return target.lm_head(g), g, k, v

    def step(self, target, next_ids, h, pos, k_pre, v_pre, mask):
        """One chained row per batch entry: next_ids [A,1], h [A,1,hidden], pos [A,1]."""
        x = self.fuse(target, next_ids, h)
        cos, sin = self.rot(pos)
        y, k, v = self.block(x, cos, sin, k_pre, v_pre, mask)
        g = self.head_norm(y)
        return target.lm_head(g), g, k, v

    def state_dict_ds(self, layer):
        """Weights under DeepSeek-V3 names: model.layers.{layer}.{enorm,hnorm,eh_proj,
        shared_head.norm,<Qwen3 block names>}."""
        out = {}
        for k, v in self.state_dict().items():
            if k.startswith("rot."):
                continue
            k = k[len("block."):] if k.startswith("block.") else k
            k = k.replace("head_norm.", "shared_head.norm.")
            out["model.layers.%d.%s" % (layer, k)] = v
        return out

    def load_ds(self, sd, layer, target_norm=None):
        """From DeepSeek-V3 names; a checkpoint without shared_head.norm gets
        the target's model.norm (sd's, else target_norm: what the engine
        falls back to, and says)."""
        pre = "model.layers.%d." % layer
        mine = {}
        for k, v in sd.items():
            if not k.startswith(pre) or (k.startswith(pre + "shared_head.") and k != pre + "shared_head.norm.weight"):
                continue
            name = k[len(pre):]
            if name == "shared_head.norm.weight":
                mine["head_norm.weight"] = v
            else:
                mine[name if name.split(".")[0] in ("enorm", "hnorm", "eh_proj") else "block." + name] = v
        if "head_norm.weight" not in mine:
            norm = sd.get("model.norm.weight", target_norm)
            if norm is not None:
                mine["head_norm.weight"] = norm
        missing, unexpected = self.load_state_dict(mine, strict=False)
        missing = [m for m in missing if not m.startswith("rot.")]
        if missing or unexpected:
            raise KeyError("MTP weights: missing %s unexpected %s" % (missing, unexpected))


class VanillaMarkov(nn.Module):
    def __init__(self, vocab, rank):
        super().__init__()
        self.markov_w1 = nn.Embedding(vocab, rank)
        self.markov_w2 = nn.Linear(rank, vocab, bias=False)

    def bias(self, prev):
        return self.markov_w2(self.markov_w1(prev))


class ConfidenceHead(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, 1)

    def forward(self, f):
        return self.proj(f).squeeze(-1)


class DSpark(nn.Module):
    """DeepSpec Qwen3DSparkModel layout (state_dict names as DeepSpec saves them)."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        hs, V = cfg.hidden_size, cfg.vocab_size
        self.target_layer_ids = list(cfg.target_layer_ids)
        self.block_size = int(cfg.block_size)
        self.mask_token_id = int(cfg.mask_token_id)
        self.embed_tokens = nn.Embedding(V, hs)
        self.layers = nn.ModuleList([Block(cfg) for _ in range(cfg.num_hidden_layers)])
        self.norm = Qwen3RMSNorm(hs, eps=cfg.rms_norm_eps)
        self.fc = nn.Linear(len(self.target_layer_ids) * hs, hs, bias=False)
        self.hidden_norm = Qwen3RMSNorm(hs, eps=cfg.rms_norm_eps)
        self.lm_head = nn.Linear(hs, V, bias=False)
        self.markov_head = VanillaMarkov(V, int(cfg.markov_rank))
        self.confidence_head = ConfidenceHead(hs + int(cfg.markov_rank))
        self.rot = Rotary(cfg)

    def context(self, taps):
        """taps [B, T, n_taps*hidden] (concat of tapped layer outputs) -> ctx [B, T, hidden]."""
        return self.hidden_norm(self.fc(taps))

    def backbone(self, block_ids, block_pos, ctx, mask):
        """block_ids/block_pos [B, Q]; ctx [B, T, hidden] at positions 0..T-1;
        mask [B, Q, T+Q]. Returns norm(h) [B, Q, hidden]."""
        B, T, _ = ctx.shape
        x = self.embed_tokens(block_ids)
        cq, sq = self.rot(block_pos)
        cc, sc = self.rot(torch.arange(T).unsqueeze(0).expand(B, T))
        for layer in self.layers:
            kc, vc = layer.self_attn.kv_of(ctx, cc, sc)
            x, _, _ = layer(x, cq, sq, kc, vc, mask)
        return self.norm(x)

    def block_mask(self, anchors, T, n_blocks=1):
        """anchors [B, A] -> mask [B, A*nγ, T + A*nγ] for n = n_blocks chained
        blocks per anchor (rows of anchor i: block 0, block 1, ...): ctx j <
        anchor, and the rows of the same anchor's blocks 0..b for a block-b
        row (non-causal within a block). A block never sees a later one, so
        blocks 0..b-1 get exactly the keys/values of their own passes and
        this one pass equals spec/drafter_dspark.h's chaining (checked
        against make_drafter_fixture.py's dspark_chain). n_blocks=1 is the
        plain one-block mask."""
        B, A = anchors.shape
        g = self.block_size
        span = n_blocks * g
        Q = A * span
        r = torch.arange(Q)
        qa, qb = r // span, (r // g) % n_blocks  # anchor, block within the chain
        anc = anchors[:, qa]  # [B, Q]
        ctx = torch.arange(T).view(1, 1, T) < anc.unsqueeze(-1)
        own = ((qa.view(Q, 1) == qa.view(1, Q)) & (qb.view(1, Q) <= qb.view(Q, 1))).expand(B, Q, Q)
        return torch.cat([ctx, own], -1)

    def block_inputs(self, anchor_tokens, anchors, starts=None):
        """Rows [x_0, MASK x (γ-1), x_1, MASK x (γ-1), ...] at positions
        a .. a+nγ-1: x_0 = the anchor token, x_b (starts [B, A, n-1]) the
        first token of chained block b (the last draft of block b-1)."""
        B, A = anchors.shape
        g = self.block_size
        first = anchor_tokens.unsqueeze(-1) if starts is None else torch.cat([anchor_tokens.unsqueeze(-1), starts], -1)
        n = first.shape[-1]
        ids = torch.full((B, A, n, g), self.mask_token_id, dtype=torch.long)
        ids[:, :, :, 0] = first
        pos = anchors.unsqueeze(-1) + torch.arange(n * g).view(1, 1, n * g)
        return ids.view(B, A * n * g), pos.view(B, A * n * g)

    def heads(self, hn, prev):
        """hn [.., hidden] normed block output, prev [..] previous tokens ->
        (base logits U, corrected logits, confidence logits)."""
        U = self.lm_head(hn)
        w1 = self.markov_head.markov_w1(prev)
        corrected = U + self.markov_head.markov_w2(w1)
        conf = self.confidence_head(torch.cat([hn, w1.to(hn.dtype)], -1))
        return U, corrected, conf

    def draft(self, ctx, anchors, anchor_tokens, n_blocks=1):
        """Greedy drafting (inference path) of n_blocks chained blocks per
        anchor (depth nγ, spec/drafter_dspark.h's rule; 1 = one block)
        through block_mask/block_inputs, the masked single pass
        train_dspark.py --chain-blocks trains: pass b fills in block b's
        first token (block b-1's last draft) and reads block b's rows; rows
        of later blocks hold placeholders that no earlier row attends to.
        ctx [B, T, hidden], anchors [B, A], anchor_tokens [B, A].
        Returns tokens [B,A,nγ], base [B,A,nγ,V], corrected [B,A,nγ,V],
        conf_logit [B,A,nγ]."""
        B, A = anchors.shape
        g = self.block_size
        starts = torch.full((B, A, n_blocks - 1), self.mask_token_id, dtype=torch.long)
        mask = self.block_mask(anchors, ctx.shape[1], n_blocks)
        prev = anchor_tokens
        toks, bases, cors, confs = [], [], [], []
        for b in range(n_blocks):
            ids, pos = self.block_inputs(anchor_tokens, anchors, starts if n_blocks > 1 else None)
            hn = self.backbone(ids, pos, ctx, mask).view(B, A, n_blocks, g, -1)[:, :, b]
            for k in range(g):
                U, cor, conf = self.heads(hn[:, :, k], prev)
                prev = cor.argmax(-1)
                toks.append(prev)
                bases.append(U)
                cors.append(cor)
                confs.append(conf)
            if b + 1 < n_blocks:
                starts[:, :, b] = prev
        return torch.stack(toks, 2), torch.stack(bases, 2), torch.stack(cors, 2), torch.stack(confs, 2)

    def hf_state_dict(self):
        return {k: v for k, v in self.state_dict().items() if not k.startswith("rot.")}


class Stack(nn.Module):
    """A Qwen3ForCausalLM's (or Qwen3MoeForCausalLM's) weights run through Block (for chained drafting
    with explicit per-anchor K/V). Names follow HF: model.embed_tokens,
    model.layers.N, model.norm, lm_head (tied or not)."""

    def __init__(self, hf_model):
        super().__init__()
        cfg = hf_model.config
        self.hf = hf_model
        self.layers = nn.ModuleList([Block(cfg, layer_is_sparse(cfg, i)) for i in range(cfg.num_hidden_layers)])
        for i, l in enumerate(self.layers):
            l.load_state_dict(hf_model.model.layers[i].state_dict())
        self.rot = Rotary(cfg)

    def causal(self, ids):
        """ids [B, T] -> logits [B,T,V], per-layer (k, v) lists."""
        B, T = ids.shape
        x = self.hf.model.embed_tokens(ids)
        cos, sin = self.rot(torch.arange(T).unsqueeze(0).expand(B, T))
        ks, vs = [], []
        for l in self.layers:
            x, k, v = l(x, cos, sin, causal=True)
            ks.append(k)
            vs.append(v)
        return self.hf.lm_head(self.hf.model.norm(x)), ks, vs

    final_tap = "normed"

    def taps(self, ids, layer_ids, final=None):
        """ids [B, T] -> (concat of the outputs of decoder layers layer_ids
        [B, T, n*hidden], final-normed hidden [B, T, hidden]). Layer L is
        HF's hidden_states[L + 1] (DeepSpec's and DFlash's indexing), so the
        final layer's tap is by default the final-normed hidden state, as HF
        returns it; final="raw" (or self.final_tap) gives the final decoder
        layer's own output, as DeepSpec's target cache hooks it."""
        final = final or self.final_tap
        if final not in ("raw", "normed"):
            raise ValueError("final tap must be raw or normed, not %r" % (final,))
        B, T = ids.shape
        x = self.hf.model.embed_tokens(ids)
        cos, sin = self.rot(torch.arange(T).unsqueeze(0).expand(B, T))
        outs = []
        last = len(self.layers) - 1
        for i, l in enumerate(self.layers):
            x, _, _ = l(x, cos, sin, causal=True)
            if i in layer_ids:
                outs.append(self.hf.model.norm(x) if i == last and final == "normed" else x)
        return torch.cat(outs, -1), self.hf.model.norm(x)

    def step(self, ids, pos, k_pre, v_pre, mask):
        """ids/pos [A,1]; k_pre/v_pre per layer [A, S, kv, d]; mask [A,1,S+1]."""
        x = self.hf.model.embed_tokens(ids)
        cos, sin = self.rot(pos)
        ks, vs = [], []
        for i, l in enumerate(self.layers):
            x, k, v = l(x, cos, sin, k_pre[i], v_pre[i], mask)
            ks.append(k)
            vs.append(v)
        return self.hf.lm_head(self.hf.model.norm(x)), ks, vs
