"""Listing a collection: label and field selectors, ``limit``/``continue`` pagination with opaque tokens, and the
tests' ``expire_continue`` (410 Expired on a continue token)."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

from tests.fakeapi.messages import JSON, ApiError, RecordedRequest, Reply
from tests.fakeapi.resources import ResourceType
from tests.fakeapi.selectors import field_selector_matcher, label_selector_matcher
from tests.fakeapi.store import ObjectStore


def _continue_token(path: str, after: tuple[str, str], resource_version: int) -> str:
    """An opaque ``continue`` token: the list's path and the key of the last item sent."""
    data = {"path": path, "start": list(after), "rv": resource_version}
    return base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode()).decode().rstrip("=")


def _decoded_token(token: str) -> JSON:
    padded = token + "=" * (-len(token) % 4)
    value = json.loads(base64.urlsafe_b64decode(padded.encode()))
    if not isinstance(value, dict):
        raise ValueError("not an object")
    return value


class Listing(ObjectStore):
    """``GET`` of a collection. ``FakeApiServer.__init__`` sets every attribute declared here."""

    _expire: list[list[Any]]  # [token or None, remaining]

    def expire_continue(self, token: str | None = None, *, times: int = 1) -> None:
        """The next ``times`` list requests carrying ``token`` (None = any continue token) get 410 Expired."""
        with self.lock:
            self._expire.append([token, times])

    def _list(self, rt: ResourceType, namespace: str | None, request: RecordedRequest) -> Reply:
        if request.param("watch") in ("true", "1"):
            raise ApiError(400, "watch is not supported by the fake API server")
        label_sel, field_sel = request.param("labelSelector") or "", request.param("fieldSelector") or ""
        labels_ok = label_selector_matcher(label_sel)
        fields_ok = field_selector_matcher(rt, field_sel)
        limit_text = request.param("limit")
        try:
            limit = int(limit_text) if limit_text else 0
        except ValueError:
            raise ApiError(400, f"invalid limit {limit_text!r}") from None
        token = request.param("continue")
        start: tuple[str, str] | None = None
        if token:
            try:
                decoded = _decoded_token(token)
                start = (str(decoded["start"][0]), str(decoded["start"][1]))
                if decoded.get("path") != request.path:
                    raise ValueError("token from another list")
            except (ValueError, KeyError, IndexError, TypeError):
                raise ApiError(400, f"continue key is not valid: {token!r}") from None
            for rule in self._expire:
                if rule[1] > 0 and rule[0] in (None, token):
                    rule[1] -= 1
                    fresh = _continue_token(request.path, start, self.resource_version)
                    raise ApiError(
                        410,
                        "The provided continue parameter is too old to display a consistent list result. You can start a new "
                        "list without the continue parameter, or use the continue token in this response to retrieve the "
                        "remainder of the results. Continuing with the provided token results in an inconsistent list - "
                        "objects that were created, modified, or deleted between the time the first chunk was returned "
                        "and now may show up in the list.",
                        reason="Expired",
                        metadata={"continue": fresh},
                    )
        selected = [
            (key, obj)
            for key, obj in sorted(self._store[rt.key].items())
            if (namespace is None or key[0] == namespace)
            and (start is None or key > start)
            and labels_ok((obj.get("metadata") or {}).get("labels") or {})
            and fields_ok(obj)
        ]
        metadata: JSON = {"resourceVersion": str(self.resource_version)}
        page = selected
        if limit > 0 and len(selected) > limit:
            page = selected[:limit]
            metadata["continue"] = _continue_token(request.path, page[-1][0], self.resource_version)
            if not label_sel and not field_sel:
                metadata["remainingItemCount"] = len(selected) - limit
        items = []
        for _, obj in page:
            item = copy.deepcopy(obj)
            item.pop("kind", None)  # the real server omits kind/apiVersion on list items
            item.pop("apiVersion", None)
            items.append(item)
        return Reply(
            200, {"kind": f"{rt.kind}List", "apiVersion": rt.api_version, "metadata": metadata, "items": items}
        )
