GO ?= go
BIN := bin/agentbox

.PHONY: build test vet bench clean

build:
	$(GO) build -o $(BIN) ./cmd/agentbox

vet:
	$(GO) vet ./...
	GOOS=darwin $(GO) vet ./...
	GOOS=windows $(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }

test: build vet
	./scripts/test.sh

bench: build
	./bench/run.sh

clean:
	rm -rf bin
