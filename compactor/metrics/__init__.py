"""The fragmentation figures: allocatable against the requests of bound pods, per node, pool and cluster
(``fragmentation.py``), and the request-shape advice (``advice.py``).

Pure functions of a snapshot and settings: no I/O, no clock, no cluster client. The Prometheus exporter that
publishes these figures lives beside the controller's loop (``compactor.controller.exporter``), not here.
"""
