#!/usr/bin/env bash
# Training throughput of attnlab against the PyTorch reference on the same
# cores, in one run: for each config (S, M, L) and core count N (1, 2) the two
# are run alternately, ROUNDS times each, and the best tokens/s of each is
# compared. Prints a Markdown table; the raw JSON lines go to $OUT (default
# bench-results.jsonl). Usage: scripts/pytorch/bench_vs_torch.sh [configs] [threads]
#   e.g. scripts/pytorch/bench_vs_torch.sh "S M L" "1 2"; add "graph" for the fixed cost of a step.
# MODE=decode times KV-cached greedy decoding instead (attnlab bench --decode
# against torch_reference.py --bench C --decode, the decoder LM of the config's
# sizes, T/2 prompt positions and T/2 new tokens) and prints a second kind of
# table: tokens/s of each, attnlab's cached over uncached speed-up, the ratio.
# Thread scaling on a bigger machine (issue #6 asks for L at 1-16 threads):
#   ROUNDS=1 scripts/pytorch/bench_vs_torch.sh L "1 2 4 8 16"   (the speed-up column is against 1 thread)
#
# PyTorch gets its best use of N cores: its BLAS (OpenBLAS) is pinned to the
# thread count (torch.set_num_threads does not reach it, see
# torch_reference.py), and for N > 1 three splits are tried, torch x BLAS
# threads = N x N, 1 x N and N x 1 (on two cores, N x N oversubscribes: both
# pools spin). The table names the split that won.
#
# PyTorch runs its fastest *correct* OpenBLAS kernels, never a straw man:
# OpenBLAS picks its kernels by CPU model (on one it does not know, its SSE3
# "Prescott" ones, a twentieth of an AVX-512 core), and the environment may
# pin older ones (OPENBLAS_CORETYPE, set where older OpenBLAS misbehaved). So
# for each config the script tries the environment's choice, OpenBLAS's own and
# every kernel family the CPU's flags allow (Haswell, Zen, SkylakeX,
# Cooperlake), keeps those whose loss after 3 training steps equals that of
# the generic Prescott kernels (the reference: plain SSE3 code) to 1e-5
# relative, times each kept one once, and runs PyTorch with the fastest. It
# prints every candidate's loss and speed and the choice; the table names it.
# The environment's OPENBLAS_CORETYPE is left as it is for attnlab.
# PRECISIONS="fp32 bf16" also runs both at bf16 (attnlab --precision bf16 against
# PyTorch's torch.autocast("cpu", bfloat16)), alternating with fp32 in each round;
# the table gets a row per precision, and each side's bf16 over fp32 is printed.
# The table's "share of FMA peak" is attnlab's model FLOP/s over the fp32 FMA
# peak bench measured in the same process at the same thread count; "bound" is
# the share a step would reach if only its matrix products took time (bench
# records one step's products and replays them alone: products_mfu_bound), and
# "products" is the share of a step's time that those products take.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
configs="${1:-S M L}"
threads_list="${2:-1 2}"
rounds="${ROUNDS:-2}"
precisions="${PRECISIONS:-fp32}"
out="${OUT:-bench-results.jsonl}"
attnlab="${ATTNLAB_BUILD_DIR:-$root/build}/attnlab"
[ -x "$attnlab" ] || { echo "bench_vs_torch: build attnlab first (scripts/build.sh)" >&2; exit 1; }
openblas_core() {  # the kernel family OpenBLAS uses under OPENBLAS_CORETYPE=$1 ("" = its own choice)
  local setting=(env -u OPENBLAS_CORETYPE)
  [ -n "$1" ] && setting=(env OPENBLAS_CORETYPE="$1")
  "${setting[@]}" /usr/bin/python3 -c 'import ctypes, glob
lib = ctypes.CDLL(glob.glob("/usr/lib/x86_64-linux-gnu/openblas*/libopenblas.so.0")[0])
lib.openblas_get_corename.restype = ctypes.c_char_p
print(lib.openblas_get_corename().decode())' 2>/dev/null || echo unknown
}
torch_json_field() { /usr/bin/python3 -c 'import json, sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])[sys.argv[1]])' "$1"; }
# Candidate kernel families: the environment's, OpenBLAS's own, and those the flags allow.
candidates=("${OPENBLAS_CORETYPE:-}" "")
grep -qw avx2 /proc/cpuinfo && candidates+=(Haswell)
grep -qw avx2 /proc/cpuinfo && grep -q AuthenticAMD /proc/cpuinfo && candidates+=(Zen)
grep -qw avx512bw /proc/cpuinfo && candidates+=(SkylakeX)
grep -qw avx512_bf16 /proc/cpuinfo && candidates+=(Cooperlake)
declare -A torch_core  # config -> the OPENBLAS_CORETYPE PyTorch runs with
pick_torch_kernel() {  # $1 = config; sets torch_core[$1]
  local c="$1" ref cand core loss tps best="" best_tps=0 seen=" "
  ref="$(OPENBLAS_CORETYPE=Prescott /usr/bin/python3 "$root/scripts/pytorch/torch_reference.py" --bench "$c" \
         --steps 3 --warmup 0 | torch_json_field final_loss)"
  echo "bench_vs_torch: $c: PyTorch's loss after 3 steps with the generic Prescott kernels: $ref" >&2
  for cand in "${candidates[@]}"; do
    core="$(openblas_core "$cand")"
    case "$seen" in *" $core "*) continue ;; esac  # another name for kernels already tried
    seen="$seen$core "
    loss="$(OPENBLAS_CORETYPE="$core" /usr/bin/python3 "$root/scripts/pytorch/torch_reference.py" --bench "$c" \
            --steps 3 --warmup 0 | torch_json_field final_loss)"
    if ! /usr/bin/python3 -c 'import sys; a, b = map(float, sys.argv[1:]); sys.exit(abs(a - b) > 1e-5 * abs(b))' "$loss" "$ref"; then
      echo "bench_vs_torch: $c: $core kernels: loss $loss differs from the reference: not used" >&2
      continue
    fi
    tps="$(OPENBLAS_CORETYPE="$core" /usr/bin/python3 "$root/scripts/pytorch/torch_reference.py" --bench "$c" \
           | torch_json_field tokens_per_s)"
    echo "bench_vs_torch: $c: $core kernels: loss $loss, $(printf '%.0f' "$tps") tokens/s at 1 thread" >&2
    if /usr/bin/python3 -c 'import sys; sys.exit(float(sys.argv[1]) <= float(sys.argv[2]))' "$tps" "$best_tps"; then
      best="$core"; best_tps="$tps"
    fi
  done
  [ -n "$best" ] || { echo "bench_vs_torch: $c: no OpenBLAS kernel reproduces the reference loss" >&2; exit 1; }
  torch_core[$c]="$best"
  echo "bench_vs_torch: $c: PyTorch runs with OPENBLAS_CORETYPE=$best (the fastest correct kernels)" >&2
}
echo "bench_vs_torch: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), family $(grep -m1 'cpu family' /proc/cpuinfo | sed 's/.*: //');" \
     "environment's OPENBLAS_CORETYPE: ${OPENBLAS_CORETYPE:-unset}; load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
: > "$out"
for c in $configs; do
  pick_torch_kernel "$c"
  for t in $threads_list; do
    for r in $(seq "$rounds"); do
      for p in $precisions; do
        decode=() precision=(--precision "$p")
        [ "${MODE:-train}" = decode ] && decode=(--decode) precision=()
        "$attnlab" bench --config "$c" --threads "$t" "${decode[@]}" "${precision[@]}" | tee -a "$out"
        splits=("$t $t")
        [ "$t" -gt 1 ] && splits+=("1 $t" "$t 1")
        for split in "${splits[@]}"; do
          set -- $split
          OPENBLAS_CORETYPE="${torch_core[$c]}" /usr/bin/python3 "$root/scripts/pytorch/torch_reference.py" --bench "$c" \
            "${decode[@]}" "${precision[@]}" --threads "$1" --blas-threads "$2" | tee -a "$out"
        done
      done
    done
  done
done
/usr/bin/python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
best = {}
for r in rows:
    key = (r["config"], r["threads"], r.get("precision", "fp32"), r["impl"])
    if key not in best or r["tokens_per_s"] > best[key]["tokens_per_s"]:
        best[key] = r
print()

def pairs():
    """(config, threads, attnlab row, PyTorch row, PyTorch's split) for each cell run by both."""
    for (c, t, prec, impl), a in sorted(best.items()):
        if impl == "attnlab" and (c, t, prec, "pytorch") in best:
            p = best[(c, t, prec, "pytorch")]
            yield c, t, a, p, f"{p.get('torch_threads', t)} x {p.get('blas_threads', '?')}, {p.get('blas_kernels', '?')}"

if any(r.get("mode") == "decode" for r in rows):
    print("| config | threads | attnlab cached tok/s | attnlab uncached tok/s | cached speed-up | answers equal | PyTorch cached tok/s (torch x BLAS threads, OpenBLAS kernels) | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for c, t, a, p, split in pairs():
        print(f"| {c} | {t} | {a['tokens_per_s']:,.0f} | {a['uncached_tokens_per_s']:,.0f} | {a['speedup']:.1f}x "
              f"| {a['answers_equal']} | {p['tokens_per_s']:,.0f} ({split}) | {a['tokens_per_s'] / p['tokens_per_s']:.2f}x |")
    sys.exit(0)
att = [r for r in rows if r["impl"] == "attnlab" and "cpu" in r]
if att:
    print(f"CPU: {att[0]['cpu']}; attnlab's matrix products: {att[0]['gemm_backend']}; FMA peak (best in the run): " +
          ", ".join(f"{max(r['fma_peak_gflops'] for r in att if r['threads'] == t):.1f} GFLOP/s at {t} thread(s)"
                    for t in sorted({r['threads'] for r in att})))
    print()
print("| config | threads | precision | attnlab tok/s | attnlab speed-up over 1 thread | PyTorch tok/s (torch x BLAS threads, OpenBLAS kernels) | ratio | attnlab share of FMA peak (GFLOP/s of peak) | bound: products alone | products' share of a step | attnlab RSS MiB | PyTorch RSS MiB |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for c, t, a, p, split in pairs():
    prec = a.get("precision", "fp32")
    mfu = f"{a['mfu']:.0%} ({a['gflops']:.1f} of {a['fma_peak_gflops']:.1f})" if "fma_peak_gflops" in a else "-"
    bound = f"{a['products_mfu_bound']:.0%}" if "products_mfu_bound" in a else "-"
    share = f"{a['products_share_of_step']:.0%}" if "products_share_of_step" in a else "-"
    one = best.get((c, 1, prec, "attnlab"))  # scaling needs the 1-thread run in the same table
    speedup = f"{a['tokens_per_s'] / one['tokens_per_s']:.2f}x" if one else "-"
    print(f"| {c} | {t} | {prec} | {a['tokens_per_s']:,.0f} | {speedup} | {p['tokens_per_s']:,.0f} ({split}) "
          f"| {a['tokens_per_s'] / p['tokens_per_s']:.2f}x | {mfu} | {bound} | {share} | {a['peak_rss_mib']:.0f} | {p['peak_rss_mib']:.0f} |")
print()
both = [(c, t, impl) for (c, t, prec, impl) in best if prec == "bf16" and (c, t, "fp32", impl) in best]
for c, t, impl in sorted(set(both)):
    ratio = best[(c, t, "bf16", impl)]["tokens_per_s"] / best[(c, t, "fp32", impl)]["tokens_per_s"]
    print(f"{impl} {c} at {t} thread(s): bf16 over fp32 {ratio:.2f}x")
PY
