"""PyTorch reference semantics of the vmoe dialect (see ops.py)."""

from .ops import (ACTIVATIONS, CAPACITY_RULES, PRIORITY_SCORES, ROUTE_ORDERS,
                  activate, bpr_sort, capacity, combine, dispatch, expert_ffn,
                  moe_layer, route, routing_stats, runtime_capacity,
                  sized_capacity)

__all__ = [
    "ACTIVATIONS", "CAPACITY_RULES", "PRIORITY_SCORES", "ROUTE_ORDERS",
    "activate", "bpr_sort", "capacity", "combine", "dispatch", "expert_ffn",
    "moe_layer", "route", "routing_stats", "runtime_capacity",
    "sized_capacity",
]
