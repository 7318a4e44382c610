"""The cluster model: an immutable snapshot of nodes, pods, PDBs, PVs and PVCs, decoded once (``schema.py``, msgspec),
with the Kubernetes semantics the rest reads from it: quantities and effective requests (``quantity.py``,
``requests.py``), the GPU and MIG catalog (``gpu.py``, ``catalog.py``, ``migparted.py``), scheduling predicates
(``scheduling.py``, ``interpod.py``, ``volumes.py``).

Pure: no I/O beyond reading the files it is given (``load.py``), no clock, no cluster client. Imports nothing of the
compactor above it; the one third-party exception is ``quantity.py``, which parses quantities with the Kubernetes
client's own grammar (declared in the import contracts).
"""
