#!/usr/bin/env python3
"""Run llama.cpp's own convert_hf_to_gguf.py on a specbed model, with two
run-time accommodations and no edit to llama.cpp's files.

Usage: llamacpp_convert.py LLAMA_CPP_DIR MODEL_DIR [convert_hf_to_gguf.py args...]
e.g.   llamacpp_convert.py ~/.cache/specbed/llama.cpp-0.3.36/src models/tiny \
           --outtype bf16 --outfile tiny-bf16.gguf

LLAMA_CPP_DIR is a llama.cpp source tree (scripts/compare/sidebyside_llamacpp.sh
unpacks the one vendored in the llama-cpp-python sdist into its cache); this
wrapper imports its `conversion` package and its gguf-py, patches two methods
in memory (the copy on disk is never modified), then runs the converter's
main exactly as `python convert_hf_to_gguf.py MODEL_DIR ARGS` would:

1. Pre-tokenizer. The converter identifies a BPE pre-tokenizer by hashing the
   token ids of a fixed test string and refuses hashes it has not seen. The
   bundled tokenizers are trained here (scripts/train/train_tokenizer.py) with
   Qwen2's split regex, so their hash is new by construction; an unknown hash
   is mapped to "qwen2" (llama.cpp's pre-tokenizer with that same regex).
   A known hash is left alone.
2. MTP tensors. The bundled targets store their MTP module as decoder layer
   index num_hidden_layers (DeepSeek-V3's convention); llama.cpp's Qwen3
   mapping knows only layers 0..num_hidden_layers-1 and stops on the first
   unknown name. Tensors of layers >= num_hidden_layers are dropped from the
   tensor index before anything is written (the GGUF holds the plain target).

Not part of CI. Needs torch, transformers, numpy (see the side-by-side script).
"""
import logging
import os
import re
import runpy
import sys


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    llama_dir = os.path.abspath(sys.argv[1])
    model_dir = sys.argv[2]
    script = os.path.join(llama_dir, "convert_hf_to_gguf.py")
    if not os.path.isfile(script):
        sys.exit(f"llamacpp_convert: no convert_hf_to_gguf.py in {llama_dir}")
    sys.path.insert(0, llama_dir)
    sys.path.insert(1, os.path.join(llama_dir, "gguf-py"))

    import conversion.base as base  # llama.cpp's converter package

    log = logging.getLogger("specbed-convert")

    orig_pre = base.TextModel.get_vocab_base_pre

    def get_vocab_base_pre(self, tokenizer):
        try:
            return orig_pre(self, tokenizer)
        except NotImplementedError:
            log.warning("specbed: unknown BPE pre-tokenizer hash -> 'qwen2' "
                        "(the bundled tokenizers use Qwen2's split regex)")
            return "qwen2"

    base.TextModel.get_vocab_base_pre = get_vocab_base_pre

    orig_index = base.ModelBase.index_tensors
    layer_re = re.compile(r"(?:^|\.)layers\.(\d+)\.")

    def index_tensors(self, *args, **kwargs):
        tensors = orig_index(self, *args, **kwargs)
        hp = {**self.hparams, **self.hparams.get("text_config", {})}
        n_layers = hp.get("num_hidden_layers")
        if n_layers is None:
            return tensors
        dropped = [n for n in tensors
                   if (m := layer_re.search(n)) and int(m.group(1)) >= n_layers]
        for n in dropped:
            del tensors[n]
        if dropped:
            log.warning(f"specbed: dropped {len(dropped)} tensors of layers >= "
                        f"num_hidden_layers={n_layers} (MTP module): "
                        f"{', '.join(sorted(dropped)[:4])}{' ...' if len(dropped) > 4 else ''}")
        return tensors

    base.ModelBase.index_tensors = index_tensors

    sys.argv = [script, model_dir] + sys.argv[3:]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
