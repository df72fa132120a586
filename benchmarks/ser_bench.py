"""SER head benchmark, everything measured side by side in one run.

A. Training on cached per-layer means vs. on full frame sequences: a randomly initialised
   wav2vec2 (default 4 blocks, 256 wide: between the tiny test model and base) encodes
   ``--seq-clips`` tone clips of 1-3 s once; two heads from the same initial weights take the same
   ``--seq-steps`` Adam steps on the same batches, one on the means (B, L, D), one on the padded
   frame sequences (B, L, T, D). Printed: wall-time ratio, max |difference| of the trained heads'
   predictions on all clips (should be float rounding only).

B. The paper's training budget: 3 learning rates x ``--steps`` (20,000) steps on ``--clips``
   (1,800) cached clips of a ``--layers`` (25) x ``--dim`` (1024) model (e.g. wav2vec2-large), batch 32,
   at ``--threads`` torch threads (1: conf/train.yaml's fit_threads). Goal (issue 23): the whole
   ``python train.py 'lr=[1e-3,1e-4,1e-5]'`` process <= 60 s, heads identical up to float rounding.
   First, one head's cost per Adam step (gather included) with the forward in the textbook order
   (layer mix -> Linear(D, 256) -> Linear(256, 1)) vs. re-associated (ValenceHead.forward).
   Then, side by side, all ``--steps`` unless marked EXTRAPOLATED (from ``--reference-steps``):
   (1) the textbook loop (each head its own textbook forward, autograd and torch.optim.Adam);
   (2) the previous plain loop (commit e2c4af7's ser.in_memory: predict_with_heads + autograd, one
   fused Adam); (3t) the plain loop with the torch step (ser.in_memory step_kernel=torch: the
   closed-form stacked gradients, ser/stacked_heads.py, + fused Adam); (3) the plain loop now (the
   compiled step, ser/compiled_step.py: gradients and Adam in one pass); (4) Lightning training the 3 heads in one run, as ``python train.py``
   does (datamodule, validation every epoch, last.ckpt every 10 epochs, best.ckpt at the end, no
   progress bar); with ``--all`` also (5) the same with ``steps_per_call=1`` and (6) one Lightning run
   per lr. Ratios of (4) to the references are printed, and the max |prediction difference| of the
   trained heads between the paths (on the training clips, [0, 1] scale).

C. The whole process (``--skip-c`` skips it): ``python train.py 'lr=[1e-3,1e-4,1e-5]' ser_data=mess``
   on a cached workload of ``--clips`` MESS-like clips and a random wav2vec2 of 24 blocks x ``--dim``
   (25 x 1024 layers; benchmarks/ser_train_workload.py writes the corpus and fills the feature cache,
   so the run is warm and builds no model, as a rerun of the real command is), with this checkout and
   with ``--reference`` (a git commit, default e2c4af7: before the stacked step), alternating,
   ``--repeats`` times each; wall time of the child process, best and every run.

D. With ``--rounding``: how far float rounding alone moves this estimator's heads: the previous step
   (autograd), the textbook loop and the stacked step train side by side on the same batches from
   the same init for ``--steps``; every ``--rounding-every`` steps, per learning rate, the max
   |prediction difference| of the textbook loop's and the stacked step's heads from the previous
   step's (training clips, [0, 1] scale). Adam divides each step by the root of the running mean of
   squared gradients, so where gradients become tiny, rounding-size differences grow into visible ones.

Usage: python benchmarks/ser_bench.py [--steps 20000] [--threads 1] [--skip-a] [--skip-b] [--skip-c] [--all] [--rounding]
The machine may be shared: the load average is printed before and after each part; compare
ratios measured side by side, not absolute times, when it is high.
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

REPO = Path(__file__).resolve().parents[1]


def load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def part_a(args) -> None:
    from speechbias.features.statistics import temporal_statistics
    from speechbias.ser.head import ValenceHead
    from speechbias.upstream.hf import HFUpstream

    upstream = HFUpstream.from_config_dict(
        "wav2vec2",
        {
            "hidden_size": args.seq_dim,
            "num_hidden_layers": args.seq_blocks,
            "num_attention_heads": 4,
            "intermediate_size": 4 * args.seq_dim,
            "conv_dim": [128] * 7,
            "conv_kernel": [10, 3, 3, 3, 3, 2, 2],
            "conv_stride": [5, 2, 2, 2, 2, 2, 2],
        },
        seed=0,
    )
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
    means = temporal_statistics([full[:, layer] for layer in range(n_layers)], frame_lengths)["mean"]
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
                idx = order[start : start + 32]
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
    print(
        f"A. cached means vs full sequences: random wav2vec2 L={n_layers} D={dim}, {len(states)} clips of "
        f"{min(lengths)}-{t_max} frames, {args.seq_steps} steps, batch 32"
    )
    print(f"   full sequences {t_full:8.2f} s   cached means {t_means:8.3f} s   ratio {t_full / t_means:8.1f}x")
    print(
        f"   max |prediction difference| after training: {float((p_means - p_full).abs().max()):.2e} "
        f"(predictions span {float(p_full.min()):.3f}..{float(p_full.max()):.3f})"
    )


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


def lightning_fit(init, lrs, features, target, dev, steps: int, args, steps_per_call: int = 64):
    """``python train.py lr=...`` without the extraction: datamodule, validation every epoch,
    best/last checkpoints, no progress bar. Returns (seconds, module)."""
    import pytorch_lightning as pl

    from speechbias.ser.datamodule import LayerMeansDataModule
    from speechbias.ser.fit import fit_trainer, fit_valence_head
    from speechbias.ser.module import ValenceRegressor

    module = ValenceRegressor(
        args.layers, args.dim, lr=list(lrs) if len(lrs) > 1 else lrs[0], valence_range=(0.0, 100.0)
    )
    for h in module.heads:
        h.load_state_dict(init.state_dict())
    with tempfile.TemporaryDirectory() as tmp:

        def make(**kw):
            return pl.Trainer(
                accelerator="cpu", devices=1, logger=False, enable_progress_bar=False, enable_model_summary=False, **kw
            )

        trainer = fit_trainer(
            make, Path(tmp), max_steps=steps, val_every_n_epochs=1, checkpoint_every_n_epochs=10
        )  # conf/train.yaml
        dm = LayerMeansDataModule(features, target, dev, batch_size=32, seed=0, steps_per_call=steps_per_call)
        t0 = time.perf_counter()
        fit_valence_head(trainer, module, dm, Path(tmp))
        return time.perf_counter() - t0, module


def textbook_loop(heads, lrs, x, y, steps: int, batch_size: int = 32, seed: int = 0) -> None:
    """Reference (1): each head its textbook forward, MSE, autograd backward and its own
    ``torch.optim.Adam`` (PyTorch's default kernel); the batches of ser.in_memory (seed + epoch)."""
    import torch.nn.functional as F

    opts = [torch.optim.Adam(h.parameters(), lr=lr) for h, lr in zip(heads, lrs)]
    for idx in shuffled_batches(x.shape[0], steps, batch_size, seed):
        xb, yb = x[idx], y[idx]
        for h, opt in zip(heads, opts):
            loss = F.mse_loss(textbook_forward(h, xb), yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()


def shuffled_batches(n: int, steps: int, batch_size: int, seed: int):
    """Row indices of the batches of ``steps`` steps over ``n`` rows: each epoch a fresh permutation
    (seeded ``seed + epoch``) cut into batches of ``batch_size``, the last one short."""
    step, epoch = 0, 0
    while True:
        order = torch.randperm(n, generator=torch.Generator().manual_seed(seed + epoch))
        for start in range(0, n, batch_size):
            if step >= steps:
                return
            yield order[start : start + batch_size]
            step += 1
        epoch += 1


def previous_plain_loop(heads, lrs, x, y, steps: int, batch_size: int = 32, seed: int = 0) -> None:
    """Reference (2): ser.in_memory as of commit e2c4af7 (before the stacked step): the heads'
    predictions by ``predict_with_heads``, their gradients by autograd, one fused Adam."""
    from speechbias.ser.datamodule import gather_rows
    from speechbias.ser.head import predict_with_heads
    from speechbias.ser.module import adam_groups, per_head_mse

    optimiser = adam_groups([list(h.parameters()) for h in heads], lrs)
    for idx in shuffled_batches(x.shape[0], steps, batch_size, seed):
        loss = per_head_mse(predict_with_heads(heads, gather_rows(x, idx)), y[idx]).sum()
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        optimiser.step()


def max_prediction_difference(heads_a, heads_b, x) -> float:
    """Max |difference| of two lists of heads' predictions on ``x`` (N, L, D), [0, 1] scale."""
    with torch.no_grad():
        return max(float((a(x) - b(x)).abs().max()) for a, b in zip(heads_a, heads_b))


def timed(train, init, lrs, steps: int, *data) -> tuple[float, list]:
    """(seconds, trained heads) of ``train(heads, lrs, *data, steps)`` from copies of ``init``."""
    heads = [copy.deepcopy(init) for _ in lrs]
    t0 = time.perf_counter()
    train(heads, lrs, *data, steps)
    return time.perf_counter() - t0, heads


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
    print(
        f"B. 3 learning rates x {args.steps} steps, {args.clips} cached clips ({int((~dev).sum())} train), "
        f"L={args.layers} D={args.dim}, batch 32, {torch.get_num_threads()} thread(s); load average {load()}"
    )
    print(
        "   goal (issue 23): the whole `python train.py 'lr=[1e-3,1e-4,1e-5]'` process <= 60 s (part C), "
        "heads identical up to float rounding"
    )
    lrs = (1e-3, 1e-4, 1e-5)
    torch.manual_seed(0)
    init = ValenceHead(args.layers, args.dim)

    n = args.order_steps
    t_textbook = time_one_head(init, x_train, y_train, n, textbook_forward)
    t_reassoc = time_one_head(init, x_train, y_train, n, lambda h, x: h(x))
    print(
        f"   one head, {n} steps: textbook order {t_textbook:.2f} ms/step   re-associated (ValenceHead.forward) "
        f"{t_reassoc:.2f} ms/step   ratio {t_textbook / t_reassoc:.1f}x",
        flush=True,
    )

    ref_steps = min(args.reference_steps or args.steps, args.steps)
    note = "" if ref_steps == args.steps else f", EXTRAPOLATED from {ref_steps} steps"
    data = (x_train, y_train)
    t_book, book = timed(textbook_loop, init, lrs, ref_steps, *data)
    t_prev_short, prev_short = timed(previous_plain_loop, init, lrs, ref_steps, *data)
    t_prev, prev = (
        (t_prev_short, prev_short)
        if ref_steps == args.steps
        else timed(previous_plain_loop, init, lrs, args.steps, *data)
    )
    t_book *= args.steps / ref_steps
    print(
        f"   (1) textbook loop (per head: textbook forward, autograd, own Adam): {t_book:7.1f} s{note}; "
        f"max |prediction difference| vs (2) after {ref_steps} steps {max_prediction_difference(book, prev_short, x_train):.1e}",
        flush=True,
    )
    print(f"   (2) previous plain loop (e2c4af7 ser.in_memory, autograd step): {t_prev:7.1f} s", flush=True)
    t_stacked, stacked = timed(
        lambda h, lr, x, y, n: train_heads_in_memory(h, lr, x, y, max_steps=n, seed=0, step_kernel="torch"),
        init,
        lrs,
        args.steps,
        *data,
    )
    print(
        f"   (3t) plain loop, torch step (ser.in_memory step_kernel=torch: closed-form stacked gradients + "
        f"fused Adam): {t_stacked:7.1f} s   (2)/(3t) {t_prev / t_stacked:.2f}x",
        flush=True,
    )
    t_plain, plain = timed(
        lambda h, lr, x, y, n: train_heads_in_memory(h, lr, x, y, max_steps=n, seed=0), init, lrs, args.steps, *data
    )
    print(
        f"   (3) plain loop now (ser.in_memory, compiled step, rows read in place): {t_plain:7.1f} s   "
        f"(2)/(3) {t_prev / t_plain:.2f}x   (3t)/(3) {t_stacked / t_plain:.2f}x; max |prediction difference| "
        f"vs (2) {max_prediction_difference(plain, prev, x_train):.1e}, vs (3t) "
        f"{max_prediction_difference(plain, stacked, x_train):.1e}",
        flush=True,
    )
    t_joint, joint = lightning_fit(init, lrs, features, target, dev, args.steps, args)
    print(
        f"   (4) Lightning, 3 heads in one run (python train.py 'lr=[1e-3,1e-4,1e-5]', steps_per_call=64): "
        f"{t_joint:7.1f} s ({1000 * t_joint / args.steps:.2f} ms/step, validation every epoch); max |prediction "
        f"difference| vs (3) {max_prediction_difference(joint.heads, plain, x_train):.1e}, "
        f"vs (2) {max_prediction_difference(joint.heads, prev, x_train):.1e}",
        flush=True,
    )
    print(
        f"   ratios of (4): textbook loop / (4) {t_book / t_joint:.2f}x   previous plain loop / (4) "
        f"{t_prev / t_joint:.2f}x   (4) / plain loop now {t_joint / t_plain:.2f}   load average {load()}",
        flush=True,
    )
    if not args.all:
        return
    t_ungrouped, _ = lightning_fit(init, lrs, features, target, dev, ref_steps, args, steps_per_call=1)
    total_ungrouped = t_ungrouped * args.steps / ref_steps
    print(
        f"   (5) Lightning, 3 heads in one run, steps_per_call=1: {total_ungrouped:7.1f} s "
        f"({1000 * t_ungrouped / ref_steps:.2f} ms/step{note}); (5)/(4) {total_ungrouped / t_joint:.2f}x",
        flush=True,
    )
    singles = [lightning_fit(init, (lr,), features, target, dev, ref_steps, args)[0] for lr in lrs]
    total_single = sum(singles) * args.steps / ref_steps
    print(
        f"   (6) Lightning, one run per lr (python train.py -m lr=1e-3,1e-4,1e-5, one after another): "
        f"{total_single:7.1f} s{note}; (6)/(4) {total_single / t_joint:.2f}x"
    )


def part_d(args) -> None:
    """The estimator's sensitivity to float rounding: the previous step, the textbook loop, the
    stacked step and the compiled step trained side by side on the same batches; per-head max |prediction difference| from
    the previous step, on the training clips, as training goes on."""
    import torch.nn.functional as F

    from speechbias.ser.datamodule import gather_rows
    from speechbias.ser.head import ValenceHead, predict_with_heads
    from speechbias.ser.heads_adam import HeadsAdam
    from speechbias.ser.module import adam_groups, per_head_mse
    from speechbias.ser.split import dev_split
    from speechbias.ser.stacked_heads import StackedHeads

    rng = np.random.default_rng(0)
    features = rng.standard_normal((args.clips, args.layers, args.dim)).astype(np.float32)
    target = np.clip(0.5 + 0.1 * features[:, args.layers // 2, :8].sum(1) / np.sqrt(8), 0, 1).astype(np.float32)
    dev = dev_split(np.repeat(np.arange(6), args.clips // 6 + 1)[: args.clips], seed=0)
    x, y = torch.from_numpy(features[~dev]), torch.from_numpy(target[~dev])
    lrs = (1e-3, 1e-4, 1e-5)
    torch.manual_seed(0)
    init = ValenceHead(args.layers, args.dim)
    prev, book, new, compiled = ([copy.deepcopy(init) for _ in lrs] for _ in range(4))
    prev_opt = adam_groups([list(h.parameters()) for h in prev], lrs)
    book_opts = [torch.optim.Adam(h.parameters(), lr=lr) for h, lr in zip(book, lrs)]
    stacked, new_opt = StackedHeads(new), adam_groups([list(h.parameters()) for h in new], lrs)
    compiled_opt = HeadsAdam(compiled, lrs, compiled=True)
    print(
        f"D. float rounding: 3 x {args.steps} steps, per lr (1e-3 1e-4 1e-5) max |prediction difference| "
        f"from the previous step (autograd); load average {load()}",
        flush=True,
    )
    step, epoch, t0 = 0, 0, time.perf_counter()
    while step < args.steps:
        order = torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(epoch))
        for start in range(0, x.shape[0], 32):
            idx = order[start : start + 32]
            xb, yb = gather_rows(x, idx), y[idx]
            loss = per_head_mse(predict_with_heads(prev, xb), yb).sum()
            prev_opt.zero_grad(set_to_none=True)
            loss.backward()
            prev_opt.step()
            for h, opt in zip(book, book_opts):
                loss = F.mse_loss(textbook_forward(h, xb), yb)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            stacked.set_gradients(xb, yb)
            new_opt.step()
            compiled_opt.step(batch={"source": x, "index": idx, "target": yb})
            step += 1
            if step % args.rounding_every == 0 or step == args.steps:
                with torch.no_grad():
                    rows = [
                        " ".join(f"{float((a(x) - b(x)).abs().max()):.1e}" for a, b in zip(heads, prev))
                        for heads in (book, new, compiled)
                    ]
                print(
                    f"   step {step:6d}: textbook loop {rows[0]}   stacked step {rows[1]}   compiled step {rows[2]}   "
                    f"({time.perf_counter() - t0:.0f} s, load average {load()})",
                    flush=True,
                )
            if step >= args.steps:
                break
        epoch += 1


def run_train_py(checkout: Path, overrides: list[str], run_dir: Path) -> float:
    """Wall seconds of one ``python <checkout>/train.py <overrides>`` child process: the checkout's own
    entry point, config and ``src`` (first on PYTHONPATH), run from its folder."""
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=str(checkout / "src"), HF_HUB_OFFLINE="1")
    cmd = [sys.executable, str(checkout / "train.py"), *overrides, f"hydra.run.dir={run_dir}"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=checkout, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"failed ({checkout}): {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    return wall


def reference_checkout(commit: str, into: Path) -> Path:
    """The whole tree of ``commit`` of this repository (train.py, conf, src), extracted under ``into``
    (git archive): a reference runs its own entry point and config, not this checkout's."""
    import subprocess
    import tarfile

    archive = into / "reference.tar"
    subprocess.run(["git", "-C", str(REPO), "archive", "-o", str(archive), commit], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "reference", filter="data")
    return into / "reference"


def best_heads_of(run_dir: Path) -> list:
    """The heads of ``<run_dir>/checkpoints/best.ckpt`` (state dicts per head)."""
    state = torch.load(run_dir / "checkpoints" / "best.ckpt", map_location="cpu", weights_only=False)["state_dict"]
    n = 1 + max(int(k.split(".")[1]) for k in state)
    return [{k.split(".", 2)[2]: v for k, v in state.items() if k.startswith(f"heads.{i}.")} for i in range(n)]


def part_c(args) -> None:
    from ser_train_workload import write_cached_workload

    from speechbias.ser.head import ValenceHead

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        overrides = write_cached_workload(tmp / "workload", clips=args.clips, blocks=args.layers - 1, dim=args.dim)
        print(
            f"C. whole process: python train.py {' '.join(overrides)} (workload written in "
            f"{time.perf_counter() - t0:.0f} s: {args.clips} clips cached, {args.layers} x {args.dim}); "
            f"load average {load()}",
            flush=True,
        )
        print("   goal (issue 23): <= 60 s whole process for the three heads", flush=True)
        checkouts = {"this checkout": REPO, f"reference {args.reference}": reference_checkout(args.reference, tmp)}
        walls = {label: [] for label in checkouts}
        for rep in range(args.repeats):
            for label, checkout in checkouts.items():
                run_dir = tmp / "runs" / f"{label.split()[0]}{rep}"
                walls[label].append(run_train_py(checkout, overrides, run_dir))
                log_text = (run_dir / "train.log").read_text() if (run_dir / "train.log").is_file() else ""
                forwards = next(
                    (ln.split("] - ", 1)[-1] for ln in log_text.splitlines() if "needed an upstream forward" in ln),
                    "extraction line not found",
                )
                print(
                    f"   {label:24s} run {rep + 1}: {walls[label][-1]:6.1f} s   load average {load()}   ({forwards})",
                    flush=True,
                )
        ours, ref = (min(v) for v in walls.values())
        print(
            f"   best: this checkout {ours:6.1f} s   reference {ref:6.1f} s   ratio reference / this checkout "
            f"{ref / ours:.2f}x   goal <= 60 s: {'met' if ours <= 60 else 'NOT met'}"
        )
        heads = {}
        for label in checkouts:
            heads[label] = []
            for state in best_heads_of(tmp / "runs" / f"{label.split()[0]}0"):
                h = ValenceHead(args.layers, args.dim)
                h.load_state_dict(state)
                heads[label].append(h)
        x = torch.randn(512, args.layers, args.dim, generator=torch.Generator().manual_seed(0))
        print(
            f"   max |prediction difference| of the two runs' best heads (random inputs, [0, 1] scale): "
            f"{max_prediction_difference(*heads.values(), x):.1e}"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=20_000)
    p.add_argument(
        "--reference-steps",
        type=int,
        default=4000,
        help="steps of the textbook loop and of --all's extra Lightning runs (totals extrapolated)",
    )
    p.add_argument("--reference", default="e2c4af7", help="git commit whose train.py part C compares with")
    p.add_argument("--repeats", type=int, default=1, help="whole-process runs per checkout in part C")
    p.add_argument("--clips", type=int, default=1800)
    p.add_argument("--layers", type=int, default=25)
    p.add_argument("--dim", type=int, default=1024)
    p.add_argument("--seq-clips", type=int, default=64)
    p.add_argument("--seq-steps", type=int, default=100)
    p.add_argument("--seq-dim", type=int, default=256)
    p.add_argument("--seq-blocks", type=int, default=4)
    p.add_argument("--threads", type=int, default=1, help="torch threads of parts A and B (train.py: fit_threads)")
    p.add_argument("--order-steps", type=int, default=500)
    p.add_argument("--skip-a", action="store_true")
    p.add_argument("--skip-b", action="store_true")
    p.add_argument("--skip-c", action="store_true")
    p.add_argument("--all", action="store_true", help="also Lightning with steps_per_call=1 and one run per lr")
    p.add_argument("--rounding", action="store_true", help="part D: the estimator's sensitivity to float rounding")
    p.add_argument("--rounding-every", type=int, default=2000)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} threads, {os.cpu_count()} CPUs, load average {load()}")
    if not args.skip_a:
        part_a(args)
    if not args.skip_b:
        part_b(args)
    if not args.skip_c:
        part_c(args)
    if args.rounding:
        part_d(args)
    print(f"load average at the end: {load()}")


if __name__ == "__main__":
    main()
