# The two commands: `make run` (try the portal) and `make test` (pass the tests).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8000
export DATABASE_URL_TEST ?= postgres://postgres@127.0.0.1:5432/gpu_portal
export REDIS_URL_TEST ?= redis://127.0.0.1:6379/0

.PHONY: run test lint format install install-dev bench clean

$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

$(VENV)/.installed-dev: requirements-dev.txt $(VENV)/.installed
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

## run: set up and start the portal on its embedded default (SQLite, sandbox cluster)
run: install
	$(PY) manage.py migrate --noinput
	$(PY) manage.py seed_demo
	$(PY) manage.py rundev --port $(PORT)

## test: set up and run the whole suite against real PostgreSQL and Redis
test: install-dev
	DATABASE_URL=$${DATABASE_URL:-$$DATABASE_URL_TEST} REDIS_URL=$${REDIS_URL:-$$REDIS_URL_TEST} \
		$(PY) scripts/check_services.py
	DATABASE_URL=$${DATABASE_URL:-$$DATABASE_URL_TEST} REDIS_URL=$${REDIS_URL:-$$REDIS_URL_TEST} \
		$(PY) manage.py makemigrations --check --dry-run
	DATABASE_URL=$${DATABASE_URL:-$$DATABASE_URL_TEST} REDIS_URL=$${REDIS_URL:-$$REDIS_URL_TEST} \
		$(PY) -m pytest $(PYTEST_ARGS)

lint: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: install-dev
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

bench: install-dev
	for b in bench/*.py; do $(PY) $$b || exit 1; done

clean:
	rm -rf var staticfiles
