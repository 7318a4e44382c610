"""What the figures are measured against and where they go: the pools, the reference shapes, the Pushgateway (the
``metrics`` group)."""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import Field, field_validator

from compactor.model.resources import Resources
from compactor.settings.base import Group
from compactor.settings.shape_syntax import check_shapes, parse_shape


class MetricsSettings(Group):
    pool_label: str = "nvidia.com/gpu.product"
    reference_shapes: list[str] = Field(
        default_factory=list, description="e.g. 'nvidia.com/gpu=4,cpu=8'; empty = from the workload"
    )
    shape_coverage: float = Field(0.95, gt=0, le=1)
    max_shapes: int = Field(20, ge=1)
    pushgateway_url: str = Field(
        "",
        description="a Prometheus Pushgateway (http[s]://HOST:PORT) that `run --once` pushes its "
        "figures and run to at its end (job gpu-compactor, grouping key installation); "
        "empty: no push. The controller is scraped instead",
    )

    _shapes_parse = field_validator("reference_shapes")(check_shapes)

    @field_validator("pushgateway_url")
    @classmethod
    def _pushgateway_is_a_url(cls, value: str) -> str:
        if not value:
            return value
        try:
            parts = urlsplit(value)
            parts.port  # noqa: B018  (a port that is not a number raises here)
        except ValueError as exc:
            raise ValueError(f"{value!r} is not a URL ({exc})") from None
        if parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in value):
            raise ValueError(f"expected http://HOST:PORT or https://HOST:PORT (the Pushgateway), got {value!r}")
        return value

    def shapes(self) -> list[Resources]:
        return [parse_shape(text) for text in self.reference_shapes]
