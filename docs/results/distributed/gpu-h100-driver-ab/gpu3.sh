#!/bin/bash
set -x
[ -d /tmp/site/ray ] || { python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && tar -xJf .whl/ray-slim.tar.xz -C /tmp/site; }
[ -d /tmp/old ] || tar -xJf .whl/old.tar.xz -C /tmp
export PYTHONUNBUFFERED=1
bench() {
  (sleep 75; nvidia-smi > $OUT/nvidia-smi-$2.txt) &
  (cd $1 && PYTHONPATH=/tmp/site:$1/src python3 benchmarks/distributed.py throughput --preset breakout --minutes 1.75 --warmup 45 \
    --learner-cpus 2 --worker-cpus 4 --only ray-async \
    --override distributed.learner_gpus=1 --override distributed.train_workers=2 --out $OUT/throughput-$2.jsonl)
  wait
}
bench $PWD driver-on-host-head-again
bench /tmp/old driver-on-gpu-f467618-third
exit 0
