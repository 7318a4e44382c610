"""Configuration: a YAML file plus ``COMPACTOR_*`` environment variables, validated up front.

Environment variables override the file (``COMPACTOR_SOLVER__TIME_LIMIT_SECONDS=5``).
Unknown keys are errors, so a typo never silently falls back to a default.

One module per question an operator asks of the settings, most of them one YAML group (in brackets where the group's
name differs from the module's):

* which pods may move, and where: ``movable.py``
* what the plan aims at: ``aims.py``; what a move costs: ``cost.py``; how a shape is written: ``shape_syntax.py``
* how the solver searches: ``solving.py`` (``solver``)
* every cap (moves per plan, node, namespace, workload, pool, hour and day; evictions per run): ``caps.py``
* the disruption calendar (a window: ``disruption_windows.py``), cooldowns, oscillation, the circuit breaker:
  ``disruption.py``
* how the executor carries a plan out: ``execution.py`` (``executor``); how replacements are steered: ``steering.py``
* MIG re-cuts and layouts: ``mig.py``; DRA drivers: ``dra.py``
* how controller replicas take turns: ``leader_election.py``
* what the figures are measured against, where they go: ``metrics.py``
* how long one run may take: ``duration.py``
* where the settings come from (file, ConfigMap) and the whole document (``Settings``): ``origins.py``; the
  ``COMPACTOR_*`` variables: ``environment.py``; keys that moved in 0.2 and where they live now: ``relocated.py``
* the groups each component reads (``PlannerSettings``, ``RunSettings``): ``bundles.py``

Import a name from the module that defines it (``from compactor.settings.bundles import PlannerSettings``): this
package re-exports nothing.
"""
