"""The adding problem (Hochreiter and Schmidhuber) with an Elman RNN: each input step holds a
random number and a 0/1 marker, the target is the sum of the two marked numbers. Batches come
batch-first from a DataLoader and are transposed to the (T, N, D) layout an nn.RNN reads by
default; the last output goes through a Linear layer. F.mse_loss, clip_grad_value_, SGD with
Nesterov momentum, and an evaluation under torch.no_grad()."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset


def adding_data(n, seq_len, rng):
    values = rng.uniform(0, 1, size=(n, seq_len))
    markers = np.zeros((n, seq_len))
    for k in range(n):
        i, j = rng.choice(seq_len, size=2, replace=False)
        markers[k, i] = markers[k, j] = 1.0
    x = np.stack([values, markers], axis=2)            # (N, T, 2)
    y = (values * markers).sum(axis=1, keepdims=True)  # (N, 1)
    return torch.from_numpy(x), torch.from_numpy(y)


class ElmanAdder(nn.Module):
    def __init__(self, input_size=2, hidden_size=16):
        super().__init__()
        self.rnn = nn.RNN(input_size, hidden_size, nonlinearity="tanh")
        self.fc = nn.Linear(hidden_size, 1)

    def forward(self, x):
        x = x.transpose(0, 1).contiguous()             # (N, T, D) -> (T, N, D)
        h0 = torch.zeros(1, x.size(1), self.rnn.hidden_size, dtype=x.dtype)
        out, hn = self.rnn(x, h0)
        return self.fc(out[-1])


def main(steps=3, seed=0, init_hook=None):
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    x_train, y_train = adding_data(32, 10, rng)
    x_test, y_test = adding_data(8, 10, rng)
    loader = DataLoader(TensorDataset(x_train, y_train), batch_size=8, drop_last=True)

    model = ElmanAdder().double()
    if init_hook is not None:
        init_hook("model", model)
    optimizer = optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)

    losses = []
    step = 0
    while step < steps:
        for xb, yb in loader:
            pred = model(xb)
            loss = F.mse_loss(pred, yb)
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_value_(model.parameters(), clip_value=1.0)
            optimizer.step()
            losses.append(loss.item())
            step += 1
            if step == steps:
                break

    model.eval()
    with torch.no_grad():
        pred = model(x_test)
        losses.append(F.mse_loss(pred, y_test).item())
        losses.append(F.l1_loss(pred, y_test, reduction="sum").item())
    return losses


if __name__ == "__main__":
    print(main(steps=200))
