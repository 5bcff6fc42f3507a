#!/bin/bash
# 80 layers, PP 16, 5 layers per virtual stage: every layer is built.
LAYERS_PER_VIRTUAL_STAGE=${LAYERS_PER_VIRTUAL_STAGE:-5}
GPT_ARGS=(
    --num-layers 80
    --hidden-size 8192
    --ffn-hidden-size 28672
    --swiglu
    --num-attention-heads 64
    --group-query-attention --num-query-groups 8
    --seq-length 4096
    --vocab-size 128256
    --untie-embeddings-and-output-weights
)
PARALLEL_ARGS=(
    --tensor-model-parallel-size 8
    --pipeline-model-parallel-size 16
    --num-layers-per-virtual-pipeline-stage $LAYERS_PER_VIRTUAL_STAGE
    --sequence-parallel
    --use-distributed-optimizer
)
torchrun --nproc_per_node 8 --nnodes 64 pretrain_gpt.py \
    "${GPT_ARGS[@]}" "${PARALLEL_ARGS[@]}" \
    --micro-batch-size 1 --global-batch-size 1024 --train-iters 100000 \
    --recompute-granularity selective --bf16
