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

demo: setup
	$(VENV)/bin/joynr-sim policies

bench: setup
	$(PY) -m bench

clean:
	rm -rf $(VENV) runs bench/results *.egg-info
