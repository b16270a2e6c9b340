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
# Scenarios in the order they build on each other; `molecule test --all` would also work.
SCENARIOS ?= $(shell $(PYTHON) scripts/scenarios.py)
LAB_HOSTS := --host lab-spark-01:spark-nodes --host lab-spark-02:spark-nodes \
             --host lab-b200-01:b200-nodes --host lab-b200-02:b200-nodes

.PHONY: help venv docker images lab-up lab-down demo test unit lint sanity molecule bench clean

help:
	@echo "make demo       bring the lab up and run site.yml -l spark-nodes on it"
	@echo "make test       every test: unit, ansible-lint, ansible-test sanity, molecule"
	@echo "make lab-up     four lab hosts (spark-nodes, b200-nodes); make lab-down removes them"
	@echo "make unit|lint|sanity|molecule|bench   one part"

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

lab-up: images
	@$(LAB) up --name lab --subnet 172.29.0.0/24 $(LAB_HOSTS) --inventory inventories/lab/hosts.yml

lab-down: venv
	@$(LAB) down --name lab

demo: lab-up
	@echo "==> ansible-playbook site.yml -l spark-nodes"
	$(BIN)/ansible-playbook site.yml -l spark-nodes
	@echo
	@echo "==> the lab is up: 'python3 lab/lab.py status' lists it; 'make lab-down' removes it"

unit: venv
	@echo "==> unit tests"
	$(BIN)/pytest -q tests/unit

lint: venv
	@echo "==> ansible-lint (production profile)"
	$(BIN)/ansible-lint --profile production

sanity: venv
	@echo "==> ansible-test sanity"
	@scripts/sanity.sh

molecule: images
	@for s in $(SCENARIOS); do \
	  echo "==> molecule test -s $$s"; \
	  $(BIN)/molecule test -s $$s || exit 1; \
	done

test: unit lint sanity molecule
	@echo "==> make test: all passed"

bench: images
	@for b in bench/*/run.sh; do echo "==> $$b"; bash $$b; done

clean: lab-down
	rm -rf lab/.cache lab/.state reports
