"""The control protocol between the runner and a host process: frames and envelopes
(``framing``), errors by name (``errors``), the ops, each one struct defined once (``op``,
``ops``, with the ``specs`` a runtime is created from and routing entries on the ``wire``);
the host's side, which carries each op out (``dispatch``) and answers the channels
(``server``); and the runner's side: a handle on a host (``host_handle``) and on each
runtime in one (``handles``, ``kinds``, with its views and subscriptions)."""
