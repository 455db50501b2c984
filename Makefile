PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: demo test lint bench

# Production is the default (DEBUG=False needs SECRET_KEY and PRBENCH_ENCRYPTION_KEYS); the
# demo and the type checker run on this machine only, so they ask for DEBUG themselves (the
# bench scripts set production settings of their own).
demo lint: export DEBUG ?= True

$(VENV)/.installed: requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

# The demo's providers (the mock, a local model server) live on this machine: allow loopback
# only, unless the environment already says otherwise.
demo: export PRBENCH_ALLOWED_PRIVATE_NETWORKS ?= 127.0.0.0/8,::1/128
# Someone is watching the terminal: readable lines rather than JSON.
demo: export PRBENCH_LOG_FORMAT ?= plain
demo: $(VENV)/.installed
	$(PY) manage.py migrate --noinput
	$(PY) manage.py demo

test: $(VENV)/.installed
	$(PY) -m pytest -n 2

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	# django-stubs loads the settings, which refuse to start without a SECRET_KEY unless DEBUG is on.
	DEBUG=True $(VENV)/bin/mypy .
	$(VENV)/bin/lint-imports

bench: $(VENV)/.installed
	$(PY) bench/overhead.py
