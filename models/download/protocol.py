"""The download child's wire format: the one job line it reads and the event lines it writes.

Wire format (an invariant shared by parent and child): models/json_lines.py's JSON lines,
with an "event" tag naming the dataclass (the job line is the plain JSON object of a Job).
JSON, never pickle. Unknown keys are ignored on decode, so either side may add optional fields. The job line is the only place the Hub
token ever travels (stdin, never argv or the environment); no event may carry it.

After `Planned` the child waits for one more line on stdin: "go" starts the transfer,
anything else (or end of input) makes it exit without touching the disk. That is where
the parent runs the disk-space preflight. From then on, end of input means "stop now".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, fields

from models.json_lines import LineError, TaggedCodec, dump_line, load_object

GO = "go"


class ProtocolError(LineError):
    """A line that is not a valid job or event (a ValueError)."""


@dataclass(frozen=True)
class TransferPolicy:
    """How hard the child tries. Tests shrink the times; the defaults are for real networks."""

    stall_timeout: float = 30.0  # no bytes for this long = a stall (retried)
    connect_timeout: float = 20.0
    max_attempts: int = 8  # consecutive failed attempts without progress before giving up
    backoff_base: float = 1.0  # first wait; doubles each attempt
    backoff_max: float = 60.0
    progress_interval: float = 0.2  # at most ~5 progress events a second


@dataclass(frozen=True)
class Job:
    repo: str
    filenames: tuple[str, ...]  # one file, or every part of a split model
    revision: str | None  # None = main; all files are fetched at the commit it resolves to
    token: str | None  # secret: only ever on the child's stdin
    partial_dir: str
    dest_dir: str
    policy: TransferPolicy = TransferPolicy()

    def to_line(self) -> str:
        return dump_line(asdict(self)).decode("ascii")

    @classmethod
    def from_line(cls, line: str) -> Job:
        try:
            data = load_object(line, ProtocolError)
        except ProtocolError:  # never quote the line: it holds the token
            raise ProtocolError("not a download job: not a JSON object") from None
        try:
            policy = TransferPolicy(**{f.name: data["policy"][f.name] for f in fields(TransferPolicy) if f.name in data.get("policy", {})})
            return cls(
                repo=str(data["repo"]),
                filenames=tuple(str(f) for f in data["filenames"]),
                revision=data.get("revision"),
                token=data.get("token"),
                partial_dir=str(data["partial_dir"]),
                dest_dir=str(data["dest_dir"]),
                policy=policy,
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise ProtocolError(f"not a download job: {type(exc).__name__}") from None


# ---- events: child -> parent (Paused and Cancelled come from the parent itself) ----------


@dataclass(frozen=True)
class Planned:
    """Every file's size and hash at one commit, before any byte of a body is fetched."""

    commit: str
    filenames: tuple[str, ...]
    sizes: tuple[int, ...]
    sha256s: tuple[str, ...]
    have: tuple[int, ...]  # bytes already in each partial file (a resume)

    @property
    def total(self) -> int:
        return sum(self.sizes)

    @property
    def remaining(self) -> int:
        return sum(self.sizes) - sum(self.have)


@dataclass(frozen=True)
class Started:
    total: int
    resumed_from: int


@dataclass(frozen=True)
class Progress:
    bytes_done: int
    total: int
    speed: float  # bytes/s, recent average
    eta: float | None  # seconds; None while the speed is unknown

    @property
    def fraction(self) -> float:
        return self.bytes_done / self.total if self.total else 0.0


@dataclass(frozen=True)
class Retrying:
    attempt: int
    reason: str
    wait: float  # seconds before the next attempt


@dataclass(frozen=True)
class Finished:
    """All files verified against the Hub's sha256 and moved into the models folder."""

    repo: str
    commit: str
    filenames: tuple[str, ...]
    paths: tuple[str, ...]
    sha256s: tuple[str, ...]

    @property
    def path(self) -> str:
        """The file to load and register: the only file, or part 1 of a split model."""
        return self.paths[0]

    @property
    def sha256(self) -> str:
        return self.sha256s[0]


@dataclass(frozen=True)
class Failed:
    message: str  # one sentence for the person


@dataclass(frozen=True)
class Paused:
    bytes_done: int
    total: int


@dataclass(frozen=True)
class Cancelled:
    pass


DownloadEvent = Planned | Started | Progress | Retrying | Finished | Failed | Paused | Cancelled
_TAGS: dict[type, str] = {
    Planned: "planned",
    Started: "started",
    Progress: "progress",
    Retrying: "retrying",
    Finished: "finished",
    Failed: "failed",
    Paused: "paused",
    Cancelled: "cancelled",
}
_CODEC: TaggedCodec[DownloadEvent] = TaggedCodec(
    "event",
    {tag: cls for cls, tag in _TAGS.items()},
    error=ProtocolError,
    tuples=True,  # the events declare tuples
    what="download event",
)


def encode(event: DownloadEvent) -> str:
    """One line of JSON (ending in a newline) for `event`, for the child's text stream."""
    return _CODEC.encode(event).decode("ascii")


decode: Callable[[bytes | str], DownloadEvent] = _CODEC.decode  # a line back into its event; raises ProtocolError
