"""The executor's steps, one module each, in the order a run takes them.

``validate`` (the plan against fresh state) -> ``cordon`` (fence the nodes it frees) -> for each
move ``steer`` + ``evict`` + ``await_replacement`` -> ``recut`` (MIG) -> ``finish`` (pending pods,
releases, the state deleted); any ``Abort`` -> ``rollback``. Each takes the ``Run`` and writes its
state before each change (``Run.save``). ``actions/executor.py`` strings them together.
"""
