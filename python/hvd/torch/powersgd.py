"""PowerSGD gradient compression for hvd.DistributedOptimizer.

Vogels et al. 2019, in the steps of torch's PowerSGD communication hook,
and the same algorithm as libhvd_nn's (docs/compression.md):

    M = grad + error;  P = M Q;  allreduce P (average);  orthogonalise P
    Q = M^T P;  allreduce Q (average);  grad = P Q^T;  error = M - grad

Q is kept between steps (warm start) and first drawn from a seed shared by
every rank.  A gradient with fewer than 2 dimensions, or one where
compression would send more than 1/min_compression_rate of its values,
goes through the ordinary allreduce.  As torch's hook, the first
start_powerSGD_iter reductions of each gradient are plain allreduces.  Q,
the error and the step counts are in state_dict() (and so in
DistributedOptimizer.state_dict() and hvd.elastic.TorchState): a restored
job resumes where it was.

    opt = hvd.DistributedOptimizer(opt, named_parameters=...,
                                   compression=hvd.PowerSGD(matrix_approximation_rank=4))
"""
import zlib

import torch

from hvd.torch.compression import Compression, NoneCompressor
from hvd.torch.mpi_ops import Average, allreduce_async_, synchronize


_TINY = 1e-30  # columns below this norm count as zero: 1 / norm must fit a float


def orthogonalize(p, drop=1e-4):
    """Gram-Schmidt on p's columns, in place, as torch's _orthogonalize; a
    column that cancels to less than `drop` of the largest starting norm
    (a gradient of lower rank than p has columns) is zeroed, not
    normalised, so rounding noise does not come back as a direction."""
    largest = float(p.norm(dim=0).max()) if p.numel() else 0.0
    for i in range(p.shape[1]):
        col = p[:, i:i + 1]
        norm = float(col.double().norm())
        col.mul_(1.0 / norm if norm > drop * largest and norm > _TINY else 0.0)
        if i + 1 < p.shape[1]:
            rest = p[:, i + 1:]
            rest.sub_((col.double() * rest.double()).sum(dim=0).float() * col)
    return p


class _State:
    def __init__(self, rows, cols, rank, seed):
        self.generator = torch.Generator().manual_seed(seed)
        self.q = torch.randn(cols, rank, generator=self.generator)
        self.error = torch.zeros(rows, cols)

    def state_dict(self):
        return {"q": self.q.clone(),
                "error": None if self.error is None else self.error.clone(),
                "generator": self.generator.get_state()}

    @classmethod
    def from_state_dict(cls, saved):
        state = cls.__new__(cls)
        state.q = saved["q"].clone().float()
        error = saved["error"]
        state.error = None if error is None else error.clone().float()
        state.generator = torch.Generator()
        state.generator.set_state(saved["generator"])
        return state

    def renormalize_q(self):
        """Q's columns to unit norm before they are used: the result does
        not depend on their scale (P is orthogonalised), and without this Q
        shrinks with the error until it underflows.  A column that vanished
        is drawn afresh; Q is the same on every rank, so the generator stays
        in step everywhere."""
        norms = self.q.double().norm(dim=0)
        for i, norm in enumerate(norms.tolist()):
            if norm > _TINY and norm < float("inf"):
                self.q[:, i] /= norm
            else:
                self.q[:, i] = torch.randn(self.q.shape[0], generator=self.generator)


class _Handle:
    """One gradient's reduction in flight: P's allreduce, then Q's."""

    def __init__(self, tensor, state, m, p, name, process_set):
        self.tensor, self.state, self.m, self.p = tensor, state, m, p
        self.name, self.process_set = name, process_set
        self.handle = allreduce_async_(p, name=name + ".powersgd.p", op=Average,
                                       process_set=process_set)
        self.q_handle = None

    def advance(self):
        """Waits for P, orthogonalises it and starts Q's allreduce (the
        optimizer does this for every gradient before waiting for any Q)."""
        if self.q_handle is not None:
            return
        synchronize(self.handle)
        orthogonalize(self.p)
        torch.matmul(self.m.t(), self.p, out=self.state.q)
        self.q_handle = allreduce_async_(self.state.q, name=self.name + ".powersgd.q",
                                         op=Average, process_set=self.process_set)

    def wait(self):
        """The averaged approximation, shaped and typed as the gradient."""
        self.advance()
        synchronize(self.q_handle)
        approx = torch.matmul(self.p, self.state.q.t())
        self.state.error = self.m - approx
        return approx.view(self.tensor.shape).to(self.tensor.dtype)


class PowerSGD(NoneCompressor):
    """PowerSGD compression (a DistributedOptimizer `compression=` value).

    matrix_approximation_rank: r; min_compression_rate: compress a gradient
    only if (rows + cols) r * rate < rows * cols (torch's default 2);
    seed: Q's first values, the same on every rank;
    start_powerSGD_iter: the first this many reductions of each gradient
    are plain allreduces (torch's option; 0, the default, compresses from
    the first step)."""

    def __init__(self, matrix_approximation_rank=1, min_compression_rate=2.0, seed=0,
                 start_powerSGD_iter=0):
        if int(start_powerSGD_iter) < 0:
            raise ValueError("PowerSGD: start_powerSGD_iter %r; expected >= 0"
                             % (start_powerSGD_iter,))
        if int(matrix_approximation_rank) < 1:
            raise ValueError("PowerSGD: matrix_approximation_rank %r; expected >= 1"
                             % (matrix_approximation_rank,))
        if not min_compression_rate >= 0:
            raise ValueError("PowerSGD: min_compression_rate %r; expected >= 0"
                             % (min_compression_rate,))
        self.rank = int(matrix_approximation_rank)
        self.min_compression_rate = float(min_compression_rate)
        self.seed = int(seed)
        self.start_powerSGD_iter = int(start_powerSGD_iter)
        self._states = {}
        self._steps = {}  # name -> reductions of it so far (compressed or not)

    def state_dict(self):
        """Every compressed gradient's Q, error and generator, and the step
        counts, copied: what a restored job needs to go on as if it had not
        stopped."""
        return {"steps": dict(self._steps),
                "tensors": {name: st.state_dict() for name, st in self._states.items()}}

    def load_state_dict(self, saved):
        self._steps = dict(saved["steps"])
        self._states = {name: _State.from_state_dict(st)
                        for name, st in saved["tensors"].items()}

    def sync_state(self, broadcast_object):
        """After a change of membership (hvd.elastic): every rank takes
        rank 0's Q, generators and step counts, so a worker that joins
        compresses (or not yet) the same tensors as the others and starts
        from the same Q; each rank keeps its own error (a new worker's is
        zero)."""
        saved = self.state_dict()
        errors = {name: st.pop("error") for name, st in saved["tensors"].items()}
        shared = broadcast_object(saved, name="hvd.powersgd.state")
        for name, st in shared["tensors"].items():
            st["error"] = errors.get(name)  # None: zeros at its next step
        self.load_state_dict(shared)

    def reduce_async(self, tensor, name, process_set):
        """Starts the reduction of `tensor` (named as on every rank), or
        returns None when it goes uncompressed."""
        if tensor.dim() < 2 or not tensor.dtype.is_floating_point:
            return None
        rows, cols = tensor.shape[0], tensor.numel() // tensor.shape[0]
        r = min(rows, cols, self.rank)
        if (rows + cols) * r * self.min_compression_rate >= rows * cols:
            return None
        step = self._steps.get(name, 0)
        self._steps[name] = step + 1
        if step < self.start_powerSGD_iter:
            return None  # the optimizer's ordinary allreduce, as torch's hook
        state = self._states.get(name)
        if state is None:
            # every rank derives the same seed from the run's seed and the name
            state = _State(rows, cols, r, self.seed * 1000003 + zlib.crc32(name.encode()))
            self._states[name] = state
        if state.q.shape != (cols, r):
            raise ValueError("PowerSGD: %s: the loaded Q is %s; expected %s (a state saved "
                             "with another matrix_approximation_rank or model?)"
                             % (name, tuple(state.q.shape), (cols, r)))
        if state.error is None or state.error.shape != (rows, cols):
            state.error = torch.zeros(rows, cols)  # joined an elastic job: none kept yet
        m = tensor.detach().reshape(rows, cols).float() + state.error
        state.renormalize_q()
        p = torch.matmul(m, state.q)
        return _Handle(tensor, state, m, p, name, process_set)


# hvd.Compression.powersgd(...) too, beside Compression.none and .fp16 (set here
# so that compression.py, imported by mpi_ops, needs no import of this file)
Compression.powersgd = PowerSGD
