GO ?= go
BIN := bin/agentbox
# No cgo (house rule): static binaries, which also start faster — no dynamic loader, and the
# runtime's threads without libc's (see docs/benchmarks.md).
export CGO_ENABLED := 0

.PHONY: build test vet bench clean package

# The CLI, the daemon binary it runs, and the box helper the daemon starts boxes from.
build:
	$(GO) build -o $(dir $(BIN)) ./cmd/agentbox ./cmd/agentbox-daemon ./cmd/agentbox-box

vet:
	$(GO) vet ./...
	GOOS=darwin $(GO) vet ./...
	GOOS=windows $(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }

test: build vet
	./scripts/test.sh

bench: build
	./bench/run.sh

# package builds dist/agentbox_$(VERSION)_<arch>.deb with nfpm (packaging/nfpm.yaml): the binary,
# man pages and shell completions generated from the CLI, the systemd units, the AppArmor
# profile and the example policy. No vendor binary goes in it.
VERSION ?= 0.1.0~dev
NFPM ?= $(GO) run github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2
PKGROOT := dist/pkgroot

package:
	rm -rf $(PKGROOT) && mkdir -p $(PKGROOT)
	$(GO) build -ldflags "-X github.com/agentbox/agentbox/internal/cli.Version=$(VERSION)" -o $(PKGROOT)/ ./cmd/agentbox ./cmd/agentbox-daemon ./cmd/agentbox-box
	SOURCE_DATE_EPOCH=$${SOURCE_DATE_EPOCH:-$$(git log -1 --format=%ct 2>/dev/null || echo 0)} $(GO) run ./packaging/gendocs -out $(PKGROOT)
	rm -f dist/agentbox_*.deb
	VERSION='$(VERSION)' GOARCH=$$($(GO) env GOARCH) SOURCE_DATE_EPOCH=$${SOURCE_DATE_EPOCH:-$$(git log -1 --format=%ct 2>/dev/null || echo 0)} \
		$(NFPM) package -f packaging/nfpm.yaml -p deb -t dist/
	@ls -l dist/*.deb

clean:
	rm -rf bin dist
