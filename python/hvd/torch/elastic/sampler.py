"""ElasticSampler: DistributedSampler's sharding, re-done over the new
number of workers after a change of membership, resuming the epoch where
it stopped (horovod.torch.elastic.ElasticSampler)."""
import math
import random

import torch.utils.data

from hvd.torch.mpi_ops import rank, size

__all__ = ["ElasticSampler"]


class ElasticSampler(torch.utils.data.Sampler):
    """Splits a dataset's indices over the workers, as DistributedSampler,
    and keeps track of those processed this epoch.  Put it in a TorchState
    and call record_batch() (or record_indices()) after each batch and
    set_epoch() at the END of each epoch; after a change of membership the
    indices not yet processed are split over the new workers.

    shuffle: a permutation of the indices per epoch, the same on every
    worker (seed + epoch)."""

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_indices = set()
        self.num_replicas = 1
        self.rank = 0
        self.remaining_indices = []
        self.num_samples = 0
        self.total_size = 0
        self.indices = []
        self.reset()

    def set_epoch(self, epoch):
        """Starts epoch `epoch`: nothing processed yet.  Call it at the end
        of an epoch, so that an interrupted one resumes where it was."""
        self.epoch = epoch
        self.processed_indices = set()
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """Marks this worker's batch number batch_idx (since the last
        reset) of batch_size samples as processed."""
        start = batch_idx * batch_size
        self.record_indices(self.indices[start:start + batch_size])

    def record_indices(self, indices):
        """Marks these dataset indices as processed."""
        self.processed_indices.update(int(i) for i in indices)

    def state_dict(self):
        return {"epoch": self.epoch, "processed_indices": set(self.processed_indices)}

    def load_state_dict(self, state_dict):
        self.epoch = state_dict["epoch"]
        self.processed_indices = set(state_dict["processed_indices"])
        self.reset()

    def reset(self):
        """Splits what is left of the epoch over the current workers."""
        self.num_replicas = size()
        self.rank = rank()
        order = list(range(len(self.dataset)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(order)
        self.remaining_indices = [i for i in order if i not in self.processed_indices]
        self.num_samples = int(math.ceil(len(self.remaining_indices) / self.num_replicas))
        self.total_size = self.num_samples * self.num_replicas
        # Pad by repeating indices so that every worker gets as many.
        padded = list(self.remaining_indices)
        while self.remaining_indices and len(padded) < self.total_size:
            padded += self.remaining_indices[:self.total_size - len(padded)]
        self.indices = padded[self.rank:self.total_size:self.num_replicas]

    def __iter__(self):
        return iter(self.indices)

    def __len__(self):
        return self.num_samples
