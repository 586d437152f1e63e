"""PyTorch reference semantics of the vmoe dialect (see ops.py)."""

from .ops import (ACTIVATIONS, CAPACITY_RULES, PRIORITY_SCORES, ROUTE_ORDERS,
                  activate, bpr_sort, capacity, combine, dispatch, expert_ffn,
                  moe_layer, route, routing_stats, runtime_capacity,
                  sized_capacity)
from .expertchoice import (expert_choice, expert_choice_capacity,
                            expert_choice_experts, expert_choice_layer,
                            expert_choice_stats, experts_per_token)
from .softmoe import default_slots, soft_logits, soft_moe
from .losses import router_losses
from .decoder import decoder_moe_layer, dropless_ratio, expert_swiglu

__all__ = [
    "ACTIVATIONS", "CAPACITY_RULES", "PRIORITY_SCORES", "ROUTE_ORDERS",
    "activate", "bpr_sort", "capacity", "combine", "dispatch", "expert_ffn",
    "moe_layer", "route", "routing_stats", "runtime_capacity",
    "sized_capacity",
    # Other families (SPEC §8).
    "default_slots", "expert_choice", "expert_choice_capacity",
    "expert_choice_experts", "expert_choice_layer", "expert_choice_stats",
    "experts_per_token", "soft_logits", "soft_moe",
    "router_losses", "decoder_moe_layer", "dropless_ratio", "expert_swiglu",
]
