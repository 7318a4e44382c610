"""The renderers of what gpu-compactor measures and plans: the report as text and markdown (``report``), the plan
(``plan``), the one-page HTML (``html``) and the advice (``advice``). Pure: figures and plans in, text out."""
