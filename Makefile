# muster — see README.md. `make` alone lists the targets.
.DEFAULT_GOAL := help

GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
LDFLAGS := -X github.com/muster-tool/muster/internal/cli.version=$(VERSION)
BIN     := bin/muster
PREFIX  ?= /usr/local

.PHONY: help build test check bench bench-fleet demo deb lab install clean

help: ## list the targets
	@awk 'BEGIN{FS=":.*## "} /^[a-z-]+:.*## /{printf "  %-8s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build bin/muster (static, as the Debian package ships it)
	CGO_ENABLED=$${CGO_ENABLED:-0} $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/muster

test: ## install test tools if missing, then the checks (vet, staticcheck, ...), unit tests with -race, testscripts, and the lab on its own (its containers would hold other tests' mounts)
	./scripts/test-deps.sh
	$(MAKE) check
	PATH="$$PATH:$$($(GO) env GOPATH)/bin" $(GO) test -race -count=1 -timeout 18m -skip '^TestLab$$' ./...
	$(MAKE) lab

check: ## vet, gofmt, staticcheck (installed by scripts/test-deps.sh), man page lint
	$(GO) vet ./...
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo 'gofmt: files above need formatting'; exit 1; }
	"$$($(GO) env GOPATH)/bin/staticcheck" ./...
	@if command -v mandoc >/dev/null; then mandoc -Tlint -Wwarning man/*; else echo 'mandoc not installed: man pages not linted'; fi

bench: ## run the benchmarks behind the README's performance figures
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 2s ./...

bench-fleet: ## run the 100,000-node benchmarks (fleets made once, kept in ~/.cache/muster-bench-fleet); takes about an hour
	MUSTER_BENCH_FLEET=1 $(GO) test -run '^$$' -bench 'AdmitFleet' -benchtime 1x -timeout 3h ./internal/enrol
	MUSTER_BENCH_FLEET=1 $(GO) test -run '^$$' -bench 'DeclareFleet' -benchtime 1x -timeout 3h ./internal/declare
	MUSTER_BENCH_FLEET=1 $(GO) test -run '^$$' -bench 'SyncFleet' -benchtime 1x -timeout 3h ./spool
	MUSTER_BENCH_FLEET=1 MUSTER_REPORT_BENCH=1000000/100000 $(GO) test -run '^$$' -bench 'Report(First|NothingNew|New1Percent)$$' -benchtime 1x -timeout 3h ./internal/fleet

demo: build ## run the whole loop on a directory spool in a temp dir
	./scripts/demo.sh $(BIN)

lab: ## boot a fleet of Debian hosts (root) and run muster's story on them, printing each check
	./scripts/test-deps.sh
	$(GO) test -count=1 -v -timeout 30m -run '^TestLab$$' ./internal/lab

deb: ## build the Debian package into dist/
	./scripts/deb.sh $(VERSION)

install: build ## install the binary, man pages and shell completions under PREFIX
	install -D -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/muster
	for f in man/*.[1-9]; do s=$${f##*.}; install -D -m 0644 $$f $(DESTDIR)$(PREFIX)/share/man/man$$s/$${f##*/}; done
	install -d $(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/zsh/vendor-completions $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d
	$(BIN) completion bash > $(DESTDIR)$(PREFIX)/share/bash-completion/completions/muster
	$(BIN) completion zsh > $(DESTDIR)$(PREFIX)/share/zsh/vendor-completions/_muster
	$(BIN) completion fish > $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/muster.fish

clean: ## remove build output
	rm -rf bin; rm -f dist/*.deb
