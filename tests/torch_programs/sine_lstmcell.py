"""Learn sine waves with two stacked LSTMCells, in the way of PyTorch's
time_sequence_prediction example: waves generated with NumPy, the cells stepped by hand over
input.chunk(...) with hidden and cell states made by torch.zeros, outputs stacked, an MSE
loss minimised by LBFGS through a closure, and a prediction of future values under
torch.no_grad()."""
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim


def make_waves(rng, n=6, length=30, period=20.0):
    x = np.empty((n, length), "int64")
    x[:] = np.array(range(length)) + rng.integers(-4 * period, 4 * period, n).reshape(n, 1)
    return np.sin(x / 1.0 / period).astype("float64")


class Sequence(nn.Module):
    def __init__(self, hidden=12):
        super(Sequence, self).__init__()
        self.hidden = hidden
        self.lstm1 = nn.LSTMCell(1, hidden)
        self.lstm2 = nn.LSTMCell(hidden, hidden)
        self.linear = nn.Linear(hidden, 1)

    def forward(self, input, future=0):
        outputs = []
        h_t = torch.zeros(input.size(0), self.hidden, dtype=torch.double)
        c_t = torch.zeros(input.size(0), self.hidden, dtype=torch.double)
        h_t2 = torch.zeros(input.size(0), self.hidden, dtype=torch.double)
        c_t2 = torch.zeros(input.size(0), self.hidden, dtype=torch.double)

        for input_t in input.chunk(input.size(1), dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for i in range(future):  # if we should predict the future
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        outputs = torch.cat(outputs, dim=1)
        return outputs


def main(steps=3, seed=0, init_hook=None):
    np.random.seed(seed)
    torch.manual_seed(seed)
    data = make_waves(np.random.default_rng(seed))
    input = torch.from_numpy(data[2:, :-1])
    target = torch.from_numpy(data[2:, 1:])
    test_input = torch.from_numpy(data[:2, :-1])
    test_target = torch.from_numpy(data[:2, 1:])
    seq = Sequence()
    seq.double()
    if init_hook is not None:
        init_hook("seq", seq)
    criterion = nn.MSELoss()
    # use LBFGS as optimizer since we can load the whole data to train
    optimizer = optim.LBFGS(seq.parameters(), lr=0.8, max_iter=4)
    losses = []
    for i in range(steps):
        def closure():
            optimizer.zero_grad()
            out = seq(input)
            loss = criterion(out, target)
            losses.append(loss.item())
            loss.backward()
            return loss
        optimizer.step(closure)
        # begin to predict, no need to track gradient here
        with torch.no_grad():
            future = 5
            pred = seq(test_input, future=future)
            loss = criterion(pred[:, :-future], test_target)
            losses.append(loss.item())
            y = pred.detach().numpy()
        losses.append(float(np.abs(y[:, -future:]).mean()))
    return losses


if __name__ == "__main__":
    print(main(steps=10))
