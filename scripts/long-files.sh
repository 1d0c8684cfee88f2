#!/usr/bin/env bash
# Fails when a source file of the workspace (tests/ folders aside) has more
# than 500 lines before its tests (`#[cfg(test)]`): a file that long holds
# more than one concept (docs/architecture.md, "Layout").
set -euo pipefail
cd "$(dirname "$0")/.."
limit=500
long=0
while IFS= read -r file; do
    lines=$(awk '/^#\[cfg\(test\)\]/ { exit } { n++ } END { print n + 0 }' "$file")
    if [ "$lines" -gt "$limit" ]; then
        echo "long-files: $file has $lines lines before its tests (at most $limit)" >&2
        long=1
    fi
done < <(git ls-files '*.rs' | grep -v '/tests/')
exit "$long"
