"""Checks of a plan against the cluster as it is now, shared by the executor's steps.

The plan was computed on a snapshot: before any change (``validate``), before each eviction (``recheck``), and
before a node counts as freed (``drained``), the run reads again. Several steps ask the same check, and steps do not
import each other (``actions/steps/__init__.py``), so the checks live here, one module each.
"""
