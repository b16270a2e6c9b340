# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Order statistics shared by serve_bench and the sweep's selection (stdlib only).

Percentiles use linear interpolation between closest ranks (the numpy default,
which is also what ``vllm bench serve`` reports). MAD is the raw median absolute
deviation; callers scale it by 1.4826 where a normal-consistent estimate is meant.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

MAD_NORMAL = 1.4826


def _clean(values):
    out = []
    for v in values:
        if v is None:
            continue
        f = float(v)
        if math.isnan(f):
            continue
        out.append(f)
    return out


def percentile(values, q):
    """Linear-interpolated percentile, q in [0, 100]. None for no data."""
    data = sorted(_clean(values))
    if not data:
        return None
    if not 0 <= q <= 100:
        raise ValueError("percentile q must be within 0..100, got %r" % (q,))
    if len(data) == 1:
        return data[0]
    pos = (len(data) - 1) * (q / 100.0)
    lo = int(math.floor(pos))
    hi = int(math.ceil(pos))
    if lo == hi:
        return data[lo]
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def median(values):
    return percentile(values, 50)


def mad(values):
    """Median absolute deviation (unscaled)."""
    data = _clean(values)
    if not data:
        return None
    m = median(data)
    return median([abs(v - m) for v in data])


def mean(values):
    data = _clean(values)
    if not data:
        return None
    return math.fsum(data) / len(data)


def stdev(values):
    """Sample standard deviation (n-1); 0.0 for a single value."""
    data = _clean(values)
    if not data:
        return None
    if len(data) == 1:
        return 0.0
    m = math.fsum(data) / len(data)
    return math.sqrt(math.fsum((v - m) ** 2 for v in data) / (len(data) - 1))


def summarize(values, percentiles=(50, 90, 99), scale=1.0, ndigits=4):
    """Summary dict: count, mean, std, min, max and pNN for each percentile.

    ``scale`` multiplies every location statistic (e.g. 1000 for s -> ms).
    """
    data = _clean(values)
    out: "dict[str, float | None]" = {"count": len(data)}
    keys = ["mean", "std", "min", "max"] + ["p%g" % q for q in percentiles]
    if not data:
        for k in keys:
            out[k] = None
        return out

    def r(x):
        return round(x * scale, ndigits)

    out["mean"] = r(mean(data))
    out["std"] = r(stdev(data))
    out["min"] = r(min(data))
    out["max"] = r(max(data))
    for q in percentiles:
        out["p%g" % q] = r(percentile(data, q))
    return out
