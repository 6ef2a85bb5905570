# podmedic — every target works on a fresh machine: `install` builds .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PACKAGES := podmedic podmedic_sim workflows activities workers benchmarks

.PHONY: install demo test check fuzz mutants lint image image-tools clean

install: $(STAMP)

# Bytecode is compiled once: with PYTHONDONTWRITEBYTECODE set, the workflow sandbox would
# otherwise compile every module from source for every new incident.
$(STAMP): pyproject.toml deploy/helm/fetch_helm.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,sim]'
	$(BIN)/python -m compileall -q -j 0 $(VENV)/lib $(PACKAGES) >/dev/null
	$(BIN)/python deploy/helm/fetch_helm.py $(BIN)/helm
	touch $(STAMP)

demo: install
	$(BIN)/podmedic demo

# The image's smoke test (tests/image) runs when the Debian tools are here: installed as root, else skipped.
test: install image-tools
	$(BIN)/pytest -q -m "not slow"

# The edit loop: lint, then the unit, workflow (time-skipping server) and fidelity tests. make test stays the gate.
check: lint
	$(BIN)/pytest -q -m "not slow" tests/unit tests/workflow tests/fidelity

# The long property-based runs (10,000 generated cases each).
fuzz: install
	$(BIN)/pytest -q -m slow

# Each README claim's tests, run with a bug that breaks the claim (tests/mutants/catalog.py): all must fail.
mutants: install
	$(BIN)/python -m tests.mutants --json bench/results/mutants.json

# ruff, mypy --strict, and the import contracts of pyproject.toml ([tool.importlinter]).
lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy $(PACKAGES)
	$(BIN)/mypy deploy/image/build.py deploy/image/oci.py deploy/image/sbom.py deploy/helm/fetch_helm.py
	$(BIN)/lint-imports

# The container image from Debian packages and the locked wheels, without Docker (deploy/image/build.py):
# build/image/podmedic-VERSION.oci.tar, its CycloneDX SBOM, and image.json with the digest.
image: install image-tools
	$(BIN)/python deploy/image/build.py

# mmdebstrap builds the image; podman and runc run it (the smoke test). apt-get installs them as root.
IMAGE_TOOLS := mmdebstrap podman runc
image-tools:
	@missing=""; for t in $(IMAGE_TOOLS); do command -v $$t >/dev/null || [ -x /usr/sbin/$$t ] || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing$$missing (Debian packages for make image)"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends$$missing >/dev/null) \
	      || echo "could not install$$missing: the image test will be skipped"; \
	  else echo "missing$$missing (Debian packages): make image needs them; the image test will be skipped"; fi; \
	fi

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache state build
