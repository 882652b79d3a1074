#!/usr/bin/env bash
# How many places name an op: tools/op_footprint.sh OP_ID   (e.g. Sigmoid, Cat, IndexSelect)
#
# Counts, per file, the lines of code that name the op by its id (kOP_ID, OpId::kOP_ID, or
# OP_ID as a word: its table row, SLOTH_UNARY(sigmoid, Sigmoid)) or by its op name from core/ops.def as a whole word used as a name (a call
# `sigmoid(`, `.sigmoid`, `::sigmoid`, or in a string), with comments stripped. Only the library's tracked C++ sources count (*.cc, *.h, *.cu, *.def): tests/,
# benchmarks/, examples/, tools/, third_party/, docs and build outputs are left out. One line
# per file ("path: N"), then the total. The goal of the op table: an elementwise op is named
# in <= 4 places (its row, its semantics, its derivative, its reference), a structural op
# in <= 7.
set -euo pipefail
if [[ $# -ne 1 ]]; then
  echo "usage: $0 OP_ID   (an Id of core/ops.def, e.g. Sigmoid)" >&2
  exit 2
fi
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
exec python3 - "$1" <<'PY'
import re, subprocess, sys

op_id = sys.argv[1]
row = re.search(r'^OP\(\s*%s\s*,\s*(\w+)\s*,' % re.escape(op_id), open('core/ops.def').read(), re.M)
if not row:
    sys.exit('op_footprint: no op %s in core/ops.def' % op_id)
name = row.group(1)
I, N = re.escape(op_id), re.escape(name)
# The id (kSigmoid, OpId::kSigmoid, Sigmoid: its row, a macro argument) or the name used as a name: a
# call or declaration `sigmoid(`, a member `.sigmoid` / `::sigmoid`, or inside a string
# ("sigmoid: ..." errors, kernel source). A variable that happens to be spelled the same
# (`auto cat = info.category`, a macro parameter `cat`) is not the op.
pattern = re.compile(r'\bk?%s\b|\b%s\s*\(|(\.|::|->)%s\b|"[^"\n]*\b%s\b[^"\n]*"'
                     % (I, N, N, N))

def strip_comments(src):
    """Drops // and /* */ comments; keeps string and char literals (they are code)."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith('//', i):
            j = src.find('\n', i)
            i = n if j < 0 else j
        elif src.startswith('/*', i):
            j = src.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append('\n' * src.count('\n', i, j))  # keep line numbers
            i = j
        elif c in '"\'':
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == '\\' else 1
            out.append(src[i:j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return ''.join(out)

skip = ('tests/', 'benchmarks/', 'examples/', 'tools/', 'third_party/', 'docs/')
files = subprocess.run(['git', 'ls-files', '--', '*.cc', '*.h', '*.cu', '*.def'],
                       capture_output=True, text=True, check=True).stdout.split()
total_files = total_places = 0
for path in sorted(files):
    if path.startswith(skip) or path.startswith('bazel-'):
        continue
    try:
        code = strip_comments(open(path, encoding='utf-8', errors='replace').read())
    except OSError:
        continue
    places = sum(1 for line in code.split('\n') if pattern.search(line))
    if places:
        print('%s: %d' % (path, places))
        total_files += 1
        total_places += places
print('total: %d files, %d places (k%s or %s)' % (total_files, total_places, op_id, name))
PY
