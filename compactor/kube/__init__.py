"""The live-cluster side: the only package (with ``compactor.model.quantity``) that imports ``kubernetes``."""
