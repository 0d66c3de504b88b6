#!/usr/bin/env python3
"""doc_links.py — every relative markdown link in the repo's committed
documents resolves: the file (or folder) exists, and a #fragment into a .md
file names one of its headings, by GitHub's anchor rule (lower case, every
character but letters, digits, '_', '-' and spaces dropped, spaces to '-',
a repeated heading suffixed -1, -2, ...). A moved document or a renamed
section fails here, not in a reader's browser.

usage: doc_links.py ROOT    (exit 0 all resolve, 1 some do not)
The documents: `git ls-files '*.md'` in ROOT; without git (an exported
tree), every *.md outside build*/ and dot folders. Not checked: the
reports `specbed report` wrote, kept as written under results/reference/
(its README says which of their figures were left out to keep it small)."""
import os
import re
import subprocess
import sys

LINK = re.compile(r"(?<!\!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def documents(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "*.md"], capture_output=True, text=True, check=True)
        files = [f for f in out.stdout.splitlines() if f]
        if files:
            return files
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    for d, subdirs, names in os.walk(root):
        subdirs[:] = [s for s in subdirs if not s.startswith((".", "build"))]
        files += [os.path.relpath(os.path.join(d, n), root) for n in names if n.endswith(".md")]
    return files


def prose_lines(text, keep_code=False):
    """The lines outside fenced code blocks, with inline code spans blanked
    (a link inside one is an example) unless keep_code (headings)."""
    fenced = False
    for n, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield n, line if keep_code else re.sub(r"`[^`]*`", "``", line)


def slug(heading):
    h = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)   # a link keeps its text
    h = h.strip().lower().replace("`", "")
    h = "".join(c for c in h if c.isalnum() or c in "_- ")
    return h.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        seen, out = {}, set()
        with open(path, encoding="utf-8") as f:
            for _, line in prose_lines(f.read(), keep_code=True):
                m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
                if not m:
                    continue
                s = slug(m.group(1))
                out.add(s if s not in seen else f"{s}-{seen[s]}")
                seen[s] = seen.get(s, 0) + 1
        cache[path] = out
    return cache[path]


# program output, committed as the program wrote it (not edited by hand)
GENERATED = re.compile(r"^results/reference/(.*/)?report\.md$")


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    bad = checked = 0
    for doc in documents(root):
        if GENERATED.match(doc):
            continue
        here = os.path.dirname(os.path.join(root, doc))
        with open(os.path.join(root, doc), encoding="utf-8") as f:
            text = f.read()
        for n, line in prose_lines(text):
            for m in list(LINK.finditer(line)) + list(IMAGE.finditer(line)):
                target = m.group(1)
                if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):   # http:, mailto:, ...
                    continue
                path, _, frag = target.partition("#")
                full = os.path.normpath(os.path.join(here, path)) if path else os.path.join(root, doc)
                checked += 1
                if not os.path.exists(full):
                    print(f"{doc}:{n}: {target}: no such file")
                    bad += 1
                elif frag and full.endswith(".md") and frag not in anchors(full):
                    print(f"{doc}:{n}: {target}: no heading with the anchor #{frag} in {os.path.relpath(full, root)}")
                    bad += 1
    print(f"doc_links: {checked} links checked, {bad} broken")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
