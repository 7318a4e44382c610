"""gpu-compactor: measure and repair GPU fragmentation in Kubernetes clusters."""

__version__ = "0.1.0"
