"""Scenario helpers shared by test modules: the worlds tests start from and the small tools that run and inspect them.

No test module imports another test module; what two of them share lives here (or in ``tests/builders.py``,
``tests/fakecluster/``, ``tests/fakeapi/``). See tests/README.md for what each module holds.
"""
