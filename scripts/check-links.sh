#!/usr/bin/env bash
# Checks the relative links of README.md and docs/*.md, so that moving a
# section or renaming a file cannot leave a reader at a dead end:
#   scripts/check-links.sh [FILE.md...]      (default: README.md docs/*.md)
# - a link to a file or directory of the repository ([x](scripts/test.sh),
#   [x](../bench/README.md)) must name one that exists;
# - a #anchor, alone or after a .md file, must name a heading of that file,
#   with GitHub's rules: the heading's text lowercased, every character but
#   letters, digits, '_', '-' and spaces dropped, spaces made '-', the second
#   heading with the same anchor given -1, the third -2 (or an <a id/name>);
# - #L12 / #L12-L20 after another file must be within its lines;
# - a code span that names a path of the repository by its first word
#   (`scripts/test.sh`, `src/lock/mod.rs`, `chaos/run.sh [--short]`, from a
#   top-level directory) must name one that exists: most files are named so
#   rather than linked. Paths made only in a build tree are listed below.
# Links with a scheme (https:, mailto:) are not followed. Links inside code
# (fenced blocks, `spans`) are not links. Exits 1 and names each broken link
# as FILE:LINE: TARGET: why.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# = 0 ]; then
    set -- README.md docs/*.md
fi
exec python3 - "$@" <<'EOF'
import os, re, sys, urllib.parse

def mask_code_fences(text):
    """The text with fenced blocks blanked (newlines kept), so that offsets
    and line numbers stay those of the file."""
    out, fence = [], None
    for line in text.split('\n'):
        m = re.match(r'\s*(`{3,}|~{3,})', line)
        if fence:
            out.append(' ' * len(line))
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            continue
        if m:
            fence = m.group(1)
            out.append(' ' * len(line))
            continue
        out.append(line)
    return '\n'.join(out)

def mask_code(text):
    """mask_code_fences, and code spans blanked too."""
    text = mask_code_fences(text)
    # A code span: a run of backticks up to the same run, within a paragraph.
    return re.sub(r'(`+)(?:(?!\n\s*\n).)+?(?<!`)\1(?!`)',
                  lambda m: re.sub(r'[^\n]', ' ', m.group(0)), text, flags=re.S)

def heading_text(raw):
    """A heading's text as GitHub renders it: no markup, code spans' text kept."""
    raw = re.sub(r'\s+#+\s*$', '', raw.strip())            # closing #s
    raw = re.sub(r'!\[([^\]]*)\]\([^)]*\)', r'\1', raw)    # images: alt text
    raw = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', raw)     # links: their text
    raw = re.sub(r'<[^>]+>', '', raw)                      # inline HTML
    parts = re.split(r'(`+[^`]*`+)', raw)                  # code spans stay as they are
    for i in range(0, len(parts), 2):
        parts[i] = re.sub(r'(?<![\w])(\*\*|__|\*|_)(\S(?:.*?\S)?)\1(?![\w])', r'\2', parts[i])
    return ''.join(p.strip('`') if i % 2 else p for i, p in enumerate(parts))

def slug(text):
    return re.sub(r'[^\w\- ]', '', text.lower()).replace(' ', '-')

anchor_cache = {}
def anchors(path):
    if path not in anchor_cache:
        text = open(path, encoding='utf-8').read()
        lines = mask_code(text).split('\n')
        raw_lines = text.split('\n')
        seen, found = {}, set()
        for i, line in enumerate(lines):
            m = re.match(r' {0,3}(#{1,6})(?:\s+(.*))?$', line)
            title = None
            if m:
                title = raw_lines[i].strip().lstrip('#')
            elif (i > 0 and re.match(r' {0,3}(=+|-+)\s*$', line) and lines[i - 1].strip()
                  and not re.match(r'\s*([-*+]|\d+[.)]|\||>)', lines[i - 1])):
                title = raw_lines[i - 1]
            if title is not None:
                base = slug(heading_text(title))
                n = seen.get(base, 0)
                seen[base] = n + 1
                found.add(base if n == 0 else f'{base}-{n}')
        for m in re.finditer(r'<a\s[^>]*\b(?:id|name)\s*=\s*"([^"]+)"', text):
            found.add(m.group(1))
        anchor_cache[path] = found
    return anchor_cache[path]

def line_count(path):
    with open(path, 'rb') as f:
        return len(f.read().splitlines())

# Named in code spans, made by a build rather than committed.
generated = {'debian/control'}
top_dirs = sorted(d for d in os.listdir('.') if os.path.isdir(d) and not d.startswith('.') and d != 'target')
repo_path = re.compile(r'(?:%s)/[^\s<>*{}$|\[…]*$' % '|'.join(map(re.escape, top_dirs)))

link = re.compile(r'!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(<[^>\n]*>|[^)\s]+)(?:\s+(?:"[^"]*"|\'[^\']*\'|\([^)]*\)))?\s*\)')
ref_def = re.compile(r'^ {0,3}\[[^\]]+\]:\s*(<[^>\n]*>|\S+)', re.M)
broken = 0
for md in sys.argv[1:]:
    text = open(md, encoding='utf-8').read()
    masked = mask_code(text)
    targets = [(m.start(), m.group(1)) for m in link.finditer(masked)]
    targets += [(m.start(), m.group(1)) for m in ref_def.finditer(masked)]
    for m in re.finditer(r'(`+)(?!`)((?:(?!\n\s*\n).)+?)(?<!`)\1(?!`)', mask_code_fences(text), re.S):
        words = m.group(2).split()
        if words and repo_path.match(words[0]):
            path = words[0].rstrip('.,;:')
            if path not in generated and not os.path.exists(path):
                print(f'{md}:{text.count(chr(10), 0, m.start()) + 1}: `{path}`: names no file or directory of the repository')
                broken += 1
    for offset, target in sorted(targets):
        target = target.strip('<>')
        if re.match(r'[A-Za-z][A-Za-z0-9+.-]*:', target) or target.startswith('//'):
            continue
        path, _, fragment = target.partition('#')
        path, fragment = urllib.parse.unquote(path), urllib.parse.unquote(fragment)
        where = f'{md}:{masked.count(chr(10), 0, offset) + 1}: {target}'
        if path.startswith('/'):
            print(f'{where}: an absolute path (GitHub resolves it from the repository root; write it relative)')
            broken += 1
            continue
        resolved = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
        if not os.path.exists(resolved):
            print(f'{where}: no such file or directory: {resolved}')
            broken += 1
            continue
        if not fragment:
            continue
        if os.path.isdir(resolved):
            print(f'{where}: an anchor on a directory')
            broken += 1
        elif resolved.endswith('.md'):
            if fragment not in anchors(resolved):
                print(f'{where}: no heading or anchor "#{fragment}" in {resolved}')
                broken += 1
        else:
            m = re.fullmatch(r'L(\d+)(?:-L(\d+))?', fragment)
            if not m:
                print(f'{where}: "#{fragment}" is not a line anchor (#L12, #L12-L20)')
                broken += 1
            elif int(m.group(2) or m.group(1)) > line_count(resolved):
                print(f'{where}: {resolved} has {line_count(resolved)} lines')
                broken += 1
if broken:
    print(f'{broken} broken link(s)', file=sys.stderr)
    sys.exit(1)
EOF
