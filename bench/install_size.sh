#!/usr/bin/env bash
# Measure the default install (the package, its dependencies and the bundled model) in a
# fresh virtual environment, and fail when it is over the budget (default 500 MB).
#   bash bench/install_size.sh [BUDGET_MB] [EXTRAS]
# EXTRAS (e.g. multilingual, fastembed) measures the install with those extras instead.
set -euo pipefail
cd "$(dirname "$0")/.."
budget="${1:-500}"
extras="${2:-}"
spec="."
[ -n "$extras" ] && spec=".[$extras]"
venv="$(mktemp -d)/venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q "$spec" >/dev/null 2>&1 || "$venv/bin/python" -m pip install -q "$spec"
total=$(du -sm "$venv" | cut -f1)
echo "${extras:-default} install: ${total} MB in a fresh venv (budget ${budget} MB)"
du -sm "$venv"/lib/python3*/site-packages/* "$venv/bin" | sort -n | tail -8 | sed 's|/.*/site-packages/|  |; s|\t.*/bin$|\t  bin/|'
rm -rf "$(dirname "$venv")"
if [ "$total" -gt "$budget" ]; then
  echo "install_size: ${total} MB is over the ${budget} MB budget" >&2
  exit 1
fi
