"""The planner's search: the greedy warm start and chains, per-node loads, the large-neighbourhood search (``lns/``),
the whole-cluster bounds, the trade-off curve and the choice of its point, the baselines, the level solver's search
(``solver.py``) and another target for a move whose target lost its room (``retarget.py``); ``compose``'s search
stage (``search_stage.py``) drives them."""
