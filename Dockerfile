# terdut-operator image: a static musl binary on distroless, non-root.
#   docker build -t terdut-operator:dev .
FROM rust:1.95-bookworm AS build
# rust-toolchain.toml says "stable" with components; the image's toolchain is the pinned one.
RUN rustup target add x86_64-unknown-linux-musl && apt-get update && apt-get install -y --no-install-recommends musl-tools && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN rm -f rust-toolchain.toml && cargo build --release --locked --target x86_64-unknown-linux-musl -p terdut-operator \
 && cp target/x86_64-unknown-linux-musl/release/terdut-operator /terdut-operator

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /terdut-operator /terdut-operator
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/terdut-operator"]
