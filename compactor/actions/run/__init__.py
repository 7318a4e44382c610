"""One run as the steps see it: the ``Run`` they all take (``context.py``), what one process saw of it (``log.py``), the
interface a steering mechanism offers it (``steerer.py``) and the nodes it gives back (``fences.py``)."""
