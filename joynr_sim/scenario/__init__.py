"""Scenarios: the YAML format, its loader and the model the runner executes."""

from .loader import ScenarioError, load_scenario, load_scenarios, parse_scenario
from .model import Reproduces, RuntimeSpec, Scenario, Step

__all__ = [
    "Reproduces", "RuntimeSpec", "Scenario", "ScenarioError", "Step",
    "load_scenario", "load_scenarios", "parse_scenario",
]
