"""Many-to-many sequence regression with a GRUCell stepped by hand: inputs unbound along
time, outputs stacked with torch.stack, a LayerNorm + Linear head, masked mean-squared
error for padded steps (masked_fill and a mask sum), AdamW with ReduceLROnPlateau, and
hidden states kept as h.new_zeros(...)."""
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim


class StepwiseGRU(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super(StepwiseGRU, self).__init__()
        self.hidden_size = hidden_size
        self.cell = nn.GRUCell(input_size, hidden_size)
        self.norm = nn.LayerNorm(hidden_size)
        self.out = nn.Linear(hidden_size, output_size)

    def forward(self, x):
        # x: (T, N, D)
        h = x.new_zeros(x.size(1), self.hidden_size)
        outputs = []
        for x_t in x.unbind(0):
            h = self.cell(x_t, h)
            outputs.append(self.out(self.norm(h)))
        return torch.stack(outputs, dim=0)          # (T, N, O)


def make_batch(rng, batch_size=4, max_len=8):
    lengths = rng.integers(3, max_len + 1, size=batch_size)
    x = rng.uniform(-1, 1, size=(max_len, batch_size, 2))
    y = np.cumsum(x[:, :, :1] * x[:, :, 1:], axis=0)            # running sum of products
    mask = np.arange(max_len)[:, None] < lengths[None, :]       # (T, N)
    return torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(mask)


def masked_mse(pred, target, mask):
    err = (pred - target) ** 2
    err = err.masked_fill(~mask.unsqueeze(-1), 0.0)
    return err.sum() / mask.sum()


def main(steps=3, seed=0, init_hook=None):
    torch.manual_seed(seed)
    torch.set_default_dtype(torch.float64)
    rng = np.random.default_rng(seed)
    batches = [make_batch(rng) for _ in range(steps)]
    model = StepwiseGRU(2, 10, 1)
    if init_hook is not None:
        init_hook("model", model)
    optimizer = optim.AdamW(model.parameters(), lr=0.02, weight_decay=0.01)
    scheduler = optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="min", factor=0.5,
                                                     patience=0)
    losses = []
    for x, y, mask in batches:
        model.train()
        optimizer.zero_grad()
        loss = masked_mse(model(x), y, mask)
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            model.eval()
            val_loss = masked_mse(model(x), y, mask)
        scheduler.step(val_loss)
        losses.append(loss.item())
        losses.append(val_loss.item())
        losses.append(optimizer.param_groups[0]["lr"])
    return losses


if __name__ == "__main__":
    print(main(steps=50))
