# Multi-stage build: compile and test on Debian with the -dev packages, ship a slim runtime image.
FROM debian:bookworm AS build
WORKDIR /src
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN bash scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
 && cmake --build /build \
 && (cd /build && ctest --output-on-failure -L unit)

FROM debian:bookworm-slim AS runtime
RUN apt-get update \
 && apt-get install -y --no-install-recommends libcurl4 libjansson4 libyaml-0-2 libuv1 \
      libmicrohttpd12 libssl3 ca-certificates \
 && rm -rf /var/lib/apt/lists/*
# The operator binary is added to this stage when it exists; today the image carries the tested
# client library's build tree only for inspection.
COPY --from=build /build/libkube.a /usr/local/lib/libkube.a
USER 1000:1000
