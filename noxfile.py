"""The development loop, one command each: ``nox -l`` lists the sessions, ``nox`` runs the default ones.

The sessions run in the environment you are in (no virtualenv per session): install once with
``pip install -c constraints.txt -e '.[test,dev]'`` (CONTRIBUTING.md), as ``.ci/run`` does. Installing
OR-Tools and the Kubernetes client into a fresh environment for every session would take longer than the
checks themselves, and CI tests the one environment it installed.

The checks are the ones ``.ci/run`` runs before the tests, in the same order: ``lint``, ``format``,
``typecheck``, ``imports`` (``nox -s checks`` runs all four). The test tiers are selected by folder
(tests/README.md says what each tier may use and how long it takes); arguments after ``--`` go to pytest,
e.g. ``nox -s unit -- -k quantity -x``.
"""

from __future__ import annotations

import os

import nox

nox.options.default_venv_backend = "none"
nox.options.error_on_external_run = False
# `nox` alone: the checks and the tiers that need neither a cluster nor minutes.
nox.options.sessions = ["lint", "format", "typecheck", "imports", "unit", "property", "integration", "wire"]

CHECKS = ("lint", "format", "typecheck", "imports")


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check . (``nox -s lint -- --fix`` applies the safe fixes)."""
    session.run("ruff", "check", ".", *session.posargs)


@nox.session(name="format")
def format_(session: nox.Session) -> None:
    """ruff format --check . as CI runs it (``nox -s format -- --fix`` rewrites the files instead)."""
    if "--fix" in session.posargs:
        session.run("ruff", "format", ".")
    else:
        session.run("ruff", "format", "--check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy --strict over compactor/ ([tool.mypy] in pyproject.toml)."""
    session.run("mypy", *session.posargs)


@nox.session
def imports(session: nox.Session) -> None:
    """lint-imports: the import contracts of [tool.importlinter] (layers, pure core, who imports what, no cycles)."""
    session.run("lint-imports", "--no-logo", *session.posargs)


@nox.session
def checks(session: nox.Session) -> None:
    """The four checks .ci/run runs before the tests, each one even when an earlier one failed."""
    for name in CHECKS:
        session.notify(name)


@nox.session
def unit(session: nox.Session) -> None:
    """tests/unit: pure functions and in-memory fakes; seconds to a minute or two."""
    session.run("python", "-m", "pytest", "tests/unit", *session.posargs)


@nox.session(name="property")
def property_(session: nox.Session) -> None:
    """tests/property: hypothesis against brute force and invariants (figures, the planner)."""
    session.run("python", "-m", "pytest", "tests/property", *session.posargs)


@nox.session
def integration(session: nox.Session) -> None:
    """tests/integration: whole commands and the executor against the in-memory fake cluster."""
    session.run("python", "-m", "pytest", "tests/integration", *session.posargs)


@nox.session
def wire(session: nox.Session) -> None:
    """tests/wire: the real Kubernetes client over HTTP against tests/fakeapi's fake API server."""
    session.run("python", "-m", "pytest", "tests/wire", *session.posargs)


@nox.session
def fast(session: nox.Session) -> None:
    """The fast loop: every tier but wire and e2e."""
    session.run("python", "-m", "pytest", "tests", "--ignore=tests/wire", "--ignore=tests/e2e", *session.posargs)


@nox.session
def e2e(session: nox.Session) -> None:
    """tests/e2e against the disposable cluster KUBECONFIG names (realk8s or kind: CONTRIBUTING.md). It changes it."""
    if not os.environ.get("KUBECONFIG"):
        session.error(
            "e2e needs KUBECONFIG naming a disposable cluster: ../shared/realk8s/up.sh && "
            "export KUBECONFIG=/tmp/realk8s/kubeconfig (or a kind cluster, see CONTRIBUTING.md)"
        )
    session.run("python", "-m", "pytest", "tests/e2e", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """The quick planner benchmark on a trace replay (one 100-node snapshot, a minute or two)."""
    session.run("python", "benchmarks/bench_trace.py", "--quick", *session.posargs)
