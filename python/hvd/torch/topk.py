"""Top-k gradient compression with error feedback for
hvd.DistributedOptimizer (docs/compression.md).

Each rank adds the error it kept back to its gradient, sends the k values
of largest magnitude as (index, value) pairs by allgather, and keeps the
rest; every rank adds all pairs in rank order and divides by the number of
ranks.  Ties in magnitude go to the smaller index.  Gradients with fewer
than 2 dimensions, or where 2k * min_compression_rate is not below the
number of values, go through the ordinary allreduce.

    opt = hvd.DistributedOptimizer(opt, named_parameters=...,
                                   compression=hvd.TopK(ratio=0.01))
"""
import math

import torch

from hvd.torch.compression import Compression, NoneCompressor
from hvd.torch.mpi_ops import allgather_async, synchronize


def select(values, k):
    """Indices of the k largest |values|, ascending; ties to the smaller
    index (a stable sort), NaN first."""
    mags = values.abs()
    mags = torch.where(torch.isnan(mags), torch.full_like(mags, math.inf), mags)
    order = torch.sort(mags, descending=True, stable=True).indices
    return torch.sort(order[:k]).values


class _Handle:
    def __init__(self, tensor, compressor, name, m, idx, process_set):
        self.tensor, self.compressor, self.name = tensor, compressor, name
        self.m, self.idx, self.process_set = m, idx, process_set
        pairs = torch.stack([idx.to(torch.int32), m[idx].view(torch.int32)], dim=1)
        self.handle = allgather_async(pairs, name=name + ".topk", process_set=process_set)

    def wait(self):
        pairs = synchronize(self.handle)
        n = self.m.numel()
        idx = pairs[:, 0].to(torch.int64)
        if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= n):
            raise ValueError("TopK: %s: an index out of range [0, %d) arrived"
                             % (self.name, n))
        vals = pairs[:, 1].contiguous().view(torch.float32)
        out = torch.zeros(n)
        k = self.idx.numel()
        if idx.numel() != k * self.process_set.size():
            raise ValueError("TopK: %s: %d pairs arrived; expected %d from each of %d ranks"
                             % (self.name, idx.numel(), k, self.process_set.size()))
        # rank by rank, in rank order: the same sum on every rank (a rank's
        # own indices are distinct)
        for r in range(0, idx.numel(), k):
            out[idx[r:r + k]] += vals[r:r + k]
        out.mul_(1.0 / self.process_set.size())
        error = self.m.clone()
        error[self.idx] = 0.0
        self.compressor._errors[self.name] = error
        return out.view(self.tensor.shape).to(self.tensor.dtype)


class TopK(NoneCompressor):
    """Top-k compression (a DistributedOptimizer `compression=` value).

    ratio: share of each gradient's values sent, in (0, 1]; k is
    ceil(ratio * values), at least 1."""

    def __init__(self, ratio=0.01, min_compression_rate=2.0):
        if not 0.0 < ratio <= 1.0:
            raise ValueError("TopK: ratio %r; expected in (0, 1]" % (ratio,))
        if not min_compression_rate >= 0:
            raise ValueError("TopK: min_compression_rate %r; expected >= 0"
                             % (min_compression_rate,))
        self.ratio = float(ratio)
        self.min_compression_rate = float(min_compression_rate)
        self._errors = {}

    def state_dict(self):
        """Every gradient's error (what it kept back), copied."""
        return {"errors": {name: e.clone() for name, e in self._errors.items()}}

    def load_state_dict(self, saved):
        self._errors = {name: e.clone().float() for name, e in saved["errors"].items()}

    def reduce_async(self, tensor, name, process_set):
        """Starts the reduction of `tensor`, or returns None when it goes
        uncompressed."""
        if tensor.dim() < 2 or not tensor.dtype.is_floating_point:
            return None
        n = tensor.numel()
        k = min(n, max(1, math.ceil(self.ratio * n)))
        if 2 * k * self.min_compression_rate >= n:
            return None
        m = tensor.detach().reshape(-1).float()
        error = self._errors.get(name)
        if error is not None:
            m = m + error
        return _Handle(tensor, self, name, m, select(m, k), process_set)


# hvd.Compression.topk(...) too, beside Compression.none and .fp16 (set here
# so that compression.py, imported by mpi_ops, needs no import of this file)
Compression.topk = TopK
