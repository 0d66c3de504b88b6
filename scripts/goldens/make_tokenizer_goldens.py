#!/usr/bin/env python3
"""make_tokenizer_goldens.py — HF `tokenizers` encodings the C tokenizer must reproduce.

Owns: building a deterministic (seeded) set of test strings and writing, for
one tokenizer.json, OUT/NAME.jsonl that tests/test_tokenizer.c reads without
Python. Must not: be needed at test time; read the network.

Strings cover: every single ASCII byte and every single byte 0x80-0xFF,
code (Python/C from files on this machine), prose (licenses, docs, several
scripts), whitespace runs (spaces, tabs, \\n, \\r\\n, \\r, NBSP, ideographic
space, NEL, trailing/leading), emoji (ZWJ, skin tones, flags, keycaps), CJK and
Hangul (incl. conjoining jamo), combining marks (non-canonical order,
composition exclusions, singletons — NFC changes these), numbers in many
scripts, contractions in mixed case, the tokenizer's added tokens inside and
around text (also partial and nested), invalid UTF-8 (stored raw; the ids
are HF's encoding of bytes.decode("utf-8", errors="replace")), random
Unicode soup, characters newer than PCRE2's Unicode data (and U+180E, and
combining marks newer than HF's NFC data), mixtures and a few long strings.

File format (one JSON object per line):
  line 1  {"meta": {"tokenizer": <path relative to the repo>, "vocab_size": N,
           "added": [{"id", "content", "special"}...], "count": N, ...}}
  then    {"cat": category, "in": hex(input bytes), "ids": [HF ids],
           "dec": hex(HF decode(ids))  -- only when it differs from "in",
           "rt": 1 if HF decode(encode(s)) == s else 0}
HF itself does not round-trip strings that NFC changes (and invalid UTF-8,
which comes back as U+FFFD); those keep rt=0 and are still checked for ids
and for decode == "dec".

Usage:
  make_tokenizer_goldens.py --tokenizer tests/fixtures/tokenizer/tokenizer.json --out tests/golden/tokenizer --name qwen2
  make_tokenizer_goldens.py --tokenizer models/tiny/tokenizer.json --out tests/golden/tokenizer  # -> tiny.jsonl
"""
import argparse
import glob
import json
import os
import random
import sys
import unicodedata

import tokenizers
from tokenizers import Tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# ---- source material ---------------------------------------------------------

FALLBACK_CODE = [
    "def f(x):\n    return x * 2  # double\n",
    "int main(int argc, char **argv) {\n\tprintf(\"%d\\n\", argc);\n\treturn 0;\n}\n",
    "for (size_t i = 0; i < n; i++) a[i] += b[i];\n",
    "class Foo(Bar):\n    '''Doc.'''\n    def __init__(self, *args, **kw):\n        super().__init__()\n",
]
PROSE = [
    "The quick brown fox jumps over the lazy dog.",
    "Le cœur a ses raisons que la raison ne connaît point.",
    "Über allen Gipfeln ist Ruh'. Straße, Größe, Mädchen.",
    "¿Dónde está la biblioteca? ¡Olé! El niño comió piñata.",
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. Ἀρχὴ ἥμισυ παντός.",
    "Tiếng Việt có dấu: Người đẹp, trường học, nghiêng ngả.",
    "اللغة العربية جميلة، وَالكِتَابُ مُفِيدٌ.",
    "עברית היא שפה שמית. שָׁלוֹם עֲלֵיכֶם",
    "हिन्दी भाषा बहुत सुंदर है। क़लम, ज़मीन, फ़ूल।",
    "ภาษาไทยเป็นภาษาที่สวยงาม ขอบคุณครับ",
    "ქართული ენა ძალიან ლამაზია.",
    "Հայերենը գեղեցիկ լեզու է։",
    "የኢትዮጵያ ቋንቋ አማርኛ ነው።",
    "Ꮳ Ꭹ Ꮿ Cherokee ᏣᎳᎩ ᎦᏬᏂᎯᏍᏗ",
    "தமிழ் மொழி கொ கோ கௌ மிகவும் அழகானது.",
    "മലയാളം ഭാഷ കൊ കോ കൌ",
    "Ṫḧë qüïck bröwn fõx — “smart quotes”, ‘single’, «guillemets», „low“.",
]
CJK = [
    "我爱自然语言处理。今天天气很好，我们去公园散步吧！",
    "日本語のテキストです。ひらがな、カタカナ、漢字が混ざっています。",
    "한국어 텍스트입니다. 안녕하세요, 만나서 반갑습니다!",
    "「東京」は日本の首都です。（とうきょう）",
    "中文标点：，。！？；：“”‘’（）【】《》……——",
    "ｆｕｌｌｗｉｄｔｈ　ＡＢＣ　１２３　！？",
    "半角ｶﾀｶﾅと全角カタカナ",
    "繁體中文：學習語言需要時間與耐心。",
]
EMOJI = [
    "👨‍👩‍👧‍👦", "🏳️‍🌈", "👍🏽", "👩🏿‍🔬", "🇯🇵🇺🇸🇩🇪", "1️⃣2️⃣#️⃣", "❤️", "🧑‍🤝‍🧑", "😀😃😄😁",
    "🐈‍⬛", "👁️‍🗨️", "🏴‍☠️", "🫠", "©️®️™️", "✌🏻✌🏼✌🏽✌🏾✌🏿", "🤷‍♂️", "🧔🏻‍♀️", "⚕️", "☺︎",
]
COMBINING_FIXED = [
    "e\u0301", "e\u0301\u0302", "e\u0302\u0301", "a\u0323\u0302", "a\u0302\u0323", "o\u031b\u0301",
    "\u212b", "\u2126", "\u212a", "A\u030a", "\u00c5", "\u1e0b\u0323", "\u1e0d\u0307", "q\u0307\u0323",
    "\u0958", "\u0915\u093c", "\ufb1d", "\u05d9\u05b4", "\u0344", "\u0340", "\u0341", "\u0374", "\u037e",
    "\u1100\u1161", "\u1100\u1161\u11a8", "\uac00\u11a8", "\u1112\u1161\u11ab\u1100\u1173\u11af",
    "\u0d46\u0d3e", "\u0bc6\u0bbe", "\u0b47\u0b3e", "\u09c7\u09be", "\u0cc6\u0cc2", "\u1b05\u1b35",
    "\u0627\u0653", "\u0648\u0654", "\u00e9\u0301", "\u0301abc", "x\u0338", "=\u0338", "<\u0338",
    "\u00c7\u0301", "C\u0327\u0301", "\u1e08", "\u01fa", "A\u030a\u0301", "\u03b1\u0313\u0300\u0345",
    "\u1f82", "\u0308\u0301", "a\u0308\u0304", "\u01d5", "u\u0308\u0304", "\u2260", "\u226e",
    "\uf900", "\uf91d", "\u2f800", "\U0002f800", "\U0001d15e", "\U0001d160", "\U000110ab",
    "\U00011099\U000110ba", "\u0e40\u0e01\u0e34\u0e4c",
]
CONTRACTION_WORDS = ["don", "can", "won", "we", "they", "you", "i", "it", "she", "he", "that", "who", "isn", "there"]
CONTRACTION_SUFFIXES = ["s", "t", "re", "ve", "m", "ll", "d"]
WHITESPACE = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r", "\r\n\r\n", " \n", "\n ", " \t ",
              "\u00a0", "\u3000", "\x0b", "\x0c", "\x85", "\u2028", "\u2029", "\u2003", "\u200b", "\ufeff"]
BLOCKS = [  # (lo, hi): well-established ranges, only assigned code points are drawn
    (0x20, 0x7E), (0xA0, 0xFF), (0x100, 0x17F), (0x180, 0x24F), (0x250, 0x2AF), (0x2B0, 0x2FF),
    (0x300, 0x36F), (0x370, 0x3FF), (0x400, 0x4FF), (0x530, 0x58F), (0x590, 0x5FF), (0x600, 0x6FF),
    (0x900, 0x97F), (0x980, 0x9FF), (0xB80, 0xBFF), (0xE00, 0xE7F), (0x10A0, 0x10FF), (0x1100, 0x11FF),
    (0x1200, 0x137F), (0x13A0, 0x13F5), (0x1E00, 0x1EFF), (0x1F00, 0x1FFF), (0x2000, 0x206F),
    (0x2070, 0x209F), (0x20A0, 0x20BF), (0x2100, 0x214F), (0x2150, 0x218F), (0x2190, 0x21FF),
    (0x2200, 0x22FF), (0x2460, 0x24FF), (0x2500, 0x257F), (0x2600, 0x26FF), (0x3000, 0x303F),
    (0x3040, 0x309F), (0x30A0, 0x30FF), (0x4E00, 0x9FA5), (0xAC00, 0xD7A3), (0xE000, 0xE0FF),
    (0xF900, 0xFAFF), (0xFB00, 0xFB4F), (0xFE00, 0xFE0F), (0xFF00, 0xFFEF), (0x1D400, 0x1D7FF),
    (0x1F300, 0x1F5FF), (0x1F600, 0x1F64F), (0x1F680, 0x1F6C5), (0x20000, 0x2A6D6), (0x0, 0x1F), (0x7F, 0x9F),
]


def read_text(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def lines_window(rng, text, max_lines):
    lines = text.splitlines(keepends=True)
    if not lines:
        return ""
    i = rng.randrange(len(lines))
    return "".join(lines[i:i + rng.randint(1, max_lines)])


def rand_cp(rng):
    while True:
        lo, hi = rng.choice(BLOCKS)
        c = chr(rng.randint(lo, hi))
        if unicodedata.category(c) not in ("Cn", "Cs"):
            return c


# ---- generators: each returns k strings (str or bytes) ------------------------

def gen_ascii1(rng, k):
    return [chr(b) for b in sorted(rng.sample(range(128), min(k, 128)))]


def gen_byte1(rng, k):
    return [bytes([b]) for b in sorted(rng.sample(range(128, 256), min(k, 128)))]


def gen_code(rng, k):
    files = sorted(glob.glob("/usr/lib/python3.11/*.py")) + sorted(glob.glob("/usr/include/*.h"))
    texts = {}
    out = []
    for _ in range(k):
        if not files:
            out.append(rng.choice(FALLBACK_CODE))
            continue
        p = rng.choice(files)
        if p not in texts:
            texts[p] = read_text(p)
        s = lines_window(rng, texts[p], 6)[:600]
        out.append(s or rng.choice(FALLBACK_CODE))
    return out


def gen_prose(rng, k):
    files = sorted(glob.glob("/usr/share/common-licenses/*")) + sorted(glob.glob("/usr/share/doc/*/copyright"))[:80]
    texts = {}
    out = []
    for _ in range(k):
        if rng.random() < 0.35 or not files:
            s = rng.choice(PROSE)
            if rng.random() < 0.5:
                s = s + " " + rng.choice(PROSE)
            out.append(s)
            continue
        p = rng.choice(files)
        if p not in texts:
            texts[p] = read_text(p)
        out.append(lines_window(rng, texts[p], 4)[:500] or rng.choice(PROSE))
    return out


def gen_whitespace(rng, k):
    words = ["a", "word", "x1", "é", "中", "if", "(", ")", ":", "3", "<|im_end|>", "'s"]
    out = ["", " ", "  ", "\n", "\t", "\r\n", " \r\n ", "    \n\n    ", "a ", "a  ", "a\n", " a", "\n\na", "a \n b"]
    while len(out) < k:
        parts = []
        for _ in range(rng.randint(1, 8)):
            parts.append(rng.choice(WHITESPACE) * rng.randint(1, 4))
            if rng.random() < 0.6:
                parts.append(rng.choice(words))
        out.append("".join(parts))
    return out[:k]


def gen_emoji(rng, k):
    out = []
    for _ in range(k):
        parts = [rng.choice(EMOJI) if rng.random() < 0.6 else chr(rng.choice([
            rng.randint(0x1F300, 0x1F5FF), rng.randint(0x1F600, 0x1F64F), rng.randint(0x1F680, 0x1F6C5)]))
            for _ in range(rng.randint(1, 5))]
        sep = rng.choice(["", " ", "\u200d", "ab", "\n"])
        out.append(sep.join(parts) + rng.choice(["", "!", " ok", "\u200d"]))
    return out


def gen_cjk(rng, k):
    out = []
    for _ in range(k):
        r = rng.random()
        if r < 0.4:
            out.append(rng.choice(CJK))
        elif r < 0.6:
            out.append("".join(chr(rng.randint(0x4E00, 0x9FA5)) for _ in range(rng.randint(1, 20))))
        elif r < 0.75:
            out.append("".join(chr(rng.randint(0xAC00, 0xD7A3)) for _ in range(rng.randint(1, 12))))
        elif r < 0.85:  # conjoining jamo: NFC composes them into syllables
            s = ""
            for _ in range(rng.randint(1, 5)):
                s += chr(rng.randint(0x1100, 0x1112)) + chr(rng.randint(0x1161, 0x1175))
                if rng.random() < 0.5:
                    s += chr(rng.randint(0x11A8, 0x11C2))
            out.append(s)
        else:
            kana = (chr(rng.randint(0x3041, 0x30FF)) for _ in range(rng.randint(1, 12)))
            out.append("".join(c for c in kana if unicodedata.category(c) != "Cn") or "\u3042")
    return out


def gen_combining(rng, k):
    out = list(COMBINING_FIXED)
    bases = "aeiouAEIOUnNcCsSzZgGyYwWkKxq\u03b1\u03b5\u03bf\u0430\u0435\u05d0\u0915 1."
    while len(out) < k:
        s = ""
        for _ in range(rng.randint(1, 4)):
            s += rng.choice(bases)
            for _ in range(rng.randint(0, 4)):
                s += chr(rng.choice([rng.randint(0x300, 0x36F), rng.choice([0x5B4, 0x5B7, 0x5BC, 0x93C, 0x94D, 0x64E, 0x651, 0x3099, 0x309A, 0x20DD])]))
        if rng.random() < 0.3:
            s = rng.choice(["word ", "x", "", "1"]) + s + rng.choice(["", " end", "!"])
        out.append(s)
    return out[:k]


def gen_numbers(rng, k):
    digit_sets = ["0123456789", "٠١٢٣٤٥٦٧٨٩", "०१२३४५६७८९", "０１２３４５６７８９", "²³¹⁴", "½¼¾⅓", "ⅠⅡⅢⅫ", "①②③"]
    out = []
    for _ in range(k):
        r = rng.random()
        if r < 0.4:
            out.append(str(rng.randint(0, 10 ** rng.randint(1, 30))))
        elif r < 0.6:
            out.append(rng.choice(["", "-", "+", "$", "€", "x="]) + "%.*f" % (rng.randint(0, 6), rng.uniform(-1e6, 1e6)))
        elif r < 0.7:
            out.append("%d,%03d,%03d" % (rng.randint(1, 999), rng.randint(0, 999), rng.randint(0, 999)))
        elif r < 0.8:
            out.append("%.3e" % rng.uniform(-1e30, 1e30) + rng.choice(["", " m/s", "kg"]))
        elif r < 0.9:
            ds = rng.choice(digit_sets)
            out.append("".join(rng.choice(ds) for _ in range(rng.randint(1, 12))))
        else:
            out.append(rng.choice(["v1.2.3", "2024-01-31T12:34:56Z", "192.168.0.1", "+1 (555) 010-9999",
                                   "0x7fff_ffff", "1e-9", "3/4", "12:30pm", "1990's", "50%", "#42", "a1b2c3"]))
    return out


def gen_contractions(rng, k):
    out = ["DON'T", "we'Ll", "I'M", "it'S", "They'RE", "you'VE", "she'D", "it'ſ", "IT'ſ", "don’t", "rock'n'roll",
           "''s", "'s'", "'lll", "'", "'S", "y'all'd've", "O'Neil", "'twas", "1990's", "'\u212a"]
    while len(out) < k:
        w = rng.choice(CONTRACTION_WORDS)
        suf = rng.choice(CONTRACTION_SUFFIXES)
        s = "".join(ch.upper() if rng.random() < 0.5 else ch for ch in w + "'" + suf)
        if rng.random() < 0.4:
            s = rng.choice(["", " ", "Well, ", "\n", "x"]) + s + rng.choice(["", " go", ".", "'s", "s"])
        out.append(s)
    return out[:k]


def gen_special(rng, k, added):
    if not added:
        return []
    names = [a["content"] for a in added]
    out = []
    first = names[0]
    last = names[-1]
    out += ["abc" + last + "def", first + first, first * 3, " " + first + " ", first[:-1], first[:-2], "<" + first,
            first + ">", "<|" + first + "|>", first[:3] + first + first[3:], "\n" + first + "\n"]
    # whitespace on both sides of every added token (lstrip/rstrip tokens swallow it)
    out += ["a  %s  b" % nm for nm in names] + ["\n\t%s\u3000\u00a0x" % nm for nm in names]
    while len(out) < k:
        parts = []
        for _ in range(rng.randint(1, 6)):
            r = rng.random()
            if r < 0.45:
                parts.append(rng.choice(names))
            elif r < 0.55:
                nm = rng.choice(names)
                parts.append(nm[:rng.randint(1, len(nm) - 1)])
            else:
                parts.append(rng.choice(["user\n", "assistant\n", "Hello!", " ", "\n", "é", "x", "<", "|>", "def f():",
                                         "你好", "<|", "|", "<s>", "</s>"]))
        out.append("".join(parts))
    return out[:k]


def gen_invalid(rng, k):
    fixed = [b"\xc0\x80", b"\xe0\x80\x80", b"\xf0\x80\x80\x80", b"\xed\xa0\x80", b"\xed\xbf\xbf",
             b"\xf4\x90\x80\x80", b"\xf5\x80", b"\xff\xfe", b"\x80", b"\xbf\xbf", b"\xe2\x82", b"\xf0\x9f\x98",
             b"abc\xe2\x82", b"\xe2\x82abc", b"\xf0\x9f\x98\xe2\x82\xac", b"\xc3", b"a\xc3 b", b"\xe0\xa0",
             b"\xf0\x90\x80", b"\xf4\x8f\xbf", b"\xf8\x88\x80\x80\x80", b"\xfc\x84\x80\x80\x80\x80",
             b"<|im_end|>\xff", b"\xff<|im_end|>", b"<|im_\xffend|>", b"\xc2\xa0\xc2", b"\xe3\x81\x82\xe3\x81"]
    out = list(fixed)
    valid = ["héllo wörld", "日本語テキスト", "👨‍👩‍👧 family", "Ωmega ≠ αlpha", "plain ascii text"]
    while len(out) < k:
        r = rng.random()
        if r < 0.35:  # valid text with a random byte range cut out or cut short
            b = rng.choice(valid).encode()
            i = rng.randrange(len(b))
            j = min(len(b), i + rng.randint(1, 3))
            out.append(b[:i] + b[j:] if rng.random() < 0.6 else b[:i])
        elif r < 0.7:
            out.append(bytes(rng.choice([rng.randint(0x80, 0xFF), rng.randint(0x20, 0x7E)])
                             for _ in range(rng.randint(1, 16))))
        else:
            out.append(rng.choice(valid).encode() + rng.choice(fixed) + rng.choice(valid).encode())
    return out[:k]


def gen_soup(rng, k):
    return ["".join(rand_cp(rng) for _ in range(rng.randint(1, 24))) for _ in range(k)]


# Letters/numbers assigned after Unicode 14: HF's regex (Oniguruma, Unicode 16) classes them as
# \p{L}/\p{N}, PCRE2 10.42 does not know them; U+180E is \s in PCRE2 only.
NEWER_L = [(0x31350, 0x323AF), (0x2EBF0, 0x2EE5D), (0x105C0, 0x105F3), (0x1E4D0, 0x1E4EB), (0x11380, 0x11389),
           (0xA7CB, 0xA7CD), (0x1C89, 0x1C8A), (0x13460, 0x143FA)]
NEWER_N = [(0x10D40, 0x10D49), (0x116D0, 0x116E3)]


def gen_newer(rng, k):
    out = ["a\u180eb", "\u180e\u180e", " \u180e x", "'s\u180e", "x \u180e\n"]
    marks = [c for c in range(0x300, 0x1E950) if ud_combining(c)]
    while len(out) < k:
        parts = []
        for _ in range(rng.randint(1, 8)):
            r = rng.random()
            if r < 0.35:
                lo, hi = rng.choice(NEWER_L)
                parts.append("".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 4))))
            elif r < 0.5:
                lo, hi = rng.choice(NEWER_N)
                parts.append("".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 5))))
            elif r < 0.65:  # any combining mark Python knows, some of which HF's NFC (Unicode 9) does not
                parts.append(rng.choice("aeo\u4e2d ") + "".join(chr(rng.choice(marks)) for _ in range(rng.randint(1, 3))))
            else:
                parts.append(rng.choice([" ", "x", "12", "\u180e", "'ll", "!", "\n", "\u00e9", "abc"]))
        out.append("".join(parts))
    return out[:k]


def ud_combining(cp):
    return unicodedata.combining(chr(cp)) != 0


def gen_long(rng, k):
    base = [
        " " * 3000, "\n" * 1500 + "x", "a" * 2500, "9" * 3000, "中文" * 700, "👨‍👩‍👧‍👦" * 80,
        ("def f(x):\n    return x\n\n" * 60), "e\u0301" * 600, "\t \n" * 600 + "end",
        # one long run of marks in non-canonical order (NFC sorts it by combining class)
        "a" + "".join(rng.choice("\u0301\u0316\u0334\u0345\u05b7\u0323\u0302") for _ in range(300)) + "b",
    ]
    return base[:k]


def gen_mixed(rng, k, pools):
    out = []
    for _ in range(k):
        parts = [rng.choice(rng.choice(pools)) for _ in range(rng.randint(2, 4))]
        out.append(b"".join(p if isinstance(p, bytes) else p.encode() for p in parts))
    return out


# ---- main ---------------------------------------------------------------------

WEIGHTS = [("ascii1", 128), ("byte1", 128), ("code", 330), ("prose", 220), ("whitespace", 150), ("emoji", 90),
           ("cjk", 110), ("combining", 150), ("numbers", 110), ("contractions", 110), ("special", 150),
           ("invalid", 150), ("soup", 160), ("newer", 60), ("mixed", 150), ("long", 10)]


def build_strings(seed, count, added):
    rng = random.Random(seed)
    total = sum(w for _, w in WEIGHTS)
    scale = count / total
    cases = []
    pools = []
    for cat, w in WEIGHTS:
        k = max(1, int(round(w * scale))) if cat != "long" else max(1, min(10, int(round(w * scale))))
        if cat == "mixed":
            got = gen_mixed(rng, k, pools)
        elif cat == "special":
            got = gen_special(rng, k, added)
        else:
            got = globals()["gen_" + cat](rng, k)
        if cat not in ("long", "ascii1", "byte1"):
            pools.append(got)
        cases += [(cat, s if isinstance(s, bytes) else s.encode("utf-8")) for s in got]
    return cases


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", required=True, help="path to tokenizer.json")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--name", help="golden file name without .jsonl (default: the tokenizer's directory name)")
    ap.add_argument("--count", type=int, default=2000, help="approximate number of strings (default 2000)")
    ap.add_argument("--seed", type=int, default=20240531)
    args = ap.parse_args()

    tok = Tokenizer.from_file(args.tokenizer)
    added = [{"id": i, "content": a.content, "special": bool(a.special)}
             for i, a in sorted(tok.get_added_tokens_decoder().items())]
    cases = build_strings(args.seed, args.count, added)

    tpath = os.path.abspath(args.tokenizer)
    rel = os.path.relpath(tpath, ROOT)
    if rel.startswith(".."):
        print("warning: %s is outside the repo; the golden stores an absolute path" % tpath, file=sys.stderr)
        rel = tpath
    name = args.name or os.path.basename(os.path.dirname(tpath))
    os.makedirs(args.out, exist_ok=True)
    out_path = os.path.join(args.out, name + ".jsonl")

    no_rt = {}
    with open(out_path, "w", encoding="ascii") as f:
        meta = {"tokenizer": rel, "vocab_size": tok.get_vocab_size(with_added_tokens=True), "added": added,
                "count": len(cases), "seed": args.seed, "hf_tokenizers": tokenizers.__version__,
                "python_unicode": unicodedata.unidata_version}
        f.write(json.dumps({"meta": meta}, separators=(",", ":")) + "\n")
        for cat, raw in cases:
            s = raw.decode("utf-8", errors="replace")
            ids = tok.encode(s, add_special_tokens=False).ids
            dec = tok.decode(ids, skip_special_tokens=False)
            rec = {"cat": cat, "in": raw.hex(), "ids": ids}
            if dec.encode("utf-8") != raw:
                rec["dec"] = dec.encode("utf-8").hex()
            rec["rt"] = 1 if dec == s else 0
            if dec != s:
                no_rt.setdefault(cat, []).append(s)
            f.write(json.dumps(rec, separators=(",", ":")) + "\n")
    size = os.path.getsize(out_path)
    print("wrote %s: %d strings, %d bytes" % (out_path, len(cases), size))
    for cat, lst in sorted(no_rt.items()):
        print("  HF does not round-trip %d %s strings (NFC, prefix space), e.g. %r" % (len(lst), cat, lst[0][:40]))


if __name__ == "__main__":
    main()
