"""``StateCalls``: what the compactor keeps and says on the API server: its ConfigMaps, the steering policy, Events.

A part of ``KubeClusterClient`` of its own because these are the compactor's own objects, not the cluster's: the
executor's state ConfigMaps (compare-and-swap on their resourceVersion: the guard against a second writer that
holds even where the Lease does not), the steering policy's parameter ConfigMap and the policy objects it is
detected by, and the Events it leaves on what it touches. A state ConfigMap is the only object the client DELETEs.
"""

from __future__ import annotations

import secrets
import socket
from datetime import UTC, datetime

from compactor.actions.port.client import Obj, ObjectRef
from compactor.errors import ClusterError
from compactor.kube.client_base import ClientBase
from compactor.kube.transport import API_VERSIONS, MERGE_PATCH, Reply, api_error, reply_object

COMPONENT = "gpu-compactor"
MANAGED_BY = {"app.kubernetes.io/managed-by": COMPONENT}

# Limits the API server validates on core/v1 Events that carry an eventTime.
_EVENT_NOTE_LIMIT = 1024  # bytes of message
_EVENT_FIELD_LIMIT = 128  # reason, action, reportingInstance
_NAME_LIMIT = 253


class StateCalls(ClientBase):
    _instance: str  # reportingInstance of our Events: _reporting_instance()
    _state_versions: dict[str, str]  # state ConfigMap -> resourceVersion last read or written here

    def get_config_map(self, name: str) -> Obj | None:
        return self._get(
            "/api/v1/namespaces/{namespace}/configmaps/{name}",
            {"namespace": self.namespace, "name": name},
            "ConfigMap",
            f"reading configmap {self.namespace}/{name}",
        )

    def patch_config_map(self, name: str, patch: Obj) -> Obj:
        what = f"patching configmap {self.namespace}/{name}"
        reply = self._send(
            "PATCH",
            "/api/v1/namespaces/{namespace}/configmaps/{name}",
            {"namespace": self.namespace, "name": name},
            what,
            body=patch,
            content_type=MERGE_PATCH,
        )
        if not reply.ok:
            raise api_error(reply, what)
        return reply_object(reply, "ConfigMap", what)

    def get_admission(self, kind: str, name: str) -> Obj | None:
        if kind == "MutatingAdmissionPolicy":
            return self._get(
                "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies/{name}",
                {"name": name},
                kind,
                f"reading mutatingadmissionpolicy {name}",
            )
        if kind == "MutatingAdmissionPolicyBinding":
            return self._get(
                "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings/{name}",
                {"name": name},
                kind,
                f"reading mutatingadmissionpolicybinding {name}",
            )
        if kind == "ValidatingAdmissionPolicy":
            return self._get(
                "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/{name}",
                {"name": name},
                kind,
                f"reading validatingadmissionpolicy {name}",
            )
        raise ValueError(f"not an admission kind this client reads: {kind}")

    def who_am_i(self) -> str | None:
        what = "asking the API server who this client is (selfsubjectreview)"
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        reply = self._send("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", {}, what, body=body)
        if not reply.ok:
            return None  # not served (before v1.28) or refused: the caller checks without it
        review = reply_object(reply, "SelfSubjectReview", what)
        username = ((review.get("status") or {}).get("userInfo") or {}).get("username")
        return str(username) if username else None

    def read_state(self, name: str) -> dict[str, str] | None:
        what = f"reading configmap {self.namespace}/{name}"
        config_map = self._get(
            "/api/v1/namespaces/{namespace}/configmaps/{name}",
            {"namespace": self.namespace, "name": name},
            "ConfigMap",
            what,
        )
        if config_map is None:
            self._state_versions.pop(name, None)
            return None
        self._state_versions[name] = str((config_map.get("metadata") or {}).get("resourceVersion") or "")
        data = config_map.get("data") or {}
        if not isinstance(data, dict):
            raise ClusterError(f"{what}: data is a JSON {type(data).__name__}, expected an object")
        return {str(k): "" if v is None else str(v) for k, v in data.items()}

    def write_state(self, name: str, data: dict[str, str] | None) -> None:
        """Compare-and-swap the state ConfigMap: PUT/DELETE with the resourceVersion this process last read or wrote,
        POST when it saw none. A 409 means another writer changed it meanwhile: raised, never overwritten."""
        params = {"namespace": self.namespace, "name": name}
        ref = f"{self.namespace}/{name}"
        known = self._state_versions.get(name)
        if data is None:
            what = f"deleting configmap {ref}"
            options: Obj = {"apiVersion": "v1", "kind": "DeleteOptions"}
            if known:
                options["preconditions"] = {"resourceVersion": known}
            reply = self._send("DELETE", "/api/v1/namespaces/{namespace}/configmaps/{name}", params, what, body=options)
            if reply.status == 409:
                raise _changed_meanwhile(what, reply)
            if not reply.ok and reply.status != 404:
                raise api_error(reply, what)
            if not self.dry_run_all:
                self._state_versions.pop(name, None)
            return
        body: Obj = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": self.namespace, "labels": dict(MANAGED_BY)},
            "data": {str(k): str(v) for k, v in data.items()},
        }
        if known:
            body["metadata"]["resourceVersion"] = known
            what = f"writing configmap {ref}"
            reply = self._send("PUT", "/api/v1/namespaces/{namespace}/configmaps/{name}", params, what, body=body)
        else:
            what = f"creating configmap {ref}"
            reply = self._send(
                "POST", "/api/v1/namespaces/{namespace}/configmaps", {"namespace": self.namespace}, what, body=body
            )
        if not reply.ok:
            if reply.status == 409 or (
                known and reply.status == 404
            ):  # a POST's 404 is a missing namespace, not a race
                raise _changed_meanwhile(what, reply)
            raise api_error(reply, what)
        if not self.dry_run_all:
            self._state_versions[name] = str(((reply.body or {}).get("metadata") or {}).get("resourceVersion") or "")

    def create_event(self, involved: ObjectRef, *, reason: str, message: str, type_: str = "Normal") -> None:
        """A core/v1 Event about ``involved`` (cluster-scoped objects: in namespace ``default``, as kubectl does)."""
        namespace = involved.namespace or "default"
        now = datetime.now(UTC)
        reference: Obj = {
            "kind": involved.kind,
            "name": involved.name,
            "apiVersion": API_VERSIONS.get(involved.kind, "v1"),
        }
        if involved.namespace:
            reference["namespace"] = involved.namespace
        if involved.uid:
            reference["uid"] = involved.uid
        body: Obj = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": _event_name(involved.name), "namespace": namespace, "labels": dict(MANAGED_BY)},
            "involvedObject": reference,
            "reason": reason[:_EVENT_FIELD_LIMIT],
            "message": _truncate_bytes(message, _EVENT_NOTE_LIMIT),
            "type": type_,
            "action": reason[:_EVENT_FIELD_LIMIT],
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self._instance,
            "firstTimestamp": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "lastTimestamp": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "eventTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "count": 1,
        }
        what = f"creating event {reason} for {involved.kind.lower()} {_ref_name(involved)}"
        reply = self._send("POST", "/api/v1/namespaces/{namespace}/events", {"namespace": namespace}, what, body=body)
        if not reply.ok:
            raise api_error(reply, what)


def reporting_instance() -> str:
    """Which controller process wrote an event (``reportingInstance``): the pod's host name, as client-go uses."""
    host = socket.gethostname() or "unknown"
    return f"{COMPONENT}-{host}"[:_EVENT_FIELD_LIMIT]


def _ref_name(ref: ObjectRef) -> str:
    return f"{ref.namespace}/{ref.name}" if ref.namespace else ref.name


def _event_name(object_name: str) -> str:
    """``<object>.<16 hex>``, a valid DNS subdomain of at most 253 characters."""
    suffix = secrets.token_hex(8)
    stem = object_name[: _NAME_LIMIT - len(suffix) - 1].rstrip(".-") or "object"
    return f"{stem}.{suffix}"


def _truncate_bytes(text: str, limit: int) -> str:
    encoded = text.encode("utf-8")
    if len(encoded) <= limit:
        return text
    return encoded[: limit - 3].decode("utf-8", "ignore") + "..."


def _changed_meanwhile(what: str, reply: Reply) -> ClusterError:
    return ClusterError(
        f"{what}: changed by another writer since this process last saw it ({reply.message()}); "
        "another gpu-compactor may be acting",
        status=409,
    )
