#!/usr/bin/env python3
"""make_tokenizer_unicode_tables.py — writes engine/tokenizer_unicode_data.c,
the Unicode data the C tokenizer needs to behave exactly like HF `tokenizers`.

Owns: generating sorted, read-only tables, taken from what HF `tokenizers`
(the pinned version) actually does, with Python's unicodedata only supplying
facts that never change once a character is assigned:

  NFC. HF's NFC normalizer uses the unicode-normalization-alignments crate,
  whose data is Unicode 9.0: characters assigned later have ccc 0 and no
  decomposition there. So:
    - combining classes: Python's value, kept only where HF reorders the
      character (probed with NFD of U+4E2D + U+0345 + c);
    - full canonical decompositions: HF's NFD of each code point (Hangul
      syllables are algorithmic in C and not listed);
    - primary composites: (first, second) -> c for Python's two-code-point
      canonical decomposition of every c that HF decomposes and that HF's NFC
      leaves alone (this excludes the composition exclusions).
  Regex classes. HF's Oniguruma has newer Unicode (16.0 in 0.22.2) than
  PCRE2 10.42 (14.0, as Python 3.11): the letters and numbers assigned since
  are listed (tku_extra_L / tku_extra_N, code points HF puts in \\p{L} / \\p{N}
  that Python does not) so the C side can add them to the pattern. The \\s set
  is checked to be exactly Unicode White_Space (what the C side spells out).

It also checks the fast-path bound the C code relies on: every code point
below U+0300 has ccc 0, is NFC-stable and is never the second half of a
composition, so text made only of such code points is already NFC.

Must not: be needed at build or test time (the output is committed).

Usage: make_tokenizer_unicode_tables.py [--out engine/tokenizer_unicode_data.c]
"""
import argparse
import os
import unicodedata as ud

import tokenizers
from tokenizers import Regex, normalizers, pre_tokenizers

STABLE_BELOW = 0x300
WHITE_SPACE = [*range(0x09, 0x0E), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029, 0x202F,
               0x205F, 0x3000]


def all_chars():
    return [chr(c) for c in range(1, 0x110000) if not 0xD800 <= c < 0xE000]


def hf_class(pattern, chars):
    """Code points HF's regex engine matches with a one-character pattern."""
    split = pre_tokenizers.Split(Regex(pattern), behavior="removed")
    kept = set()
    for piece, _ in split.pre_tokenize_str("".join(chars)):
        kept.update(piece)
    return {ord(c) for c in chars if c not in kept}


def ranges(cps):
    out = []
    for c in sorted(cps):
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return out


def tables():
    nfd, nfc = normalizers.NFD(), normalizers.NFC()
    ccc, decomp, comp = [], [], []
    seconds = set()
    for cp in range(0x110000):
        if 0xD800 <= cp < 0xE000:
            continue
        c = chr(cp)
        cc = ud.combining(c)
        if cc and (cc == 240 or nfd.normalize_str("\u4e2d\u0345" + c) != "\u4e2d\u0345" + c):
            if ccc and ccc[-1][1] == cp - 1 and ccc[-1][2] == cc:
                ccc[-1][1] = cp
            else:
                ccc.append([cp, cp, cc])
        if 0xAC00 <= cp <= 0xD7A3:
            continue
        full = nfd.normalize_str(c)
        if full == c:
            continue
        decomp.append((cp, [ord(x) for x in full]))
        d = ud.decomposition(c)
        parts = [int(x, 16) for x in d.split()] if d and not d.startswith("<") else []
        if len(parts) == 2 and nfc.normalize_str(c) == c:
            comp.append((parts[0], parts[1], cp))
            seconds.add(parts[1])
    comp.sort()
    for cp in range(STABLE_BELOW):
        c = chr(cp)
        assert ud.combining(c) == 0 and nfc.normalize_str(c) == c and cp not in seconds, hex(cp)
    return ccc, decomp, comp


def regex_extras():
    chars = all_chars()
    hf_l, hf_n, hf_s = hf_class(r"\p{L}", chars), hf_class(r"\p{N}", chars), hf_class(r"\s", chars)
    py_l = {ord(c) for c in chars if ud.category(c).startswith("L")}
    py_n = {ord(c) for c in chars if ud.category(c).startswith("N")}
    assert hf_s == set(WHITE_SPACE), sorted(hf_s ^ set(WHITE_SPACE))
    # Only additions are handled (a category never moves out of L or N).
    assert not (py_l - hf_l) and not (py_n - hf_n)
    return ranges(hf_l - py_l), ranges(hf_n - py_n)


def emit_rows(f, rows, per_line):
    for i in range(0, len(rows), per_line):
        f.write("    " + " ".join(rows[i:i + per_line]) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "..", "engine", "tokenizer_unicode_data.c"))
    args = ap.parse_args()
    ccc, decomp, comp = tables()
    extra_l, extra_n = regex_extras()
    pool, drows = [], []
    for cp, full in decomp:
        drows.append("{0x%X,%d,%d}," % (cp, len(pool), len(full)))
        pool.extend(full)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("/* tokenizer_unicode_data.c — GENERATED by scripts/goldens/make_tokenizer_unicode_tables.py from what\n"
                " * HF tokenizers %s does (NFC: Unicode 9.0 data; regex: Oniguruma) and Python's Unicode %s.\n"
                " * Do not edit by hand.\n"
                " * Owns: read-only tables (sorted, binary-searched by tokenizer_unicode.c / tokenizer_regex.c).\n"
                " * Must not: hold any logic or mutable state. */\n" % (tokenizers.__version__, ud.unidata_version))
        f.write('#include "tokenizer_unicode.h"\n\n')
        f.write("const tku_ccc_range tku_ccc_table[] = {\n")
        emit_rows(f, ["{0x%X,0x%X,%d}," % tuple(r) for r in ccc], 5)
        f.write("};\nconst int tku_ccc_count = %d;\n\n" % len(ccc))
        f.write("const uint32_t tku_decomp_pool[] = {\n")
        emit_rows(f, ["0x%X," % x for x in pool], 10)
        f.write("};\n\nconst tku_decomp tku_decomp_table[] = {\n")
        emit_rows(f, drows, 6)
        f.write("};\nconst int tku_decomp_count = %d;\n\n" % len(drows))
        f.write("const tku_comp tku_comp_table[] = {\n")
        emit_rows(f, ["{0x%X,0x%X,0x%X}," % tuple(r) for r in comp], 5)
        f.write("};\nconst int tku_comp_count = %d;\n\n" % len(comp))
        for name, rs in (("L", extra_l), ("N", extra_n)):
            f.write("/* code points HF's regex puts in \\p{%s} that PCRE2 10.42 (Unicode 14) does not */\n" % name)
            f.write("const tku_range tku_extra_%s[] = {\n" % name)
            emit_rows(f, ["{0x%X,0x%X}," % tuple(r) for r in rs], 6)
            f.write("};\nconst int tku_extra_%s_count = %d;\n\n" % (name, len(rs)))
    print("wrote %s: %d ccc ranges, %d decompositions, %d compositions, %d+%d extra L/N ranges"
          % (args.out, len(ccc), len(drows), len(comp), len(extra_l), len(extra_n)))


if __name__ == "__main__":
    main()
