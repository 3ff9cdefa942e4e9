"""The trace checker: a PySpark application that re-derives the seeds' rules as data.

It reads trace schema v1 (docs/design/trace.md) with an explicit schema and never imports
the simulator: a checker that reuses the code it checks cannot find that code's bugs.
"""
