"""The fragmentation figures: allocatable against the requests of bound pods, per node, pool and cluster
(``fragmentation.py``), and the advice of ``report --advise``: request shapes (``advice.py``), CPU-only pods on GPU
nodes (``cpu_pods.py``), both measured with the headline figures of ``headline.py``.

Pure functions of a snapshot and settings: no I/O, no clock, no cluster client. The Prometheus exporter that
publishes these figures lives beside the controller's loop (``compactor.controller.exporter``), not here.
"""
