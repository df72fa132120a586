"""SpEAT association s(w) and effect size d written from the formulas as plain-Python loops
(the independent references of the stats tests)."""

from __future__ import annotations

import math


def cos_ref(u, v):
    dot = sum(a * b for a, b in zip(u, v))
    return dot / (math.sqrt(sum(a * a for a in u)) * math.sqrt(sum(b * b for b in v)))


def s_ref(w, A, B):
    return sum(cos_ref(w, a) for a in A) / len(A) - sum(cos_ref(w, b) for b in B) / len(B)


def d_ref(X, Y, A, B):
    sx = [s_ref(x, A, B) for x in X]
    sy = [s_ref(y, A, B) for y in Y]
    pooled = sx + sy
    mean = sum(pooled) / len(pooled)
    sd = math.sqrt(sum((v - mean) ** 2 for v in pooled) / (len(pooled) - 1))
    return (sum(sx) / len(sx) - sum(sy) / len(sy)) / sd
