#!/bin/bash
# Build the book (docs/, mdBook) into build/book and check its links.
#
#   scripts/book.sh [-o]      (-o: also print the path of index.html to open)
#
# Fails on any mdBook warning or error (a chapter of SUMMARY.md without its
# file, a bad {{#include}}) and on any broken link: a page, image or anchor
# inside the book that does not exist (linkchecker on the HTML; a missing
# anchor is its warning, and any warning fails; links out of the book are
# not fetched).  The book's Rust
# snippets are compiled by `cargo test` (crates/bius/src/lib.rs includes
# the pages that have them), not here.  mdBook and linkchecker come from
# scripts/setup.sh.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$BIUS_ROOT"

[[ -x $BIUS_MDBOOK ]] || die "no $BIUS_MDBOOK: run scripts/setup.sh"
command -v linkchecker >/dev/null || die "no linkchecker: run scripts/setup.sh"
out=$BIUS_BUILD/book
rm -rf "$out"
"$BIUS_MDBOOK" build docs 2>&1 | tee "$BIUS_BUILD/book.log"
[[ -s $out/index.html ]] || die "mdbook wrote no $out/index.html"
if grep -E '(WARN|ERROR)' "$BIUS_BUILD/book.log"; then
	die "mdbook warned (above; log: build/book.log)"
fi

# linkchecker drops root for "nobody": the book must be readable by it
chmod -R a+rX "$out"
cfg=$BIUS_BUILD/linkcheckerrc
cat >"$cfg" <<'CFG'
[filtering]
checkextern=0
[AnchorCheck]
CFG
# every page a start (the sidebar is drawn by script, which linkchecker
# does not run)
mapfile -t pages < <(find "$out" -name '*.html' ! -name 404.html ! -name toc.html | sort)
if ! linkchecker --config="$cfg" --no-status -o text \
	"${pages[@]}" >"$BIUS_BUILD/book-links.log" 2>&1; then
	grep -E -A7 '^URL' "$BIUS_BUILD/book-links.log" | head -80 >&2
	die "broken links in the book (above; log: build/book-links.log)"
fi
log "book: ${#pages[@]} pages, links checked"
[[ ${1:-} == -o ]] && echo "$out/index.html"
exit 0
