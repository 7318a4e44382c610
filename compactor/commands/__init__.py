"""The command-line commands, each a thin adapter: options -> one ``Invocation`` -> one call into ``compactor.app`` -> text.

* ``options.py``: the options the commands share (input, config, logging);
* ``report.py``: ``compactor report``;
* ``plan.py``: ``compactor plan``;
* ``execute.py``: ``compactor apply`` and ``compactor run --once``;
* ``controller.py``: ``compactor controller``: its options, and one live cluster wired into ``compactor.controller``'s loop;
* ``render.py``: the text of a run (its report, a dry run's calls, the outcome), of a held run, of what a plan would do
  as deployed;
* ``progress.py``: progress on stderr while a plan is solved and while a run goes.

``compactor config`` is ``compactor.commands.config``.
"""
