# syntax=docker/dockerfile:1
# switchboard: one static binary that runs the operator (`switchboard operator`) or the /v1 API
# server (`switchboard server`). Build: docker build --build-arg VERSION=$(git describe --tags)
# --build-arg REVISION=$(git rev-parse HEAD) -t REGISTRY/switchboard:TAG .

FROM golang:1.26 AS build
ARG TARGETOS=linux
ARG TARGETARCH=amd64
ARG VERSION=dev
ARG REVISION=unknown
WORKDIR /src
# Dependencies first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
# test/dockerfile_test.go runs this very command, so keep it on one line.
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath -tags nodev -ldflags "-s -w -X github.com/switchboard-dev/switchboard/internal/version.Version=${VERSION} -X github.com/switchboard-dev/switchboard/internal/version.Commit=${REVISION}" -o /out/switchboard ./cmd/switchboard

# `make image` assembles the same image without Docker (internal/local/image); test/dockerfile keeps
# the two in agreement: this stage's labels, user and entrypoint, and the build line above.
FROM gcr.io/distroless/static:nonroot
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="switchboard"
LABEL org.opencontainers.image.source="https://github.com/switchboard-dev/switchboard"
LABEL org.opencontainers.image.version="${VERSION}"
LABEL org.opencontainers.image.revision="${REVISION}"
LABEL org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/switchboard /switchboard
USER 65532:65532
ENTRYPOINT ["/switchboard"]
