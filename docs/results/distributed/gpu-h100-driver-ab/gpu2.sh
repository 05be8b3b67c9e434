#!/bin/bash
# Same-machine A/B on the H100: Ray async breakout with the driver's JAX on the GPU (f467618) and off it (HEAD).
set -x
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
tar -xJf .whl/ray-slim.tar.xz -C /tmp/site || exit 1
tar -xJf .whl/old.tar.xz -C /tmp || exit 1
export PYTHONUNBUFFERED=1
PYTHONPATH=/tmp/site python3 -c "import ray, jax; print('ray', ray.__version__, 'jax', jax.__version__, jax.devices())" 2>&1 | tail -1
nproc; nvidia-smi --query-gpu=name,memory.used --format=csv
bench() {  # $1 tree, $2 label
  (sleep 75; nvidia-smi > $OUT/nvidia-smi-$2.txt) &
  (cd $1 && PYTHONPATH=/tmp/site:$1/src python3 benchmarks/distributed.py throughput --preset breakout --minutes 1.75 --warmup 45 \
    --learner-cpus 2 --worker-cpus 4 --only ray-async \
    --override distributed.learner_gpus=1 --override distributed.train_workers=2 --out $OUT/throughput-$2.jsonl)
  wait
}
bench /tmp/old driver-on-gpu-f467618
bench $PWD driver-on-host-head
bench /tmp/old driver-on-gpu-f467618-again
cd /tmp && tar -czf $OUT/runs.tgz moozi-dist-*/*/metrics.jsonl moozi-dist-*/*/workers.json moozi-dist-*/*/train.log 2>/dev/null
exit 0
