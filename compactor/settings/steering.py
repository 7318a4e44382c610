"""How each replacement is made to land on its planned node: the admission policy, holds on the other nodes, or
neither; how long a steered pod may take to bind; which pods move make-before-break; whether new GPU pods are steered
toward the nodes already in use (``fill_first``, docs/prevention.md) (the ``steering`` group; docs/executor.md,
"Steering")."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from compactor.settings.base import Group

SteeringMode = Literal["auto", "policy", "holds", "off"]


class SteeringSettings(Group):
    mechanism: SteeringMode = Field(
        "auto",
        description="how each replacement is made to bind on its planned node: policy (the MutatingAdmissionPolicy of "
        "manifests/steering pins it; no node touched), holds (the other nodes that could take it are fenced "
        "for a moment), off; auto: policy when installed, else holds (docs/executor.md, Steering)",
    )
    policy_name: str = Field(
        "gpu-compactor-steering",
        min_length=1,
        max_length=253,
        description="name of the steering MutatingAdmissionPolicy, its binding and its parameter "
        "ConfigMap (in state_namespace)",
    )
    make_before_break_selector: dict[str, str] = Field(
        default_factory=dict,
        description="pods with all these labels move "
        "make-before-break (their Deployment surges by one, the old replica goes "
        "once the new one is Ready on its planned node), as do pods annotated "
        'compactor.io/make-before-break: "true"; empty: only those annotated',
    )
    steer_timeout_seconds: float = Field(
        60.0,
        gt=0,
        description="longest a replacement or a placed pending pod may take to bind "
        "once steered; then the run stops and rolls back",
    )
    bind_poll_seconds: float = Field(
        0.2, gt=0, description="poll interval while nodes are held, so holds end soon after the bind"
    )
    fill_first: bool = Field(
        False,
        description="after each real run, label the GPU nodes that run GPU pods and still have GPUs free "
        "compactor.io/fill-first=1, 2 or 3 (3: the fullest), for the fill-first admission policy of "
        "manifests/prevention, which makes new GPU pods prefer them over emptier nodes, whatever the scheduler "
        "profile (docs/prevention.md); false: the labels are removed",
    )
