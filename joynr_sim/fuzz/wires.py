"""What the fuzzer needs of a wire (``joynr_sim.wire.codecs``): the strategy that draws its
hostile frames, how to read a frame's own id and hop count (the key of its fate), and its
replyTo topic (for the report), each by the wire's name, so that a worker process given
only the name draws the same frames."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hypothesis.strategies import SearchStrategy

from ..core.message import JoynrMessage
from ..wire.codecs import JOYNR, JOYNR_SIM, codec
from . import frames, frames_joynr


@dataclass(frozen=True)
class FrameSource:
    hostile_frames: Callable[[list[str]], SearchStrategy[bytes]]
    frame_key: Callable[[bytes], tuple[str, int] | None]
    reply_topic: Callable[[bytes], str | None]


SOURCES = {
    JOYNR_SIM: FrameSource(frames.hostile_frames, frames.frame_key, frames.reply_topic),
    JOYNR: FrameSource(frames_joynr.hostile_joynr_frames, frames_joynr.frame_key, frames_joynr.reply_topic),
}


def source(wire: str) -> FrameSource:
    """The frame source of ``wire``; a ValueError naming the choices for any other."""
    return SOURCES[codec(wire).name]


def valid_frame(wire: str, to: str, sender: str | None = None) -> bytes:
    """A valid request with a fresh id (``frames.valid_message``) as ``wire`` writes it."""
    message: JoynrMessage = frames.valid_message(to, sender)
    return codec(wire).encode(message)
