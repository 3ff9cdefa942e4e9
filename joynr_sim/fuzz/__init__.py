"""Hostile input for a running simulation: Hypothesis strategies that build well-formed
joynr frames carrying hostile values (``frames``), a harness that sends them over MQTT and
WebSocket and accounts for every one in the trace (``harness``, ``fates``), then one
client's flood of valid requests (``insiders``, ``publisher``) and CONNECTs and WebSocket
connections under identities not their own (``intruders``). ``python -m joynr_sim.fuzz``
(``make fuzz``) is the long run."""
