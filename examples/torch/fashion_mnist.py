#!/usr/bin/env python3
"""Horovod's PyTorch MNIST example, on Fashion-MNIST, with hvd.

Written as a horovod.torch script with only its import changed:

    hvdrun -np 2 /usr/bin/python3 examples/torch/fashion_mnist.py --epochs 1

The data come from Debian's /usr/share/datasets/fashion-mnist (*.gz IDX
files) through torchvision's FashionMNIST class, which wants
ROOT/FashionMNIST/raw/<uncompressed files>: the files are unpacked once into
--data-dir (default ~/.cache/hvd-examples, or $HVD_EXAMPLE_CACHE); nothing is
downloaded.  Rank 0 prints the final line `test_accuracy=0.NNNN`.
fashion_mnist_spark.py and fashion_mnist_ray.py run its training
(rank_report) as the ranks of hvd.spark.run and hvd.ray.RayExecutor.
"""
import argparse
import gzip
import hashlib
import os
import shutil
import socket
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data.distributed
from torchvision import datasets, transforms

import hvd.torch as hvd

SOURCE = "/usr/share/datasets/fashion-mnist"
FILES = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte",
         "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]

parser = argparse.ArgumentParser(description="PyTorch Fashion-MNIST Example (hvd)")
parser.add_argument("--batch-size", type=int, default=64, metavar="N",
                    help="input batch size for training (default: 64)")
parser.add_argument("--test-batch-size", type=int, default=1000, metavar="N",
                    help="input batch size for testing (default: 1000)")
parser.add_argument("--epochs", type=int, default=10, metavar="N",
                    help="number of epochs to train (default: 10)")
parser.add_argument("--lr", type=float, default=0.01, metavar="LR",
                    help="learning rate (default: 0.01)")
parser.add_argument("--momentum", type=float, default=0.5, metavar="M",
                    help="SGD momentum (default: 0.5)")
parser.add_argument("--seed", type=int, default=42, metavar="S",
                    help="random seed (default: 42)")
parser.add_argument("--log-interval", type=int, default=10, metavar="N",
                    help="how many batches to wait before logging training status")
parser.add_argument("--fp16-allreduce", action="store_true", default=False,
                    help="use fp16 compression during allreduce")
parser.add_argument("--powersgd-rank", type=int, default=0, metavar="R",
                    help="PowerSGD compression at rank R (default: 0, off)")
parser.add_argument("--use-adasum", action="store_true", default=False,
                    help="use adasum algorithm to do reduction")
parser.add_argument("--gradient-predivide-factor", type=float, default=1.0,
                    help="apply gradient predivide factor in optimizer (default: 1.0)")
parser.add_argument("--data-dir",
                    default=os.environ.get("HVD_EXAMPLE_CACHE",
                                           os.path.expanduser("~/.cache/hvd-examples")),
                    help="where the unpacked dataset is kept (built from %s)" % SOURCE)
parser.add_argument("--source-dir", default=SOURCE, help="the *.gz IDX files")
parser.add_argument("--train-limit", type=int, default=0,
                    help="use only the first N training samples (0: all)")
parser.add_argument("--test-limit", type=int, default=0,
                    help="use only the first N test samples (0: all)")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


def prepare_data(root, source):
    """Lays out ROOT/FashionMNIST/raw/<files> as torchvision expects, unpacking
    the Debian files once.  Safe to run in every rank at the same time."""
    raw = os.path.join(root, "FashionMNIST", "raw")
    os.makedirs(raw, exist_ok=True)
    for name in FILES:
        dst = os.path.join(raw, name)
        if os.path.exists(dst):
            continue
        src = os.path.join(source, name + ".gz")
        if not os.path.exists(src):
            raise SystemExit("missing %s (Debian's fashion-mnist data)" % src)
        fd, tmp = tempfile.mkstemp(dir=raw, prefix=name + ".")
        with gzip.open(src, "rb") as fin, os.fdopen(fd, "wb") as fout:
            shutil.copyfileobj(fin, fout)
        os.replace(tmp, dst)  # atomic: concurrent ranks write the same bytes
    return root


def metric_average(val, name):
    tensor = torch.tensor(val)
    avg_tensor = hvd.allreduce(tensor, name=name)
    return avg_tensor.item()


def main(argv=None):
    """Trains and tests; returns the test accuracy (the same on every rank).
    argv: the command line's arguments (hvd.spark and hvd.ray versions pass them)."""
    accuracy, _ = train_and_test(argv)
    return accuracy


def train_and_test(argv=None):
    """main()'s work; returns the test accuracy and the trained model."""
    args = parser.parse_args(argv)

    # Horovod: initialize library.
    hvd.init()
    torch.manual_seed(args.seed)
    # Horovod: limit # of CPU threads to be used per worker.
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

    # Horovod: use DistributedSampler to partition the training data.
    train_sampler = torch.utils.data.distributed.DistributedSampler(
        train_dataset, num_replicas=hvd.size(), rank=hvd.rank())
    train_loader = torch.utils.data.DataLoader(
        train_dataset, batch_size=args.batch_size, sampler=train_sampler)
    # Horovod: use DistributedSampler to partition the test data.
    test_sampler = torch.utils.data.distributed.DistributedSampler(
        test_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=False)
    test_loader = torch.utils.data.DataLoader(test_dataset, batch_size=args.test_batch_size,
                                              sampler=test_sampler)

    model = Net()

    # By default, Adasum doesn't need scaling up learning rate.
    lr_scaler = hvd.size() if not args.use_adasum else 1

    # Horovod: scale learning rate by lr_scaler.
    optimizer = optim.SGD(model.parameters(), lr=args.lr * lr_scaler, momentum=args.momentum)

    # Horovod: broadcast parameters & optimizer state.
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    # Horovod: (optional) compression algorithm.
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    if args.powersgd_rank > 0:
        compression = hvd.PowerSGD(matrix_approximation_rank=args.powersgd_rank, seed=args.seed)

    # Horovod: wrap optimizer with DistributedOptimizer.
    optimizer = hvd.DistributedOptimizer(optimizer,
                                         named_parameters=model.named_parameters(),
                                         compression=compression,
                                         op=hvd.Adasum if args.use_adasum else hvd.Average,
                                         gradient_predivide_factor=args.gradient_predivide_factor)

    def train(epoch):
        model.train()
        # Horovod: set epoch to sampler for shuffling.
        train_sampler.set_epoch(epoch)
        for batch_idx, (data, target) in enumerate(train_loader):
            optimizer.zero_grad()
            output = model(data)
            loss = F.nll_loss(output, target)
            loss.backward()
            optimizer.step()
            if batch_idx % args.log_interval == 0 and hvd.rank() == 0:
                # Horovod: use train_sampler to determine the number of examples in
                # this worker's partition.
                print("Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}".format(
                    epoch, batch_idx * len(data), len(train_sampler),
                    100. * batch_idx / len(train_loader), loss.item()), flush=True)

    def test():
        model.eval()
        test_loss = 0.
        test_accuracy = 0.
        with torch.no_grad():
            for data, target in test_loader:
                output = model(data)
                # sum up batch loss
                test_loss += F.nll_loss(output, target, reduction="sum").item()
                # get the index of the max log-probability
                pred = output.data.max(1, keepdim=True)[1]
                test_accuracy += pred.eq(target.data.view_as(pred)).cpu().float().sum().item()

        # Horovod: use test_sampler to determine the number of examples in
        # this worker's partition.
        test_loss /= len(test_sampler)
        test_accuracy /= len(test_sampler)

        # Horovod: average metric values across workers.
        test_loss = metric_average(test_loss, "avg_loss")
        test_accuracy = metric_average(test_accuracy, "avg_accuracy")

        if hvd.rank() == 0:
            print("\nTest set: Average loss: {:.4f}, Accuracy: {:.2f}%\n".format(
                test_loss, 100. * test_accuracy), flush=True)
        return test_accuracy

    accuracy = 0.0
    for epoch in range(1, args.epochs + 1):
        train(epoch)
        accuracy = test()
    if hvd.rank() == 0:
        print("test_accuracy=%.4f" % accuracy, flush=True)
    hvd.shutdown()
    return accuracy, model


def weights_digest(model):
    """SHA-256 of the model's parameters and buffers, in state_dict order:
    equal on every rank when the allreduces kept the replicas in step."""
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().contiguous().numpy().tobytes())
    return digest.hexdigest()


def rank_report(argv):
    """What a rank of the Spark and Ray versions returns: its host, its test
    accuracy and its final weights' digest."""
    accuracy, model = train_and_test(argv)
    return {"host": socket.gethostname(), "accuracy": accuracy,
            "weights": weights_digest(model)}


def print_reports(reports):
    """The Spark and Ray versions' output: a line per rank (in rank order),
    then the plain example's final line, rank 0's accuracy."""
    for rank, r in enumerate(reports):
        print("rank %d on %s: test_accuracy=%.4f weights_sha256=%s"
              % (rank, r["host"], r["accuracy"], r["weights"]))
    print("test_accuracy=%.4f" % reports[0]["accuracy"], flush=True)


if __name__ == "__main__":
    main()
