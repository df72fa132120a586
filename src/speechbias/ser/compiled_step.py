"""One training step of K valence heads, gradients and Adam update fused in one numba-compiled loop.

The same estimator as the general step (autograd of :func:`~speechbias.ser.head.predict_with_heads`
+ ``torch.optim.Adam``): each head's MSE gradient on the batch, in closed form, then each head's own
Adam step (torch's update rule, float32). With ``w = softmax(a)`` (L,), ``v = W2 W1`` (D,),
``c = W2 b1 + b2``, ``s_bl = v . x_bl`` and ``g_b = 2 (p_b - y_b) / B``:

    dc = sum_b g_b    dw_l = sum_b g_b s_bl    da = w * (dw - <w, dw>)    dv = sum_bl g_b w_l x_bl
    dW1 = W2^T dv     db1 = W2^T dc            dW2 = dv W1^T + dc b1^T     db2 = dc

What makes it faster on a CPU is memory traffic and no per-step Python, not arithmetic
(benchmarks/ser_bench.py measures it side by side with the general step):

* the batch is never gathered: each sample's L rows are read from the (N, L, D) training features
  where they lie, once for the products ``s_bl = v . x_bl`` and, while they are still in the L2
  cache, once more for ``dv += g_b w_l x_bl``;
* the (H, D) gradient of ``W1`` (``W2^T dv``, a rank-1 matrix) is never written: each row's gradient
  is made on the fly inside the row's Adam update, and the gradient of ``W2`` is read off the same
  row before it changes.

Numerics: float32 storage and arithmetic like torch's; the dot products of length D are summed with
reassociation allowed (SIMD lanes, as BLAS does; so, like torch's own products, the last bits depend
on the CPU's vector width), every other sum runs in a fixed order. Each head runs exactly the same
operations whatever heads train beside it, so K heads in one run end bit for bit where K one-head
runs end. The values differ from the general step's by float rounding (tests/ser/test_compiled_step.py);
over 20,000 Adam steps rounding differences can grow into visible ones (bench part D).

Layout (stacked over heads, as :class:`~speechbias.ser.heads_adam.HeadsAdam` keeps them): ``a`` (K, L) layer logits, ``w1``
(K, H, D), ``b1`` (K, H), ``w2`` (K, 1, H), ``b2`` (K, 1); Adam's first and second moments in the
same shapes; ``steps`` (K, 5) float32, one counter per parameter (they advance together).
numba's ``error_model="numpy"``: IEEE division (no zero-division checks, which would stop the loops
from vectorising: the Adam loop ran 7x slower with them, measured).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(cache=True, error_model="numpy", fastmath={"reassoc"})
def _dot(u, x):
    """sum_d u[d] x[d] of two float32 vectors, lanes summed in the order the compiler vectorises."""
    total = np.float32(0.0)
    for d in range(x.shape[0]):
        total += u[d] * x[d]
    return total


@njit(cache=True, error_model="numpy")
def _adam_vector(p, m, v, g, scale, hyper):
    """Adam's update of float32 vectors p, m, v (in place) with gradient ``scale * g`` (scale 1 for g
    itself: x * 1 == x exactly), in torch's order of operations: ``m.lerp_(g, 1 - beta1)``,
    ``v.mul_(beta2).addcmul_(g, g, 1 - beta2)``, ``p.addcdiv_(m, sqrt(v) / sqrt(bc2) + eps, -step_size)``.
    ``hyper``: the step's float32 (step_size, 1 - beta1, beta2, 1 - beta2, sqrt(bc2), eps)."""
    step_size, one_minus_beta1, beta2, one_minus_beta2, bc2_sqrt, eps = hyper
    for i in range(p.shape[0]):
        gi = scale * g[i]
        mi = m[i] + one_minus_beta1 * (gi - m[i])
        vi = beta2 * v[i] + one_minus_beta2 * gi * gi
        m[i] = mi
        v[i] = vi
        p[i] = p[i] - step_size * mi / (np.sqrt(vi) / bc2_sqrt + eps)


@njit(cache=True, error_model="numpy")
def _adam_rank_one_rows(w1, m, v, w2_row, dv, hyper, grad_w2):
    """Adam on ``w1`` (H, D) with gradient ``w2_row[h] * dv[d]`` (never stored), in place; first writes
    ``grad_w2[h] = dv . w1[h]`` (the W2 gradient's product term, from each row before it changes)."""
    for h in range(w1.shape[0]):
        grad_w2[h] = _dot(dv, w1[h])
        _adam_vector(w1[h], m[h], v[h], dv, w2_row[h], hyper)


@njit(cache=True, error_model="numpy")
def _linear_form(a, w1, b1, w2_row, b2, v, w):
    """One head as the linear map ``x -> sum_l w_l (v . x_l) + c``: writes ``v = W2 W1`` (D,) and
    ``w = softmax(a)`` (L,), returns ``c = W2 b1 + b2``."""
    n_hidden, dim = w1.shape
    v[:] = 0.0
    c = np.float32(0.0)
    for h in range(n_hidden):
        scale = w2_row[h]
        row = w1[h]
        for d in range(dim):
            v[d] += scale * row[d]
        c += scale * b1[h]
    c += b2
    top = a[0]
    for layer in range(1, a.shape[0]):
        top = max(top, a[layer])
    total = np.float32(0.0)
    for layer in range(a.shape[0]):
        w[layer] = np.exp(a[layer] - top)
        total += w[layer]
    for layer in range(a.shape[0]):
        w[layer] = w[layer] / total
    return c


@njit(cache=True, error_model="numpy")
def _linear_forms(a, w1, b1, w2, b2, v, w, c):
    """:func:`_linear_form` of every head k into ``v[k]`` (K, D), ``w[k]`` (K, L) and ``c[k]`` (K,)."""
    for k in range(w1.shape[0]):
        c[k] = _linear_form(a[k], w1[k], b1[k], w2[k, 0], b2[k, 0], v[k], w[k])


@njit(cache=True, error_model="numpy")
def heads_adam_step(
    source,
    rows,
    target,
    a,
    w1,
    b1,
    w2,
    b2,
    m_a,
    v_a,
    m_w1,
    v_w1,
    m_b1,
    v_b1,
    m_w2,
    v_w2,
    m_b2,
    v_b2,
    steps,
    lrs,
    beta1s,
    beta2s,
    epss,
    mse,
):
    """One step of every head k: the MSE gradient on the batch ``source[rows]`` (B, L, D) with targets
    ``target`` (B,), then head k's Adam update with ``lrs[k]``, ``beta1s[k]``, ``beta2s[k]``, ``epss[k]``
    (float64), in place; ``steps[k, :]`` advance by 1; ``mse[k]`` gets head k's MSE before the update."""
    n_heads, n_hidden, dim = w1.shape
    n_layers = a.shape[1]
    batch = rows.shape[0]
    v = np.empty((n_heads, dim), np.float32)
    dv = np.zeros((n_heads, dim), np.float32)
    w = np.empty((n_heads, n_layers), np.float32)
    c = np.empty(n_heads, np.float32)
    s = np.empty((n_heads, batch, n_layers), np.float32)
    g = np.empty((n_heads, batch), np.float32)
    squared = np.zeros(n_heads)
    da = np.empty(n_layers, np.float32)
    grad_w2 = np.empty(n_hidden, np.float32)
    grad_b1 = np.empty(n_hidden, np.float32)
    grad_b2 = np.empty(1, np.float32)
    two_over_b = np.float32(2.0 / batch)
    unit = np.float32(1.0)
    _linear_forms(a, w1, b1, w2, b2, v, w, c)
    # per sample (its L rows read from memory once, then warm in the cache for every head and both
    # passes): s_bl, the prediction, d MSE / d p, and dv += g_b w_l x_bl
    for i in range(batch):
        sample = source[rows[i]]
        for k in range(n_heads):
            p = np.float32(0.0)
            for layer in range(n_layers):
                s[k, i, layer] = _dot(v[k], sample[layer])
                p += w[k, layer] * s[k, i, layer]
            err = (p + c[k]) - target[i]
            squared[k] += float(err) * float(err)
            g[k, i] = err * two_over_b
            for layer in range(n_layers):
                coef = g[k, i] * w[k, layer]
                x = sample[layer]
                dv_k = dv[k]
                for d in range(dim):
                    dv_k[d] += coef * x[d]
    for k in range(n_heads):
        t = steps[k, 0] + np.float32(1.0)
        for j in range(steps.shape[1]):
            steps[k, j] = t
        beta1, beta2 = beta1s[k], beta2s[k]
        # as torch: bias corrections and step size in float64, cast to float32 where they meet tensors
        hyper = (
            np.float32(lrs[k] / (1.0 - beta1 ** float(t))),
            np.float32(1.0 - beta1),
            np.float32(beta2),
            np.float32(1.0 - beta2),
            np.float32(math.sqrt(1.0 - beta2 ** float(t))),
            np.float32(epss[k]),
        )
        mse[k] = squared[k] / batch
        dc = np.float32(0.0)
        for i in range(batch):
            dc += g[k, i]
        weighted = np.float32(0.0)
        for layer in range(n_layers):
            dw = np.float32(0.0)
            for i in range(batch):
                dw += g[k, i] * s[k, i, layer]
            da[layer] = dw
            weighted += w[k, layer] * dw
        for layer in range(n_layers):
            da[layer] = w[k, layer] * (da[layer] - weighted)
        for h in range(n_hidden):
            grad_b1[h] = w2[k, 0, h] * dc
        # W1 (gradient W2^T dv made on the fly) and the product term of W2's gradient, from the old rows
        _adam_rank_one_rows(w1[k], m_w1[k], v_w1[k], w2[k, 0], dv[k], hyper, grad_w2)
        for h in range(n_hidden):
            grad_w2[h] = grad_w2[h] + dc * b1[k, h]
        grad_b2[0] = dc
        _adam_vector(a[k], m_a[k], v_a[k], da, unit, hyper)
        _adam_vector(w2[k, 0], m_w2[k, 0], v_w2[k, 0], grad_w2, unit, hyper)
        _adam_vector(b1[k], m_b1[k], v_b1[k], grad_b1, unit, hyper)
        _adam_vector(b2[k], m_b2[k], v_b2[k], grad_b2, unit, hyper)
