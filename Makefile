# specdec.serve — every entry point. `make demo` and `make test` do all set-up on a fresh
# Debian/Ubuntu machine: venv, requirements, a docker engine if none answers, the lab images.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
LAB := $(BIN)/python lab/lab.py
export PATH := $(abspath $(BIN)):$(PATH)
export ANSIBLE_CONFIG := $(abspath ansible.cfg)
SCENARIOS ?=
LAB_HOSTS := --host lab-spark-01:spark-nodes --host lab-spark-02:spark-nodes \
             --host lab-b200-01:b200-nodes --host lab-b200-02:b200-nodes

.PHONY: help venv docker images real-engine lab-up lab-down hub demo test test-arm64 checks unit lint sanity molecule bench clean ee

help:
	@echo "make demo       bring the lab up and run site.yml -l spark-nodes on it"
	@echo "make test       every test: unit, ansible-lint, ansible-test sanity, the EE build, molecule"
	@echo "make test-arm64 the aarch64 lane: the whole Spark converge on an arm64 VM (not part of make test)"
	@echo "make lab-up     four lab hosts (spark-nodes, b200-nodes); make lab-down removes them"
	@echo "make unit|lint|sanity|molecule|bench   one part"
	@echo "make ee         build the execution environment (execution-environment.yml) on the lab's Debian base and check it"

$(BIN)/.installed: requirements.txt requirements-test.txt
	@echo "==> creating the virtualenv $(VENV) and installing requirements"
	@$(PYTHON) -m venv --help >/dev/null 2>&1 || { echo "==> installing python3-venv"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements-test.txt
	@touch $@

venv: $(BIN)/.installed

docker:
	@scripts/ensure-docker.sh

images: venv docker
	@$(LAB) images

# vLLM's CPU build and the small models it serves (molecule/real_engine); cached by recipe.
real-engine: images
	@$(LAB) real-engine

lab-up: images
	@$(LAB) up --name lab --subnet 172.29.0.0/24 $(LAB_HOSTS) --inventory inventories/lab/hosts.yml

HUB_PID := lab/.state/lab/hfhub.pid

lab-down: venv
	@[ -e $(HUB_PID) ] && kill $$(cat $(HUB_PID)) 2>/dev/null || true
	@$(LAB) down --name lab

# The hub stand-in (weights and tiktoken encodings) on the lab network's gateway.
hub: lab-up
	@$(BIN)/python lab/hfhub/fetch_tiktoken.py
	@$(BIN)/python lab/hfhub/build_wheelhouse.py
	@[ -e $(HUB_PID) ] && kill -0 $$(cat $(HUB_PID)) 2>/dev/null || \
	  $(BIN)/python lab/hfhub/hfhub.py serve --daemon --host $$(cat lab/.state/lab/gateway) --port 18080 \
	    --tiktoken-dir lab/.cache/tiktoken --pidfile $(HUB_PID) --stdout-log lab/.state/lab/hfhub.out

demo: hub
	@echo "==> ansible-playbook site.yml -l spark-nodes"
	$(BIN)/ansible-playbook site.yml -l spark-nodes
	@echo "==> a draft-length sweep on lab-spark-01 (three lengths and the baseline; by default, 1 to 6 and 8)"
	$(BIN)/ansible-playbook playbooks/sweep.yml -l lab-spark-01 -e draft_sweep_instance=gpt-oss-120b \
	  -e '{"draft_sweep_draft_lens": [2, 3, 4]}'
	@echo "==> the fleet view"
	$(BIN)/ansible-playbook playbooks/health.yml
	@echo
	@echo "==> reports: reports/fleet.json (fleet view), reports/rollout-*.json (rollout summaries),"
	@echo "    reports/<run_id>/lab-spark-01-gpt-oss-120b.{md,json,png} (sweep)"
	@echo "==> the lab stays up: 'python3 lab/lab.py status' lists it; 'make lab-down' removes it"

# the slowest at the end of the output: where the suite's time goes
unit: venv
	@echo "==> unit tests"
	$(BIN)/pytest -q --durations=15

lint: venv
	@echo "==> ansible-lint (production profile)"
	$(BIN)/ansible-lint --profile production
	@echo "==> ruff check (pyproject.toml [tool.ruff])"
	$(BIN)/ruff check .
	@echo "==> mypy on plugins/ and extensions/eda/plugins/ (pyproject.toml [tool.mypy])"
	$(BIN)/mypy

sanity: venv
	@echo "==> ansible-test sanity"
	@scripts/sanity.sh

# Every scenario, in two lanes at once (scripts/molecule.py says why and how); or, one after another,
# the ones named: make molecule SCENARIOS="serving sweep"
molecule: images
	@$(BIN)/python scripts/molecule.py $(SCENARIOS)

# Every scenario in two lanes (scripts/molecule.py), the second starting with the other checks: lint,
# sanity and the unit tests one after another, while the real engine and the execution environment build
# (downloads, disk) beside them; so the first lane's scenarios, which mostly wait on their hosts, use the
# CPU the checks leave. On a busy machine the runner takes one lane, the checks first. Each job's output
# is printed whole when it ends.
CHECKS := MAKEFLAGS= $(MAKE) --no-print-directory -j2 --output-sync=target checks real-engine ee

test: venv docker images
	@$(BIN)/python scripts/molecule.py --checks "$(CHECKS)"
	@echo "==> make test: all passed"

# The aarch64 lane, not part of `make test`: the whole DGX Spark converge on an arm64 VM (molecule/aarch64).
# Installs what building the VM needs (mmdebstrap, qemu-user-static), builds its disk and arm64 engine
# emulator (cached by recipe), then runs the scenario. About ten times slower than an x86_64 lab host: record
# each run in bench/HISTORY.md.
test-arm64: images
	@$(LAB) images --arch arm64
	@$(BIN)/python scripts/molecule.py aarch64
	@echo "==> make test-arm64: passed"

checks: venv
	@$(MAKE) --no-print-directory lint
	@$(MAKE) --no-print-directory sanity
	@$(MAKE) --no-print-directory unit

# ansible-builder on the lab's Debian base (no registry needed); ansible-doc inside the image.
ee: images
	@scripts/ee.sh

bench: images
	@for b in bench/*/run.sh; do echo "==> $$b"; bash $$b; done

# (the aarch64 hosts' disk stays: it is cached outside the checkout, docs/LAB.md)
clean: lab-down
	rm -rf lab/.cache lab/.state reports
