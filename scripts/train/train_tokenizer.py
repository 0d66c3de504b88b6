#!/usr/bin/env python3
"""train_tokenizer.py — train a Qwen2/Qwen3-style byte-level BPE tokenizer.

Owns: producing DIR/tokenizer.json + DIR/tokenizer_config.json with HF
`tokenizers`. The default style (qwen2) is laid out as Qwen2/Qwen3 lay theirs
out: normalizer NFC; pre_tokenizer Sequence[Split(Qwen2 regex, Isolated),
ByteLevel(add_prefix_space=False, use_regex=False)]; ByteLevel decoder;
ByteLevel post-processor (adds no BOS/EOS); BPE model without unk/byte
fallback. The special tokens <|endoftext|>, <|im_start|>, <|im_end|>,
<|mask|> (the DSpark mask token) come AFTER the BPE vocabulary, as in Qwen,
so the total vocabulary is exactly --vocab-size when the corpus is large
enough (a warning is printed otherwise).

Two more styles exist only to give the C tokenizer's tests small fixtures of
the other families it must load:
  llama3     Llama-3 layout: Split(Llama-3 regex) + ByteLevel, no normalizer,
             ignore_merges=true, merges written as "a b" strings, Llama-3
             special tokens, TemplateProcessing post-processor adding BOS;
  bytelevel  GPT-2/RoBERTa layout: a lone ByteLevel pre-tokenizer with the
             built-in GPT-2 regex and add_prefix_space=true; plus NFC and
             added tokens with lstrip, rstrip and normalized=true.
Must not: depend on anything at C run/test time; read the network.

Deterministic: the same inputs (in the same order) give a byte-identical
tokenizer.json (the HF BPE trainer breaks count ties by pair ids, and ids are
assigned from the sorted alphabet, so the result does not depend on threads).

Usage:
  train_tokenizer.py --input a.txt b.txt --vocab-size 4096 --out models/tiny
  train_tokenizer.py --input-list files.txt --out DIR [--style llama3]
"""
import argparse
import json
import os
import sys

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

# Exactly the pattern in Qwen2/Qwen3's tokenizer.json (Split, behavior Isolated).
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                 r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# Exactly the pattern in Llama-3's tokenizer.json.
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|mask|>"]
LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                   "<|reserved_special_token_1|>", "<|start_header_id|>", "<|end_header_id|>",
                   "<|reserved_special_token_2|>", "<|eot_id|>"]
BYTELEVEL_SPECIALS = ["<|endoftext|>", "<pad>", "<mask>"]
STYLES = {"qwen2": SPECIAL_TOKENS, "llama3": LLAMA3_SPECIALS, "bytelevel": BYTELEVEL_SPECIALS}

# Qwen2.5-style ChatML template without tool calling (the bundled model has no tools).
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def build_tokenizer(style="qwen2"):
    """An untrained tokenizer with the pipeline of the given style."""
    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    if style == "bytelevel":
        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    else:
        if style == "qwen2":
            tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(QWEN2_PATTERN if style == "qwen2" else LLAMA3_PATTERN),
                                 behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=style == "llama3", use_regex=False),
        ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    return tok


def read_list(path):
    with open(path, encoding="utf-8") as f:
        return [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]


def iter_texts(files, chunk_chars=1 << 20):
    """Yields file contents in the given order; undecodable bytes become U+FFFD
    (what the C tokenizer does to invalid UTF-8 too). Large files are chunked
    at line boundaries so memory stays bounded."""
    for path in files:
        with open(path, "rb") as f:
            data = f.read().decode("utf-8", errors="replace")
        start = 0
        while start < len(data):
            end = min(len(data), start + chunk_chars)
            if end < len(data):
                nl = data.rfind("\n", start, end)
                if nl > start:
                    end = nl + 1
            yield data[start:end]
            start = end


def train(files, vocab_size, style="qwen2", min_frequency=2):
    specials = STYLES[style]
    tok = build_tokenizer(style)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(specials) - (3 if style == "bytelevel" else 0),
        min_frequency=min_frequency,
        show_progress=False,
        special_tokens=[],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(iter_texts(files), trainer=trainer)
    # Added after training so they take the ids after the BPE vocabulary (Qwen/Llama layout).
    if style == "bytelevel":
        # Exercise the rarer added-token options: lstrip (as RoBERTa's <mask>),
        # rstrip, and non-special tokens matched after NFC (one written non-NFC).
        tok.add_special_tokens(specials[:-1] + [AddedToken(specials[-1], lstrip=True, special=True)])
        tok.add_tokens([AddedToken("[R]", rstrip=True, normalized=True),
                        AddedToken("e\u0301!", normalized=True), AddedToken("z\u00e9", normalized=True)])
    else:
        tok.add_special_tokens(specials)
    return tok


def tokenizer_json(tok, style="qwen2"):
    """The tokenizer.json document. The Python ByteLevel decoder constructor
    takes no options and serialises GPT-2 defaults; Qwen2 files say all-false,
    so that entry is rewritten to match (decoding is the same either way)."""
    doc = json.loads(tok.to_str())
    if style == "qwen2":
        doc["decoder"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    elif style == "llama3":
        bos = tok.token_to_id("<|begin_of_text|>")
        doc["model"]["ignore_merges"] = True
        doc["model"]["merges"] = ["%s %s" % tuple(m) if isinstance(m, list) else m for m in doc["model"]["merges"]]
        doc["post_processor"] = {
            "type": "Sequence", "processors": [
                {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
                {"type": "TemplateProcessing",
                 "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                            {"Sequence": {"id": "A", "type_id": 0}}],
                 "pair": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                          {"Sequence": {"id": "A", "type_id": 0}},
                          {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 1}},
                          {"Sequence": {"id": "B", "type_id": 1}}],
                 "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [bos],
                                                          "tokens": ["<|begin_of_text|>"]}}}]}
    return doc


def save_tokenizer(tok, path, style="qwen2"):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(tokenizer_json(tok, style), f, indent=2, ensure_ascii=False)
        f.write("\n")


def tokenizer_config(tok, max_len, style="qwen2"):
    added = {}
    for tid, at in sorted(tok.get_added_tokens_decoder().items()):
        added[str(tid)] = {
            "content": at.content, "lstrip": at.lstrip, "normalized": at.normalized,
            "rstrip": at.rstrip, "single_word": at.single_word, "special": at.special,
        }
    if style == "llama3":
        return {"added_tokens_decoder": added, "bos_token": "<|begin_of_text|>", "clean_up_tokenization_spaces": True,
                "eos_token": "<|end_of_text|>", "model_input_names": ["input_ids", "attention_mask"],
                "model_max_length": max_len, "tokenizer_class": "PreTrainedTokenizerFast"}
    if style == "bytelevel":
        return {"added_tokens_decoder": added, "eos_token": "<|endoftext|>", "pad_token": "<pad>",
                "mask_token": "<mask>", "model_max_length": max_len, "tokenizer_class": "PreTrainedTokenizerFast"}
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": added,
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>", "<|mask|>"],
        "bos_token": None,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|endoftext|>",
        "errors": "replace",
        "mask_token": "<|mask|>",
        "model_max_length": max_len,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--input", nargs="+", metavar="FILE", help="training text files (used in this order)")
    src.add_argument("--input-list", metavar="LISTFILE", help="file with one training file path per line")
    ap.add_argument("--vocab-size", type=int, default=4096,
                    help="total vocab incl. the special tokens (default 4096; qwen2 has %d specials)" % len(SPECIAL_TOKENS))
    ap.add_argument("--min-frequency", type=int, default=2, help="minimum pair count for a merge (default 2)")
    ap.add_argument("--model-max-length", type=int, default=32768, help="tokenizer_config model_max_length")
    ap.add_argument("--style", choices=sorted(STYLES), default="qwen2",
                    help="tokenizer family (default qwen2; the others are test fixtures)")
    ap.add_argument("--out", required=True, metavar="DIR", help="output directory")
    args = ap.parse_args(argv)

    files = args.input if args.input else read_list(args.input_list)
    if not files:
        sys.exit("train_tokenizer.py: no input files")
    for p in files:
        if not os.path.isfile(p):
            sys.exit("train_tokenizer.py: input file not found: %s" % p)
    specials = STYLES[args.style]
    if args.vocab_size < 256 + len(specials):
        sys.exit("train_tokenizer.py: --vocab-size must be >= %d" % (256 + len(specials)))

    tok = train(files, args.vocab_size, style=args.style, min_frequency=args.min_frequency)
    n = tok.get_vocab_size(with_added_tokens=True)
    if n != args.vocab_size:
        print("train_tokenizer.py: warning: corpus gave %d tokens, asked for %d" % (n, args.vocab_size), file=sys.stderr)

    os.makedirs(args.out, exist_ok=True)
    save_tokenizer(tok, os.path.join(args.out, "tokenizer.json"), args.style)
    with open(os.path.join(args.out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_config(tok, args.model_max_length, args.style), f, indent=2, ensure_ascii=False)
        f.write("\n")
    ids = {t: tok.token_to_id(t) for t in specials}
    print("train_tokenizer.py: wrote %s (style %s, vocab %d, specials %s)" % (args.out, args.style, n, ids))


if __name__ == "__main__":
    main()
