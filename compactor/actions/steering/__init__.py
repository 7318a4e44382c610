"""Steering: making kube-scheduler bind each replacement (and each pending pod the plan places) where the plan says.

kube-scheduler, not the executor, decides where a replacement goes; with the default profile it
picks the emptiest feasible node. Three mechanisms, one interface (``Steerer``):

* ``policy`` (``policy.py``): the MutatingAdmissionPolicy of ``manifests/steering`` pins the owner's
  next pod to the planned node from one entry in a parameter ConfigMap; no node is touched.
* ``holds`` (``holds.py``): every other node that could take the replacement is fenced for the
  moment between the eviction and the binding (bounded by ``caps.max_holds_per_move``).
* ``off`` (``off.py``): nothing; the landing check still stops a run whose replacement lands on a
  node being freed.

``detect.choose`` picks one per run (``steering.mechanism``: auto | policy | holds | off) and says why.
"""
