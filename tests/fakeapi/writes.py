"""Writes of single objects: ``POST`` create, ``PATCH`` (merge, strategic merge, JSON patch), ``PUT`` replace and
``DELETE``, with their preconditions, ``dryRun=All`` and the API server's validation the tests rely on."""

from __future__ import annotations

import copy

from tests.fakeapi.messages import JSON, ApiError, RecordedRequest, Reply, conflict, json_body
from tests.fakeapi.patches import PatchError, json_patch, merge_patch
from tests.fakeapi.resources import ResourceType
from tests.fakeapi.store import ObjectStore, utc_now

CONFIGMAP_LIMIT = 1024 * 1024  # k8s.io/api/core/v1 MaxConfigMapSize, checked by ValidateConfigMap


def _check_size(rt: ResourceType, body: JSON) -> None:
    """The API server refuses a ConfigMap whose data and binaryData (keys and values) exceed 1 MiB."""
    if rt.kind != "ConfigMap":
        return
    total = sum(
        len(str(k)) + len(str(v).encode()) for part in ("data", "binaryData") for k, v in (body.get(part) or {}).items()
    )
    if total > CONFIGMAP_LIMIT:
        name = (body.get("metadata") or {}).get("name", "")
        raise ApiError(
            422,
            f'ConfigMap "{name}" is invalid: []: Too long: must have at most {CONFIGMAP_LIMIT} bytes',
            details={"name": name, "kind": "configmaps"},
        )


def check_preconditions(rt: ResourceType, name: str, current: JSON, preconditions: JSON) -> None:
    """A delete's (or an eviction's) ``preconditions``: 409 when the uid or the resourceVersion differs."""
    if preconditions.get("uid") and preconditions["uid"] != current["metadata"].get("uid"):
        raise ApiError(
            409,
            f"Precondition failed: UID in precondition: {preconditions['uid']}, "
            f"UID in object meta: {current['metadata'].get('uid')}",
        )
    if (
        preconditions.get("resourceVersion")
        and preconditions["resourceVersion"] != current["metadata"]["resourceVersion"]
    ):
        raise conflict(rt, name)


class Writes(ObjectStore):
    """Create, patch, replace and delete of the objects in the store."""

    def _create(self, rt: ResourceType, namespace: str | None, request: RecordedRequest) -> Reply:
        if request.content_type not in ("application/json", ""):
            raise ApiError(
                415,
                f"the body of the request was in an unknown format - accepted media types include: application/json; "
                f"got {request.content_type}",
            )
        body = json_body(request)
        if not isinstance(body, dict):
            raise ApiError(400, "the request body must be a JSON object")
        if body.get("kind") not in (None, rt.kind):
            raise ApiError(400, f"the kind {body.get('kind')!r} does not match the endpoint's {rt.kind}")
        meta = body.setdefault("metadata", {})
        if namespace is not None:
            if meta.get("namespace") not in (None, "", namespace):
                raise ApiError(
                    400, "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = namespace
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise ApiError(
                    422,
                    f"{rt.kind} is invalid: metadata.name: Required value: name or generateName is required",
                    details={"kind": rt.plural},
                )
            meta["name"] = f"{meta['generateName']}{next(self._uid):05d}"
        key = (meta.get("namespace", ""), meta["name"])
        if key in self._store[rt.key]:
            raise ApiError(
                409,
                f'{rt.group_resource} "{meta["name"]}" already exists',
                reason="AlreadyExists",
                details={"name": meta["name"], "kind": rt.plural},
            )
        body["kind"], body["apiVersion"] = rt.kind, rt.api_version
        _check_size(rt, body)
        meta["uid"] = f"fake-uid-{next(self._uid)}"
        meta.setdefault("creationTimestamp", utc_now())
        if request.param("dryRun") != "All":
            meta["resourceVersion"] = self._next_rv()
            self._store[rt.key][key] = copy.deepcopy(body)
        return Reply(201, body)

    def _patch(self, rt: ResourceType, ns: str, name: str, request: RecordedRequest) -> Reply:
        current = self._existing(rt, ns, name)
        patch = json_body(request)
        content_type = request.content_type
        try:
            if content_type in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
                if not isinstance(patch, dict):
                    raise ApiError(400, "a merge patch must be a JSON object")
                patched = merge_patch(current, patch, strategic=content_type.startswith("application/strategic"))
                precondition = (
                    (patch.get("metadata") or {}).get("resourceVersion")
                    if isinstance(patch.get("metadata"), dict)
                    else None
                )
            elif content_type == "application/json-patch+json":
                patched = json_patch(current, patch)
                precondition = (
                    (patched.get("metadata") or {}).get("resourceVersion") if isinstance(patched, dict) else None
                )
                if precondition == current["metadata"]["resourceVersion"]:
                    precondition = None
            else:
                raise ApiError(
                    415,
                    f"the body of the request was in an unknown format - accepted media types include: "
                    f"application/json-patch+json, application/merge-patch+json, "
                    f"application/strategic-merge-patch+json; got {content_type or 'none'}",
                )
        except ValueError as exc:
            raise ApiError(400, str(exc)) from None
        except PatchError as exc:
            raise ApiError(422, str(exc)) from None
        if not isinstance(patched, dict):
            raise ApiError(422, "the patched object is not a JSON object")
        if precondition is not None and str(precondition) != current["metadata"]["resourceVersion"]:
            raise conflict(rt, name)
        meta = patched.setdefault("metadata", {})
        if meta.get("name") != name or (rt.namespaced and meta.get("namespace") != ns):
            raise ApiError(422, f'{rt.kind} "{name}" is invalid: metadata.name: Invalid value: field is immutable')
        meta["uid"] = current["metadata"].get("uid")
        patched["kind"], patched["apiVersion"] = rt.kind, rt.api_version
        if request.param("dryRun") != "All":
            meta["resourceVersion"] = self._next_rv()
            self._store[rt.key][(ns, name)] = copy.deepcopy(patched)
        else:
            meta["resourceVersion"] = current["metadata"]["resourceVersion"]
        return Reply(200, patched)

    def _replace(self, rt: ResourceType, ns: str, name: str, request: RecordedRequest) -> Reply:
        current = self._existing(rt, ns, name)
        body = json_body(request)
        if not isinstance(body, dict):
            raise ApiError(400, "the request body must be a JSON object")
        meta = body.setdefault("metadata", {})
        if meta.get("name") != name:
            raise ApiError(400, "the name of the object does not match the name on the URL")
        if meta.get("resourceVersion") and meta["resourceVersion"] != current["metadata"]["resourceVersion"]:
            raise conflict(rt, name)
        if rt.namespaced:
            meta["namespace"] = ns
        meta["uid"] = current["metadata"].get("uid")
        meta["creationTimestamp"] = current["metadata"].get("creationTimestamp")
        body["kind"], body["apiVersion"] = rt.kind, rt.api_version
        _check_size(rt, body)
        if request.param("dryRun") != "All":
            meta["resourceVersion"] = self._next_rv()
            self._store[rt.key][(ns, name)] = copy.deepcopy(body)
        return Reply(200, body)

    def _delete(self, rt: ResourceType, ns: str, name: str, request: RecordedRequest) -> Reply:
        current = self._existing(rt, ns, name)
        options = json_body(request) or {}
        preconditions = options.get("preconditions") or {} if isinstance(options, dict) else {}
        check_preconditions(rt, name, current, preconditions)
        dry_run = request.param("dryRun") == "All" or "All" in (
            (options.get("dryRun") or []) if isinstance(options, dict) else []
        )
        if not dry_run:
            del self._store[rt.key][(ns, name)]
            self._next_rv()
        return Reply(200, copy.deepcopy(current))
