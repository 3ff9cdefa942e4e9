"""What starts, asks and kills host processes on this machine: the runner's ``HostProcess``
and the ``HostPool`` it takes them from, the fork server that forks them (``children``), the
``HostGroup``s that share one among several runtimes, the host process's own entry
(``entry``, ``python -m joynr_sim.host``) and the loop it runs on (``event_loop``), and what
is measured of one (``profiling``, ``peak_memory``)."""
