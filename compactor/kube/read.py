"""Read nodes, pods, PodDisruptionBudgets (and optionally the GPU Operator's mig-parted ConfigMaps) from the live API.

Every list is paginated (``limit`` + ``continue``) so that 10,000-node clusters
load in bounded memory per reply. Replies are fetched with
``_preload_content=False`` and JSON-decoded directly: the result is the raw
object dicts ``kubectl get -o json`` prints (camelCase keys, ``kind`` and
``apiVersion`` set on every item), which is what ``build_snapshot`` parses.

Those dicts are lean: as each page arrives, its items lose the bulk no decision reads
(``managedFields``, the last-applied manifest, containers' env, command, probes and mounts,
container states, a node's cached images; ``compactor.kube.lean`` says why each is safe), so
one page's bulk is released before the next is read and a 50,000-pod list holds only what the
model and the executor use. Decoded pages (``decoded=True``) keep only the schema's fields, and
of the annotations not the last-applied manifest.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, overload

import msgspec
import urllib3
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from compactor.errors import ClusterError
from compactor.kube.lean import lean, lean_decoded
from compactor.model.parse import RawObject
from compactor.model.schema import KubeObject

log = logging.getLogger(__name__)

DEFAULT_PAGE_SIZE = 500
DEFAULT_REQUEST_TIMEOUT = 120.0
_MESSAGE_LIMIT = 300


@dataclass(frozen=True)
class _Listing:
    """One paginated list call: which endpoint, what it yields, how to describe it in errors."""

    call: Callable[..., Any]
    args: tuple[str, ...]
    kind: str
    api_version: str
    what: str
    label_selector: str | None = None
    field_selector: str | None = None
    optional: bool = False  # a kind a cluster may not serve (resource.k8s.io/v1 before Kubernetes 1.34): 404 is none


@overload
def read_cluster(
    api_client: k8s_client.ApiClient,
    *,
    page_size: int = ...,
    namespaces: Sequence[str] | None = ...,
    include_config_maps: bool | str = ...,
    config_map_selector: str | None = ...,
    request_timeout: float | None = ...,
    decoded: Literal[False] = ...,
) -> list[dict[str, Any]]: ...


@overload
def read_cluster(
    api_client: k8s_client.ApiClient,
    *,
    page_size: int = ...,
    namespaces: Sequence[str] | None = ...,
    include_config_maps: bool | str = ...,
    config_map_selector: str | None = ...,
    request_timeout: float | None = ...,
    decoded: Literal[True],
) -> list[RawObject]: ...


def read_cluster(
    api_client: k8s_client.ApiClient,
    *,
    page_size: int = DEFAULT_PAGE_SIZE,
    namespaces: Sequence[str] | None = None,
    include_config_maps: bool | str = False,
    config_map_selector: str | None = None,
    request_timeout: float | None = DEFAULT_REQUEST_TIMEOUT,
    decoded: bool = False,
) -> list[dict[str, Any]] | list[RawObject]:
    """All nodes, pods, PDBs, PersistentVolumes and claims (and ConfigMaps when asked) as raw ``kubectl get -o json`` items.

    ``namespaces``: read pods, PDBs and claims only there; None = all namespaces.
    ``include_config_maps``: False = none; ``"NS"`` = those in namespace NS; ``"NS/NAME"`` = that
    one ConfigMap (absent = none). ConfigMaps are only ever listed in one namespace, the GPU
    Operator's (``mig.operator_namespace``): across namespaces any tenant could label a ConfigMap
    of their own as a mig-parted config, so True (all) is refused. ``config_map_selector`` is a
    label selector further restricting them (e.g. ``app=nvidia-mig-manager``).

    ``decoded``: items come decoded straight into the snapshot schema
    (``compactor.model.schema``), for ``build_snapshot``: only the fields the model
    reads are kept, so the pods of a 10,000-node cluster (``managedFields``, env,
    probes, ...) never sit in memory as dicts. A page that does not fit the schema
    comes as dicts, which ``build_snapshot`` then rejects naming the object and field.

    Raises ``ClusterError`` (one line) when the API is unreachable, refuses the credentials
    or the permission, or replies with something that is not a list.
    """
    if page_size < 1:
        raise ValueError(f"page_size must be at least 1, got {page_size}")
    if isinstance(namespaces, str):
        raise TypeError("namespaces must be a sequence of namespace names, not a string")
    core = k8s_client.CoreV1Api(api_client)
    policy = k8s_client.PolicyV1Api(api_client)
    listings = [
        _Listing(core.list_node, (), "Node", "v1", "nodes"),
        _Listing(core.list_persistent_volume, (), "PersistentVolume", "v1", "persistentvolumes"),
    ]
    if namespaces is None:
        listings.append(_Listing(core.list_pod_for_all_namespaces, (), "Pod", "v1", "pods in all namespaces"))
        listings.append(
            _Listing(
                policy.list_pod_disruption_budget_for_all_namespaces,
                (),
                "PodDisruptionBudget",
                "policy/v1",
                "poddisruptionbudgets in all namespaces",
            )
        )
        listings.append(
            _Listing(
                core.list_persistent_volume_claim_for_all_namespaces,
                (),
                "PersistentVolumeClaim",
                "v1",
                "persistentvolumeclaims in all namespaces",
            )
        )
    else:
        for ns in namespaces:
            listings.append(_Listing(core.list_namespaced_pod, (ns,), "Pod", "v1", f"pods in namespace {ns}"))
        for ns in namespaces:
            listings.append(
                _Listing(
                    policy.list_namespaced_pod_disruption_budget,
                    (ns,),
                    "PodDisruptionBudget",
                    "policy/v1",
                    f"poddisruptionbudgets in namespace {ns}",
                )
            )
        for ns in namespaces:
            listings.append(
                _Listing(
                    core.list_namespaced_persistent_volume_claim,
                    (ns,),
                    "PersistentVolumeClaim",
                    "v1",
                    f"persistentvolumeclaims in namespace {ns}",
                )
            )
    listings.extend(_dra_listings(k8s_client.ResourceV1Api(api_client), namespaces))
    listings.extend(_config_map_listings(core, include_config_maps, config_map_selector))

    host = str(api_client.configuration.host)
    objects: list[Any] = []
    for listing in listings:
        objects.extend(
            _list_all(listing, page_size=page_size, host=host, request_timeout=request_timeout, decoded=decoded)
        )
    return objects


def _dra_listings(resource: k8s_client.ResourceV1Api, namespaces: Sequence[str] | None) -> list[_Listing]:
    """Dynamic resource allocation (``compactor.model.dra``): DeviceClasses, ResourceSlices, and the ResourceClaims of
    the namespaces whose pods are read. A cluster that does not serve ``resource.k8s.io/v1`` has none."""
    version = "resource.k8s.io/v1"
    listings = [
        _Listing(resource.list_device_class, (), "DeviceClass", version, "deviceclasses", optional=True),
        _Listing(resource.list_resource_slice, (), "ResourceSlice", version, "resourceslices", optional=True),
    ]
    if namespaces is None:
        claims = resource.list_resource_claim_for_all_namespaces
        return [
            *listings,
            _Listing(claims, (), "ResourceClaim", version, "resourceclaims in all namespaces", optional=True),
        ]
    return listings + [
        _Listing(
            resource.list_namespaced_resource_claim,
            (ns,),
            "ResourceClaim",
            version,
            f"resourceclaims in namespace {ns}",
            optional=True,
        )
        for ns in namespaces
    ]


def _config_map_listings(core: k8s_client.CoreV1Api, include: bool | str, selector: str | None) -> list[_Listing]:
    """The mig-parted ConfigMaps: a list in the GPU Operator's namespace only (the one RBAC grant on ConfigMaps outside the
    compactor's own namespace: manifests/gpu-operator), narrowed to one name or by ``selector``."""
    if include is False or include == "":
        return []
    if isinstance(include, bool):
        raise ValueError(
            "include_config_maps: ConfigMaps are listed in one namespace only (the GPU Operator's); "
            "expected 'NAMESPACE' or 'NAMESPACE/NAME', got True"
        )
    operator_namespace, _, name = include.partition("/")
    if not operator_namespace or "/" in name:
        raise ValueError(f"include_config_maps: expected 'NAMESPACE' or 'NAMESPACE/NAME', got {include!r}")
    what = f"configmap {operator_namespace}/{name}" if name else f"configmaps in namespace {operator_namespace}"
    return [
        _Listing(
            core.list_namespaced_config_map,
            (operator_namespace,),
            "ConfigMap",
            "v1",
            what,
            label_selector=selector,
            field_selector=f"metadata.name={name}" if name else None,
        )
    ]


@dataclass(frozen=True)
class _Page:
    items: list[Any]  # raw dicts, or schema objects when decoded
    token: str | None


class _ListMeta(msgspec.Struct):
    continue_: str | None = msgspec.field(default=None, name="continue")


class _DecodedPage(msgspec.Struct):
    items: list[KubeObject] | None = None
    metadata: _ListMeta | None = None


_PAGE_DECODER = msgspec.json.Decoder(_DecodedPage)


def _list_all(
    listing: _Listing,
    *,
    page_size: int,
    host: str,
    request_timeout: float | None,
    decoded: bool = False,
    keep: Callable[[Any], Any] | None = None,
) -> list[Any]:
    """Every item of one list, page by page; restarts once from scratch when a continue token expires (410). ``keep``: what
    to hold of each item instead of the item (``None``: nothing), applied as its page arrives, so that only one page of
    whole items is in memory at a time."""
    restarted = False
    while True:
        items: list[Any] = []
        token: str | None = None
        seen_tokens: set[str] = set()
        pages = 0
        try:
            while True:
                page = _fetch_page(
                    listing, limit=page_size, token=token, request_timeout=request_timeout, host=host, decoded=decoded
                )
                pages += 1
                items.extend(
                    page.items if keep is None else (k for item in page.items if (k := keep(item)) is not None)
                )
                token = page.token
                del page  # not held while the next page is read
                if token is None:
                    log.debug("listed %d %s in %d page(s)", len(items), listing.what, pages)
                    return items
                if token in seen_tokens:
                    raise ClusterError(
                        f"{host}: listing {listing.what}: the server repeated a continue token (pagination loop)"
                    )
                seen_tokens.add(token)
        except ApiException as exc:
            if exc.status == 404 and listing.optional and pages == 0:
                log.debug("%s: not served by this cluster", listing.what)
                return []
            if exc.status == 410 and token is not None and not restarted:
                log.info(
                    "continue token for %s expired after %d page(s); listing again from the start", listing.what, pages
                )
                restarted = True
                continue
            raise _api_error(exc, listing.what, host, restarted=restarted) from None
        except urllib3.exceptions.HTTPError as exc:
            raise ClusterError(
                f"cannot reach the Kubernetes API at {host} (listing {listing.what}): {_transport_reason(exc)}"
            ) from None


def _fetch_page(
    listing: _Listing, *, limit: int, token: str | None, request_timeout: float | None, host: str, decoded: bool
) -> _Page:
    kwargs: dict[str, Any] = {"limit": limit, "_preload_content": False}
    if token is not None:
        kwargs["_continue"] = token
    if listing.label_selector:
        kwargs["label_selector"] = listing.label_selector
    if listing.field_selector:
        kwargs["field_selector"] = listing.field_selector
    if request_timeout is not None:
        kwargs["_request_timeout"] = request_timeout
    response = listing.call(*listing.args, **kwargs)
    try:
        raw = response.data
    finally:
        response.release_conn()
    if decoded:
        page = _decoded_page(raw, listing)
        if page is not None:
            return page
    return _raw_page(raw, listing, host=host, status=int(response.status))


def _decoded_page(raw: bytes, listing: _Listing) -> _Page | None:
    """The page straight in the snapshot schema, or None when it does not fit (the dict path then names what is wrong)."""
    try:
        page = _PAGE_DECODER.decode(raw)
    except msgspec.MsgspecError:
        return None
    items = page.items or []
    for item in items:
        if item.kind is None:
            item.kind = listing.kind
        lean_decoded(item)
    return _Page(items, (page.metadata.continue_ or None) if page.metadata else None)


def _raw_page(raw: bytes, listing: _Listing, *, host: str, status: int) -> _Page:
    try:
        body = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise ClusterError(
            f"listing {listing.what}: the API replied with invalid JSON ({exc})", status=status
        ) from None
    if not isinstance(body, dict):
        raise ClusterError(
            f"listing {listing.what}: the API replied with a JSON {type(body).__name__}, expected a List", status=status
        )
    items = body.get("items") or []
    if not isinstance(items, list):
        raise ClusterError(f"{host}: listing {listing.what}: reply has no items list")
    for item in items:
        if not isinstance(item, dict):
            raise ClusterError(f"{host}: listing {listing.what}: reply holds a non-object item")
        item.setdefault("kind", listing.kind)
        item.setdefault("apiVersion", listing.api_version)
        lean(item, listing.kind)  # now, while the page is the only one in memory
    metadata = body.get("metadata") or {}
    token = (str(metadata.get("continue") or "") or None) if isinstance(metadata, dict) else None
    return _Page(items, token)


def _api_error(exc: ApiException, what: str, host: str, *, restarted: bool) -> ClusterError:
    status = int(exc.status or 0)
    message = _status_message(exc)
    if status == 0:
        return ClusterError(f"cannot talk to the Kubernetes API at {host} (listing {what}): {message or 'no reply'}")
    if status == 401:
        text = f"{host}: unauthorized (401) listing {what}: the API rejected the credentials (expired token or wrong kubeconfig user?)"
    elif status == 403:
        text = (
            f"{host}: forbidden (403) listing {what}: {message or 'the user or service account lacks list permission'}"
        )
    elif status == 404:
        text = f"{host}: not found (404) listing {what}: {message or 'the API does not serve this resource'}"
    elif status == 410:
        why = "expired again after a restart" if restarted else "expired"
        text = f"{host}: listing {what}: the continue token {why} (410 Gone); retry, or use a larger page size"
    else:
        reason = exc.reason or "error"
        text = f"{host}: HTTP {status} {reason} listing {what}" + (f": {message}" if message else "")
    return ClusterError(text, status=status)


def _status_message(exc: ApiException) -> str:
    """The ``message`` of the ``Status`` body, else the raw body or reason, on one short line."""
    body: Any = exc.body
    text = ""
    if isinstance(body, bytes | bytearray):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str) and body.strip():
        try:
            decoded = json.loads(body)
        except ValueError:
            text = body
        else:
            text = str(decoded.get("message") or "") if isinstance(decoded, dict) else body
    if not text and exc.status == 0:
        text = str(exc.reason or "")
    text = " ".join(text.split())
    return text if len(text) <= _MESSAGE_LIMIT else text[: _MESSAGE_LIMIT - 3] + "..."


def _transport_reason(exc: BaseException) -> str:
    """'connection refused', 'timed out', ... from a urllib3 error chain."""
    reason: BaseException = exc
    if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None:
        reason = exc.reason
    chain = _chain(reason)
    if any(isinstance(cause, ConnectionRefusedError) for cause in chain):
        return "connection refused"
    for cause in chain:
        if isinstance(cause, urllib3.exceptions.NameResolutionError):
            return "cannot resolve the host name"
        if isinstance(cause, urllib3.exceptions.SSLError):
            return f"TLS error: {' '.join(str(cause).split())}"
        if isinstance(
            cause, urllib3.exceptions.NewConnectionError
        ):  # a ConnectTimeoutError subclass, but not a timeout
            continue
        if isinstance(cause, TimeoutError | urllib3.exceptions.TimeoutError):
            return "timed out"
    text = " ".join(str(reason).split())
    marker = "Failed to establish a new connection: "
    if marker in text:
        text = text.split(marker, 1)[1]
    return text or type(reason).__name__


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen
