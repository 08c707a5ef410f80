"""How an A/B pair is measured and judged: ``AbSettings``, the defaults of ``reportgen ab``.

Its own light module (dataclasses only) so that the CLI can show these defaults in ``--help`` without importing the
coordinator or the statistics.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from reportgen.analysis.paired import MIN_SESSIONS_FOR_INTERVAL
from reportgen.errors import UsageError

CLOCKS = ("wall", "cpu")
"""What times a sample: the wall clock, or the worker process's CPU time (CPU device only)."""
HUGE_PAGES_ENV = {"THP_MEM_ALLOC_ENABLE": "1"}
"""What ``--huge-pages`` sets in both workers' environment: torch's CPU allocator then aligns its large allocations
to 2 MiB and asks the kernel for transparent huge pages for them (``madvise``), one page fault per 2 MiB instead
of per 4 KiB."""
IDLE_THREADS_ENV = {"OMP_WAIT_POLICY": "PASSIVE"}
"""Set in both workers unless the caller's environment sets ``OMP_WAIT_POLICY`` itself: the idle side's OpenMP
threads sleep instead of spinning on a core while the other side measures. With OpenMP's default (spinning), an
A/A of one elementwise op over 16 MiB measured the head side about 16 % faster on this 2-core VM (head/base 0.843 and
0.844) and called it an improvement; with it, no change (docs/ab-testing.md, "The idle side's spinning threads")."""
HUGE_PAGES_TEXT = " ".join(f"{k}={v}" for k, v in HUGE_PAGES_ENV.items())
"""``HUGE_PAGES_ENV`` as the method text and the stored runs' notes name it."""
CPU_DEFAULT_THREADS = 1
"""torch intra-op threads per worker on the CPU unless ``--threads`` says otherwise. With one thread and huge pages
(``huge_pages`` None: on where the kernel gives them on request), under load on reportgen's 2-core VM a 10 % slowdown
was detected in 30 of 30 pairs and none of 120 unchanged-variant verdicts was a regression, where torch's default
(one thread per core, 4 KiB pages) mostly answered *inconclusive* (docs/ab-testing.md, "On a shared CPU runner").
What such a verdict cannot see: how the op scales over several threads (``--threads N`` measures that)."""

MAX_ROUNDS_PER_SESSION = 1_000
"""Most rounds in one session: the time budget is checked between sessions, so a session must end."""
MAX_SAMPLES_PER_BLOCK = 1_000
"""Most samples per variant per side per round (the default is 1; long blocks see the machine change under them)."""
MAX_SECONDS = 86_400.0
"""Longest time budget, one day: a budget must be a finite time."""


ORDER_SEEDS = 2**32
"""Seeds of the sessions' orders: 0 .. 2**32 - 1 (a pair draws one when none is given)."""


def session_cpu(cpus: AbstractSet[int], session: int) -> int:
    """The CPU both workers of session ``session`` (0-based) run on: the usable CPUs in turn, lowest first."""
    ordered = sorted(cpus)
    return ordered[session % len(ordered)]


@dataclass(frozen=True)
class AbSettings:
    """How a pair is measured and judged."""

    threshold_pct: float = 5.0
    precision_pct: float = 1.0
    """A *no change* ends the pair only once its interval's half-width is at most this (percent); until then, and
    within the budget, sessions go on (``analysis.paired.settled``). 0: stop at the first interval inside the
    threshold."""
    memory_threshold_pct: float = 0.0
    """Growth of an exact memory figure that counts as a regression (0: any; see reportgen.compare.memory)."""
    min_sessions: int = 6
    # Fine interleaving: blocks of 1 sample, 64 rounds per session. With blocks of 8 samples (and 1 discarded) the
    # sessions of an A/A pair spread about twice as much at the default shape: this VM's speed switches between
    # levels ~30 % apart within a second, so blocks far apart in time see different machines
    # (benchmarks/results/ab_granularity_idle.json). Blocks of 2 samples and 16 rounds (the default until
    # 2026-12-07) needed about twice the time of 1 sample and 64 rounds for the same spread on a 16 MiB row sum
    # (sd of A/A sessions 6.2 % at 0.57 s a session against 3.3 % at 1.02 s), and no more on `x * 1.5`
    # (benchmarks/results/ab_block_shape_*.json; benchmarks/README.md, "One sample per block").
    rounds_per_session: int = 64
    max_sessions: int = 100
    max_seconds: float = 150.0  # budget for the whole measurement: every session's loading, compiling and rounds
    samples_per_block: int = 1
    discard_per_block: int = 0  # untimed samples at the start of each block (each side's blocks alike, so ABBA-fair)
    warmup: int = 3
    shape: tuple[int, ...] | None = None  # None: the base scenario's default
    dtype: str | None = None
    seed: int = 0  # the inputs' seed
    order_seed: int | None = None  # the seed of the sessions' spawn and opening orders (None: drawn per pair, recorded)
    calibrate: bool = False  # an A/A of the base against itself that calibrates this runner (reportgen ab --calibrate)
    variants: tuple[str, ...] | None = None  # None: every variant of either side
    device: str = "auto"
    threads: int | None = None  # torch intra-op threads in both workers (None: CPU_DEFAULT_THREADS on the CPU, else
    # torch's default)
    clock: str = "wall"  # "wall", or "cpu": each sample timed by the worker's CPU time (user + system, all threads)
    huge_pages: bool | None = None  # CPU: both workers' torch allocator asks for transparent huge pages
    # (HUGE_PAGES_ENV); None: where the kernel gives them on request (``thp_on_request``), False: never
    same_cpu: bool = True
    """CPU, one thread per worker: both workers of a session run on one CPU, the session's (``session_cpu``), so a
    difference between this machine's CPUs is the same for both sides instead of a difference between them.
    Sessions take the usable CPUs in turn. Measured on this project's 2-core VM: an A/A session's spread 5.9 % -> 2.5 %
    (docs/ab-testing.md, "Both workers on one CPU"). False (``--no-same-cpu``): the scheduler places them."""
    thp_on_request: bool = False  # this kernel's THP mode is always or madvise (set by the command, not a flag)
    params: tuple[tuple[str, str], ...] = ()  # --param NAME=VALUE: each side's scenario must declare NAME
    param_defaults: tuple[tuple[str, str], ...] = ()  # the config's params: used where a side's scenario declares them
    neuron_cores: tuple[int, int] | None = None  # Trainium: the two NeuronCores the workers take, swapped every session

    @property
    def wants_huge_pages(self) -> bool:
        """Whether the workers are started with ``HUGE_PAGES_ENV`` (it changes only CPU allocations)."""
        return self.huge_pages if self.huge_pages is not None else self.thp_on_request

    def check(self) -> None:
        """Refuse settings that cannot give a verdict; the message starts with the request field (the CLI shows
        it as its flag)."""
        if not self.threshold_pct > 0:
            raise UsageError(f"threshold {self.threshold_pct:g}: must be a positive percentage, e.g. 5",
                             field="threshold")
        if not 0 <= self.precision_pct < self.threshold_pct:
            raise UsageError(f"precision {self.precision_pct:g}: must be at least 0 (0: stop at the first no change) "
                             f"and below the threshold ({self.threshold_pct:g})", field="precision")
        if self.order_seed is not None and not 0 <= self.order_seed < ORDER_SEEDS:
            raise UsageError(f"order_seed {self.order_seed}: must be between 0 and {ORDER_SEEDS - 1} (a pair's "
                             "JSON and stored runs record the one it used)", field="order_seed")

        if self.min_sessions < MIN_SESSIONS_FOR_INTERVAL:
            raise UsageError(f"sessions {self.min_sessions}: must be at least {MIN_SESSIONS_FOR_INTERVAL} "
                             "(fewer sessions have no 95 % interval)", field="sessions")
        if self.min_sessions > self.max_sessions:
            raise UsageError(f"sessions {self.min_sessions}: must be at most {self.max_sessions}", field="sessions")
        if self.rounds_per_session < 2 or self.rounds_per_session % 2:
            raise UsageError(f"rounds {self.rounds_per_session}: must be an even number >= 2 (ABBA pairs)",
                             field="rounds")
        if self.rounds_per_session > MAX_ROUNDS_PER_SESSION:
            raise UsageError(f"rounds {self.rounds_per_session}: must be at most {MAX_ROUNDS_PER_SESSION:,}",
                             field="rounds")
        if not self.max_seconds > 0:
            raise UsageError(f"max_seconds {self.max_seconds:g}: must be positive", field="max_seconds")
        if not self.max_seconds <= MAX_SECONDS:
            raise UsageError(f"max_seconds {self.max_seconds:g}: must be at most {MAX_SECONDS:,.0f} (one day)",
                             field="max_seconds")
        if self.clock not in CLOCKS:
            raise UsageError(f"clock {self.clock!r}: choose {' or '.join(CLOCKS)}", field="clock")
        from reportgen.scenario.loader import check_threads

        check_threads(self.threads)
        if self.samples_per_block < 1:
            raise UsageError(f"samples {self.samples_per_block}: must be at least 1", field="samples")
        if self.samples_per_block > MAX_SAMPLES_PER_BLOCK:
            raise UsageError(f"samples {self.samples_per_block}: must be at most {MAX_SAMPLES_PER_BLOCK:,}",
                             field="samples")
        if not 0 <= self.discard_per_block <= MAX_SAMPLES_PER_BLOCK:
            raise UsageError(f"discard {self.discard_per_block}: must be between 0 and {MAX_SAMPLES_PER_BLOCK:,}",
                             field="discard")


def samples_text(count: int) -> str:
    """``1 sample``, ``2 samples``: a block's size in words (the method text, the progress lines)."""
    return f"{count} sample" if count == 1 else f"{count} samples"


def method_text(samples_per_block: int, discard_per_block: int, clock: str = "wall", huge_pages: bool = False,
                cache_flush_bytes: int = 0, device_clock: bool = False,
                neuron_cores: tuple[int, int] | None = None) -> str:
    """How a pair measured with these block settings is judged, in words (stored with the runs, shown in the comment)."""
    untimed = f" after {discard_per_block} untimed" if discard_per_block else ""
    timed = ("samples timed by each worker's CPU time (user + system, all its threads), not the wall clock; "
             if clock == "cpu" else "")
    flushed = (f"each sample one call after {cache_flush_bytes / 2**20:.0f} MiB written to flush the device cache "
               "(outside the timing); " if cache_flush_bytes else "")
    device = "samples timed by the device's own clock (events around each call); " if device_clock else ""
    cores = (f"each worker on its own NeuronCore (NEURON_RT_VISIBLE_CORES {neuron_cores[0]} and {neuron_cores[1]}), "
             "the two sides swapping cores every session; " if neuron_cores else "")
    huge = ("torch's large CPU allocations in transparent huge pages in both workers "
            f"({HUGE_PAGES_TEXT}); " if huge_pages else "")
    block = f"{samples_text(samples_per_block)}{untimed}"
    return (f"{timed}{device}{flushed}{cores}{huge}median of each side's block of {block} "
            "per variant per round, ratio head/base per round, rounds in ABBA order, which side is started first and "
            "which opens drawn per session (balanced over each two); each session (a fresh pair of "
            "worker processes) gives the centre of its ABBA pairs of rounds' ratios; Wilcoxon signed-rank 95 % interval "
            "(Hodges-Lehmann, exact null distribution) for the centre of the logs of the sessions' ratios")
