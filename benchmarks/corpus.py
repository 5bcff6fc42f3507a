"""A deterministic corpus of valid manifests for the benchmarks (same seed, same files)."""

from __future__ import annotations

import random
from pathlib import Path

DENSE = """\
apiVersion: dpguard/v1
kind: TrainingManifest
metadata: {{name: bench-dense-{i}, owner: bench}}
cluster:
  gpus: {gpus}
  accelerator: {accelerator}
  interconnect: {{inter_node_gbps_per_gpu: {gbps}}}
model:
  architecture: dense
  total_params: {params}B
  layers: {layers}
  hidden_size: {hidden}
  attention_heads: {heads}
  seq_len: 4096
  vocab_size: 128256
training:
  tokens: {tokens}T
  global_batch_size: {gbs}
  micro_batch_size: 1
  activation_recompute: full
parallelism:
  tensor: 8
  pipeline: {pipeline}
"""

MOE = """\
apiVersion: dpguard/v1
kind: TrainingManifest
metadata: {{name: bench-moe-{i}, owner: bench}}
cluster:
  gpus: {gpus}
  accelerator: H800
  interconnect: {{inter_node_gbps_per_gpu: {gbps}}}
model:
  architecture: moe
  total_params: 671B
  active_params: 37B
  layers: 61
  hidden_size: 7168
  attention_heads: 128
  seq_len: 4096
  vocab_size: 129280
  experts: 256
  experts_per_token: 8
  untie_embeddings: true
training:
  tokens: 14.8T
  global_batch_size: {gbs}
  activation_recompute: full
parallelism:
  pipeline: 16
  expert: 64
  schedule: dualpipe
communication: {{all_to_all_kernel: deepep}}
"""

# (params in B, layers, hidden, heads): shapes of published dense models.
SHAPES = ((13, 40, 5120, 40), (70, 80, 8192, 64), (175, 96, 12288, 96), (405, 126, 16384, 128))


def write_corpus(directory: Path, count: int, seed: int = 20261122) -> list[Path]:
    """`count` valid manifests in `directory`, three dense for every MoE one."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        if i % 4 == 3:
            nodes = rng.choice((256, 512))
            text = MOE.format(i=i, gpus=nodes * 8, gbps=rng.choice((200, 400)), gbs=nodes * 64)
        else:
            params, layers, hidden, heads = rng.choice(SHAPES)
            pipeline = rng.choice((4, 8, 16))
            gpus = 8 * pipeline * rng.choice((8, 16, 32, 64))
            text = DENSE.format(
                i=i,
                gpus=gpus,
                accelerator=rng.choice(("H100-SXM", "H200", "A100-80GB")),
                gbps=rng.choice((200, 400)),
                params=params,
                layers=layers,
                hidden=hidden,
                heads=heads,
                tokens=rng.choice((1, 2, 15)),
                gbs=gpus // (8 * pipeline) * 16,
                pipeline=pipeline,
            )
        path = directory / f"manifest-{i:04d}.yaml"
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths
