#!/usr/bin/env bash
# Measure the op tables llmcap ships for one GPU model: Llama-3.1-8B, Llama-3.1-70B and
# Qwen3-32B shapes (the dense models of `llmcap validate --dataset aic-silicon`) at TP 1, 2,
# 4 and 8, the layer GEMMs in bf16 and fp8, attention in bf16 (and the all-reduce when
# several GPUs are visible); with MOE=1 also the mixtures of experts of the validation set
# that run in bf16 or fp8 (MiniMax-M2.5, Qwen3-235B-A22B at TP 4 and 8, DeepSeek-V3 at 8
# in fp8) and Qwen3-30B-A3B at TP 1-4: their routed experts as MoE TP and as EP.  Each
# model's tables land in OUT_DIR/<model>/; the shipped ones live in
# estimators/data/op_tables/<sku>/.
#
#   benchmarks/profile_gpu.sh OUT_DIR            (needs torch and a CUDA GPU)
#   LLMCAP="python -m ..." benchmarks/profile_gpu.sh OUT_DIR   (another llmcap command)
#   MOE=1 benchmarks/profile_gpu.sh OUT_DIR                     (the MoE models as well)
set -euo pipefail
out=${1:?usage: $0 OUT_DIR}
llmcap=${LLMCAP:-llmcap}
for model in meta-llama/Llama-3.1-8B meta-llama/Llama-3.1-70B Qwen/Qwen3-32B; do
  name=${model#*/}
  $llmcap profile run --model "$model" --tp 1,2,4,8 --dtype bf16,fp8 --out "$out/${name,,}"
done
if [[ "${MOE:-0}" == 1 ]]; then
  $llmcap profile run --model MiniMaxAI/MiniMax-M2.5 --tp 4,8 --dtype bf16,fp8 --out "$out/minimax-m2.5"
  $llmcap profile run --model Qwen/Qwen3-235B-A22B --tp 4,8 --dtype bf16,fp8 --out "$out/qwen3-235b-a22b"
  $llmcap profile run --model deepseek-ai/DeepSeek-V3 --tp 8 --dtype fp8 --out "$out/deepseek-v3"
  $llmcap profile run --model Qwen/Qwen3-30B-A3B --tp 1,2,4 --dtype bf16,fp8 --out "$out/qwen3-30b-a3b"
fi
