"""A static-shape PyTorch V-MoE for export to ONNX (bench/engine_peers.py).

`StaticVMoE(net, batch)` wraps a `vmoe_ref.model.VMoE` (its parameters and
dense modules, unchanged) and replaces each token choice MoE layer by a
computation whose every shape is fixed at construction: the batch, the
routing groups G and the capacity B (sized from the capacity ratio given,
default the description's). No data-dependent shape (no nonzero, no
boolean indexing), so torch.onnx.export writes one static graph that ONNX
Runtime, OpenVINO and IREE compile ahead of time. SPEC §3 semantics:

- route: gates = softmax(x·W) over E, then top-k (TopK: ties to the lower
  expert index), weights the raw chosen gates;
- BPR: tokens of a group in descending priority (top-1 gate for `max`, the
  sum of the k largest, largest first, for `sum_topk`; TopK over the S
  scores, ties to the lower token index); vanilla: token order;
- slots: the choices of a group laid out choice-major in priority order; a
  choice's slot is the number of earlier choices of its expert (a
  cumulative sum over one-hot experts); kept iff it is below B;
- dispatch (gather): a [G, E·B] table of token indices is filled by one
  scatter (each kept choice to e·B + slot; dropped choices to their own
  spare columns past E·B, so no index repeats); empty slots hold S, the
  index of an appended zero row; the rows are gathered into [E, G·B, D];
- experts: two batched GEMMs over all E·G·B slots (bias, gelu), i.e. the
  static cost the engines pay whatever the fill;
- combine: each token gathers its k expert rows (a dropped choice reads a
  zero row) and sums weight · row in choice order: the transpose of a
  weighted scatter-add, the same sums as ops.combine.

Only what the benchmark's model needs is supported: token choice layers
with MLP experts, routing vanilla or bpr, score max or sum_topk, order
softmax_topk without normalize; anything else is a ValueError.
"""

import warnings

import torch
from torch import nn

from vmoe_ref import ops
from vmoe_ref.model import (MoE, is_dropless, layer_settings,
                            tokens_per_group)


def _check_layer(layer, block):
    """ValueError unless StaticVMoE supports this MoE layer's settings."""
    supported = {"routing": ("vanilla", "bpr"), "score": ("max", "sum_topk"),
                 "order": ("softmax_topk",), "normalize": (False,),
                 "expert": ("mlp",), "shared_experts": (0,)}
    for key, allowed in supported.items():
        value = layer.get(key, allowed[0])
        if value not in allowed:
            raise ValueError(f"block {block}: moe {key} {value!r} is not "
                             f"supported by the static export (only "
                             f"{', '.join(map(repr, allowed))})")
    if is_dropless(layer):
        raise ValueError(f"block {block}: the dropless mode is not "
                         "supported by the static export")


class ExpertMLPs(nn.Module):
    """The E expert MLPs of `moe` on all slots: [E, R, D] -> [E, R, D]
    (its own module, so that the engines' profiles name these GEMMs
    `.../moe/experts/...`)."""

    def __init__(self, moe, activation):
        super().__init__()
        self.moe = moe
        self.activation = activation

    def forward(self, buffers):
        moe = self.moe
        hidden = ops.activate(
            torch.bmm(buffers, moe.w1) + moe.b1.unsqueeze(1), self.activation)
        return torch.bmm(hidden, moe.w2) + moe.b2.unsqueeze(1)


class StaticMoE(nn.Module):
    """One token choice MoE layer (`moe`, a vmoe_ref MoE) with static
    shapes: x [N, T, D] -> [N, T, D], S tokens per routing group, k
    choices, capacity B."""

    def __init__(self, moe, tokens, k, routing, score, capacity, activation):
        super().__init__()
        self.router = moe.router
        self.experts = ExpertMLPs(moe, activation)
        self.tokens, self.k, self.capacity = tokens, k, capacity
        self.routing, self.score = routing, score

    def forward(self, x):
        N, T, D = x.shape
        S, k, B = self.tokens, self.k, self.capacity
        G = N * T // S
        E = self.router.kernel.shape[1]
        xg = x.reshape(G, S, D)
        gates = torch.softmax(torch.matmul(xg, self.router.kernel), dim=-1)
        weights, ids = torch.topk(gates, k, dim=-1)  # [G, S, k]
        if self.routing == "bpr":
            scores = weights[..., 0]
            for i in range(1, k if self.score == "sum_topk" else 1):
                scores = scores + weights[..., i]
            order = torch.topk(scores, S, dim=-1).indices  # [G, S]
        else:
            order = torch.arange(S).expand(G, S)
        # Choices in dispatch order: choice-major, tokens in priority order.
        ranked = torch.gather(ids, 1, order.unsqueeze(-1).expand(G, S, k))
        sequence = ranked.transpose(1, 2).reshape(G, k * S)
        onehot = (sequence.unsqueeze(-1) == torch.arange(E)).long()
        earlier = onehot.cumsum(1) - onehot
        count = torch.gather(earlier, 2, sequence.unsqueeze(-1)).squeeze(-1)
        kept = count < B
        # Dispatch: token index per slot (S: the zero row), one scatter.
        spare = E * B + torch.arange(k * S).expand(G, k * S)
        target = torch.where(kept, sequence * B + count, spare)
        table = torch.full((G, E * B + k * S), S, dtype=torch.long).scatter(
            1, target, order.repeat(1, k))[:, :E * B]
        rows = (table.reshape(G, E, B).transpose(0, 1)
                + (S + 1) * torch.arange(G).view(1, G, 1))  # [E, G, B]
        padded = torch.cat([xg, xg.new_zeros(G, 1, D)], dim=1).reshape(-1, D)
        y = self.experts(padded[rows.reshape(-1)].reshape(E, G * B, D))
        # Combine: the row of each choice (E*G*B: the zero row), token order.
        where = torch.where(
            kept, sequence * (G * B) + torch.arange(G).view(G, 1) * B + count,
            torch.full_like(count, E * G * B)).reshape(G, k, S)
        where = torch.empty_like(where).scatter(
            2, order.unsqueeze(1).expand(G, k, S), where)
        y_rows = torch.cat([y.reshape(E * G * B, D), y.new_zeros(1, D)])
        out = None
        for i in range(k):
            term = weights[..., i:i + 1] * y_rows[
                where[:, i].reshape(-1)].reshape(G, S, D)
            out = term if out is None else out + term
        return out.reshape(N, T, D)


class StaticBlock(nn.Module):
    """A vmoe_ref Block whose MoE layer is a StaticMoE (shared modules)."""

    def __init__(self, block, moe):
        super().__init__()
        self.ln1, self.attn, self.ln2 = block.ln1, block.attn, block.ln2
        self.moe = moe

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.moe(self.ln2(x))


class StaticVMoE(nn.Module):
    """`net` (a vmoe_ref VMoE, its parameters shared) for `batch` images
    at capacity ratio `capacity_ratio` (default: the description's):
    normalized images [batch, C, H, W] -> logits [batch, classes]."""

    def __init__(self, net, batch, capacity_ratio=None):
        super().__init__()
        desc = net.desc
        self.desc = desc
        # net's modules and parameters, registered here under the same
        # names (they name the exported nodes); net.classify uses them.
        for name in ("embedding", "cls_token", "pos_embedding", "final_ln",
                     "map", "pre_logits", "head"):
            if hasattr(net, name):
                setattr(self, name, getattr(net, name))
        self.patches, self.classify = net.patches, net.classify
        blocks = list(net.blocks)
        if "moe" in desc:
            moe = desc["moe"]
            tokens = tokens_per_group(desc)
            T = net.pos_embedding.shape[0]
            if (batch * T) % tokens:
                raise ValueError(f"batch {batch} does not fill whole "
                                 f"routing groups of {tokens} tokens")
            ratio = moe["capacity_ratio"] if capacity_ratio is None \
                else capacity_ratio
            for i in net.moe_block_ids:
                blocks[i] = StaticBlock(net.blocks[i], self._static_moe(
                    net, i, tokens, ratio))
        self.blocks = nn.ModuleList(blocks)
        # Eval mode for good: torch.onnx.export restores the mode it found,
        # and a vmoe_ref MoE in training mode adds router noise.
        self.eval()

    @staticmethod
    def _static_moe(net, block, tokens, ratio):
        desc = net.desc
        layer = layer_settings(desc, block)
        _check_layer(layer, block)
        if type(net.blocks[block].moe) is not MoE:
            raise ValueError(f"block {block}: only token choice layers "
                             "are supported by the static export")
        k, E = layer["k"], desc["moe"]["num_experts"]
        B = layer.get("capacity") or ops.sized_capacity(
            k, tokens, ratio, E, layer.get("capacity_rule", "round"),
            layer.get("multiple_of", 1))
        return StaticMoE(net.blocks[block].moe, tokens, k, layer["routing"],
                         layer["score"], B, layer["activation"])

    def forward(self, images):
        x = self.embedding(self.patches(images))
        if hasattr(self, "cls_token"):
            x = torch.cat([self.cls_token.expand(x.shape[0], 1, -1), x], 1)
        x = x + self.pos_embedding
        for block in self.blocks:
            x = block(x)
            if isinstance(x, tuple):  # a vmoe_ref Block: (x, None)
                x = x[0]
        return self.classify(x)


def export(module, batch, path, opset=17):
    """Writes `module` (a StaticVMoE) as ONNX: input `images`
    [batch, C, H, W] float32, output `logits`."""
    image = module.desc["image"]
    example = torch.zeros(batch, image["channels"], image["height"],
                          image["width"])
    with torch.no_grad(), warnings.catch_warnings():
        # The tracer's warnings about Python floats and tensor iteration
        # concern shapes, which are static here.
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (example,), path, opset_version=opset,
                          input_names=["images"], output_names=["logits"],
                          do_constant_folding=True)

