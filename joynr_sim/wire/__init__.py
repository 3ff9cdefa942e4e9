"""Wires: the byte forms in which joynr's own runtimes exchange messages.

A wire is a pair of pure functions, bytes to a value and back, with no I/O: the
simulator's transports keep their own msgpack frame (``joynr_sim.core.message``); a
wire here is what a real joynr cluster controller or libjoynr would send and accept.

- ``smrf``: SMRF, joynr's binary frame (an 8-byte prefix and a FlatBuffers table of
  recipient, sender, ttl, a header map and a body), as joynr's Java, C++ and JavaScript
  SMRF libraries write it.
- ``joynr``: a ``JoynrMessage`` in a SMRF frame, with joynr's header keys and values.
- ``payloads``: joynr's JSON payloads (Request, Reply, OneWayRequest, the subscription
  messages) from and to the simulator's payload content.

Every decoder treats its input as hostile: each value is checked where it enters, and a
bad one raises ``joynr_sim.core.message.MessageDecodeError`` (or a subclass) naming it.
"""
