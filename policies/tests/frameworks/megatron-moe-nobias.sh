#!/bin/bash
# The same MoE at TP 2 without linear biases (--disable-bias-linear): Megatron-core runs it.
MODEL_ARGS=(
    --num-layers 32
    --hidden-size 4096
    --ffn-hidden-size 14336
    --num-attention-heads 32
    --group-query-attention --num-query-groups 8
    --swiglu
    --num-experts 8 --moe-router-topk 2
    --seq-length 4096
    --vocab-size 32000
    --untie-embeddings-and-output-weights
    --disable-bias-linear
)
torchrun --nproc_per_node 8 --nnodes 8 pretrain_gpt.py \
    "${MODEL_ARGS[@]}" \
    --tensor-model-parallel-size 2 --pipeline-model-parallel-size 4 \
    --expert-model-parallel-size 8 --sequence-parallel \
    --micro-batch-size 1 --global-batch-size 512 --train-iters 1000 \
    --use-distributed-optimizer --bf16
