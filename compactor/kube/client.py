"""An authenticated ``kubernetes.client.ApiClient``: in-cluster service account or a kubeconfig context.

Precedence follows client-go: an explicit ``--kubeconfig``/``--context`` or a
``$KUBECONFIG`` wins; otherwise, inside a pod (``KUBERNETES_SERVICE_HOST`` set)
the pod's service account is used; otherwise ``~/.kube/config``. ``in_cluster=True``
(``--in-cluster``) insists on the service account.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from typing import Any

import urllib3
import yaml
from kubernetes import client as k8s_client
from kubernetes.config import incluster_config, kube_config
from kubernetes.config.config_exception import ConfigException

from compactor import __version__
from compactor.errors import InputError

DEFAULT_KUBECONFIG = "~/.kube/config"
IN_CLUSTER = "in-cluster"
USER_AGENT = f"gpu-compactor/{__version__}"


@dataclass(frozen=True)
class Connection:
    """An API client and the name of what it talks to (the kubeconfig context, or ``in-cluster``)."""

    api_client: k8s_client.ApiClient
    name: str


def load_api_client(
    kubeconfig: str | None = None, context: str | None = None, *, in_cluster: bool = False
) -> k8s_client.ApiClient:
    """The API client for ``kubeconfig``/``context`` (see the module docstring for the precedence).

    ``in_cluster=True`` insists on the pod's service account (``--in-cluster``).
    """
    return connect(kubeconfig, context, in_cluster=in_cluster).api_client


def connect(kubeconfig: str | None = None, context: str | None = None, *, in_cluster: bool = False) -> Connection:
    """Like ``load_api_client``, also naming the target (for messages and the snapshot's source)."""
    if in_cluster and (kubeconfig is not None or context is not None):
        raise InputError("--in-cluster cannot be combined with --kubeconfig or --context")
    configuration = k8s_client.Configuration()
    implicit = (
        kubeconfig is None
        and context is None
        and not os.environ.get("KUBECONFIG")
        and os.environ.get("KUBERNETES_SERVICE_HOST")
    )
    if in_cluster or implicit:
        _load_in_cluster(configuration)
        name = IN_CLUSTER
    else:
        name = _load_kubeconfig(configuration, kubeconfig, context)
    api_client = k8s_client.ApiClient(configuration=configuration)
    api_client.user_agent = USER_AGENT
    return Connection(api_client=api_client, name=name)


def single_attempt(api_client: k8s_client.ApiClient) -> k8s_client.ApiClient:
    """An ``ApiClient`` on the same server, with the same credentials and headers, that sends each request once.

    urllib3 retries a request by itself: up to three times by default (connection errors for any method;
    timeouts and dropped connections for GET, PUT and DELETE), each attempt with the whole timeout again.
    For a write fenced on the Lease, such a retry resends it unchecked, up to four timeouts after the
    check. Writes and Lease requests go through this client instead: one attempt, bounded by its timeout;
    the executor's own retries pass the fence again (``compactor/actions/services/fencing.py``).
    """
    configuration = copy.deepcopy(api_client.configuration)  # as Configuration.get_default_copy() does
    configuration.retries = urllib3.Retry(total=0)
    single = k8s_client.ApiClient(configuration=configuration, cookie=api_client.cookie)
    single.default_headers = dict(api_client.default_headers)  # the User-Agent among them
    return single


def _load_in_cluster(configuration: k8s_client.Configuration) -> None:
    try:
        incluster_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except ConfigException as exc:
        raise InputError(f"cannot use the pod's service account: {_one_line(exc)}", source=IN_CLUSTER) from None


def _load_kubeconfig(configuration: k8s_client.Configuration, kubeconfig: str | None, context: str | None) -> str:
    """Load the chosen context into ``configuration``; returns the context's name."""
    paths = kubeconfig or os.environ.get("KUBECONFIG") or DEFAULT_KUBECONFIG
    if kubeconfig is not None and not os.path.exists(os.path.expanduser(kubeconfig)):
        raise InputError("kubeconfig: no such file", source=kubeconfig)
    try:
        merger = kube_config.KubeConfigMerger(paths)  # type: ignore[no-untyped-call]
    except (ConfigException, OSError, yaml.YAMLError) as exc:
        raise InputError(f"cannot read kubeconfig: {_one_line(exc)}", source=paths) from None
    if merger.config is None:
        raise InputError("kubeconfig: no such file (give --kubeconfig, set $KUBECONFIG, or run in a pod)", source=paths)
    document: Any = merger.config.value
    if not isinstance(document, dict):
        raise InputError("kubeconfig: expected a mapping", source=paths)
    names = [
        str(getattr(entry, "value", entry).get("name", ""))
        for entry in document.get("contexts") or []
        if isinstance(getattr(entry, "value", entry), dict)
    ]
    chosen = context or document.get("current-context")
    if not chosen:
        raise InputError(f"kubeconfig sets no current-context; pass --context ({_available(names)})", source=paths)
    if chosen not in names:
        raise InputError(f"kubeconfig has no context {chosen!r} ({_available(names)})", source=paths)
    try:
        loader = kube_config.KubeConfigLoader(  # type: ignore[no-untyped-call]
            config_dict=merger.config, active_context=chosen, config_persister=merger.save_changes
        )
        loader.load_and_set(configuration)  # type: ignore[no-untyped-call]
    except (ConfigException, OSError, ValueError, TypeError, KeyError, yaml.YAMLError) as exc:
        raise InputError(f"kubeconfig context {chosen!r}: {_one_line(exc)}", source=paths) from None
    return str(chosen)


def _available(names: list[str]) -> str:
    return f"available: {', '.join(names)}" if names else "the file defines no contexts"


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__
