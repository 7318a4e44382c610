"""The planner's rules: what may move (movability, pins, history), where (eligibility), which pending pods it may place
(placeable), at what price (price), within which run budgets (budgets). Pure."""
