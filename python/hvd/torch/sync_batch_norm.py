"""SyncBatchNorm: batch normalization over the whole job's batch (CPU).

In training, the statistics are those of the batch of every rank of the
process set together: one allreduce of the per-channel sums, sums of
squares and element counts (in float64).  The backward pass reduces the
per-channel sums of the gradient the same way, so the input gradient is
that of batch norm over the global batch; the weight and bias gradients
stay local, as for any parameter (DistributedOptimizer averages them).
Running statistics follow torch's BatchNorm (unbiased variance); eval mode
uses them without communicating.
"""
import torch
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm

from hvd.common.process_sets import global_process_set
from hvd.torch.mpi_ops import Sum, allreduce_

__all__ = ["SyncBatchNorm"]


def _channel_view(t, dim):
    """A (C,) tensor shaped to broadcast over (N, C, ...)."""
    return t.view([1, -1] + [1] * (dim - 2))


class _SyncBatchNormFunction(torch.autograd.Function):

    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, eps, momentum, process_set):
        channels = x.shape[1]
        dims = [0] + list(range(2, x.dim()))
        x64 = x.detach().to(torch.float64)
        count = torch.tensor([x.numel() // channels if channels else 0], dtype=torch.float64)
        stats = torch.cat([x64.sum(dims), (x64 * x64).sum(dims), count])
        allreduce_(stats, op=Sum, process_set=process_set)
        total = stats[-1].item()
        if total <= 1 and running_mean is not None:
            raise ValueError("Expected more than 1 value per channel when training, got input "
                             "size %s" % (list(x.shape),))
        mean = stats[:channels] / total
        var = (stats[channels:2 * channels] / total - mean * mean).clamp_(min=0)
        invstd = torch.rsqrt(var + eps)
        xhat = ((x64 - _channel_view(mean, x.dim())) * _channel_view(invstd, x.dim())).to(x.dtype)
        y = xhat
        if weight is not None:
            y = y * _channel_view(weight.detach(), x.dim())
        if bias is not None:
            y = y + _channel_view(bias.detach(), x.dim())
        if running_mean is not None:
            with torch.no_grad():
                unbiased = var * (total / (total - 1))
                running_mean.mul_(1 - momentum).add_(mean.to(running_mean.dtype), alpha=momentum)
                running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype),
                                                    alpha=momentum)
        ctx.save_for_backward(xhat, weight, invstd)
        ctx.total = total
        ctx.process_set = process_set
        return y

    @staticmethod
    def backward(ctx, dy):
        xhat, weight, invstd = ctx.saved_tensors
        dim = dy.dim()
        dims = [0] + list(range(2, dim))
        dy64, xhat64 = dy.to(torch.float64), xhat.to(torch.float64)
        sum_dy = dy64.sum(dims)
        sum_dy_xhat = (dy64 * xhat64).sum(dims)
        grad_x = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            sums = allreduce_(torch.cat([sum_dy, sum_dy_xhat]), op=Sum,
                              process_set=ctx.process_set)
            channels = sum_dy.numel()
            mean_dy = sums[:channels] / ctx.total
            mean_dy_xhat = sums[channels:] / ctx.total
            scale = invstd if weight is None else invstd * weight.detach().to(torch.float64)
            centered = (dy64 - _channel_view(mean_dy, dim)
                        - xhat64 * _channel_view(mean_dy_xhat, dim))
            grad_x = (centered * _channel_view(scale, dim)).to(dy.dtype)
        if weight is not None and ctx.needs_input_grad[1]:
            grad_weight = sum_dy_xhat.to(weight.dtype)
        if ctx.needs_input_grad[2]:
            grad_bias = sum_dy.to(dy.dtype)
        return grad_x, grad_weight, grad_bias, None, None, None, None, None


class SyncBatchNorm(_BatchNorm):
    """Batch normalization with statistics over every rank's batch.

    Takes torch.nn.BatchNorm*d's arguments (and a process_set: the ranks
    whose batches are normalized together); works on inputs of 2 or more
    dimensions, (N, C, ...)."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_set=global_process_set):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        self.process_set = process_set

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError("expected at least 2D input (got {}D input)".format(input.dim()))

    def forward(self, input):
        self._check_input_dim(input)
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # cumulative moving average, as torch
                momentum = 1.0 / float(self.num_batches_tracked)
        if not self.training and self.track_running_stats:
            return F.batch_norm(input, self.running_mean, self.running_var, self.weight,
                                self.bias, False, 0.0, self.eps)
        # Training, or no running statistics: the batch's (global) ones.
        running = self.training and self.track_running_stats
        return _SyncBatchNormFunction.apply(
            input, self.weight, self.bias, self.running_mean if running else None,
            self.running_var if running else None, self.eps, momentum, self.process_set)
