#!/bin/bash
# hostile: a MoE layer pattern that would unroll to 300 million entries
GPUS_PER_NODE=8
NNODES=2
torchrun --nproc_per_node $GPUS_PER_NODE --nnodes $NNODES pretrain_gpt.py \
    --num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 \
    --max-position-embeddings 4096 --vocab-size 32000 \
    --micro-batch-size 1 --global-batch-size 128 --train-iters 100000 --bf16 \
    --tensor-model-parallel-size 1 --pipeline-model-parallel-size 2 \
    --num-experts 8 --moe-ffn-hidden-size 1408 --moe-layer-freq "([0]*100000)*3000"
