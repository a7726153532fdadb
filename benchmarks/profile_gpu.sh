#!/usr/bin/env bash
# Measure the op tables llmcap ships for one GPU model: Llama-3.1-8B, Llama-3.1-70B and
# Qwen3-32B shapes (the dense models of `llmcap validate --dataset aic-silicon`) at TP 1, 2,
# 4 and 8, the layer GEMMs in bf16 and fp8, attention in bf16 (and the all-reduce when
# several GPUs are visible).  Each model's tables land in OUT_DIR/<model>/; the shipped ones
# live in estimators/data/op_tables/<sku>/.
#
#   benchmarks/profile_gpu.sh OUT_DIR            (needs torch and a CUDA GPU)
#   LLMCAP="python -m ..." benchmarks/profile_gpu.sh OUT_DIR   (another llmcap command)
set -euo pipefail
out=${1:?usage: $0 OUT_DIR}
llmcap=${LLMCAP:-llmcap}
for model in meta-llama/Llama-3.1-8B meta-llama/Llama-3.1-70B Qwen/Qwen3-32B; do
  name=${model#*/}
  $llmcap profile run --model "$model" --tp 1,2,4,8 --dtype bf16,fp8 --out "$out/${name,,}"
done
