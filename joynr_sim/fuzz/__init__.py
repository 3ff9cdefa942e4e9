"""Hostile frames for a running simulation: Hypothesis strategies that build well-formed
joynr frames carrying hostile values (``frames``), and a harness that sends them over MQTT
and WebSocket and accounts for every one in the trace (``harness``). ``python -m
joynr_sim.fuzz`` (``make fuzz``) is the long run."""
