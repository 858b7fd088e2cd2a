"""Part-of-speech tagging with an LSTM, in the way of the "sequence models and LSTM networks"
tutorial: word_to_ix dictionaries, prepare_sequence into a LongTensor, Embedding -> LSTM ->
Linear over each word, log_softmax + NLLLoss, model.zero_grad() and SGD, then tagging
under torch.no_grad() with argmax."""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


def prepare_sequence(seq, to_ix):
    idxs = [to_ix[w] for w in seq]
    return torch.tensor(idxs, dtype=torch.long)


training_data = [
    # tags: DET - determiner; NN - noun; V - verb
    ("The dog ate the apple".split(), ["DET", "NN", "V", "DET", "NN"]),
    ("Everybody read that book".split(), ["NN", "V", "DET", "NN"]),
    ("A cat saw the dog".split(), ["DET", "NN", "V", "DET", "NN"]),
]
tag_to_ix = {"DET": 0, "NN": 1, "V": 2}
ix_to_tag = {v: k for k, v in tag_to_ix.items()}


class LSTMTagger(nn.Module):

    def __init__(self, embedding_dim, hidden_dim, vocab_size, tagset_size):
        super(LSTMTagger, self).__init__()
        self.hidden_dim = hidden_dim
        self.word_embeddings = nn.Embedding(vocab_size, embedding_dim)
        # the LSTM takes word embeddings as inputs, and outputs hidden states
        self.lstm = nn.LSTM(embedding_dim, hidden_dim)
        # the linear layer that maps from hidden state space to tag space
        self.hidden2tag = nn.Linear(hidden_dim, tagset_size)

    def forward(self, sentence):
        embeds = self.word_embeddings(sentence)
        lstm_out, _ = self.lstm(embeds.view(len(sentence), 1, -1))
        tag_space = self.hidden2tag(lstm_out.view(len(sentence), -1))
        tag_scores = F.log_softmax(tag_space, dim=1)
        return tag_scores


def main(steps=3, seed=0, init_hook=None):
    torch.manual_seed(seed)
    torch.set_default_dtype(torch.float64)
    word_to_ix = {}
    for sent, tags in training_data:
        for word in sent:
            if word not in word_to_ix:
                word_to_ix[word] = len(word_to_ix)
    model = LSTMTagger(6, 6, len(word_to_ix), len(tag_to_ix))
    if init_hook is not None:
        init_hook("model", model)
    loss_function = nn.NLLLoss()
    optimizer = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    losses = []
    for epoch in range(steps):
        for sentence, tags in training_data:
            # clear out the gradients accumulated before each instance
            model.zero_grad()
            sentence_in = prepare_sequence(sentence, word_to_ix)
            targets = prepare_sequence(tags, tag_to_ix)
            tag_scores = model(sentence_in)
            loss = loss_function(tag_scores, targets)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())

    # see what the scores are after training
    with torch.no_grad():
        inputs = prepare_sequence(training_data[0][0], word_to_ix)
        tag_scores = model(inputs)
        predicted = tag_scores.argmax(dim=1)
        losses.append(tag_scores.exp().max(1)[0].sum().item())
        tags = [ix_to_tag[i] for i in predicted.tolist()]
        losses.append(float(sum(t == g for t, g in zip(tags, training_data[0][1]))))
    return losses


if __name__ == "__main__":
    print(main(steps=100))
