#!/bin/bash
# Llama 3 8B in FP8 on one node of 8 H100, in the style of Megatron-LM's
# examples/llama/train_llama3_8b_h100_fp8.sh: the precision flags sit in an `if` on a variable
# the script sets, array elements hold a flag and its value in one quoted string, and the
# data flags depend on a positional argument.
DATA_ARG=${1:-"MOCK"}   # positional: unknown to a static reader
DTYPE="fp8"
GPUS_PER_NODE=8
NUM_NODES=1

MODEL_ARGS=(
    --use-mcore-models
    --num-layers 32
    --hidden-size 4096
    --ffn-hidden-size 14336
    --num-attention-heads 32
    --group-query-attention
    --num-query-groups 8
    --seq-length 8192
    --max-position-embeddings 8192
    --swiglu
    --untie-embeddings-and-output-weights
    --vocab-size 128256
)

TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size 128
    --train-samples 250000000
    --bf16
    --grad-reduce-in-bf16
    --use-distributed-optimizer
)

DTYPE_ARGS=()
if [[ "$DTYPE" == "fp8" ]]; then
    DTYPE_ARGS+=(
        "--fp8-format hybrid"
        "--fp8-amax-history-len 1024"
    )
elif [ "$DTYPE" = "bf16" ]; then
    DTYPE_ARGS+=("--recompute-granularity full")
else
    DTYPE_ARGS+=("--fp16")
fi

if [[ "$DATA_ARG" == "MOCK" ]]; then
    DATA_ARGS=(--mock-data)
else
    DATA_ARGS=(--data-path $DATA_ARG)
fi

torchrun --nproc_per_node $GPUS_PER_NODE --nnodes $NUM_NODES pretrain_gpt.py \
    ${MODEL_ARGS[@]} \
    ${TRAINING_ARGS[@]} \
    ${DTYPE_ARGS[@]} \
    ${DATA_ARGS[@]} \
    --tensor-model-parallel-size 1 \
    --pipeline-model-parallel-size 1
