"""A sequence-to-sequence model with Bahdanau (additive) attention, in the way of the
"translation with a sequence to sequence network and attention" tutorial: a GRU encoder,
an attention decoder fed its previous output (or the target, with teacher forcing), batches
from a DataLoader over a TensorDataset, NLLLoss on log-softmax outputs and Adam. The task is
a toy "translation": reverse a sequence of digits and add one to each."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset

SOS_token = 0
EOS_token = 1
MAX_LENGTH = 6


class EncoderRNN(nn.Module):
    def __init__(self, input_size, hidden_size, dropout_p=0.1):
        super(EncoderRNN, self).__init__()
        self.hidden_size = hidden_size
        self.embedding = nn.Embedding(input_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size, batch_first=True)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, input):
        embedded = self.dropout(self.embedding(input))
        output, hidden = self.gru(embedded)
        return output, hidden


class BahdanauAttention(nn.Module):
    def __init__(self, hidden_size):
        super(BahdanauAttention, self).__init__()
        self.Wa = nn.Linear(hidden_size, hidden_size)
        self.Ua = nn.Linear(hidden_size, hidden_size)
        self.Va = nn.Linear(hidden_size, 1)

    def forward(self, query, keys):
        scores = self.Va(torch.tanh(self.Wa(query) + self.Ua(keys)))
        scores = scores.squeeze(2).unsqueeze(1)
        weights = F.softmax(scores, dim=-1)
        context = torch.bmm(weights, keys)
        return context, weights


class AttnDecoderRNN(nn.Module):
    def __init__(self, hidden_size, output_size, dropout_p=0.1):
        super(AttnDecoderRNN, self).__init__()
        self.embedding = nn.Embedding(output_size, hidden_size)
        self.attention = BahdanauAttention(hidden_size)
        self.gru = nn.GRU(2 * hidden_size, hidden_size, batch_first=True)
        self.out = nn.Linear(hidden_size, output_size)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, encoder_outputs, encoder_hidden, target_tensor=None):
        batch_size = encoder_outputs.size(0)
        decoder_input = torch.empty(batch_size, 1, dtype=torch.long).fill_(SOS_token)
        decoder_hidden = encoder_hidden
        decoder_outputs = []
        attentions = []
        for i in range(MAX_LENGTH):
            decoder_output, decoder_hidden, attn_weights = self.forward_step(
                decoder_input, decoder_hidden, encoder_outputs
            )
            decoder_outputs.append(decoder_output)
            attentions.append(attn_weights)
            if target_tensor is not None:
                # teacher forcing: feed the target as the next input
                decoder_input = target_tensor[:, i].unsqueeze(1)
            else:
                # without teacher forcing: use its own predictions as the next input
                _, topi = decoder_output.topk(1)
                decoder_input = topi.squeeze(-1).detach()
        decoder_outputs = torch.cat(decoder_outputs, dim=1)
        decoder_outputs = F.log_softmax(decoder_outputs, dim=-1)
        attentions = torch.cat(attentions, dim=1)
        return decoder_outputs, decoder_hidden, attentions

    def forward_step(self, input, hidden, encoder_outputs):
        embedded = self.dropout(self.embedding(input))
        query = hidden.permute(1, 0, 2)
        context, attn_weights = self.attention(query, encoder_outputs)
        input_gru = torch.cat((embedded, context), dim=2)
        output, hidden = self.gru(input_gru, hidden)
        output = self.out(output)
        return output, hidden, attn_weights


def make_pairs(rng, n=12, n_words=8):
    """Source digits 2..n_words-2 (length 2-5), target = reversed + 1, then EOS, padded."""
    inputs = np.zeros((n, MAX_LENGTH), dtype=np.int64)
    targets = np.zeros((n, MAX_LENGTH), dtype=np.int64)
    for k in range(n):
        length = rng.integers(2, MAX_LENGTH)
        src = rng.integers(2, n_words - 1, size=length)
        inputs[k, :length], inputs[k, length] = src, EOS_token
        targets[k, :length], targets[k, length] = src[::-1] + 1, EOS_token
    return inputs, targets


def train_epoch(dataloader, encoder, decoder, encoder_optimizer, decoder_optimizer, criterion,
                losses, steps):
    total_loss = 0
    for data in dataloader:
        input_tensor, target_tensor = data
        encoder_optimizer.zero_grad()
        decoder_optimizer.zero_grad()
        encoder_outputs, encoder_hidden = encoder(input_tensor)
        decoder_outputs, _, _ = decoder(encoder_outputs, encoder_hidden, target_tensor)
        loss = criterion(
            decoder_outputs.view(-1, decoder_outputs.size(-1)),
            target_tensor.view(-1)
        )
        loss.backward()
        encoder_optimizer.step()
        decoder_optimizer.step()
        total_loss += loss.item()
        losses.append(loss.item())
        if len(losses) == steps:
            break
    return total_loss / len(dataloader)


def evaluate(encoder, decoder, input_tensor):
    with torch.no_grad():
        encoder_outputs, encoder_hidden = encoder(input_tensor)
        decoder_outputs, decoder_hidden, attentions = decoder(encoder_outputs, encoder_hidden)
        _, topi = decoder_outputs.topk(1)
        decoded_ids = topi.squeeze()
    return decoded_ids, attentions


def main(steps=3, seed=0, init_hook=None, dropout=0.0):
    torch.manual_seed(seed)
    torch.set_default_dtype(torch.float64)
    n_words, hidden_size, batch_size = 8, 10, 4
    inputs, targets = make_pairs(np.random.default_rng(seed), n_words=n_words)
    train_data = TensorDataset(torch.LongTensor(inputs), torch.LongTensor(targets))
    # a fixed order, so that both libraries see the same batches
    train_dataloader = DataLoader(train_data, batch_size=batch_size, shuffle=False)

    encoder = EncoderRNN(n_words, hidden_size, dropout)
    decoder = AttnDecoderRNN(hidden_size, n_words, dropout)
    if init_hook is not None:
        init_hook("encoder", encoder)
        init_hook("decoder", decoder)
    encoder_optimizer = optim.Adam(encoder.parameters(), lr=0.01)
    decoder_optimizer = optim.Adam(decoder.parameters(), lr=0.01)
    criterion = nn.NLLLoss()

    losses = []
    while len(losses) < steps:
        train_epoch(train_dataloader, encoder, decoder, encoder_optimizer, decoder_optimizer,
                    criterion, losses, steps)
    encoder.eval()
    decoder.eval()
    decoded_ids, attentions = evaluate(encoder, decoder, torch.from_numpy(inputs[:4]))
    losses.append(float((decoded_ids == torch.from_numpy(targets[:4])).sum().item()))
    losses.append(attentions.sum(dim=-1).mean().item())
    return losses


if __name__ == "__main__":
    print(main(steps=30))
