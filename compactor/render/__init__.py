"""The renderers of what gpu-compactor measures: the report as text and markdown (``report``), the one-page HTML
(``html``) and the advice (``advice``). Pure: figures and plans in, text out."""
