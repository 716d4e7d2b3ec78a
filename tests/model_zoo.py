"""Small real models written once, the way a torch user writes them, and built from either framework.

Each builder takes the framework's module namespace ``nn`` and its tensor namespace ``T`` (``torch``
or ``luminal``), so the luminal model is the torch model's source text with the imports changed; the
state_dict keys agree and the luminal weights load into torch by name (``to_torch``). Used by
tests/train/test_model_zoo.py (quick tier) and tests/train/test_model_zoo_audit.py (full tier).
"""

from __future__ import annotations

import numpy as np
import torch

import luminal as lm
from luminal import nn as lnn


def namespaces(framework: str):
    return (torch.nn, torch) if framework == "torch" else (lnn, lm)


def to_torch(model, tmodel) -> None:
    """Load luminal ``model``'s parameters and buffers into torch's ``tmodel`` by name (strict)."""
    sd = {k: torch.tensor(np.array(v)) for k, v in model.state_dict().items()}
    tsd = tmodel.state_dict()
    for k, v in sd.items():  # luminal counts in int32, torch's num_batches_tracked is int64
        if k in tsd and tsd[k].dtype != v.dtype:
            sd[k] = v.to(tsd[k].dtype)
    tmodel.load_state_dict(sd, strict=True)


def assert_params_close(model, tmodel, rtol, atol, noise_atol=None):
    """Every parameter and buffer of luminal's ``model`` against torch's ``tmodel``, by name.

    ``noise_atol``: the bound for the key part of an attention's fused qkv bias (``in_proj_bias``,
    nanoGPT's ``c_attn.bias``). Its true gradient is
    zero (softmax is unchanged by adding q.b_k to every score of a row), so what either framework
    computes is float rounding, which Adam turns into steps of up to lr each; float32 runs compare it to
    the sum of the learning rates (float64 runs pass None: everything at ``rtol``/``atol``)."""
    tsd = tmodel.state_dict()
    for k, v in model.state_dict().items():
        ours, theirs = np.asarray(v, np.float64), tsd[k].detach().double().numpy()
        if noise_atol is not None and k.endswith(("in_proj_bias", "c_attn.bias")):
            d = len(ours) // 3
            np.testing.assert_allclose(ours[d:2 * d], theirs[d:2 * d], rtol=0, atol=noise_atol, err_msg=k)
            ours, theirs = np.delete(ours, np.s_[d:2 * d]), np.delete(theirs, np.s_[d:2 * d])
        np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=atol, err_msg=k)


# ------------------------------------------------------------------------------------------ models
def vit(framework: str, img=8, patch=4, ch=3, d=16, heads=2, layers=2, ncls=5):
    """A ViT: Conv2d patch embedding, class token and learned positions as Parameters, a pre-norm
    GELU TransformerEncoder (batch_first) with a final LayerNorm, a head on the class token."""
    nn, T = namespaces(framework)

    class ViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch_embed = nn.Conv2d(ch, d, patch, stride=patch)
            n = (img // patch) ** 2
            self.cls_token = nn.Parameter(T.zeros(1, 1, d))
            self.pos_embed = nn.Parameter(T.zeros(1, n + 1, d))
            nn.init.trunc_normal_(self.cls_token, std=0.02)
            nn.init.trunc_normal_(self.pos_embed, std=0.02)
            layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=2 * d, dropout=0.0, activation="gelu",
                                               batch_first=True, norm_first=True)
            self.encoder = nn.TransformerEncoder(layer, layers, norm=nn.LayerNorm(d), enable_nested_tensor=False)
            self.head = nn.Linear(d, ncls)

        def forward(self, x):
            x = self.patch_embed(x).flatten(2).transpose(1, 2)
            cls = self.cls_token.expand(x.shape[0], -1, -1)
            x = T.cat([cls, x], dim=1) + self.pos_embed
            x = self.encoder(x)
            return self.head(x[:, 0])

    return ViT()


def vit_param_groups(model, weight_decay, no_decay_lr=None):
    """The usual AdamW split: no decay on biases, norms and the embeddings (cls/pos tokens); that group
    at its own learning rate when ``no_decay_lr`` is given."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim < 2 or name in ("cls_token", "pos_embed") else decay).append(p)
    rest = {"params": no_decay, "weight_decay": 0.0}
    if no_decay_lr is not None:
        rest["lr"] = no_decay_lr
    return [{"params": decay, "weight_decay": weight_decay}, rest]


def unet(framework: str, cin=2, ncls=3, width=4, p_drop=0.0):
    """A tiny U-Net: conv-BN-ReLU, MaxPool, dropout at the bottom, ConvTranspose2d up, a skip by cat."""
    nn, T = namespaces(framework)

    def block(i, o):
        return nn.Sequential(nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU())

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc1 = block(cin, width)
            self.pool = nn.MaxPool2d(2)
            self.enc2 = block(width, 2 * width)
            self.drop = nn.Dropout(p_drop)
            self.up = nn.ConvTranspose2d(2 * width, width, 2, stride=2)
            self.dec = block(2 * width, width)
            self.out = nn.Conv2d(width, ncls, 1)

        def forward(self, x):
            e1 = self.enc1(x)
            e2 = self.drop(self.enc2(self.pool(e1)))
            return self.out(self.dec(T.cat([self.up(e2), e1], dim=1)))

    return UNet()


def char_lm(framework: str, vocab=11, d=12, padding_idx=None):
    """Embedding -> 2-layer LSTM (batch_first) -> Linear whose weight is the embedding's (tied).
    ``forward(x, hc=None)`` returns (logits, (h_n, c_n)): truncated BPTT carries the state."""
    nn, T = namespaces(framework)

    class CharLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(vocab, d, padding_idx=padding_idx)
            self.lstm = nn.LSTM(d, d, num_layers=2, batch_first=True)
            self.decoder = nn.Linear(d, vocab)
            self.decoder.weight = self.embedding.weight

        def forward(self, x, hc=None):
            h, hc = self.lstm(self.embedding(x), hc)
            return self.decoder(h), hc

    return CharLM()


def gpt(framework: str, vocab=13, ctx=6, d=16, heads=2, layers=2):
    """GPT blocks: pre-norm MultiheadAttention (causal: block 0 a float mask with is_causal=True, the
    others a bool mask), an MLP, residuals; learned positions, a final LayerNorm, a bias-free head."""
    nn, T = namespaces(framework)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x, mask, is_causal):
            h = self.ln1(x)
            a, _ = self.attn(h, h, h, attn_mask=mask, need_weights=False, is_causal=is_causal)
            x = x + a
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok_emb = nn.Embedding(vocab, d)
            self.pos_emb = nn.Parameter(T.zeros(1, ctx, d))
            nn.init.normal_(self.pos_emb, std=0.02)
            self.blocks = nn.ModuleList([Block() for _ in range(layers)])
            self.ln_f = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)

        def forward(self, idx):
            n = idx.shape[1]
            x = self.tok_emb(idx) + self.pos_emb[:, :n]
            float_mask = nn.Transformer.generate_square_subsequent_mask(n)
            bool_mask = T.triu(T.ones(n, n, dtype=T.bool), diagonal=1)
            for i, block in enumerate(self.blocks):
                x = block(x, float_mask, True) if i == 0 else block(x, bool_mask, False)
            return self.head(self.ln_f(x))

    return GPT()


def nano_gpt(framework: str, vocab=13, ctx=6, d=16, heads=2, layers=2):
    """nanoGPT's model: fused qkv Linear split into heads, a causal mask buffer with masked_fill in
    block 0 and scaled_dot_product_attention(is_causal=True) in the others, positions from arange,
    the embedding tied to the head (``wte.weight = lm_head.weight``), init by ``apply``."""
    nn, T = namespaces(framework)
    F = nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self, flash):
            super().__init__()
            self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.flash = flash
            self.register_buffer("bias", T.tril(T.ones(ctx, ctx)).view(1, 1, ctx, ctx))

        def forward(self, x):
            B, L, C = x.size()
            q, k, v = self.c_attn(x).split(d, dim=2)
            q, k, v = (t.view(B, L, heads, C // heads).transpose(1, 2) for t in (q, k, v))
            if self.flash:
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                att = (q @ k.transpose(-2, -1)) * (1.0 / (k.size(-1) ** 0.5))
                att = att.masked_fill(self.bias[:, :, :L, :L] == 0, float("-inf"))
                y = F.softmax(att, dim=-1) @ v
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, L, C))

    class Block(nn.Module):
        def __init__(self, flash):
            super().__init__()
            self.ln_1, self.attn = nn.LayerNorm(d), CausalSelfAttention(flash)
            self.ln_2 = nn.LayerNorm(d)
            self.mlp = nn.ModuleDict(dict(c_fc=nn.Linear(d, 4 * d), c_proj=nn.Linear(4 * d, d)))

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(vocab, d), wpe=nn.Embedding(ctx, d),
                h=nn.ModuleList([Block(i > 0) for i in range(layers)]), ln_f=nn.LayerNorm(d)))
            self.lm_head = nn.Linear(d, vocab, bias=False)
            self.transformer.wte.weight = self.lm_head.weight
            self.apply(self._init_weights)

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)

        def forward(self, idx):
            L = idx.size(1)
            pos = T.arange(0, L, dtype=T.long)
            x = self.transformer.wte(idx) + self.transformer.wpe(pos)
            for block in self.transformer.h:
                x = block(x)
            return self.lm_head(self.transformer.ln_f(x))

        def configure_optimizers(self, optim, weight_decay, lr, betas):
            params = {n: p for n, p in self.named_parameters() if p.requires_grad}
            groups = [{"params": [p for p in params.values() if p.dim() >= 2], "weight_decay": weight_decay},
                      {"params": [p for p in params.values() if p.dim() < 2], "weight_decay": 0.0}]
            return optim.AdamW(groups, lr=lr, betas=betas)

    return GPT()
