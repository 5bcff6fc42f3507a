#!/bin/bash
# GPT 8B in the style of Megatron-LM's examples/gpt3 scripts, its global batch stepping up with
# the tokens seen (--step-batch-size-schedule) and a constant batch left in by mistake.
GPUS_PER_NODE=8
NUM_NODES=16

GPT_MODEL_ARGS=(
    --num-layers 32
    --hidden-size 4096
    --num-attention-heads 32
    --seq-length 4096
    --max-position-embeddings 4096
    --vocab-size 131072
)

TRAINING_ARGS=(
    --micro-batch-size 1
    --step-batch-size-schedule "0:256 100B:512 200B:1024"
    --global-batch-size 1024
    --train-samples 250000000
    --bf16
    --use-distributed-optimizer
)

torchrun --nproc_per_node $GPUS_PER_NODE --nnodes $NUM_NODES pretrain_gpt.py \
    ${GPT_MODEL_ARGS[@]} \
    ${TRAINING_ARGS[@]} \
    --tensor-model-parallel-size 2 \
    --pipeline-model-parallel-size 2
