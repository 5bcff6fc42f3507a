#!/bin/bash
#SBATCH --job-name=llama3-8b
#SBATCH --nodes=2 --exclusive   # two whole nodes
#SBATCH --gpus-per-node=h100:8
#SBATCH --time=04:00:00

# Llama 3 8B on a Slurm allocation, in the style of Megatron-LM's examples/llama scripts:
# torchrun takes the node and GPU counts from the variables Slurm sets for the job.
torchrun --nproc_per_node $SLURM_GPUS_ON_NODE --nnodes $SLURM_NNODES pretrain_gpt.py \
    --num-layers 32 \
    --hidden-size 4096 \
    --ffn-hidden-size 14336 \
    --num-attention-heads 32 \
    --group-query-attention \
    --num-query-groups 8 \
    --seq-length 8192 \
    --vocab-size 128256 \
    --swiglu \
    --micro-batch-size 1 \
    --global-batch-size 128 \
    --train-iters 1000 \
    --tensor-model-parallel-size 2 \
    --bf16
