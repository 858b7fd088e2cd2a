"""A GRU sentiment classifier over padded token ids, batched by a DataLoader: a custom
Dataset, a collate_fn that pads, an Embedding with padding_idx, a bidirectional GRU whose
final forward and backward states are concatenated, CrossEntropyLoss, Adam, model.train()
and model.eval(), and accuracy from argmax under torch.no_grad()."""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset, Subset

PAD = 0
POSITIVE, NEGATIVE = [2, 3, 4], [5, 6, 7]
NEUTRAL = [8, 9, 10, 11]
VOCAB_SIZE = 12


class ReviewDataset(Dataset):
    """Reviews of 3-8 tokens; the label says whether positive words outnumber negative."""

    def __init__(self, n, rng):
        self.reviews, self.labels = [], []
        for _ in range(n):
            length = int(rng.integers(3, 9))
            words = rng.choice(POSITIVE + NEGATIVE + NEUTRAL, size=length)
            score = np.isin(words, POSITIVE).sum() - np.isin(words, NEGATIVE).sum()
            self.reviews.append(words.tolist())
            self.labels.append(int(score > 0))

    def __len__(self):
        return len(self.reviews)

    def __getitem__(self, idx):
        return self.reviews[idx], self.labels[idx]


def pad_collate(batch):
    lengths = [len(review) for review, _ in batch]
    padded = torch.zeros(len(batch), max(lengths), dtype=torch.long)
    for i, (review, _) in enumerate(batch):
        padded[i, :len(review)] = torch.tensor(review)
    labels = torch.tensor([label for _, label in batch])
    return padded, labels


class GRUClassifier(nn.Module):
    def __init__(self, vocab_size, embed_dim, hidden_dim, num_classes=2):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=PAD)
        self.gru = nn.GRU(embed_dim, hidden_dim, num_layers=1, batch_first=True,
                          bidirectional=True)
        self.fc = nn.Linear(2 * hidden_dim, num_classes)

    def forward(self, x):
        embedded = self.embedding(x)                      # (N, T, E)
        _, hidden = self.gru(embedded)                    # (2, N, H)
        hidden = torch.cat((hidden[-2, :, :], hidden[-1, :, :]), dim=1)
        return self.fc(hidden)


def main(steps=3, seed=0, init_hook=None):
    torch.manual_seed(seed)
    torch.set_default_dtype(torch.float64)
    dataset = ReviewDataset(24, np.random.default_rng(seed))
    # a fixed split (random_split's permutations differ between the two libraries)
    train_set, val_set = Subset(dataset, range(16)), Subset(dataset, range(16, 24))
    # shuffle=False: both libraries must see the same batches (their shuffles differ)
    train_loader = DataLoader(train_set, batch_size=4, shuffle=False, collate_fn=pad_collate)
    val_loader = DataLoader(val_set, batch_size=4, collate_fn=pad_collate)

    model = GRUClassifier(VOCAB_SIZE, 6, 8)
    if init_hook is not None:
        init_hook("model", model)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

    losses = []
    while len(losses) < steps:
        model.train()
        for inputs, labels in train_loader:
            optimizer.zero_grad()
            outputs = model(inputs)
            loss = criterion(outputs, labels)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            if len(losses) == steps:
                break

    model.eval()
    correct, total, val_loss = 0, 0, 0.0
    with torch.no_grad():
        for inputs, labels in val_loader:
            outputs = model(inputs)
            val_loss += criterion(outputs, labels).item() * labels.size(0)
            _, predicted = torch.max(outputs, 1)
            total += labels.size(0)
            correct += (predicted == labels).sum().item()
    losses.append(val_loss / total)
    losses.append(correct / total)
    return losses


if __name__ == "__main__":
    print(main(steps=40))
