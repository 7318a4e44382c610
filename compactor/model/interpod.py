"""Existing pods' required anti-affinity: where it keeps other pods out.

kube-scheduler's InterPodAffinity filter is symmetric: an incoming pod may not land
in a topology domain (the nodes sharing the term's ``topologyKey`` value) where an
existing pod has a required anti-affinity term selecting it, even when the incoming
pod has no affinity of its own (``satisfyExistingPodsAntiAffinity``). Every pod
holding such a term stays put in a plan (see ``planner.movability``), so the domains
it closes are fixed facts of the snapshot.

Term matching follows ``framework.AffinityTerm.Matches``: the pod's namespace must be
in the term's namespaces (empty and no ``namespaceSelector``: the holder's own
namespace), and its labels must match the label selector (``null`` selects nothing)
with ``matchLabelKeys``/``mismatchLabelKeys`` applied from the holder's labels.
Snapshots carry no Namespace objects, so a non-empty ``namespaceSelector`` is taken
to select every namespace: the planner may skip a target it could have used, never
propose one the scheduler refuses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from compactor.model.scheduling import label_selector_matches
from compactor.model.types import LabelSelector, Node, Pod, PodAffinityTerm, SelectorRequirement

Domain = tuple[str, str]  # (topology key, value)


@dataclass(frozen=True)
class _Holder:
    term: PodAffinityTerm
    selector: LabelSelector | None  # the term's selector with match/mismatchLabelKeys folded in
    namespace: str
    domain: Domain
    owner: str  # the holding pod, for explanations


def _effective_selector(term: PodAffinityTerm, labels: Mapping[str, str]) -> LabelSelector | None:
    if term.selector is None:
        return None
    extra = [SelectorRequirement(k, "In", (labels[k],)) for k in term.match_label_keys if k in labels]
    extra += [SelectorRequirement(k, "NotIn", (labels[k],)) for k in term.mismatch_label_keys if k in labels]
    if not extra:
        return term.selector
    return replace(term.selector, match_expressions=(*term.selector.match_expressions, *extra))


def _namespace_matches(holder: _Holder, namespace: str) -> bool:
    term = holder.term
    if term.namespace_selector is not None:
        return True  # empty selector: every namespace; otherwise unknown labels, assumed to match (see module doc)
    return namespace in (term.namespaces or (holder.namespace,))


class AntiAffinityIndex:
    """Topology domains closed to a pod by the required anti-affinity of bound pods."""

    def __init__(self, pods: Iterable[Pod], nodes: Mapping[str, Node]) -> None:
        self.holders: list[_Holder] = []
        for pod in pods:
            if not pod.is_bound or not pod.affinity.anti_affinity_terms:
                continue
            node = nodes.get(pod.node_name)
            for term in pod.affinity.anti_affinity_terms:
                if node is None or term.topology_key not in node.labels:
                    continue  # the holder's node is in no domain of this key: the term closes nothing
                domain = (term.topology_key, node.labels[term.topology_key])
                self.holders.append(
                    _Holder(term, _effective_selector(term, pod.labels), pod.namespace, domain, pod.key)
                )
        self._cache: dict[tuple[str, frozenset[tuple[str, str]]], dict[Domain, str]] = {}

    def closed(self, pod: Pod) -> dict[Domain, str]:
        """Domain -> a pod whose term closes it to ``pod`` (pods with equal namespace and labels share the answer)."""
        key = (pod.namespace, frozenset(pod.labels.items()))
        found = self._cache.get(key)
        if found is None:
            found = {}
            for holder in self.holders:
                if (
                    holder.domain not in found
                    and _namespace_matches(holder, pod.namespace)
                    and label_selector_matches(holder.selector, pod.labels)
                ):
                    found[holder.domain] = holder.owner
            self._cache[key] = found
        return found

    def blocker(self, pod: Pod, node: Node) -> str | None:
        """The pod whose required anti-affinity keeps ``pod`` off ``node``, if any."""
        for (key, value), owner in self.closed(pod).items():
            if node.labels.get(key) == value:
                return owner
        return None
