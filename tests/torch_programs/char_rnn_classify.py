"""Classify names by language with a character RNN built from two Linear layers, in the way
of the "classifying names with a character-level RNN" tutorial: one-hot letters fed one at a
time, LogSoftmax + NLLLoss, and plain SGD written out by hand on p.data."""
import string

import numpy as np
import torch
import torch.nn as nn

ALL_LETTERS = string.ascii_letters + " .,;'"
N_LETTERS = len(ALL_LETTERS)
CATEGORIES = ["Aaric", "Bovish", "Celto"]


def make_names(rng, per_category=4):
    """Made-up names: each category draws its letters from a different part of the alphabet."""
    names = {}
    for k, category in enumerate(CATEGORIES):
        pool = string.ascii_lowercase[k * 8:(k + 1) * 8]
        names[category] = [
            "".join(rng.choice(list(pool), size=rng.integers(3, 7))).capitalize()
            for _ in range(per_category)
        ]
    return names


def letter_to_index(letter):
    return ALL_LETTERS.find(letter)


def line_to_tensor(line):
    """A (len(line), 1, N_LETTERS) one-hot tensor."""
    tensor = torch.zeros(len(line), 1, N_LETTERS)
    for li, letter in enumerate(line):
        tensor[li][0][letter_to_index(letter)] = 1
    return tensor


class RNN(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super(RNN, self).__init__()
        self.hidden_size = hidden_size
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.h2o = nn.Linear(hidden_size, output_size)
        self.softmax = nn.LogSoftmax(dim=1)

    def forward(self, input, hidden):
        combined = torch.cat((input, hidden), 1)
        hidden = torch.tanh(self.i2h(combined))
        output = self.softmax(self.h2o(hidden))
        return output, hidden

    def init_hidden(self):
        return torch.zeros(1, self.hidden_size)


def category_from_output(output):
    top_n, top_i = output.topk(1)
    category_i = top_i[0].item()
    return CATEGORIES[category_i], category_i


def train_one(rnn, criterion, category_tensor, line_tensor, learning_rate):
    hidden = rnn.init_hidden()
    rnn.zero_grad()
    for i in range(line_tensor.size()[0]):
        output, hidden = rnn(line_tensor[i], hidden)
    loss = criterion(output, category_tensor)
    loss.backward()
    # add the parameters' gradients to their values, multiplied by the learning rate
    for p in rnn.parameters():
        p.data.add_(p.grad.data, alpha=-learning_rate)
    return output, loss.item()


def main(steps=3, seed=0, init_hook=None):
    torch.set_default_dtype(torch.float64)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    names = make_names(rng)
    rnn = RNN(N_LETTERS, 16, len(CATEGORIES))
    if init_hook is not None:
        init_hook("rnn", rnn)
    criterion = nn.NLLLoss()
    losses = []
    for step in range(steps):
        category = CATEGORIES[step % len(CATEGORIES)]
        line = names[category][step % len(names[category])]
        category_tensor = torch.tensor([CATEGORIES.index(category)], dtype=torch.long)
        output, loss = train_one(rnn, criterion, category_tensor, line_to_tensor(line), 0.005)
        guess, guess_i = category_from_output(output)
        losses.append(loss)
    # evaluation: average loss over every name, without building a graph
    with torch.no_grad():
        total, correct = 0.0, 0
        for category, lines in names.items():
            target = torch.tensor([CATEGORIES.index(category)], dtype=torch.long)
            for line in lines:
                line_tensor = line_to_tensor(line)
                hidden = rnn.init_hidden()
                for i in range(line_tensor.size(0)):
                    output, hidden = rnn(line_tensor[i], hidden)
                total += criterion(output, target).item()
                correct += int(category_from_output(output)[0] == category)
    losses.append(total / sum(len(v) for v in names.values()))
    losses.append(float(correct))
    return losses


if __name__ == "__main__":
    print(main(steps=200))
