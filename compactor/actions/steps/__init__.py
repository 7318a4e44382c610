"""The executor's steps, one module each, in the order a run takes them.

``checks/validate`` (the plan against fresh state) -> ``cordon`` (fence the nodes it frees) -> ``evict`` each move,
then ``await_replacement`` for it -> ``recut`` (MIG) -> ``steer`` (pending pods) -> ``finish`` (releases, the state
deleted) -> ``reservations`` (``after_drain: taint``); any ``Abort`` -> ``rollback``. Each takes the ``Run`` and writes
its state before each change (``Run.save``). ``actions/executor.py`` strings them together, so a step does not import
another (the ``steps-independent`` import contract): what two of them share is a service of ``compactor.actions``
(``checks/``, ``surge``, ``refusals``, ``planned_pod``, ``recut_failure``, ``fences``...).
"""
