"""A timm-layout VisionTransformer in PyTorch (our own code, timm's names).

The independent side of the timm importer's tests: `TimmViT` has the
modules and parameter names of timm's VisionTransformer (patch_embed.proj,
cls_token, pos_embed, blocks.N.{norm1, attn.qkv, attn.proj, ls1, norm2,
mlp.fc1, mlp.fc2, ls2}, norm / fc_norm, attn_pool, head) and computes as
timm does, with the variants the importer must handle explicitly: class
token or not, no_embed_class (the position embedding skips the class
token), global_pool token / avg / map (attention pooling, latent query),
fc_norm after pooling instead of norm before it, LayerScale, qkv without
bias, LayerNorm epsilon and exact or tanh GELU. Its state_dict() is what
timm would save; forward() gives the logits to compare with.
"""

import math

import torch
from torch import nn


class _Attention(nn.Module):
    def __init__(self, dim, heads, qkv_bias):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        n, t, d = x.shape
        q, k, v = self.qkv(x).reshape(n, t, 3, self.heads, d // self.heads) \
            .permute(2, 0, 3, 1, 4)
        attn = (q * (d // self.heads) ** -0.5) @ k.transpose(-2, -1)
        x = attn.softmax(-1) @ v
        return self.proj(x.transpose(1, 2).reshape(n, t, d))


class _LayerScale(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * self.gamma


class _Mlp(nn.Module):
    def __init__(self, dim, hidden, gelu):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU(approximate=gelu)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class _Block(nn.Module):
    def __init__(self, dim, heads, hidden, eps, gelu, qkv_bias, layer_scale):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=eps)
        self.attn = _Attention(dim, heads, qkv_bias)
        self.ls1 = _LayerScale(dim) if layer_scale else nn.Identity()
        self.norm2 = nn.LayerNorm(dim, eps=eps)
        self.mlp = _Mlp(dim, hidden, gelu)
        self.ls2 = _LayerScale(dim) if layer_scale else nn.Identity()

    def forward(self, x):
        x = x + self.ls1(self.attn(self.norm1(x)))
        return x + self.ls2(self.mlp(self.norm2(x)))


class _AttentionPoolLatent(nn.Module):
    def __init__(self, dim, heads, hidden, eps, gelu):
        super().__init__()
        self.heads = heads
        self.latent = nn.Parameter(torch.zeros(1, 1, dim))
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(dim, 2 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim, eps=eps)
        self.mlp = _Mlp(dim, hidden, gelu)

    def forward(self, x):
        n, t, d = x.shape
        dh = d // self.heads
        q = self.q(self.latent.expand(n, -1, -1)).reshape(
            n, 1, self.heads, dh).transpose(1, 2)
        k, v = self.kv(x).reshape(n, t, 2, self.heads, dh).permute(
            2, 0, 3, 1, 4)
        x = ((q * dh ** -0.5) @ k.transpose(-2, -1)).softmax(-1) @ v
        x = self.proj(x.transpose(1, 2).reshape(n, 1, d))
        x = x + self.mlp(self.norm(x))
        return x[:, 0]


class TimmViT(nn.Module):
    """timm's VisionTransformer, the parts the importer covers."""

    def __init__(self, *, image_size, patch, channels, dim, depth, heads,
                 hidden, classes, class_token=True, no_embed_class=False,
                 global_pool="token", fc_norm=False, layer_scale=False,
                 qkv_bias=True, eps=1e-6, gelu="none",
                 representation_size=None):
        super().__init__()
        ph, pw = patch
        patches = (image_size[0] // ph) * (image_size[1] // pw)
        self.global_pool = global_pool
        self.no_embed_class = no_embed_class
        self.patch_embed = nn.Module()
        self.patch_embed.proj = nn.Conv2d(channels, dim, (ph, pw), (ph, pw))
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim)) \
            if class_token else None
        positions = patches + (class_token and not no_embed_class)
        self.pos_embed = nn.Parameter(torch.zeros(1, positions, dim))
        self.blocks = nn.ModuleList(
            _Block(dim, heads, hidden, eps, gelu, qkv_bias, layer_scale)
            for _ in range(depth))
        self.norm = nn.Identity() if fc_norm else nn.LayerNorm(dim, eps=eps)
        self.attn_pool = (_AttentionPoolLatent(dim, heads, hidden, eps, gelu)
                          if global_pool == "map" else None)
        self.fc_norm = nn.LayerNorm(dim, eps=eps) if fc_norm \
            else nn.Identity()
        if representation_size:
            self.pre_logits = nn.Sequential()
            self.pre_logits.add_module("fc", nn.Linear(dim,
                                                       representation_size))
            self.pre_logits.add_module("act", nn.Tanh())
        else:
            self.pre_logits = nn.Identity()
        self.head = nn.Linear(representation_size or dim, classes)

    def randomize(self, seed):
        """Every parameter drawn (LayerNorm weights around 1, LayerScale
        gammas around 1, the rest N(0, 1/fan_in) or N(0, 0.1..0.5))."""
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, param in self.named_parameters():
                noise = torch.randn(param.shape, generator=gen)
                if name.endswith("gamma") or (
                        param.dim() == 1 and "norm" in name and
                        name.endswith("weight")):
                    param.copy_(1.0 + 0.1 * noise)
                elif name in ("cls_token", "pos_embed", "attn_pool.latent"):
                    param.copy_(0.5 * noise)
                elif param.dim() >= 2:
                    fan_in = math.prod(param.shape[1:])
                    param.copy_(noise / math.sqrt(fan_in))
                else:
                    param.copy_(0.1 * noise)
        return self

    def forward(self, images):
        x = self.patch_embed.proj(images).flatten(2).transpose(1, 2)
        if self.cls_token is not None:
            cls = self.cls_token.expand(x.shape[0], -1, -1)
            if self.no_embed_class:
                x = torch.cat([cls, x + self.pos_embed], dim=1)
            else:
                x = torch.cat([cls, x], dim=1) + self.pos_embed
        else:
            x = x + self.pos_embed
        for block in self.blocks:
            x = block(x)
        x = self.norm(x)
        if self.attn_pool is not None:
            x = self.attn_pool(x)
        elif self.global_pool == "avg":
            x = x.mean(1)
        else:
            x = x[:, 0]
        x = self.fc_norm(x)
        return self.head(self.pre_logits(x))
