#!/usr/bin/env bash
# A plain `pip install` of the built wheel, in a brand-new virtual environment
# with nothing else: the CLI works (the embedded default, `plan`, `models`), and
# `allocate` without torch names the extra that installs it.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"${MATURIN:-maturin}" build --release -q -o "$work/dist"
"$PY" -m venv "$work/venv"
"$work/venv/bin/pip" install -q "$work"/dist/kvbudget-*.whl
cd "$work"  # away from the source tree, so the installed package is what runs
bin="$work/venv/bin"
"$bin/kvbudget" >/dev/null
"$bin/kvbudget" plan gemma-3-27b --draft eagle3:1 --available 40GiB >/dev/null
"$bin/kvbudget" models >/dev/null
"$bin/python" - <<'PY'
import kvbudget
try:
    kvbudget.allocate
except ModuleNotFoundError as e:
    assert "pip install 'kvbudget[torch]'" in str(e), e
else:
    raise SystemExit("allocate imported without torch?")
print("check_wheel: the wheel alone plans, lists models and names its torch extra")
PY
