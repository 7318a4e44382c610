"""The source article's cluster over a day (issue [24]): MIG slices, whole GPUs, 8-GPU replicas and CPU-only services,
Deployments scaling with the traffic, models arriving and retiring; what ``replay_day.py --world article`` plays.

The world (every number stated here, seeded by ``--seed``):

* Nodes, in the article's proportions and scalable (``--nodes N``): 40% MIG-capable A100-SXM4-40GB nodes (8 GPUs, the
  device plugin's mixed strategy: each MIG profile its own resource), three in four cut ``all-1g.5gb`` (seven
  ``1g.5gb`` per GPU, the article's layout) and one in four ``all-balanced`` (2 ``1g.5gb``, 1 ``2g.10gb``, 1
  ``3g.20gb`` per GPU, mig-parted's mixed layout); 45% whole-GPU A100-SXM4-40GB nodes (8 GPUs, MIG off); 15% CPU-only
  nodes (32 cores, 256 GiB, the article's). GPU nodes have 96 cores and 768 GiB. Every node's name is its kind and an
  index (``mig-0003``, ``gpu-0012``, ``cpu-0001``). With ``--time-sliced SHARE`` that share of the nodes, taken from the
  whole-GPU ones, is time-sliced (``ts-0004``): the device plugin's time-slicing with ``renameByDefault: true``
  advertises each GPU as ``SLICED_REPLICAS`` ``nvidia.com/gpu.shared`` replicas and GFD labels the node
  ``nvidia.com/gpu.replicas`` and ``nvidia.com/gpu.sharing-strategy: time-slicing`` (the GPU Operator's "Time-Slicing
  GPUs in Kubernetes"); a replica is worth 1/4 of a GPU, as the figures count it.
* Inference Deployments, each one model: BERT-base replicas on ``mig-1g.5gb``, ResNet-152 on ``mig-2g.10gb``, a
  mid-size model on ``mig-3g.20gb``, GPT-2 on one whole GPU, an LLM on 8 GPUs, small models on one time-sliced replica
  (only with time-sliced nodes), and CPU-only services (``KINDS``: each
  kind's request and its range of base replicas). Enough Deployments of each kind are drawn that, at the traffic peak,
  they ask ``PEAK_SHARE`` of what their pool offers in the starting layouts (GPU-equivalents: a MIG instance counts its
  compute slices, ``1g`` = 1/7 GPU; CPU-only services: cores). Each Deployment of two or more replicas has a PDB
  (maxUnavailable 1, ``day_replay.Day.disruption_allowed``).
* Traffic: every Deployment follows ``traffic(t) = 0.675 + 0.325 cos(2 pi (t - 14 h) / 24 h)`` (1.0 at 14:00, 0.35 at
  02:00; the day starts at 00:00) times its own noise (a factor drawn every hour, uniform 0.9..1.1): its replicas are
  ``max(1, round(base x traffic x noise))``, re-computed every ``SCALE_SECONDS`` (a HorizontalPodAutoscaler's sync
  period is 15 s, its scale-down stabilisation 5 min: the replicas follow the curve within minutes).
* Churn: each Deployment retires after an exponential life of mean ``MEAN_LIFE_HOURS`` (scaled to 0 and gone), and
  new models arrive as often as models retire in the steady state (Poisson, ``deployments / MEAN_LIFE_HOURS`` an hour),
  each of the kind of a Deployment drawn from the day's first ones (so the mix and the catalogue's size hold on
  average). A scale-down deletes pods as the ReplicaSet controller ranks them (``day_replay.Day.scale_down``).

What ``Day`` needs of it: the nodes (``ArticleNode``: ``extended`` are the MIG instances the device plugin advertises,
``physical_gpus`` the GPUs behind them), the common start (every Deployment's replicas at 00:00, the same for every
strategy), and the scaling tick (``Scaler``), which every strategy's day runs alike.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from day_replay import Arrival, Day, Workload
from generate_cluster import Shape
from trace_replay import TracePod

A100_40 = "NVIDIA-A100-SXM4-40GB"
MIG_1G, MIG_2G, MIG_3G = "nvidia.com/mig-1g.5gb", "nvidia.com/mig-2g.10gb", "nvidia.com/mig-3g.20gb"
GPU_SHARED = "nvidia.com/gpu.shared"  # a time-sliced replica, renamed (renameByDefault: true)
SLICED_REPLICAS = 4  # replicas per GPU on a time-sliced node (the GPU Operator's example)
MIG_PROFILES = (MIG_1G, MIG_2G, MIG_3G)
EXTENDED = (*MIG_PROFILES, GPU_SHARED)  # the extended resources of this world, in the order requests list them
# GPU-equivalents of one instance: its compute slices of the seven (the article's "GPU utilisation" counts compute);
# of a time-sliced replica, its share of the GPU's time
GPU_FRACTION = {MIG_1G: 1 / 7, MIG_2G: 2 / 7, MIG_3G: 3 / 7, GPU_SHARED: 1 / SLICED_REPLICAS}
# mig-parted layouts of an A100-40GB (per GPU), as the GPU Operator's default config names them
LAYOUTS = {
    "all-1g.5gb": {MIG_1G: 7},
    "all-2g.10gb": {MIG_2G: 3},
    "all-3g.20gb": {MIG_3G: 2},
    "all-balanced": {MIG_1G: 2, MIG_2G: 1, MIG_3G: 1},
}
A100_40_PCI_IDS = '["0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"]'  # mig-parted's A100-40GB device filter
GPUS_PER_NODE = 8
GPU_NODE = (96_000, 786_432)  # cpu milli, memory MiB
CPU_NODE = (32_000, 262_144)  # the article's CPU nodes: 32 cores, 256 GiB
SHARES = {"mig": 0.40, "gpu": 0.45, "cpu": 0.15}  # of the nodes
BALANCED_SHARE = 0.25  # of the MIG nodes, cut all-balanced; the rest all-1g.5gb
PEAK_SHARE = 1.0  # what each pool's Deployments ask at the traffic peak, of what it offers in the starting layouts
SCALE_SECONDS = 300.0
MEAN_LIFE_HOURS = 72.0  # a third of the models replaced in a day
TRAFFIC_PEAK_HOUR = 14.0


@dataclass(frozen=True, slots=True)
class ArticleNode:
    """A node as ``KubeScheduler`` and the replay's snapshot read it: ``gpus`` whole GPUs the device plugin
    advertises (0 on a MIG node), ``extended`` its MIG instances, ``physical_gpus`` the GPUs behind them, ``layout``
    its ``nvidia.com/mig.config`` ("" when not MIG-capable)."""

    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str
    extended: dict[str, int] = field(default_factory=dict)
    physical_gpus: int = 0
    layout: str = ""
    replicas: int = 0  # time-sliced: the replicas of each GPU (``nvidia.com/gpu.replicas``); 0: not time-sliced


@dataclass(frozen=True, slots=True)
class Kind:
    """A kind of model served: its request, its pool (``mig``, ``gpu`` or ``cpu``) and its base replicas' range."""

    name: str
    size: str  # its class in the tables (day_replay.SIZES)
    cpu_milli: int
    memory_mib: int
    gpus: int = 0
    mig: str = ""
    replicas: tuple[int, int] = (1, 1)
    shared: int = 0  # time-sliced replicas asked (``nvidia.com/gpu.shared``)

    @property
    def pool(self) -> str:
        return "mig" if self.mig else "gpu" if self.gpus else "shared" if self.shared else "cpu"

    def extended(self) -> tuple[int, ...]:
        return tuple(self.shared if name == GPU_SHARED else 1 if name == self.mig else 0 for name in EXTENDED)

    def gpu_equivalents(self) -> float:
        return self.gpus + (GPU_FRACTION[self.mig] if self.mig else 0.0) + self.shared * GPU_FRACTION[GPU_SHARED]

    def demand(self) -> float:
        """What one replica asks of its pool: GPU-equivalents, or cores for a CPU-only service."""
        return self.gpu_equivalents() if self.pool != "cpu" else self.cpu_milli / 1000


KINDS = (
    Kind("bert-base", "MIG 1g", 2_000, 8_192, mig=MIG_1G, replicas=(6, 24)),
    Kind("resnet-152", "MIG 2g", 4_000, 16_384, mig=MIG_2G, replicas=(4, 16)),
    Kind("mid-model", "MIG 3g", 6_000, 32_768, mig=MIG_3G, replicas=(2, 8)),
    Kind("gpt-2", "1 GPU", 8_000, 32_768, gpus=1, replicas=(2, 12)),
    Kind("llm", "8 GPUs", 64_000, 524_288, gpus=8, replicas=(1, 3)),
    Kind("small-model", "shared GPU", 2_000, 8_192, shared=1, replicas=(4, 16)),
    Kind("cpu-service", "CPU-only", 4_000, 8_192, replicas=(3, 12)),
)
MIG_SHARES = {MIG_1G: 0.40, MIG_2G: 0.35, MIG_3G: 0.25}  # of the MIG pool's peak demand, per profile
GPU_SHARES = {"gpt-2": 0.6, "llm": 0.4}  # of the whole-GPU pool's peak demand


def traffic(seconds: float) -> float:
    """The diurnal curve: 1.0 at 14:00, 0.35 at 02:00."""
    hours = seconds / 3600
    return 0.675 + 0.325 * math.cos(2 * math.pi * (hours - TRAFFIC_PEAK_HOUR) / 24)


def nodes_of(count: int, seed: int, *, time_sliced: float = 0.0) -> list[ArticleNode]:
    """``count`` nodes in the article's proportions (largest remainder), the MIG ones' layouts drawn with ``seed``;
    ``time_sliced``: that share of the nodes time-sliced, out of the whole-GPU ones."""
    mig, gpu = round(count * SHARES["mig"]), round(count * SHARES["gpu"])
    cpu = max(0, count - mig - gpu)
    sliced = min(gpu, round(count * time_sliced))
    gpu -= sliced
    rng = random.Random(f"{seed}:layouts")
    balanced = set(rng.sample(range(mig), round(mig * BALANCED_SHARE)))
    nodes = []
    for i in range(mig):
        layout = "all-balanced" if i in balanced else "all-1g.5gb"
        offered = {name: per_gpu * GPUS_PER_NODE for name, per_gpu in LAYOUTS[layout].items()}
        nodes.append(ArticleNode(f"mig-{i:04d}", *GPU_NODE, 0, A100_40, offered, GPUS_PER_NODE, layout))
    nodes += [ArticleNode(f"gpu-{i:04d}", *GPU_NODE, GPUS_PER_NODE, A100_40, {}, GPUS_PER_NODE) for i in range(gpu)]
    replicas = {GPU_SHARED: GPUS_PER_NODE * SLICED_REPLICAS}
    nodes += [
        ArticleNode(f"ts-{i:04d}", *GPU_NODE, 0, A100_40, replicas, GPUS_PER_NODE, replicas=SLICED_REPLICAS)
        for i in range(sliced)
    ]
    nodes += [ArticleNode(f"cpu-{i:04d}", *CPU_NODE, 0, "") for i in range(cpu)]
    return nodes


def node_layouts() -> dict[str, dict[str, int]]:
    """The MIG instances a MIG-capable node offers under each layout (``LAYOUTS`` are per GPU)."""
    return {name: {r: n * GPUS_PER_NODE for r, n in per_gpu.items()} for name, per_gpu in LAYOUTS.items()}


def mig_parted_config() -> str:
    """The GPU Operator's mig-parted config.yaml offering ``LAYOUTS`` to A100-40GB GPUs (a re-cut picks among them)."""
    lines = ["version: v1", "mig-configs:"]
    for name, per_gpu in LAYOUTS.items():
        devices = ", ".join(f'"{r.removeprefix("nvidia.com/mig-")}": {n}' for r, n in per_gpu.items())
        lines += [
            f"  {name}:",
            f"    - device-filter: {A100_40_PCI_IDS}",
            "      devices: all",
            "      mig-enabled: true",
            f"      mig-devices: {{{devices}}}",
        ]
    return "\n".join(lines) + "\n"


@dataclass
class Deployment:
    id: int
    kind: Kind
    base: int
    retires: float  # seconds; math.inf: never within the day

    def replicas(self, now: float, noise: float) -> int:
        if now >= self.retires:
            return 0
        return max(1, round(self.base * traffic(now) * noise))


@dataclass
class Catalogue:
    """The Deployments of the day, drawn once per seed (the same for every strategy): those at 00:00, then the new
    models' arrival times; each with its base replicas and when it retires."""

    deployments: list[Deployment]
    arrivals: list[tuple[float, Deployment]]  # (when, the Deployment created then)
    noise_seed: str

    def noise(self, deployment: Deployment, now: float) -> float:
        hour = int(now // 3600)
        return random.Random(f"{self.noise_seed}:{deployment.id}:{hour}").uniform(0.9, 1.1)


def catalogue(nodes: Sequence[ArticleNode], seconds: float, seed: int) -> Catalogue:
    """Deployments of each kind until their peak demand reaches ``PEAK_SHARE`` of their pool's offer, then the day's
    new models (Poisson arrivals) drawn ahead."""
    rng = random.Random(f"{seed}:deployments")
    offer = _offer(nodes)
    ids = iter(range(1_000_000))
    deployments: list[Deployment] = []
    for kind in KINDS:
        target = PEAK_SHARE * offer[kind.pool] * _share(kind)
        asked = 0.0
        while asked < target:
            deployment = Deployment(next(ids), kind, rng.randint(*kind.replicas), _retires(rng, 0.0))
            deployments.append(deployment)
            asked += deployment.base * kind.demand()
    arrivals: list[tuple[float, Deployment]] = []
    per_hour = len(deployments) / MEAN_LIFE_HOURS  # as many arrive as retire, in the steady state
    when = rng.expovariate(per_hour) * 3600
    while when < seconds:
        kind = rng.choice(deployments).kind
        arrivals.append((when, Deployment(next(ids), kind, rng.randint(*kind.replicas), _retires(rng, when))))
        when += rng.expovariate(per_hour) * 3600
    return Catalogue(deployments, arrivals, f"{seed}:noise")


def _retires(rng: random.Random, born: float) -> float:
    return born + rng.expovariate(1 / MEAN_LIFE_HOURS) * 3600


def _offer(nodes: Sequence[ArticleNode]) -> dict[str, float]:
    """What each pool offers: GPU-equivalents of the MIG instances and of the time-sliced replicas, whole GPUs, cores
    of the CPU-only nodes."""
    return {
        "mig": sum(n * GPU_FRACTION[r] for node in nodes for r, n in node.extended.items() if r in MIG_PROFILES),
        "shared": sum(n * GPU_FRACTION[r] for node in nodes for r, n in node.extended.items() if r == GPU_SHARED),
        "gpu": float(sum(node.gpus for node in nodes)),
        "cpu": sum(node.cpu_milli for node in nodes if not node.physical_gpus) / 1000,
    }


def _share(kind: Kind) -> float:
    if kind.mig:
        return MIG_SHARES[kind.mig]
    return GPU_SHARES.get(kind.name, 1.0)


def _pod(kind: Kind, deployment: int) -> TracePod:
    shape = Shape(kind.cpu_milli, kind.memory_mib, kind.gpus, 1000 if kind.gpus else 0)
    return TracePod(f"{kind.name}-{deployment}", shape, (A100_40,) if kind.gpus else ())


def arrival(deployment: Deployment, *, initial: bool = False) -> Arrival:
    kind = deployment.kind
    return Arrival(
        _pod(kind, deployment.id),
        math.inf,
        initial=initial,
        extended=kind.extended(),
        size=kind.size,
        group=deployment.id,
    )


def workload(cat: Catalogue) -> Workload:
    """The common start: every Deployment's replicas at 00:00, Deployment by Deployment; no trace arrivals (the
    ``Scaler`` creates and deletes the day's pods)."""
    initial = tuple(
        arrival(d, initial=True) for d in cat.deployments for _ in range(d.replicas(0.0, cat.noise(d, 0.0)))
    )
    return Workload(
        arrivals=iter(()),
        initial=initial,
        interval=math.inf,
        target_gpus=0.0,
        gpu_seconds_per_pod=0.0,
        max_life=math.inf,
        max_replicas=1,
    )


class Scaler:
    """Every ``SCALE_SECONDS``: new models created, retired ones scaled to 0, every Deployment's replicas set to what
    the traffic asks (the same tick in every strategy's day)."""

    def __init__(self, cat: Catalogue) -> None:
        self.cat = cat
        self.live = list(cat.deployments)
        self.pending = list(cat.arrivals)

    def __call__(self, day: Day) -> None:
        while self.pending and self.pending[0][0] <= day.now:
            self.live.append(self.pending.pop(0)[1])
        for deployment in list(self.live):
            wanted = deployment.replicas(day.now, self.cat.noise(deployment, day.now))
            have = len(day.groups.get(deployment.id, ()))
            if wanted > have:
                for _ in range(wanted - have):
                    day.create(arrival(deployment))
            elif wanted < have:
                day.scale_down(deployment.id, have - wanted)
            if wanted == 0:
                self.live.remove(deployment)
