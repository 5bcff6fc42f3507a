#!/bin/bash
# Mixtral 8x7B in the style of Megatron-LM's examples/mixtral script, its degrees and batch left
# to the caller as the MoE model zoo's wrappers leave them:
#     TP=1 PP=4 EP=8 NNODES=4 bash train_mixtral_caller_env.sh
# TP and PP have no default here; EP, NNODES and the batch fall back to one.
export CUDA_DEVICE_MAX_CONNECTIONS=1

GPUS_PER_NODE=8
NNODES=${NNODES:-1}
MBS=${MBS:-1}
GBS=${GBS:-256}

DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NNODES
    --master_addr ${MASTER_ADDR:-localhost}
    --master_port 29500
)

MODEL_ARGS=(
    --use-mcore-models
    --disable-bias-linear
    --seq-length 4096
    --max-position-embeddings 32768
    --num-layers 32
    --hidden-size 4096
    --ffn-hidden-size 14336
    --num-attention-heads 32
    --normalization RMSNorm
    --position-embedding-type rope
    --swiglu
    --untie-embeddings-and-output-weights
    --group-query-attention
    --num-query-groups 8
    --vocab-size 32000
)

MOE_ARGS=(
    --num-experts 8
    --moe-router-topk 2
    --moe-grouped-gemm
    --moe-token-dispatcher-type alltoall
)

TRAINING_ARGS=(
    --micro-batch-size ${MBS}
    --global-batch-size ${GBS}
    --train-iters 500000
    --lr 1e-4
    --bf16
)

MODEL_PARALLEL_ARGS=(
    --tensor-model-parallel-size ${TP}
    --pipeline-model-parallel-size ${PP}
    --expert-model-parallel-size ${EP:-8}
    --use-distributed-optimizer
    --sequence-parallel
)

torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py \
    ${MODEL_ARGS[@]} \
    ${MOE_ARGS[@]} \
    ${TRAINING_ARGS[@]} \
    ${MODEL_PARALLEL_ARGS[@]}
