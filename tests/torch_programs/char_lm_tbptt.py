"""A character-level language model trained with truncated backpropagation through time:
a text stream cut into windows of seq_len characters, a 2-layer LSTM whose (h, c) state is
carried across windows and detached, outputs reshaped to (N*T, V) for CrossEntropyLoss,
clip_grad_norm_, RMSprop with a StepLR schedule, and greedy generation with argmax."""
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

TEXT = "hello world. the quick brown fox jumps over the lazy dog. " * 4


class CharLM(nn.Module):
    def __init__(self, vocab_size, embed_size=8, hidden_size=16, num_layers=2):
        super(CharLM, self).__init__()
        self.embed = nn.Embedding(vocab_size, embed_size)
        self.lstm = nn.LSTM(embed_size, hidden_size, num_layers, batch_first=True)
        self.linear = nn.Linear(hidden_size, vocab_size)
        self.num_layers, self.hidden_size = num_layers, hidden_size

    def forward(self, x, h):
        x = self.embed(x)
        out, (h, c) = self.lstm(x, h)
        # reshape output to (batch_size * sequence_length, hidden_size)
        out = out.reshape(out.size(0) * out.size(1), out.size(2))
        out = self.linear(out)
        return out, (h, c)

    def init_states(self, batch_size):
        return (torch.zeros(self.num_layers, batch_size, self.hidden_size),
                torch.zeros(self.num_layers, batch_size, self.hidden_size))


def detach(states):
    return [state.detach() for state in states]


def main(steps=3, seed=0, init_hook=None):
    torch.manual_seed(seed)
    torch.set_default_dtype(torch.float64)
    chars = sorted(set(TEXT))
    char_to_ix = {ch: i for i, ch in enumerate(chars)}
    ids = torch.tensor([char_to_ix[ch] for ch in TEXT], dtype=torch.int64)
    batch_size, seq_len = 3, 7
    num_batches = ids.size(0) // batch_size
    ids = ids[:num_batches * batch_size].view(batch_size, -1)   # (N, L)

    model = CharLM(len(chars))
    if init_hook is not None:
        init_hook("model", model)
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.RMSprop(model.parameters(), lr=0.01)
    scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)

    losses = []
    states = model.init_states(batch_size)
    for i in range(0, ids.size(1) - seq_len, seq_len):
        if len(losses) == steps:
            break
        inputs = ids[:, i:i + seq_len]
        targets = ids[:, (i + 1):(i + 1) + seq_len]
        # truncated BPTT: keep the state's value, cut its history
        states = detach(states)
        outputs, states = model(inputs, states)
        loss = criterion(outputs, targets.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())

    # greedy generation from "t"
    model.eval()
    with torch.no_grad():
        state = model.init_states(1)
        input = torch.tensor([[char_to_ix["t"]]])
        generated = []
        for _ in range(10):
            output, state = model(input, state)
            prob = torch.softmax(output, dim=1)
            word_id = prob.argmax(dim=1).item()
            input.fill_(word_id)
            generated.append(chars[word_id])
        losses.append(float(prob.max().item()))
    return losses


if __name__ == "__main__":
    print(main(steps=30))
