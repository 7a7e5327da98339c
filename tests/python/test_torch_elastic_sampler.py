"""hvd.elastic.ElasticSampler against horovod.torch.elastic.ElasticSampler's
behaviour: its public attributes, processed_num counted by record_batch,
len() after a partial epoch, after restore and after sync (also a sync of
ranks that all hold the same commit), the processed
samples never dealt again and the rest re-split over the workers;
record_indices (Horovod's earlier API) and set_epoch.

The reference is written here from Horovod's documented rule: the epoch's
order is range(N) shuffled by random.Random(seed + epoch); what is left is
order[processed_num:], padded by repeating its head to a multiple of the
workers, and worker r takes positions r, r + size, ..."""
import math
import random

import pytest

import hvd.torch as hvd

N = 23


def order(seed, epoch, shuffle=True):
    idx = list(range(N))
    if shuffle:
        random.Random(seed + epoch).shuffle(idx)
    return idx


def dealt(left, n, r):
    """Worker r's share of `left` among n workers, padded as Horovod does."""
    total = math.ceil(len(left) / n) * n
    padded = list(left)
    while left and len(padded) < total:
        padded += left[:total - len(padded)]
    return padded[r:total:n]


def everyone(value, name):
    return hvd.allgather_object(value, name="sampler.%s" % name)


@pytest.mark.parametrize("shuffle", [False, True])
def test_fresh_sampler_is_horovods(shuffle):
    n, me = hvd.size(), hvd.rank()
    s = hvd.elastic.ElasticSampler(list(range(N)), shuffle=shuffle, seed=7)
    assert (s.epoch, s.processed_num, s.num_replicas, s.rank) == (0, 0, n, me)
    assert (s.shuffle, s.seed, s.dataset) == (shuffle, 7, list(range(N)))
    assert s.remaining_indices == order(7, 0, shuffle)
    assert len(s) == s.num_samples == math.ceil(N / n) and s.total_size == s.num_samples * n
    assert list(s) == dealt(order(7, 0, shuffle), n, me) == s.indices


def test_partial_epoch_restore_and_sync():
    """Three batches of 2 on every worker, committed; one more recorded and
    then lost by a restore: the epoch resumes after the committed ones,
    split over the workers, none of the processed ones dealt again.  A
    sync makes every worker take rank 0's count."""
    n, me = hvd.size(), hvd.rank()
    s = hvd.elastic.ElasticSampler(list(range(N)), seed=3)
    state = hvd.elastic.TorchState(sampler=s, batch=0)
    first = list(s)
    for b in range(3):
        s.record_batch(b, 2)
    assert s.processed_num == 3 * 2 * n
    assert len(s) == math.ceil(N / n)  # Horovod: len changes at the next reset only
    state.commit()
    s.record_batch(3, 2)  # lost: not committed
    state.restore()
    done = min(6 * n, N)
    assert s.processed_num == 6 * n
    assert len(s) == math.ceil((N - done) / n)
    left = list(s)
    assert left == dealt(order(3, 0)[done:], n, me)
    lefts = everyone(left, "left")
    assert set().union(*map(set, lefts)) == set(order(3, 0)[done:])
    # what the workers processed (each one's first 6, before the commit)
    processed = set().union(*map(set, everyone(first[:6], "processed")))
    assert processed == set(order(3, 0)[:done])
    assert not processed & set(left)
    # Workers that (re)joined, with a fresh sampler and nothing committed,
    # take rank 0's state at the sync.
    if me != 0:
        s = hvd.elastic.ElasticSampler(list(range(N)), seed=3)
        state = hvd.elastic.TorchState(sampler=s, batch=0)
    state.sync()
    assert s.processed_num == 6 * n and list(s) == left
    s.set_epoch(1)
    assert (s.epoch, s.processed_num, len(s)) == (1, 0, math.ceil(N / n))
    assert list(s) == dealt(order(3, 1), n, me)


@pytest.mark.parametrize("shuffle", [False, True])
def test_sync_after_a_commit_resplits_the_epoch(shuffle):
    """Issue 48, as Horovod's SamplerStateHandler.sync loads the synced
    state (and so re-splits the epoch): 8 samples per worker, batch size
    2, three batches recorded and committed, then a sync with every rank
    on the same commit: len() is 2, and what is dealt is this worker's
    share of the 2 * n samples not yet processed."""
    n, me = hvd.size(), hvd.rank()
    data = list(range(8 * n))
    s = hvd.elastic.ElasticSampler(data, shuffle=shuffle, seed=5)
    state = hvd.elastic.TorchState(sampler=s, epoch=0)
    idx = list(range(8 * n))
    if shuffle:
        random.Random(5).shuffle(idx)
    for b in range(3):
        s.record_batch(b, 2)
    state.commit()
    state.sync()
    assert len(s) == 2 == s.num_samples
    assert s.remaining_indices == idx[6 * n:]
    mine = list(s)
    assert mine == dealt(idx[6 * n:], n, me)
    assert not set(mine) & set(idx[:6 * n])
    assert sorted(sum(everyone(mine, "resplit.%s" % shuffle), [])) == sorted(idx[6 * n:])


def test_record_indices_are_excluded_on_every_worker_after_a_commit():
    """Horovod's earlier API: each worker marks the indices it processed;
    a commit gathers them from every worker, and after a restore none of
    them is dealt again."""
    n, me = hvd.size(), hvd.rank()
    s = hvd.elastic.ElasticSampler(list(range(N)), shuffle=False)
    state = hvd.elastic.TorchState(sampler=s)
    mine = list(s)[:2]
    s.record_indices(mine)
    state.commit()
    state.restore()
    gone = set().union(*map(set, everyone(mine, "marked")))
    left = [i for i in range(N) if i not in gone]
    assert s.remaining_indices == left
    assert list(s) == dealt(left, n, me) and len(s) == math.ceil(len(left) / n)


def test_horovods_state_dict_loads():
    """A state_dict saved by Horovod (epoch, processed_num) loads."""
    n, me = hvd.size(), hvd.rank()
    s = hvd.elastic.ElasticSampler(list(range(N)), seed=1)
    s.load_state_dict({"epoch": 2, "processed_num": 5})
    assert s.state_dict() == {"epoch": 2, "processed_num": 5, "processed_indices": set()}
    assert list(s) == dealt(order(1, 2)[5:], n, me)
