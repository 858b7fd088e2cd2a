"""A word-level language model in the way of PyTorch's word_language_model example: a corpus
batchified into columns, get_batch windows of bptt steps, an Embedding -> LSTM -> Linear
model with a tied-weights option, repackaged (detached) hidden states between windows,
clip_grad_norm_ and a hand-written SGD step, and perplexity under torch.no_grad()."""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Dictionary(object):
    def __init__(self):
        self.word2idx = {}
        self.idx2word = []

    def add_word(self, word):
        if word not in self.word2idx:
            self.idx2word.append(word)
            self.word2idx[word] = len(self.idx2word) - 1
        return self.word2idx[word]

    def __len__(self):
        return len(self.idx2word)


class Corpus(object):
    """Tokenizes generated sentences into one long LongTensor of ids."""

    def __init__(self, sentences):
        self.dictionary = Dictionary()
        ids = []
        for sentence in sentences:
            for word in sentence.split() + ["<eos>"]:
                ids.append(self.dictionary.add_word(word))
        self.ids = torch.tensor(ids).type(torch.int64)


def make_sentences(rng, n=40):
    subjects, verbs, objects = ["the cat", "a dog", "my bird"], ["sees", "eats"], ["fish", "seeds"]
    return [
        " ".join([subjects[rng.integers(3)], verbs[rng.integers(2)], objects[rng.integers(2)]])
        for _ in range(n)
    ]


class RNNModel(nn.Module):
    """Container module with an encoder, a recurrent module, and a decoder."""

    def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
        super(RNNModel, self).__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        if tie_weights:
            if nhid != ninp:
                raise ValueError("When using the tied flag, nhid must be equal to emsize")
            self.decoder.weight = self.encoder.weight
        self.init_weights()
        self.nhid = nhid
        self.nlayers = nlayers

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output)
        decoded = decoded.view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                weight.new_zeros(self.nlayers, bsz, self.nhid))


def batchify(data, bsz):
    # work out how cleanly we can divide the dataset into bsz parts, trim off the remainder
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    # evenly divide the data across the bsz batches
    data = data.view(bsz, -1).t().contiguous()
    return data


def get_batch(source, i, bptt):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].view(-1)
    return data, target


def repackage_hidden(h):
    """Wraps hidden states in new Tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    else:
        return tuple(repackage_hidden(v) for v in h)


def evaluate(model, criterion, data_source, eval_batch_size, bptt):
    model.eval()
    total_loss = 0.
    hidden = model.init_hidden(eval_batch_size)
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, bptt):
            data, targets = get_batch(data_source, i, bptt)
            output, hidden = model(data, hidden)
            hidden = repackage_hidden(hidden)
            total_loss += len(data) * criterion(output, targets).item()
    return total_loss / (len(data_source) - 1)


def main(steps=3, seed=0, init_hook=None, dropout=0.0):
    torch.manual_seed(seed)
    corpus = Corpus(make_sentences(np.random.default_rng(seed)))
    batch_size, eval_batch_size, bptt, lr, clip = 4, 2, 5, 20.0, 0.25
    train_data = batchify(corpus.ids, batch_size)
    val_data = batchify(corpus.ids[:60], eval_batch_size)
    ntokens = len(corpus.dictionary)
    model = RNNModel(ntokens, 8, 8, 2, dropout, tie_weights=True).double()
    if init_hook is not None:
        init_hook("model", model)
    criterion = nn.NLLLoss()

    losses = []
    model.train()
    hidden = model.init_hidden(batch_size)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, bptt)):
        if batch == steps:
            break
        data, targets = get_batch(train_data, i, bptt)
        # starting each batch, we detach the hidden state from how it was previously produced
        hidden = repackage_hidden(hidden)
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        # clip_grad_norm helps prevent the exploding gradient problem in RNNs / LSTMs
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        losses.append(loss.item())
    val_loss = evaluate(model, criterion, val_data, eval_batch_size, bptt)
    losses.append(val_loss)
    losses.append(math.exp(val_loss))
    return losses


if __name__ == "__main__":
    print(main(steps=20))
