# A static loadproof image for distributed runs (docs/distributed.md): the same binary is the
# coordinator, the workers and the reference servers; linkkeys-server is the LinkKeys reference
# server alone (same flags and output as `loadproof linkkeys server`, about half its resident memory).
#   docker build -t loadproof:dev .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/loadproof ./cmd/linkkeys-server

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/loadproof /out/linkkeys-server /usr/local/bin/
USER nonroot
ENTRYPOINT ["/usr/local/bin/loadproof"]
