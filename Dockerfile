# The terdut-operator image: the operator binary on distroless, non-root (uid 65532).
#   docker build -t terdut-operator:dev .
#
# The binary is glibc-dynamic (x86_64-unknown-linux-gnu), so the runtime base is distroless/cc
# (glibc, libgcc), not distroless/static: the machines this project is built and tested on
# cannot download the musl target, and the image that is tested is the image that ships.
#
# The operator's allocator is jemalloc, linked into the binary (tikv-jemallocator, the
# `terdut-heap` crate): glibc's allocator keeps the pages thousands of passivated actors free,
# jemalloc gives them back after a decay (docs/adr/0010-jemalloc-in-the-image.md). Nothing is
# preloaded; the image runs the binary the tests and the bench run.
#
# Both bases are build arguments. The defaults are the public images, pinned by digest (a tag
# can move; a digest is the bytes): a build of one commit gets the same bases whenever it runs.
# e2e/images/pin-bases.sh moves the pins, on a machine that reaches the registries. A machine
# that reaches no container registry passes the ones e2e/images/bases.sh assembles from
# Debian's packages (the same files, the same nonroot user 65532): `just images` does
# (docs/installation.md).
#
# The build stage is byte for byte the one of e2e/standin/Dockerfile and builds the operator,
# the stand-in and kubectl-terdut, so whichever image is built second reuses it from the layer
# cache instead of compiling again, and `just release` takes the plugin from the same build
# (the `artifacts` stage: `docker build --target artifacts --output type=local,dest=DIR`).
# Needs BuildKit (the default builder since Docker 23; DOCKER_BUILDKIT=1 on 20.10) for the
# cache mounts, which keep the crate downloads and the target directory between builds.
ARG BUILDER=docker.io/library/rust:1.95-bookworm@sha256:6258907abe69656e41cd992e0b705cdcfabcbbe3db374f92ed2d47121282d4a1
ARG RUNTIME=gcr.io/distroless/cc-debian12:nonroot@sha256:9dac0a79194e45a7da0158a9c6da57b217585af0786db3845d1f0ec1a0dd182f

FROM ${BUILDER} AS build
# make, which tikv-jemalloc-sys needs to build the jemalloc linked into the operator (ADR 0010),
# in a layer of its own: a change of the sources does not install it again.
RUN command -v make >/dev/null \
 || { apt-get update -qq && apt-get install -y -qq --no-install-recommends make; }
WORKDIR /src
COPY . .
# rust-toolchain.toml says "stable" with components; the builder's toolchain is the pinned one.
# Cargo judges the workspace's own crates fresh by file times, and COPY keeps the context's: a
# tree edited before another tree's build wrote the shared target cache would look older than
# that build's artifacts and ship them (an image of other sources, seen 2026-12-05). This step
# runs only when the sources changed (else its layer is cached), so every source is touched to
# now first and the workspace's crates are compiled from these sources; dependencies stay cached.
RUN --mount=type=cache,id=terdut-cargo-registry,target=/usr/local/cargo/registry \
    --mount=type=cache,id=terdut-target,target=/src/target \
    find . -path ./target -prune -o -type f -exec touch {} + \
 && rm -f rust-toolchain.toml \
 && cargo build --release --locked -p terdut-operator -p terdut-standin -p kubectl-terdut \
 && install -D -m 0755 target/release/terdut-operator /out/terdut-operator \
 && install -D -m 0755 target/release/terdut-standin /out/terdut-standin \
 && install -D -m 0755 target/release/kubectl-terdut /out/kubectl-terdut

# Every binary the build stage made, for `--output type=local` (the release's kubectl-terdut).
FROM scratch AS artifacts
COPY --from=build /out/ /

FROM ${RUNTIME}
COPY --from=build /out/terdut-operator /terdut-operator
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/terdut-operator"]
