#!/usr/bin/env python3
"""Horovod's elastic PyTorch MNIST example, on Fashion-MNIST, with hvd.

Workers may be lost or added while it trains:

    hvdrun -np 4 --min-np 2 --max-np 4 --host-discovery-script ./discover.sh \\
        /usr/bin/python3 examples/torch/elastic_fashion_mnist.py --epochs 2

The model, the optimizer, the sampler (which samples of the epoch are
done) and the epoch and batch are a hvd.elastic.TorchState, committed every
--batches-per-commit batches; when a worker is lost the others go back to
the last commit and go on, and new workers join at the next commit.  It
also runs as a plain job (hvdrun -np 2 ...).  Data as in fashion_mnist.py;
rank 0 prints `test_accuracy=0.NNNN` at the end.
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F
import torch.optim as optim
from torchvision import datasets, transforms

import hvd.torch as hvd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fashion_mnist import SOURCE, Net, metric_average, prepare_data  # noqa: E402

parser = argparse.ArgumentParser(description="Elastic PyTorch Fashion-MNIST Example (hvd)")
parser.add_argument("--batch-size", type=int, default=64, help="input batch size (default: 64)")
parser.add_argument("--test-batch-size", type=int, default=1000,
                    help="input batch size for testing (default: 1000)")
parser.add_argument("--epochs", type=int, default=3, help="epochs to train (default: 3)")
parser.add_argument("--lr", type=float, default=0.01, help="learning rate (default: 0.01)")
parser.add_argument("--momentum", type=float, default=0.5, help="SGD momentum (default: 0.5)")
parser.add_argument("--seed", type=int, default=42, help="random seed (default: 42)")
parser.add_argument("--batches-per-commit", type=int, default=10,
                    help="batches between commits of the state (default: 10)")
parser.add_argument("--log-interval", type=int, default=10,
                    help="batches between progress lines")
parser.add_argument("--data-dir",
                    default=os.environ.get("HVD_EXAMPLE_CACHE",
                                           os.path.expanduser("~/.cache/hvd-examples")),
                    help="where the unpacked dataset is kept (built from %s)" % SOURCE)
parser.add_argument("--source-dir", default=SOURCE, help="the *.gz IDX files")
parser.add_argument("--train-limit", type=int, default=0,
                    help="use only the first N training samples (0: all)")
parser.add_argument("--test-limit", type=int, default=0,
                    help="use only the first N test samples (0: all)")


def main():
    args = parser.parse_args()
    hvd.init()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    root = prepare_data(args.data_dir, args.source_dir)
    transform = transforms.Compose([transforms.ToTensor(),
                                    transforms.Normalize((0.2860,), (0.3530,))])
    train_dataset = datasets.FashionMNIST(root, train=True, download=False, transform=transform)
    test_dataset = datasets.FashionMNIST(root, train=False, download=False, transform=transform)
    if args.train_limit:
        train_dataset = torch.utils.data.Subset(train_dataset, range(args.train_limit))
    if args.test_limit:
        test_dataset = torch.utils.data.Subset(test_dataset, range(args.test_limit))

    # hvd.elastic.ElasticSampler: splits what is left of the epoch over
    # whoever is in the job now.
    train_sampler = hvd.elastic.ElasticSampler(train_dataset, seed=args.seed)
    train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=args.batch_size,
                                               sampler=train_sampler)

    model = Net()
    optimizer = optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=args.momentum)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

    def train(state):
        # Starts where the last commit left the epoch and the batch.
        for state.epoch in range(state.epoch, args.epochs):
            model.train()
            for batch_idx, (data, target) in enumerate(train_loader, state.batch):
                state.batch = batch_idx
                optimizer.zero_grad()
                loss = F.nll_loss(model(data), target)
                loss.backward()
                optimizer.step()
                state.train_sampler.record_batch(batch_idx - state.batch_offset,
                                                 args.batch_size)
                if batch_idx % args.log_interval == 0 and hvd.rank() == 0:
                    print("Train Epoch: %d [batch %d] ranks %d loss %.6f"
                          % (state.epoch + 1, batch_idx, hvd.size(), loss.item()), flush=True)
                if (batch_idx + 1) % args.batches_per_commit == 0:
                    state.batch = batch_idx + 1
                    state.commit()
            # The epoch is done: the next starts from its first batch.
            state.batch = 0
            state.batch_offset = 0
            state.train_sampler.set_epoch(state.epoch + 1)
            state.commit()

    def test():
        model.eval()
        total = correct = 0
        test_loss = 0.0
        me, n = hvd.rank(), hvd.size()
        subset = torch.utils.data.Subset(test_dataset, range(me, len(test_dataset), n))
        with torch.no_grad():
            for data, target in torch.utils.data.DataLoader(subset,
                                                            batch_size=args.test_batch_size):
                output = model(data)
                test_loss += F.nll_loss(output, target, reduction="sum").item()
                correct += output.argmax(1).eq(target).sum().item()
                total += len(target)
        # Sums over the ranks: exact whatever the job's size.
        sums = hvd.allreduce(torch.tensor([test_loss, correct, total], dtype=torch.float64),
                             op=hvd.Sum, name="test.sums")
        return (sums[1] / sums[2]).item()

    def on_reset():
        # The learning rate follows the job's size, as in Horovod's example.
        for group in optimizer.param_groups:
            group["lr"] = args.lr * hvd.size()
        # The loader's sampler now yields only the rest of the epoch: its
        # batches count from 0 again, the state's from state.batch.
        state.batch_offset = state.batch

    state = hvd.elastic.TorchState(model=model, optimizer=optimizer,
                                   train_sampler=train_sampler, epoch=0, batch=0,
                                   batch_offset=0)
    state.register_reset_callbacks([on_reset])

    @hvd.elastic.run
    def run(state):
        train(state)
        return test()

    accuracy = run(state)
    if hvd.rank() == 0:
        print("test_accuracy=%.4f" % accuracy, flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
