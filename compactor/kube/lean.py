"""Lean objects: what the API server sends, less the bulky fields no decision reads.

A pod as the API server sends it is mostly bookkeeping: ``metadata.managedFields`` (a field
map of every writer), the ``kubectl apply`` copy of the whole manifest, each container's
environment, command line, probes and mounts, and the kubelet's account of every container's
past. A realistic pod is about 20 KB of JSON and several times that as Python dicts; held for
50,000 pods it is gigabytes, more than the controller's memory limit, and an out-of-memory
kill after fencing repeats at the same point on every resumed run. Every list and get of
pods and nodes in ``compactor.kube`` (``read.py``, ``nodes.py``, ``pods.py``) therefore drops
these fields from each object as its page arrives, so a page's bulk is garbage before the
next page is read.

A blacklist, not a whitelist: the executor hands these dicts to code that reads many fields
(``compactor.model.parse`` through ``compactor.model.schema``, ``compactor.actions``), and
some it writes back (a pod's tolerations, whole, in a merge patch; a node's taints); a
whitelist that missed one would break them silently. Each field dropped, and why no decision
needs it (``tests/integration/executor/test_lean_reads.py`` checks that the model, the schema and the
executor's readers see the same pod and node with and without them, and that no module of
``compactor`` names one of them):

* ``metadata.managedFields``, every kind: server-side-apply ownership; the compactor never
  applies, it sends merge patches and creates.
* ``metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]``, every kind:
  a copy of the manifest last ``kubectl apply``-ed, for kubectl's three-way merge; the live
  fields are the ones read. Other annotations stay (the model and the steering read them).
* Pod containers (``spec.containers``, ``spec.initContainers``, ``spec.ephemeralContainers``):
  ``env``, ``envFrom``, ``command``, ``args``, ``volumeMounts``, ``volumeDevices``,
  ``livenessProbe``, ``readinessProbe``, ``startupProbe``, ``lifecycle``. The scheduler's
  view of a container is its ``resources``, ``ports`` (host ports) and ``restartPolicy``
  (sidecars), which stay with ``name`` and ``image``. Volumes are decided by ``spec.volumes``,
  which stays whole; a mount only says where a volume appears inside the container.
* Pod ``status.containerStatuses`` (and ``initContainerStatuses``,
  ``ephemeralContainerStatuses``): each entry's ``state``, ``lastState``, ``volumeMounts``,
  ``user`` and ``allocatedResourcesStatus``: the kubelet's report of what each container runs
  or ran (a crash's last message among them). Readiness is read from ``status.conditions``;
  the entries' ``name``, ``ready``, ``restartCount``, ``image`` and allocated ``resources``
  stay.
* Pod ``spec.volumes``: the contents of ``configMap``, ``secret``, ``downwardAPI`` and
  ``projected`` volume sources (every pod's service-account token volume is one: three nested
  sources), which become ``{}``; the volume's name and the source's key stay, so its type is
  still seen. The model reads whether a volume is ``emptyDir``, ``hostPath``, a
  ``persistentVolumeClaim`` or ``ephemeral`` (those stay whole, as does every other source),
  and none of kube-scheduler's volume plugins looks inside these four: they are files the
  kubelet writes into the container, on whichever node it runs.
* Node ``status.images``: the container images cached on the node with their sizes, up to
  50 entries; nothing schedules by image locality here.

Objects are changed in place (they are fresh from the decoder) and returned. Pages decoded
straight into the snapshot schema (``compactor.model.schema``, ``read_cluster(decoded=True)``)
hold only the fields the model reads; ``lean_decoded`` drops the last-applied annotation there,
and the volumes of which the schema read nothing but the name, and shares the string values
thousands of pods repeat.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from compactor.model.schema import KubeObject

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

CONTAINER_FIELDS = (
    "env",
    "envFrom",
    "command",
    "args",
    "volumeMounts",
    "volumeDevices",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
)
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
CONTAINER_STATUS_FIELDS = ("state", "lastState", "volumeMounts", "user", "allocatedResourcesStatus")
CONTAINER_STATUS_LISTS = ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses")
NODE_STATUS_FIELDS = ("images",)
FILE_VOLUME_SOURCES = ("configMap", "secret", "downwardAPI", "projected")

Obj = dict[str, Any]


def lean(obj: Obj, kind: str | None = None) -> Obj:
    """``obj`` (of ``kind``, else its own ``kind``) without the fields above; anything not shaped as expected is left as it is."""
    kind = kind or obj.get("kind")
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
        annotations = meta.get("annotations")
        if isinstance(annotations, dict):
            annotations.pop(LAST_APPLIED, None)
    if kind == "Pod":
        _lean_entries(obj.get("spec"), CONTAINER_LISTS, CONTAINER_FIELDS)
        _lean_entries(obj.get("status"), CONTAINER_STATUS_LISTS, CONTAINER_STATUS_FIELDS)
        _lean_volumes(obj.get("spec"))
    elif kind == "Node":
        status = obj.get("status")
        if isinstance(status, dict):
            for name in NODE_STATUS_FIELDS:
                status.pop(name, None)
    return obj


def _lean_volumes(spec: Any) -> None:
    volumes = spec.get("volumes") if isinstance(spec, dict) else None
    for volume in volumes if isinstance(volumes, list) else ():
        if isinstance(volume, dict):
            for source in FILE_VOLUME_SOURCES:
                if isinstance(volume.get(source), dict):
                    volume[source] = {}


def _lean_entries(section: Any, lists: tuple[str, ...], fields: tuple[str, ...]) -> None:
    if not isinstance(section, dict):
        return
    for list_name in lists:
        entries = section.get(list_name)
        if not isinstance(entries, list):
            continue
        for entry in entries:
            if isinstance(entry, dict):
                for name in fields:
                    entry.pop(name, None)


def lean_decoded(obj: KubeObject) -> KubeObject:
    """An object decoded into the snapshot schema holds only the fields the model reads already. Of those, the annotations
    lose the last-applied manifest (as large as the pod's manifest), and ``spec.volumes`` the volumes in which the schema
    found nothing but a name (configMap, secret, projected, ...: the model asks of a volume only whether it is one of the
    kinds the schema names, ``emptyDir``, ``hostPath``, ``persistentVolumeClaim``, ``ephemeral``, which stay)."""
    meta = obj.metadata
    if meta is not None and meta.annotations:
        meta.annotations.pop(LAST_APPLIED, None)
    spec = obj.spec
    if spec is not None and spec.volumes:
        spec.volumes = [
            v for v in spec.volumes if any(getattr(v, f) is not None for f in v.__struct_fields__ if f != "name")
        ] or None
    _share_values(obj)
    return obj


_intern = sys.intern


def _share_values(obj: KubeObject) -> None:
    """One string object for each value that 50,000 pods repeat (namespaces, node names, phases, condition types and
    statuses, label values, resource quantities) where the decoder makes one per pod: 5 KB less per ten pods, and
    the model keeps several of them. Interned strings are equal to the ones they replace; nothing else changes."""
    meta, spec, status = obj.metadata, obj.spec, obj.status
    if meta is not None:
        if meta.namespace:
            meta.namespace = _intern(meta.namespace)
        _share_dict_values(meta.labels)
    if spec is not None:
        if spec.node_name:
            spec.node_name = _intern(spec.node_name)
        if spec.scheduler_name:
            spec.scheduler_name = _intern(spec.scheduler_name)
        if spec.priority_class_name:
            spec.priority_class_name = _intern(spec.priority_class_name)
        for container in (*(spec.containers or ()), *(spec.init_containers or ())):
            if container.resources is not None:
                _share_dict_values(container.resources.requests)
                _share_dict_values(container.resources.limits)
    if status is not None:
        if status.phase:
            status.phase = _intern(status.phase)
        for condition in status.conditions or ():
            if condition.type:
                condition.type = _intern(condition.type)
            if condition.status:
                condition.status = _intern(condition.status)


def _share_dict_values(values: dict[str, Any] | None) -> None:
    if not values:
        return
    for key, value in values.items():
        if type(value) is str:
            values[key] = _intern(value)  # an existing key: the dict does not change size while iterated
