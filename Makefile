VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3

.PHONY: setup lint docs test test-fast test-networks demo bench bench-quick fuzz mutate clean

CHROMIUM := /usr/bin/chromium
SMRF_JS := tests/smrf_node/node_modules/.package-lock.json

setup: $(VENV)/.installed $(CHROMIUM) $(SMRF_JS)

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

# The report tests open pages in Debian's chromium (driven by Playwright); a fresh machine
# gets it here. apt-get needs root, as CI has.
$(CHROMIUM):
	DEBIAN_FRONTEND=noninteractive apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get install -y chromium

# The wire tests run joynr's own JavaScript SMRF library (npm smrf, pinned with its lock file)
# under Debian's Node; a machine without Node gets it here.
$(SMRF_JS): tests/smrf_node/package-lock.json
	command -v npm >/dev/null || (DEBIAN_FRONTEND=noninteractive apt-get update && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y nodejs npm)
	cd tests/smrf_node && npm ci --no-audit --no-fund

# The import contracts and the linter (both configured in pyproject.toml).
lint: setup
	$(VENV)/bin/lint-imports
	$(VENV)/bin/ruff check .

# The manual (docs/, mkdocs.yml) into site/; --strict fails on a broken link or anchor, a page
# outside the nav or a hook that fails (docs/hooks.py writes the reference pages and the
# benchmark table at each build).
docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# Everything: the lint, the docs build, then every tier of tests; the scenario library runs
# whole on the memory network and as a sample on the real brokers.
test: lint docs
	$(PY) -m pytest -q -m "not networks"

# The whole scenario library on the real brokers too: one contract on three networks.
test-networks: setup
	$(PY) -m pytest -q -m networks

# The tests that start no broker, runtime, Spark or PostgreSQL: a minute, not ten.
test-fast: setup
	$(PY) -m pytest -q -m "not e2e and not spark and not postgres"

# The scenario library on the embedded amqtt brokers, the Spark checks of its traces, then
# the HTML report (its index is printed); the report is written also when a step or a check
# failed, and the target fails after it.
demo: setup
	rm -rf runs/demo
	$(VENV)/bin/joynr-sim run scenarios/ --out runs/demo; run=$$?; \
	$(VENV)/bin/joynr-sim check runs/demo; check=$$?; \
	$(VENV)/bin/joynr-sim report runs/demo && [ $$run -eq 0 ] && [ $$check -eq 0 ]

# Every benchmark; bench/results/ gets the JSON. bench-quick: smaller sizes (the Spark
# checker at 100k and 1M events instead of 1M and 10M), for a smoke run.
bench: setup
	$(PY) -m bench

bench-quick: setup
	$(PY) -m bench --quick

# 100,000 hostile frames over MQTT and WebSocket, then a flood from one sender, anonymous and
# cross-identity CONNECTs and WebSocket clients without a token; a table of outcomes,
# fuzz-report.json.
fuzz: setup
	$(PY) -m joynr_sim.fuzz --frames 100000

# The mutation score of the pure rules (joynr_sim/core: policies, router, gcd, lcd, discovery,
# multicast, subscriptions, links) against the fast tier's unit tests: mutmut, configured in
# pyproject.toml ([tool.mutmut]); a table of killed and survived mutants per module and
# bench/results/mutation.json. Slow: about an hour on two idle cores, most of it the links
# (mutants/ keeps the verdicts: MUTATE_ARGS=--pending reruns only what survived, after new
# tests; MUTATE_ARGS='router lcd' some modules; --report only the table).
mutate: setup
	nice -n 15 $(PY) -m bench.mutation --max-children 2 $(MUTATE_ARGS)

clean:
	rm -rf $(VENV) runs bench/results *.egg-info fuzz-report.json site
