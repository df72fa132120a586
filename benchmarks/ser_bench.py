"""SER head benchmark, everything measured side by side in one run.

A. Training on cached per-layer means vs. on full frame sequences: a randomly initialised
   wav2vec2 (default 4 blocks, 256 wide: between the tiny test model and base) encodes
   ``--seq-clips`` tone clips of 1-3 s once; two heads from the same initial weights take the same
   ``--seq-steps`` Adam steps on the same batches, one on the means (B, L, D), one on the padded
   frame sequences (B, L, T, D). Printed: wall-time ratio, max |difference| of the trained heads'
   predictions on all clips (should be float rounding only).

B. The paper's training budget: 3 learning rates x ``--steps`` (20,000) steps on ``--clips``
   (1,800) cached clips of a ``--layers`` (25) x ``--dim`` (1024) model (e.g. wav2vec2-large), batch 32.
   First, one head's cost per Adam step (gather included) with the forward in the textbook order
   (layer mix -> Linear(D, 256) -> Linear(256, 1)) vs. re-associated (ValenceHead.forward).
   Then (1) the plain in-memory loop (speechbias.ser.in_memory: the 3 heads share each gathered
   batch, one fused Adam), (2) the same with one process per lr (--skip-processes skips it),
   (3) Lightning training the 3 heads in one run, as ``python train.py 'lr=[1e-3,1e-4,1e-5]'``
   does (datamodule, validation every epoch, last.ckpt every 10 epochs, best.ckpt at the end,
   no progress bar), all
   ``--steps``; (4) the same with ``steps_per_call=1`` (a Lightning call per optimiser step) and
   (5) Lightning with one run per lr, as ``python train.py -m lr=1e-3,1e-4,1e-5``: these two run
   ``--lightning-steps`` (4,000) steps, their totals extrapolated from the measured ms/step (marked).
   Max |prediction difference| between the paths' trained heads: float rounding only.

Usage: python benchmarks/ser_bench.py [--steps 20000] [--lightning-steps 20000] [--threads 2] [--skip-a]
The machine may be shared: the load average is printed before and after; compare ratios, not
absolute times, when it is high.
"""

from __future__ import annotations

import argparse
import copy
import logging
import os
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch


def load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def part_a(args) -> None:
    from speechbias.features.statistics import temporal_statistics
    from speechbias.ser.head import ValenceHead
    from speechbias.upstream.hf import HFUpstream

    upstream = HFUpstream.from_config_dict("wav2vec2", {
        "hidden_size": args.seq_dim, "num_hidden_layers": args.seq_blocks, "num_attention_heads": 4,
        "intermediate_size": 4 * args.seq_dim, "conv_dim": [128] * 7,
        "conv_kernel": [10, 3, 3, 3, 3, 2, 2], "conv_stride": [5, 2, 2, 2, 2, 2, 2]}, seed=0)
    rng = np.random.default_rng(0)
    states, lengths = [], []
    for i in range(args.seq_clips):
        n = int(rng.uniform(1.0, 3.0) * 16000)
        t = np.arange(n) / 16000
        wav = (0.3 * np.sin(2 * np.pi * (120 + 5 * i) * t) + 0.05 * rng.standard_normal(n)).astype(np.float32)
        hs, fl = upstream(torch.from_numpy(wav)[None], torch.tensor([n]))
        states.append(torch.stack([h[0] for h in hs]))  # (L, T, D)
        lengths.append(int(fl[0]))
    t_max = max(lengths)
    n_layers, dim = states[0].shape[0], states[0].shape[2]
    full = torch.zeros(len(states), n_layers, t_max, dim)
    for i, s in enumerate(states):
        full[i, :, : s.shape[1]] = s
    frame_lengths = torch.tensor(lengths)
    means = temporal_statistics([full[:, l] for l in range(n_layers)], frame_lengths)["mean"]
    target = torch.from_numpy(rng.uniform(0, 1, len(states)).astype(np.float32))
    torch.manual_seed(0)
    head_means = ValenceHead(n_layers, dim)
    head_full = copy.deepcopy(head_means)

    def train(head, forward) -> float:
        opt = torch.optim.Adam(head.parameters(), lr=1e-3)
        g = torch.Generator().manual_seed(0)
        t0 = time.perf_counter()
        step = 0
        while step < args.seq_steps:
            order = torch.randperm(len(states), generator=g)
            for start in range(0, len(states), 32):
                idx = order[start: start + 32]
                loss = torch.nn.functional.mse_loss(forward(head, idx), target[idx])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                step += 1
                if step >= args.seq_steps:
                    break
        return time.perf_counter() - t0

    t_means = train(head_means, lambda h, idx: h(means[idx]))
    t_full = train(head_full, lambda h, idx: h.forward_frames(full[idx], frame_lengths[idx]))
    with torch.no_grad():
        p_means = head_means(means)
        p_full = head_full.forward_frames(full, frame_lengths)
    print(f"A. cached means vs full sequences: random wav2vec2 L={n_layers} D={dim}, {len(states)} clips of "
          f"{min(lengths)}-{t_max} frames, {args.seq_steps} steps, batch 32")
    print(f"   full sequences {t_full:8.2f} s   cached means {t_means:8.3f} s   ratio {t_full / t_means:8.1f}x")
    print(f"   max |prediction difference| after training: {float((p_means - p_full).abs().max()):.2e} "
          f"(predictions span {float(p_full.min()):.3f}..{float(p_full.max()):.3f})")


def _train_one_lr(state: dict, layers: int, dim: int, lr: float, x, y, steps: int) -> dict:
    """Worker: one head, one learning rate, one thread (a sweep job's share of the machine)."""
    torch.set_num_threads(1)
    from speechbias.ser.head import ValenceHead
    from speechbias.ser.in_memory import train_head_in_memory

    head = ValenceHead(layers, dim)
    head.load_state_dict(state)
    return train_head_in_memory(head, x, y, max_steps=steps, lr=lr, seed=0).state_dict()


def train_lrs_in_processes(init, lrs, x, y, steps: int) -> list:
    """Train one head per learning rate in parallel processes (spawned), from the same init."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    layers, dim = x.shape[1], x.shape[2]
    with ProcessPoolExecutor(max_workers=min(len(lrs), os.cpu_count() or 1), mp_context=mp.get_context("spawn")) as ex:
        futures = [ex.submit(_train_one_lr, init.state_dict(), layers, dim, lr, x, y, steps) for lr in lrs]
        states = [f.result() for f in futures]
    heads = []
    for st in states:
        h = copy.deepcopy(init)
        h.load_state_dict(st)
        heads.append(h)
    return heads


def textbook_forward(head, x):
    """The head in the textbook order: softmax layer mix -> Linear(D, 256) -> Linear(256, 1)."""
    mixed = torch.einsum("l,bld->bd", head.layer_weights(), x)
    return head.output(head.project(mixed)).squeeze(-1)


def time_one_head(init, x, y, steps: int, forward) -> float:
    """ms per Adam step of one head with ``forward`` on random batches of 32 (gather included)."""
    import torch.nn.functional as F

    from speechbias.ser.datamodule import gather_rows
    from speechbias.ser.module import adam

    head = copy.deepcopy(init)
    opt = adam(head.parameters(), 1e-4)
    g = torch.Generator().manual_seed(0)
    for step in range(steps + 20):  # 20 warm-up steps, not timed
        if step == 20:
            t0 = time.perf_counter()
        idx = torch.randint(0, x.shape[0], (32,), generator=g)
        loss = F.mse_loss(forward(head, gather_rows(x, idx)), y[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return 1000 * (time.perf_counter() - t0) / steps


def lightning_fit(init, lrs, features, target, dev, steps: int, args, steps_per_call: int = 16):
    """``python train.py lr=...`` without the extraction: datamodule, validation every epoch,
    best/last checkpoints, no progress bar. Returns (seconds, module)."""
    import pytorch_lightning as pl

    from speechbias.ser.datamodule import LayerMeansDataModule
    from speechbias.ser.fit import fit_trainer, fit_valence_head
    from speechbias.ser.module import ValenceRegressor

    module = ValenceRegressor(args.layers, args.dim, lr=list(lrs) if len(lrs) > 1 else lrs[0],
                              valence_range=(0.0, 100.0))
    for h in module.heads:
        h.load_state_dict(init.state_dict())
    with tempfile.TemporaryDirectory() as tmp:
        def make(**kw):
            return pl.Trainer(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                              enable_model_summary=False, **kw)
        trainer = fit_trainer(make, Path(tmp), max_steps=steps, val_every_n_epochs=1,
                              checkpoint_every_n_epochs=10)  # conf/train.yaml
        dm = LayerMeansDataModule(features, target, dev, batch_size=32, seed=0, steps_per_call=steps_per_call)
        t0 = time.perf_counter()
        fit_valence_head(trainer, module, dm, Path(tmp))
        return time.perf_counter() - t0, module


def part_b(args) -> None:
    from speechbias.ser.head import ValenceHead
    from speechbias.ser.in_memory import train_heads_in_memory
    from speechbias.ser.split import dev_split

    logging.getLogger("pytorch_lightning").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    rng = np.random.default_rng(0)
    features = rng.standard_normal((args.clips, args.layers, args.dim)).astype(np.float32)
    target = np.clip(0.5 + 0.1 * features[:, args.layers // 2, :8].sum(1) / np.sqrt(8), 0, 1).astype(np.float32)
    dev = dev_split(np.repeat(np.arange(6), args.clips // 6 + 1)[: args.clips], seed=0)
    x_train, y_train = torch.from_numpy(features[~dev]), torch.from_numpy(target[~dev])
    print(f"B. 3 learning rates x {args.steps} steps, {args.clips} cached clips ({int((~dev).sum())} train), "
          f"L={args.layers} D={args.dim}, batch 32")
    lrs = (1e-3, 1e-4, 1e-5)
    torch.manual_seed(0)
    init = ValenceHead(args.layers, args.dim)

    n = args.order_steps
    t_textbook = time_one_head(init, x_train, y_train, n, textbook_forward)
    t_reassoc = time_one_head(init, x_train, y_train, n, lambda h, x: h(x))
    print(f"   one head, {n} steps: textbook order {t_textbook:.2f} ms/step   re-associated (ValenceHead.forward) "
          f"{t_reassoc:.2f} ms/step   ratio {t_textbook / t_reassoc:.1f}x", flush=True)

    plain_heads = [copy.deepcopy(init) for _ in lrs]
    t0 = time.perf_counter()
    train_heads_in_memory(plain_heads, lrs, x_train, y_train, max_steps=args.steps, seed=0)
    total_plain = time.perf_counter() - t0
    print(f"   plain loop (ser.in_memory), 3 heads sharing each gathered batch: {total_plain:7.1f} s  "
          f"({1000 * total_plain / (3 * args.steps):.2f} ms per head-step)", flush=True)
    if not args.skip_processes:
        t0 = time.perf_counter()
        parallel_heads = train_lrs_in_processes(init, lrs, x_train, y_train, args.steps)
        total_parallel = time.perf_counter() - t0
        same = max(float((a(x_train) - b(x_train)).abs().max()) for a, b in zip(parallel_heads, plain_heads))
        print(f"   plain loop, one process per lr ({min(len(lrs), os.cpu_count() or 1)} at a time, 1 thread each): "
              f"{total_parallel:7.1f} s, process start included; max |prediction difference| vs the shared "
              f"loop {same:.1e}", flush=True)

    t_joint, joint = lightning_fit(init, lrs, features, target, dev, args.steps, args)
    with torch.no_grad():
        diff = max(float((h(x_train) - ref(x_train)).abs().max()) for h, ref in zip(joint.heads, plain_heads))
    print(f"   Lightning, 3 heads in one run (python train.py 'lr=[1e-3,1e-4,1e-5]', steps_per_call=16): {t_joint:7.1f} s "
          f"({1000 * t_joint / args.steps:.2f} ms/step, validation every epoch); "
          f"max |prediction difference| vs the plain loop {diff:.1e}; ratio to the plain loop "
          f"{t_joint / total_plain:.2f}   goal (issue 23): whole `python train.py` process <= 60 s", flush=True)

    steps_l = args.lightning_steps or args.steps
    note = "" if steps_l == args.steps else f", EXTRAPOLATED from {steps_l} steps"
    t_ungrouped, _ = lightning_fit(init, lrs, features, target, dev, steps_l, args, steps_per_call=1)
    total_ungrouped = t_ungrouped * args.steps / steps_l
    print(f"   Lightning, 3 heads in one run, steps_per_call=1 (one Lightning call per step): {total_ungrouped:7.1f} s "
          f"({1000 * t_ungrouped / steps_l:.2f} ms/step{note})", flush=True)
    singles = []
    for lr in lrs:
        seconds, _ = lightning_fit(init, (lr,), features, target, dev, steps_l, args)
        singles.append(seconds)
    total_single = sum(t * args.steps / steps_l for t in singles)
    print(f"   Lightning, one run per lr (python train.py -m lr=1e-3,1e-4,1e-5, run one after another): "
          f"{total_single:7.1f} s ({1000 * sum(singles) / (3 * steps_l):.2f} ms/step{note} per lr)")
    print(f"   ratios: one run per lr / 3 heads in one run {total_single / t_joint:.2f}x   "
          f"steps_per_call 1 / 16 {total_ungrouped / t_joint:.2f}x   "
          f"Lightning 3 heads / plain loop {t_joint / total_plain:.2f}x")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=20_000)
    p.add_argument("--lightning-steps", type=int, default=4000,
                   help="steps per lr of the one-run-per-lr Lightning runs (their total is extrapolated)")
    p.add_argument("--clips", type=int, default=1800)
    p.add_argument("--layers", type=int, default=25)
    p.add_argument("--dim", type=int, default=1024)
    p.add_argument("--seq-clips", type=int, default=64)
    p.add_argument("--seq-steps", type=int, default=100)
    p.add_argument("--seq-dim", type=int, default=256)
    p.add_argument("--seq-blocks", type=int, default=4)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--order-steps", type=int, default=500)
    p.add_argument("--skip-a", action="store_true")
    p.add_argument("--skip-processes", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} threads, {os.cpu_count()} CPUs, load average {load()}")
    if not args.skip_a:
        part_a(args)
    part_b(args)
    print(f"load average at the end: {load()}")


if __name__ == "__main__":
    main()
