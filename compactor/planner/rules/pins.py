"""The compactor's own pins are not a pod's rules: a replacement steered by the policy carries the pin, its owner does not.

The steering admission policy (``manifests/steering``, ``actions/steering/pin.py``) ANDs ``metadata.name In [node]``
into every required node selector term of the replacement it pins, and marks it ``compactor.io/steered-to: node``.
That pod is then bound there, and its pin stays in its spec for as long as it lives, but its owner's template never
had it: the next replacement of this pod, wherever a later plan sends it, is created without it. Read as the pod's own
rule, the pin would make every pod a run has moved unmovable for good. The planner therefore sees bound pods that
carry the mark without the pin it names (one occurrence per term: a template that pinned the same node itself keeps
its own), and plans them like their siblings.

Imports: ``compactor.model`` and ``msgspec`` only.
"""

from __future__ import annotations

from dataclasses import replace

import msgspec

from compactor.model.types import Affinity, NodeSelectorTerm, Pod, SelectorRequirement, Snapshot

STEERED_TO = "compactor.io/steered-to"  # set by the steering policy on each pod it pins: the node
PIN_FIELD = "metadata.name"


def without_own_pins(snapshot: Snapshot) -> Snapshot:
    """``snapshot`` with every bound pod the policy pinned seen without that pin (the same object when none was)."""
    pods = tuple(_unpinned(pod) for pod in snapshot.pods)
    if all(a is b for a, b in zip(pods, snapshot.pods, strict=True)):
        return snapshot
    return replace(snapshot, pods=pods)


def _unpinned(pod: Pod) -> Pod:
    node = pod.annotations.get(STEERED_TO)
    terms = pod.affinity.required_node_terms
    if not node or not pod.is_bound or not terms:
        return pod
    pin = SelectorRequirement(PIN_FIELD, "In", (node,))
    kept: list[NodeSelectorTerm] = []
    for term in terms:
        fields = list(term.match_fields)
        if pin in fields:
            del fields[len(fields) - 1 - fields[::-1].index(pin)]  # the policy appends: its copy is the last
        if term.match_expressions or fields:
            kept.append(NodeSelectorTerm(term.match_expressions, tuple(fields)))
    affinity: Affinity = replace(pod.affinity, required_node_terms=tuple(kept) or None)
    return msgspec.structs.replace(pod, affinity=affinity)
