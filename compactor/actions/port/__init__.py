"""The port: what a cluster client is (``client.py``), the annotations and taint a run writes, and the typed views
of what a client returns (``objects.py``)."""
