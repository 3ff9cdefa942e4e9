"""The ops of a joined host itself (worker 0 on the control topics, ``mqtt_channel``): greet
it, start a worker process, end one. Defined once each, as a host process's are
(``rpc.ops``): the supervisor carries each out in ``on_<op>``, the runner asks it from
``JoinedHosts`` or ``JoinedProcess``."""

from __future__ import annotations

from typing import Annotated, TypedDict

import msgspec

from ..rpc.framing import VERSION, FieldError
from ..rpc.op import EXIT_TIMEOUT_S, GREET_TIMEOUT_S, Op, registry


class Greeting(TypedDict):
    pid: int
    host: str
    address: str
    cores: int


class Greet(Op, tag="hello"):
    """The host's name, the address its cluster controllers listen on, its pid and cores."""
    result = Greeting
    version: int

    def __post_init__(self) -> None:
        if self.version != VERSION:
            raise FieldError("version", f"{self.version}, this host speaks {VERSION}")

    def timeout_s(self) -> float:
        return GREET_TIMEOUT_S


class Spawned(TypedDict):
    worker: Annotated[int, msgspec.Meta(ge=1)]  # its pid


class Spawn(Op, tag="spawn"):
    """A worker process for the runner's session, writing under the run directory's name."""
    result = Spawned
    run_dir: str

    def timeout_s(self) -> float:
        return GREET_TIMEOUT_S


class Ended(TypedDict):
    exitcode: int | None


class End(Op, tag="end"):
    """End a worker: SIGKILL (a crash) or asked to exit; reaped before the answer."""
    result = Ended
    worker: int
    kill: bool

    def timeout_s(self) -> float:
        return EXIT_TIMEOUT_S * 2


SUPERVISOR_OPS = registry(Greet, Spawn, End)
