# The operator's image: built and checked on Debian with the -dev packages, shipped on Debian slim
# with only the runtime libraries, running as a non-root user. One image serves the operator
# (entrypoint), the validation pods (gpu-validator) and the image-prepull pods (gpu-operator-hold,
# static: they copy it into the images they pull); it carries states/ and the CRD.
# scripts/check-dockerfile.sh (a unit test) checks what can be checked without a Docker engine.
FROM debian:bookworm AS build
WORKDIR /src
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN bash scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY scripts/min-deps.sh scripts/min-deps.sh
# libcurl (HTTP/HTTPS, HTTP/2) and libmicrohttpd (HTTP) with only what the operator uses, linked
# statically: Debian's carry GnuTLS, Kerberos, LDAP, SSH and more into every process.
RUN mkdir -p /deps && KC_DEPS_CACHE=/deps bash scripts/min-deps.sh >/deps/prefix
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_TESTS=OFF \
      -DKC_MIN_DEPS="$(cat /deps/prefix)" \
 && cmake --build /build --target gpu-operator gpu-validator gpu-operator-hold \
 && strip /build/gpu-operator /build/gpu-validator /build/gpu-operator-hold \
 && /build/gpu-operator --help >/dev/null

FROM debian:bookworm-slim AS runtime
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="gpu-operator" \
      org.opencontainers.image.description="Kubernetes GPU operator: a drop-in for NVIDIA's GPU Operator (ClusterPolicy nvidia.com/v1)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN apt-get update \
 && apt-get install -y --no-install-recommends libjansson4 libyaml-0-2 libuv1 libssl3 \
      libnghttp2-14 zlib1g ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /build/gpu-operator /usr/bin/gpu-operator
COPY --from=build /build/gpu-validator /usr/bin/gpu-validator
COPY --from=build /build/gpu-operator-hold /usr/bin/gpu-operator-hold
COPY states /opt/gpu-operator/states
COPY crds/nvidia.com_clusterpolicies.yaml /opt/gpu-operator/crds/nvidia.com_clusterpolicies.yaml
USER 1000:1000
ENTRYPOINT ["/usr/bin/gpu-operator"]
