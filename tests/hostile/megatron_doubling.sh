#!/bin/bash
# hostile: a value that doubles 30 times (a gigabyte from 30 lines)
GPUS_PER_NODE=8
NNODES=2
A=x
A=$A$A
A=$A$A
A=$A$A
A=$A$A
A=$A$A
A=$A$A
A=$A$A
A=$A$A
A=$A$A
A=$A$A
A=$A$A
A=$A$A
A=$A$A
A=$A$A
A=$A$A
A=$A$A
A=$A$A
A=$A$A
A=$A$A
A=$A$A
A=$A$A
A=$A$A
A=$A$A
A=$A$A
A=$A$A
A=$A$A
A=$A$A
A=$A$A
A=$A$A
A=$A$A
torchrun --nproc_per_node $GPUS_PER_NODE --nnodes $NNODES pretrain_gpt.py \
    --num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 \
    --max-position-embeddings 4096 --vocab-size 32000 \
    --micro-batch-size 1 --global-batch-size 128 --train-iters 100000 --bf16 \
    --tensor-model-parallel-size 1 --pipeline-model-parallel-size 2
