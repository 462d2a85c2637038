# syntax=docker/dockerfile:1
#
# ddbworker container image: a static binary on distroless, running as non-root.
#
#   docker build -t ddbworker .
#   docker run --rm ddbworker --help
#
# docker-compose.yml runs it against LocalStack; cmd/ddbworker/compose_test.go
# checks this file (stages, user, build flags) without a Docker engine.

# ---- build -------------------------------------------------------------------
# The tag's Go minor must match go.mod's `go` line (the official images set
# GOTOOLCHAIN=local, so an older patch release cannot fetch a newer toolchain).
FROM golang:1.26-bookworm AS build
WORKDIR /src

# Modules first, in their own layer: it is rebuilt only when go.mod or go.sum
# change, not on every source edit.
COPY go.mod go.sum ./
RUN go mod download && go mod verify

COPY . .
# Static binary (no cgo, so it runs on distroless/static), reproducible paths,
# no symbol table or DWARF. The build cache mount only speeds up rebuilds.
RUN --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w" -o /out/ddbworker ./cmd/ddbworker

# ---- run ---------------------------------------------------------------------
# distroless/static: no shell, no package manager, no libc; the :nonroot tag's
# default user is nonroot (65532).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ddbworker /ddbworker
USER nonroot:nonroot

# Prometheus /metrics, /healthz and /readyz (set --metrics-addr, or
# DDBWORKER_METRICS_ADDR, to 0.0.0.0:9090: the default 127.0.0.1 is unreachable
# from outside the container).
EXPOSE 9090

# No HEALTHCHECK: distroless has no shell, curl or wget to run one with, and
# the binary has no probe subcommand. Let the orchestrator probe
# http://<container>:9090/healthz and /readyz instead (Kubernetes
# liveness/readiness probes, or a sidecar in compose).

ENTRYPOINT ["/ddbworker"]
CMD ["run"]
