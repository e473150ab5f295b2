# voxpipe — `make help` lists the targets.

SHELL    := /usr/bin/env bash
GO       ?= go
BIN      := bin
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
FUZZTIME ?= 10s
BENCHTIME ?= 200ms

# Debian packages for cgo (pocketsphinx, flite, espeak-ng, libopus) and the
# models/test data the tests use, and the knowledge base's default dictionary
# (WordNet, FOLDOC, the Jargon File; llm/knowledge), HAProxy for the
# load-balancer test (internal/scaletest) and Redis for the two-node LiveKit
# test (web/lkagent).
DEB_PACKAGES := libopus-dev libopusfile-dev libpocketsphinx-dev libsphinxbase-dev \
	pocketsphinx-en-us pocketsphinx-testdata flite1-dev libespeak-ng-dev espeak-ng \
	libspeexdsp-dev sox pkg-config gcc chromium nodejs wordnet-base dict-foldoc dict-jargon haproxy redis-server
# The browser test drives Debian's Chromium with playwright-core (which never
# downloads a browser of its own).
BROWSER_TEST_DIR := web/testdata/browser
# and the LiveKit room test drives it with livekit-client (web/lkagent).
LK_BROWSER_TEST_DIR := web/lkagent/testdata/browser
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.DEFAULT_GOAL := help
.PHONY: help deps browser-deps livekit-server build run test test-nocgo bench bench-go fuzz soak clean train-deps train-data train-demo train-draft train-bench-pair train-eou

help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | \
		awk 'BEGIN {FS = ":.*## "} {printf "  %-11s %s\n", $$1, $$2}'

deps: ## install the Debian packages the build needs (only the missing ones)
	@missing=""; \
	for p in $(DEB_PACKAGES); do \
		dpkg-query -W -f='$${Status}' "$$p" 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -z "$$missing" ]; then echo "deps: all present"; \
	else echo "deps: installing$$missing"; \
		$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing; \
	fi

build: ## build bin/voxpipe, bin/voxclient, bin/voxbench and bin/voxllm
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/voxpipe ./cmd/voxclient ./cmd/voxbench ./cmd/voxllm

run: deps build ## serve on 127.0.0.1:8080 with configs/default.yaml (offline engines)
	$(BIN)/voxpipe serve --config configs/default.yaml

browser-deps: ## npm packages of the browser test (playwright-core; Chromium comes from Debian)
	@command -v npm >/dev/null || $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends npm
	@if [ ! -d $(BROWSER_TEST_DIR)/node_modules/playwright-core ]; then \
		cd $(BROWSER_TEST_DIR) && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund \
		|| echo "warning: npm ci failed; the browser tests will skip"; \
	fi
	@if [ ! -d $(LK_BROWSER_TEST_DIR)/node_modules/livekit-client ]; then \
		cd $(LK_BROWSER_TEST_DIR) && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund \
		|| echo "warning: npm ci failed; the LiveKit browser test will skip"; \
	fi

# livekit-server for the LiveKit agent tests (web/lkagent), built from its Go
# module at a pinned version: v1.13.5 is the newest whose go.mod replaces no
# module with livekit's pion forks, which the module proxy does not serve.
# Built once per version into build/ (keep LiveKitVersion in
# web/lkagent/livekit_test.go equal); the tests skip when it is absent.
LIVEKIT_VERSION := v1.13.5
LIVEKIT_DIR := build/livekit-server-$(LIVEKIT_VERSION)

livekit-server: ## build livekit-server (pinned) into build/ for the LiveKit agent tests
	@if [ -x $(LIVEKIT_DIR)/livekit-server ]; then echo "livekit-server $(LIVEKIT_VERSION): present"; \
	else mkdir -p $(LIVEKIT_DIR) && \
		GOBIN=$(CURDIR)/$(LIVEKIT_DIR) $(GO) install -trimpath github.com/livekit/livekit-server/cmd/server@$(LIVEKIT_VERSION) && \
		mv $(LIVEKIT_DIR)/server $(LIVEKIT_DIR)/livekit-server \
		|| echo "warning: livekit-server not built; the LiveKit agent tests will skip"; \
	fi

test: deps browser-deps livekit-server lint ## golangci-lint, go vet, then every test with the race detector
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 20m ./...

test-nocgo: ## vet and test without cgo (engines' tests skip)
	CGO_ENABLED=0 $(GO) vet ./...
	CGO_ENABLED=0 $(GO) test -count=1 ./...

bench-go: deps ## Go micro-benchmarks, short, with allocations (BENCHTIME=200ms)
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./...

# make bench: voxbench against a server started here on the default config,
# then the Go micro-benchmarks; both go into docs/performance.md.
# --same-questions: every session asks the 1-session level's questions in its
# order, so "transcript worse than at 1 session" compares the same recording
# after the same earlier turns (docs/performance.md).
BENCH_ADDR     ?= 127.0.0.1:18790
BENCH_SESSIONS ?= 1,2,4,8
BENCH_TURNS    ?= 3
BENCH_OUT      := build/bench
# The voice path's micro-benchmarks (the LLM engine has voxpipe llm bench);
# BENCH_PKGS=./... runs them all.
BENCH_PKGS     ?= ./pipeline/... ./web/... ./asr/... ./tts/... ./cmd/...
bench: deps build ## capacity: voxbench at 1,2,4,8 sessions + Go benchmarks → docs/performance.md
	@mkdir -p $(BENCH_OUT)
	@$(BIN)/voxpipe serve --config configs/default.yaml --addr $(BENCH_ADDR) --set log.level=warn \
		> $(BENCH_OUT)/server.log 2>&1 & pid=$$!; trap 'kill $$pid 2>/dev/null; wait $$pid' EXIT; \
	for i in $$(seq 120); do curl -sf http://$(BENCH_ADDR)/healthz >/dev/null && break; sleep 1; done; \
	$(BIN)/voxbench --url ws://$(BENCH_ADDR)/ws --sessions $(BENCH_SESSIONS) --turns $(BENCH_TURNS) \
		--same-questions --json --plot $(BENCH_OUT)/latency.svg > $(BENCH_OUT)/voxbench.json
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) $(BENCH_PKGS) > $(BENCH_OUT)/gobench.txt
	$(BIN)/voxbench doc --results $(BENCH_OUT)/voxbench.json --gobench $(BENCH_OUT)/gobench.txt \
		--version $(VERSION) --out docs/performance.md
	@echo "bench: docs/performance.md updated; plot in $(BENCH_OUT)/latency.svg"

fuzz: deps ## every fuzz target for FUZZTIME each (default 10s)
	@set -e; for pkg in $$($(GO) list ./...); do \
		for target in $$($(GO) test -list '^Fuzz' "$$pkg" | grep '^Fuzz' || true); do \
			echo "fuzz $$pkg $$target"; \
			$(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) "$$pkg"; \
		done; \
	done

SOAK_DURATION ?= 10m
SOAK_SESSIONS ?= 16
soak: build ## not part of test: SOAK_SESSIONS (16) devices for SOAK_DURATION (10m) against a server started on loopback, with drops + resume, barge-ins, a stalled reader and malformed frames; goroutines, open files and RSS at start and end
	$(BIN)/voxbench soak --server $(BIN)/voxpipe --sessions $(SOAK_SESSIONS) --duration $(SOAK_DURATION) --server-log $(BIN)/soak-server.log

# golangci-lint v2 (.golangci.yml), installed into bin/ by go install from
# the module proxy the first time (several minutes: it builds from source).
GOLANGCI_LINT_VERSION ?= v2.15.0
GOLANGCI_LINT := $(BIN)/golangci-lint

$(GOLANGCI_LINT):
	GOBIN=$(CURDIR)/$(BIN) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

lint: $(GOLANGCI_LINT) ## golangci-lint (errorlint, gosec, bodyclose, contextcheck, noctx, staticcheck, ...)
	$(GOLANGCI_LINT) run ./...

# The demo models (models/README.md): corpus from Debian dictionaries, trained
# with PyTorch where CUDA is (TRAIN_PY), then quantized by the engine's tool.
TRAIN_DEBS  := wordnet-base dict-foldoc dict-jargon fortunes fortunes-min python3
TRAIN_PY    ?= python3

train-deps: ## install the Debian packages the demo model's corpus comes from
	@$(MAKE) --no-print-directory deps DEB_PACKAGES="$(TRAIN_DEBS)"

# The grounded corpus (llm/train/grounding.py): prepare.py's dialogues, a share of them with the
# passages the server retrieves put before the question, made by the server's own code.
GROUND_DIR := build/grounding
# Tool-calling dialogues (llm/train/tools.py: time, timers, volume) with the passages the server
# retrieves for them; their held-out frames become $(TOOLS_DIR)/eval-*.jsonl for cmd/tooleval.
TOOLS_DIR  := build/tools

train-data: train-deps build ## the demo model's corpus, grounded in the knowledge base, with tool calls (build/train-data-tools)
	python3 llm/train/prepare.py --out build/train-data --seed 1234
	python3 llm/train/grounding.py questions --data build/train-data --work $(GROUND_DIR) --seed 1234
	$(BIN)/voxpipe knowledge query --json --augment --file $(GROUND_DIR)/questions.txt > $(GROUND_DIR)/answers.jsonl
	python3 llm/train/grounding.py apply --data build/train-data --work $(GROUND_DIR) --out build/train-data-grounded --seed 1234
	python3 llm/train/tools.py questions --data build/train-data-grounded --raw build/train-data --work $(TOOLS_DIR) --seed 1234
	$(BIN)/voxpipe knowledge query --json --augment --file $(TOOLS_DIR)/questions.txt > $(TOOLS_DIR)/answers.jsonl
	python3 llm/train/tools.py apply --data build/train-data-grounded --raw build/train-data --work $(TOOLS_DIR) --out build/train-data-tools --seed 1234

# The target only, on the grounded corpus, with the shipped model's tokenizer (so the draft and
# prompt lookup keep working); written as Q8_0 by PyTorch (byte-identical to `voxpipe llm quantize`).
TARGET_FLAGS ?= --target-steps 1600 --target-seconds 120 --dropout 0.1

train-demo: train-data ## retrain models/voxpipe-demo-q8_0.gguf (corpus here; training needs PyTorch+CUDA+tokenizers)
	$(TRAIN_PY) llm/train/train.py --data build/train-data-tools --out build/models --seed 1234 --models target \
		--tokenizer models/voxpipe-demo-q8_0.gguf --dtype q8_0 --tool-format compact $(TARGET_FLAGS)
	cp build/models/voxpipe-target-q8_0.gguf models/voxpipe-demo-q8_0.gguf
	$(BIN)/voxpipe eval answers --file internal/bench/testdata/answers-everyday.jsonl --file internal/bench/testdata/answers-smalltalk.jsonl
	$(GO) run ./cmd/tooleval --file internal/tooleval/testdata/tools-heldout.jsonl --file $(TOOLS_DIR)/eval-tools.jsonl --file $(TOOLS_DIR)/eval-negatives.jsonl

# The draft distilled from the shipped target (models/README.md): the target's
# greedy answers and soft labels teach the draft (llm/train/distill.py, CUDA).
DISTILL_FLAGS ?= --steps 3500 --seconds 170 --dtype f16 --shape draft

train-draft: train-deps build ## distil the draft model from the shipped target (corpus here; distillation needs PyTorch+CUDA+tokenizers)
	python3 llm/train/prepare.py --out build/train-data --seed 1234
	$(TRAIN_PY) llm/train/distill.py --data build/train-data --target models/voxpipe-demo-q8_0.gguf --out build/distill --seed 1234 $(DISTILL_FLAGS)
	$(BIN)/voxpipe llm quantize build/distill/voxpipe-draft0-f16.gguf models/voxpipe-demo-draft-q8_0.gguf --type q8_0
	$(BIN)/voxpipe llm eval --model models/voxpipe-demo-q8_0.gguf --draft models/voxpipe-demo-draft-q8_0.gguf --file build/train-data/valid.jsonl

# A memory-bound benchmark pair for speculative decoding (models/README.md, "Bench pair"): a 56.6M
# target ("bench" in train.py's SHAPES, the demo's tokenizer) and a draft distilled from its Q8_0
# weights, both written as Q8_0 by PyTorch. Not shipped: the files stay in $(BENCH_DIR).
BENCH_DIR           ?= build/bench-pair
BENCH_TRAIN_FLAGS   ?= --target-steps 1600 --target-seconds 190 --lr 1e-3 --dropout 0.2 --eval-every 125 --patience 4
BENCH_DISTILL_FLAGS ?= --steps 3500 --seconds 160 --fit

train-bench-pair: train-deps build ## train the bench target and distil its draft into build/bench-pair (needs PyTorch+CUDA+tokenizers)
	python3 llm/train/prepare.py --out build/train-data --seed 1234
	$(TRAIN_PY) llm/train/train.py --data build/train-data --out $(BENCH_DIR)/target --seed 1234 --models bench --tokenizer models/voxpipe-demo-q8_0.gguf --dtype q8_0 $(BENCH_TRAIN_FLAGS)
	$(TRAIN_PY) llm/train/distill.py --data build/train-data --target $(BENCH_DIR)/target/voxpipe-bench-q8_0.gguf --out $(BENCH_DIR)/draft --seed 1234 --shape draft --dtype q8_0 --name voxpipe-bench-draft $(BENCH_DISTILL_FLAGS)
	cp $(BENCH_DIR)/target/voxpipe-bench-q8_0.gguf $(BENCH_DIR)/voxpipe-bench-q8_0.gguf
	cp $(BENCH_DIR)/draft/voxpipe-draft0-q8_0.gguf $(BENCH_DIR)/voxpipe-bench-draft-q8_0.gguf
	$(BIN)/voxpipe llm eval --model $(BENCH_DIR)/voxpipe-bench-q8_0.gguf --draft $(BENCH_DIR)/voxpipe-bench-draft-q8_0.gguf --file build/train-data/valid.jsonl --limit 200
	$(BIN)/voxpipe llm eval --model $(BENCH_DIR)/voxpipe-bench-q8_0.gguf --draft $(BENCH_DIR)/voxpipe-bench-draft-q8_0.gguf --file $(BENCH_DIR)/draft/heldout-target.jsonl

# The end-of-utterance scorer (pipeline/turn, models/README.md): recogniser-form utterances,
# complete vs cut off at every word (llm/train/eou.py, CUDA). It is fine-tuned from the scorer before
# it (EOU_BASE's file, from git history: the demo draft fine-tuned on older data), then averaged with
# that base in weight space (EOU_SOUP of the base), which keeps the base's confidence on read and
# misrecognised sentences. The base file stays the n-best rescoring model (models/voxpipe-rescore-q8_0.gguf).
# The recogniser's own text (`voxpipe bench eou-speech`, about 25 min on 2 cores) is one more source:
# utterances of the data spoken by flite and espeak-ng, paused once, through pocketsphinx.
EOU_BASE  ?= 395b67e
EOU_FLAGS ?= --steps 1472 --seconds 3600 --ambiguous 0.5 --ambiguous-min-words 3
EOU_SOUP  ?= 0.25
EOU_SPEECH = --speech build/eou-data/eou-speech-train.jsonl --speech-valid build/eou-data/eou-speech-valid.jsonl

train-eou: train-deps build ## rebuild models/voxpipe-eou-q8_0.gguf (corpus here; training needs PyTorch+CUDA+tokenizers)
	python3 llm/train/prepare.py --out build/train-data --seed 1234
	python3 llm/train/eou.py prepare --data build/train-data --out build/eou-data --seed 1234
	python3 llm/train/eou.py speech-texts --data build/eou-data --out build/eou-data --seed 1234
	$(BIN)/voxpipe bench eou-speech --in build/eou-data/eou-speech-valid.tsv --out build/eou-data/eou-speech-valid.jsonl --seed 7
	$(BIN)/voxpipe bench eou-speech --in build/eou-data/eou-speech-train.tsv --out build/eou-data/eou-speech-train.jsonl --seed 1234
	git show $(EOU_BASE):models/voxpipe-eou-q8_0.gguf > build/eou-base-q8_0.gguf
	$(TRAIN_PY) llm/train/eou.py train --data build/eou-data --init build/eou-base-q8_0.gguf --out build/eou --seed 1234 $(EOU_FLAGS) $(EOU_SPEECH)
	python3 llm/train/eou.py soup --base build/eou-base-q8_0.gguf --tuned build/eou/voxpipe-eou-f16.gguf --alpha $(EOU_SOUP) --out build/eou/voxpipe-eou-soup-f16.gguf
	$(BIN)/voxpipe llm quantize build/eou/voxpipe-eou-soup-f16.gguf models/voxpipe-eou-q8_0.gguf --type q8_0

clean: ## remove build outputs
	rm -rf $(BIN)

# Real-speech sets for `voxpipe bench asr` (docs/asr.md): recordings that
# Debian packages ship, written to build/asrsets (never committed).
ASR_SET_DEBS := pocketsphinx-testdata asterisk-core-sounds-en asterisk-core-sounds-en-wav \
	asterisk-core-sounds-en-g722 alsa-utils libspandsp-dev gcc
.PHONY: asr-sets bench-asr
asr-sets: ## real-speech ASR sets from Debian packages into build/asrsets
	@$(MAKE) --no-print-directory deps DEB_PACKAGES="$(ASR_SET_DEBS)"
	@mkdir -p build
	gcc -O2 -o build/g722dec cgo/g722dec/g722dec.c -lspandsp
	$(GO) run ./cmd/voxpipe bench asr-sets --out build/asrsets --g722dec build/g722dec

bench-asr: asr-sets ## WER and final latency of the default config on build/asrsets
	$(GO) run ./cmd/voxpipe bench asr --dir build/asrsets
