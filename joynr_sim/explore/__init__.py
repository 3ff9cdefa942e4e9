"""Explore: random schedules of steps and faults, judged by the Spark checks, and the
failing ones shrunk to the smallest scenario that still fails the same way."""
