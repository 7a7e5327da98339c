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
    and call record_batch() after each batch and set_epoch() at the END of
    each epoch; after a restore, a sync or a change of membership the
    indices not yet processed are split over the workers of the job.

    As Horovod's: the epoch's order is the dataset's indices, shuffled
    (when shuffle) by random.Random(seed + epoch), the same on every worker;
    `processed_num` counts the samples of that order the whole job has
    processed (record_batch(batch_idx, batch_size) adds batch_size times
    the number of workers, as every worker takes every num_replicas-th
    index of what is left, so the processed ones are a prefix of it);
    `remaining_indices` is the rest, padded by repeating its head to a
    multiple of the workers and dealt out rank, rank + num_replicas, ...
    record_indices(indices) (Horovod's earlier API) marks indices
    processed one by one instead; both count.

    Attributes as Horovod's: dataset, shuffle, seed, epoch, num_replicas,
    rank, processed_num, processed_indices, remaining_indices, num_samples
    (= len(sampler)), total_size, indices (this worker's, after iter())."""

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_num = 0
        self.processed_indices = set()
        self.num_replicas = 0
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
        self.processed_num = 0
        self.processed_indices = set()
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """Counts one batch of batch_size samples on every worker as
        processed (Horovod's: batch_idx is not used)."""
        self.processed_num += batch_size * self.num_replicas

    def record_indices(self, indices):
        """Marks these dataset indices as processed."""
        self.processed_indices.update(int(i) for i in indices)

    def state_dict(self):
        return {"epoch": self.epoch, "processed_num": self.processed_num,
                "processed_indices": set(self.processed_indices)}

    def load_state_dict(self, state_dict):
        """Takes a state_dict() (or Horovod's, which has no
        processed_indices) and splits what is left over this job."""
        self.epoch = state_dict["epoch"]
        self.processed_num = state_dict.get("processed_num", 0)
        self.processed_indices = set(state_dict.get("processed_indices", ()))
        self.reset()

    def reset(self):
        """Splits what is left of the epoch over the current workers."""
        self.num_replicas = size()
        self.rank = rank()
        order = list(range(len(self.dataset)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(order)
        self.remaining_indices = [i for i in order[self.processed_num:]
                                  if i not in self.processed_indices]
        self.num_samples = int(math.ceil(len(self.remaining_indices) / self.num_replicas))
        self.total_size = self.num_samples * self.num_replicas
        self.indices = self._deal()

    def _deal(self):
        # Pad by repeating indices so that every worker gets as many.
        padded = list(self.remaining_indices)
        while self.remaining_indices and len(padded) < self.total_size:
            padded += self.remaining_indices[:self.total_size - len(padded)]
        return padded[self.rank:self.total_size:self.num_replicas]

    def __iter__(self):
        self.indices = self._deal()
        return iter(self.indices)

    def __len__(self):
        return self.num_samples
