"""Runtimes in host processes, in three rooms:

``process``  what starts, asks and kills host processes on this machine: the fork server and
             its children, the event loop a host runs on, the host pool and host groups, the
             host process's entry (``python -m joynr_sim.host``), profiling, peak memory;
``rpc``      the control protocol: frames, the ops (``rpc.ops``, each defined once), the
             host's side that carries them out, and the runner's handles on the host and on
             its runtimes (``RuntimeHandle``s, as the in-process runtimes are);
``join``     hosts on other machines: ``joynr-sim host --join``, its supervisor, the control
             protocol over MQTT and the runner's side of a joined run.
"""
