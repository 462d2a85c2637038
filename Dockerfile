# syntax=docker/dockerfile:1
#
# ddbworker's own image: the production binary (cmd/ddbworker, the operator
# command line: tables, queues, inbox, dlq, sweep, relay, effects; it
# registers no handlers, so its run refuses; no demo, bench, chaos, send,
# emulators or fault injection, which only internal/dev/cmd/ddbworker-dev
# has) on distroless static, running as non-root.
#
#   docker build -t ddbworker \
#     --build-arg VERSION=v1.4.0 --build-arg REVISION="$(git rev-parse HEAD)" .
#   docker run --rm ddbworker --version
#
# The version reaches `ddbworker --version`, the ddbworker_build_info metric
# and the OCI labels; without VERSION the binary says "(devel)" (.git is not
# in the build context, so go build cannot stamp a version or revision).
#
# `docker build --target dev` builds the development image instead
# (internal/dev/cmd/ddbworker-dev: the example service with the development
# tools, `send` included); it is never the default target.
#
# docker-compose.yml runs the dev image against LocalStack;
# internal/dev/cmd/ddbworker-dev/compose_test.go checks this file (stages,
# build flags, user, environment, labels) without a Docker engine.

# Build arguments: set them with --build-arg; every stage that reads one
# declares it again (ARG without a value takes these defaults).
ARG VERSION="(devel)"
ARG REVISION=""
ARG SOURCE="https://github.com/ddbworker/ddbworker"
# An SPDX expression: the repository's licence (LICENSE).
ARG LICENSES="Apache-2.0"

# ---- build -------------------------------------------------------------------
# The tag's Go minor must match go.mod's `go` line (the official images set
# GOTOOLCHAIN=local, so an older patch release cannot fetch a newer toolchain).
FROM golang:1.26-bookworm AS build
WORKDIR /src

# Modules first, in their own layer: it is rebuilt only when go.mod or go.sum
# change, not on every source edit.
# The repository is a workspace of modules (go.work): every module's go.mod
# and go.sum, for go.work names them all.
COPY go.work go.mod go.sum ./
COPY cmd/ddbworker/go.mod cmd/ddbworker/go.sum ./cmd/ddbworker/
COPY daemon/go.mod daemon/go.sum ./daemon/
COPY ddbworkertest/emulators/go.mod ddbworkertest/emulators/go.sum ./ddbworkertest/emulators/
COPY deploy/go.mod deploy/go.sum ./deploy/
COPY example/go.mod example/go.sum ./example/
COPY internal/daemonext/go.mod internal/daemonext/go.sum ./internal/daemonext/
COPY internal/dev/go.mod internal/dev/go.sum ./internal/dev/
COPY internal/telemetry/go.mod internal/telemetry/go.sum ./internal/telemetry/
COPY lambda/go.mod lambda/go.sum ./lambda/
RUN go mod download && go mod verify

COPY . .
# Static binary (no cgo, so it runs on distroless/static), reproducible paths,
# no symbol table or DWARF, the version in main.version. cmd/ddbworker does
# not link the development tools (internal/dev/cmd/ddbworker-dev does). The build cache
# mount only speeds up rebuilds.
ARG VERSION
ARG REVISION
RUN --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w -X main.version=${VERSION} -X main.revision=${REVISION}" -o /out/ddbworker ./cmd/ddbworker

# ---- development image (docker build --target dev) ---------------------------
# For local traffic against LocalStack (`send`); never deployed.
FROM build AS dev-build
ARG VERSION
ARG REVISION
RUN --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w -X main.version=${VERSION} -X main.revision=${REVISION}" -o /out/ddbworker-dev ./internal/dev/cmd/ddbworker-dev

FROM gcr.io/distroless/static-debian12:nonroot AS dev
COPY --from=dev-build /out/ddbworker-dev /ddbworker
USER nonroot:nonroot
ENV DDBWORKER_METRICS_ADDR=0.0.0.0:9090
EXPOSE 9090
ENTRYPOINT ["/ddbworker"]
CMD ["run"]

# ---- run (the default target: the last stage) ---------------------------------
# distroless/static: no shell, no package manager, no libc; the :nonroot tag's
# default user is nonroot (65532).
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION
ARG REVISION
ARG SOURCE
ARG LICENSES
LABEL org.opencontainers.image.title="ddbworker" \
      org.opencontainers.image.description="Exactly-once effects from SQS into DynamoDB: the ddbworker daemon and operator CLI" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="${LICENSES}"
COPY --from=build /out/ddbworker /ddbworker
USER nonroot:nonroot

# Prometheus /metrics, /healthz and /readyz on every interface of the
# container (the daemon's own default, 127.0.0.1:9090, is unreachable from
# outside it). Override with DDBWORKER_METRICS_ADDR or --metrics-addr.
ENV DDBWORKER_METRICS_ADDR=0.0.0.0:9090
EXPOSE 9090

# No HEALTHCHECK: distroless has no shell, curl or wget to run one with, and
# the binary has no probe subcommand. Let the orchestrator probe
# http://<container>:9090/healthz and /readyz instead (Kubernetes
# liveness/readiness probes, or a sidecar in compose).

ENTRYPOINT ["/ddbworker"]
CMD ["run"]
