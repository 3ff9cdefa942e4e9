"""Host processes placed, started and watched by Ray (``Simulation(hosts="ray")``)."""
