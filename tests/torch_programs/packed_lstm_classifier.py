"""A variable-length sequence classifier in the style of many tutorials: a device chosen with
torch.cuda.is_available(), a Dataset of tensors padded by pad_sequence in a collate_fn, an
LSTM over pack_padded_sequence(enforce_sorted=False) and pad_packed_sequence, a parameter
count with numel(), gradient clipping, a checkpoint saved with torch.save and read back with
torch.load, and accuracy from argmax under torch.no_grad()."""
import io

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, Dataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class SequenceDataset(Dataset):
    """Sequences of 2-9 three-dimensional steps; class 1 if their first feature sums above 0."""

    def __init__(self, n, rng):
        self.samples = []
        for _ in range(n):
            length = int(rng.integers(2, 10))
            x = rng.standard_normal((length, 3))
            self.samples.append((torch.tensor(x), int(x[:, 0].sum() > 0)))

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, idx):
        return self.samples[idx]


def collate_batch(batch):
    sequences, labels = zip(*batch)
    lengths = torch.tensor([len(s) for s in sequences])
    padded = nn.utils.rnn.pad_sequence(sequences, batch_first=True)
    return padded, lengths, torch.tensor(labels, dtype=torch.long)


class PackedClassifier(nn.Module):
    def __init__(self, input_dim, hidden_dim, num_classes):
        super().__init__()
        self.lstm = nn.LSTM(input_dim, hidden_dim, batch_first=True)
        self.head = nn.Sequential(nn.Linear(hidden_dim, hidden_dim), nn.ReLU(),
                                  nn.Linear(hidden_dim, num_classes))

    def forward(self, x, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True,
                                                   enforce_sorted=False)
        packed_out, (h_n, c_n) = self.lstm(packed)
        out, out_lengths = nn.utils.rnn.pad_packed_sequence(packed_out, batch_first=True)
        # the last valid output of each sequence equals h_n for a one-layer LSTM
        idx = (out_lengths - 1).view(-1, 1, 1).expand(-1, 1, out.size(2))
        last = out.gather(1, idx).squeeze(1)
        return self.head(last + h_n[-1]) / 2


def main(steps=3, seed=0, init_hook=None):
    torch.manual_seed(seed)
    torch.set_default_dtype(torch.float64)
    rng = np.random.default_rng(seed)
    train_loader = DataLoader(SequenceDataset(20, rng), batch_size=5, collate_fn=collate_batch)
    test_loader = DataLoader(SequenceDataset(10, rng), batch_size=5, collate_fn=collate_batch)

    model = PackedClassifier(3, 8, 2).to(device)
    if init_hook is not None:
        init_hook("model", model)
    n_params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    optimizer = optim.Adam(model.parameters(), lr=0.01, weight_decay=1e-4)

    losses = []
    model.train()
    for epoch in range(steps):
        for x, lengths, y in train_loader:
            x, y = x.to(device), y.to(device)
            logits = model(x, lengths)
            loss = F.cross_entropy(logits, y)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            optimizer.step()
        losses.append(loss.item())

    # save a checkpoint and load it into a fresh model
    buffer = io.BytesIO()
    torch.save({"model": model.state_dict(), "n_params": n_params}, buffer)
    buffer.seek(0)
    checkpoint = torch.load(buffer)
    restored = PackedClassifier(3, 8, 2).to(device)
    restored.load_state_dict(checkpoint["model"])
    restored.eval()

    correct = 0
    with torch.no_grad():
        for x, lengths, y in test_loader:
            probs = F.softmax(restored(x.to(device), lengths), dim=-1)
            preds = torch.argmax(probs, dim=1)
            correct += (preds == y).float().sum().item()
            losses.append(probs[:, 1].mean().item())
    losses.append(correct / len(test_loader.dataset))
    losses.append(float(checkpoint["n_params"]))
    return losses


if __name__ == "__main__":
    print(main(steps=30))
