"""The options several commands share: the input (snapshot files, the example, a live cluster), the config, logging."""

from __future__ import annotations

import argparse


def add_source_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("input (one of)")
    group.add_argument(
        "--snapshot",
        nargs="+",
        metavar="FILE",
        help="kubectl get nodes,pods,pdb,pv,pvc -A -o json|yaml output ('-' = stdin)",
    )
    group.add_argument("--example", action="store_true", help="the bundled example cluster (no Kubernetes needed)")
    group.add_argument("--kubeconfig", metavar="PATH", help="read the live cluster through this kubeconfig")
    group.add_argument("--context", metavar="NAME", help="kubeconfig context of the live cluster")
    group.add_argument("--in-cluster", action="store_true", help="read the live cluster with the pod's service account")
    parser.add_argument(
        "--allow-empty", action="store_true", help="accept input without Node objects (otherwise an error)"
    )


def add_common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE", help="YAML settings file (see config/compactor.yaml)")
    parser.add_argument("--log-format", choices=("text", "json"), default="text")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
