"""The renderers of what gpu-compactor measures and plans: the report as text, markdown and JSON (``report``; its
sections in ``report_sections``, written out by ``text`` and ``markdown``), the plan (``plan``), the one-page HTML
(``html/``: built from its ``page``, ``occupancy``, ``curve`` and ``plan``), the advice (``advice``) and a
run's report (``run``). ``content`` holds what a report says before any format, ``numbers`` how every number is
written. Pure: figures and plans in, text out."""
