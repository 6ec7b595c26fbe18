#!/usr/bin/env bash
# Every GPU check of the project in one device call; logs under $OUT (default: ./gpu-out).
#
#   EXTRA_WHEELS="msgspec==0.23.0" bash ../shared/device/prepare-bundle.sh   # once, on the CPU machine
#   source .device-bundle/setup.sh && bash scripts/gpu_check.sh [--sglang]
#
# The GPU image lacks msgspec, which the config loader needs (the CLI does not start without it);
# it has scipy, which a metric bisect needs.
# --sglang runs section 4 alone.
# 1. tests marked gpu (the demo probes at HEAD and on each planted bug, the attention comparison
#    against an fp32 reference, a known-wrong mask that must fail);
# 2. scripts/probe_matrix.py on cuda in bf16 (every probe against every planted bug);
# 3. the CLI end to end on the demo history with --device cuda: run at HEAD and on the overwrite
#    bug, a bf16 result not reused for float32, --device cuda:7 refused before anything runs, a
#    bisect on cuda whose culprit is checked by reverting it, and the report of a line scanned on
#    the cpu and on cuda (written to $OUT/demo-report.html and .json);
# 4. SGLang: the probes' GPU tests on SGLang-shaped revisions and on the tip; on every revision of
#    .device-bundle/sglang/, XQA with TRTLLM MHA's replayed metadata and the CPU metadata kernels
#    against the real ones (scripts/sglang_gpu.py), and the FA3, Triton and FlashInfer consequence
#    probes (scripts/sglang_gpu_backends.py).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu-out}"
mkdir -p "$OUT"
export REGTRACK_HOME="$(mktemp -d)"
export REGTRACK_PROBE_MODULES=probes.sglang.family,probes.sglang.gpu.probes
status=0
sglang_only=false
[ "${1:-}" = --sglang ] && sglang_only=true

if ! $sglang_only; then
python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu.py 2>&1 | tee "$OUT/pytest-gpu.log" | tail -5 || status=1
python3 scripts/probe_matrix.py --device cuda --dtype bfloat16 --flaky-seeds 20 --json "$OUT/probe-matrix.json" > "$OUT/probe-matrix.txt" 2>&1 || status=1
tail -30 "$OUT/probe-matrix.txt"

demo="$REGTRACK_HOME/demo"
python3 scripts/make_demo_history.py "$demo" > "$OUT/demo.log" 2>&1 || status=1
buggy="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["bugs"]["target_verify_overwrite"]["introduced"])' "$demo.manifest.json")"
{
  echo "== run HEAD, cuda, bf16"
  python3 -m tracker.cli run --repo "$demo" --device cuda --dtype bfloat16 HEAD --json
  echo "exit $?"
  echo "== run the overwrite bug's culprit $buggy, cuda, bf16 (exit 1)"
  python3 -m tracker.cli run --repo "$demo" --device cuda --dtype bfloat16 --probe target_verify_attention --probe target_verify_metadata "$buggy" --json
  echo "exit $?"
  echo "== run HEAD, cuda, float32 (must not reuse the bf16 rows)"
  python3 -m tracker.cli run --repo "$demo" --device cuda --dtype float32 --probe target_verify_attention HEAD --json
  echo "exit $?"
  echo "== run HEAD, cuda:7 (one GPU here: refused, exit 2)"
  python3 -m tracker.cli run --repo "$demo" --device cuda:7 HEAD
  echo "exit $?"
  echo "== environments stored"
  python3 -m tracker.cli history --repo "$demo" --json --limit 200 | python3 -c 'import json,sys; rows=json.load(sys.stdin)["runs"]; print(sorted({(r["fingerprint"], r.get("gpu_name")) for r in rows}))'
  echo "== bisect the overwrite on cuda, its culprit checked by reverting it (exit 1, verification confirmed)"
  fixed="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["bugs"]["target_verify_overwrite"]["fixed"])' "$demo.manifest.json")"
  python3 -m tracker.cli bisect --repo "$demo" --device cuda --dtype bfloat16 --probe target_verify_attention \
    --good "$buggy~1" --bad "$fixed~1" --json
  echo "exit $?"
  echo "== scan on the cpu and on cuda, then the report: one series per environment in each plot"
  python3 -m tracker.cli scan --repo "$demo" --probe target_verify_attention --json > /dev/null
  echo "exit $?"
  python3 -m tracker.cli scan --repo "$demo" --device cuda --dtype bfloat16 --probe target_verify_attention --json \
    > /dev/null
  echo "exit $?"
  python3 -m tracker.cli report --repo "$demo" --probe target_verify_attention --html "$OUT/demo-report.html" \
    --json > "$OUT/demo-report.json"
  echo "exit $?"
} > "$OUT/cli-cuda.log" 2>&1
cat "$OUT/cli-cuda.log" | grep -v '^\s' | tail -30
fi

# 4. SGLang. Every .device-bundle/sglang/<label>.tar.xz (`git archive REV python/sglang | xz`) is
#    one revision; `main` (the tip) also feeds the probes' tests. Known bad: trtllm-5af02c18a
#    (target verify q_len +2), triton-eb5d4827e (ec075d8bc^, draft extend KV +T), fa3-e5f5d8478
#    (draft extend KV +T); target verify and decode of the other backends have no bad revision on
#    record, their tests plant KV lengths +N instead. Each backend runs in a process of its own (a
#    kernel that faults must not stop the others).
snapshots="$REGTRACK_HOME/sglang"
mkdir -p "$snapshots"
for archive in .device-bundle/sglang/*.tar.xz; do
  [ -f "$archive" ] || continue
  label="$(basename "$archive" .tar.xz)"
  mkdir -p "$snapshots/$label" && tar -C "$snapshots/$label" -xJf "$archive" || status=1
done
python3 -m pytest -m gpu -q -p no:cacheprovider -s tests/test_sglang_gpu.py > "$OUT/pytest-sglang-shaped.log" 2>&1 || status=1
tail -3 "$OUT/pytest-sglang-shaped.log"
if [ -d "$snapshots/main/python/sglang" ]; then
  REGTRACK_SGLANG_SNAPSHOT="$snapshots/main" python3 -m pytest -m gpu -q -p no:cacheprovider -s \
    tests/test_sglang_gpu_backends.py > "$OUT/pytest-sglang-backends.log" 2>&1 || status=1
  grep -E "rel_err|trials|plans|passed|failed|error" "$OUT/pytest-sglang-backends.log" | tail -20
  roots=("$snapshots/main")
  for bad in "$snapshots"/trtllm-*; do [ -d "$bad" ] && roots+=("$bad"); done
  echo "== SGLang TRTLLM MHA: XQA with each revision's replayed metadata; the CPU metadata kernels against the real ones"
  python3 scripts/sglang_gpu.py "${roots[@]}" --json "$OUT/sglang-trtllm.json" 2> "$OUT/sglang-trtllm.log" || status=1
  for backend in fa3 triton flashinfer; do
    roots=("$snapshots/main")
    for bad in "$snapshots/$backend"-*; do [ -d "$bad" ] && roots+=("$bad"); done
    python3 scripts/sglang_gpu_backends.py "${roots[@]}" --backend "$backend" --json "$OUT/sglang-$backend.json" \
      > "$OUT/sglang-$backend.txt" 2> "$OUT/sglang-$backend.log" || status=1
  done
  echo "== SGLang backends: the kernel under a CUDA graph with each revision's replayed metadata"
  cat "$OUT"/sglang-{fa3,triton,flashinfer}.txt 2>/dev/null
else
  echo "== SGLang revisions: no .device-bundle/sglang/main.tar.xz, skipped"
fi
exit $status
