#!/usr/bin/env bash
# Instructions per batch row, counted by valgrind's callgrind inside
# kvbudget_core::batch::plan_many only (repeatable, unlike timings on a shared
# machine): the varied rows (18 columns besides the budget), the same rows
# with int32 integer columns, and the budget-only rows (one sizing), 20,000
# rows each, one thread; the varied rows again as 20,000 one-row calls (the fixed cost of
# a call, per call); the varied rows at each instruction-set level the
# fast path is compiled for that valgrind runs (KVBUDGET_SIMD caps the
# level; valgrind 3.19 runs no AVX-512 code, so the best it counts is avx2).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "callgrind.sh: valgrind is not installed" >&2; exit 1; }
cargo build --release -q -p kvbudget-core --example batch_instructions
rows=20000
count() {  # MODE LEVEL
    local out refs
    out=$(KVBUDGET_SIMD=$2 valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        --toggle-collect='kvbudget_core::batch::kernel::plan_many' \
        target/release/examples/batch_instructions "$1" "$rows" 2>&1)
    refs=$(sed -n 's/.*I *refs: *\([0-9,]*\).*/\1/p' <<<"$out" | tr -d ,)
    level=$(sed -n 's/.*simd level \([a-z0-9.]*\).*/\1/p' <<<"$out")
    echo "$1 ($level): $((refs / rows)) instructions per row ($refs in plan_many for $rows rows)"
}
for mode in varied varied32 budget; do
    count "$mode" avx2
done
for level in sse4.2 sse2; do
    count varied "$level"
done
# The fixed cost of a call: the varied rows, one plan_many call of one row each (per call).
count single avx2
