# A static loadproof image for distributed runs (docs/distributed.md): the same binary is the
# coordinator, the workers and the reference servers.
#   docker build -t loadproof:dev .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w" -o /out/loadproof ./cmd/loadproof

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/loadproof /usr/local/bin/loadproof
USER nonroot
ENTRYPOINT ["/usr/local/bin/loadproof"]
