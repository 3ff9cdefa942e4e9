VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3

.PHONY: setup test demo bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

test: setup
	$(PY) -m pytest -q

# The scenario library on the embedded amqtt brokers, then the Spark checks of its traces.
demo: setup
	rm -rf runs/demo
	$(VENV)/bin/joynr-sim run scenarios/ --out runs/demo
	$(VENV)/bin/joynr-sim check runs/demo

bench: setup
	$(PY) -m bench

clean:
	rm -rf $(VENV) runs bench/results *.egg-info
