#!/usr/bin/env bash
# keep-run.sh DIR NAME [TITLE]: keeps the raw output of one measured run the way the project keeps
# evidence: the files of DIR compressed into one archive, bench/results/NAME.tar.gz (reproducible:
# sorted names, fixed owner and time), and a summary page docs/load-testing/NAME.md holding the
# title, where the figures are quoted in the docs, how to unpack the files and the SHA-256 of every
# raw file, so a figure can be traced back to bytes that cannot change unnoticed.
#
# The summary's "Command, machine and figures" section: COMMAND (the command line that ran, given in
# the environment), the machine (the first `machine:` line of the files, or an evidence bundle's
# machine record) and the figures (the run's summary.txt, the script's own summary, not its raw
# output); check it and complete what is missing. Programs used by a run
# belong under bench/ as //go:build ignore Go files (gofmt and vet see them), not in DIR.
#
#   bench/keep-run.sh /tmp/my-ramp 2026-12-06-ramp "The 200,000 ramp, second try"
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:?usage: keep-run.sh DIR NAME [TITLE]}
name=${2:?usage: keep-run.sh DIR NAME [TITLE]}
title=${3:-$name}
case "$name" in *[!A-Za-z0-9._-]*) echo "keep-run.sh: NAME may hold letters, digits, '.', '_' and '-' only" >&2; exit 2;; esac
[ -d "$dir" ] || { echo "keep-run.sh: $dir is not a directory" >&2; exit 2; }

archive="$ROOT/bench/results/$name.tar.gz"
summary="$ROOT/docs/load-testing/$name.md"
mkdir -p "$ROOT/bench/results"
tar --sort=name --mtime='2026-01-01 00:00Z' --owner=0 --group=0 --numeric-owner \
  -C "$dir" -cf - . | gzip -n -9 >"$archive"

{
  echo "# $title"
  echo
  echo "Raw files: [\`bench/results/$name.tar.gz\`](../../bench/results/$name.tar.gz)"
  echo "(\`tar xzf bench/results/$name.tar.gz -C DIR\`; \`cd DIR && sha256sum -c\` against the list below)."
  echo
  echo "## Where the figures are quoted"
  echo
  pat="load-testing/${name//./\\.}([/.)\`' ]|\$)"
  quoted=$(cd "$ROOT" && grep -lE "$pat" docs/*.md README.md 2>/dev/null || true)
  if [ -n "$quoted" ]; then
    for f in $quoted; do
      # The headings above each mention: the section a reader should open.
      awk -v pat="$pat" '/^#/{h=$0} $0 ~ pat {if (!seen[h]++) print h}' "$ROOT/$f" |
        sed -E "s/^#+ *//; s|^|- [$(basename "$f")](../$(basename "$f")): |"
    done
  else
    echo "- (not yet quoted in the docs)"
  fi
  echo
  echo "## Command, machine and figures"
  echo
  echo "Command: ${COMMAND:-(not given: set COMMAND when keeping a run, or write it here)}."
  echo
  # The machine: the first `machine:` line a script printed, else an evidence bundle's record.
  machine=$(grep -rhm1 '^machine: ' "$dir" 2>/dev/null | head -1 | sed 's/^machine: //' || true)
  if [ -z "$machine" ] && command -v jq >/dev/null; then
    ev=$(find "$dir" -name evidence.json | sort | head -1)
    [ -z "$ev" ] || machine=$(jq -r '.machine | "\(.cpu_model), \(.cores) cores, kernel \(.kernel), \(.go_version)"' "$ev" 2>/dev/null || true)
  fi
  echo "Machine: ${machine:-(no machine record in the files: write it here)}."
  echo
  if [ -f "$dir/summary.txt" ]; then
    echo "Figures (the script's summary.txt; the raw output stays in the archive):"
    echo
    echo '```'
    head -c 4000 "$dir/summary.txt"
    echo '```'
  else
    echo "Figures: the sections above."
  fi
  echo
  echo "## SHA-256 of the raw files"
  echo
  echo '```'
  (cd "$dir" && find . -type f -print0 | sort -z | xargs -0 sha256sum | sed 's|  \./|  |')
  echo '```'
} >"$summary"
echo "kept $dir as $archive ($(du -h "$archive" | cut -f1)) with $summary"
