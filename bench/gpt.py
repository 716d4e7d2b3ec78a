"""The small GPT that the training benches build (``bench/compile_step.py``, ``bench/data_parallel.py``)
and its block (``bench/compile_time.py``): pre-norm blocks of causal ``nn.MultiheadAttention`` and a 4x
GELU MLP, token and learned position embeddings, and the next-token cross-entropy of a batch of ids.
The benches import it from their own folder (or load it by path, in a child run with ``-c``), so it
imports nothing of ``bench/``."""

from __future__ import annotations

from luminal import nn, train


class Block(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False, is_causal=True)[0]
        return x + self.fc2(self.fc1(self.ln2(x)).gelu())


class GPT(nn.Module):
    def __init__(self, vocab: int = 512, seq: int = 64, d: int = 256, heads: int = 4, layers: int = 4):
        super().__init__()
        self.vocab, self.seq = vocab, seq
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.blocks = nn.ModuleList([Block(d, heads) for _ in range(layers)])
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

    def forward(self, ids):
        x = self.tok(ids) + self.pos(ids.graph.arange(ids.shape[1]))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))


def next_token_loss(model: GPT, g):
    """The mean cross-entropy of predicting each next id of the input ``ids`` (``("B", seq)`` int32)."""
    import luminal as lm

    ids = g.input("ids", ("B", model.seq), dtype=lm.int32)
    logits = model(ids)
    return train.cross_entropy(logits[:, :-1].reshape(-1, model.vocab), ids[:, 1:].reshape(-1))
