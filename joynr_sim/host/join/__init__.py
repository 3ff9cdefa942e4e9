"""Hosts on other machines: ``joynr-sim host --join RUN`` (``console``) runs a ``supervisor``
that starts host processes for the runners of that run; they talk over the run's first broker
(``mqtt_channel``: topics, one paho connection) with the control protocol, the joined host's
own ops (``ops``) besides; ``joined_hosts`` is the runner's side."""
