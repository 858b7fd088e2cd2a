"""Two causal language models written the way PyTorch programs write them: a temporal
convolutional network in the manner of Bai, Kolter and Koltun's TCN code (Conv1d padded
(k - 1) * dilation on both sides, a Chomp1d that cuts the right-hand padding off, residual
blocks with ReLU and dropout, a 1x1 downsample where the widths differ) and a small
Transformer LM (learned positions, a pre-norm TransformerEncoder with the square subsequent
mask, a tied readout), both trained with Adam and clip_grad_norm_ on a synthetic stream."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Chomp1d(nn.Module):
    def __init__(self, chomp_size):
        super(Chomp1d, self).__init__()
        self.chomp_size = chomp_size

    def forward(self, x):
        return x[:, :, :-self.chomp_size].contiguous()


class TemporalBlock(nn.Module):
    def __init__(self, n_inputs, n_outputs, kernel_size, stride, dilation, padding, dropout=0.2):
        super(TemporalBlock, self).__init__()
        self.conv1 = nn.Conv1d(n_inputs, n_outputs, kernel_size, stride=stride,
                               padding=padding, dilation=dilation)
        self.chomp1 = Chomp1d(padding)
        self.relu1 = nn.ReLU()
        self.dropout1 = nn.Dropout(dropout)
        self.conv2 = nn.Conv1d(n_outputs, n_outputs, kernel_size, stride=stride,
                               padding=padding, dilation=dilation)
        self.chomp2 = Chomp1d(padding)
        self.relu2 = nn.ReLU()
        self.dropout2 = nn.Dropout(dropout)
        self.net = nn.Sequential(self.conv1, self.chomp1, self.relu1, self.dropout1,
                                 self.conv2, self.chomp2, self.relu2, self.dropout2)
        self.downsample = nn.Conv1d(n_inputs, n_outputs, 1) if n_inputs != n_outputs else None
        self.relu = nn.ReLU()
        self.init_weights()

    def init_weights(self):
        self.conv1.weight.data.normal_(0, 0.01)
        self.conv2.weight.data.normal_(0, 0.01)
        if self.downsample is not None:
            self.downsample.weight.data.normal_(0, 0.01)

    def forward(self, x):
        out = self.net(x)
        res = x if self.downsample is None else self.downsample(x)
        return self.relu(out + res)


class TCNLanguageModel(nn.Module):
    def __init__(self, ntoken, emsize, channels, kernel_size=2, dropout=0.0):
        super(TCNLanguageModel, self).__init__()
        self.encoder = nn.Embedding(ntoken, emsize)
        layers = []
        for i, out_channels in enumerate(channels):
            dilation = 2 ** i
            in_channels = emsize if i == 0 else channels[i - 1]
            layers += [TemporalBlock(in_channels, out_channels, kernel_size, stride=1,
                                     dilation=dilation, padding=(kernel_size - 1) * dilation,
                                     dropout=dropout)]
        self.tcn = nn.Sequential(*layers)
        self.decoder = nn.Linear(channels[-1], ntoken)

    def forward(self, input):
        emb = self.encoder(input)                          # (N, T, E)
        y = self.tcn(emb.transpose(1, 2))                  # (N, C, T)
        return self.decoder(y.transpose(1, 2))             # (N, T, V)


class TransformerLanguageModel(nn.Module):
    def __init__(self, ntoken, d_model, nhead, nlayers, max_len):
        super().__init__()
        self.embedding = nn.Embedding(ntoken, d_model)
        self.position = nn.Embedding(max_len, d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=2 * d_model,
                                           dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, nlayers, norm=nn.LayerNorm(d_model),
                                             enable_nested_tensor=False)
        self.decoder = nn.Linear(d_model, ntoken)
        self.decoder.weight = self.embedding.weight

    def forward(self, input):
        T = input.size(1)
        positions = torch.arange(T)
        x = self.embedding(input) + self.position(positions)
        mask = nn.Transformer.generate_square_subsequent_mask(T, dtype=x.dtype)
        return self.decoder(self.encoder(x, mask=mask, is_causal=True))


def windows(stream, rng, batch, length):
    starts = rng.integers(0, len(stream) - length - 1, size=batch)
    x = np.stack([stream[s:s + length] for s in starts])
    y = np.stack([stream[s + 1:s + length + 1] for s in starts])
    return torch.tensor(x), torch.tensor(y)


def main(steps=3, seed=0, init_hook=None):
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    ntoken = 7
    stream = np.tile(np.array([0, 1, 2, 3, 4, 5, 6, 5, 4, 3, 2, 1]), 20).astype(np.int64)
    models = {"tcn": TCNLanguageModel(ntoken, 6, [8, 8], kernel_size=3).double(),
              "transformer": TransformerLanguageModel(ntoken, 8, 2, 2, max_len=16).double()}
    losses = []
    for name, model in models.items():
        if init_hook is not None:
            init_hook(name, model)
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
        model.train()
        for step in range(steps):
            x, y = windows(stream, rng, 4, 12)
            logits = model(x)
            loss = F.cross_entropy(logits.reshape(-1, ntoken), y.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            x, y = windows(stream, rng, 2, 12)
            losses.append(F.cross_entropy(model(x).reshape(-1, ntoken), y.reshape(-1)).item())
    return losses


if __name__ == "__main__":
    print(main(steps=50))
