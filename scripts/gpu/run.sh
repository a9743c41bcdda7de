#!/usr/bin/env bash
# GPU machine side: every GPU step of a session in one script. Unpacks the
# compiler library carried in .carry (scripts/gpu/build-ptx.sh), builds the
# thin Python binding against it, then runs the stages asked for and writes
# logs, JSON and markdown under $OUT (at most 8 files come back from there) (or ./gpu-out without the device tool).
#
#   bash scripts/gpu/run.sh [STAGE...]
#     tests     the GPU tests (python/test/gpu, the library and the binding; SAGE_GPU_TESTS:
#               other pytest paths instead)
#     example   the README's examples on the GPU (and quant_matmul in the interpreter)
#     jit       bench/jit_overhead.py (cold compile, warm launch vs Triton)
#     accuracy  bench/accuracy.py (kernels vs emulation, SageBwd vs float64)
#     speed     bench/attention_speed.py (vs SDPA flash and cuDNN; extra arguments in
#               SAGE_SPEED_ARGS, e.g. --passes fwd --providers sage,cudnn)
#     forward-tiles  bench/forward_tiles.py (the forward at wgmma tile plans vs the default, cuDNN;
#               extra arguments in SAGE_TILES_ARGS, e.g. --d 128 --causal no --plans default)
#     forward-experiments  bench/forward_ptx_experiments.py (the SageBwd forward's schedule
#               varied by rewriting its PTX: programs sharing a CTA and taking turns, S in two
#               halves, exponentials on the FMA pipe, P^V^ kept in int32 (integer-o), K^ and
#               V^T shared by a cluster of two through TMA multicast (multicast), the O update
#               under the next trip's S (rotated), bounds without the row sum or the factor
#               truncation (no-row-sum, no-factor-mask); extra
#               arguments in SAGE_EXPERIMENT_ARGS,
#               e.g. --d 64 --variants default replicas:2)
#     tune      bench/tune_attention.py (the SageBwd forward's plan tuned at the issue's shapes:
#               each candidate's kernel time, the winners, the forward at the default and tuned
#               plans; extra arguments in SAGE_TUNE_ARGS, e.g. --quick --cases d128-n4096-full)
#     gemm      bench/gemm_speed.py (issue #11: sage INT8 / bf16 GEMMs vs torch._int_mm, Triton
#               INT8 and cuBLAS bf16; extra arguments in SAGE_GEMM_ARGS, e.g. --sage-tiles)
#     flash     bench/flash_speed.py (issue #11: the sage bf16 FlashAttention forward vs cuDNN
#               and flash SDPA, B4 H32 N8K D128; extra arguments in SAGE_FLASH_ARGS)
#     gemm-profile  Nsight Compute on the sage bf16 GEMM and cuBLAS at 4096^3 (bench/gemm_profile.py):
#               tensor-pipe use, L2 / DRAM throughput, stall reasons side by side
#     flash-profile  Nsight Compute on the sage FlashAttention forward and cuDNN's at B4 H32 N8K
#               D128 (bench/flash_profile.py; SAGE_FLASH_PROFILE_ARGS): pipes, issue, stall
#               reasons, and the stall samples per SASS instruction
#     host-overhead  bench/host_overhead.py (the host time of one SageBwd forward at N=1K,
#               layer by layer; extra arguments in SAGE_HOST_ARGS)
#     census    bench/sass_census.py (SASS instruction census of the SageBwd kernels, cuobjdump)
#     profile   Nsight Compute on the SageBwd forward and backward (bench/kernel_profile.py,
#               B4 H32 N4K, D 64 and 128): stall reasons, issue rates, source hot spots,
#               summarised per kernel by bench/stall_profile.py (profile-dD-stalls.md)
#     training  bench/training/run.py --suite main (SageBwd vs SDPA pretraining parity; extra
#               arguments in SAGE_TRAINING_ARGS); training-ablations: --suite ablations
#     package   installs the Python package offline (the carried library
#               packaged as it is: scripts/install-package.sh with
#               SAGE_PREBUILT_COMPILER), then from outside the checkout:
#               import, the console commands, and bench/torch_integration.py
#               (torch.compile, CUDA graphs, transformers, peak memory)
#   default: tests example jit
# The other stages use the source tree (PYTHONPATH=python).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-$PWD/gpu-out}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 SAGE_PTX_DIR="$PWD/.carry/ptx" SAGE_GPU_RESULTS="$OUT/gpu-results.json"
export SAGE_CACHE_DIR=/tmp/sage-cache SAGE_BINDING_DIR=/tmp/sage-binding
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
if [ -f .carry/libsage_compiler.so.gz ]; then
  gunzip -c .carry/libsage_compiler.so.gz > /tmp/libsage_compiler.so
  export SAGE_COMPILER_LIBRARY=/tmp/libsage_compiler.so
fi
{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 --version
} | tee "$OUT/device.txt"
start=$(date +%s%N)
bash scripts/build-binding.sh "$SAGE_BINDING_DIR" || exit 1
echo "binding build: $(( ($(date +%s%N) - start) / 1000000 )) ms" | tee -a "$OUT/device.txt"

# Writes the Nsight Compute report /tmp/NAME.ncu-rep under $OUT as text: its
# details (stall reasons included) as NAME.txt and, when SASS names kernels
# (an ncu -k filter, or "all"), their per-SASS-instruction source page as
# NAME-sass.csv.
ncu_export() {
  local name=$1 sass=${2:-} files=("$OUT/$1.txt")
  ncu -i "/tmp/$name.ncu-rep" --page details --print-details all > "$OUT/$name.txt" 2>&1
  if [ -n "$sass" ]; then
    local filter=()
    [ "$sass" = all ] || filter=(-k "$sass")
    ncu -i "/tmp/$name.ncu-rep" "${filter[@]}" --page source --print-source sass --csv \
      > "$OUT/$name-sass.csv" 2>&1
    files+=("$OUT/$name-sass.csv")
  fi
  ls -l "${files[@]}"
}

stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(tests example jit)
status=0
for stage in "${stages[@]}"; do
  echo "== stage: $stage"
  case "$stage" in
    tests)
      # shellcheck disable=SC2086
      python3 -m pytest ${SAGE_GPU_TESTS:-python/test/gpu python/test/test_compiler_library.py \
        python/test/test_jit_binding.py} -v -rs -k "not same_ptx_as_sage_translate" \
        2>&1 | tee "$OUT/gpu-tests.log" ;;
    example)
      { python3 python/examples/quant_matmul.py &&
        SAGE_INTERPRET=1 python3 python/examples/quant_matmul.py &&
        python3 python/examples/attention.py; } 2>&1 | tee "$OUT/example.txt" ;;
    jit)
      python3 bench/jit_overhead.py "$OUT/jit_overhead.json" 2>&1 ;;
    accuracy)
      python3 bench/accuracy.py "$OUT/accuracy.json" "$OUT/accuracy.md" 2>&1 ;;
    speed)
      # shellcheck disable=SC2086
      python3 bench/attention_speed.py "$OUT/attention_speed.json" "$OUT/attention_speed.md" \
        ${SAGE_SPEED_ARGS:-} 2>&1 ;;
    forward-tiles)
      # shellcheck disable=SC2086
      python3 bench/forward_tiles.py "$OUT/forward_tiles.json" "$OUT/forward_tiles.md" \
        ${SAGE_TILES_ARGS:-} 2>&1 ;;
    forward-experiments)
      # shellcheck disable=SC2086
      python3 bench/forward_ptx_experiments.py "$OUT/forward_experiments.json" \
        "$OUT/forward_experiments.md" ${SAGE_EXPERIMENT_ARGS:-} 2>&1 ;;
    tune)
      # shellcheck disable=SC2086
      python3 bench/tune_attention.py "$OUT/tune_attention.json" "$OUT/tune_attention.md" \
        ${SAGE_TUNE_ARGS:-} 2>&1 ;;
    gemm)
      # shellcheck disable=SC2086
      python3 bench/gemm_speed.py "$OUT/gemm_speed.json" "$OUT/gemm_speed.md" \
        ${SAGE_GEMM_ARGS:-} 2>&1 ;;
    flash)
      # shellcheck disable=SC2086
      python3 bench/flash_speed.py "$OUT/flash_speed.json" "$OUT/flash_speed.md" \
        ${SAGE_FLASH_ARGS:-} 2>&1 ;;
    host-overhead)
      # shellcheck disable=SC2086
      python3 bench/host_overhead.py ${SAGE_HOST_ARGS:-} 2>&1 | tee "$OUT/host_overhead.md" ;;
    census)
      python3 bench/sass_census.py "$OUT/sass_census.json" "$OUT/sass_census.md" \
        --disassembler cuobjdump 2>&1 ;;
    profile)
      for d in 64 128; do
        # Launches 0-1 are the first call's (compiling) forward and backward;
        # profile the second call's. The plan tuner stays off: its timing
        # launches of the forward would take those places (the eleventh
        # session's profile caught two forwards and no backward). The report's
        # details (stall reasons included) and its per-SASS-instruction source
        # page come back as text.
        SAGE_TUNE_ATTENTION=0 ncu --kernel-name regex:'sagebwd_(forward|backward)$' \
          --launch-skip 2 --launch-count 2 \
          --section SpeedOfLight --section Occupancy --section LaunchStats \
          --section SchedulerStats --section WarpStateStats --section MemoryWorkloadAnalysis \
          --section ComputeWorkloadAnalysis --section SourceCounters --import-source no \
          -f -o "/tmp/profile-d$d" python3 bench/kernel_profile.py --d "$d" 2>&1 | tail -n 3
        ncu_export "profile-d$d" all
        python3 bench/stall_profile.py - "$OUT/profile-d$d-stalls.md" \
          --csv "$OUT/profile-d$d-sass.csv" --kernel sagebwd_
      done ;;
    gemm-profile)
      # Launches 0-1 warm up (sage compiles); 2 is sage's bf16 GEMM, 3 cuBLAS's.
      ncu --launch-skip 2 --launch-count 2 --section SpeedOfLight \
        --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats \
        --section Occupancy -f -o /tmp/gemm-profile python3 bench/gemm_profile.py 2>&1 | tail -n 3
      ncu_export gemm-profile ;;
    flash-profile)
      # Attention kernels 0-1 warm up (sage compiles); 2 is sage's forward, 3 cuDNN's.
      # shellcheck disable=SC2086
      ncu -k regex:"flash_forward|sdpa|fmha" --launch-skip 2 --launch-count 2 \
        --section SpeedOfLight --section ComputeWorkloadAnalysis --section SchedulerStats \
        --section WarpStateStats --section InstructionStats --section SourceCounters \
        --section LaunchStats --section Occupancy -f -o /tmp/flash-profile \
        python3 bench/flash_profile.py ${SAGE_FLASH_PROFILE_ARGS:-} 2>&1 | tail -n 3
      ncu_export flash-profile regex:flash_forward ;;
    training|training-ablations)
      suite=main; [ "$stage" = training ] || suite=ablations
      # shellcheck disable=SC2086
      python3 bench/training/run.py "$OUT" --suite "$suite" ${SAGE_TRAINING_ARGS:-} 2>&1 |
        tee "$OUT/training.log" ;;
    package)
      root="$PWD"
      { bash scripts/install-package.sh -Cbuild-dir=/tmp/sage-package-build \
          -Ccmake.define.SAGE_PREBUILT_COMPILER=/tmp/libsage_compiler.so -Cbuild.targets=_sage &&
        cd /tmp &&
        env -u PYTHONPATH -u SAGE_COMPILER_LIBRARY -u SAGE_BINDING_DIR bash -c '
          python3 -c "import sage; print(\"sage\", sage.__version__, sage.__file__)" &&
          sage-opt --show-dialects | grep sage &&
          sage-translate "$0/examples/quant_matmul.mlir" --arch=sm_90a -o /tmp/qmm.ptx &&
          head -1 /tmp/qmm.ptx &&
          python3 "$0/bench/torch_integration.py" "$1/torch_integration.json" \
            "$1/torch_integration.md"' "$root" "$OUT"; } 2>&1 | tee "$OUT/package.log" ;;
    *) echo "unknown stage: $stage"; false ;;
  esac
  rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] || status=$rc
done
exit "$status"
