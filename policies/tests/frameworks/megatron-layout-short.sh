#!/bin/bash
# The layout above with one decoder stage too few: 30 stages over PP 16, 59 decoder layers.
# pipeline layout docs): the first stage holds the embedding and the 3 dense layers, the
# last virtual stages the MTP module and the loss.
PP=${PP:-16}
LAYOUT=${LAYOUT:-"Et*3|(tt|)*28,m|L"}
MODEL_ARGS=(
    --num-layers 61
    --hidden-size 7168
    --ffn-hidden-size 18432
    --num-attention-heads 128
    --multi-latent-attention
    --q-lora-rank 1536 --kv-lora-rank 512
    --qk-head-dim 128 --qk-pos-emb-head-dim 64 --v-head-dim 128
    --swiglu
    --num-experts 256 --moe-router-topk 8 --moe-ffn-hidden-size 2048
    --moe-shared-expert-intermediate-size 2048
    --moe-layer-freq "([0]*3+[1]*58)"
    --mtp-num-layers 1
    --seq-length 4096
    --vocab-size 129280
    --untie-embeddings-and-output-weights
)
torchrun --nproc_per_node 8 --nnodes 128 pretrain_gpt.py \
    "${MODEL_ARGS[@]}" \
    --tensor-model-parallel-size 1 --pipeline-model-parallel-size $PP \
    --pipeline-model-parallel-layout "$LAYOUT" \
    --expert-model-parallel-size 64 \
    --micro-batch-size 1 --global-batch-size 8192 --train-iters 1000 \
    --use-distributed-optimizer --bf16 \
    --recompute-granularity selective --recompute-modules mla_up_proj layernorm moe_act \
    --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep
