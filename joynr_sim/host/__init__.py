"""Runtimes in host processes: the host process (``python -m joynr_sim.host``), the control
protocol it speaks (``protocol``) and the runner's handles on its runtimes (``handles``)."""
