#!/usr/bin/env bash
# Training throughput of attnlab against the PyTorch reference on the same
# cores, in one run: for each config (S, M, L) and core count N (1, 2) the two
# are run alternately, ROUNDS times each, and the best tokens/s of each is
# compared. Prints a Markdown table; the raw JSON lines go to $OUT (default
# bench-results.jsonl). Usage: scripts/bench_vs_torch.sh [configs] [threads]
#   e.g. scripts/bench_vs_torch.sh "S M L" "1 2"; add "graph" for the fixed cost of a step.
# Thread scaling on a bigger machine (issue #6 asks for L at 1-16 threads):
#   ROUNDS=1 scripts/bench_vs_torch.sh L "1 2 4 8 16"   (the speed-up column is against 1 thread)
#
# PyTorch gets its best use of N cores: its BLAS (OpenBLAS) is pinned to the
# thread count (torch.set_num_threads does not reach it, see
# torch_reference.py), and for N > 1 three splits are tried, torch x BLAS
# threads = N x N, 1 x N and N x 1 (on two cores, N x N oversubscribes: both
# pools spin). The table names the split that won.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
configs="${1:-S M L}"
threads_list="${2:-1 2}"
rounds="${ROUNDS:-2}"
out="${OUT:-bench-results.jsonl}"
attnlab="${ATTNLAB_BUILD_DIR:-$root/build}/attnlab"
[ -x "$attnlab" ] || { echo "bench_vs_torch: build attnlab first (scripts/build.sh)" >&2; exit 1; }
: > "$out"
for c in $configs; do
  for t in $threads_list; do
    for r in $(seq "$rounds"); do
      "$attnlab" bench --config "$c" --threads "$t" | tee -a "$out"
      splits=("$t $t")
      [ "$t" -gt 1 ] && splits+=("1 $t" "$t 1")
      for split in "${splits[@]}"; do
        set -- $split
        /usr/bin/python3 "$root/scripts/torch_reference.py" --bench "$c" --threads "$1" --blas-threads "$2" | tee -a "$out"
      done
    done
  done
done
/usr/bin/python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
best = {}
for r in rows:
    key = (r["config"], r["threads"], r["impl"])
    if key not in best or r["tokens_per_s"] > best[key]["tokens_per_s"]:
        best[key] = r
print()
print("| config | threads | attnlab tok/s | attnlab speed-up over 1 thread | PyTorch tok/s (torch x BLAS threads) | ratio | attnlab MFU | attnlab RSS MiB | PyTorch RSS MiB |")
print("|---|---|---|---|---|---|---|---|---|")
for (c, t, impl), a in sorted(best.items()):
    if impl != "attnlab" or (c, t, "pytorch") not in best:
        continue
    p = best[(c, t, "pytorch")]
    mfu = f"{a['mfu']:.0%}" if "mfu" in a else "-"
    split = f"{p.get('torch_threads', t)} x {p.get('blas_threads', '?')}"
    one = best.get((c, 1, "attnlab"))  # scaling needs the 1-thread run in the same table
    speedup = f"{a['tokens_per_s'] / one['tokens_per_s']:.2f}x" if one else "-"
    print(f"| {c} | {t} | {a['tokens_per_s']:,.0f} | {speedup} | {p['tokens_per_s']:,.0f} ({split}) "
          f"| {a['tokens_per_s'] / p['tokens_per_s']:.2f}x | {mfu} | {a['peak_rss_mib']:.0f} | {p['peak_rss_mib']:.0f} |")
PY
