# Two commands on a fresh machine: `make demo` and `make test`. Each installs what it needs.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
DEBS   := prometheus-alertmanager prometheus chromium
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: install system-deps lint test test-unit test-integration demo bench clean

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q -U pip
	# The CPU wheel first: an unpinned torch would pull several GB of CUDA packages.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

system-deps:
	@missing=""; for b in $(DEBS); do command -v $$b >/dev/null || missing="$$missing $$b"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(DEBS) >/dev/null; \
	fi
	@# the dashboard's app.js runs under node in the tests
	@command -v node >/dev/null || { echo "installing Debian package: nodejs"; apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs >/dev/null; }

install: $(STAMP) system-deps

# Style and types ([tool.ruff] and [tool.mypy] in pyproject.toml); tests/unit/deploy/test_checks.py plants an
# error of each kind and sees it refused.
CHECKED := services streams clustering runbooks tests bench
lint: $(STAMP)
	$(VENV)/bin/ruff check $(CHECKED)
	$(VENV)/bin/ruff format --check $(CHECKED)
	$(VENV)/bin/mypy

# Two workers, a test file each: most tests wait on a broker, a worker process or a browser, so the
# second core is idle otherwise (--dist loadfile keeps each file's module fixtures in one process).
test: install lint
	$(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadfile tests

# The fast lane, under 3 minutes on 2 cores: ruff, then the unit tests that need no broker, browser or other
# process and are not marked slow (--fast: tests/support/lanes.py). No mypy: from a cold cache it alone takes a
# minute (`make lint` runs it).
.PHONY: test-fast
test-fast: install
	$(VENV)/bin/ruff check $(CHECKED)
	$(VENV)/bin/ruff format --check $(CHECKED)
	$(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadfile --fast tests/unit

test-unit: install
	$(PY) -m pytest -q -n 2 --dist loadfile tests/unit

test-integration: install
	$(PY) -m pytest -q -n 2 --dist loadfile tests/integration tests/e2e

demo: $(STAMP)
	$(VENV)/bin/claimwatch demo

bench: install
	$(PY) bench/ingest.py
	$(PY) bench/drift.py
	$(PY) bench/clustering.py

# docs/performance.md, a plot per figure in docs/figures/ and the README's suite time, from bench/results/*.jsonl
# (a bench run with --record appends to them). The plots need matplotlib, from the bench extra.
.PHONY: figures
figures: $(STAMP)
	@$(PY) -c 'import matplotlib' 2>/dev/null || $(PY) -m pip install -q -e '.[bench]'
	$(PY) bench/figures.py

clean:
	rm -rf var test-output
