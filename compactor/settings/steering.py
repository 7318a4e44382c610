"""How each replacement is made to land on its planned node: the admission policy, holds on the other nodes, or
neither, and how long a steered pod may take to bind (``executor`` settings; docs/executor.md, "Steering").

The fields are specified here, each with its default, bounds and meaning; ``ExecutorSettings`` (executor.py)
lays the group out in the YAML's order.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

SteeringMode = Literal["auto", "policy", "holds", "off"]

STEERING: SteeringMode = Field(
    "auto",
    description="how each replacement is made to bind on its planned node: policy (the MutatingAdmissionPolicy of "
    "manifests/steering pins it; no node touched), holds (the other nodes that could take it are fenced "
    "for a moment), off; auto: policy when installed, else holds (docs/executor.md, Steering)",
)
STEERING_NAME: str = Field(
    "gpu-compactor-steering",
    min_length=1,
    max_length=253,
    description="name of the steering MutatingAdmissionPolicy, its binding and its parameter "
    "ConfigMap (in state_namespace)",
)
MAX_HOLDS_PER_MOVE: int = Field(
    25,
    ge=1,
    description="holds: a move that would fence more nodes than this stops the run "
    "there (partial); install the policy for large clusters",
)
STEER_TIMEOUT_SECONDS: float = Field(
    60.0,
    gt=0,
    description="longest a replacement or a placed pending pod may take to bind "
    "once steered; then the run stops and rolls back",
)
BIND_POLL_SECONDS: float = Field(
    0.2, gt=0, description="poll interval while nodes are held, so holds end soon after the bind"
)


def refuse_steer_replacements(data: Any) -> Any:
    """The setting ``executor.steering`` replaced, named with its successor rather than as an unknown key."""
    if isinstance(data, dict) and "steer_replacements" in data:
        raise ValueError(
            "executor.steer_replacements was replaced by executor.steering: auto | policy | holds | off "
            "(steer_replacements: false is steering: off)"
        )
    return data
