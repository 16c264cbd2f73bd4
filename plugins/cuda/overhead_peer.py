#!/usr/bin/env python3
"""Peer for `htr-bench overhead` (plugins/cuda/README.md): the same measurements through PyTorch on
the same GPU, printed as htr-bench JSON lines (impl "torch").

  host_us_per_launch   torch.add(a, b, out=c) on 1-element f32 tensors, batches of --batch with a
                       synchronize between batches outside the timed region (as htr-bench does)
  replay_us_per_node   a CUDA graph of --nodes such adds, --replays replays until idle, per node

  python3 plugins/cuda/overhead_peer.py [--ops 20000] [--batch 200] [--nodes 100] [--replays 200]
"""
import argparse
import json
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", type=int, default=20000)
    ap.add_argument("--batch", type=int, default=200)
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--replays", type=int, default=200)
    o = ap.parse_args()
    dev = torch.device("cuda:0")
    a, b, c = (torch.ones(1, device=dev) for _ in range(3))
    for _ in range(100):
        torch.add(a, b, out=c)
    torch.cuda.synchronize()
    host = 0.0
    launched = 0
    while launched < o.ops:
        t0 = time.perf_counter()
        for _ in range(o.batch):
            torch.add(a, b, out=c)
        host += time.perf_counter() - t0
        torch.cuda.synchronize()
        launched += o.batch
    line = {"bench": "overhead", "impl": "torch", "device": "cuda:0", "shape": "add f32[1]",
            "metric": "host_us_per_launch", "value": host / launched * 1e6, "unit": "us", "reps": launched,
            "torch": torch.__version__}
    print(json.dumps(line), flush=True)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            torch.add(a, b, out=c)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(o.nodes):
            torch.add(a, b, out=c)
    for _ in range(5):
        g.replay()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(o.replays):
        g.replay()
    launch = time.perf_counter() - t0
    torch.cuda.synchronize()
    total = time.perf_counter() - t0
    line = {"bench": "overhead", "impl": "torch_graph", "device": "cuda:0",
            "shape": "add f32[1] x %d nodes" % o.nodes, "metric": "replay_us_per_node",
            "value": total / (o.replays * o.nodes) * 1e6, "unit": "us", "reps": o.replays,
            "host_us_per_graph_launch": launch / o.replays * 1e6}
    print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
