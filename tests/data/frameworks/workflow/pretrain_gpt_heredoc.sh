#!/bin/bash
# GPT-3 345M in the style of Megatron-LM's examples/gpt3 scripts, with the here-documents launch
# scripts write notes and side configs with before the run.
CHECKPOINT_PATH=/checkpoints/gpt3-345m

cat <<EOF > run_notes.txt
This run's checkpoints go to ${CHECKPOINT_PATH}; don't delete them.
EOF

cat <<'JSON' > ds_config.json
{"train_micro_batch_size_per_gpu": 4, "comment": "it's literal: $NOT_EXPANDED `here`"}
JSON

notes() {
	cat <<-EOF
	It's a tab-indented body; the delimiter below is tab-indented too.
	EOF
}

torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py \
    --num-layers 24 \
    --hidden-size 1024 \
    --num-attention-heads 16 \
    --seq-length 1024 \
    --vocab-size 50304 \
    --micro-batch-size 4 \
    --global-batch-size 32 \
    --train-iters 500000 \
    --tensor-model-parallel-size 2 \
    --pipeline-model-parallel-size 2 \
    --bf16 \
    --save $CHECKPOINT_PATH
