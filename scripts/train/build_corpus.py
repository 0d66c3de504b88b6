#!/usr/bin/env python3
"""build_corpus.py — assemble the two-domain text corpus the bundled tiny models train on.

Owns: installing an explicit list of Debian 12 packages (apt-get, as root),
reading text from the files those packages own (dpkg -L), rendering it to plain
text (man pages via man -l | col -bx, HTML via html.parser), a deterministic
selection under per-source size caps, a split by document into
train / val / test, and a manifest (sources, package versions, sizes, licences).
Must not: read the network other than through apt-get; depend on the order in
which the file system lists files (every list is sorted, every choice is a hash).

Output (default OUT=scratch/corpus, not committed):
  OUT/{code,prose}/{train,val,test}.jsonl   one {"id","source","text"} document per line
  OUT/{code,prose}/{train,val,test}.txt     the same documents joined by blank lines
                                            (input for the tokenizer trainer)
  OUT/manifest.json                         per source: package, version, licence, files, bytes per split;
                                            "documents": [id, source, split, bytes] of every document

Selection: within a source, files are ordered by sha1(path) and taken until the
source's byte cap is reached (so a cap samples the whole package, not the first
directories alphabetically). Documents larger than CHUNK bytes are cut at blank
lines into pieces named path#k, so one big file (the Jargon File, the GNU
standards) spreads over all three splits. A document's split is
sha1(id) mod 100: < 90 train, < 95 val, else test.

Usage: build_corpus.py [--out DIR] [--no-install]
"""
import argparse
import gzip
import hashlib
import html.parser
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHUNK = 48 * 1024

# Packages the corpus reads. The licence column is the summary a person read
# from /usr/share/doc/PKG/copyright; the manifest also lists every DEP-5
# "License:" short name found there.
PACKAGES = {
    "libpython3.11-stdlib": "PSF-2.0 (Python Software Foundation License), with BSD/MIT-style notices for bundled modules",
    "python3.11-doc": "PSF-2.0 (Python documentation)",
    "libc6-dev": "LGPL-2.1+ (GNU C Library headers), some files BSD/ISC",
    "linux-libc-dev": "GPL-2 WITH Linux-syscall-note (Linux UAPI headers), some files BSD/MIT",
    "manpages": "Linux-man-pages-copyleft and per-page notices (GPL/BSD/Expat)",
    "manpages-dev": "Linux-man-pages-copyleft and per-page notices (GPL/BSD/Expat)",
    "gnu-standards": "GFDL-1.3+ (GNU Coding Standards, Information for Maintainers of GNU Software)",
    "debian-reference-en": "GPL-2+ (Debian Reference)",
    "jargon-text": "Public domain (the Jargon File 4.4.7); Debian packaging GPL",
}


def sha_int(s):
    return int(hashlib.sha1(s.encode("utf-8")).hexdigest(), 16)


def split_of(doc_id):
    h = sha_int("split:" + doc_id) % 100
    return "train" if h < 90 else ("val" if h < 95 else "test")


def pkg_files(pkg):
    out = subprocess.run(["dpkg", "-L", pkg], check=True, capture_output=True, text=True).stdout
    return sorted(p for p in out.splitlines() if os.path.isfile(p) and not os.path.islink(p))


def pkg_version(pkg):
    return subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], check=True,
                          capture_output=True, text=True).stdout.strip()


def licence_names(pkg):
    path = "/usr/share/doc/%s/copyright" % pkg
    names = set()
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                m = re.match(r"^License:\s*(\S.*)$", line)
                if m and len(m.group(1)) < 80:
                    names.add(m.group(1).strip())
    except OSError:
        pass
    return sorted(names)


def read_text(path):
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".gz"):
        data = gzip.decompress(data)
    return data.decode("utf-8", errors="replace")


def render_man(path):
    """Plain text of one man page; None for .so redirect stubs and failures."""
    head = read_text(path)[:200].lstrip()
    if head.startswith(".so "):
        return None
    env = dict(os.environ, MANWIDTH="80", MAN_KEEP_FORMATTING="", LC_ALL="C.UTF-8")
    p = subprocess.run("man -l -E UTF-8 --no-hyphenation --no-justification %s 2>/dev/null | col -bx"
                       % subprocess.list2cmdline([path]), shell=True, capture_output=True, env=env)
    txt = p.stdout.decode("utf-8", errors="replace")
    return txt if len(txt) > 200 else None


class _HTMLText(html.parser.HTMLParser):
    BLOCK = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "table", "dt", "dd", "title"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts, self.skip, self.pre = [], 0, 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self.skip += 1
        if tag == "pre":
            self.pre += 1
        if tag in self.BLOCK:
            self.parts.append("\n\n" if tag != "br" else "\n")

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self.skip -= 1
        if tag == "pre":
            self.pre -= 1
        if tag in self.BLOCK:
            self.parts.append("\n\n")

    def handle_data(self, data):
        if self.skip:
            return
        self.parts.append(data if self.pre else re.sub(r"\s+", " ", data))


def html_to_text(path):
    p = _HTMLText()
    p.feed(read_text(path))
    txt = "".join(p.parts)
    txt = re.sub(r"[ \t]+\n", "\n", txt)
    return re.sub(r"\n{3,}", "\n\n", txt).strip() + "\n"


# Sources: (name, domain, package, path filter, reader, byte cap)
def _src(name, domain, pkg, pattern, reader, cap, exclude=None):
    return dict(name=name, domain=domain, pkg=pkg, pattern=re.compile(pattern),
                exclude=re.compile(exclude) if exclude else None, reader=reader, cap=cap)


SOURCES = [
    _src("python-stdlib", "code", "libpython3.11-stdlib", r"^/usr/lib/python3\.11/.*\.py$", read_text, 7_000_000),
    _src("libc-headers", "code", "libc6-dev", r"^/usr/include/.*\.h$", read_text, 3_000_000),
    _src("linux-uapi-headers", "code", "linux-libc-dev", r"^/usr/include/.*\.h$", read_text, 3_000_000),
    _src("python-docs", "prose", "python3.11-doc", r"/html/_sources/.*\.rst\.txt$", read_text, 6_000_000,
         exclude=r"/whatsnew/changelog"),
    _src("man-pages", "prose", "manpages", r"^/usr/share/man/man[1-8]/.*\.gz$", render_man, 2_500_000),
    _src("man-pages-dev", "prose", "manpages-dev", r"^/usr/share/man/man[23]/.*\.gz$", render_man, 3_000_000),
    _src("gnu-standards", "prose", "gnu-standards", r"\.text\.gz$", read_text, 1_000_000),
    _src("debian-reference", "prose", "debian-reference-en", r"\.en\.html$", html_to_text, 2_000_000),
    _src("jargon-file", "prose", "jargon-text", r"jargon\.txt\.gz$", read_text, 2_000_000),
]


def chunk_doc(doc_id, text):
    """Cuts text at blank lines into pieces of about CHUNK bytes."""
    if len(text) <= CHUNK:
        return [(doc_id, text)]
    pieces, start, k = [], 0, 0
    while start < len(text):
        end = start + CHUNK
        if end < len(text):
            nl = text.rfind("\n\n", start + CHUNK // 2, end)
            end = nl + 2 if nl > 0 else end
        pieces.append(("%s#%d" % (doc_id, k), text[start:end]))
        start, k = end, k + 1
    return pieces


def build_source(src):
    files = [p for p in pkg_files(src["pkg"]) if src["pattern"].search(p)
             and not (src["exclude"] and src["exclude"].search(p))]
    files.sort(key=lambda p: (sha_int("take:" + p), p))
    docs, total = [], 0
    # Readers are I/O or subprocess bound; 2 workers, results consumed in order.
    with ThreadPoolExecutor(max_workers=2) as ex:
        i = 0
        while i < len(files) and total < src["cap"]:
            batch = files[i:i + 16]
            i += len(batch)
            for path, text in zip(batch, ex.map(src["reader"], batch)):
                if total >= src["cap"]:
                    break
                if not text or not text.strip():
                    continue
                text = text.replace("\r\n", "\n").replace("\x00", "")
                docs.append((path, text))
                total += len(text.encode("utf-8"))
    return files, docs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "scratch", "corpus"))
    ap.add_argument("--no-install", action="store_true", help="do not run apt-get (packages must be installed)")
    args = ap.parse_args(argv)

    if not args.no_install:
        if os.geteuid() != 0:
            sys.exit("build_corpus.py: run as root to install packages, or pass --no-install; needs: "
                     + " ".join(PACKAGES) + " man-db groff-base bsdextrautils")
        # Only packages not yet installed: `apt-get install` of an installed
        # package would upgrade it (and its dependants) as a side effect.
        want = [*PACKAGES, "man-db", "groff-base", "bsdextrautils"]
        missing = [p for p in want if subprocess.run(
            ["dpkg-query", "-W", "-f=${Status}", p], capture_output=True, text=True).stdout != "install ok installed"]
        if missing:
            env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
            subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing],
                           check=True, env=env)

    out = {d: {s: [] for s in ("train", "val", "test")} for d in ("code", "prose")}
    manifest = {"packages": {}, "sources": [], "documents": [], "chunk_bytes": CHUNK,
                "split_rule": "sha1('split:'+doc_id) mod 100: <90 train, <95 val, else test"}
    for pkg, lic in PACKAGES.items():
        manifest["packages"][pkg] = {"version": pkg_version(pkg), "licence": lic,
                                     "copyright_file": "/usr/share/doc/%s/copyright" % pkg,
                                     "dep5_licence_names": licence_names(pkg)}
    for src in SOURCES:
        files, docs = build_source(src)
        nbytes = {"train": 0, "val": 0, "test": 0}
        ndocs = {"train": 0, "val": 0, "test": 0}
        for path, text in docs:
            for doc_id, piece in chunk_doc(path, text):
                s = split_of(doc_id)
                manifest["documents"].append([doc_id, src["name"], s, len(piece.encode("utf-8"))])
                out[src["domain"]][s].append({"id": doc_id, "source": src["name"], "text": piece})
                nbytes[s] += len(piece.encode("utf-8"))
                ndocs[s] += 1
        manifest["sources"].append({"name": src["name"], "domain": src["domain"], "package": src["pkg"],
                                    "files_matching": len(files), "files_taken": len(docs),
                                    "cap_bytes": src["cap"], "bytes": nbytes, "documents": ndocs})
        print("build_corpus.py: %-20s %-5s %5d/%5d files  %s" % (src["name"], src["domain"], len(docs),
              len(files), nbytes), file=sys.stderr)

    for dom, splits in out.items():
        os.makedirs(os.path.join(args.out, dom), exist_ok=True)
        for s, docs in splits.items():
            docs.sort(key=lambda d: (sha_int("order:" + d["id"]), d["id"]))  # mixes sources within a split
            with open(os.path.join(args.out, dom, s + ".jsonl"), "w", encoding="utf-8") as f:
                for d in docs:
                    f.write(json.dumps(d, ensure_ascii=False) + "\n")
            with open(os.path.join(args.out, dom, s + ".txt"), "w", encoding="utf-8") as f:
                f.write("\n\n".join(d["text"].rstrip("\n") for d in docs) + "\n")
    with open(os.path.join(args.out, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    print("build_corpus.py: wrote %s" % args.out, file=sys.stderr)


if __name__ == "__main__":
    main()
