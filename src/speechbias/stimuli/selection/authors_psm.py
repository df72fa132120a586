"""The SpEAT authors' propensity-score matching replayed number for number (``propensity_model: authors_folds``).

The authors (github.com/isaacOnline/SpEAT, ``preprocessing/download_saa.py``) matched US and Korean
speakers with psmpy: ``PsmPy.logistic_ps(balance=True)`` (scikit-learn ``LogisticRegression(solver=
"liblinear")`` on class-balanced folds, see :func:`~speechbias.stimuli.selection.propensity.authors_fold_scores`)
and ``knn_matched(matcher="propensity_score", replacement=False, caliper=0.001)``. Two details of those
libraries decide which US speaker a Korean speaker gets, and are replayed here:

* **score precision** (:func:`liblinear_logit_scores`): liblinear's trust-region Newton method (TRON)
  stops when the gradient norm falls below ``tol * min(n_pos, n_neg) / n`` times its norm at w = 0.
  Its scores differ from the exact optimum by ~1e-5, and 3 of the paper's 59 US partners (korean48,
  korean68, korean83) are nearer under liblinear's scores but not under the exact ones;
* **order among equal distances** (:func:`neighbour_order`): speakers of one fold with the same age and
  sex have the same score, hence the same distance. ``sklearn.neighbors.NearestNeighbors`` (brute force,
  all neighbours) ranks them with its ``ArgKmin`` reduction: squared distances pushed into a max-heap per
  query, 256 candidates per chunk, chunks spread over the threads and the threads' heaps merged in
  order, then a median-of-three quicksort. Which tied speaker comes first follows from that order,
  and from the order psmpy hands the rows over in (:func:`~speechbias.stimuli.selection.propensity.
  psmpy_row_order`: rows its topped-up last fold scores again move to the front).

Checked against psmpy 0.3.13 itself on scikit-learn 1.2.2, the version of the authors' time
(tests/stimuli/test_psmpy_reference.py): the same pairs on the paper's set and on candidate sets that
reach psmpy's top-up branch. scikit-learn 1.9 orders exact-distance ties otherwise (37 of the paper's
59 pairs).

scikit-learn is not a dependency of this project, so both are written here (numpy, ~60 lines) instead of
called; with them the authors' list comes back pair by pair (59 of 59 partners, the same speakers; the
exact optimum and a seeded tie order gave 56 of 59 partners of the same age and sex, 34-46 identical).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

LIBLINEAR_TOL = 1e-4  # LogisticRegression's default tol, liblinear's eps
KNN_CHUNK = 256  # scikit-learn's pairwise-reduction chunk size (rows of the fitted data per chunk)
KNN_THREADS = 2  # the authors' 424 US speakers are 2 chunks: any machine with >= 2 threads gives this order


def liblinear_logit_scores(
    y: np.ndarray, x: np.ndarray, c: float = 1.0, tol: float = LIBLINEAR_TOL, max_iter: int = 1000
) -> np.ndarray:
    """P(y = 1) of an L2-penalised logistic regression, solved as liblinear's TRON solves it.

    Minimises 0.5 |w|^2 + c * sum log(1 + exp(-s_i w.[x_i, 1])) (s = 2y - 1; the intercept is a feature
    of value 1, penalised like the weights: scikit-learn's ``intercept_scaling=1``) from w = 0 with
    trust-region Newton steps (conjugate gradient inside the region) and stops when
    ``|grad| <= tol * max(min(n_pos, n_neg), 1) / n * |grad(0)|``: liblinear's ``tron.cpp`` and
    ``train_one`` as bundled in scikit-learn.
    """
    design = np.c_[np.asarray(x, dtype=np.float64), np.ones(len(x))]
    sign = np.where(np.asarray(y) > 0, 1.0, -1.0)
    n_pos = int((sign > 0).sum())
    eps = tol * max(min(n_pos, len(sign) - n_pos), 1) / len(sign)
    state: dict[str, np.ndarray] = {}

    def fun(w):
        z = design @ w
        state["z"] = z
        yz = sign * z
        return 0.5 * float(w @ w) + c * float(np.sum(np.log(1.0 + np.exp(-np.abs(yz))) + np.maximum(-yz, 0.0)))

    def grad(w):  # at the last point fun() was called for, as liblinear's
        p = 1.0 / (1.0 + np.exp(-sign * state["z"]))
        state["d"] = p * (1.0 - p)
        return w + design.T @ (c * (p - 1.0) * sign)

    def hessian_times(v):
        return v + design.T @ (c * state["d"] * (design @ v))

    w = np.zeros(design.shape[1])
    f, g = fun(w), grad(w)
    delta = gnorm0 = float(np.linalg.norm(g))
    step = 1
    while step <= max_iter and gnorm0 > eps * gnorm0:
        s, r = _trust_region_cg(delta, g, hessian_times)
        gs = float(g @ s)
        predicted = -0.5 * (gs - float(s @ r))
        f_new = fun(w + s)
        actual = f - f_new
        s_norm = float(np.linalg.norm(s))
        if step == 1:
            delta = min(delta, s_norm)
        alpha = 4.0 if f_new - f - gs <= 0 else max(0.25, -0.5 * (gs / (f_new - f - gs)))
        if actual < 1e-4 * predicted:
            delta = min(max(alpha, 0.25) * s_norm, 0.5 * delta)
        elif actual < 0.25 * predicted:
            delta = max(0.25 * delta, min(alpha * s_norm, 0.5 * delta))
        elif actual < 0.75 * predicted:
            delta = max(0.25 * delta, min(alpha * s_norm, 4.0 * delta))
        else:
            delta = max(delta, min(alpha * s_norm, 4.0 * delta))
        if actual > 1e-4 * predicted:
            step += 1
            w, f = w + s, f_new
            g = grad(w)
            if np.linalg.norm(g) <= eps * gnorm0:
                break
        if (abs(actual) <= 0 and predicted <= 0) or (
            abs(actual) <= 1e-12 * abs(f) and abs(predicted) <= 1e-12 * abs(f)
        ):
            break
    return 1.0 / (1.0 + np.exp(-(design @ w)))


def _trust_region_cg(delta: float, g: np.ndarray, hessian_times) -> tuple[np.ndarray, np.ndarray]:
    """liblinear's ``trcg``: conjugate gradient on H s = -g until |r| <= 0.1 |g| or |s| reaches delta."""
    s, r = np.zeros_like(g), -g.copy()
    d = r.copy()
    tol = 0.1 * float(np.linalg.norm(g))
    rr = float(r @ r)
    while np.linalg.norm(r) > tol:
        hd = hessian_times(d)
        alpha = rr / float(d @ hd)
        s = s + alpha * d
        if np.linalg.norm(s) > delta:  # back to the boundary of the trust region
            s = s - alpha * d
            sd, ss, dd = float(s @ d), float(s @ s), float(d @ d)
            rad = np.sqrt(sd * sd + dd * (delta * delta - ss))
            alpha = (delta * delta - ss) / (sd + rad) if sd >= 0 else (rad - sd) / dd
            return s + alpha * d, r - alpha * hd
        r = r - alpha * hd
        rr_new = float(r @ r)
        d = r + (rr_new / rr) * d
        rr = rr_new
    return s, r


def _heap_push(values: list, indices: list, val: float, idx: int) -> None:
    """scikit-learn's ``heap_push`` into a max-heap of fixed size (utils/_heap.pyx)."""
    if val >= values[0]:
        return
    size, cur = len(values), 0
    while True:
        left = 2 * cur + 1
        right = left + 1
        if left >= size:
            break
        if right >= size:
            swap = left if values[left] > val else -1
        elif values[left] >= values[right]:
            swap = left if val < values[left] else -1
        else:
            swap = right if val < values[right] else -1
        if swap < 0:
            break
        values[cur], indices[cur] = values[swap], indices[swap]
        cur = swap
    values[cur], indices[cur] = val, idx


def _sort_together(values: list, indices: list, lo: int, size: int) -> None:
    """scikit-learn's ``simultaneous_sort`` (utils/_sorting.pyx): median-of-three quicksort of
    ``values[lo:lo+size]``, ``indices`` moved alongside."""

    def swap(a: int, b: int) -> None:
        a, b = lo + a, lo + b
        values[a], values[b] = values[b], values[a]
        indices[a], indices[b] = indices[b], indices[a]

    while size > 3:
        pivot, last = size // 2, size - 1
        if values[lo] > values[lo + last]:
            swap(0, last)
        if values[lo + last] > values[lo + pivot]:
            swap(last, pivot)
            if values[lo] > values[lo + last]:
                swap(0, last)
        pivot_value, store = values[lo + last], 0
        for i in range(last):
            if values[lo + i] < pivot_value:
                swap(i, store)
                store += 1
        swap(store, last)
        if store > 1:
            _sort_together(values, indices, lo, store)
        lo, size = lo + store + 1, size - store - 1  # the right part, iteratively
        if size < 2:
            return
    if size == 2 and values[lo] > values[lo + 1]:
        swap(0, 1)
    elif size == 3:
        if values[lo] > values[lo + 1]:
            swap(0, 1)
        if values[lo + 1] > values[lo + 2]:
            swap(1, 2)
            if values[lo] > values[lo + 1]:
                swap(0, 1)


def neighbour_order(
    query: float, candidates: np.ndarray, chunk: int = KNN_CHUNK, n_threads: int = KNN_THREADS
) -> tuple[np.ndarray, np.ndarray]:
    """(candidate positions nearest first, their Euclidean distances) for a 1-D ``query``, in the order
    scikit-learn's brute-force ``NearestNeighbors.kneighbors`` (all neighbours) returns them."""
    y = np.asarray(candidates, dtype=np.float64)
    k = len(y)
    partial = (-2.0 * query * y + y * y).tolist()  # the GEMM middle term + |y|^2; |x|^2 is added after sorting
    heap, heap_idx = [np.inf] * k, [-1] * k
    chunks = [range(s, min(s + chunk, k)) for s in range(0, k, chunk)]
    for thread in range(n_threads):
        own, own_idx = [np.inf] * k, [-1] * k
        for rows in chunks[thread::n_threads]:
            for j in rows:
                _heap_push(own, own_idx, partial[j], j)
        for val, j in zip(own, own_idx):
            _heap_push(heap, heap_idx, val, j)
    _sort_together(heap, heap_idx, 0, k)
    distances = np.sqrt(np.maximum(np.asarray(heap) + query * query, 0.0))
    return np.asarray(heap_idx), distances


def knn_caliper_pairs(score: pd.Series, treated: pd.Series, caliper: float) -> pd.DataFrame:
    """psmpy's ``knn_matched(matcher="propensity_score", replacement=False, caliper=caliper)``: each row
    of the smaller group, in ``score``'s order (psmpy's row order, as :func:`~speechbias.stimuli.selection.
    propensity.authors_fold_scores` returns it), takes the first unused row of the other group in
    :func:`neighbour_order` whose distance is within ``caliper``. Columns ``treated``, ``control``."""
    is_t = treated.reindex(score.index).astype(bool)
    small, large = (score[is_t], score[~is_t]) if is_t.sum() < (~is_t).sum() else (score[~is_t], score[is_t])
    values = large.to_numpy(dtype=np.float64)
    free = np.ones(len(values), dtype=bool)
    pairs = []
    for label, value in small.items():
        order, distances = neighbour_order(float(value), values)
        ok = (distances <= caliper) & free[order]
        if ok.any():
            j = int(order[np.argmax(ok)])
            free[j] = False
            pairs.append((label, large.index[j]) if bool(is_t.loc[label]) else (large.index[j], label))
    return pd.DataFrame(pairs, columns=["treated", "control"])
