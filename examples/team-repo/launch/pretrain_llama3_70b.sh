#!/bin/bash
# Llama 3 70B pre-training on 32 nodes x 8 H100, in the style of Megatron-LM's examples/llama
# scripts: variables with defaults, arrays, line continuations, a positional argument.
export CUDA_DEVICE_MAX_CONNECTIONS=1

GPUS_PER_NODE=8
NUM_NODES=${NUM_NODES:-32}
CHECKPOINT_PATH=${1:-/checkpoints/llama3-70b}   # positional: unknown to a static reader
TP=${TP:-4}
PP=${PP:-4}
VPP=5
SEQ_LEN=8192

DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NUM_NODES
    --master_addr ${MASTER_ADDR:-localhost}
    --master_port 6000
)

MODEL_ARGS=(
    --use-mcore-models
    --num-layers 80
    --hidden-size 8192
    --ffn-hidden-size 28672
    --num-attention-heads 64
    --group-query-attention
    --num-query-groups 8
    --seq-length $SEQ_LEN
    --max-position-embeddings $SEQ_LEN
    --swiglu
    --untie-embeddings-and-output-weights
    --normalization RMSNorm
    --position-embedding-type rope
)

TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size 1024
    --train-iters 500000
    --lr 1.5e-4 --min-lr 1.5e-5 --lr-decay-style cosine
    --bf16
    --use-distributed-optimizer
    --recompute-granularity selective
)

MODEL_PARALLEL_ARGS=(
    --tensor-model-parallel-size $TP
    --pipeline-model-parallel-size $PP
    --num-virtual-stages-per-pipeline-rank $VPP
    --sequence-parallel
)

torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py \
    ${MODEL_ARGS[@]} \
    ${TRAINING_ARGS[@]} \
    ${MODEL_PARALLEL_ARGS[@]} \
    --tokenizer-type HuggingFaceTokenizer \
    --tokenizer-model meta-llama/Meta-Llama-3-70B \
    --vocab-size 128256 \
    --save $CHECKPOINT_PATH \
    --load $CHECKPOINT_PATH
