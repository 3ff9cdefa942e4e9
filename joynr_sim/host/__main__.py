"""``python -m joynr_sim.host --control-fd N --query-fd M``: a host process started as a
program of its own (``process.entry``)."""

from .process.entry import main

if __name__ == "__main__":
    main()
