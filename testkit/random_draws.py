"""A torch model that draws with every random function the parity tools record and replay
(torch2jax_ops/parity/_random.py), each draw on the device of the features: test_random_replay.py
runs it on the CPU, test_parity_on_cuda.py on a GPU. Imports torch."""
import torch
import torch.nn.functional as F


class EveryDraw(torch.nn.Module):
    """Every random function the recorder sees, in one forward, each drawing on the device
    of the features (test_parity_on_cuda.py runs it on a GPU)."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)
        self.drop = torch.nn.Dropout(0.3)
        self.norm = torch.nn.BatchNorm1d(3)

    def forward(self, x):
        h = F.dropout(self.lin(x), p=0.4)                  # torch's default training=True
        h = h[torch.randperm(h.size(0), device=h.device)] + torch.rand_like(h) \
            + 0.1 * torch.randn(h.shape, device=h.device)
        h = h + torch.empty_like(h).uniform_(-1, 1) + torch.empty_like(h).normal_(2.0, 0.5)
        h = h * torch.bernoulli(torch.full_like(h, 0.7)) \
            + torch.randint(0, 5, h.shape, device=h.device)
        h = h + torch.normal(torch.zeros_like(h), torch.ones_like(h)) + torch.normal(h, 0.5)
        h = h + F.dropout1d(h.t(), 0.5).t() + F.dropout2d(h[None, :, :, None], 0.5)[0, :, :, 0]
        h = F.rrelu(h - 1.0, training=True)
        return self.drop(self.norm(h))
